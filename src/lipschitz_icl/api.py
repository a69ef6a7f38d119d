"""The Python API, mirroring ``lipschitz-icl run``:

    >>> import lipschitz_icl as li
    >>> cfg = li.load_config("configs/quickstart.yaml", ["task.L=1"])
    >>> run = li.run(cfg, out="runs/L1")  # writes runs/L1/ (default runs/<name>/) ; write=False: nothing
    >>> run                               # Run(status=converged, steps=..., dir=runs/L1)
    >>> li.load_run(run.dir).attention()  # step x k table of Attn_k, read back

Threads: ``LIPSCHITZ_ICL_THREADS`` torch threads (default 1), as on the command line;
``threads=N`` overrides (``threads.py``). ``tracker="tensorboard"`` (``--tracker``) also writes the metrics, as
they are recorded, as TensorBoard event files into the run directory (``tracking.py``).
"""

from __future__ import annotations

import contextlib
import logging
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from . import NUMERICS_REVISION, __version__
from .analysis import analyze_run_object
from .config import Config, apply_overrides, load_config, validate_config
from .engines import Engine, build_engine
from .errors import ConfigError, UserInputError
from .geometry import GEOMETRY_METRICS
from .interrupts import deferred_signals
from .problem import Problem, build_problem
from .recorder import SCHEMA, Recorder, metrics_frame, metrics_table, pandas
from .store import (
    ANALYSIS_FILE,
    CONFIG_FILE,
    FILES_KEY,
    METRICS_FILE,
    PARAMS_FILE,
    SUMMARY_FILE,
    atomic_write_json,
    atomic_write_text,
    check_digest,
    prepare_run_dir,
    read_metrics_table,
    read_params,
    read_summary,
    recorded_digests,
    write_results,
    write_run_files,
)
from .theory import Theory, theory_of
from .threads import configured_threads, torch_threads
from .tracking import Tracker, check_tracker, open_tracker
from .train import ProgressFn, TrainOutcome, interrupted_outcome, train

if TYPE_CHECKING:
    import pandas as pd  # pandas itself is imported when a frame is first made (recorder.pandas)

log = logging.getLogger("lipschitz_icl")


