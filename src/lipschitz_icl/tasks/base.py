"""Task classes: distributions over functions f: R^d -> R whose Lipschitz constant is at most L.

A class samples a batch of functions from a torch.Generator (as a dict of parameter tensors
with a leading function axis), evaluates them on points, certifies their Lipschitz bound, and
gives its kernel Sigma_nm = E_f[f(v_n) f(v_m)] on a feature set (closed form where one exists,
otherwise a Monte-Carlo estimate with its standard error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from ..errors import ConfigError, TaskEvaluationError
from ..limits import max_elements
from ..registry_names import bind

Funcs = dict[str, torch.Tensor]  # parameters of n functions, each with leading axis n

_REGISTRY: dict[str, type[TaskClass]] = {}
MAX_PARAM = 1e6  # numeric class options (widths, counts, scales) lie in (0, MAX_PARAM]
_CHUNK_ELEMENTS = 2**24  # Monte-Carlo kernel: products formed in chunks of about this many elements


@dataclass(frozen=True)
class KernelEstimate:
    sigma: torch.Tensor  # Sigma (K x K)
    se: torch.Tensor  # elementwise standard error (zeros when exact)
    samples: int  # Monte-Carlo functions used (0 when exact)
    F: torch.Tensor | None = None  # (samples, K) values f(v_k) behind a Monte-Carlo estimate


class TaskClass:
    """Base class. Subclasses set ``name`` and ``defaults`` and implement sample/evaluate."""

    name: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    # True when the law of f is invariant under orthogonal maps of the input (f(x) and f(Ox) have one law):
    # Sigma on the features is then a function of G = V^T V, and a setting inherits every symmetry of G
    # (lipschitz_icl.equivalence). A class that does not declare it is treated as not invariant.
    rotation_invariant: ClassVar[bool] = False

    def __init__(self, L: float, d: int, **params: Any) -> None:
        self.L = float(L)  # the class's Lipschitz bound L
        self.d = int(d)
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            allowed = ", ".join(self.defaults) or "none"
            raise ConfigError(f"task.params.{unknown[0]}", f"unknown option for {self.name} (allowed: {allowed})")
        merged = dict(self.defaults)
        for key, value in params.items():
            default = self.defaults[key]
            if isinstance(default, bool) or not isinstance(default, int | float):
                merged[key] = value
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ConfigError(f"task.params.{key}", f"must be a finite number (got {value!r})")
            if not 0 < value <= MAX_PARAM:
                raise ConfigError(f"task.params.{key}", f"must be in (0, {MAX_PARAM:g}] (got {value!r})")
            if isinstance(default, int) and not float(value).is_integer():
                raise ConfigError(f"task.params.{key}", f"must be an integer (got {value!r})")
            merged[key] = type(default)(value)
        self.params = merged

    # -- to implement -------------------------------------------------------------------
    def sample(self, n: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device | str = "cpu") -> Funcs:
        raise NotImplementedError

    def evaluate(self, funcs: Funcs, x: torch.Tensor) -> torch.Tensor:
        """f_i(x_ij): x of shape (n, m, d) -> (n, m)."""
        raise NotImplementedError

    def lipschitz(self, funcs: Funcs) -> torch.Tensor:
        """A certified Lipschitz bound of each function (n,); at most L."""
        first = next(iter(funcs.values()))
        return torch.full((_count(funcs),), self.L, device=first.device)

    def exact_kernel(self, V: torch.Tensor) -> torch.Tensor | None:
        """Sigma in closed form on features V (d x K), or None."""
        return None

    def elements(self, n: int, m: int) -> int:
        """An upper bound on the tensor elements ``sample(n)`` and ``evaluate`` on (n, m, d) points
        hold at once; the config refuses runs whose working set exceeds the element limit before anything is
        allocated.
        Override it when a class's parameters are larger than d per function or point."""
        return n * m * self.d + n * self.d

    # -- provided -----------------------------------------------------------------------
    @property
    def label(self) -> str:
        """The registered name and the Python class, for error messages."""
        cls = type(self)
        return f"{self.name!r} ({cls.__module__}.{cls.__qualname__})"

    def values_on(self, funcs: Funcs, V: torch.Tensor) -> torch.Tensor:
        """F_ik = f_i(v_k): (n, K). Raises TaskEvaluationError on non-finite values."""
        n = _count(funcs)
        F = self.evaluate(funcs, V.T.unsqueeze(0).expand(n, -1, -1))
        return check_finite(F, self.label)

    def kernel(self, V: torch.Tensor, gen: torch.Generator, samples: int = 4096) -> KernelEstimate:
        exact = self.exact_kernel(V)
        if exact is not None:
            return KernelEstimate(check_finite(exact, self.label), torch.zeros_like(exact), 0)
        K = V.shape[1]
        size = 2 * self.elements(samples, K)
        if size > (limit := max_elements()):
            raise ConfigError("task.kernel_samples", f"the Monte-Carlo kernel of {self.name!r} would need {size:.3g} "
                              f"elements (at most {limit:.3g}); lower kernel_samples")
        # drawn on the CPU (``gen`` is a CPU generator: the same functions on every device), then moved to V's
        funcs = {k: v.to(V.device) for k, v in self.sample(samples, gen, V.dtype).items()}
        F = self.values_on(funcs, V)
        # Sigma_nm = mean_i F_in F_im, with an elementwise standard error; rows of Sigma in chunks so the
        # (M, rows, K) products stay small whatever K
        sigma, se = (torch.empty(K, K, dtype=F.dtype, device=F.device) for _ in range(2))
        rows = max(1, _CHUNK_ELEMENTS // max(1, samples * K))
        for start in range(0, K, rows):
            r = slice(start, min(K, start + rows))
            prods = F[:, r].unsqueeze(2) * F.unsqueeze(1)  # (M, rows, K)
            sigma[r] = prods.mean(0)
            se[r] = prods.std(0) / math.sqrt(samples)
        check_finite(sigma, self.label)
        return KernelEstimate(sigma, check_finite(se, self.label), samples, F)


def check_finite(values: torch.Tensor, label: str) -> torch.Tensor:
    """``values`` if all finite; else TaskEvaluationError naming the task class (``label``)."""
    if not torch.isfinite(values).all():
        if not label.startswith("'"):
            label = repr(label)
        raise TaskEvaluationError(f"task class {label} returned NaN or infinite values")
    return values


def _count(funcs: Funcs) -> int:
    return next(iter(funcs.values())).shape[0]


def register_task(cls: type[TaskClass]) -> type[TaskClass]:
    """Class decorator: make a TaskClass subclass available as ``task.kind: <cls.name>``."""
    if not (isinstance(cls, type) and issubclass(cls, TaskClass)) or not cls.name:
        raise TypeError("register_task takes a TaskClass subclass with a non-empty name")
    bind(_REGISTRY, cls.name, cls, "task class")  # a built-in name, or another module's, is refused
    return cls


def task_names() -> list[str]:
    return sorted(_REGISTRY)


def make_task(kind: str, L: float, d: int, params: dict[str, Any] | None = None) -> TaskClass:
    if kind not in _REGISTRY:
        raise ConfigError("task.kind", f"{kind!r} is not registered (known: {', '.join(task_names())})")
    return _REGISTRY[kind](L, d, **(params or {}))
