"""How long each experiment is expected to take: the order ``reproduce --jobs N`` starts them in (longest first,
so that the longest does not start last), and the time left of its progress view.

QUICK_SECONDS are the seconds each experiment took inside ``reproduce all --quick`` (claims.json ``wall_s``, one
torch thread each, 2026-12-06 on a 2-core Intel Xeon, two experiments at a time); only their ratios matter. An
experiment not in the table (a user's, or one added since) is expected to take the median.
"""

from __future__ import annotations

import statistics

from .registry import Experiment

QUICK_SECONDS = {
    "exp_regimes": 13.2, "exp_oscillations": 17.7, "exp_beyond": 32.0, "exp_threshold": 27.3, "exp_scaling": 7.8,
    "exp_tuned": 14.1, "exp_degenerate": 4.0, "exp_predecessor": 1.5, "exp_predecessor_K": 3.2,
    "exp_collins": 138.9, "exp_zhang_merged": 10.8, "exp_zhang_separate": 6.2, "exp_zfb": 41.6, "exp_ahn": 55.0,
    "exp_mahankali": 11.2, "exp_lu": 30.1, "exp_sample_size_bound": 1.4, "exp_early_rate": 0.9, "exp_writeup": 6.5,
    "exp_linear_vs_nonlinear": 33.9, "exp_curriculum": 7.7, "exp_finite_training_set": 6.1, "exp_factored": 2.6,
    "exp_imbalanced": 2.5, "exp_token_noise": 40.3, "exp_large_L": 1.8, "exp_label_noise": 11.5,
    "exp_eps_axis": 3.8, "exp_regimes_visible": 23.7, "exp_continuous": 4.4, "exp_transformer": 18.6,
    "exp_linear_norm": 2.1, "exp_baselines": 4.2,
}
FULL_PER_QUICK = 6.7  # reproduce all at full size against --quick (536 s against 80 s, docs/PERFORMANCE.md)


def expected_seconds(experiments: list[Experiment], quick: bool) -> dict[str, float]:
    """Each experiment's expected seconds at the size (an experiment not in the table: the median)."""
    median = statistics.median(QUICK_SECONDS.values())
    factor = 1.0 if quick else FULL_PER_QUICK
    return {e.__name__: QUICK_SECONDS.get(e.__name__, median) * factor for e in experiments}

