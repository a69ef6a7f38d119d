"""End-to-end runs: the quickstart, determinism, run output, statuses, a plugin task class."""

import json

import pandas as pd
import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.store import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE


def test_quickstart_converges(quickstart_path, tmp_path):
    run = li.run(quickstart_path, out=tmp_path / "q")
    s = run.summary
    assert s["status"] == "converged"
    assert s["final_loss"] <= 1e-3
    assert s["min_attn"] >= 0.9
    assert s["T_1"] is not None and s["T_1"] < s["T_eps"]
    assert s["regime"] == "sharp"
    for name in (CONFIG_FILE, METRICS_FILE, SUMMARY_FILE):
        assert (tmp_path / "q" / name).is_file()


def test_run_directory_contract(tmp_path, small_overrides):
    run = li.run(None, small_overrides, out=tmp_path / "r")
    df = pd.read_parquet(tmp_path / "r" / METRICS_FILE)
    assert list(df.columns) == ["step", "metric", "k", "n", "value"]
    assert {"loss", "test_error", "attn_self", "attn_cross", "A", "B", "attn_min"} <= set(df.metric)
    K = run.summary["K"]
    last = df[df.step == df.step.max()]
    assert (last.metric == "attn_cross").sum() == K * (K - 1)
    assert last[last.metric == "loss"].k.isna().all()
    # attention of each query sums to 1 over features
    att = last[last.metric.isin(["attn_self", "attn_cross"])].groupby("k")["value"].sum()
    assert att.to_numpy() == pytest.approx(1.0)
    summary = json.loads((tmp_path / "r" / SUMMARY_FILE).read_text())
    for key in ("status", "steps", "wall_s", "final_loss", "min_attn", "T_1", "T_eps", "Delta", "delta",
                "L", "L_star", "regime", "seed", "versions"):
        assert key in summary
    assert li.load_config(tmp_path / "r" / CONFIG_FILE) == run.config
    loaded = li.load_run(tmp_path / "r")
    pd.testing.assert_frame_equal(loaded.metrics, run.metrics)
    assert run.attention().shape[1] == K


@pytest.mark.parametrize("engine", ["kernel", "sampled"])
def test_same_seed_same_metrics(engine, small_overrides):
    ov = [*small_overrides, f"engine.kind={engine}", "engine.batch=128", "features.noise=0.1", "seed=7"]
    a = li.run(None, ov, write=False).metrics
    b = li.run(None, ov, write=False).metrics
    pd.testing.assert_frame_equal(a, b)
    c = li.run(None, [*ov, "seed=8"], write=False).metrics
    assert not a["value"].equals(c["value"])


def test_divergence_is_a_status_not_a_crash(small_overrides):
    # the prediction is a convex combination of labels, so only an overflow of Q can diverge:
    # huge L * eta in float32 overflows Q after one step
    run = li.run(None, [*small_overrides, "engine.kind=sampled", "engine.dtype=float32", "task.L=1e6",
                        "train.lr=1e30", "features.noise=0.5", "engine.batch=64", "train.log_every=1"],
                 write=False)
    assert run.summary["status"] == "diverged"
    assert run.summary["steps"] < 60
    assert len(run.metrics) > 0  # the metrics recorded before it are kept


def test_saturated_softmax_is_not_divergence(small_overrides):
    # a huge random init saturates attention; the run must stay finite
    run = li.run(None, [*small_overrides, "model.init=random", "model.init_scale=1e4"], write=False)
    assert run.summary["status"] in ("budget", "converged")
    assert torch.isfinite(torch.tensor(run.metrics.value.to_numpy())).all()


def test_interrupt_keeps_metrics(tmp_path, small_overrides):
    calls = []

    def progress(step, loss, attn):
        calls.append(step)
        if step >= 20:
            raise KeyboardInterrupt

    run = li.run(None, small_overrides, out=tmp_path / "i", progress=progress)
    assert run.summary["status"] == "interrupted"
    assert json.loads((tmp_path / "i" / SUMMARY_FILE).read_text())["status"] == "interrupted"
    assert pd.read_parquet(tmp_path / "i" / METRICS_FILE).step.max() == 20


