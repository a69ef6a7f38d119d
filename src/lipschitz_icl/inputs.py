"""Continuous input distributions: tokens drawn from a density on R^d, not from K features.

    features.kind: sphere            x uniform on the unit sphere S^{d-1} (times features.scale)
    features.kind: gaussian_inputs   x ~ N(0, I_d / d), or N(0, C) with C = features.cov (d x d,
                                     symmetric positive definite), times features.scale

A ContinuousInputs answers the two calls that draw a prompt's tokens (``sample_ids``, ``tokens``)
as a FeatureSet does, so ``engines.prompts.draw_prompts`` and every model take either. There is no
finite feature set: K = 0, every feature id is -1, and what needs one (the kernel engine, Sigma on
the features, Delta, delta, L*, Attn_k) is refused or recorded as undefined, never made up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import torch

from .errors import ConfigError
from .rng import normals

CONTINUOUS_KINDS = ("sphere", "gaussian_inputs")
NO_FEATURE = -1  # the feature id of every token of a continuous input distribution
SYMMETRY_RTOL = 1e-10  # features.cov: |C - C^T| at most this times max |C|


def is_continuous(kind: str) -> bool:
    """Whether ``features.kind`` names a continuous input distribution (no finite feature set)."""
    return kind in CONTINUOUS_KINDS


@dataclass(frozen=True)
class ContinuousInputs:
    """Tokens from a continuous density on R^d (see the module doc)."""

    kind: str  # "sphere" or "gaussian_inputs"
    d: int
    scale: float = 1.0
    chol: torch.Tensor | None = None  # gaussian_inputs with features.cov: C = chol chol^T (lower triangular)
    dtype: torch.dtype = torch.float64
    K: ClassVar[int] = 0  # no finite feature set
    noise: ClassVar[float] = 0.0  # no token noise on top of the density

    def sample_ids(self, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
        """Feature ids: NO_FEATURE everywhere (nothing is drawn)."""
        return torch.full(shape, NO_FEATURE, dtype=torch.long)

    def tokens(self, ids: torch.Tensor, gen: torch.Generator, draw_dtype: torch.dtype | None = None) -> torch.Tensor:
        """ids.shape + (d,) tokens drawn from ``gen`` (one standard normal per coordinate, drawn in ``draw_dtype``:
        see rng.normals; the transform is computed in ``self.dtype``)."""
        z = normals((*ids.shape, self.d), gen, self.dtype, draw_dtype)
        if self.kind == "sphere":
            x = z / z.norm(dim=-1, keepdim=True)  # uniform on S^{d-1}
        elif self.chol is None:
            x = z / math.sqrt(self.d)  # N(0, I_d / d)
        else:
            x = z @ self.chol.to(self.dtype).T  # N(0, C)
        return x * self.scale if self.scale != 1.0 else x

    def with_dtype(self, dtype: torch.dtype) -> ContinuousInputs:
        return replace(self, dtype=dtype)

    @property
    def covariance(self) -> torch.Tensor:
        """E[x x^T] (d x d): I/d for the sphere and the default Gaussian, C otherwise (times scale^2)."""
        if self.chol is None:
            return torch.eye(self.d, dtype=torch.float64) * self.scale**2 / self.d
        c = self.chol.double()
        return c @ c.T * self.scale**2


def check_covariance(cov: Any, d: int) -> np.ndarray:
    """features.cov as a float64 (d, d) array, or ConfigError naming what is wrong: the shape, a value
    that is not a finite number, asymmetry, or a matrix that is not positive definite."""
    field = "features.cov"
    if not isinstance(cov, list) or len(cov) != d or not all(isinstance(r, list) and len(r) == d for r in cov):
        rows = len(cov) if isinstance(cov, list) else type(cov).__name__
        raise ConfigError(field, f"must be a d x d list of lists with d = features.d = {d} (got {rows} rows)")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for r in cov for v in r):
        raise ConfigError(field, "every entry must be a number")
    C = np.asarray(cov, dtype=np.float64)
    if not np.isfinite(C).all():
        raise ConfigError(field, "every entry must be finite")
    biggest = float(np.abs(C).max())
    if float(np.abs(C - C.T).max()) > SYMMETRY_RTOL * biggest:
        raise ConfigError(field, f"must be symmetric (largest |C - C^T| is {float(np.abs(C - C.T).max()):.3g})")
    try:
        np.linalg.cholesky(C)
    except np.linalg.LinAlgError:
        low = float(np.linalg.eigvalsh(C).min())
        raise ConfigError(field, f"must be positive definite (smallest eigenvalue {low:.3g})") from None
    return C


def check_continuous_section(features: Any, default_K: int) -> None:
    """The checks of a ``features`` section that concern continuous inputs: features.cov (only with
    gaussian_inputs; d x d, symmetric positive definite), and, for a continuous kind, no key that
    describes a finite feature set (K other than its default, path, probs, token noise)."""
    kind = features.kind
    if features.cov is not None:
        if kind != "gaussian_inputs":
            raise ConfigError("features.cov", f"only features.kind=gaussian_inputs has a covariance (kind={kind})")
        check_covariance(features.cov, features.d)
    if not is_continuous(kind):
        return
    finite_only = {"K": features.K != default_K, "path": features.path is not None,
                   "probs": features.probs != "uniform", "noise": features.noise != 0}
    for key, given in finite_only.items():
        if given:
            raise ConfigError(f"features.{key}", f"continuous inputs (features.kind={kind}) have no finite feature "
                              "set, so no K, path, probs or token noise; leave it at its default")


def records_geometry(cfg: Any) -> bool:
    """Whether a run records the geometry metrics (``geometry.GEOMETRY_METRICS``): eval.geometry, by
    default true with continuous inputs and false otherwise (so the paper's kernel runs pay nothing)."""
    return cfg.eval.geometry if cfg.eval.geometry is not None else is_continuous(cfg.features.kind)


def make_continuous(cfg: Any, dtype: torch.dtype = torch.float64) -> ContinuousInputs:
    """The ContinuousInputs a FeaturesConfig of a continuous kind describes."""
    chol = None
    if cfg.kind == "gaussian_inputs" and cfg.cov is not None:
        chol = torch.linalg.cholesky(torch.as_tensor(check_covariance(cfg.cov, cfg.d)))
    return ContinuousInputs(cfg.kind, int(cfg.d), float(cfg.scale), chol, dtype)
