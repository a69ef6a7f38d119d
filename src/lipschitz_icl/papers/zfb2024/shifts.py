"""ZF3: the trained layer is robust to task and query shifts but not to covariate shifts.

Read on error(M) curves with the training length growing with the test length (N = M: the paper's statements
are limits as N, M -> infinity; at a fixed N even the unshifted error keeps a D^2/N^2 floor). At each N the
trained Gamma is Gamma*_N (ZF1), and its error under a shifted test distribution is the exact quadratic
``single_error``; sampled prompts spot-check those numbers at the Gamma ZF1 trained. The shifts:
- task: w from a finite pool with the same second moment (+-sqrt(D) times a rotated basis) or a pool of 3 random
  tasks (another second moment); query: x_q ~ N(0, Lambda_q), Lambda_q != Lambda, the context unchanged;
- covariate: the context and the query from N(0, Lambda'), Lambda' = 2 Lambda or Lambda' of another shape with
  the same trace; as N, M -> infinity the error tends to tr(Lambda' (Lambda^{-1} Lambda' - I)^2) (notes, derived).
The control null is a predictor that adapts to the context covariance (x_q^T (Lh + tr(Lh)/M I)^{-1} h, the plug-in
of Gamma* with the context's sample covariance Lh): its covariate-shift error vanishes, and the rule must say so."""

from __future__ import annotations

import numpy as np
import torch

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...linattn import GaussianTask, optimal_gamma, single_error
from ...rng import make_generator
from .common import ANISO3, DTYPE, ISO3, Setting, log_slope
from .error import sampled_error

STATEMENTS = {
    "ZF3": "The trained layer is robust to task shifts (w from another distribution or a finite pool) and to query "
           "shifts: its error still vanishes as the training and test prompt lengths grow; it is not robust to "
           "covariate shifts: with the test context and query from N(0, Lambda'), Lambda' != Lambda, its error tends "
           "to a non-zero limit, tr(Lambda' (Lambda^{-1} Lambda' - I)^2) when w ~ N(0, I).",
}
CAPTIONS = {
    "zfb_shifts": (
        "Error of the trained layer (Gamma*_N, which ZF1's runs reach) against the prompt length, trained and tested "
        "at N = M, log-log, isotropic (left) and anisotropic (right) Lambda: no shift, two task shifts, a query "
        "shift (solid), two covariate shifts (dash-dot) with their N, M -> infinity limits (dotted); black dashed: "
        "the control that adapts to the context covariance (plug-in ridge) under the scale shift. Look for the "
        "solid curves falling like 1/M and the covariate curves flattening at their limits while the control falls. "
        "A covariate curve that keeps falling, or a task or query curve that flattens, contradicts ZF3. The paper's "
        "own figures (Section 4, not reachable here) plot the prediction error of trained models against the prompt "
        "length under such shifts; this is that quantity for the exact single layer."),
}
VANISH = 0.7  # a curve vanishes when its last log-log slope is <= -VANISH (close to the 1/M rate)
STAY = 0.2  # a curve levels off when its last log-log slope is >= -STAY


def lengths(level: str) -> list[int]:
    """N = M values of the curves."""
    top = {"tiny": 9, "quick": 12}.get(level, 16)
    return [2 ** k for k in range(3, top + 1)]


def shifts(setting: Setting) -> dict[str, tuple[str, dict]]:
    """Name -> (kind, GaussianTask.shifted arguments): robust shifts and covariate shifts of ``setting``'s Lambda."""
    task, d = setting.task(), setting.dim
    lam = task.cov
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=make_generator(3, "zfb:pool"), dtype=DTYPE))
    same_moment = np.sqrt(d) * torch.cat([q.T, -q.T])  # 2D tasks, (1/2D) sum w w^T = I
    random_pool = torch.randn(3, d, generator=make_generator(4, "zfb:pool"), dtype=DTYPE)
    eig = torch.linalg.eigvalsh(lam)
    shape = torch.linspace(0.4, 1.6, d, dtype=DTYPE) * float(eig.sum()) / d  # another shape, the same trace
    return {"none": ("robust", {}),
            "task: pool, same 2nd moment": ("robust", {"pool": same_moment}),
            "task: 3 random tasks": ("robust", {"pool": random_pool}),
            "query: Lambda_q != Lambda": ("robust", {"query_cov": torch.diag(2 * eig.flip(0))}),
            "covariate: Lambda' = 2 Lambda": ("covariate", {"cov": 2 * lam}),
            "covariate: Lambda' other shape": ("covariate", {"cov": torch.diag(shape)})}


