"""How long each experiment is expected to take: the order ``reproduce --jobs N`` starts them in (longest first,
so that the longest does not start last), and the time left of its progress view.

QUICK_SECONDS are the seconds each experiment took inside ``reproduce all --quick`` (claims.json ``wall_s``, one
torch thread each, 2026-12-07 on a 2-core Intel Xeon, two experiments at a time); only their ratios matter. An
experiment not in the table (a user's, or one added since) is expected to take the median. FULL_SECONDS are the
same at full size; an experiment without one is expected to take FULL_PER_QUICK times its quick time.
"""

from __future__ import annotations

import statistics

from .registry import Experiment

QUICK_SECONDS = {
    "exp_regimes": 4.4, "exp_oscillations": 8.8, "exp_beyond": 15.1, "exp_threshold": 14.9, "exp_scaling": 5.4,
    "exp_tuned": 12.6, "exp_degenerate": 4.0, "exp_predecessor": 1.3, "exp_predecessor_K": 2.7, "exp_collins": 43.0,
    "exp_zhang_merged": 5.3, "exp_zhang_separate": 4.5, "exp_zfb": 30.9, "exp_ahn": 37.9, "exp_mahankali": 12.0,
    "exp_lu": 10.7, "exp_sample_size_bound": 1.3, "exp_early_rate": 0.9, "exp_writeup": 4.2,
    "exp_linear_vs_nonlinear": 21.3, "exp_curriculum": 7.4, "exp_finite_training_set": 3.8, "exp_factored": 1.3,
    "exp_imbalanced": 1.2, "exp_token_noise": 24.6, "exp_large_L": 1.6, "exp_label_noise": 11.8, "exp_eps_axis": 1.5,
    "exp_regimes_visible": 14.1, "exp_continuous": 2.3, "exp_transformer": 14.7, "exp_linear_norm": 1.1,
    "exp_baselines": 3.0,
}
FULL_SECONDS = {  # the same at full size (reproduce all, 2026-12-07, fused, two experiments at a time with lanes)
    "exp_regimes": 4.0, "exp_oscillations": 9.2, "exp_beyond": 19.2, "exp_threshold": 62.2, "exp_scaling": 64.1,
    "exp_tuned": 14.9, "exp_degenerate": 4.1, "exp_predecessor": 1.4, "exp_predecessor_K": 46.5,
    "exp_collins": 950.9, "exp_zhang_merged": 30.7, "exp_zhang_separate": 27.4, "exp_zfb": 166.7, "exp_ahn": 604.7,
    "exp_mahankali": 64.9, "exp_lu": 223.6, "exp_sample_size_bound": 5.9, "exp_early_rate": 1.0, "exp_writeup": 8.3,
    "exp_linear_vs_nonlinear": 25.7, "exp_curriculum": 7.6, "exp_finite_training_set": 74.9, "exp_factored": 11.9,
    "exp_imbalanced": 2.9, "exp_token_noise": 139.3, "exp_large_L": 3.1, "exp_label_noise": 19.7,
    "exp_eps_axis": 1.7, "exp_regimes_visible": 62.3, "exp_continuous": 79.2, "exp_transformer": 176.6,
    "exp_linear_norm": 1.5, "exp_baselines": 10.5,
}
FULL_PER_QUICK = 8.9  # the experiments of reproduce all at full size against --quick: 2927 s against 330 s (12-07)


def expected_seconds(experiments: list[Experiment], quick: bool) -> dict[str, float]:
    """Each experiment's expected seconds at the size (an experiment not in the table: the median)."""
    median = statistics.median(QUICK_SECONDS.values())
    if quick:
        return {e.__name__: QUICK_SECONDS.get(e.__name__, median) for e in experiments}
    return {e.__name__: FULL_SECONDS.get(e.__name__, QUICK_SECONDS.get(e.__name__, median) * FULL_PER_QUICK)
            for e in experiments}

