"""A sweep's results stored by batch: ``results/<batch>.parquet`` holds the metrics of every run of a
batch (the recorder's tidy columns after a ``config_hash`` column), ``results/<batch>.params.pt`` their
trained parameters (a mapping config hash -> state dict, read back with weights_only=True), and the
index's ``stored`` table each run's resolved config, summary and batch file, written with its row of
``runs`` in one transaction per batch (``index.Index.record_batch``).

A batch file is named by the hash of its runs' config hashes, written atomically (``store``) before the
index names it: a sweep killed between the two leaves a file no row names, which the next sweep run
in the folder removes (``remove_unnamed``), and runs still ``pending`` that it trains again.
Per-run directories (``runs/<name>/``) are written instead with ``--run-dirs``.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from ..api import Run, load_run
from ..config import validate_config
from ..errors import UserInputError
from ..recorder import SCHEMA, Recorder, joined_table, metrics_frame
from ..store import (
    METRICS_FILE,
    SUMMARY_FILE,
    TMP_SUFFIX,
    atomic_write_bytes,
    params_bytes,
    parquet_bytes,
    read_metrics_table,
)
from .index import FINISHED, load_index

RESULTS_DIR = "results"
PARAMS_SUFFIX = ".params.pt"
KEY = "config_hash"  # the column that names each row's run
KEY_TYPE = pa.dictionary(pa.int32(), pa.string())  # each run's hash once per file, a 4-byte code per row
PARAMS_SHA256 = b"lipschitz_icl.params_sha256"  # the batch file's metadata: sha256 of its .params.pt's bytes
REPAIR = ("; `lipschitz-icl sweep SPEC --out DIR --force` trains every run again (a resume trusts the index and "
          "skips finished runs)")
TABLE_SCHEMA = pa.schema([(KEY, KEY_TYPE), *SCHEMA])


def batch_file(hashes: Iterable[str]) -> str:
    """The file name of a batch's results: the same runs always get the same name."""
    return "b" + hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()[:24] + ".parquet"


Encoded = tuple[str, bytes, bytes | None]  # (file name, parquet bytes, params bytes or None)


def encode_batch(tables: dict[str, pa.Table | Recorder], params: dict[str, dict[str, torch.Tensor]]) -> Encoded:
    """The metrics ``tables`` (config hash -> table of ``recorder.SCHEMA``, or the Recorder that makes it) as the
    bytes of one checksummed parquet file, ``params`` (config hash -> state dict; may be empty) as the bytes of
    one torch file, and the file's name: what ``write_batch`` writes (a Dask worker encodes its batch, the driver
    only writes)."""
    table, rows = joined_table(list(tables.values()))
    held = [(h, n) for h, n in zip(tables, rows, strict=True) if n]  # a failed run has no rows
    if not held:
        table = TABLE_SCHEMA.empty_table()
    else:
        codes = np.repeat(np.arange(len(held), dtype=np.int32), [n for _, n in held])
        table = table.add_column(0, pa.field(KEY, KEY_TYPE), pa.DictionaryArray.from_arrays(
            pa.array(codes), pa.array([h for h, _ in held], pa.string())))
    saved = params_bytes(params) if params else None
    meta = {PARAMS_SHA256: hashlib.sha256(saved).hexdigest().encode()} if saved is not None else None
    return batch_file(tables), parquet_bytes(table.replace_schema_metadata(meta)), saved


def write_batch(sweep_dir: Path, encoded: Encoded) -> str:
    """Write an encoded batch (``encode_batch``) under results/, params first; return the file name."""
    name, metrics, saved = encoded
    folder = sweep_dir / RESULTS_DIR
    folder.mkdir(exist_ok=True)
    if saved is not None:
        atomic_write_bytes(folder / (name.removesuffix(".parquet") + PARAMS_SUFFIX), saved)
    atomic_write_bytes(folder / name, metrics)
    return name


BATCH_NAME = re.compile(r"(b[0-9a-f]{24})(\.parquet|\.params\.pt)")
TEMP_NAME = re.compile(r"\.b[0-9a-f]{24}(\.parquet|\.params\.pt)\..*" + re.escape(TMP_SUFFIX))


def remove_unnamed(sweep_dir: Path, named: set[str]) -> None:
    """Batch files that no index row names (a sweep killed before it indexed them, or runs trained again
    since) and temporary files of interrupted writes; any other file is left alone."""
    folder = sweep_dir / RESULTS_DIR
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        match = BATCH_NAME.fullmatch(path.name)
        if TEMP_NAME.fullmatch(path.name) or (match and f"{match.group(1)}.parquet" not in named):
            path.unlink(missing_ok=True)


