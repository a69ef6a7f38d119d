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
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from ..api import Run, load_run
from ..arrow_np import arrow_numbers, arrow_text
from ..checksums import sha256_hex
from ..config import validate_config
from ..errors import UserInputError
from ..recorder import SCHEMA, Recorder, joined_table, metrics_frame, pandas, thin_rows
from ..store import (
    METRICS_FILE,
    SUMMARY_FILE,
    TMP_SUFFIX,
    atomic_write_bytes,
    metrics_table_of,
    params_bytes,
    parquet_bytes,
    read_metrics_table,
    read_summary,
    recorded_digests,
)
from .index import DIGEST, FINISHED, INDEX_FILE, RUNS_DIR, load_index

if TYPE_CHECKING:
    import pandas as pd

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

# what a sweep stores of each run's curves (spec ``curves:``, ``--curves``): "summary" keeps every scalar and
# Attn_k (attn_self, per layer and head too) at every record, and the K x K blocks (the merged Q's A_k = v_k^T Q v_k
# and B_{k,n}, the cross attention Attn_{k->n}) at the run's first and last record only; "full": every row
CURVES = ("summary", "full")
ENDS_ONLY = ("A", "B")  # metrics kept at a run's first and last record only under "summary", besides ...
ENDS_ONLY_PREFIX = "attn_cross"  # ... attn_cross and attn_cross@LlHh


def check_curves(curves: str, option: str = "curves") -> str:
    """``curves`` when it is one of CURVES, else UserInputError naming ``option`` and the allowed values."""
    if curves not in CURVES:
        raise UserInputError(f"{option}: {curves!r} is not allowed (allowed: {', '.join(CURVES)})")
    return curves


def ends_only(metric: str) -> bool:
    """Whether "summary" keeps ``metric`` at a run's first and last record only (see CURVES)."""
    return metric in ENDS_ONLY or metric.startswith(ENDS_ONLY_PREFIX)


def summary_curves(table: pa.Table, counts: list[int]) -> tuple[pa.Table, list[int]]:
    """The rows of runs' joined metrics ``table`` (``counts[i]`` rows each, records in step order) that a
    "summary" keeps (see CURVES), and each run's number of rows kept."""
    return thin_rows(table, counts, ends_only)


def encode_batch(tables: dict[str, pa.Table | Recorder], params: dict[str, dict[str, torch.Tensor]],
                 curves: str = "summary") -> Encoded:
    """The metrics ``tables`` (config hash -> table of ``recorder.SCHEMA``, or the Recorder that makes it) as the
    bytes of one parquet file with checksummed pages (the sha256 of the whole file is what the index rows of its
    runs record, ``BatchStore``), of their rows that ``curves`` keeps (CURVES), ``params`` (config hash ->
    state dict; may be empty) as the bytes of one torch file, and the file's name: what ``write_batch`` writes (a
    Dask worker encodes its batch, the driver only writes)."""
    table, rows = joined_table(list(tables.values()), ends_only if curves == "summary" else None)
    held = [(h, n) for h, n in zip(tables, rows, strict=True) if n]  # a failed run has no rows
    if not held:
        table = TABLE_SCHEMA.empty_table()
    else:
        codes = np.repeat(np.arange(len(held), dtype=np.int32), [n for _, n in held])
        table = table.add_column(0, pa.field(KEY, KEY_TYPE), pa.DictionaryArray.from_arrays(
            arrow_numbers(codes), arrow_text([h for h, _ in held])))  # pa.array would import pandas (arrow_np)
    saved = params_bytes(_one_storage_per_kind(params)) if params else None
    meta = {PARAMS_SHA256: hashlib.sha256(saved).hexdigest().encode()} if saved is not None else None
    # no sha256 of the values inside: the index records the sha256 of the whole file, checked on every read
    return batch_file(tables), parquet_bytes(table.replace_schema_metadata(meta), values_sha256=False), saved