@dataclass(init=False, eq=False)
class Run:
    """One training run: its resolved ``config``, ``summary`` (summary.json: status, steps, T_1, T_eps, the
    theory's numbers), ``metrics`` (the tidy table of metrics.parquet), ``dir`` (its run directory, None
    when nothing was written) and ``params`` (the trained parameters).

    ``metrics`` may be given as the recorder's Arrow table (``table()`` returns it as such), or as the Recorder
    itself (its table is made when first asked for): it becomes a DataFrame when first read, so a sweep that
    only stores the table never pays for the conversion, nor, for a batch, for one table per run."""

    config: Config
    summary: dict[str, Any]
    metrics: pd.DataFrame  # the property below: tidy, step, metric, k, n, value
    dir: Path | None
    params: dict[str, torch.Tensor] | None  # the trained parameters (params.pt)

    def __init__(self, config: Config, summary: dict[str, Any], metrics: pd.DataFrame | pa.Table | Recorder,
                 dir: Path | None = None, params: dict[str, torch.Tensor] | None = None) -> None:  # noqa: A002
        self.config, self.summary, self.dir, self.params = config, summary, dir, params
        self._frame = None if isinstance(metrics, pa.Table | Recorder) else metrics  # a DataFrame
        self._table = metrics if isinstance(metrics, pa.Table) else None
        self._recorder = metrics if isinstance(metrics, Recorder) else None
        self._on_disk: dict[str, str] | None = None  # keep_metrics_on_disk: the digests its files are read back by

    @property
    def metrics(self) -> pd.DataFrame:
        """The tidy metrics table: step, metric, k, n, value."""
        if self._frame is None:
            held = self._table is not None or self._recorder is not None or self._on_disk is not None
            self._frame = metrics_frame(self.table()) if held else pandas().DataFrame()
        return self._frame

    @metrics.setter
    def metrics(self, frame: pd.DataFrame) -> None:
        self._frame, self._table, self._recorder, self._on_disk = frame, None, None, None

    def table(self) -> pa.Table:
        """The metrics as an Arrow table of the recorder's schema (``recorder.SCHEMA``)."""
        if self._on_disk is not None:  # read back each time: memory is what it saves
            return read_run_metrics(self.dir, self._on_disk)
        if self._table is None and self._recorder is not None:
            self._table, self._recorder = self._recorder.table(), None
        if self._table is None:
            self._table = metrics_table(self.metrics) if len(self.metrics.columns) else SCHEMA.empty_table()
        return self._table

    def keep_metrics_on_disk(self) -> None:
        """Let go of the metrics held in memory: the run's directory holds them (``write_run`` wrote it), and
        ``table()``, ``metric_rows()`` and the rest read them back when asked, checked against the sha256 that its
        summary.json records. What an experiment does with a run of tens of millions of rows once it is written:
        the runs of a group need not all be held at once (a full-size reproduce peaked at 6.9 GB without it)."""
        if self.dir is None or not (self.dir / METRICS_FILE).is_file():
            raise ValueError(f"the run's metrics are not stored ({self.dir}): write_run(run, path) first")
        self._on_disk = recorded_digests(self.dir, read_summary(self.dir)) or {}
        self._frame = self._table = self._recorder = None

    def __getstate__(self) -> dict[str, Any]:
        if self._on_disk is None:  # (one kept on disk holds its directory and digests: read back there)
            self.table()  # a pickled Run holds its table, not a Recorder (whose derive may be a closure)
        return self.__dict__

    def table_source(self) -> pa.Table | Recorder:
        """The metrics as held: the Recorder while no table was made from it (``recorder.joined_table``
        makes the tables of a batch's runs at once), else ``table()``."""
        return self._recorder if self._recorder is not None else self.table()

    def __repr__(self) -> str:
        s = self.summary
        def short(x):
            return f"{x:.4g}" if isinstance(x, float) else x

        return (f"Run(status={s.get('status')}, steps={s.get('steps')}, final_loss={short(s.get('final_loss'))}, "
                f"min_attn={short(s.get('min_attn'))}, dir={self.dir})")

    def metric_rows(self, *metrics: str) -> pd.DataFrame:
        """The tidy rows (step, metric, k, n, value) of these metrics. Taken from ``metrics`` once that frame exists;
        before, from the Arrow table filtered first, so that one metric of a long run does not make the whole table
        a DataFrame (a K = 48 run of 8,000 records holds 38 million rows, 1.6 GB as pandas), nor keep one."""
        if self._frame is not None:
            frame = self._frame if "metric" in self._frame else metrics_frame(SCHEMA.empty_table())  # no columns
            return frame[frame.metric.isin(metrics)]
        table = self.table()
        return metrics_frame(table.filter(pc.is_in(table.column("metric"), value_set=pa.array(metrics, pa.string()))))

    def series(self, metric: str) -> pd.Series:
        """A scalar metric (loss, test_error, attn_min, ...) indexed by step."""
        return self.metric_rows(metric).set_index("step")["value"].rename(metric)

    def attention(self) -> pd.DataFrame:
        """Attn_k: one column per query feature k, one row per recorded step."""
        return self.metric_rows("attn_self").pivot(index="step", columns="k", values="value")

    def geometry(self) -> pd.DataFrame:
        """The geometry metrics (Q_norm_2, Q_norm_F, Q_eig_max, Q_eig_min, Q_eig_ratio, window, n_eff,
        attn_distance): one column each, one row per recorded step; empty unless the run recorded them
        (eval.geometry, the default with continuous inputs)."""
        rows = self.metric_rows(*GEOMETRY_METRICS)
        table = rows.pivot(index="step", columns="metric", values="value")
        return table.reindex(columns=[m for m in GEOMETRY_METRICS if m in table.columns]).rename_axis(columns=None)

    def per_feature(self, metric: str) -> pd.DataFrame:
        """A per-feature metric (attn_self, attn_cross, A, B) as step x (k[, n]) columns."""
        rows = self.metric_rows(metric)
        cols = ["k"] if rows["n"].isna().all() else ["k", "n"]
        return rows.pivot_table(index="step", columns=cols, values="value")


