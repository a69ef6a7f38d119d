"""Feature sets: K vectors v_1..v_K in R^d, token probabilities p_k, and token noise sigma.

A token of feature z is x = v_z + sigma * xi with xi ~ N(0, I_d / d) (docs/DESIGN.md).
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .errors import ConfigError
from .rng import normals


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

    @functools.cached_property
    def pinv(self) -> torch.Tensor:
        """V^+ (K x d), the pseudo-inverse (computed once)."""
        return torch.linalg.pinv(self.V)

    @functools.cached_property
    def delta_sep(self) -> float:
        """Delta = min_{k != n} ||v_k - v_n|| (computed once)."""
        D = self.distances
        mask = ~torch.eye(self.K, dtype=torch.bool, device=D.device)
        return float(D[mask].min())

    def sample_ids(self, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
        """Feature ids z ~ p, an integer tensor of the given shape."""
        n = int(np.prod(shape)) if shape else 1
        ids = torch.multinomial(self.p, n, replacement=True, generator=gen)
        return ids.reshape(shape)

    def tokens(self, ids: torch.Tensor, gen: torch.Generator, draw_dtype: torch.dtype | None = None) -> torch.Tensor:
        """x = v_z + sigma xi, xi ~ N(0, I/d); shape ids.shape + (d,) (xi drawn in ``draw_dtype``, see rng.normals)."""
        x = self.V.T[ids]
        if self.noise > 0:
            xi = normals(x.shape, gen, x.dtype, draw_dtype, x.device)
            x = x + self.noise * xi / self.d**0.5
        return x


MAX_FILE_ELEMENTS = 2**26  # a feature file holds at most this many numbers (K*d)
MAX_CSV_BYTES = 256 * 2**20
MAX_FEATURE_NORM = 1e8  # every ||v_k|| (after features.scale) is at most this: squares stay far from overflow
MIN_FEATURE_NORM = 1e-8  # ... and the largest at least this: Gram entries and kernels do not underflow
MIN_RELATIVE_DELTA = 1e-8  # Delta = min ||v_k - v_n|| is at least this times the largest ||v_k||


def _npy_header(fh) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype in the header of an open .npy file, before any data is read."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version in ((2, 0), (3, 0)):  # 3.0 is 2.0 with a UTF-8 header (field names); read alike
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    return shape, dtype


def _read_npy(p: Path, path: str | Path) -> tuple[np.ndarray, bytes]:
    """A .npy array and the file's bytes: a pickled or oversized array is refused from its header."""
    field = "features.path"
    with open(p, "rb") as fh:
        shape, dtype = _npy_header(fh)
        if dtype.hasobject:
            raise ConfigError(field, f"{path}: holds pickled objects, which are refused")
        if int(np.prod(shape, dtype=np.float64)) > MAX_FILE_ELEMENTS:
            raise ConfigError(field, f"{path}: shape {shape} is too large (at most {MAX_FILE_ELEMENTS} numbers)")
        header_end = fh.tell()  # headers may be longer than 256 bytes (padded, or many fields)
        fh.seek(0)
        raw = fh.read(header_end + int(np.prod(shape, dtype=np.float64)) * dtype.itemsize)
    buffer = io.BytesIO(raw)
    return np.load(buffer, allow_pickle=False), raw


def _read_csv(p: Path, path: str | Path) -> tuple[np.ndarray, bytes]:
    """A .csv of K rows of d numbers and the file's bytes; the numbers are counted before parsing."""
    field = "features.path"
    if p.stat().st_size > MAX_CSV_BYTES:
        raise ConfigError(field, f"{path}: larger than {MAX_CSV_BYTES // 2**20} MiB")
    raw = p.read_bytes()
    numbers = sum(len(line.split(b",")) for line in raw.splitlines() if line.strip())  # an upper bound
    if numbers > MAX_FILE_ELEMENTS:
        raise ConfigError(field, f"{path}: holds about {numbers} numbers (at most {MAX_FILE_ELEMENTS})")
    text = raw.decode("utf-8-sig")  # a byte-order mark (spreadsheets write one) is not a number
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty file is reported below, by shape
        return np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.float64, ndmin=2), raw


def read_feature_file(path: str | Path) -> tuple[np.ndarray, str]:
    """A (K, d) array of feature vectors from .npy (pickling disabled) or .csv, and the sha256 of the
    file's bytes (the file is read once: the array and the digest describe the same content)."""
    p = Path(path)
    field = "features.path"
    try:
        found = p.is_file()
    except (OSError, ValueError):
        found = False
    if not found:
        raise ConfigError(field, f"{path}: no such file" if not _exists(p) else f"{path}: not a file")
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".csv"):
        raise ConfigError(field, f"{path}: unsupported file type (allowed: .npy, .csv)")
    try:
        arr, raw = _read_npy(p, path) if suffix == ".npy" else _read_csv(p, path)
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
    return _checked_array(arr, path), hashlib.sha256(raw).hexdigest()


def _exists(p: Path) -> bool:
    try:
        return p.exists()
    except (OSError, ValueError):
        return False


