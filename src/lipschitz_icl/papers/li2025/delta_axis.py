"""li2025/delta_axis.py"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...api import Run
from ...experiments.measure import L_star_of
from ...experiments.runner import (
    Context,
    censored_runs,
    paper_base,
    run_group,
    with_budget,
    with_overrides,
)

DELTA_CLASSES = ("linear", "relu_net", "rbf", "sinusoid", "norm")


DELTA_CV_AGREES, DELTA_CV_DISAGREES = 0.25, 0.5  # P5's delta axis: one value across classes


DELTA_EPS = 0.1  # the delta-axis runs stop at this relative loss, well past T_1 (s ~ 400 against ~ 170)


@dataclass
class DeltaAxis:
    """T_1 eta L^2 delta^2 Delta^2 per class, its coefficient of variation, censored runs, the runs."""
    values: dict[str, float | None]
    cv: float | None
    censored: list[str]
    runs: list[Run]


def delta_axis(ctx: Context) -> DeltaAxis:
    """Every class of DELTA_CLASSES at the quickstart geometry and L = L*/2 of its class, budget in T_f."""
    S = ctx.sizes
    base = paper_base(ctx, f"task.kernel_samples={S.kernel_samples}")
    configs = []
    for cls in DELTA_CLASSES:
        c = with_overrides(base, [f"task.kind={cls}", "task.L=1"])
        c = with_overrides(c, [f"task.L={0.5 * L_star_of(c):.6g}", f"name=delta-{cls}"])
        configs.append(with_budget(c, DELTA_EPS, cap=4 * S.budget))
    runs = run_group(ctx, "delta-axis", configs, "(c) T_1 across classes (delta axis)")
    values: dict[str, float | None] = {}
    for r in runs:
        sm = r.summary
        T1 = sm["T_1"]
        values[r.config.task.kind] = None if T1 is None else \
            T1 * r.config.train.lr * sm["L"] ** 2 * sm["delta"] ** 2 * sm["Delta"] ** 2
    got = np.array([v for v in values.values() if v is not None])
    cv = float(got.std(ddof=1) / got.mean()) if got.size >= 2 else None
    return DeltaAxis(values, cv, censored_runs(runs, "T_1"), runs)


