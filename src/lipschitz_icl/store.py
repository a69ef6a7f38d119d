"""Run directories: ``config.yaml`` (resolved), ``metrics.parquet`` (tidy), ``summary.json``,
``params.pt`` (the trained parameters: a state dict, read back only with weights_only=True).

Every file is written atomically: to a temporary file in the same folder, flushed and fsynced,
then renamed over the target (and the folder fsynced), so a reader never sees half a file. A
failed write removes its temporary file and leaves the previous version of the target intact.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from .errors import UserInputError
from .interrupts import deferred_signals

CONFIG_FILE, METRICS_FILE, SUMMARY_FILE = "config.yaml", "metrics.parquet", "summary.json"
PARAMS_FILE = "params.pt"
ANALYSIS_FILE = "analysis.json"  # written by ``analyze``
# every file a run directory gets from run, analyze and evaluate: what ``--force`` removes first
RUN_OUTPUT_FILES = (SUMMARY_FILE, METRICS_FILE, PARAMS_FILE, CONFIG_FILE, ANALYSIS_FILE,
                    "evaluation.parquet", "evaluation.csv", "evaluation.png")


TMP_SUFFIX = ".tmp"  # temporary files are ``.<name>.<random>.tmp`` beside their target


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` holds either its old content or all of ``data``.

    Ctrl-C and SIGTERM wait until the temporary file is renamed or removed (``deferred_signals``): one that
    came between ``mkstemp`` and the ``try`` below left a ``.name.*.tmp`` file behind (a figure of reproduce)."""
    path = Path(path)
    with deferred_signals():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
        try:
            with contextlib.suppress(OSError, AttributeError):  # mkstemp makes 0600; honour the umask
                os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as fh:
                _write(fh, data, path)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    _fsync_dir(path.parent)


_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process umask (read by setting and restoring it, under a lock)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _write(fh, data: bytes, target: Path) -> None:  # noqa: ARG001 - target: for fault injection in tests
    """The one place bytes reach a file (tests inject disk-full faults here)."""
    fh.write(data)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable (POSIX); a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def json_text(data: dict, indent: int | None = None) -> str:
    """``data`` as JSON, non-finite numbers as null (summary.json's form)."""
    try:
        return json.dumps(data, indent=indent, allow_nan=False)  # most summaries: every number finite
    except ValueError:
        return json.dumps(_jsonable(data), indent=indent, allow_nan=False)


def atomic_write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json_text(data, indent=2) + "\n")


def atomic_write_npy(path: Path, array: Any) -> None:
    """A .npy file (no pickles), atomically."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


VALUES_SHA256 = b"lipschitz_icl.values_sha256"  # parquet key-value metadata: the digest of the table's values


def values_digest(table: pa.Table) -> str:
    """sha256 of a table's values, column by column (names, null masks, then the values: numbers as
    their float64/int64 bytes, text as its lengths then its bytes, a dictionary column as the lengths of its
    runs of equal values then those values, whatever its dictionary), independent of how the table is chunked
    or encoded. Fed chunk by chunk from Arrow's buffers (copies only where nulls are filled or a type cast):
    hashing dominates, about 30 ms per million rows."""
    h = hashlib.sha256()
    for name, column in zip(table.column_names, table.columns, strict=True):
        h.update(name.encode() + b"\0")
        for chunk in column.chunks:
            h.update(chunk.is_null().to_numpy(zero_copy_only=False))
        if pa.types.is_dictionary(column.type):  # the values it stands for, as runs of equal values
            column, lengths = _runs_of_values(column)
            h.update(lengths.astype("<i8"))
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            _update_text(h, [c.fill_null("") if c.null_count else c for c in column.chunks])
        else:
            is_int = pa.types.is_integer(column.type)
            for chunk in column.chunks:
                values = chunk if is_int else chunk.cast(pa.float64())
                values = values.fill_null(0 if is_int else 0.0) if values.null_count else values
                h.update(np.ascontiguousarray(values.to_numpy(zero_copy_only=False), dtype="<i8" if is_int else "<f8"))
    return h.hexdigest()


def _update_text(h: Any, chunks: list[pa.Array]) -> None:
    """Every value's length (int64), then every value's bytes, of text chunks without nulls."""
    spans = []
    for chunk in chunks:
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        _, offsets_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
        h.update(np.diff(offsets).astype("<i8"))
        spans.append((data_buf, int(offsets[0]) if len(offsets) else 0, int(offsets[-1]) if len(offsets) else 0))
    for data_buf, start, stop in spans:
        if data_buf is not None and stop > start:
            h.update(memoryview(data_buf)[start:stop])


def _runs_of_values(column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, np.ndarray]:
    """A dictionary column as (the value of each run of equal values, the runs' lengths): the same for the
    same values whatever the dictionary's order, duplicates or unused entries (a parquet file keeps used ones)."""
    whole = column.unify_dictionaries().combine_chunks() if column.num_chunks else pa.chunked_array(
        [], column.type).combine_chunks()
    codes = whole.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]])) if len(codes) else np.zeros(0, int)
    values = whole.take(pa.array(starts, pa.int64())).cast(whole.type.value_type)
    if len(values) > 1:  # two codes of one value (a dictionary with duplicates): one run
        text = values.fill_null("\0null").to_pylist()
        keep = np.concatenate([[True], np.array(text[1:], dtype=object) != np.array(text[:-1], dtype=object)])
        starts, values = starts[keep], values.filter(pa.array(keep))
    return pa.chunked_array([values]), np.diff(np.concatenate([starts, [len(codes)]]))


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as the bytes of a parquet file (what ``metrics.parquet`` holds), its pages checksummed (CRC)
    and the sha256 of its values in the file's metadata (``VALUES_SHA256``, checked by ``read_metrics_table``)."""
    meta = {**(table.schema.metadata or {}), VALUES_SHA256: values_digest(table).encode()}
    sink = pa.BufferOutputStream()
    # dictionary pages and min/max statistics for the columns that repeat (names, steps, indices), not for float
    # values, where the writer would build a dictionary only to drop it: ~35% faster to write, and smaller
    repeating = [f.name for f in table.schema if not pa.types.is_floating(f.type)]
    pq.write_table(table.replace_schema_metadata(meta), sink, write_page_checksum=True, use_dictionary=repeating,
                   write_statistics=repeating)
    return sink.getvalue().to_pybytes()


