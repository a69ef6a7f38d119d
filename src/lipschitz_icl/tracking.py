"""Trackers: optional sinks that receive a run's metrics as they are recorded, for a live view while it trains
(``lipschitz-icl run --tracker tensorboard``, ``li.run(cfg, tracker="tensorboard")``).

A tracker is any object with ``add_scalars(step, values)`` and ``close()`` (the ``Tracker`` protocol). The
recorder calls ``add_scalars`` once per recorded step, with that step's values as ``{tag: value}``:

    loss, test_error, grad_norm, attn_min, attn_mean, Q_norm_2, ...   each metric with one value per step
    attn_self/k0, attn_self/k1, ..., A/k0, ...                        each per-feature metric, one tag per k
    attn_min/L0H1, attn_self/L0H1/k0, ...                             per layer and head (transformer models)

The pair metrics (``attn_cross``, ``B``: K(K - 1) values a step each) stay in metrics.parquet only. Tags and
values are those of the run's metrics table (``step_values``): the same numbers at the same steps.

``TRACKERS`` is the registry of the trackers the command line can name; ``TensorBoardTracker`` writes TensorBoard
event files (``torch.utils.tensorboard.SummaryWriter``, which needs the ``tensorboard`` package: the optional
extra ``lipschitz-icl[tracking]``) into the run directory, flushed every ``FLUSH_S`` seconds, with the resolved
config as text. It is imported only when a tracker is opened: a run without one never loads it.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from .errors import UserInputError

FLUSH_S = 5  # seconds between flushes of the event file: curves appear while the run trains
QUEUE = 1000  # events the writer holds before the trainer waits for it (SummaryWriter's default: 10)
CONFIG_TAG = "config"  # the resolved config (config.yaml) as text; TensorBoard shows it as "config/text_summary"
WRITER_MODULE = "torch.utils.tensorboard"  # SummaryWriter; imports tensorboard
INSTALL_HINT = 'pip install tensorboard (or pip install "lipschitz-icl[tracking]")'


@runtime_checkable
class Tracker(Protocol):
    """A sink for a run's metrics as they are recorded."""

    def add_scalars(self, step: int, values: dict[str, float]) -> None:
        """The values recorded at ``step``, by tag (``tag_of``)."""

    def close(self) -> None:
        """Write out what is held; called once, when the run's files are written."""


class TensorBoardTracker:
    """TensorBoard event files in ``log_dir`` (``tensorboard --logdir`` on it or a folder above): every value
    as a scalar against the step, and the config's YAML as text (tag ``config``)."""

    def __init__(self, log_dir: str | Path, config_yaml: str, flush_s: float = FLUSH_S) -> None:
        writer_module = importlib.import_module(WRITER_MODULE)  # optional: only when asked for
        self.protos = importlib.import_module("tensorboard.compat.proto.summary_pb2")
        # a queue long enough that the trainer never waits for the writer thread between flushes
        self.writer = writer_module.SummaryWriter(log_dir=str(log_dir), flush_secs=flush_s, max_queue=QUEUE)
        self.writer.add_text(CONFIG_TAG, f"```yaml\n{config_yaml}```")  # fenced: TensorBoard renders markdown

    def add_scalars(self, step: int, values: dict[str, float]) -> None:
        """One event per step holding every value (as ``SummaryWriter.add_scalar`` stores each: a float32
        ``simple_value``), not one event per value: ~15x fewer events and queue hand-offs."""
        value = self.protos.Summary.Value
        summary = self.protos.Summary(value=[value(tag=tag, simple_value=v) for tag, v in values.items()])
        self.writer.file_writer.add_summary(summary, step)

    def close(self) -> None:
        self.writer.close()


# name -> (how to open one in a run directory with its config's YAML, the package it needs, the module it imports)
TRACKERS: dict[str, tuple[Callable[[Path, str], Tracker], str, str]] = {
    "tensorboard": (TensorBoardTracker, "tensorboard", WRITER_MODULE),
}


def tracker_names() -> list[str]:
    return sorted(TRACKERS)


def installed(package: str) -> bool:
    """Whether ``package`` can be imported here (found on the path; not imported)."""
    return importlib.util.find_spec(package) is not None


def check_tracker(name: str) -> None:
    """Refuse, in one line, a tracker name that is not registered or whose package is not installed."""
    if name not in TRACKERS:
        allowed = ", ".join(tracker_names())
        raise UserInputError(f"tracker={name!r}: unknown tracker (allowed: {allowed})",
                             cli=f"--tracker {name}: unknown tracker (allowed: {allowed})")
    _, package, module = TRACKERS[name]
    if not installed(package):
        said = f"needs the {package} package, which is not installed: {INSTALL_HINT}"
        raise UserInputError(f"tracker={name!r} {said}", cli=f"--tracker {name} {said}")
    try:  # installed but broken (a version torch cannot use): said here, before a run directory is made
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure is the same one line
        said = f"cannot import {module} ({type(e).__name__}: {e}); reinstall it: {INSTALL_HINT}"
        raise UserInputError(f"tracker={name!r}: {said}", cli=f"--tracker {name}: {said}") from None


def open_tracker(name: str, run_dir: Path, config_yaml: str) -> Tracker:
    """The tracker ``name`` writing into ``run_dir`` (checked by ``check_tracker`` first)."""
    check_tracker(name)
    return TRACKERS[name][0](Path(run_dir), config_yaml)


_UNSAFE = re.compile(r"[^-/\w.]")  # TensorBoard's tag characters; others become "_" (as torch would, warning)


def tag_of(metric: str, k: int | None = None) -> str:
    """The tracker's tag of a metric row: ``loss``; ``attn_self/k3`` per feature; ``attn_min/L0H1`` per head."""
    tag = metric.replace("@", "/")
    return _UNSAFE.sub("_", tag if k is None else f"{tag}/k{k}")


def step_values(table: pa.Table) -> Iterator[tuple[int, dict[str, float]]]:
    """The tracked values of a metrics table (``recorder.SCHEMA``), step by step in the order recorded: every
    row without an ``n`` (pair metrics are left out), as ``{tag_of(metric, k): value}``."""
    if not table.num_rows:
        return
    keep = np.asarray(table.column("n").is_null())
    steps = table.column("step").to_numpy()[keep]
    metrics = np.asarray(table.column("metric").to_pylist(), dtype=object)[keep]
    ks = table.column("k").to_pylist()
    ks = [k for k, kept in zip(ks, keep, strict=True) if kept]
    values = table.column("value").to_numpy()[keep]
    bounds = np.flatnonzero(np.diff(steps)) + 1
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(steps)], strict=True):
        yield int(steps[lo]), {tag_of(metrics[i], ks[i]): float(values[i]) for i in range(lo, hi)}


def replay(tracker: Tracker, table: pa.Table) -> None:
    """Send a finished run's metrics to ``tracker``, step by step (as they were recorded)."""
    for step, values in step_values(table):
        tracker.add_scalars(step, values)


def write_events(name: str, run_dir: Path, config_yaml: str, table: pa.Table) -> None:
    """The tracker ``name``'s files of a finished run in ``run_dir`` (sweeps and reproduce: a run's metrics
    reach the process that writes its directory when it ends). A failure is a warning: the run is written."""
    try:
        tracker = open_tracker(name, run_dir, config_yaml)
        try:
            replay(tracker, table)
        finally:
            tracker.close()
    except Exception as e:  # noqa: BLE001 - a full disk: the run's own files are whole, monitoring is optional
        warnings.warn(f"{run_dir}: tracker {name} could not write its files ({type(e).__name__}: {e})",
                      RuntimeWarning, stacklevel=2)