def versions() -> dict[str, str]:
    return {
        "lipschitz_icl": __version__,
        "numerics": str(NUMERICS_REVISION),  # what a run's numbers were computed by (reproduce --resume checks it)
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def default_run_name(cfg: Config) -> str:
    return cfg.name or f"{cfg.task.kind}-L{cfg.task.L:g}-{cfg.engine.kind}-{cfg.config_hash()[:8]}"


def _as_config(config: Config | str | Path | dict | None, overrides: list[str] | None) -> Config:
    if isinstance(config, Config):
        return config.with_overrides(overrides) if overrides else config
    if isinstance(config, dict):
        return validate_config(apply_overrides(dict(config), list(overrides or [])))
    return load_config(config, overrides)


def run(
    config: Config | str | Path | dict | None = None,
    overrides: list[str] | None = None,
    *,
    out: str | Path | None = None,
    write: bool = True,
    force: bool = False,
    progress: ProgressFn | None = None,
    threads: int | None = None,
    tracker: str | Tracker | None = None,
) -> Run:
    """Train once. ``config`` is a Config, a YAML path, a mapping, or None for the defaults.

    Writes ``out`` (default ``runs/<name>/``; nothing with ``write=False``) and logs where, on the
    ``lipschitz_icl`` logger; ``run.dir`` holds it. ``threads`` torch threads (default: the
    ``LIPSCHITZ_ICL_THREADS`` policy of ``threads.py``, 1 unless set). ``tracker``: a tracker's name
    (``"tensorboard"``: event files in the run directory, written as the metrics are recorded; needs ``write``),
    or any ``tracking.Tracker`` object, sent every record's values and left open (the caller closes it)."""
    _check_tracker_use(tracker, write)
    with torch_threads(threads if threads is not None else configured_threads()):
        result = _run(_as_config(config, overrides), out, write, force, progress, tracker)
    if result.dir is not None:
        log.info("wrote run %s (status %s)", result.dir, result.summary.get("status"))
    return result


def _check_tracker_use(tracker: str | Tracker | None, write: bool) -> None:
    """A tracker name must be registered and installed, and needs a run directory; an object must be a Tracker."""
    if tracker is None:
        return
    if isinstance(tracker, str):
        check_tracker(tracker)
        if not write:
            raise UserInputError(f"tracker={tracker!r} writes into the run directory: it needs write=True (or pass "
                                 "a tracking.Tracker object)")
    elif not isinstance(tracker, Tracker):
        raise UserInputError(f"tracker: expected a tracker name or an object with add_scalars(step, values) and "
                             f"close() (got {type(tracker).__name__})")


def _run(cfg: Config, out: str | Path | None, write: bool, force: bool, progress: ProgressFn | None,
         tracker: str | Tracker | None = None) -> Run:
    problem, engine, theory = prepare(cfg)
    run_dir, existed = None, False
    if write:
        existed = out is not None and Path(out).exists()
        run_dir = prepare_run_dir(out, default_run_name(cfg), force=force)
    summary: dict[str, Any] = {"status": "running", "config_hash": cfg.config_hash(), "seed": cfg.seed}
    recorder = Recorder(problem.features.K, engine.score_metrics())
    opened: Tracker | None = None  # the tracker this run opens by name (closed when its files are written)
    try:
        if run_dir is not None:
            try:
                with deferred_signals():
                    atomic_write_text(run_dir / CONFIG_FILE, cfg.to_yaml())
                    atomic_write_json(run_dir / SUMMARY_FILE, summary)
                    if isinstance(tracker, str):
                        opened = open_tracker(tracker, run_dir, cfg.to_yaml())
            except OSError:
                _remove_started(run_dir, existed)
                raise
        recorder.tracker = opened if isinstance(tracker, str) else tracker  # None, or sent every record
        outcome = train(cfg, engine, recorder, progress)
    except KeyboardInterrupt:  # before training started, or as it returned: keep what was recorded
        outcome = interrupted_outcome(recorder)
    with deferred_signals():  # a further Ctrl-C waits until the run's files are written
        try:
            return _finish(cfg, problem, theory, recorder, outcome, run_dir, engine)
        finally:
            recorder.tracker = None  # a caller's Tracker object stays open; the one opened here is closed
            if opened is not None:
                opened.close()


def _finish(cfg: Config, problem, theory, recorder: Recorder, outcome, run_dir: Path | None, engine) -> Run:
    table = recorder.table()
    summary = make_summary(cfg, problem, theory, outcome)
    params = engine.model_state()
    if run_dir is not None:
        write_results(run_dir, table, summary, params)
    return Run(cfg, summary, table, run_dir, params)


def write_run(run: Run, path: str | Path) -> Path:
    """Write a Run made with ``write=False`` (or by ``batch.run_many``) as a run directory, with
    the same files and the same atomic writers as ``run``. Sets and returns ``run.dir``."""
    run.dir = write_run_files(path, run.config.to_yaml(), run.table(), run.summary, run.params)
    return run.dir


def prepare(cfg: Config) -> tuple[Problem, Engine, Theory]:
    """The problem, engine and theory of a run (everything built before training)."""
    # no draw relies on it; belt and braces for user extensions. The CPU generator (and CUDA's once in use):
    # torch.manual_seed also queues a seeding of CUDA that records a stack trace, ~1 ms, a sweep's largest cost
    torch.default_generator.manual_seed(cfg.seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(cfg.seed)
    problem = build_problem(cfg)
    return problem, build_engine(problem), theory_of(problem)


def make_summary(cfg: Config, problem: Problem, theory: Theory, outcome: TrainOutcome,
                 config_hash: str | None = None) -> dict[str, Any]:
    """summary.json of a finished run (``config_hash``: ``cfg.config_hash()`` where the caller has it already)."""
    return {
        "status": outcome.status,
        "steps": outcome.steps,
        "wall_s": round(outcome.wall_s, 4),
        "final_loss": outcome.final_loss,
        "min_attn": outcome.min_attn,
        "T_1": outcome.T_1,
        "T_eps": outcome.T_eps,
        "T_half": outcome.T_half,
        "T_rel": outcome.T_rel,
        "eps": cfg.train.eps,
        **{f"final_{k}": v for k, v in outcome.test_errors.items()},
        **theory.as_dict(),
        "K": problem.features.K if problem.finite else None,  # continuous inputs: no finite feature set
        "d": problem.features.d,
        "N": cfg.prompt.N,
        "lr": cfg.train.lr,
        "task": cfg.task.kind,
        "engine": cfg.engine.kind,
        "seed": cfg.seed,
        "config_hash": cfg.config_hash() if config_hash is None else config_hash,
        "versions": versions(),
        "error": outcome.error,
    }


def _remove_started(run_dir: Path, existed: bool) -> None:
    """Undo a run directory whose first files could not be written (nothing half-done is left)."""
    for name in (CONFIG_FILE, SUMMARY_FILE):
        with contextlib.suppress(OSError):
            (run_dir / name).unlink(missing_ok=True)
    if not existed:
        with contextlib.suppress(OSError):
            run_dir.rmdir()


def load_run(path: str | Path, require_finished: bool = True) -> Run:
    """Load a run directory written by ``run`` (its params too, when params.pt exists).

    Its files must be those written together: summary.json records the sha256 of config.yaml,
    metrics.parquet and params.pt (runs of this version), and a file that differs (one of another
    run) is refused, naming it. With ``require_finished`` (the default; ``analyze`` and ``evaluate``
    rely on it) a run whose summary still says ``running`` (killed, or still training) is refused, and
    so is one whose config.yaml does not match the ``config_hash`` in its summary (files of two
    different runs)."""
    p = Path(path)
    if not (p / SUMMARY_FILE).is_file():
        raise UserInputError(f"{path}: not a run directory (no {SUMMARY_FILE})")
    summary = read_summary(p)
    try:
        cfg = load_config(p / CONFIG_FILE)
    except ConfigError as e:  # a recorded config that no longer validates: name the file
        raise ConfigError(f"{p / CONFIG_FILE}: {e.field}" if e.field else str(p / CONFIG_FILE), e.message) from None
    if require_finished:
        check_finished(p, cfg, summary)
    digests = recorded_digests(p, summary)
    if digests is not None and CONFIG_FILE in digests:
        check_digest(p / CONFIG_FILE, (p / CONFIG_FILE).read_bytes(), digests)
    # the table, made a DataFrame when ``metrics`` is first read (``attention()`` and the like need not)
    metrics = read_run_metrics(p, digests) if (p / METRICS_FILE).is_file() else pandas().DataFrame()
    params = read_params(p, digests) if (p / PARAMS_FILE).is_file() else None
    summary.pop(FILES_KEY, None)  # checked: the summary as the run made it (``run``'s, a sweep's stored one)
    return Run(cfg, summary, metrics, p, params)


def read_run_metrics(run_dir: Path, digests: dict[str, str] | None = None) -> pa.Table:
    """metrics.parquet of a run, checked (``read_metrics_table``; against ``digests`` when given) and of the
    recorder's schema: a table of other columns or types is bad input naming the file."""
    table = read_metrics_table(run_dir, digests=digests)
    if not table.schema.equals(SCHEMA, check_metadata=False):
        raise UserInputError(f"{run_dir / METRICS_FILE}: not a metrics table (columns {table.schema.names}, "
                             f"expected {SCHEMA.names} as {', '.join(str(t) for t in SCHEMA.types)})")
    return table


def check_finished(run_dir: Path, cfg: Config, summary: dict[str, Any]) -> None:
    """Refuse a run that never finished or whose files belong to different runs."""
    status = summary.get("status")
    if status in (None, "running"):
        said = f"{run_dir}: the run did not finish (summary status {status!r}: still running, or killed; rerun it"
        raise UserInputError(f"{said} with li.run(..., out=..., force=True))", cli=f"{said} with --force)")
    recorded = summary.get("config_hash")
    if recorded is not None and recorded != cfg.config_hash():
        said = (f"{run_dir}: {CONFIG_FILE} does not match the config_hash of {SUMMARY_FILE} (files of different runs; "
                "rerun it")
        raise UserInputError(f"{said} with li.run(..., out=..., force=True))", cli=f"{said} with --force)")


def analyze_run(run_dir: str | Path, osc_tol: float = 1e-4, write: bool = True) -> dict[str, Any]:
    """Analyse a finished run directory with its own settings (analysis.t1_level,
    analysis.eps_attn, train.eps) and, with ``write``, save the result as analysis.json beside its
    metrics (an OSError from that write propagates; the result is computed first)."""
    loaded = load_run(run_dir)
    if loaded.metrics.empty:
        raise UserInputError(f"{run_dir}: the run has no {METRICS_FILE} to analyse")
    result = analyze_run_object(loaded, osc_tol)
    if write:
        atomic_write_json(Path(run_dir) / ANALYSIS_FILE, result)
    return result
