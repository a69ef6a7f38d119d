"""The ``trivial`` status: a run whose initial loss already meets epsilon learned nothing, and is
reported as trivial (not converged) by the stopping rules, the summary, a sweep's index and `run`."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.stopping import RunState
from lipschitz_icl.sweep import run_sweep
from lipschitz_icl.sweep.spec import load_sweep

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def _observe(cfg: li.Config, losses: list[float]) -> RunState:
    state = RunState()
    for step, loss in enumerate(losses):
        if state.observe(cfg, step, loss, 0.2)[1]:
            return state
    raise AssertionError("the run did not end")


def test_eps_met_at_step_0_is_trivial_not_converged():
    state = _observe(li.load_config(None, ["train.steps=10", "train.eps=0.5"]), [0.4, 0.3])
    assert (state.status, state.T_eps, state.steps) == ("trivial", 0, 0)


def test_eps_met_after_a_step_is_converged():
    state = _observe(li.load_config(None, ["train.steps=10", "train.eps=0.5"]), [0.6, 0.5])
    assert (state.status, state.T_eps) == ("converged", 1)


def test_relative_eps_below_one_is_never_trivial():
    cfg = li.load_config(None, ["train.steps=10", "train.eps_mode=relative", "train.eps=0.9"])
    assert _observe(cfg, [1e-12, 1e-13]).status == "converged"


def test_summary_and_run_command_say_trivial(tmp_path):
    # the quickstart at L = 0.1: initial loss ~ 0.08 L^2 = 8e-4 <= eps = 1e-3
    run = li.run(li.load_config(QUICKSTART, ["task.L=0.1"]), write=False)
    assert (run.summary["status"], run.summary["steps"], run.summary["T_eps"]) == ("trivial", 0, 0)
    res = CliRunner().invoke(app, ["run", str(QUICKSTART), "task.L=0.1", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0 and "trivial" in res.output


def test_sweep_index_records_trivial_and_does_not_rerun_it(tmp_path):
    spec = {"name": "t", "base": str(QUICKSTART), "grid": {"task.L": [0.1]}}
    rows = run_sweep(spec, out=tmp_path / "s", workers=1)
    assert list(rows["status"]) == ["trivial"]
    calls = []
    run_sweep(spec, out=tmp_path / "s", workers=1, progress=lambda d, f, t: calls.append(t))
    assert all(t == 0 for t in calls)  # a finished (trivial) row is not run again


@pytest.mark.parametrize("path", [QUICKSTART, *sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))],
                         ids=lambda p: p.name)
def test_shipped_configs_cannot_be_met_at_step_0(path):
    configs = ([li.load_config(path)] if path == QUICKSTART
               else [p.config for p in load_sweep(path).points if p.config.seed == 0])
    for cfg in configs:
        one_step = cfg.model_copy(update={"train": cfg.train.model_copy(update={"steps": 1})})
        assert li.run(one_step, write=False).summary["status"] != "trivial", (path.name, cfg.task.L)