def _one_storage_per_kind(params: dict[str, dict[str, torch.Tensor]]) -> dict[str, dict[str, torch.Tensor]]:
    """The runs' state dicts, the same mapping, with the tensors of one name, shape, dtype and device made views of
    one stacked tensor: torch.save writes their storage once (a 512-run batch's file 35 -> 13 us a run to encode,
    494 -> 304 bytes a run), and torch.load gives back the same mapping of tensors, views of that storage."""
    kinds: dict[tuple, list[tuple[str, str]]] = {}
    for h, state in params.items():
        for name, t in state.items():
            kinds.setdefault((name, tuple(t.shape), t.dtype, t.device), []).append((h, name))
    views: dict[tuple[str, str], torch.Tensor] = {}
    for members in kinds.values():
        stacked = torch.stack([params[h][name].detach() for h, name in members])
        views.update({key: stacked[j] for j, key in enumerate(members)})
    return {h: {name: views[h, name] for name in state} for h, state in params.items()}


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
    """Reads runs back from a sweep's batch files, each file once (``read_run`` of many runs of one batch),
    checking that each is the file its index rows name: of the sha256 they record (``digest``), holding the
    metrics of no run the index lacks (``known``: every config hash of the index; None: not checked), and
    holding the metrics of each finished run that names it."""

    def __init__(self, sweep_dir: str | Path, known: set[str] | None = None) -> None:
        self.folder, self.known = Path(sweep_dir) / RESULTS_DIR, known
        self.index = Path(sweep_dir) / INDEX_FILE
        self._tables: dict[str, tuple[pa.Table, dict[str, tuple[int, int]]]] = {}
        self._digests: dict[str, bytes | None] = {}  # the params digest each batch file records
        self._sha256: dict[str, str] = {}  # each batch file's own
        self._params: dict[str, dict] = {}

    def metrics(self, file: str, config_hash: str, digest: str | None = None, finished: bool = False) -> pa.Table:
        """The run's rows of the batch file (recorder schema), checked as ``metrics.parquet`` is, against the
        ``digest`` its index row records, and (``finished``: a run that recorded metrics) holding the run."""
        if file not in self._tables:
            self._load(file)
        table, rows = self._tables[file]
        if digest is not None and digest != self._sha256[file]:
            raise UserInputError(f"{self.folder / file}: not the results file the index recorded for run "
                                 f"{config_hash[:16]} (its sha256 differs: a file of other runs, or changed since)"
                                 + REPAIR)
        if finished and config_hash not in rows:
            raise UserInputError(f"{self.folder / file}: holds no metrics of run {config_hash[:16]}, whose index row "
                                 "names it (a file of other runs?)" + REPAIR)
        start, length = rows.get(config_hash, (0, 0))
        return table.slice(start, length)

    def _load(self, file: str) -> None:
        path = self.folder / file
        table, raw = _read_batch(path)
        self._sha256[file] = sha256_hex(raw)
        self._digests[file] = (table.schema.metadata or {}).get(PARAMS_SHA256)
        self._tables[file] = _runs_of(table, path)
        unknown = set(self._tables[file][1]) - self.known if self.known is not None else set()
        if unknown:
            raise UserInputError(f"{path}: holds the metrics of {len(unknown)} run(s) that {self.index} has no row "
                                 f"for ({', '.join(sorted(h[:16] for h in unknown)[:3])}: a row removed, or a file "
                                 "of another sweep)" + REPAIR)

    def params(self, file: str, config_hash: str) -> dict[str, torch.Tensor] | None:
        """The run's parameters from the batch's .params.pt (None where the batch saved none); a params file
        that its batch file records but that is missing, or a path that is not a file, is bad input naming it."""
        path = self.folder / (file.removesuffix(".parquet") + PARAMS_SUFFIX)
        if file not in self._tables:
            self._load(file)  # the batch file first: it holds the params file's digest
        if self._digests.get(file) is not None and not path.exists():
            raise UserInputError(f"{path}: missing (its results file records its checksum; the sweep's parameters "
                                 "were moved or deleted)" + REPAIR)
        if path.exists() and not path.is_file():
            raise UserInputError(f"{path}: not a file (the parameters of a batch of runs expected)")
        if not path.exists():
            return None
        if file not in self._params:
            self._params[file] = _read_params(path, self._digests.get(file))
        return self._params[file].get(config_hash)

    def run(self, row: Any) -> Run:
        """A Run from its index row (``load_index(..., stored_json=True, digests=True)``): its stored config and
        summary (JSON text), each refused unless of the row's config hash, and its batch file (None: no metrics)."""
        cfg = validate_config(json.loads(row.config))
        summary_data = json.loads(row.summary)
        h = row.config_hash
        for what, found in (("summary", summary_data.get(KEY, h) if isinstance(summary_data, dict) else None),
                            ("config", cfg.config_hash())):
            if found != h:
                raise UserInputError(f"{self.index}: the stored {what} of run {row.name} is of config "
                                     f"{str(found)[:16]}, not of its row's {h[:16]}" + REPAIR)
        if row.results is None:
            return Run(cfg, summary_data, SCHEMA.empty_table())
        metrics = self.metrics(row.results, h, _digest(row), row.status in FINISHED)
        return Run(cfg, summary_data, metrics, params=self.params(row.results, h))


def _digest(row: Any) -> str | None:
    value = getattr(row, DIGEST, None)
    return value if isinstance(value, str) else None


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


