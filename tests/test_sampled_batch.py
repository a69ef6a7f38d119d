"""Small sampled-engine runs stepped together (engines/sampled_batch.py, train_stacked.py): each run's metrics,
summary (but wall_s) and parameters equal, bit for bit, those it has trained alone by ``li.run``."""

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lipschitz_icl as li
from lipschitz_icl import batch
from lipschitz_icl.api import prepare
from lipschitz_icl.batch import RunsInterrupted, plan_groups, run_many
from lipschitz_icl.engines import stackable
from lipschitz_icl.engines.sampled_batch import STACK_TOKENS, SampledBatch
from lipschitz_icl.recorder import Recorder
from lipschitz_icl.sweep import load_index, run_sweep
from lipschitz_icl.sweep.expansion import batch_group
from lipschitz_icl.tasks import base as task_base
from lipschitz_icl.tasks.builtin import Linear
from lipschitz_icl.train_stacked import train_stacked

# the Collins suite's runs at a test's size: sphere inputs, relu_net labels with noise, Adam on fresh prompts, the
# draws in float32, geometry recorded
COLLINS = ["features.kind=sphere", "features.d=3", "prompt.N=12", "task.kind=relu_net", "task.L=4",
           "task.label_noise=0.5", "engine.kind=sampled", "engine.resample=true", "engine.batch=24",
           "prompt.draw_dtype=float32", "train.optimizer=adam", "train.lr=0.1", "train.steps=25", "train.log_every=4",
           "train.eps=1e-9", "eval.functions=16"]
FEATURES = ["features.K=4", "features.d=4", "prompt.N=10", "engine.kind=sampled", "engine.batch=16",
            "train.steps=30", "train.log_every=3", "eval.functions=16", "task.kernel_samples=64"]


def _same(alone: li.Run, together: li.Run) -> None:
    pd.testing.assert_frame_equal(alone.metrics, together.metrics, check_exact=True)
    assert {k: v for k, v in alone.summary.items() if k != "wall_s"} == \
        {k: v for k, v in together.summary.items() if k != "wall_s"}
    assert alone.params.keys() == together.params.keys()
    for name, value in alone.params.items():
        assert torch.equal(value, together.params[name]), name


def _check(variants: list[list[str]], base: list[str], groups_of: list[int]) -> list[li.Run]:
    cfgs = [li.load_config(None, [*base, *v]) for v in variants]
    groups, rest, _ = plan_groups(cfgs)
    assert sorted(map(len, groups)) == sorted(groups_of) and not rest
    many = run_many(cfgs)
    for cfg, together in zip(cfgs, many, strict=True):
        _same(li.run(cfg, write=False), together)
    return many


def test_collins_runs_together_equal_their_runs_alone():
    """Seeds and settings of the softmax and linear-attention models (the Collins suite's), one shape per model and
    L; runs that end early (a budget of 9 steps, a loss target met at step 7) leave the step and the others go on."""
    variants = [[f"seed={s}", f"model.kind={m}"] for m in ("reduced", "linear_attention") for s in range(3)]
    variants += [["seed=7", "task.L=1", "train.lr=0.3"], ["seed=8", "task.L=1", "train.steps=9"],
                 ["seed=9", "task.L=1", "train.eps=0.012"]]
    runs = _check(variants, COLLINS, [3, 3, 3])
    assert {"Q_eig_max", "test_error"} <= set(runs[0].metrics.metric)  # geometry and test errors recorded
    assert runs[-1].summary["status"] == "converged" and runs[-1].summary["steps"] < 25


def test_feature_runs_together_equal_their_runs_alone():
    """Finite features (attention by feature, scores), fixed prompts (full-batch GD) and fresh ones (SGD), label
    noise and none."""
    variants = [["seed=0"], ["seed=1", "train.lr=0.5"], ["seed=2", "task.label_noise=0.3"],
                ["seed=3", "task.label_noise=0.2"], ["seed=4", "train.optimizer=sgd"],
                ["seed=5", "train.optimizer=sgd"]]
    runs = _check(variants, FEATURES, [2, 2, 2])
    assert {"attn_self", "A"} <= set(runs[0].metrics.metric)  # attention by feature, scores


