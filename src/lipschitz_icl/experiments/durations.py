"""How long each experiment is expected to take: the order ``reproduce --jobs N`` starts them in (longest first,
so that the longest does not start last), and the time left of its progress view.

QUICK_SECONDS are the seconds each experiment took inside ``reproduce all --quick`` (claims.json ``wall_s``, one
torch thread each, 2026-12-06 on a 2-core Intel Xeon, two experiments at a time); only their ratios matter. An
experiment not in the table (a user's, or one added since) is expected to take the median. FULL_SECONDS are the
same at full size; an experiment without one is expected to take FULL_PER_QUICK times its quick time.
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
FULL_SECONDS = {  # the same at full size (reproduce all, 2026-12-06, fused, two experiments at a time with lanes)
    "exp_regimes": 5.8, "exp_oscillations": 9.9, "exp_beyond": 53.6, "exp_threshold": 118.2, "exp_scaling": 109.9,
    "exp_tuned": 16.0, "exp_degenerate": 4.4, "exp_predecessor": 1.5, "exp_predecessor_K": 75.0,
    "exp_collins": 2622.5, "exp_zhang_merged": 31.7, "exp_zhang_separate": 27.1, "exp_zfb": 279.4, "exp_ahn": 1326.4,
    "exp_mahankali": 64.8, "exp_lu": 642.3, "exp_sample_size_bound": 9.3, "exp_early_rate": 0.9, "exp_writeup": 8.7,
    "exp_linear_vs_nonlinear": 66.0, "exp_curriculum": 7.9, "exp_finite_training_set": 70.7, "exp_factored": 11.8,
    "exp_imbalanced": 3.2, "exp_token_noise": 241.2, "exp_large_L": 3.6, "exp_label_noise": 17.3, "exp_eps_axis": 1.8,
    "exp_regimes_visible": 117.4, "exp_continuous": 80.7, "exp_transformer": 127.6, "exp_linear_norm": 1.5,
    "exp_baselines": 11.4,
}
FULL_PER_QUICK = 13.6  # the experiments of reproduce all at full size against --quick: 6174 s against 453 s (12-06)


def expected_seconds(experiments: list[Experiment], quick: bool) -> dict[str, float]:
    """Each experiment's expected seconds at the size (an experiment not in the table: the median)."""
    median = statistics.median(QUICK_SECONDS.values())
    if quick:
        return {e.__name__: QUICK_SECONDS.get(e.__name__, median) for e in experiments}
    return {e.__name__: FULL_SECONDS.get(e.__name__, QUICK_SECONDS.get(e.__name__, median) * FULL_PER_QUICK)
            for e in experiments}

