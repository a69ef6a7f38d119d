"""Measurements behind the threshold readings (threshold.py): each setting's theory (Delta delta,
L* = 1/(Delta delta), the initial loss, lambda_max at Q = 0), the runs of P4a and P4d and the
population-optimum crossings of P4c. The settings are the one Delta protocol's (threshold_delta.py).

Every built-in class is f = L g, so the loss at L is L^2 times the loss at L = 1 (docs/CLAIMS_METHOD.md):
the settings' quantities are computed once at L = 1 and scaled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...config import Config
from ...experiments.runner import Context, run_group, with_overrides
from ...optimum import Crossing, ScoreObjective, attention_crossing
from ...problem import build_problem
from ...theory import hessian_top_eigenvalue_at_init, theory_of

# P4c only: how L_tau moves with tau, N and K (orthonormal, linear)
VARIATIONS: list[tuple[str, list[str], float]] = [
    ("orth-linear-tau0.5", [], 0.5),
    ("orth-linear-N20", ["prompt.N=20"], 1.0),
    ("orth-linear-N200", ["prompt.N=200"], 1.0),
    ("orth-linear-K3-d8", ["features.K=3", "features.d=8"], 1.0),
    ("orth-linear-K8-d8", ["features.K=8", "features.d=8"], 1.0),
]
TAU = 1.0  # label noise of the P4c settings
LEVEL = 0.5  # P4c: min_k Attn_k at the optimum crosses 1/2


@dataclass
class Setting:
    name: str
    cfg: Config  # at L = 1
    Delta: float  # Δ
    delta: float  # δ
    L_star: float  # L* = 1 / (Δ δ)
    loss0: float  # the initial loss at L = 1 (uniform scores), no label noise: ℓ₀
    lam1: float  # λ_max of the Hessian at Q = 0, at L = 1 (λ_max(L) = L² λ₁)
    objective: ScoreObjective = field(repr=False)

    @property
    def dd(self) -> float:
        return self.Delta * self.delta


def make_setting(name: str, cfg: Config) -> Setting:
    cfg = with_overrides(cfg, ["task.L=1", f"name={name}"])
    problem = build_problem(cfg)
    th = theory_of(problem)
    obj = ScoreObjective(problem)
    lam = hessian_top_eigenvalue_at_init(problem, iters=40).value
    return Setting(name, cfg, th.Delta, th.delta, th.L_star, obj.initial_loss(1.0), lam, obj)


# ----------------------------------------------------------------------------- P4a: relative eps, small steps


RELATIVE_MARGIN = 3.0  # P4a: a run's budget is this many times the largest-L run's rescaled time


def relative_runs(ctx: Context, settings: list[Setting]) -> dict[str, list]:
    """Per setting, GD at L / L* in the size's factors, one step size eta = 0.2 / (lambda_1 L_max^2) (a
    tenth of the largest stable step at the largest L: small steps), stopping at loss <= eps_rel x the
    initial loss. Budgets in rescaled time: the largest-L runs go first (step cap ``thr_steps``); every
    other run gets RELATIVE_MARGIN x that run's rescaled time eta L^2 T_eps, divided by its own eta L^2,
    so a run censored at its budget is more than RELATIVE_MARGIN x slower in rescaled time."""
    S = ctx.sizes
    # the lead runs record every step: P4b predicts absolute-eps times from their loss curves
    first = {st.name: with_overrides(_relative_config(ctx, st, max(S.thr_L_factors), S.thr_steps),
                                     ["train.log_every=1"]) for st in settings}
    lead_runs = run_group(ctx, "threshold-relative-lead", list(first.values()), "P4a relative eps, largest L")
    lead = dict(zip(first, lead_runs, strict=True))
    configs, owner = [], []
    for st in settings:
        s_ref = rescaled_time(lead[st.name])
        for f in [f for f in S.thr_L_factors if f != max(S.thr_L_factors)]:
            cfg = _relative_config(ctx, st, f, S.thr_steps)
            if s_ref is not None:
                steps = math.ceil(RELATIVE_MARGIN * s_ref / (cfg.train.lr * cfg.task.L**2))
                cfg = with_overrides(cfg, [f"train.steps={steps}"])
            configs.append(cfg)
            owner.append(st.name)
    runs = run_group(ctx, "threshold-relative", configs, "P4a relative eps")
    out: dict[str, list] = {st.name: [] for st in settings}
    for name, r in zip(owner, runs, strict=True):
        out[name].append(r)
    for st in settings:
        out[st.name].append(lead[st.name])
    return out


def _relative_config(ctx: Context, st: Setting, factor: float, steps: int) -> Config:
    S = ctx.sizes
    L_max = max(S.thr_L_factors) * st.L_star
    eta = 0.2 / (st.lam1 * L_max**2)  # η, fixed across L in this setting
    return with_overrides(st.cfg, [
        f"task.L={factor * st.L_star:.8g}", f"train.lr={eta:.8g}", "train.eps_mode=relative",
        f"train.eps={S.thr_eps_rel}", f"train.steps={steps}", f"train.log_every={S.thr_log_every}",
        f"name={st.name}-rel-{factor:g}Lstar"])


def rescaled_time(run) -> float | None:
    """s = eta L^2 T_eps: the rescaled time, the same for every L when the steps are small."""
    T = run.summary["T_eps"]
    return None if T is None else run.config.train.lr * run.config.task.L**2 * T


# ----------------------------------------------------------------------------- P4c: the optimum's crossing


def crossing_of(ctx: Context, st: Setting, tau: float) -> Crossing:
    """L_tau where min_k Attn_k at the population optimum crosses 1/2 (bisection over [L*/30, 30 L*] x tau)."""
    return attention_crossing(st.objective, tau, st.L_star * tau / 30, 30 * st.L_star * tau, LEVEL,
                              iters=ctx.sizes.thr_bisect)


def variation_settings(ctx: Context, base: Config) -> list[tuple[Setting, float]]:
    if not ctx.sizes.thr_variations:
        return []
    return [(make_setting(name, with_overrides(base, ov)), tau) for name, ov, tau in VARIATIONS]


# ----------------------------------------------------------------------------- P4d: fixed step size


@dataclass
class StepChange:
    L_x: float | None  # geometric middle of the final bracket (None when not bracketed)
    lo: float
    hi: float
    history: list[tuple[float, float, bool]]  # (L, T_eps (inf: unstable or slowed down), changed)
    censored: int = 0  # runs stopped by the size's step cap before 4x the small-step time


def _changed(run, s_ref: float) -> tuple[float, bool]:
    """T_eps, and whether GD changed behaviour: unstable (diverged, or the loss rose), saturated in one step
    (T_eps <= 1), or off the small-step trajectory: R = eta L^2 T_eps / s_ref outside [1/2, 2] (a run still
    short of eps at 4x the small-step time s_ref / (eta L^2) has R > 4)."""
    loss = run.series("loss").to_numpy()
    rises = bool(np.any(np.diff(loss) > 1e-9 * np.abs(loss[1:])))
    T = run.summary["T_eps"]
    if run.summary["status"] == "diverged" or rises or T is None:
        return math.inf, True
    R = rescaled_time(run) / s_ref
    return float(T), T <= 1 or not (0.5 <= R <= 2.0)


def step_size_changes(ctx: Context, settings: list[Setting], s_ref: dict[str, float | None], eta: float
                      ) -> tuple[dict[str, StepChange], list]:
    """Per setting, bisect on log L in [L_d / 4, 4 L_d] (L_d = sqrt(2 / (eta lambda_1)), where eta = eta_max
    at Q = 0) for the L at which GD at the fixed step eta changes behaviour; all settings' runs of one
    bisection step go as one group. Only settings with a small-step time s_ref take part."""
    S = ctx.sizes
    live = {st.name: st for st in settings if s_ref.get(st.name)}
    brackets = {n: [math.sqrt(2 / (eta * st.lam1)) / 4, 4 * math.sqrt(2 / (eta * st.lam1))] for n, st in live.items()}
    hist: dict[str, list] = {n: [] for n in live}
    censored = dict.fromkeys(live, 0)
    state: dict[str, bool | None] = {}
    all_runs = []
    for it in range(S.thr_stab_bisect + 2):
        points = {}
        for n, (lo, hi) in brackets.items():
            if it < 2 or state.get(n):
                points[n] = (lo, hi)[it] if it < 2 else math.sqrt(lo * hi)
        if not points:
            break
        configs = [_fixed_step_config(live[n], L, eta, s_ref[n], S, it) for n, L in points.items()]
        runs = run_group(ctx, f"threshold-step-{it}", configs, f"P4d fixed step ({it + 1})")
        all_runs.extend(runs)
        for (n, L), run in zip(points.items(), runs, strict=True):
            T, changed = _changed(run, s_ref[n])
            hist[n].append((L, T, changed))
            cap = run.config.train.steps < int(4 * s_ref[n] / (eta * L**2)) + 2
            censored[n] += int(cap and run.summary["status"] == "budget")
            if it == 0:
                state[n] = not changed  # the lower end must be unchanged
            elif it == 1:
                state[n] = bool(state[n]) and changed  # and the upper end changed
            else:
                brackets[n][1 if changed else 0] = L
    out = {}
    for n, (lo, hi) in brackets.items():
        ok = bool(state.get(n))
        out[n] = StepChange(math.sqrt(lo * hi) if ok else None, lo, hi, sorted(hist[n]), censored[n])
    return out, all_runs


def _fixed_step_config(st: Setting, L: float, eta: float, s_ref: float, S, it: int) -> Config:
    steps = max(2, min(S.thr_steps, int(4 * s_ref / (eta * L**2)) + 2))
    return with_overrides(st.cfg, [
        f"task.L={L:.8g}", f"train.lr={eta:g}", "train.eps_mode=relative", f"train.eps={S.thr_eps_rel}",
        f"train.steps={steps}", "train.log_every=1", f"name={st.name}-step{it}-L{L:.4g}"])
