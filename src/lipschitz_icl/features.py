"""Feature sets: K vectors v_1..v_K in R^d, token probabilities p_k, and token noise sigma.

A token of feature z is x = v_z + sigma * xi with xi ~ N(0, I_d / d) (docs/DESIGN.md).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .errors import ConfigError


@dataclass(frozen=True)
class FeatureSet:
    V: torch.Tensor  # (d, K): column k is v_k
    p: torch.Tensor  # (K,): p_k, token probabilities
    noise: float  # sigma

    @property
    def K(self) -> int:
        return self.V.shape[1]

    @property
    def d(self) -> int:
        return self.V.shape[0]

    @property
    def gram(self) -> torch.Tensor:
        """G = V^T V (K x K)."""
        return self.V.T @ self.V

    @property
    def distances(self) -> torch.Tensor:
        """||v_k - v_n|| for every pair (K x K)."""
        return torch.cdist(self.V.T, self.V.T)

    @property
    def delta_sep(self) -> float:
        """Delta = min_{k != n} ||v_k - v_n||."""
        D = self.distances
        mask = ~torch.eye(self.K, dtype=torch.bool, device=D.device)
        return float(D[mask].min())

    def sample_ids(self, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
        """Feature ids z ~ p, an integer tensor of the given shape."""
        n = int(np.prod(shape)) if shape else 1
        ids = torch.multinomial(self.p, n, replacement=True, generator=gen)
        return ids.reshape(shape)

    def tokens(self, ids: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """x = v_z + sigma xi, xi ~ N(0, I/d); shape ids.shape + (d,)."""
        x = self.V.T[ids]
        if self.noise > 0:
            xi = torch.randn(x.shape, generator=gen, dtype=x.dtype, device=x.device)
            x = x + self.noise * xi / self.d**0.5
        return x


MAX_FILE_ELEMENTS = 2**26  # a feature file holds at most this many numbers (K*d)
MAX_CSV_BYTES = 256 * 2**20


def _npy_shape(p: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Read only the header of a .npy file: its shape and dtype, before any data is loaded."""
    with open(p, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    return shape, dtype


def load_feature_file(path: str | Path) -> np.ndarray:
    """Load a (K, d) array of feature vectors from .npy (pickling disabled) or .csv."""
    p = Path(path)
    field = "features.path"
    if not p.is_file():
        raise ConfigError(field, f"{path}: no such file" if not p.exists() else f"{path}: not a file")
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".csv"):
        raise ConfigError(field, f"{path}: unsupported file type (allowed: .npy, .csv)")
    try:
        if suffix == ".npy":
            shape, dtype = _npy_shape(p)  # refuse a huge or pickled array before reading it
            if dtype.hasobject:
                raise ConfigError(field, f"{path}: holds pickled objects, which are refused")
            if int(np.prod(shape, dtype=np.float64)) > MAX_FILE_ELEMENTS:
                raise ConfigError(field, f"{path}: shape {shape} is too large (at most {MAX_FILE_ELEMENTS} numbers)")
            arr = np.load(p, allow_pickle=False)
        else:
            if p.stat().st_size > MAX_CSV_BYTES:
                raise ConfigError(field, f"{path}: larger than {MAX_CSV_BYTES // 2**20} MiB")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # an empty file is reported below, by shape
                arr = np.loadtxt(p, delimiter=",", dtype=np.float64, ndmin=2, encoding="utf-8")
    except ConfigError:
        raise
    except UnicodeDecodeError:
        raise ConfigError(field, f"{path}: not UTF-8 text (a .csv must hold K rows of d numbers)") from None
    except ValueError as e:
        text = str(e)
        if "pickle" in text.lower():
            raise ConfigError(field, f"{path}: holds pickled objects, which are refused") from None
        first = text.splitlines()[0][:80] if text else type(e).__name__
        raise ConfigError(field, f"{path}: not a numeric array ({first})") from None
    except (OSError, EOFError, MemoryError) as e:
        raise ConfigError(field, f"{path}: cannot be read as an array ({type(e).__name__}: {e})") from None
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ConfigError(field, f"{path}: must hold real numbers (got dtype {arr.dtype})")
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ConfigError(field, f"{path}: must be a (K, d) array with K >= 2 (got shape {arr.shape})")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ConfigError(field, f"{path}: holds NaN or infinite values")
    return arr


def _probs(cfg, K: int) -> np.ndarray:
    if cfg.probs == "uniform":
        return np.full(K, 1.0 / K)
    if cfg.probs == "imbalanced":
        rest = (1.0 - cfg.p_max) / (K - 1)
        return np.array([cfg.p_max] + [rest] * (K - 1))
    return np.asarray(cfg.probs, dtype=np.float64)


def _simplex(K: int, d: int) -> np.ndarray:
    """K unit vectors of a regular simplex centred at 0, embedded in R^d (needs d >= K - 1)."""
    E = np.eye(K) - 1.0 / K
    # coordinates in the (K-1)-dim subspace orthogonal to the all-ones vector
    U, _, _ = np.linalg.svd(E)
    coords = E @ U[:, : K - 1]
    coords /= np.linalg.norm(coords, axis=1, keepdims=True)
    out = np.zeros((K, d))
    out[:, : K - 1] = coords
    return out


def make_features(cfg, gen: torch.Generator, dtype: torch.dtype = torch.float64) -> FeatureSet:
    """Build the FeatureSet a FeaturesConfig describes; random kinds draw from ``gen``."""
    K, d = cfg.K, cfg.d
    if cfg.kind == "orthonormal":
        rows = np.zeros((K, d))
        rows[np.arange(K), np.arange(K)] = 1.0  # v_k = e_k
    elif cfg.kind == "gaussian":
        g = torch.randn(K, d, generator=gen, dtype=torch.float64).numpy()
        rows = g / np.linalg.norm(g, axis=1, keepdims=True)
    elif cfg.kind == "simplex":
        rows = _simplex(K, d)
    else:
        rows = load_feature_file(cfg.path)
        if rows.shape != (K, d):
            raise ConfigError(
                "features.path", f"{cfg.path}: shape {rows.shape} does not match K={K}, d={d}"
            )
    rows = rows * cfg.scale
    if np.unique(rows, axis=0).shape[0] < K:  # exact duplicates, without a K x K x d difference tensor
        raise ConfigError("features", "two features coincide: Delta would be 0 (every v_k must differ)")
    V = torch.as_tensor(rows.T.copy(), dtype=dtype)
    p = torch.as_tensor(_probs(cfg, K), dtype=dtype)
    return FeatureSet(V=V, p=p, noise=float(cfg.noise))
