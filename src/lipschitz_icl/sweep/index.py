"""The sweep index: ``index.sqlite``, one row per run, readable with plain ``sqlite3``.

    sqlite3 sweeps/l_sweep/index.sqlite \\
        "select name, status, final_loss, T_eps from runs order by point"

Only the sweep driver writes it (WAL journal, one transaction per change), so a reader never
sees a half-written row and a killed sweep leaves an index that the next run resumes from.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserInputError
from ..recorder import pandas

if TYPE_CHECKING:
    import pandas as pd

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


RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}")  # one plain folder name: no separator, never '..'
CURRENT_TABLE = "current"  # the config hashes of the spec (or list of configs) run last into the folder
# where each finished run's results are: its batch file under results/ (null: its run directory), its resolved
# config and its summary (JSON text), and the sha256 of the batch file's bytes (null in indexes written before it
# was recorded); written with the run's row of ``runs``, in the same transaction
STORED_TABLE = "stored"
STORED_COLUMNS = ("config_hash TEXT PRIMARY KEY, results TEXT, config TEXT NOT NULL, summary TEXT NOT NULL, "
                  "results_sha256 TEXT")
DIGEST = "results_sha256"


def check_run_names(names: Iterable[str], path: Path) -> None:
    """Every run name of an index is one plain path component (``runs/<name>`` stays inside the sweep);
    a row named ``../x``, ``/abs`` or ``a/b`` (a hand-edited or malicious index) is bad input naming it."""
    for name in names:
        if not isinstance(name, str) or not RUN_NAME.fullmatch(name):
            raise UserInputError(f"{path}: a row names the run directory {str(name)[:80]!r}, which is not one plain "
                                 "folder name (letters, digits, '.', '_', '-', not starting with '.' or '-'); "
                                 "refusing to use this index")


def one_line_error(e: BaseException) -> str:
    return " ".join(str(e).split())[:160] or type(e).__name__


# SQLite result codes (the low byte) of a fault of the disk or the file system, not of the index's content: full,
# I/O error, read-only, busy past the timeout, locked, cannot open
RUNTIME_CODES = {13, 10, 8, 5, 6, 14}


def is_runtime_fault(e: sqlite3.Error) -> bool:
    return (getattr(e, "sqlite_errorcode", 0) & 0xFF) in RUNTIME_CODES


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """A write to the index: a fault of the disk (full, I/O error) is an OSError naming the file, exit 1 from the
    CLI; the transaction is rolled back, so the index keeps every row committed before and stays readable."""
    try:
        yield
    except sqlite3.OperationalError as e:
        if not is_runtime_fault(e):
            raise
        full = (e.sqlite_errorcode & 0xFF) == 13
        raise OSError(errno.ENOSPC if full else errno.EIO, f"{path}: cannot be written ({one_line_error(e)}); the "
                      "runs it recorded before are kept") from None


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


class Index:
    """Read-write access to ``index.sqlite`` (the driver's side)."""

    def __init__(self, sweep_dir: str | Path) -> None:
        self.path = Path(sweep_dir) / INDEX_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            with writing(self.path):
                self._prepare()
        except OSError:
            self.db.close()
            raise
        except sqlite3.DatabaseError as e:  # not SQLite, truncated, another schema: bad input naming the file
            self.db.close()
            raise UserInputError(f"{self.path}: cannot be used as a sweep index ({one_line_error(e)}); move it "
                                 "away or use another --out") from None

    def _prepare(self) -> None:
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        cols = ", ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(f"CREATE TABLE IF NOT EXISTS runs ({cols})")
            self.db.execute(f"CREATE TABLE IF NOT EXISTS {CURRENT_TABLE} (config_hash TEXT PRIMARY KEY)")
            self.db.execute(f"CREATE TABLE IF NOT EXISTS {STORED_TABLE} ({STORED_COLUMNS})")
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            if DIGEST not in _columns(self.db, STORED_TABLE):  # an index written before the digests
                self.db.execute(f"ALTER TABLE {STORED_TABLE} ADD COLUMN {DIGEST} TEXT")
        found = [row[1] for row in self.db.execute("PRAGMA table_info(runs)")]
        if found != NAMES:
            raise sqlite3.DatabaseError(f"its runs table has other columns ({', '.join(found)[:120]})")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def statuses(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT config_hash, status FROM runs"))

    def check_types(self) -> None:
        """``check_types`` in SQL, without reading the rows: every column of ``runs`` holds values of its type or
        nulls (what ``sweep run`` checks of the index it reports from)."""
        for name, kind, _ in COLUMNS:
            text = kind.startswith("TEXT")
            allowed = "('text', 'null')" if text else "('integer', 'real', 'null')"
            found = self.db.execute(f"SELECT typeof({name}) FROM runs WHERE typeof({name}) NOT IN {allowed} "
                                    "LIMIT 1").fetchone()
            if found is not None:
                raise _bad_column(self.path, name, found[0], text)

    def names(self) -> dict[str, str]:
        """config hash -> run directory name, of every row (each checked to be one plain folder name)."""
        names = dict(self.db.execute("SELECT config_hash, name FROM runs"))
        check_run_names(names.values(), self.path)
        return names

    def add(self, rows: Iterable[tuple[str, str, int, dict[str, Any], int]]) -> None:
        """Register runs (hash, name, point, axes, seed) in one transaction: new ones as ``pending``;
        known ones keep their status, results and run directory name (their directory never
        moves), with point and axes updated. A new run whose name another row already holds is an
        error (UserInputError) and nothing is registered: two configs never share a directory."""
        rows = list(rows)
        with writing(self.path), self.db:
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
            self.db.execute(f"DELETE FROM {CURRENT_TABLE}")  # the rows of this spec: what table/status show
            self.db.executemany(f"INSERT OR IGNORE INTO {CURRENT_TABLE} VALUES (?)", [(r[0],) for r in rows])

    def record_batch(self, rows: list[tuple[str, dict[str, Any], float | None, StoredRun | None]]) -> None:
        """Store the results of a batch of runs, in one transaction: each row (hash, summary, elapsed_s,
        stored) sets the run's summary numbers and, where ``stored`` = (results file or None, config JSON,
        summary JSON, sha256 of the results file or None) is given, where its results are."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        updates, stored = [], []
        for config_hash, summary, elapsed_s, where in rows:
            values = {col: _clean(summary.get(key)) for key, col in SUMMARY_KEYS.items()}
            values.update(status=summary.get("status", "failed"), error=summary.get("error"),
                          elapsed_s=None if elapsed_s is None else round(elapsed_s, 4), finished_at=now)
            updates.append([*values.values(), config_hash])
            if where is not None:
                stored.append((config_hash, *where))
        sets = ", ".join(f"{k}=?" for k in [*SUMMARY_KEYS.values(), "status", "error", "elapsed_s", "finished_at"])
        with writing(self.path), self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(f"UPDATE runs SET {sets} WHERE config_hash=?", updates)
            self.db.executemany(f"DELETE FROM {STORED_TABLE} WHERE config_hash=?", [(h,) for h, *_ in rows])
            self.db.executemany(f"INSERT INTO {STORED_TABLE} (config_hash, results, config, summary, {DIGEST}) "
                                "VALUES (?, ?, ?, ?, ?)", stored)

    def mark_pending(self, hashes: Iterable[str]) -> None:
        """Set these rows ``pending`` (their files stay): rows of another numerics revision, so that a spec that has
        their points again trains them instead of reading their numbers as this revision's."""
        with writing(self.path), self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany("UPDATE runs SET status='pending' WHERE config_hash=?", [(h,) for h in hashes])

    def results_files(self) -> set[str]:
        """The batch files some row names."""
        return {r for (r,) in self.db.execute(f"SELECT DISTINCT results FROM {STORED_TABLE}") if r}


StoredRun = tuple[str | None, str, str, str | None]  # (results file or None, config JSON, summary JSON, its sha256)


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def _read_runs(path: Path, current_only: bool = False, stored: str = "results") -> pd.DataFrame:
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
        pd = pandas()
        try:
            frame = pd.read_sql_query(_runs_query(db, current_only), db)
            frame = frame.merge(_stored(db, stored), on="config_hash", how="left", validate="one_to_one")
            frame.attrs["hashes"] = {h for (h,) in db.execute("SELECT config_hash FROM runs")}
            return frame
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:
            last = e
        finally:
            db.close()
    raise UserInputError(f"{path}: cannot be read as a sweep index ({one_line_error(last or ValueError())})")


def _stored(db: sqlite3.Connection, columns: str) -> pd.DataFrame:
    """``columns`` of the ``stored`` table (none in an index made before it existed; a column added since: null)."""
    names, pd = ["config_hash", *columns.split(", ")], pandas()
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (STORED_TABLE,)).fetchone():
        return pd.DataFrame({n: pd.Series(dtype=object) for n in names})
    there = _columns(db, STORED_TABLE)
    return pd.read_sql_query(f"SELECT {', '.join(n if n in there else f'NULL AS {n}' for n in names)} "
                             f"FROM {STORED_TABLE}", db)


def _runs_query(db: sqlite3.Connection, current_only: bool) -> str:
    """All rows, or those of the spec run last (an index made before that was recorded: all rows)."""
    has_current = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (CURRENT_TABLE,)).fetchone()
    where = f" WHERE config_hash IN (SELECT config_hash FROM {CURRENT_TABLE})" if current_only and has_current else ""
    return f"SELECT * FROM runs{where} ORDER BY point, name"


