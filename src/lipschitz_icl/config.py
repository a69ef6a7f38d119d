"""Run configuration: pydantic v2 models, YAML in and out, dotted ``key.sub=value`` overrides.

Symbols follow DESIGN.md: K, d features; p_k token probabilities; sigma token noise; N context
tokens; L the Lipschitz bound of the task class; tau label noise; eta the step size.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError, UserInputError

MAX_ELEMENTS = 2**31  # refuse tensors larger than this many elements (protects memory)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class FeaturesConfig(_Strict):
    kind: Literal["orthonormal", "gaussian", "simplex", "file"] = "orthonormal"
    K: int = Field(5, ge=2, le=100_000, description="number of features K")
    d: int = Field(5, ge=1, le=1_000_000, description="ambient dimension d")
    path: str | None = Field(None, description="feature file (.npy or .csv, K rows of d numbers)")
    probs: Literal["uniform", "imbalanced"] | list[float] = "uniform"  # p_k
    p_max: float = Field(0.5, gt=0, lt=1, description="p of the dominant feature (imbalanced)")
    noise: float = Field(0.0, ge=0, le=1e6, description="token noise sigma")
    scale: float = Field(1.0, gt=0, le=1e6, description="multiply every v_k by this (scales Delta)")


    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        """For kind=file, K and d are read off the file."""
        if isinstance(data, dict) and data.get("kind") == "file" and isinstance(data.get("path"), str):
            from .features import load_feature_file

            arr = load_feature_file(data["path"])
            for key, val in (("K", arr.shape[0]), ("d", arr.shape[1])):
                if data.get(key) not in (None, val):
                    raise ValueError(f"{key}={data[key]} does not match the file's shape {arr.shape}")
            data = {**data, "K": arr.shape[0], "d": arr.shape[1]}
        return data

    @field_validator("probs")
    @classmethod
    def _probs(cls, v: Any) -> Any:
        if isinstance(v, list):
            if not all(math.isfinite(x) and x >= 0 for x in v):
                raise ValueError("explicit probabilities must be finite and >= 0")
            if abs(sum(v) - 1.0) > 1e-6:
                raise ValueError(f"explicit probabilities must sum to 1 (they sum to {sum(v):g})")
        return v

    @model_validator(mode="after")
    def _shape(self) -> FeaturesConfig:
        if self.kind == "orthonormal" and self.K > self.d:
            raise ConfigError("features.K", f"orthonormal features need K <= d (got K={self.K}, d={self.d})")
        if self.kind == "simplex" and self.K - 1 > self.d:
            raise ConfigError("features.K", f"simplex features need K - 1 <= d (got K={self.K}, d={self.d})")
        if self.kind == "file" and not self.path:
            raise ConfigError("features.path", "features.kind=file needs a .npy or .csv path")
        if isinstance(self.probs, list) and len(self.probs) != self.K:
            raise ConfigError("features.probs", f"lists {len(self.probs)} values but K={self.K}")
        if self.K * self.d > MAX_ELEMENTS:
            raise ConfigError("features.d", f"K*d = {self.K * self.d} is too large (at most {MAX_ELEMENTS})")
        return self


class PromptConfig(_Strict):
    N: int = Field(50, ge=1, le=10_000_000, description="context tokens per prompt")


class TaskConfig(_Strict):
    kind: str = Field("linear", description="task class: a registered name")
    L: float = Field(2.0, gt=0, description="Lipschitz bound L")
    label_noise: float = Field(0.0, ge=0, le=1e6, description="label noise tau")
    params: dict[str, Any] = Field(default_factory=dict, description="class-specific options")
    kernel_samples: int = Field(4096, ge=2, le=10_000_000, description="Monte-Carlo functions for Sigma")



class ModelConfig(_Strict):
    kind: Literal["reduced"] = "reduced"
    init: Literal["zero", "random"] = "zero"  # Q^(0)
    init_scale: float = Field(0.01, ge=0, le=1e6)


class EngineConfig(_Strict):
    kind: Literal["kernel", "sampled"] = "kernel"
    counts: Literal["multinomial", "mean_field"] = "multinomial"
    draws: int = Field(256, ge=1, le=10_000_000, description="kernel: multinomial count draws B")
    batch: int = Field(1024, ge=1, le=10_000_000, description="sampled: prompts per step")
    resample: bool | None = Field(
        None, description="fresh draws every step; default: true for sgd, false otherwise"
    )
    space: Literal["auto", "S", "Q"] = Field(
        "auto", description="kernel: optimise S = V^T Q V (K x K) or Q (d x d); auto: S unless adam"
    )
    dtype: Literal["float64", "float32"] = "float64"
    device: Literal["auto", "cpu", "cuda"] = "cpu"


class TrainConfig(_Strict):
    optimizer: Literal["gd", "sgd", "adam"] = "gd"
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


class AnalysisConfig(_Strict):
    t1_level: float = Field(0.5, gt=0, lt=1, description="T_1: first step with min Attn_k >= this")
    eps_attn: float = Field(0.1, gt=0, lt=1, description="converged attention: min Attn_k >= 1-this")


class TheoryConfig(_Strict):
    c: float = Field(1.0, gt=0, description="L* = c / (Delta delta)")
    band: float = Field(0.1, ge=0, lt=1, description="near-threshold band: |L/L* - 1| < this")


class Config(_Strict):
    name: str | None = Field(None, description="run name (default: derived from config)")
    seed: int = Field(0, ge=0, le=2**63 - 1)
    plugins: list[str] = Field(default_factory=list, description="modules to import (task classes)")
    features: FeaturesConfig = Field(default_factory=FeaturesConfig)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)
    theory: TheoryConfig = Field(default_factory=TheoryConfig)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None:
            import re

            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", v):
                raise ValueError("name may use letters, digits, '.', '_' and '-' (max 128)")
        return v

    @model_validator(mode="after")
    def _registered(self) -> Config:
        from .tasks import task_names

        for mod in self.plugins:
            import_plugin(mod)
        names = task_names()
        if self.task.kind not in names:
            raise ConfigError("task.kind", f"{self.task.kind!r} is not registered (known: {', '.join(names)})")
        if self.eval.other_class is not None and self.eval.other_class not in names:
            raise ConfigError(
                "eval.other_class", f"{self.eval.other_class!r} is not registered (known: {', '.join(names)})"
            )
        if self.engine.kind == "sampled":
            size = self.engine.batch * (self.prompt.N + 1) * self.features.d
            if size > MAX_ELEMENTS:
                raise ConfigError("engine.batch", f"batch*(N+1)*d = {size} is too large (at most {MAX_ELEMENTS})")
        return self

    @property
    def resample(self) -> bool:
        """Fresh draws each step (SGD on fresh batches) or a fixed set (full-batch GD)."""
        if self.engine.resample is not None:
            return self.engine.resample
        return self.train.optimizer == "sgd"

    def config_hash(self) -> str:
        """Stable hash of everything that changes the run's numbers (the name excluded)."""
        data = self.model_dump(mode="json", exclude={"name"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def import_plugin(module: str) -> None:
    """Import a user module that registers task classes (named explicitly in ``plugins``)."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise ConfigError("plugins", f"module {module!r} cannot be imported ({e})") from None


# --------------------------------------------------------------------------- loading


def _format_validation_error(err: ValidationError) -> ConfigError:
    first = err.errors()[0]
    inner = (first.get("ctx") or {}).get("error")
    if isinstance(inner, ConfigError):
        return inner
    loc = ".".join(str(p) for p in first["loc"]) or "config"
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
        parent = first["loc"][:-1]
        allowed = _allowed_keys(parent)
        if allowed:
            msg += f" (allowed: {', '.join(allowed)})"
    elif first["type"] == "missing":
        msg = "required key is missing"
    elif "input" in first and first["type"] not in ("value_error",) and not isinstance(
        first["input"], dict | list
    ):
        msg += f" (got {first['input']!r})"
    return ConfigError(loc, msg)


def _allowed_keys(loc: tuple) -> list[str]:
    model: type[BaseModel] = Config
    for part in loc:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None) if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def validate_config(data: Any) -> Config:
    """Validate a plain mapping into a Config, raising ConfigError with one clear line."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("config", f"must be a mapping of keys to values (got {type(data).__name__})")
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise _format_validation_error(e) from None
    except RecursionError:
        raise ConfigError("config", "nested too deeply") from None


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file with the safe loader; every failure is a UserInputError naming the file."""
    p = Path(path)
    if not p.is_file():
        raise UserInputError(f"{path}: no such file")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UserInputError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise UserInputError(f"{path}: cannot be read ({e.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserInputError(f"{path}: malformed YAML{where}") from None
    except RecursionError:
        raise UserInputError(f"{path}: YAML nested too deeply") from None


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``key.sub=value``; the value is read as YAML (so 1e-3, true, [0.5, 0.5] work)."""
    if "=" not in text:
        raise UserInputError(f"override {text!r}: expected key.sub=value")
    key, _, raw = text.partition("=")
    parts = key.strip().split(".")
    if not all(parts):
        raise UserInputError(f"override {text!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        raise UserInputError(f"override {text!r}: value is not valid YAML") from None
    return parts, value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise UserInputError(f"override {text!r}: {part} is not a section")
            node = child
        node[parts[-1]] = value
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults when path is None), apply overrides, validate."""
    data = read_yaml(path) if path is not None else {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("config", f"{path} must hold a mapping of keys to values")
    return validate_config(apply_overrides(data, list(overrides or [])))


def default_config() -> Config:
    return Config()
