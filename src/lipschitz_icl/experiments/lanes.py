"""A group's runs over the cores: runs that no batch takes (the sampled engine's, the neural models'; ``batch.run_many``
trains them one after another) train in ``--jobs N`` processes forked from the experiment's (``forked.run_forked``),
each a share of the runs dealt round robin, so that every lane gets every setting of a group ordered by setting.
A job of one experiment (or one left to resume) so uses every core; in a job of several, N experiments run side by
side and each may have N lanes, so a long suite of such runs (Collins et al.'s) does not keep one core to itself while
the other idles at the end. Each run comes back through a pipe the moment it ends and is written by the experiment's
process, as in one process. A run is its config trained by the same code wherever it trains, so the numbers are
those of one process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..api import Run
from ..batch import run_many
from ..config import Config
from ..forked import Arrays, ChildDied, ForkedInterrupted, arrays_of, run_forked, tensors_of

Crossing = tuple[int, Run, Arrays | None]  # (index, run without params, params)


def _crossing(i: int, run: Run) -> Crossing:
    """A run as it crosses the pipe: its parameters as NumPy arrays with their devices (``forked.arrays_of``)."""
    return i, Run(run.config, run.summary, run.table(), run.dir, None), arrays_of(run.params)


def _arrived(crossing: Crossing) -> tuple[int, Run]:
    i, run, params = crossing
    run.params = tensors_of(params)
    return i, run


def run_in_lanes(configs: list[Config], lanes: int, on_run: Callable[[int, Run], None]) -> None:
    """Train ``configs`` in up to ``lanes`` forked processes; ``on_run(i, run)`` here for each run as it arrives
    (i indexes ``configs``). An exception in a lane is raised here (a lane that died: RuntimeError), after the other
    lanes are ended; Ctrl-C ends the lanes and raises KeyboardInterrupt (runs already arrived were handed over)."""
    shares = [list(range(lane, len(configs), lanes)) for lane in range(min(lanes, len(configs)))]

    def work(share: list[int], tick: Callable[[Any], None]) -> list[Crossing]:
        sent: set[int] = set()

        def send(k: int, run: Run) -> None:
            sent.add(k)
            tick(_crossing(share[k], run))

        runs = run_many([configs[i] for i in share], on_run=send)
        return [_crossing(share[k], run) for k, run in enumerate(runs) if k not in sent]  # each run arrives once

    def answered(pos: int, outcome: Any, elapsed: float) -> None:  # noqa: ARG001 - run_forked's signature
        if isinstance(outcome, ChildDied):
            raise RuntimeError(f"a process training runs {shares[pos][:3]}... ended: {outcome}")
        if isinstance(outcome, BaseException):
            raise outcome
        for crossing in outcome:
            on_run(*_arrived(crossing))

    try:
        run_forked(shares, work, len(shares), lambda pos: None, answered,
                   lambda pos, crossing: on_run(*_arrived(crossing)))
    except ForkedInterrupted:  # the lanes' positions mean nothing above: a plain interrupt
        raise KeyboardInterrupt from None
