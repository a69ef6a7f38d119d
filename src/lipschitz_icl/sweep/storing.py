"""Storing a sweep's results as they arrive (``BatchStore``): by default one results file per batch, with
``--run-dirs`` one directory per run; then their index rows, in one transaction per batch. Only the driver
writes: files first (atomically), index rows after, so a killed sweep leaves whole files and whole rows."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checksums import sha256_hex
from ..recorder import SCHEMA, as_table
from ..store import SUMMARY_FILE, json_text, write_run_files
from .index import RUNS_DIR, Index, StoredRun
from .results import Encoded, summary_curves, write_batch
from .spec import Point
from .worker import encode_pairs

ProgressFn = Callable[[int, int, int], None]  # (done, failed, total) over the runs this call executes
REFRESH_S = 0.25  # BatchStore.refresh tells progress its counts again at most this often


def _owner(run_dir: Path) -> str | None:
    """The config hash a run directory's summary.json names (None: no readable summary)."""
    try:
        return json.loads((run_dir / SUMMARY_FILE).read_text()).get("config_hash")
    except (OSError, ValueError, AttributeError):
        return None


class BatchStore:
    """Stores each batch's results as they arrive, then their index rows in one transaction: by default one
    results file per batch (``results.write_batch``); with ``run_dirs`` each run's directory, as ``run`` writes
    it (atomically; never over another run's); of each run's curves the rows ``curves`` keeps (``results.CURVES``)."""

    def __init__(self, sweep_dir: Path, index: Index, total: int, progress: ProgressFn | None,
                 run_dirs: bool = False, curves: str = "summary") -> None:
        self.sweep_dir, self.index, self.total, self.progress = sweep_dir, index, total, progress
        self.run_dirs, self.curves = run_dirs, curves
        self.names = index.names()  # config hash -> directory: a known run keeps its directory
        self.done = self.failed = 0
        self.shown = time.monotonic()  # when progress was last told

    def refresh(self) -> None:
        """Tell ``progress`` the counts again (a display's clock), at most every REFRESH_S seconds."""
        if self.progress is not None and time.monotonic() - self.shown >= REFRESH_S:
            self.shown = time.monotonic()
            self.progress(self.done, self.failed, self.total)

    def __call__(self, batch: list[tuple[Point, dict[str, Any]]], encoded: Encoded | None = None) -> None:
        """Store a batch's results (``encoded``: their results file, encoded by the worker)."""
        if not batch:
            return
        summaries = [{**result["summary"], "config_hash": point.config_hash} for point, result in batch]
        elapsed = [result["elapsed_s"] for _, result in batch]
        if self.run_dirs:
            written = [self._write_dir(point, result, summary) for (point, result), summary in
                       zip(batch, summaries, strict=True)]
            elapsed = [t if ok else None for t, ok in zip(elapsed, written, strict=True)]
            stored = [(None, _config_json(p, r), json_text(s), None) for (p, r), s in
                      zip(batch, summaries, strict=True)]
        else:
            stored = self._write_batch(batch, summaries, encoded)
        self.index.record_batch([(point.config_hash, summary, t, where) for (point, _), summary, t, where
                                 in zip(batch, summaries, elapsed, stored, strict=True)])  # after the files
        failed = sum(s.get("status") == "failed" for s in summaries)
        self.failed += failed
        self.done += len(batch) - failed
        if self.progress is not None:
            self.shown = time.monotonic()
            self.progress(self.done, self.failed, self.total)

    def _write_batch(self, batch: list[tuple[Point, dict[str, Any]]], summaries: list[dict],
                     encoded: Encoded | None) -> list[StoredRun]:
        """One results file for the batch's metrics (and params); each run's config and summary go to the index."""
        if encoded is None:
            encoded = encode_pairs(batch, self.curves)
        file = write_batch(self.sweep_dir, encoded)
        digest = sha256_hex(encoded[1])  # the file's bytes, in memory: what a reader checks it by
        return [(file, _config_json(point, result), json_text(summary), digest)
                for (point, result), summary in zip(batch, summaries, strict=True)]

    def _write_dir(self, point: Point, result: dict[str, Any], summary: dict) -> bool:
        """``--run-dirs``: the run's own directory (config.yaml, metrics.parquet, params.pt, summary.json).
        False, and ``summary`` made ``failed``, where the directory holds another config's run."""
        metrics = as_table(result["metrics"]) if result["metrics"] is not None else SCHEMA.empty_table()
        if self.curves == "summary":
            metrics = summary_curves(metrics, [metrics.num_rows])[0]
        run_dir = self.sweep_dir / RUNS_DIR / self.names[point.config_hash]
        owner = _owner(run_dir)
        if owner is not None and owner != point.config_hash:  # never write one run over another
            summary.update(status="failed", error=f"{run_dir.name}: the directory holds the run of config {owner}; "
                           "not overwritten")
            return False
        write_run_files(run_dir, point.config.to_yaml(), metrics, summary, result.get("params"))
        return True


def _config_json(point: Point, result: dict[str, Any]) -> str:
    """The run's resolved config as JSON (the worker's, else rebuilt from the spec)."""
    return result.get("config") or point.config.model_dump_json()


