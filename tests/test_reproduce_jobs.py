"""reproduce --jobs N: experiments side by side, each in a forked process, give the claims and runs of one after
the other; an experiment whose process dies is a failed claim (the others stand); progress still arrives; bad
values are one-line errors."""

from __future__ import annotations

import gc
import os

import fake_experiments
import pytest
from test_reproduce_resume import _claims_json
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.cli.progress import JobClock
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.experiments import lanes, registry
from lipschitz_icl.experiments.checkpoint import FAILED_CRITERION, load_checkpoint
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.experiments.runner import Context, base_config, rel_runs, run_group
from lipschitz_icl.forked import ChildDied, fork_available, run_forked
from lipschitz_icl.reproduce import check_jobs, reproduce

pytestmark = pytest.mark.skipif(not fork_available(), reason="side by side needs fork (Linux, macOS)")


@pytest.fixture
def fake_suite(monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))


class Recorder:
    """A progress hook that can tell experiments apart, and a log, both remembering what they were told."""

    def __init__(self) -> None:
        self.ticks: list[tuple[str, str, int, int]] = []
        self.events: list[tuple[str, str]] = []

    def __call__(self, label: str, done: int, total: int) -> None:
        self.ticks.append(("", label, done, total))

    def tick_for(self, experiment: str, label: str, done: int, total: int) -> None:
        self.ticks.append((experiment, label, done, total))

    def log(self, event: str, name: str, elapsed: float, detail: str = "") -> None:
        self.events.append((event, name))


def test_side_by_side_gives_the_claims_of_one_by_one_and_each_experiments_progress(tmp_path, fake_suite):
    reproduce(["linear"], tmp_path / "one", quick=True, jobs=1)
    seen = Recorder()
    meta = reproduce(["linear"], tmp_path / "two", quick=True, jobs=3, progress=seen, log=seen.log)[1]
    assert _claims_json(tmp_path / "two") == _claims_json(tmp_path / "one")
    assert sorted(seen.events) == sorted([(e, n) for n in ("exp_first", "exp_slow", "exp_last")
                                          for e in ("started", "finished")])
    assert {t[0] for t in seen.ticks} == {"exp_first", "exp_slow", "exp_last"}  # sent back from each process
    assert all(done <= total for _, _, done, total in seen.ticks)
    for exp in fake_experiments.FAKE_REGISTRY.values():  # each process saved its checkpoint: a rerun reuses it
        ctx = Context(out=tmp_path / "two", quick=True, fused=meta["kernel_step"].startswith("fused"))
        assert load_checkpoint(ctx, exp) is not None


