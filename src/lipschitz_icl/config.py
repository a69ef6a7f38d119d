"""Run configuration: the pydantic v2 schema, validation and the config hash.

Reading YAML files and applying ``key.sub=value`` overrides live in ``config_io``.

Symbols follow docs/DESIGN.md: K, d features; p_k token probabilities; sigma token noise; N context
tokens; L the Lipschitz bound of the task class; tau label noise; eta the step size.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .config_io import apply_overrides, check_shape, format_validation_error, import_plugin, number_fields, read_yaml  # noqa: F401
from .config_io import as_whole_number as _whole
from .config_io import loc as _loc  # noqa: F401 - re-exported
from .config_io import short as _short
from .engines import engine_class
from .errors import ConfigError
from .features import FeatureFiles, anchor_feature_path, read_file_section  # noqa: F401 - re-exported
from .inputs import check_continuous_section, is_continuous
from .limits import MAX_ENV, max_elements
from .models import factored_size_checks
from .tasks import make_task, task_names
from .transformer import size_checks

NEURAL_MODELS = ("factored", "transformer")  # trained in float32 by default on the sampled engine
FACTORED_MODELS = ("factored", "linear_attention_factored")  # separate W_Q, W_K of width d_k
RANDOM_INIT_MODELS = (*NEURAL_MODELS, "linear_attention_factored")  # zero weights are a stationary point
FLOAT32_MAX = 3.4028234663852886e38  # the largest float32: a step size above it cannot be applied
# (section, key, default): out of the config hash at their default (older configs keep their hashes)
HASH_DEFAULTS = (("engine", "fused", False), ("features", "cov", None), ("eval", "geometry", None),
                 ("prompt", "draw_dtype", "engine"))
_PLUGIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False, strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        """true/false and bytes are not numbers (pydantic reads 1, 0, b'1' -> 1); 1e4, 1_000 are whole numbers."""
        number, whole = number_fields(cls)[info.field_name]
        if number and isinstance(v, bool | bytes | bytearray):
            raise ValueError(f"must be a number (got {_short(v)})")
        return _whole(v) if whole else v


class FeaturesConfig(_Strict):
    kind: Literal["orthonormal", "gaussian", "simplex", "file", "sphere", "gaussian_inputs"] = Field(
        "orthonormal", description="v_k = e_k (K <= d), random unit vectors, a regular simplex, read from path; or "
        "continuous inputs: sphere (uniform on S^{d-1}), gaussian_inputs (N(0, cov))")
    K: int = Field(5, ge=2, le=100_000, description="number of features K")
    d: int = Field(5, ge=1, le=1_000_000, description="ambient dimension d")
    path: str | None = Field(None, description="feature file (.npy or .csv, K rows of d numbers)")
    probs: Literal["uniform", "imbalanced"] | list[float] = Field(  # p_k
        "uniform", description="token probabilities p_k: uniform, imbalanced (p_max on feature 1), or K numbers")
    p_max: float = Field(0.5, gt=0, lt=1, description="p of the dominant feature (imbalanced)")
    noise: float = Field(0.0, ge=0, le=1e6, description="token noise sigma")
    scale: float = Field(1.0, gt=0, le=1e6, description="multiply every v_k by this (scales Delta)")
    file_sha256: str | None = Field(None, exclude_if=lambda v: v is None, description="kind=file: sha256 of the "
                                    "file's bytes, set when the config is loaded (checked if given)")
    cov: list[list[float]] | None = Field(None, description="gaussian_inputs: d x d covariance (default I_d/d)")
    _file_values: np.ndarray | None = PrivateAttr(None)  # kind=file: the K x d numbers read at load time

    @model_validator(mode="wrap")
    @classmethod
    def _from_file(cls, data: Any, handler: Any, info: ValidationInfo) -> FeaturesConfig:
        """kind=file: the file is read once, here (``read_file_section``; not again when the ``feature_files``
        cache of ``validate_config`` holds it); its numbers stay with the config, its sha256 enters the hash."""
        if not (isinstance(data, dict) and data.get("kind") == "file" and isinstance(data.get("path"), str)):
            return handler(data)
        data, arr = read_file_section(data, (info.context or {}).get("feature_files"))
        model = handler(data)
        model._file_values = arr
        return model

    def file_values(self) -> np.ndarray:
        """kind=file: the K x d feature numbers read when the config was loaded."""
        if self._file_values is None:
            raise ConfigError("features.path", "the features were not read from a file (features.kind=file)")
        return self._file_values

    @field_validator("probs", mode="before")
    @classmethod
    def _probs_shape(cls, v: Any) -> Any:
        allowed = "must be 'uniform', 'imbalanced' or a list of K probabilities"
        if isinstance(v, str):
            if v not in ("uniform", "imbalanced"):
                raise ValueError(f"{allowed} (got {_short(v)})")
        elif not isinstance(v, list):
            raise ValueError(f"{allowed} (got {type(v).__name__})")
        elif not all(isinstance(x, int | float) and not isinstance(x, bool) for x in v):
            bad = next(x for x in v if not isinstance(x, int | float) or isinstance(x, bool))
            raise ValueError(f"{allowed}; {_short(bad)} is not a number")
        else:  # p_k: explicit probabilities
            if not all(math.isfinite(x) and x >= 0 for x in v):
                raise ValueError("explicit probabilities must be finite and >= 0")
            if abs(math.fsum(v) - 1.0) > 1e-6:
                raise ValueError(f"explicit probabilities must sum to 1 (they sum to {math.fsum(v):g})")
        return v

    @model_validator(mode="after")
    def _shape(self) -> FeaturesConfig:
        if self.kind == "orthonormal" and self.K > self.d:
            raise ConfigError("features.K", f"orthonormal features need K <= d (got K={self.K}, d={self.d})")
        if self.kind == "simplex" and self.K - 1 > self.d:
            raise ConfigError("features.K", f"simplex features need K - 1 <= d (got K={self.K}, d={self.d})")
        if self.kind == "file" and not self.path:
            raise ConfigError("features.path", "features.kind=file needs a .npy or .csv path")
        if self.kind != "file" and self.file_sha256 is not None:
            raise ConfigError("features.file_sha256", f"only features.kind=file has a file (kind={self.kind})")
        check_continuous_section(self, FeaturesConfig.model_fields["K"].default)  # cov; no K, probs... if continuous
        if isinstance(self.probs, list) and len(self.probs) != self.K:
            raise ConfigError("features.probs", f"must list K={self.K} probabilities (got {len(self.probs)})")
        if 4 * self.K * self.d > (limit := max_elements()):
            raise ConfigError("features.d", f"the K x d features (K={self.K}, d={self.d}) would need about "
                              f"{4 * self.K * self.d:.3g} elements in memory (at most {limit:.3g})")
        return self


class PromptConfig(_Strict):
    N: int = Field(50, ge=1, le=10_000_000, description="context tokens per prompt")
    draw_dtype: Literal["engine", "float32"] = Field(
        "engine", description="sampled: the training prompts' normals, functions and labels are made in "
                              "engine.dtype, or in float32 (5x faster draws on a CPU) and cast to engine.dtype")


class TaskConfig(_Strict):
    kind: str = Field("linear", description="task class: a registered name")
    L: float = Field(2.0, gt=0, le=1e6, description="Lipschitz bound L")
    label_noise: float = Field(0.0, ge=0, le=1e6, description="label noise tau")
    params: dict[str, Any] = Field(default_factory=dict, description="class-specific options")
    kernel_samples: int = Field(4096, ge=2, le=10_000_000, description="Monte-Carlo functions for Sigma")


class ModelConfig(_Strict):
    kind: Literal["reduced", "factored", "transformer", "linear_attention", "linear_attention_factored"] = Field(
        "reduced", description="reduced: merged Q; factored: separate W_Q, W_K; transformer: embedded (x, y) "
        "tokens; linear_attention: y_hat = sum_i y_i x_i^T Gamma x_q / n (merged key-query Gamma); "
        "linear_attention_factored: the same with Gamma = W_K^T W_Q / sqrt(d_k)"
    )
    init: Literal["auto", "zero", "random"] = Field(
        "auto", description="Q^(0) (Gamma^(0)) = 0 or random; auto: zero for reduced and linear_attention, "
        "random otherwise"
    )
    init_scale: float = Field(0.01, ge=0, le=1e6, description="std of random init (reduced, factored)")
    d_k: int | None = Field(None, ge=1, le=100_000, description="factored: key/query dimension (default d)")
    n_layers: int = Field(1, ge=1, le=64, description="transformer: attention layers")
    n_heads: int = Field(1, ge=1, le=64, description="transformer: heads per layer")
    width: int = Field(64, ge=1, le=16_384, description="transformer: residual width (a multiple of n_heads)")
    mlp: bool = Field(False, description="transformer: an MLP block after each attention layer")
    layernorm: bool = Field(False, description="transformer: pre-LayerNorm in each block and before the readout")

    @model_validator(mode="after")
    def _kind_fields(self) -> ModelConfig:
        if self.kind in RANDOM_INIT_MODELS and self.init == "zero":
            raise ConfigError("model.init", f"model.kind={self.kind} needs random init (zero weights are a stationary "
                              "point)")
        if self.kind == "transformer":
            if self.width % self.n_heads:
                raise ConfigError("model.width", f"must be a multiple of model.n_heads (got width={self.width}, "
                                  f"n_heads={self.n_heads})")
        else:
            for key in ("n_layers", "n_heads"):
                if getattr(self, key) != 1:
                    raise ConfigError(f"model.{key}", f"only model.kind=transformer has {key} != 1 (kind={self.kind})")
            for key in ("mlp", "layernorm"):
                if getattr(self, key):
                    raise ConfigError(f"model.{key}", f"only model.kind=transformer has {key} (kind={self.kind})")
        if self.d_k is not None and self.kind not in FACTORED_MODELS:
            raise ConfigError("model.d_k", f"only model.kind=factored or linear_attention_factored has d_k "
                              f"(kind={self.kind})")
        return self


class EngineConfig(_Strict):
    kind: str = Field("kernel", description="engine: a registered name (kernel, sampled, or a plugin's)")
    counts: Literal["multinomial", "mean_field", "exact"] = Field("multinomial", description="kernel: context "
                                                                   "counts from B draws, the mean field N p, or exact")
    draws: int = Field(256, ge=1, le=10_000_000, description="kernel: multinomial count draws B")
    batch: int = Field(1024, ge=1, le=10_000_000, description="sampled: prompts per step")
    resample: bool | None = Field(None, description="fresh draws every step; default: true for sgd, false otherwise")
    space: Literal["auto", "S", "Q"] = Field(
        "auto", description="kernel: optimise S = V^T Q V (K x K) or Q (d x d); auto: S unless adam"
    )
    dtype: Literal["float64", "float32"] = Field(
        "float64", description="float64; unset with the sampled engine and a neural model: float32"
    )
    device: Literal["auto", "cpu", "cuda"] = Field("cpu", description="where to train (auto: cuda if available)")
    fused: bool = Field(False, description="kernel, gd/sgd in S space, CPU: the step in one compiled call "
                                           "(needs numba)")
    train_prompts: int | None = Field(
        None, ge=1, le=100_000_000, description="sampled: a fixed training set of M prompts (default: none)"
    )


class TrainConfig(_Strict):
    optimizer: Literal["gd", "sgd", "adam"] = Field(
        "gd", description="gradient descent, SGD on fresh prompts (sampled engine), or Adam")
    lr: float = Field(1.0, gt=0, description="step size eta")
    steps: int = Field(20_000, ge=1, le=100_000_000, description="step budget")
    eps: float = Field(1e-3, gt=0, description="target loss epsilon")
    eps_mode: Literal["absolute", "relative"] = Field(
        "absolute", description="stop at loss <= eps, or at loss <= eps * initial loss"
    )
    log_every: int = Field(10, ge=1, description="record metrics every this many steps")
    diverge_factor: float = Field(1e4, gt=1, description="diverged: loss above this times the initial loss")


class EvalConfig(_Strict):
    functions: int = Field(256, ge=1, le=1_000_000, description="unseen test functions")
    other_class: str | None = Field(None, description="also test on this task class")
    geometry: bool | None = Field(None, description="record ||Q||, window, n_eff (default: continuous inputs)")


class AnalysisConfig(_Strict):
    t1_level: float = Field(0.5, gt=0, lt=1, description="T_1: first step with min Attn_k >= this")
    eps_attn: float = Field(0.1, gt=0, lt=1, description="converged attention: min Attn_k >= 1-this")


class TheoryConfig(_Strict):
    c: float = Field(1.0, gt=0, description="L* = c / (Delta delta)")
    band: float = Field(0.1, ge=0, lt=1, description="near-threshold band: |L/L* - 1| < this")


class Config(_Strict):
    name: str | None = Field(None, description="run name (default: derived from config)")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="seed of every random stream of the run")
    plugins: list[str] = Field(default_factory=list, description="modules to import (task classes)")
    features: FeaturesConfig = Field(default_factory=FeaturesConfig, description="the feature vectors v_k")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="the prompts")
    task: TaskConfig = Field(default_factory=TaskConfig, description="the L-Lipschitz task class")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the attention model")
    engine: EngineConfig = Field(default_factory=EngineConfig, description="how the loss is evaluated")
    train: TrainConfig = Field(default_factory=TrainConfig, description="the optimiser and when to stop")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="the unseen-function tests")
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig, description="the phase analysis")
    theory: TheoryConfig = Field(default_factory=TheoryConfig, description="the threshold L*")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        # a run name becomes a folder name: no separators, no leading dot, so it cannot escape
        if v is not None and not _RUN_NAME.fullmatch(v):
            raise ValueError("may use letters, digits, '.', '_' and '-', must start with a letter or digit "
                             "(at most 128 characters)")
        return v

    @field_validator("plugins")
    @classmethod
    def _plugins(cls, v: list[str]) -> list[str]:
        for mod in v:
            if not _PLUGIN_NAME.fullmatch(mod) or len(mod) > 200:
                raise ValueError(f"{_short(mod)} is not a module name (allowed: dotted Python identifiers)")
        return v

    @model_validator(mode="after")
    def _registered(self) -> Config:
        self._default_engine()
        self._default_dtype()
        for mod in self.plugins:
            import_plugin(mod)
        names = task_names()
        if self.task.kind not in names:
            raise ConfigError("task.kind", f"{self.task.kind!r} is not registered (known: {', '.join(names)})")
        if self.eval.other_class is not None and self.eval.other_class not in names:
            raise ConfigError("eval.other_class",
                              f"{self.eval.other_class!r} is not registered (known: {', '.join(names)})")
        if self.engine.dtype == "float32" and self.train.lr > FLOAT32_MAX:
            raise ConfigError("train.lr", f"must be at most {FLOAT32_MAX:.4g} with engine.dtype=float32 "
                              f"(got {self.train.lr:g})")
        engine_class(self.engine.kind).check_config(self)  # an unregistered kind is named with the known ones
        self._check_sizes()
        return self

    def _default_engine(self) -> None:  # continuous inputs: the sampled engine unless engine.kind is given
        if "kind" not in self.engine.model_fields_set and is_continuous(self.features.kind):
            self.engine.kind = "sampled"

    def _default_dtype(self) -> None:
        """A neural model (factored, transformer) on the sampled engine trains in float32 unless
        engine.dtype is given: several times faster on CPU, and its runs do not need float64."""
        if ("dtype" not in self.engine.model_fields_set and self.engine.kind == "sampled"
                and self.model.kind in NEURAL_MODELS):
            self.engine.dtype = "float32"

    def _check_sizes(self) -> None:
        """Refuse, before anything is allocated, a run whose working set would exceed limits.max_elements().

        Each estimate counts the largest tensors of a stage times the copies that live at once
        (activations, autograd buffers), so the limit bounds the memory a run needs, not one tensor."""
        K, d = self.features.K, self.features.d
        tasks = {"task.kind": _task(self.task.kind, self.task.L, d, self.task.params)}
        if self.eval.other_class is not None:
            tasks["eval.other_class"] = _task(self.eval.other_class, self.task.L, d, {})
        e, t = self.engine, self.train
        checks: list[tuple[str, str, int]] = [
            ("features.K", f"the K x K matrices (Sigma, attention, distances; K={K})", 8 * K * K),
            ("features.d", f"the d x d key-query matrix Q (d={d})", 4 * d * d),
        ]
        checks.extend(engine_class(e.kind).working_set(self, tasks))  # the engine's own largest tensors
        batches = {"engine.batch": e.batch, "eval.functions": self.eval.functions}
        if self.model.kind == "transformer":  # parameters with gradients and optimizer state, activations
            checks += size_checks(self.model, d, self.prompt.N + 1, batches)
        elif self.model.kind in FACTORED_MODELS:  # W_Q, W_K (d_k x d) likewise, and the keys of a batch
            checks += factored_size_checks(self.model.d_k or d, d, self.prompt.N + 1, batches)
        rows = (t.steps // t.log_every + 2) * (2 * K * K + 16)
        checks.append(("train.log_every", f"the recorded metrics ({rows:.3g} rows: steps={t.steps}, "
                       f"log_every={t.log_every}, K={K})", 5 * rows))
        limit = max_elements()  # read once: the environment is asked for every point of a sweep
        for field, what, size in checks:
            if size > limit:
                raise ConfigError(field, f"{what} would need about {size:.3g} elements in memory (at most "
                                  f"{limit:.3g}; choose smaller sizes, or raise {MAX_ENV} on a larger machine)")

    @property
    def resample(self) -> bool:
        """Fresh draws each step (SGD on fresh batches) or a fixed set (full-batch GD)."""
        if self.engine.resample is not None:
            return self.engine.resample
        return self.train.optimizer == "sgd"

    def config_hash(self) -> str:
        """Stable hash of everything that changes the run's numbers (the name excluded). Keys added
        later (HASH_DEFAULTS: engine.fused, features.cov, eval.geometry, prompt.draw_dtype) enter only when set, so the
        hashes of configs written before they existed stay the same."""
        data = self.model_dump(mode="json", exclude={"name"})
        for section, key, default in HASH_DEFAULTS:
            if data[section][key] == default:
                del data[section][key]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def with_overrides(self, overrides: list[str]) -> Config:
        """A new validated Config: this one with ``key.sub=value`` overrides applied."""
        return validate_config(apply_overrides(self.model_dump(mode="json"), list(overrides)))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _task(kind: str, L: float, d: int, params: dict) -> Any:
    """The task class instance (checks its params); a plugin class that fails is named."""
    try:
        return make_task(kind, L, d, params)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - user code: report it as one line
        raise ConfigError("task.kind", f"task class {kind!r} cannot be created ({type(e).__name__}: {e})") from None

# --------------------------------------------------------------------------- loading

def validate_config(data: Any, feature_files: FeatureFiles | None = None, shape_checked: bool = False) -> Config:
    """A plain mapping as a Config (ConfigError: one clear line); ``feature_files``: a sweep's files, read once;
    ``shape_checked``: built of parts that passed ``check_shape`` (a sweep's base and values), not walked again."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError("config", f"must be a mapping of keys to values (got {type(data).__name__})")
    if not shape_checked:
        check_shape(data)
    try:
        return Config.model_validate(data, context={"feature_files": feature_files})
    except ValidationError as e:
        raise format_validation_error(e, Config) from None
    except RecursionError:
        raise ConfigError("config", "nested too deeply") from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults when path is None), apply overrides, validate."""
    data = {} if path is None else read_yaml(path)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError("config", f"{path} must hold a mapping of keys to values")
    anchor_feature_path(data, Path(path).parent if path is not None else None)  # beside the config file
    return validate_config(apply_overrides(data, list(overrides or [])))


def default_config() -> Config:
    return Config()