class _NaNLinear(Linear):
    """Linear functions whose labels turn NaN once the generator has made a few batches (a broken user task)."""

    name = "nan_linear_for_tests"

    def evaluate(self, funcs, x):
        y = super().evaluate(funcs, x)
        return torch.where(funcs["w"][:, :1] > 0.99 * self.L, torch.nan, y)



def test_a_run_whose_labels_turn_nan_fails_alone(monkeypatch):
    """A run whose task returns NaN ends ``failed`` with the message it has alone; the other runs of its step go
    on to their budget with the numbers they have alone."""
    monkeypatch.setitem(task_base._REGISTRY, _NaNLinear.name, _NaNLinear)  # registered for this test only
    cfgs = [li.load_config(None, [*FEATURES, "task.kind=nan_linear_for_tests", "engine.resample=true", f"seed={s}"])
            for s in range(2, 6)]
    alone = [li.run(c, write=False) for c in cfgs]
    ends = [(r.summary["status"], r.summary["steps"]) for r in alone]
    assert ("failed", 0) in ends and ("failed", 3) in ends and ("budget", 30) in ends  # at its first step, later, never
    for a, together in zip(alone, run_many(cfgs), strict=True):
        _same(a, together)


@pytest.mark.parametrize(("overrides", "expected"), [
    (["engine.kind=sampled", "engine.batch=32", "prompt.N=16"], True),
    (["engine.kind=sampled", "model.kind=linear_attention", "engine.batch=128", "prompt.N=32"], True),
    (["engine.kind=sampled", "engine.batch=128", "prompt.N=64"], False),  # 128 x 65 tokens a step: slower together
    (["engine.kind=sampled", "engine.batch=32", "model.kind=factored"], False),  # two matrices
    (["engine.kind=sampled", "engine.batch=32", "engine.train_prompts=64", "engine.resample=false"], False),
    (["engine.kind=kernel"], False),
])
def test_stackable_where_it_pays(overrides, expected):
    cfg = li.load_config(None, overrides)
    assert stackable(cfg) is expected
    assert (cfg.engine.batch * (cfg.prompt.N + 1) <= STACK_TOKENS) or not expected


def test_a_sweep_of_small_sampled_runs_steps_them_together_with_their_numbers_alone(tmp_path, monkeypatch):
    """A sweep plans stackable points as one group (``batch_group``) and its index holds, for every point, the
    summary the run has alone."""
    stacked = []
    monkeypatch.setattr(batch, "train_stacked", lambda cfgs, *a, **k: stacked.append(len(cfgs)) or
                        train_stacked(cfgs, *a, **k))
    base = {"features": {"kind": "sphere", "d": 3}, "prompt": {"N": 12}, "task": {"kind": "relu_net"},
            "engine": {"kind": "sampled", "resample": True, "batch": 24}, "train": {"optimizer": "adam", "lr": 0.1,
            "steps": 20, "log_every": 5, "eps": 1e-9}, "eval": {"functions": 16}}
    spec = {"name": "stacked", "base": base, "grid": {"model.kind": ["reduced", "linear_attention"]}, "seeds": 3}
    run_sweep(spec, tmp_path, workers=1)
    index = load_index(tmp_path).set_index("config_hash")
    assert len(index) == 6 and set(index.status) == {"budget"} and sorted(stacked) == [3, 3]
    cfgs = [li.load_config(None, [*COLLINS[:8], "task.L=2", "task.label_noise=0", "prompt.draw_dtype=engine",
                                  "engine.batch=24", "train.optimizer=adam", "train.lr=0.1", "train.steps=20",
                                  "train.log_every=5", "train.eps=1e-9", "eval.functions=16", f"model.kind={m}",
                                  f"seed={s}"]) for m in ("reduced", "linear_attention") for s in range(3)]
    assert len({batch_group(c) for c in cfgs}) == 2 and batch_group(cfgs[0])[0] == "stacked"
    for cfg in cfgs:
        alone = li.run(cfg, write=False).summary
        row = index.loc[alone["config_hash"]]
        assert (row.final_loss, row.steps) == (alone["final_loss"], alone["steps"])