def atomic_write_parquet(path: Path, table: pa.Table | bytes) -> None:
    """Write a table, or the bytes of an already-encoded parquet file, atomically."""
    atomic_write_bytes(path, table if isinstance(table, bytes) else parquet_bytes(table))


def write_run_files(
    run_dir: str | Path, config_yaml: str, metrics: pa.Table | bytes, summary: dict, params: dict | None = None
) -> Path:
    """Write a finished run into ``run_dir`` (created if missing): config.yaml, then
    ``write_results``. Returns the directory."""
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    with deferred_signals():
        atomic_write_text(path / CONFIG_FILE, config_yaml)
        write_results(path, metrics, summary, params)
    return path


def write_results(run_dir: Path, metrics: pa.Table | bytes, summary: dict, params: dict | None = None) -> None:
    """metrics.parquet, params.pt (the trained parameters, when given) then summary.json, each
    atomic, with Ctrl-C held back until all are written; a summary with a final status therefore
    means the other files are complete.

    If metrics.parquet or params.pt cannot be written (disk full, say), summary.json is still
    attempted with status ``failed`` and the reason, and the OSError is raised."""
    with deferred_signals():
        name = METRICS_FILE
        try:
            atomic_write_parquet(run_dir / METRICS_FILE, metrics)
            if params is not None:
                name = PARAMS_FILE
                atomic_write_params(run_dir / PARAMS_FILE, params)
        except OSError as e:
            failed = {**summary, "status": "failed", "error": f"cannot write {name}: {e.strerror or e}"}
            with contextlib.suppress(OSError):
                atomic_write_json(run_dir / SUMMARY_FILE, failed)
            raise
        atomic_write_json(run_dir / SUMMARY_FILE, summary)


def params_bytes(state: dict[str, Any]) -> bytes:
    """torch.save of a state dict (or a mapping of state dicts), its tensors detached and on the CPU."""
    def cpu(value: Any) -> Any:
        return {k: cpu(v) for k, v in value.items()} if isinstance(value, dict) else value.detach().cpu()

    buf = io.BytesIO()
    torch.save(cpu(state), buf)
    return buf.getvalue()


def atomic_write_params(path: Path, state: dict[str, torch.Tensor]) -> None:
    """torch.save of a state dict (tensors only), written atomically."""
    atomic_write_bytes(path, params_bytes(state))


