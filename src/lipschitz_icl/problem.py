"""The problem a config describes: features, task class and its kernel Sigma, built once.

Engines, theory and analysis all start from a Problem, so Sigma is estimated once per run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import Config
from .features import FeatureSet, make_features
from .rng import make_generator
from .tasks import KernelEstimate, TaskClass, make_task


@dataclass
class Problem:
    config: Config
    features: FeatureSet
    task: TaskClass
    kernel: KernelEstimate  # Sigma on the features, with its standard error
    dtype: torch.dtype

    @property
    def L(self) -> float:
        return self.task.L


def dtype_of(cfg: Config) -> torch.dtype:
    return torch.float64 if cfg.engine.dtype == "float64" else torch.float32


def build_problem(cfg: Config) -> Problem:
    # features and Sigma are computed in float64 whatever the training dtype
    fs = make_features(cfg.features, make_generator(cfg.seed, "features"))
    task = make_task(cfg.task.kind, cfg.task.L, cfg.features.d, cfg.task.params)
    kern = task.kernel(fs.V, make_generator(cfg.seed, "kernel"), cfg.task.kernel_samples)
    return Problem(cfg, fs, task, kern, dtype_of(cfg))
