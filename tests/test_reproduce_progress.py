"""Whole-job progress: the time left to a job of known parts, reproduce's bars (an overall one, a few group
bars named by claim: the view fits a 24-row terminal) and its log lines when output is not a terminal."""

from __future__ import annotations

import io
import json
import statistics

import fake_experiments
import pytest
from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

import lipschitz_icl.papers  # noqa: F401  (registers the built-in experiments)
from lipschitz_icl.cli import app
from lipschitz_icl.cli import common as cli_common
from lipschitz_icl.cli.progress import JobClock, LineProgress, duration, log_console
from lipschitz_icl.cli.reproduce_progress import MAX_GROUP_BARS, ReproduceProgress, group_label
from lipschitz_icl.experiments import registered, registry
from lipschitz_icl.experiments.durations import FULL_PER_QUICK, FULL_SECONDS, QUICK_SECONDS, expected_seconds


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_time_left_scales_the_expected_times_by_the_speed_so_far():
    clock = Clock()
    job = JobClock({"a": 10.0, "b": 20.0, "c": 30.0}, clock)
    assert job.eta() == 60.0  # nothing done: the expected times as they are
    job.start("a")
    clock.t = 20.0
    job.finish("a", 20.0)  # twice as slow as expected
    assert job.eta() == pytest.approx((20 + 30) * 2)
    job.start("b")
    clock.t = 30.0  # 10 s into b: 5 expected seconds of it done
    assert job.eta() == pytest.approx((15 + 30) * 2)
    job.finish("b", 10.0)
    job.finish("c", None)  # reused: no time left, no speed learnt
    assert job.eta() == 0.0 and duration(3725) == "1:02:05" and duration(None) == "?"


def test_an_experiment_without_a_recorded_time_expects_the_median():
    exps = [e for e in registered() if e.__name__ in QUICK_SECONDS][:2] + list(fake_experiments.FAKE[:1])
    times = expected_seconds(exps, quick=True)
    assert times[exps[0].__name__] == QUICK_SECONDS[exps[0].__name__]
    assert times["exp_first"] == statistics.median(QUICK_SECONDS.values())
    full = expected_seconds(exps, quick=False)
    assert full["exp_first"] == times["exp_first"] * FULL_PER_QUICK
    assert full[exps[0].__name__] == FULL_SECONDS[exps[0].__name__]  # measured at full size


def test_group_bars_are_named_by_claim_and_the_view_stays_a_few_rows_high():
    assert group_label("(a,b) flat regime", ["P1", "P2"]) == "P1 P2: flat regime"
    assert group_label("R4 eps axis", ["R4"]) == "R4: eps axis"
    console = Console(file=io.StringIO(), force_terminal=True, width=80, height=24)
    exps = list(fake_experiments.FAKE)
    with Progress(console=console) as bar:
        view = ReproduceProgress(exps, True, bar)
        for exp in exps:
            view.log("started", exp.__name__, 0.0)
            for g in range(10):  # an experiment of ten run groups
                for done in range(3):
                    view.tick(f"(c) group {g}", done, 2)
                    assert len(bar.tasks) <= 1 + MAX_GROUP_BARS < 24
            assert bar.tasks[-1].description == f"{' '.join(exp.claims)}: group 9"
            view.log("finished", exp.__name__, 1.0)
            assert len(bar.tasks) == 1  # only the overall bar between experiments
        assert bar.tasks[0].completed == len(exps) == bar.tasks[0].total


def test_lines_go_to_the_output_that_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(cli_common.err, "_force_terminal", True)
    monkeypatch.setattr(cli_common.out, "_force_terminal", False)
    assert log_console() is cli_common.out  # reproduce all --quick > log.txt
    monkeypatch.setattr(cli_common.out, "_force_terminal", True)
    assert log_console() is None  # two terminals: the bars say it all
    monkeypatch.setattr(cli_common.err, "_force_terminal", False)
    assert log_console() is cli_common.err


def test_line_progress_writes_every_so_often_and_at_the_end():
    console, clock = Console(file=io.StringIO(), width=200), Clock()
    lines = LineProgress(console, "cells", every=10.0, clock=clock)
    for done in range(1, 31):
        clock.t = done
        lines(done, 30)
    text = console.file.getvalue()
    assert text.count("cells") == 3 and "cells 30/30 · 0:30 spent · 0:00 left" in text and "cells 10/30" in text


def test_reproduce_into_a_file_writes_a_line_per_experiment_with_the_time_left(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))
    res = CliRunner().invoke(app, ["reproduce", "linear", "--quick", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    done = [line for line in res.output.splitlines() if " done · " in line]
    assert [line.split(" · ")[1] for line in done] == ["1/3 done", "2/3 done", "3/3 done"]
    assert all(line.endswith(" left") for line in done) and "finished exp_first in" in done[0]
    assert "claims P1" in done[0] and json.loads((tmp_path / "o" / "claims.json").read_text())["claims"]
