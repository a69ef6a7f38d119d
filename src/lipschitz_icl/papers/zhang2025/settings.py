"""The zhang2025 suite's grids by size (ctx.sizes.level), in the paper's code's setting: N = 31 context pairs,
tr Lambda = 1, eigenvalues proportional to 1..D or white, no label noise, MSE without 1/2 (``half=False``)."""

from __future__ import annotations

import numpy as np

N_CONTEXT = 31  # N: the code's seq_len 32 minus the query


def ramp(dim: int) -> np.ndarray:
    """Lambda's eigenvalues proportional to D, ..., 1 with tr Lambda = 1 (the code's default covariance)."""
    lam = np.arange(dim, 0, -1, dtype=float)
    return lam / lam.sum()


def white(dim: int) -> np.ndarray:
    return np.full(dim, 1.0 / dim)


MERGED = {  # ATTN_M: settings (name, eigenvalues), heads, seeds, init scales and steps of ZS2's sweep, lr, steps
    "tiny": {"settings": [("white D=2", white(2))], "heads": 4, "seeds": 2, "scales": (1e-2, 1e-4, 1e-6),
             "lr": 0.1, "steps": 800, "sweep_steps": 500},
    "quick": {"settings": [("white D=4", white(4)), ("ramp D=4", ramp(4))], "heads": 8, "seeds": 5,
              "scales": (1e-2, 1e-3, 1e-4, 1e-5, 1e-6), "lr": 0.05, "steps": 6000, "sweep_steps": 1600},
    "full": {"settings": [("white D=2", white(2)), ("white D=4", white(4)), ("ramp D=4", ramp(4))], "heads": 8,
             "seeds": 8, "scales": (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8), "lr": 0.025, "steps": 16000,
             "sweep_steps": 4000},
}
SEPARATE = {  # ATTN_S with rank-one heads: eigenvalues, heads, seeds, init scale, lr, steps
    "tiny": {"eigs": ramp(2), "heads": 3, "seeds": 2, "scale": 0.02, "lr": 0.5, "steps": 1500},
    "quick": {"eigs": ramp(4), "heads": 5, "seeds": 6, "scale": 0.01, "lr": 1.0, "steps": 12000},
    "full": {"eigs": ramp(4), "heads": 5, "seeds": 16, "scale": 0.01, "lr": 0.5, "steps": 30000},
}
RECORDS = 1500  # records per curve (every steps // RECORDS steps)
