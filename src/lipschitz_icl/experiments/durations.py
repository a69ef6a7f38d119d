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
    "exp_regimes": 5.7, "exp_oscillations": 10.2, "exp_beyond": 19.4, "exp_threshold": 20.0, "exp_scaling": 6.7,
    "exp_tuned": 16.2, "exp_degenerate": 4.3, "exp_predecessor": 1.7, "exp_predecessor_K": 3.5, "exp_collins": 58.9,
    "exp_zhang_merged": 6.4, "exp_zhang_separate": 6.3, "exp_zfb": 34.7, "exp_ahn": 57.7, "exp_mahankali": 14.6,
    "exp_lu": 25.6, "exp_sample_size_bound": 1.5, "exp_early_rate": 1.1, "exp_writeup": 5.2,
    "exp_linear_vs_nonlinear": 27.0, "exp_curriculum": 11.0, "exp_finite_training_set": 4.9, "exp_factored": 1.5,
    "exp_imbalanced": 1.5, "exp_token_noise": 29.3, "exp_large_L": 2.0, "exp_label_noise": 12.9, "exp_eps_axis": 1.7,
    "exp_regimes_visible": 21.4, "exp_continuous": 2.5, "exp_transformer": 19.8, "exp_linear_norm": 1.5,
    "exp_baselines": 3.5,
}
FULL_SECONDS = {  # the same at full size (reproduce all, 2026-12-07, fused, two experiments at a time with lanes)
    "exp_regimes": 4.7, "exp_oscillations": 10.5, "exp_beyond": 24.6, "exp_threshold": 80.4, "exp_scaling": 84.6,
    "exp_tuned": 23.2, "exp_degenerate": 4.8, "exp_predecessor": 1.5, "exp_predecessor_K": 52.6,
    "exp_collins": 1609.3, "exp_zhang_merged": 36.9, "exp_zhang_separate": 29.7, "exp_zfb": 194.5, "exp_ahn": 1239.7,
    "exp_mahankali": 86.1, "exp_lu": 507.2, "exp_sample_size_bound": 6.4, "exp_early_rate": 1.0, "exp_writeup": 11.2,
    "exp_linear_vs_nonlinear": 33.0, "exp_curriculum": 10.8, "exp_finite_training_set": 96.8, "exp_factored": 13.8,
    "exp_imbalanced": 3.4, "exp_token_noise": 179.9, "exp_large_L": 3.5, "exp_label_noise": 17.5,
    "exp_eps_axis": 1.9, "exp_regimes_visible": 81.2, "exp_continuous": 107.7, "exp_transformer": 190.9,
    "exp_linear_norm": 1.6, "exp_baselines": 11.3,
}
FULL_PER_QUICK = 10.8  # the experiments of reproduce all at full size against --quick: 4762 s against 440 s (12-07)


def expected_seconds(experiments: list[Experiment], quick: bool) -> dict[str, float]:
    """Each experiment's expected seconds at the size (an experiment not in the table: the median)."""
    median = statistics.median(QUICK_SECONDS.values())
    if quick:
        return {e.__name__: QUICK_SECONDS.get(e.__name__, median) for e in experiments}
    return {e.__name__: FULL_SECONDS.get(e.__name__, QUICK_SECONDS.get(e.__name__, median) * FULL_PER_QUICK)
            for e in experiments}