def read_params(run_dir: str | Path) -> dict[str, torch.Tensor]:
    """The trained parameters of a run, loaded with weights_only=True (no arbitrary objects)."""
    path = Path(run_dir) / PARAMS_FILE
    if not path.is_file():
        raise UserInputError(f"{run_dir}: the run has no {PARAMS_FILE} (written by runs of this version)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a corrupt or hostile file is bad input
        raise UserInputError(f"{path}: cannot be read as a state dict ({type(e).__name__})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise UserInputError(f"{path}: not a state dict of tensors")
    for key, tensor in state.items():
        if tensor.is_complex():  # no model trains complex parameters; evaluate would mix them in silently
            raise UserInputError(f"{path}: parameter {str(key)[:40]!r} is {str(tensor.dtype).removeprefix('torch.')} "
                                 "(real tensors expected)")
    return state


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file-name-safe version of text (no separators, no leading dots)."""
    return _SAFE.sub("-", text).strip(".-")[:128] or "run"


def prepare_run_dir(out: str | Path | None, default_name: str, root: str | Path = "runs", force: bool = False) -> Path:
    """Choose and create the run directory. An explicit ``out`` that already holds files is
    refused unless ``force``, which first removes the previous run's files (``RUN_OUTPUT_FILES``);
    a default name gets the first free numeric suffix, claimed atomically (``mkdir`` fails if
    another process took it first), so simultaneous runs never share a directory."""
    if out is None:
        path = claim_new_dir(Path(root) / safe_name(default_name))
    else:
        path = Path(out)
        if path.exists() and not path.is_dir():
            raise UserInputError(f"out={out}: exists and is not a directory",
                                 cli=f"--out {out}: exists and is not a directory")
        if path.is_dir() and any(path.iterdir()):
            if not force:
                raise UserInputError(f"out={out}: already holds files (choose another folder, or pass force=True to "
                                     "replace the previous run's files)",
                                     cli=f"--out {out}: already holds files (choose another folder or pass --force)")
            clear_run_files(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserInputError(f"{path}: cannot create the run directory ({e.strerror})") from None
    if not os.access(path, os.W_OK):
        raise UserInputError(f"{path}: the run directory is not writable")
    return path


def claim_new_dir(base: Path, tries: int = 10_000) -> Path:
    """Create ``base``, or ``base-1``, ``base-2``, ... : the first that did not exist."""
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserInputError(f"{base.parent}: cannot create the folder ({e.strerror})") from None
    for i in range(tries):
        path = base if i == 0 else base.with_name(f"{base.name}-{i}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            raise UserInputError(f"{path}: cannot create the directory ({e.strerror})") from None
        return path
    raise UserInputError(f"{base}: no free directory name after {tries} tries")


def clear_run_files(run_dir: Path) -> None:
    """Remove a previous run's files (summary.json first, so a half-cleared folder is never
    taken for a run) and stray temporary files; other files are left alone."""
    try:
        for name in RUN_OUTPUT_FILES:
            (run_dir / name).unlink(missing_ok=True)
        for tmp in run_dir.glob(f".*{TMP_SUFFIX}"):
            tmp.unlink(missing_ok=True)
    except OSError as e:
        raise UserInputError(f"out={run_dir}: cannot remove the previous run's files ({e.strerror})",
                             cli=f"--out {run_dir}: cannot remove the previous run's files ({e.strerror})") from None


def read_summary(run_dir: str | Path) -> dict:
    """summary.json of a run; a file that is not a JSON object is bad input naming the file."""
    path = Path(run_dir) / SUMMARY_FILE
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: nested too deeply
        raise UserInputError(f"{path}: corrupt, not JSON ({' '.join(str(e).split())[:80]})") from None
    if not isinstance(summary, dict):
        raise UserInputError(f"{path}: corrupt, not a JSON object (got {type(summary).__name__})")
    for key, kinds in SUMMARY_TYPES.items():
        value = summary.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise UserInputError(f"{path}: corrupt, {key} is a {type(value).__name__} ({' '.join(kinds_names(kinds))} "
                                 "expected)")
    return summary


# the summary keys every reader relies on, and their JSON types (each may be null)
SUMMARY_TYPES: dict[str, tuple[type, ...]] = {"status": (str,), "config_hash": (str,), "error": (str,),
                                              "steps": (int,), "seed": (int,), "final_loss": (int, float)}


def kinds_names(kinds: tuple[type, ...]) -> list[str]:
    return [{"str": "string", "int": "integer", "float": "number"}[k.__name__] for k in kinds]


def read_metrics_table(run_dir: str | Path, name: str = METRICS_FILE) -> pa.Table:
    """metrics.parquet of a run (or another checksummed table in ``run_dir``); a corrupt file is bad input
    naming the file."""
    path = Path(run_dir) / name
    raw = path.read_bytes()  # an I/O error here is one; below, any error is the file's content
    try:
        table = pq.read_table(pa.BufferReader(raw), page_checksum_verification=True)
        recorded = (table.schema.metadata or {}).get(VALUES_SHA256)  # None: written before checksums
        if recorded is not None and recorded.decode() != values_digest(table):
            raise ValueError("its values differ from the checksum written with them")
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as e:
        raise UserInputError(f"{path}: corrupt (not a Parquet file, or damaged: {' '.join(str(e).split())[:80]})"
                             ) from None
    return table.replace_schema_metadata({k: v for k, v in (table.schema.metadata or {}).items()
                                          if k != VALUES_SHA256} or None)