NUMBERS = {"integer", "floating", "mixed-integer-float", "decimal", "empty"}  # pandas' inferred kinds


def check_types(frame: pd.DataFrame, path: Path) -> None:
    """Every column of ``runs`` holds values of its SQL type or nulls (SQLite stores whatever it is given: a
    hand-edited index may hold text where a number belongs, or a blob)."""
    for name, kind, _ in COLUMNS:
        column = frame[name]
        text = kind.startswith("TEXT")
        found = "empty" if column.isna().all() else pandas().api.types.infer_dtype(column, skipna=True)
        if found not in ({"string", "empty"} if text else NUMBERS):
            raise _bad_column(path, name, found, text)


def _bad_column(path: Path, name: str, found: str, text: bool) -> UserInputError:
    return UserInputError(f"{path}: holds values a sweep index cannot hold (column {name}: {found} values, "
                          f"{'text' if text else 'numbers'} expected)")


def _axes_of(texts: list[str]) -> list[Any]:
    """The axes JSON of every row, decoded as one JSON array (one call: ~10x faster than one per row); row by row
    where that fails, so that a damaged value raises its own error."""
    if all(isinstance(t, str) for t in texts):
        try:
            decoded = json.loads("[" + ",".join(texts) + "]")
            if len(decoded) == len(texts):
                return decoded
        except ValueError:
            pass
    return [json.loads(t) for t in texts]