def _checked_array(arr: np.ndarray, path: str | Path) -> np.ndarray:
    field = "features.path"
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ConfigError(field, f"{path}: must hold real numbers (got dtype {arr.dtype})")
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ConfigError(field, f"{path}: must be a (K, d) array with K >= 2 (got shape {arr.shape})")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ConfigError(field, f"{path}: holds NaN or infinite values")
    return arr


def read_file_section(data: dict, cache: FeatureFiles | None = None) -> tuple[dict, np.ndarray]:
    """A ``features`` section of kind=file with its path resolved (so no later process resolves it
    against another working directory), K and d read off the file and ``file_sha256`` set to the
    digest of its bytes, and the file's numbers. A ``file_sha256`` already given must match.
    ``cache`` (a sweep's): a file read before under the same path and digest is not read again."""
    key = (data["path"], data.get("file_sha256"))
    if cache is not None and key in cache:
        return cache[key]
    section, arr = _read_file_section(data)
    if cache is not None:
        cache[key] = cache[(section["path"], section["file_sha256"])] = (section, arr)
    return section, arr


def _read_file_section(data: dict) -> tuple[dict, np.ndarray]:
    path = _resolved(data["path"])
    arr, digest = read_feature_file(path)
    for key, val in (("K", arr.shape[0]), ("d", arr.shape[1])):
        if data.get(key) not in (None, val):
            raise ValueError(f"{key}={data[key]} does not match the file's shape {arr.shape}")
    if data.get("file_sha256") not in (None, digest):
        raise ConfigError("features.path", f"{data['path']}: its content changed since the config was resolved "
                          f"(sha256 {digest[:12]}..., expected {str(data['file_sha256'])[:12]}...)")
    return {**data, "path": path, "K": arr.shape[0], "d": arr.shape[1], "file_sha256": digest}, arr


FeatureFiles = dict[tuple[str, str | None], tuple[dict, np.ndarray]]  # (path, sha256) -> (section, numbers)


def anchor_feature_path(data: dict, folder: Path | None) -> None:
    """A relative ``features.path`` written in a config file names a file beside that config: made relative
    to ``folder`` (the file's), not to the working directory. Overrides on the command line stay relative to
    the working directory. ``folder`` None (no config file): nothing changes."""
    section = data.get("features")
    path = section.get("path") if isinstance(section, dict) and folder is not None else None
    if isinstance(path, str) and path and "\0" not in path and not Path(path).expanduser().is_absolute():
        section["path"] = str(folder / path)


def _resolved(path: str) -> str:
    """An absolute path (a name the system refuses is left as it is, for the reader to report)."""
    try:
        return str(Path(path).expanduser().resolve())
    except (OSError, ValueError, RuntimeError):
        return path


def load_feature_file(path: str | Path) -> np.ndarray:
    """A (K, d) array of feature vectors from .npy (pickling disabled) or .csv."""
    return read_feature_file(path)[0]


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


def _check_spread(rows: np.ndarray, scale: float) -> None:
    """Refuse features whose scale the arithmetic cannot carry: the largest ||v_k|| outside
    [MIN_FEATURE_NORM, MAX_FEATURE_NORM] (Gram entries and kernels underflow to 0 or overflow)."""
    with np.errstate(over="ignore"):  # an overflowing norm is reported as inf, below
        biggest = float(np.linalg.norm(rows, axis=1).max()) if np.isfinite(rows).all() else math.inf
    if not MIN_FEATURE_NORM <= biggest <= MAX_FEATURE_NORM:
        raise ConfigError("features", f"the largest ||v_k|| is {biggest:.3g} with features.scale={scale!r} (allowed: "
                          f"{MIN_FEATURE_NORM:g} to {MAX_FEATURE_NORM:g}; rescale the features or features.scale)")
    if np.unique(rows, axis=0).shape[0] < rows.shape[0]:  # exact duplicates, without a K x K x d tensor
        raise ConfigError("features", "two features coincide: Delta would be 0 (every v_k must differ)")


def _check_separation(fs: FeatureSet) -> None:
    """Delta, computed as the theory computes it, must stand clear of rounding: Delta >= 1e-8 max ||v_k||."""
    delta, biggest = fs.delta_sep, float(fs.V.norm(dim=0).max())
    if not delta >= MIN_RELATIVE_DELTA * biggest:
        raise ConfigError("features", f"Delta = min ||v_k - v_n|| is {delta:.3g}, below {MIN_RELATIVE_DELTA:g} "
                          f"times the largest ||v_k|| ({biggest:.3g}): the features are numerically coincident")


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
        rows = cfg.file_values()  # read (and its sha256 checked) when the config was loaded
    rows = rows * cfg.scale
    _check_spread(rows, cfg.scale)
    V = torch.as_tensor(rows.T.copy(), dtype=dtype)
    p = torch.as_tensor(_probs(cfg, K), dtype=dtype)
    fs = FeatureSet(V=V, p=p, noise=float(cfg.noise))
    _check_separation(fs)
    return fs
