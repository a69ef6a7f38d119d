"""The problem a config describes: features (or a continuous input distribution), task class and
its kernel Sigma, built once.

Engines, theory and analysis all start from a Problem, so Sigma is estimated once per run.
``sample_prompts`` draws prompts of a config (its inputs, task class, N and label noise): the one
public way to get the prompts a sampled-engine run trains on, for code that trains in its own loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import Config
from .engines.prompts import PromptBatch, draw_prompts
from .features import FeatureSet, make_features
from .inputs import ContinuousInputs, is_continuous, make_continuous
from .recent import kept, new_cache, tensor_marks
from .rng import make_generator
from .tasks import KernelEstimate, TaskClass, make_task

Inputs = FeatureSet | ContinuousInputs  # what draws a prompt's tokens
FIXED_FEATURES = ("orthonormal", "simplex")  # feature kinds that draw nothing: the same for every seed
RECENT_FEATURES = 64  # feature sets kept for the next configs that ask for the same (a sweep's seeds)
_RECENT_FEATURES: dict[tuple[str, int | None], tuple[FeatureSet, tuple]] = new_cache()  # oldest first


@dataclass
class Problem:
    config: Config
    features: Inputs
    task: TaskClass
    kernel: KernelEstimate | None  # Sigma on the features, with its standard error; None for continuous inputs
    dtype: torch.dtype

    @property
    def L(self) -> float:
        return self.task.L

    @property
    def finite(self) -> bool:
        """Whether the inputs are a finite feature set (False for continuous inputs)."""
        return self.kernel is not None


def dtype_of(cfg: Config) -> torch.dtype:
    return torch.float64 if cfg.engine.dtype == "float64" else torch.float32


def build_inputs(cfg: Config) -> Inputs:
    """The run's features (FeatureSet) or continuous input distribution (ContinuousInputs), in float64;
    random feature kinds draw from the run's ``features`` stream."""
    if is_continuous(cfg.features.kind):
        return make_continuous(cfg.features)
    if cfg.features.kind == "file":
        return make_features(cfg.features, make_generator(cfg.seed, "features"))
    # the same features for the same settings (and seed, where they are drawn): built once, shared; a set that a
    # user changed in place (``build_problem(cfg).features.V *= 2``) is built again, never handed to the next run
    key = (cfg.features.model_dump_json(), None if cfg.features.kind in FIXED_FEATURES else cfg.seed)
    return kept(_RECENT_FEATURES, key, lambda: make_features(cfg.features, make_generator(cfg.seed, "features")),
                RECENT_FEATURES, mark=features_mark)


def features_mark(fs: FeatureSet) -> tuple:
    """What changes when a feature set (a frozen dataclass) is changed in place: its V and p (``recent.kept``)."""
    return tensor_marks(fs.V, fs.p)


def build_problem(cfg: Config) -> Problem:
    # features and Sigma are computed in float64 whatever the training dtype
    fs = build_inputs(cfg)
    task = make_task(cfg.task.kind, cfg.task.L, cfg.features.d, cfg.task.params)
    kern = None
    if isinstance(fs, FeatureSet):  # Sigma_nm = E_f[f(v_n) f(v_m)] needs a finite feature set
        kern = task.kernel(fs.V, make_generator(cfg.seed, "kernel"), cfg.task.kernel_samples)
    return Problem(cfg, fs, task, kern, dtype_of(cfg))


def sample_prompts(
    config: Config | Problem, batch: int, *, gen: torch.Generator | None = None, stream: str = "prompts",
    task: TaskClass | None = None, N: int | None = None,
) -> PromptBatch:
    """``batch`` prompts of a config: N context tokens and a query from its inputs (features or a
    continuous distribution), a function of its task class per prompt, labels y_i = f(x_i) + tau eps_i
    (the query's label clean). Draws from ``gen``, else from the run's stream ``stream`` (``prompts``
    is the one the sampled engine trains on: the same config gives the engine's first batch).
    ``task`` and ``N`` replace the config's class and context length. Float64, on the CPU."""
    problem = config if isinstance(config, Problem) else None
    cfg = problem.config if problem is not None else config
    fs = problem.features if problem is not None else build_inputs(cfg)
    task = task or (problem.task if problem is not None else make_task(cfg.task.kind, cfg.task.L, cfg.features.d,
                                                                       cfg.task.params))
    gen = gen if gen is not None else make_generator(cfg.seed, stream)
    return draw_prompts(fs, task, cfg.prompt.N if N is None else N, batch, cfg.task.label_noise, gen)