def _read_batch(path: Path) -> tuple[pa.Table, bytes]:
    """A batch file's table and its bytes."""
    if not path.is_file():
        raise UserInputError(f"{path}: missing (the index names it; the sweep's results were moved or deleted)"
                             + REPAIR)
    raw = path.read_bytes()
    try:
        table = metrics_table_of(raw, path)
    except UserInputError as e:
        raise UserInputError(str(e) + REPAIR) from None
    if not table.schema.equals(TABLE_SCHEMA, check_metadata=False):
        raise UserInputError(f"{path}: not a sweep results table (columns {table.schema.names})")
    return table, raw


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
    # each run's tensors of their own: views of the batch's one storage would take all of it along (torch.save of
    # one run's params would write the whole batch's)
    return {h: {k: v.clone() for k, v in s.items()} for h, s in state.items()}


def load_runs(sweep_dir: str | Path, finished_only: bool = False, current_only: bool = False) -> list[Run]:
    """The runs of a sweep as Runs, in spec order (every run in the folder, as ``load_index``;
    ``current_only``: those of the spec run last): from the batch files or the run directories, whichever holds each.
    Runs not finished yet (pending, interrupted, failed) are left out with ``finished_only``; a pending
    run (nothing stored) always is. Files that are not those the index recorded are refused (``ResultReader``)."""
    rows = load_index(sweep_dir, current_only=current_only, stored_json=True, digests=True)
    reader = ResultReader(sweep_dir, rows.attrs["hashes"])
    runs = []
    for row in rows.itertuples(index=False):
        if finished_only and row.status not in FINISHED:
            continue
        run = _run_of(row, reader)
        if run is not None:
            run.dir = Path(row.run_dir) if row.run_dir else None
            runs.append(run)
    return runs


def _run_of(row: Any, reader: ResultReader) -> Run | None:
    """The run of an index row: its run directory (``--run-dirs``), else its stored results; None for a run
    that stored nothing (pending). A directory holding another config's run is refused, unless the row says
    the run failed (it was not written over that run) and stores its own summary."""
    directory = Path(row.run_dir) if row.run_dir else None
    if directory is not None and (directory / SUMMARY_FILE).is_file():
        run = load_run(directory, require_finished=False)
        found = run.summary.get(KEY)
        if found in (None, row.config_hash):
            return run
        if row.status != "failed" or not isinstance(row.config, str):
            raise UserInputError(f"{directory}: holds the run of config {str(found)[:16]}, not that of its index row "
                                 f"({row.config_hash[:16]})")
    if isinstance(row.config, str):
        return reader.run(row)
    _check_stored(row, reader)
    return None


def _check_stored(row: Any, reader: ResultReader) -> None:
    """Refuse a finished run whose results the index does not store (its row of ``stored`` removed)."""
    if row.status in FINISHED:
        raise UserInputError(f"{reader.index}: run {row.name} is {row.status}, but the index stores none of its "
                             f"results and {RUNS_DIR}/{row.name} holds no run (a row removed?)" + REPAIR)


def _dir_metrics(run_dir: Path) -> pa.Table:
    """metrics.parquet of a run directory, checked against the digest its summary.json records."""
    digests = recorded_digests(run_dir, read_summary(run_dir)) if (run_dir / SUMMARY_FILE).is_file() else None
    return read_metrics_table(run_dir, digests=digests)


def load_metrics(sweep_dir: str | Path, current_only: bool = False) -> pd.DataFrame:
    """Every run's metrics as one tidy DataFrame (name, step, metric, k, n, value), ``name`` the run's
    name in the index (join ``load_index`` on it for the axis values); every run in the folder, as
    ``load_index`` (``current_only``: those of the spec run last). Files are checked as by ``load_runs``."""
    rows = load_index(sweep_dir, current_only=current_only, digests=True)
    reader = ResultReader(sweep_dir, rows.attrs["hashes"])
    parts = []
    for row in rows.itertuples(index=False):
        if row.results:
            table = reader.metrics(row.results, row.config_hash, _digest(row), row.status in FINISHED)
        elif row.run_dir and (Path(row.run_dir) / METRICS_FILE).is_file():
            table = _dir_metrics(Path(row.run_dir))
        else:
            _check_stored(row, reader)
            continue
        parts.append(table.add_column(0, "name", pa.repeat(pa.scalar(row.name, pa.string()), table.num_rows)))
    if not parts:
        return metrics_frame(SCHEMA.empty_table()).assign(name=pandas().Series(dtype=object))[["name", *SCHEMA.names]]
    return metrics_frame(pa.concat_tables(parts))