def test_plugin_task_class_runs_end_to_end(tmp_path, small_overrides):
    run = li.run(None, [*small_overrides, "plugins=[plugin_task]", "task.kind=test_tanh", "task.L=1.5"],
                 out=tmp_path / "p")
    assert run.summary["status"] in ("budget", "converged")
    assert run.summary["task"] == "test_tanh"
    assert run.summary["delta_se"] > 0  # Monte-Carlo kernel: delta comes with a standard error
    assert run.series("loss").iloc[-1] < run.series("loss").iloc[0]


def test_nan_from_user_task_is_caught_and_named(small_overrides):
    from lipschitz_icl.errors import TaskEvaluationError

    # the kernel of a NaN class fails while the problem is built, naming the class
    with pytest.raises(TaskEvaluationError, match="test_broken"):
        li.run(None, [*small_overrides, "plugins=[plugin_task]", "task.kind=test_broken"], write=False)


@pytest.mark.parametrize("kind", ["linear", "relu_net", "rbf", "sinusoid", "norm"])
def test_every_task_class_trains(kind, small_overrides):
    run = li.run(None, [*small_overrides, f"task.kind={kind}", "task.kernel_samples=512"], write=False)
    loss = run.series("loss")
    assert loss.iloc[-1] < loss.iloc[0]
    assert run.attention().iloc[-1].min() > run.attention().iloc[0].min()


@pytest.mark.parametrize("kind", ["linear", "sinusoid"])
def test_dynamics_depend_on_eta_and_L_only_through_eta_L_squared(kind, small_overrides):
    """Every built-in class is f = L g with g independent of L, so with tau = 0 the loss is L^2 times
    the loss at L = 1 and gradient descent depends on (eta, L) only through eta L^2
    (docs/CLAIMS_METHOD.md). The attention trajectories must coincide."""
    base = [*small_overrides, f"task.kind={kind}", "task.kernel_samples=256"]
    a = li.run(None, [*base, "task.L=2", "train.lr=1"], write=False)
    b = li.run(None, [*base, "task.L=1", "train.lr=4"], write=False)
    pd.testing.assert_frame_equal(a.attention(), b.attention(), rtol=1e-9, atol=1e-12)
    ratio = a.series("loss") / b.series("loss")
    assert ratio.to_numpy() == pytest.approx(4.0, rel=1e-9)


@pytest.mark.parametrize("engine", ["kernel", "sampled"])
def test_recorded_scores_are_snapshots_not_views(engine, small_overrides):
    """A_k and B_{k,n} at each recorded step are that step's values (row k of M sums to zero under
    gradient descent from Q = 0, since softmax is shift-invariant: A_k = -sum_n B_{k,n})."""
    run = li.run(None, [*small_overrides, f"engine.kind={engine}", "engine.batch=128"], write=False)
    A, B = run.per_feature("A"), run.per_feature("B")
    assert A.iloc[0].abs().max() == 0.0
    assert (A.iloc[-1] > A.iloc[len(A) // 2]).all() and (A.iloc[len(A) // 2] > 0).all()
    if engine == "kernel":
        row_sums = A + B.T.groupby(level=0).sum().T
        assert row_sums.abs().to_numpy().max() < 1e-9


@pytest.mark.parametrize("extra", [[], ["engine.kind=sampled", "engine.batch=64"], ["train.optimizer=adam"]])
def test_relative_eps_stops_at_a_fraction_of_the_initial_loss(extra):
    """eps_mode=relative: stop at loss <= eps * initial loss, on every training path (the batched
    kernel trainer, the sampled engine, Adam in Q space)."""
    run = li.run(None, ["train.eps_mode=relative", "train.eps=0.2", "train.steps=3000", *extra], write=False)
    loss = run.series("loss")
    assert run.summary["status"] == "converged"
    assert loss.iloc[-1] <= 0.2 * loss.iloc[0] < loss.iloc[-2]
