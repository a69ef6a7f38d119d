"""P4b's absolute-eps runs: T_eps(L) at a fixed eta, measured, against what the invariance predicts
from one relative-eps run of the same setting.

Every built-in class is f = L g, so at a fixed eta the run at L follows the largest-L run of P4a in
rescaled time s = eta L^2 t, with its loss scaled by (L / L_lead)^2. Its absolute-eps time is then

    T_eps(L) = t_lead(eps L_lead^2 / L^2) * L_lead^2 / L^2,

t_lead(x) the step at which the lead run's loss crosses x (interpolated within the step), and 0 when
L^2 l0 <= eps. The runs here test that prediction at L = 2, 4 and 8 L_x, L_x = sqrt(eps / l0): a
disagreement beyond AGREE would mean the invariance (and with it the exact L_x) fails on the data.
"""

from __future__ import annotations

import math

import numpy as np

from ...api import Run
from ...experiments.measure import crossing_times
from ...experiments.runner import Context, run_group, with_overrides
from .threshold_measure import Setting

ABS_EPS = 1e-2  # P4b's absolute accuracy
ABS_FACTORS = (2.0, 4.0, 8.0)  # L / L_x of the absolute-eps runs
AGREE = 0.1  # a run agrees when |T - predicted| <= max(2 steps, AGREE x predicted)


def lead_initial_loss(lead: Run) -> float:
    """l0 of the lead run's own draws at L = 1 (its initial loss / L^2)."""
    return float(lead.series("loss").iloc[0]) / lead.config.task.L**2


def predicted_time(lead: Run, L: float, eps: float = ABS_EPS) -> float | None:
    """T_eps at L (same eta, same draws) from the lead run's loss curve; None beyond the curve's end."""
    return predicted_times(lead, [L], eps)[0]


def predicted_times(lead: Run, Ls: list[float], eps: float = ABS_EPS) -> list[float | None]:
    """``predicted_time`` at every L of ``Ls``, reading the lead run's loss curve once."""
    l0 = lead_initial_loss(lead)
    ratios = [(lead.config.task.L / L) ** 2 for L in Ls]
    t_lead = crossing_times(lead, [eps * r for r in ratios])
    return [0.0 if L**2 * l0 <= eps else (None if (t := t_lead[eps * r]) is None else t * r)
            for L, r in zip(Ls, ratios, strict=True)]


def absolute_runs(ctx: Context, settings: list[Setting], leads: dict[str, Run]) -> dict[str, list[Run]]:
    """Per setting, GD at the lead run's eta and L = ABS_FACTORS x L_x to the absolute eps, each with a
    budget of 3x its predicted time (a run beyond it is censored and disagrees)."""
    configs, owner = [], []
    for st in settings:
        lead = leads[st.name]
        L_x = math.sqrt(ABS_EPS / lead_initial_loss(lead))
        for f in ABS_FACTORS:
            pred = predicted_time(lead, f * L_x)
            steps = 3 * ctx.sizes.thr_steps if pred is None else int(3 * pred) + 10
            configs.append(with_overrides(lead.config, [
                f"task.L={f * L_x:.8g}", "train.eps_mode=absolute", f"train.eps={ABS_EPS:g}",
                f"train.steps={steps}", f"name={st.name}-abs-{f:g}Lx"]))
            owner.append(st.name)
    runs = run_group(ctx, "threshold-absolute", configs, "P4b absolute eps")
    out: dict[str, list[Run]] = {st.name: [] for st in settings}
    for name, r in zip(owner, runs, strict=True):
        out[name].append(r)
    return out


def invariance_check(settings: list[Setting], leads: dict[str, Run], runs: dict[str, list[Run]]) -> dict:
    """Measured against predicted T_eps for every absolute-eps run; ``agree`` when all are within AGREE."""
    rows, worst, censored = {}, 0.0, 0
    for st in settings:
        for r in runs[st.name]:
            pred = predicted_time(leads[st.name], r.config.task.L)
            T = r.summary.get("T_eps")
            censored += T is None
            dev = math.inf if T is None or pred is None else abs(T - pred) / max(pred, 1.0)
            ok = T is not None and pred is not None and abs(T - pred) <= max(2.0, AGREE * pred)
            worst = max(worst, dev)
            rows[r.config.name] = {"T_eps": T, "predicted": pred, "agrees": ok}
    return {"runs": rows, "max_relative_deviation": worst if math.isfinite(worst) else None,
            "censored": censored, "agree": bool(rows) and all(v["agrees"] for v in rows.values())}


def predicted_curve(lead: Run, L_star: float, x: np.ndarray) -> np.ndarray:
    """T_eps against L / L* (NaN where the lead run's curve ends), for the figure."""
    return np.array([np.nan if t is None else t for t in predicted_times(lead, [v * L_star for v in x])])
