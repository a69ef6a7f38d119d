"""Outcomes fixed by the geometry or by the invariance f = L g (docs/CLAIMS_METHOD.md): each flag the
claims carry is proved here on a small case, so that the verdicts are decided elsewhere."""

import math

from lipschitz_icl.batch import run_many
from lipschitz_icl.experiments.measure import score_move_ratio
from lipschitz_icl.experiments.runner import base_config, with_overrides
from lipschitz_icl.experiments.uncertainty import bootstrap_loglog_slope
from lipschitz_icl.problem import build_problem
from lipschitz_icl.theory import eta_max

FAST = ["engine.draws=4", "train.log_every=1", "train.steps=60", "train.eps_mode=relative", "train.eps=1e-3"]


def test_p2_ratio_is_one_over_K_minus_1_on_orthonormal_features():
    """Softmax gradient rows sum to zero: with orthonormal features the irrelevant scores of a row move by
    minus the target's move in sum, so R = 1/(K-1) whatever L (P2's old statistic was forced)."""
    cfg = base_config([*FAST, "task.L=6"])
    runs = run_many([cfg, with_overrides(cfg, ["task.L=4", "features.K=4", "features.d=4"])])
    for run, K in zip(runs, (5, 4), strict=True):
        assert run.summary["T_1"] is not None
        assert abs(score_move_ratio(run) - 1 / (K - 1)) < 1e-12


def test_p2_ratio_is_free_on_gaussian_features():
    cfg = base_config([*FAST, "task.L=6", "features.kind=gaussian", "train.steps=400"])
    (run,) = run_many([cfg])
    if run.summary["T_1"] is not None:  # measured: not the orthonormal value
        assert abs(score_move_ratio(run) - 0.25) > 1e-3


def test_p6_eta_max_slope_is_minus_two_without_label_noise_and_free_with_it():
    cfg = base_config(["engine.draws=8"])
    Ls = [0.5, 1.0, 4.0]
    clean = [eta_max(build_problem(with_overrides(cfg, [f"task.L={L}"]))) for L in Ls]
    slope, _ = bootstrap_loglog_slope(Ls, clean)
    assert abs(slope + 2) < 1e-9  # forced: the Hessian at Q = 0 scales as L^2
    noisy = [eta_max(build_problem(with_overrides(cfg, [f"task.L={L}", "task.label_noise=1"])))
             for L in Ls]
    slope_noisy, _ = bootstrap_loglog_slope(Ls, noisy)
    assert math.isfinite(slope_noisy) and abs(slope_noisy + 2) > 0.05  # label noise breaks the L^2 scaling