def load_index(sweep_dir: str | Path, expand_axes: bool = True, current_only: bool = False,
               stored_json: bool = False, digests: bool = False) -> pd.DataFrame:
    """The index of a sweep directory as a DataFrame, one row per run in spec order (``current_only``: only
    the runs of the spec run last into the folder, not those of an earlier, larger spec).

    Adds ``results`` (the batch file under results/ that holds the run's metrics; None for a run in its
    own directory), ``run_dir`` (that directory; None for a run stored by batch) and, with ``expand_axes``,
    one column per axis key (e.g. ``task.L``, ``seed``) read from the ``axes`` JSON. ``stored_json``: also
    ``config`` and ``summary``, each finished run's resolved config and summary as JSON text. ``digests``: also
    ``results_sha256``, the sha256 of the results file recorded with each run (None before it was recorded),
    and ``attrs["hashes"]``, the config hashes of every row of the index (``current_only`` or not)."""
    path = Path(sweep_dir) / INDEX_FILE
    if not path.is_file():
        raise UserInputError(f"{sweep_dir}: not a sweep directory (no {INDEX_FILE})")
    stored = "results" + (", config, summary" if stored_json else "") + (f", {DIGEST}" if digests else "")
    frame = _read_runs(path, current_only, stored)
    hashes = frame.attrs.pop("hashes", set())
    if list(frame.columns)[: len(NAMES)] != NAMES:
        raise UserInputError(f"{path}: not a sweep index of this version (columns {', '.join(frame.columns)[:120]})")
    check_types(frame, path)
    check_run_names(frame["name"], path)
    results = [r if isinstance(r, str) else None for r in frame["results"]]
    series = pandas().Series
    frame["results"] = series(results, index=frame.index, dtype=object)  # None, never NaN: a missing file
    frame["run_dir"] = series([None if r else str(Path(sweep_dir) / RUNS_DIR / n) for n, r in
                                  zip(frame["name"], results, strict=True)], index=frame.index, dtype=object)
    try:
        for col in ("seed", "steps", "T_1", "T_eps", "point"):
            frame[col] = frame[col].astype("Int64")
        axes = _axes_of(frame["axes"].tolist()) if expand_axes else []
        if not all(isinstance(a, dict) for a in axes):
            raise ValueError("an axes value is not a JSON object")
    except (ValueError, TypeError, RecursionError) as e:  # values of the wrong type: a damaged or hand-made index
        raise UserInputError(f"{path}: holds values a sweep index cannot hold ({one_line_error(e)})") from None
    keys: list[str] = []
    if expand_axes and len(frame):
        for a in axes:
            keys += [k for k in a if k not in keys and k not in frame.columns]
        for pos, key in enumerate(keys):
            frame.insert(2 + pos, key, [a.get(key) for a in axes])
        keys += ["seed"] if any("seed" in a for a in axes) else []
    frame.attrs["axes"] = keys  # the axis columns, in spec order ("seed" last when it is an axis)
    frame.attrs["sweep_dir"] = str(sweep_dir)  # where the rows came from (the plots read stored summaries there)
    if digests:
        frame.attrs["hashes"] = hashes
    return frame