class ResultReader:
    """Reads runs back from a sweep's batch files, each file once (``read_run`` of many runs of one batch)."""

    def __init__(self, sweep_dir: str | Path) -> None:
        self.folder = Path(sweep_dir) / RESULTS_DIR
        self._tables: dict[str, tuple[pa.Table, dict[str, tuple[int, int]]]] = {}
        self._digests: dict[str, bytes | None] = {}  # the params digest each batch file records
        self._params: dict[str, dict] = {}

    def metrics(self, file: str, config_hash: str) -> pa.Table:
        """The run's rows of the batch file (recorder schema), checked as ``metrics.parquet`` is."""
        if file not in self._tables:
            table = _read_batch(self.folder / file)
            self._digests[file] = (table.schema.metadata or {}).get(PARAMS_SHA256)
            self._tables[file] = _runs_of(table, self.folder / file)
        table, rows = self._tables[file]
        start, length = rows.get(config_hash, (0, 0))
        return table.slice(start, length)

    def params(self, file: str, config_hash: str) -> dict[str, torch.Tensor] | None:
        path = self.folder / (file.removesuffix(".parquet") + PARAMS_SUFFIX)
        if not path.is_file():
            return None
        if file not in self._params:
            self.metrics(file, config_hash)  # the batch file first: it holds the params file's digest
            self._params[file] = _read_params(path, self._digests.get(file))
        return self._params[file].get(config_hash)

    def run(self, file: str | None, config: str, summary: str) -> Run:
        """A Run from its stored config and summary (JSON text) and its batch file (None: no metrics)."""
        cfg = validate_config(json.loads(config))
        summary_data = json.loads(summary)
        h = summary_data.get(KEY, cfg.config_hash())
        if file is None:
            return Run(cfg, summary_data, SCHEMA.empty_table())
        return Run(cfg, summary_data, self.metrics(file, h), params=self.params(file, h))


def _runs_of(table: pa.Table, path: Path) -> tuple[pa.Table, dict[str, tuple[int, int]]]:
    """The recorder's columns of a batch file and, per config hash, its rows (start, length): a run's
    rows are contiguous."""
    keys = table[KEY].combine_chunks()
    codes = keys.indices.to_numpy(zero_copy_only=False)
    change = np.flatnonzero(np.diff(codes)) + 1
    starts = np.concatenate([[0], change]) if len(codes) else np.array([], dtype=np.int64)
    lengths = np.diff(np.concatenate([starts, [len(codes)]]))
    names = keys.dictionary.to_pylist()
    rows = {names[codes[s]]: (int(s), int(n)) for s, n in zip(starts, lengths, strict=True)}
    if len(rows) != len(starts):
        raise UserInputError(f"{path}: holds a run's rows in more than one place (not written by a sweep)")
    return table.select(SCHEMA.names), rows


def _read_batch(path: Path) -> pa.Table:
    if not path.is_file():
        raise UserInputError(f"{path}: missing (the index names it; the sweep's results were moved or deleted)"
                             + REPAIR)
    try:
        table = read_metrics_table(path.parent, path.name)
    except UserInputError as e:
        raise UserInputError(str(e) + REPAIR) from None
    if not table.schema.equals(TABLE_SCHEMA, check_metadata=False):
        raise UserInputError(f"{path}: not a sweep results table (columns {table.schema.names})")
    return table


def _read_params(path: Path, digest: bytes | None) -> dict[str, Any]:
    """A batch's .params.pt, checked against the digest its batch file recorded (files of this version)."""
    raw = path.read_bytes()
    if digest is not None and hashlib.sha256(raw).hexdigest().encode() != digest:
        raise UserInputError(f"{path}: corrupt (its bytes differ from the checksum its results file recorded)"
                             + REPAIR)
    try:
        buffer = io.BytesIO(raw)
        state = torch.load(buffer, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a corrupt or hostile file is bad input
        raise UserInputError(f"{path}: cannot be read as saved parameters ({type(e).__name__})") from None
    if not isinstance(state, dict) or not all(isinstance(s, dict) and all(isinstance(v, torch.Tensor)
                                                                         for v in s.values()) for s in state.values()):
        raise UserInputError(f"{path}: not a mapping of state dicts")
    return state


def load_runs(sweep_dir: str | Path, finished_only: bool = False, current_only: bool = False) -> list[Run]:
    """The runs of a sweep as Runs, in spec order (every run in the folder, as ``load_index``;
    ``current_only``: those of the spec run last): from the batch files or the run directories, whichever holds each.
    Runs not finished yet (pending, interrupted, failed) are left out with ``finished_only``; a pending
    run (nothing stored) always is."""
    rows = load_index(sweep_dir, current_only=current_only, stored_json=True)
    reader = ResultReader(sweep_dir)
    runs = []
    for row in rows.itertuples(index=False):
        if finished_only and row.status not in FINISHED:
            continue
        if row.run_dir and (Path(row.run_dir) / SUMMARY_FILE).is_file():  # --run-dirs
            run = load_run(row.run_dir, require_finished=False)
        elif isinstance(row.config, str):
            run = reader.run(row.results, row.config, row.summary)
        else:
            continue
        run.dir = Path(row.run_dir) if row.run_dir else None
        runs.append(run)
    return runs


def load_metrics(sweep_dir: str | Path, current_only: bool = False) -> pd.DataFrame:
    """Every run's metrics as one tidy DataFrame (name, step, metric, k, n, value), ``name`` the run's
    name in the index (join ``load_index`` on it for the axis values); every run in the folder, as
    ``load_index`` (``current_only``: those of the spec run last)."""
    rows = load_index(sweep_dir, current_only=current_only)
    reader = ResultReader(sweep_dir)
    parts = []
    for row in rows.itertuples(index=False):
        if row.results:
            table = reader.metrics(row.results, row.config_hash)
        elif row.run_dir and (Path(row.run_dir) / METRICS_FILE).is_file():
            table = read_metrics_table(row.run_dir)
        else:
            continue
        parts.append(table.add_column(0, "name", pa.repeat(pa.scalar(row.name, pa.string()), table.num_rows)))
    if not parts:
        return metrics_frame(SCHEMA.empty_table()).assign(name=pd.Series(dtype=object))[["name", *SCHEMA.names]]
    return metrics_frame(pa.concat_tables(parts))
