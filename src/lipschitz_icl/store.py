"""Run directories: ``config.yaml`` (resolved), ``metrics.parquet`` (tidy), ``summary.json``,
``params.pt`` (the trained parameters: a state dict, read back only with weights_only=True).

Every file is written atomically: to a temporary file in the same folder, flushed and fsynced,
then renamed over the target (and the folder fsynced), so a reader never sees half a file. A
failed write removes its temporary file and leaves the previous version of the target intact.
"""

from __future__ import annotations

import contextlib
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

from .checksums import VALUES_SHA256, parquet_bytes, sha256_hex, values_digest
from .errors import UserInputError
from .interrupts import deferred_signals

CONFIG_FILE, METRICS_FILE, SUMMARY_FILE = "config.yaml", "metrics.parquet", "summary.json"
PARAMS_FILE = "params.pt"
ANALYSIS_FILE = "analysis.json"  # written by ``analyze``
# every file a run directory gets from run, analyze and evaluate: what ``--force`` removes first
RUN_OUTPUT_FILES = (SUMMARY_FILE, METRICS_FILE, PARAMS_FILE, CONFIG_FILE, ANALYSIS_FILE,
                    "evaluation.parquet", "evaluation.csv", "evaluation.png")
EVENT_FILES = "events.out.tfevents.*"  # TensorBoard's event files (``--tracker tensorboard``): --force removes them


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
    config = config_yaml.encode("utf-8")
    with deferred_signals():
        atomic_write_bytes(path / CONFIG_FILE, config)
        write_results(path, metrics, summary, params, config)
    return path


FILES_KEY = "files"  # summary.json: the sha256 of each file written with it (``write_results``)
BOUND_FILES = (CONFIG_FILE, METRICS_FILE, PARAMS_FILE)


def write_results(run_dir: Path, metrics: pa.Table | bytes, summary: dict, params: dict | None = None,
                  config: bytes | None = None) -> None:
    """metrics.parquet, params.pt (the trained parameters, when given) then summary.json, each
    atomic, with Ctrl-C held back until all are written; a summary with a final status therefore
    means the other files are complete. summary.json records the sha256 of each (``files``; of
    config.yaml too: ``config``, its bytes, else the file's), which ``load_run`` checks.

    If metrics.parquet or params.pt cannot be written (disk full, say), summary.json is still
    attempted with status ``failed`` and the reason, and the OSError is raised."""
    with deferred_signals():
        name, files = METRICS_FILE, {}
        try:
            data = metrics if isinstance(metrics, bytes) else parquet_bytes(metrics)
            atomic_write_bytes(run_dir / METRICS_FILE, data)
            files[METRICS_FILE] = sha256_hex(data)
            if params is not None:
                name, data = PARAMS_FILE, params_bytes(params)
                atomic_write_bytes(run_dir / PARAMS_FILE, data)
                files[PARAMS_FILE] = sha256_hex(data)
        except OSError as e:
            failed = {**summary, "status": "failed", "error": f"cannot write {name}: {e.strerror or e}"}
            with contextlib.suppress(OSError):
                atomic_write_json(run_dir / SUMMARY_FILE, failed)
            raise
        with contextlib.suppress(OSError):  # written at the run's start; unreadable: recorded by config_hash only
            files[CONFIG_FILE] = sha256_hex(config if config is not None else (run_dir / CONFIG_FILE).read_bytes())
        atomic_write_json(run_dir / SUMMARY_FILE, {**summary, FILES_KEY: files})


def recorded_digests(run_dir: Path, summary: dict) -> dict[str, str] | None:
    """The sha256 that summary.json records of the run's other files (None: a run written before they were
    recorded, or one that never finished). A file it lists that is missing, or a metrics.parquet or params.pt
    that it does not list (a file of another run), is bad input naming the file."""
    files = summary.get(FILES_KEY)
    if files is None:
        return None
    if not isinstance(files, dict) or not set(files) <= set(BOUND_FILES) or not all(
            isinstance(v, str) and len(v) == 64 for v in files.values()):
        raise UserInputError(f"{run_dir / SUMMARY_FILE}: corrupt, {FILES_KEY} is not a mapping of "
                             f"{', '.join(BOUND_FILES)} to sha256 digests")
    for name in BOUND_FILES:
        there = (run_dir / name).exists()
        if name in files and not there:
            raise UserInputError(f"{run_dir / name}: missing ({SUMMARY_FILE} records its checksum; the run's files "
                                 "were moved or deleted)")
        if there and name not in files and name != CONFIG_FILE:
            raise UserInputError(f"{run_dir / name}: not written with this run's {SUMMARY_FILE}, which records no "
                                 "such file (a file of another run?)")
    return files


def check_digest(path: Path, data: bytes, digests: dict[str, str] | None) -> None:
    """Refuse ``data`` read from ``path`` unless it is the file written with the run's summary.json."""
    expected = digests.get(path.name) if digests else None
    if expected is not None and sha256_hex(data) != expected:
        raise UserInputError(f"{path}: not the file written with this run's {SUMMARY_FILE} (its sha256 differs "
                             "from the one recorded there: a file of another run, or changed since)")


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


def read_params(run_dir: str | Path, digests: dict[str, str] | None = None) -> dict[str, torch.Tensor]:
    """The trained parameters of a run, loaded with weights_only=True (no arbitrary objects); with ``digests``
    (``recorded_digests``) refused unless params.pt is the file written with the run's summary.json."""
    path = Path(run_dir) / PARAMS_FILE
    if not path.is_file():
        raise UserInputError(f"{run_dir}: the run has no {PARAMS_FILE} (written by runs of this version)")
    raw = path.read_bytes()
    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a corrupt or hostile file is bad input
        raise UserInputError(f"{path}: cannot be read as a state dict ({type(e).__name__})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise UserInputError(f"{path}: not a state dict of tensors")
    for key, tensor in state.items():
        if tensor.is_complex():  # no model trains complex parameters; evaluate would mix them in silently
            raise UserInputError(f"{path}: parameter {str(key)[:40]!r} is {str(tensor.dtype).removeprefix('torch.')} "
                                 "(real tensors expected)")
    check_digest(path, raw, digests)  # after the checks of its content: a corrupt file is named as such
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
    taken for a run), its TensorBoard event files and stray temporary files; other files are left alone."""
    try:
        for name in RUN_OUTPUT_FILES:
            (run_dir / name).unlink(missing_ok=True)
        for stale in [*run_dir.glob(f".*{TMP_SUFFIX}"), *run_dir.glob(EVENT_FILES)]:
            stale.unlink(missing_ok=True)
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


def read_metrics_table(run_dir: str | Path, name: str = METRICS_FILE, digests: dict[str, str] | None = None
                       ) -> pa.Table:
    """metrics.parquet of a run (or another checksummed table in ``run_dir``); a corrupt file is bad input
    naming the file, and so is, with ``digests`` (``recorded_digests``), a file not written with the run's
    summary.json."""
    path = Path(run_dir) / name
    raw = path.read_bytes()  # an I/O error here is one; below, any error is the file's content
    table = metrics_table_of(raw, path)
    check_digest(path, raw, digests)  # after the checks of its content: a corrupt file is named as such
    return table


def metrics_table_of(raw: bytes, path: Path) -> pa.Table:
    """The table of a checksummed parquet file's bytes ``raw`` read from ``path`` (named by its errors)."""
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