def test_an_experiment_whose_process_dies_is_a_failed_claim_and_the_others_stand(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", {"exp_first": fake_experiments.exp_first})

    @registry.experiment("P3", suites=("linear",))
    def exp_dies(ctx):
        os._exit(3)  # killed: no answer, no traceback

    claims = {c.id: c for c in reproduce(["linear"], tmp_path, quick=True, jobs=2)[0]}
    assert claims["P3"].criterion == FAILED_CRITERION and "exit code 3" in claims["P3"].statistic["error"]
    assert claims["P1"].criterion != FAILED_CRITERION and claims["P1"].statistic["final_loss"]


def test_run_forked_sends_back_results_exceptions_ticks_and_deaths_in_the_order_they_end():
    def work(item, tick):
        tick(item * 10)
        if item == 2:
            raise ValueError("two")
        if item == 3:
            os._exit(5)
        return None if item == 0 else item

    answers, ticks, started = {}, [], []
    run_forked([0, 1, 2, 3], work, 2, started.append, lambda pos, out, s: answers.__setitem__(pos, out),
               lambda pos, payload: ticks.append((pos, payload)))
    assert sorted(started) == [0, 1, 2, 3] and sorted(ticks) == [(0, 0), (1, 10), (2, 20), (3, 30)]
    assert answers[0] is None and answers[1] == 1 and isinstance(answers[2], ValueError)
    assert isinstance(answers[3], ChildDied) and "exit code 5" in str(answers[3])


def test_the_children_inherit_a_frozen_heap_and_the_parent_gets_it_back_collectable():
    """run_forked freezes the heap before forking (a child's collections skip what it inherited: no traversal, no
    copy-on-write of those pages) and unfreezes it once the children are done, so nothing stays uncollectable."""
    assert gc.get_freeze_count() == 0
    answers = {}
    run_forked([0], lambda item, tick: gc.get_freeze_count(), 1, lambda pos: None,
               lambda pos, out, s: answers.__setitem__(pos, out))
    assert answers[0] > 1000 and gc.get_freeze_count() == 0


def test_the_time_left_shares_the_work_among_the_lanes_but_never_undercuts_the_longest_part():
    now = [0.0]
    clock = JobClock({"a": 10.0, "b": 10.0, "c": 40.0}, clock=lambda: now[0], lanes=2)
    assert clock.eta() == 40.0  # 60 s of work on two lanes is 30 s, but c alone takes 40
    clock.start("c")
    now[0] = 20.0
    assert clock.eta() == 20.0  # c has 20 s left; a and b share the other lane
    clock.finish("c", 20.0)  # c took half its expected time: every estimate halves
    assert clock.eta() == 5.0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_jobs_other_than_a_whole_number_of_at_least_one_is_a_user_error(bad):
    with pytest.raises(UserInputError, match="jobs"):
        check_jobs(bad)


def test_the_cli_refuses_jobs_0_in_one_line():
    result = CliRunner().invoke(app, ["reproduce", "all", "--quick", "--jobs", "0"])
    assert result.exit_code == 2 and "--jobs" in result.output and "Traceback" not in result.output


def _sampled_experiment(claim_id: str):
    """An experiment of three sampled-engine runs (no batch takes them: they train in lanes)."""

    @registry.experiment(claim_id, suites=("linear",))
    def exp_sampled(ctx):
        cfgs = [base_config([*fake_experiments.TINY, "engine.kind=sampled", "engine.batch=16", f"task.L={L}",
                             f"name=L{L:g}"]) for L in (0.5, 1.0, 1.5)]
        runs = run_group(ctx, "sampled", cfgs)
        loss = [r.summary["final_loss"] for r in runs]
        return [claim(claim_id, "fake: losses", {"final_loss": loss}, True, False, runs=rel_runs(ctx, runs))]

    return exp_sampled


@pytest.mark.parametrize("others", [[], ["exp_first"]], ids=["alone", "side-by-side"])
def test_unbatched_runs_train_in_lanes_with_the_runs_of_one_process(tmp_path, monkeypatch, others):
    monkeypatch.setattr(registry, "_EXPERIMENTS", {n: fake_experiments.FAKE_REGISTRY[n] for n in others})
    _sampled_experiment("P3")
    reproduce(["linear"], tmp_path / "one", quick=True, jobs=1)
    seen = Recorder()
    reproduce(["linear"], tmp_path / "lanes", quick=True, jobs=2, progress=seen)
    assert _claims_json(tmp_path / "lanes") == _claims_json(tmp_path / "one")
    for name in ("L0.5", "L1", "L1.5"):  # three runs dealt to two lanes, each written by the experiment's process
        one, lanes = (tmp_path / d / "runs" / "sampled" / name / "metrics.parquet" for d in ("one", "lanes"))
        assert lanes.read_bytes() == one.read_bytes()
    assert [t[2] for t in seen.ticks if t[1] == "sampled"] == [0, 1, 2, 3, 3]  # each run counted as it arrives


def test_lanes_hand_over_every_run_and_raise_what_a_lane_raised(monkeypatch):
    configs = [base_config([*fake_experiments.TINY, "engine.kind=sampled", "engine.batch=16", f"task.L={L}"])
               for L in (0.5, 1.0, 2.0)]
    got: dict[int, float] = {}
    lanes.run_in_lanes(configs, 2, lambda i, run: got.__setitem__(i, run.summary["final_loss"]))
    assert sorted(got) == [0, 1, 2] and got[0] != got[2]

    def broken(configs, on_run=None):
        raise ValueError("a lane's error")

    monkeypatch.setattr(lanes, "run_many", broken)
    with pytest.raises(ValueError, match="a lane's error"):
        lanes.run_in_lanes(configs, 2, lambda i, run: None)
