"""The sweep index: ``index.sqlite``, one row per run, readable with plain ``sqlite3``.

    sqlite3 sweeps/l_sweep/index.sqlite \\
        "select name, status, final_loss, T_eps from runs order by point"

Only the sweep driver writes it (WAL journal, one transaction per change), so a reader never
sees a half-written row and a killed sweep leaves an index that the next run resumes from.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import UserInputError

INDEX_FILE = "index.sqlite"
RUNS_DIR = "runs"
FINISHED = ("converged", "trivial", "budget", "diverged")  # a row with one of these is never rerun (unless --force)
SCHEMA_VERSION = 1

# (column, SQL type, meaning): the documented schema (docs/SWEEPS.md)
COLUMNS: list[tuple[str, str, str]] = [
    ("config_hash", "TEXT PRIMARY KEY", "hash of the resolved config (name excluded)"),
    ("name", "TEXT NOT NULL", "run directory under runs/"),
    ("point", "INTEGER", "position of the run in the spec (or in the list of configs)"),
    ("axes", "TEXT NOT NULL", "JSON object of the axis values that define the run"),
    ("status", "TEXT NOT NULL", "pending | converged | trivial | budget | diverged | interrupted | failed"),
    ("seed", "INTEGER", "the run's seed"),
    ("steps", "INTEGER", "gradient steps done"),
    ("final_loss", "REAL", "loss at the end"),
    ("final_test_error", "REAL", "error on unseen functions at the end"),
    ("min_attn", "REAL", "final min_k Attn_k"),
    ("T_1", "INTEGER", "first step with min_k Attn_k >= analysis.t1_level"),
    ("T_eps", "INTEGER", "first step with loss <= eps"),
    ("L", "REAL", "Lipschitz bound L"),
    ("L_star", "REAL", "threshold L* = c / (Delta delta)"),
    ("regime", "TEXT", "flat | sharp | near-threshold"),
    ("Delta", "REAL", "min_{k != n} ||v_k - v_n||"),
    ("delta_nd", "REAL", "non-degeneracy delta (summary.json's delta; SQL names ignore case)"),
    ("wall_s", "REAL", "training wall time (summary.json's wall_s)"),
    ("elapsed_s", "REAL", "the whole run on its worker: build, train, encode"),
    ("error", "TEXT", "error text of a failed run"),
    ("finished_at", "TEXT", "UTC time the driver recorded the result"),
]
NAMES = [c[0] for c in COLUMNS]
# summary.json key -> index column (SQLite column names ignore case: delta cannot sit beside Delta)
SUMMARY_KEYS = {k: k for k in ["seed", "steps", "final_loss", "final_test_error", "min_attn", "T_1", "T_eps", "L",
                               "L_star", "regime", "Delta", "wall_s"]} | {"delta": "delta_nd"}


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


class Index:
    """Read-write access to ``index.sqlite`` (the driver's side)."""

    def __init__(self, sweep_dir: str | Path) -> None:
        self.path = Path(sweep_dir) / INDEX_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        cols = ", ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(f"CREATE TABLE IF NOT EXISTS runs ({cols})")
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def statuses(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT config_hash, status FROM runs"))

    def names(self) -> dict[str, str]:
        """config hash -> run directory name, of every row."""
        return dict(self.db.execute("SELECT config_hash, name FROM runs"))

    def add(self, rows: Iterable[tuple[str, str, int, dict[str, Any], int]]) -> None:
        """Register runs (hash, name, point, axes, seed) in one transaction: new ones as ``pending``;
        known ones keep their status, results and run directory name (their directory never
        moves), with point and axes updated. A new run whose name another row already holds is an
        error (UserInputError) and nothing is registered: two configs never share a directory."""
        rows = list(rows)
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            taken = dict(self.db.execute("SELECT name, config_hash FROM runs"))
            known = set(taken.values())
            for h, name, *_ in rows:
                owner = h if h in known else taken.setdefault(name, h)
                if owner != h:
                    raise UserInputError(f"runs/{name}: the run directory of config {owner} would also hold config "
                                         f"{h}; refusing to mix two runs in one directory")
            self.db.executemany(
                "INSERT INTO runs (config_hash, name, point, axes, status, seed) VALUES (?, ?, ?, ?, 'pending', ?) "
                "ON CONFLICT(config_hash) DO UPDATE SET point=excluded.point, axes=excluded.axes",
                [(h, name, point, json.dumps(axes, sort_keys=False), seed) for h, name, point, axes, seed in rows],
            )

    def record(self, config_hash: str, summary: dict[str, Any], elapsed_s: float | None) -> None:
        """Store a finished (or failed) run's summary numbers, in one transaction."""
        values = {col: _clean(summary.get(key)) for key, col in SUMMARY_KEYS.items()}
        values.update(
            status=summary.get("status", "failed"),
            error=summary.get("error"),
            elapsed_s=None if elapsed_s is None else round(elapsed_s, 4),
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        sets = ", ".join(f"{k}=?" for k in values)
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(f"UPDATE runs SET {sets} WHERE config_hash=?", [*values.values(), config_hash])


def _read_runs(path: Path) -> pd.DataFrame:
    """The ``runs`` table. Where the folder and file are writable it is opened plainly and only
    read (SQLite then removes its ``-wal``/``-shm`` files on close, which ``mode=ro`` would leave
    behind). A read-only copy (a read-only folder, file or file system) cannot hold the ``-shm``
    file a WAL database needs: then ``mode=ro``, and failing that ``immutable=1``, which is right for
    such a copy since nothing writes to it."""
    uri = path.resolve().as_uri()
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    last: Exception | None = None
    for flags in ("mode=rw", "mode=ro", "mode=ro&immutable=1")[0 if writable else 1:]:
        try:
            db = sqlite3.connect(f"{uri}?{flags}", uri=True, timeout=30)
        except sqlite3.Error as e:
            last = e
            continue
        try:
            return pd.read_sql_query("SELECT * FROM runs ORDER BY point, name", db)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:
            last = e
        finally:
            db.close()
    raise UserInputError(f"{path}: cannot be read as a sweep index ({last})")


def load_index(sweep_dir: str | Path, expand_axes: bool = True) -> pd.DataFrame:
    """The index of a sweep directory as a DataFrame, one row per run in spec order.

    Adds ``run_dir`` (the run's directory) and, with ``expand_axes``, one column per axis key
    (e.g. ``task.L``, ``seed``) read from the ``axes`` JSON."""
    path = Path(sweep_dir) / INDEX_FILE
    if not path.is_file():
        raise UserInputError(f"{sweep_dir}: not a sweep directory (no {INDEX_FILE})")
    frame = _read_runs(path)
    frame["run_dir"] = [str(Path(sweep_dir) / RUNS_DIR / n) for n in frame["name"]]
    for col in ("seed", "steps", "T_1", "T_eps", "point"):
        frame[col] = frame[col].astype("Int64")
    keys: list[str] = []
    if expand_axes and len(frame):
        axes = [json.loads(a) for a in frame["axes"]]
        for a in axes:
            keys += [k for k in a if k not in keys and k not in frame.columns]
        for pos, key in enumerate(keys):
            frame.insert(2 + pos, key, [a.get(key) for a in axes])
        keys += ["seed"] if any("seed" in a for a in axes) else []
    frame.attrs["axes"] = keys  # the axis columns, in spec order ("seed" last when it is an axis)
    return frame
