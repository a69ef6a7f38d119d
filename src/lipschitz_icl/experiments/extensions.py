"""``reproduce extensions``: beyond the paper (CLAIMS.md R1-R8, B7).

    R1   finite training sets of M prompts against the population loss      ext_models.exp_finite_sample
    R2   gradient descent on factored W_K, W_Q against the merged Q           ext_models.exp_factored
    R3a  imbalanced features p_k                                             ext_kernel.exp_imbalanced
    R3b  token noise that is not small                                       ext_models.exp_token_noise
    R3c  L far beyond the sharp range                                        ext_kernel.exp_large_L
    R3d  label noise                                                         ext_kernel.exp_label_noise
    R6   continuous inputs: sharpness ||Q|| and attention window against L   ext_models.exp_continuous
    R7   a 2-layer, 4-head transformer: does some head reach Attn_k -> 1?     ext_models.exp_transformer
    R8   the linear case, L = ||w||                                          ext_kernel.exp_linear_norm
    B7   a curriculum over L, large L first, against none                    ext_kernel.exp_curriculum

Every experiment takes a runner.Context and returns ClaimResults; its criterion is fixed in code
before it runs and its verdict comes from the measured statistic. Sizes: ext_common.ExtSizes
(tiny for the tests, quick, full), chosen from the context.
"""

from __future__ import annotations

from .ext_kernel import (
    KERNEL_EXTENSIONS,
    exp_curriculum,
    exp_imbalanced,
    exp_label_noise,
    exp_large_L,
    exp_linear_norm,
)
from .ext_models import (
    MODEL_EXTENSIONS,
    exp_continuous,
    exp_factored,
    exp_finite_sample,
    exp_token_noise,
    exp_transformer,
)

EXTENSION_EXPERIMENTS = [  # in claim order
    exp_finite_sample, exp_factored, exp_imbalanced, exp_token_noise, exp_large_L, exp_label_noise,
    exp_continuous, exp_transformer, exp_linear_norm, exp_curriculum,
]
assert set(EXTENSION_EXPERIMENTS) == {*KERNEL_EXTENSIONS, *MODEL_EXTENSIONS}

__all__ = [
    "EXTENSION_EXPERIMENTS", "exp_continuous", "exp_curriculum", "exp_factored", "exp_finite_sample",
    "exp_imbalanced", "exp_label_noise", "exp_large_L", "exp_linear_norm", "exp_token_noise", "exp_transformer",
]