def curves(setting: Setting, ms: list[int]) -> dict[str, tuple[str, list[float]]]:
    """Per shift, the exact error of Gamma*_M (trained at N = M) on the shifted test prompts of length M."""
    out = {}
    for name, (kind, args) in shifts(setting).items():
        errs = []
        for m in ms:
            train = setting.task().shifted(n_context=m)
            errs.append(single_error(optimal_gamma(train), train.shifted(**args)))
        out[name] = (kind, errs)
    return out


def covariate_limit(setting: Setting, cov: torch.Tensor) -> float:
    """tr(Lambda' (Lambda^{-1} Lambda' - I)^2), the N, M -> infinity error under a covariate shift."""
    lam = setting.task().cov
    e = torch.linalg.solve(lam, cov) - torch.eye(setting.dim, dtype=DTYPE)
    return float(torch.trace(cov @ e @ e))


def adaptive_error(task: GaussianTask, prompts: int, seed: int) -> float:
    """Monte-Carlo error of the plug-in ridge x_q^T (Lh + tr(Lh)/M I)^{-1} h on ``task`` (adapts to the context)."""
    gen = make_generator(seed, "zfb:adaptive")
    x, y, xq, yq = task.draw(prompts, gen)
    m = task.n_context
    lh = x.transpose(1, 2) @ x / m
    reg = lh + (torch.diagonal(lh, dim1=1, dim2=2).sum(-1) / m)[:, None, None] * torch.eye(task.dim, dtype=DTYPE)
    w_hat = torch.linalg.solve(reg, torch.einsum("bn,bnd->bd", y, x) / m)
    return float(((yq - (xq * w_hat).sum(-1)) ** 2).mean())


def adaptive_curve(setting: Setting, ms: list[int], prompts: int = 2000) -> list[float]:
    """The adaptive control's error under the scale covariate shift Lambda' = 2 Lambda, at each M."""
    cov = 2 * setting.task().cov
    return [adaptive_error(setting.task().shifted(cov=cov, n_context=m), prompts, seed=m) for m in ms]


def zf3_rule(ms: list[int], named: dict[str, tuple[str, list[float]]]) -> tuple[bool, bool, dict]:
    """Per curve the log-log slope between its last two lengths: supported if every robust curve vanishes (slope
    <= -VANISH) and every covariate curve levels off (>= -STAY); not supported if a covariate curve vanishes or a
    robust one levels off."""
    slopes = {name: log_slope(ms, errs) for name, (_, errs) in named.items()}
    kinds = {name: kind for name, (kind, _) in named.items()}
    robust = [slopes[n] for n in slopes if kinds[n] == "robust"]
    cov = [slopes[n] for n in slopes if kinds[n] == "covariate"]
    sup = bool(robust and cov) and all(s <= -VANISH for s in robust) and all(s >= -STAY for s in cov)
    ref = any(s <= -VANISH for s in cov) or any(s >= -STAY for s in robust)
    return sup, ref, {"last_slopes": slopes, "vanish_below": -VANISH, "level_above": -STAY}


def spot_checks(setting: Setting, gamma: torch.Tensor, prompts: int, seed: int) -> dict[str, float]:
    """Relative gap, sampled / exact - 1, of the trained ``gamma``'s error under each shift at M = N and 4N."""
    out = {}
    for name, (_, args) in shifts(setting).items():
        for m in (setting.n_context, 4 * setting.n_context):
            test = setting.task().shifted(n_context=m).shifted(**args)
            exact = single_error(gamma, test)
            out[f"{name} M={m}"] = sampled_error(gamma, test, prompts, seed=seed + m) / exact - 1
    return out


def measure(level: str) -> tuple[list[int], dict[str, dict], dict[str, list[float]]]:
    """The curves of both base settings, and the adaptive control's (on a shorter grid: it is sampled)."""
    ms = lengths(level)
    named = {s.name: curves(s, ms) for s in (ISO3, ANISO3)}
    short = [m for m in ms if m <= 512]
    control = {s.name: adaptive_curve(s, short, prompts=500 if level == "tiny" else 2000) for s in (ISO3, ANISO3)}
    return ms, named, control


