"""Run directories: ``config.yaml`` (resolved), ``metrics.parquet`` (tidy), ``summary.json``.

Every file is written atomically: to a temporary file in the same folder, flushed and fsynced,
then renamed over the target, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import UserInputError

CONFIG_FILE, METRICS_FILE, SUMMARY_FILE = "config.yaml", "metrics.parquet", "summary.json"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


def atomic_write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(_jsonable(data), indent=2, allow_nan=False) + "\n")


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as the bytes of a parquet file (what ``metrics.parquet`` holds)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def atomic_write_parquet(path: Path, table: pa.Table | bytes) -> None:
    """Write a table, or the bytes of an already-encoded parquet file, atomically."""
    atomic_write_bytes(path, table if isinstance(table, bytes) else parquet_bytes(table))


def write_run_files(run_dir: str | Path, config_yaml: str, metrics: pa.Table | bytes, summary: dict) -> Path:
    """Write a finished run's three files into ``run_dir`` (created if missing), each atomically.
    ``summary.json`` goes last, so a summary with a final status means the other two are complete."""
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path / CONFIG_FILE, config_yaml)
    atomic_write_parquet(path / METRICS_FILE, metrics)
    atomic_write_json(path / SUMMARY_FILE, summary)
    return path


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file-name-safe version of text (no separators, no leading dots)."""
    return _SAFE.sub("-", text).strip(".-")[:128] or "run"


def prepare_run_dir(out: str | Path | None, default_name: str, root: str | Path = "runs", force: bool = False) -> Path:
    """Choose and create the run directory. An explicit ``out`` that already holds a run is
    refused unless ``force``; a default name gets a numeric suffix instead of clobbering."""
    if out is not None:
        path = Path(out)
        if path.exists() and not path.is_dir():
            raise UserInputError(f"--out {out}: exists and is not a directory")
        if path.is_dir() and any(path.iterdir()) and not force:
            raise UserInputError(f"--out {out}: already holds files (choose another folder or pass --force)")
    else:
        base = Path(root) / safe_name(default_name)
        path, i = base, 1
        while path.exists():
            path, i = base.with_name(f"{base.name}-{i}"), i + 1
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserInputError(f"{path}: cannot create the run directory ({e.strerror})") from None
    if not os.access(path, os.W_OK):
        raise UserInputError(f"{path}: the run directory is not writable")
    return path


def read_summary(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / SUMMARY_FILE).read_text())


def read_metrics_table(run_dir: str | Path) -> pa.Table:
    return pq.read_table(Path(run_dir) / METRICS_FILE)
