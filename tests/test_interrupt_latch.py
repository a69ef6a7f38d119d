"""A Ctrl-C that library code swallows (a KeyboardInterrupt raised inside compiled code that drops
the error, as pyarrow's ``to_pandas`` can) still stops training: ``interrupts.interrupt_latch``
remembers it and the loops raise it at their next step."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import lipschitz_icl as li
from lipschitz_icl.batch import RunsInterrupted, run_many
from lipschitz_icl.interrupts import deferred_signals, interrupt_latch

ROOT = Path(__file__).resolve().parents[1]


def _swallowed_ctrl_c() -> None:
    """What a library that drops the error does: the signal's KeyboardInterrupt never leaves it."""
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass


def _configs(steps: list[int], **extra: str) -> list[li.Config]:
    over = [f"{k}={v}" for k, v in extra.items()]
    return [li.load_config(ROOT / "configs/quickstart.yaml", [f"train.steps={s}", "train.eps=1e-12",
                                                               "train.log_every=10", *over]) for s in steps]


def test_a_swallowed_interrupt_is_raised_by_the_next_check():
    with pytest.raises(KeyboardInterrupt), interrupt_latch() as check:
        check()  # nothing pending: no raise
        _swallowed_ctrl_c()
        check()


def test_a_swallowed_interrupt_is_raised_when_the_block_ends():
    with pytest.raises(KeyboardInterrupt), interrupt_latch():
        _swallowed_ctrl_c()


def test_an_inner_latch_inherits_an_interrupt_the_outer_one_holds():
    with pytest.raises(KeyboardInterrupt), interrupt_latch():
        _swallowed_ctrl_c()
        with interrupt_latch() as inner:
            inner()


def test_the_latch_restores_the_handler_and_leaves_no_pending_interrupt():
    before = signal.getsignal(signal.SIGINT)
    with interrupt_latch() as check:
        check()
    assert signal.getsignal(signal.SIGINT) is before
    with interrupt_latch() as check:  # a fresh latch starts clean
        check()


def test_deferred_signals_deliver_a_held_interrupt_after_the_block():
    wrote = []
    with pytest.raises(KeyboardInterrupt), deferred_signals():
        signal.raise_signal(signal.SIGINT)
        wrote.append("all files")  # the block is never cut short
    assert wrote == ["all files"]


def test_run_many_stops_when_the_caller_swallows_ctrl_c_while_writing_a_run():
    # three batched runs: the 10-step one ends first; its writer swallows a Ctrl-C
    configs = _configs([10, 5000, 5000])

    def on_run(i: int, run: li.Run) -> None:
        if run.config.train.steps == 10:
            _swallowed_ctrl_c()

    with pytest.raises(RunsInterrupted) as stop:
        run_many(configs, on_run=on_run)
    statuses = [None if r is None else r.summary["status"] for r in stop.value.runs]
    assert statuses[0] == "budget"
    assert statuses[1:] == ["interrupted", "interrupted"]
    assert all(r.summary["steps"] < 5000 for r in stop.value.runs[1:])


def test_run_many_stops_before_the_next_unbatched_run():
    # Adam runs are not batched: they run one after another; Ctrl-C swallowed after the first
    configs = _configs([10, 10, 10], **{"train.optimizer": "adam", "train.lr": "0.01"})
    seen = []

    def on_run(i: int, run: li.Run) -> None:
        seen.append(i)
        _swallowed_ctrl_c()

    with pytest.raises(RunsInterrupted) as stop:
        run_many(configs, on_run=on_run)
    assert seen == [0]
    assert [r is None for r in stop.value.runs] == [False, True, True]