def judge(ctx, level: str, spot: dict[str, float], data: list[str]) -> ClaimResult:
    """ZF3 from the exact curves of both base settings, refined by a grid four times longer."""
    ms, named, control = measure(level)
    flat = {f"{s}: {n}": v for s, c in named.items() for n, v in c.items()}
    sup, ref, stat = zf3_rule(ms, flat)
    longer = [*ms, 2 * ms[-1], 4 * ms[-1]]
    r_sup, r_ref, r_stat = zf3_rule(longer, {f"{s.name}: {n}": v for s in (ISO3, ANISO3)
                                             for n, v in curves(s, longer).items()})
    short = [m for m in ms if m <= 512]
    null = {f"{s}: {n}": (k, e[:len(short)]) for s, c in named.items() for n, (k, e) in c.items() if k == "robust"}
    null.update({f"{s}: adaptive, Lambda' = 2 Lambda": ("covariate", e) for s, e in control.items()})
    n_sup, n_ref, n_stat = zf3_rule(short, null)
    limits = {f"{s.name}: {n}": covariate_limit(s, args["cov"]) for s in (ISO3, ANISO3)
              for n, (k, args) in shifts(s).items() if k == "covariate"}
    stat.update({"errors": {k: v[1] for k, v in flat.items()}, "lengths": ms, "covariate_limits": limits,
                 "adaptive_control": {"lengths": short, "errors": control, "verdict_supported": n_sup,
                                      "verdict_refuted": n_ref, "last_slopes": n_stat["last_slopes"]},
                 "sampled_spot_checks_rel_gap": spot,
                 "spot_check_max_abs_gap": max((abs(v) for v in spot.values()), default=float("nan"))})
    crit = (f"For Lambda isotropic and anisotropic (D = 3), the exact error of Gamma*_N tested at M = N for N = M in "
            f"{ms[0]}..{ms[-1]} under no shift, two task shifts, a query shift (robust) and two covariate shifts. Per "
            f"curve the log-log slope between its last two lengths. Supported if every robust curve's is <= "
            f"-{VANISH:g} (still vanishing like 1/M) and every covariate curve's is >= -{STAY:g} (levelled off); not "
            "supported if a covariate curve vanishes or a robust one levels off. Reported beside it: sampled errors "
            "of ZF1's trained Gamma under each shift at M = N, 4N against the exact values.")
    return claim("ZF3", crit, stat, sup, ref, figures=[_figure(ctx, ms, named, control, limits)], data=list(data),
                 forced=True, distinct_settings=len(named),  # the base settings (iso, aniso), each under every shift
                 forced_reason="Gamma*_N is a closed form and its error under each shift is an exact quadratic in it: "
                               "once ZF1 holds, the curves and their slopes are fixed by the mathematics (the rule "
                               "still rejects its null, a predictor that adapts to the context covariance)",
                 refinement={"approximation": "the length grid four times longer",
                             "agrees": (r_sup, r_ref) == (sup, ref),
                             "verdict_supported": r_sup, "verdict_refuted": r_ref, "statistic": r_stat},
                 undecided_because="" if sup != ref else "a slope between the two thresholds")


def _figure(ctx, ms: list[int], named: dict, control: dict, limits: dict[str, float]) -> str:
    fig, axes = plots.figure(2, 1)
    for ax, (sname, curves_) in zip(axes[0], named.items(), strict=True):
        colours = plots.colors(len(curves_))
        for (name, (kind, errs)), c in zip(curves_.items(), colours, strict=True):
            ax.loglog(ms, errs, "-" if kind == "robust" else "-.", color=c, lw=1, label=name)
            if kind == "covariate":
                ax.axhline(limits[f"{sname}: {name}"], color=c, ls=":", lw=0.8)
        short = ms[:len(control[sname])]
        ax.loglog(short, control[sname], "k--", lw=1, label="adaptive control, Lambda' = 2 Lambda")
        ax.set(xlabel="prompt length N = M", ylabel="prediction error", title=sname.split(" N=")[0] + ", N = M")
        ax.legend(fontsize=5)
    return plots.save(fig, ctx.out, "zfb_shifts")