def test_ctrl_c_while_runs_step_together_ends_them_interrupted_and_keeps_their_records(monkeypatch):
    """An interrupt in the fifth step: every run of the step ends ``interrupted`` at step 4 (as ``train.train`` counts
    it) with its records so far, and ``run_many`` raises RunsInterrupted with them, as for a batch of kernel runs."""
    step = SampledBatch.forward_backward
    calls = []

    def interrupted_at_the_fifth(self, rows):
        calls.append(rows)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return step(self, rows)

    monkeypatch.setattr(SampledBatch, "forward_backward", interrupted_at_the_fifth)
    cfgs = [li.load_config(None, [*COLLINS, f"seed={s}"]) for s in range(3)]
    with pytest.raises(RunsInterrupted) as stop:
        run_many(cfgs)
    runs = stop.value.runs
    assert [r.summary["status"] for r in runs] == ["interrupted"] * 3 and {r.summary["steps"] for r in runs} == {4}
    assert all(set(r.metrics.step) == {0} for r in runs)  # the record at step 0 kept (log_every=4)
    for cfg, run in zip(cfgs, runs, strict=True):  # the records of the runs alone, up to the interrupt
        alone = li.run(cfg, write=False).metrics
        pd.testing.assert_frame_equal(alone[alone.step == 0].reset_index(drop=True), run.metrics, check_exact=True)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(task=st.sampled_from(["linear", "relu_net", "rbf", "sinusoid", "norm"]),
       model=st.sampled_from(["reduced", "linear_attention"]), noise=st.sampled_from([0.0, 0.4]),
       optimizer=st.sampled_from(["gd", "sgd", "adam"]), inputs=st.sampled_from(["sphere", "orthonormal", "gaussian"]),
       B=st.integers(4, 40), N=st.integers(2, 20), runs=st.integers(1, 4))
def test_any_stackable_runs_together_equal_their_runs_alone(task, model, noise, optimizer, inputs, B, N, runs):
    """Every built-in task class (each evaluates its functions row by row), both models, both kinds of inputs,
    every optimizer, fixed and fresh prompts, label noise or none: the runs' numbers together are theirs alone."""
    features = [] if inputs == "sphere" else ["features.K=3"]  # continuous inputs have no K
    base = [f"features.kind={inputs}", *features, "features.d=3", f"prompt.N={N}", f"task.kind={task}",
            f"task.label_noise={noise}", f"model.kind={model}", "engine.kind=sampled", f"engine.batch={B}",
            f"train.optimizer={optimizer}", "train.lr=0.2", "train.steps=6", "train.log_every=2",
            "eval.functions=8", "task.kernel_samples=32"]
    _check([[f"seed={s}"] for s in range(runs)], base, [runs])


def test_ctrl_c_while_a_finished_run_is_handed_over_keeps_its_end():
    """Ctrl-C as the caller takes a run that ended at its budget (while the others step on): that run keeps its own
    outcome, the others end interrupted, and each run is handed over once."""
    cfgs = [li.load_config(None, [*COLLINS, "seed=0", "train.steps=8"]),
            *(li.load_config(None, [*COLLINS, f"seed={s}"]) for s in (1, 2))]
    built = [prepare(c) for c in cfgs]
    engines = [engine for _, engine, _ in built]
    recorders = [Recorder(problem.features.K, engine.score_metrics()) for problem, engine, _ in built]
    handed = []

    def taken(i, outcome):
        handed.append((i, outcome.status))
        if len(handed) == 1:
            raise KeyboardInterrupt

    outcomes = train_stacked(cfgs, engines, recorders, on_finish=taken)
    assert handed == [(0, "budget"), (1, "interrupted"), (2, "interrupted")]  # once each
    assert [o.status for o in outcomes] == ["budget", "interrupted", "interrupted"]
    assert outcomes[0].steps == 8 and outcomes[0].final_loss == li.run(cfgs[0], write=False).summary["final_loss"]
