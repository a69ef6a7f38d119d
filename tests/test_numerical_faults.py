"""Numerical faults: overflow ends a run as ``diverged`` (with its step and the metrics so far), a
saturated softmax is computed stably and is not divergence, and NaN from a user's task class is caught
and named, through the API and the CLI."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.engines.kernel import kernel_loss
from lipschitz_icl.models import ReducedAttention

runner = CliRunner()
FAULTS = {"injected": 0}

SMALL = ["train.steps=40", "train.log_every=1", "engine.draws=32", "eval.functions=32", "engine.batch=64"]


@pytest.mark.parametrize("extra", [
    ["task.L=1e6", "train.lr=1e300"],  # kernel engine, float64: M overflows after one step
    ["engine.dtype=float32", "task.L=1e6", "train.lr=1e30"],  # float32 overflows sooner
    ["engine.kind=sampled", "engine.dtype=float32", "task.L=1e6", "train.lr=1e30", "features.noise=0.5"],
    ["engine.space=Q", "task.L=1e6", "train.lr=1e300", "features.kind=gaussian", "features.d=8"],
])
def test_overflow_ends_as_diverged_with_the_step_and_the_metrics_so_far(extra, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", *SMALL, *extra, "--out", str(out)])
    FAULTS["injected"] += 1
    assert result.exit_code == 0, result.output  # divergence is a result, not an error
    summary = json.loads((out / "summary.json").read_text())
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert summary["status"] == "diverged"
    assert 0 < summary["steps"] < 40  # the step at which the loss stopped being finite or exploded
    assert len(metrics) > 0 and metrics.step.max() < summary["steps"]  # the metrics recorded before it
    assert set(metrics.step) == set(range(summary["steps"]))  # every step before it (log_every=1)
    assert summary["final_loss"] is not None and math.isfinite(summary["final_loss"])
    assert metrics[metrics.metric == "loss"].value.map(math.isfinite).all()


@pytest.mark.parametrize("engine", ["kernel", "sampled"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_huge_q_init_saturates_attention_without_diverging(engine, dtype):
    # model.init_scale is capped at 1e6: Q^(0) that large saturates the softmax (attention one-hot) but
    # cannot overflow: logits ~ 1e6 * |x|^2 stay far inside float32's range, and softmax subtracts the max
    run = li.run(None, [*SMALL, f"engine.kind={engine}", f"engine.dtype={dtype}", "model.init=random",
                        "model.init_scale=1e6", "features.noise=0.1"], write=False)
    FAULTS["injected"] += 1
    assert run.summary["status"] in ("budget", "converged")
    values = run.metrics.value.to_numpy()
    assert torch.isfinite(torch.tensor(values)).all()
    att = run.metrics[run.metrics.metric.isin(["attn_self", "attn_cross"])]
    assert att.value.between(0, 1).all()
    sums = att.groupby(["step", "k"]).value.sum()
    assert sums.dropna().to_numpy() == pytest.approx(1.0, abs=1e-4)


def test_saturated_softmax_in_the_kernel_loss_is_stable():
    K = 4
    counts = torch.tensor([[3.0, 1.0, 0.0, 2.0]])
    sigma = torch.eye(K, dtype=torch.float64)
    p = torch.full((K,), 0.25, dtype=torch.float64)
    for big in (1e3, 1e30, 1e300):
        M = (big * torch.eye(K, dtype=torch.float64)).requires_grad_(True)
        loss, attn = kernel_loss(M, counts, sigma, p)
        loss.backward()
        assert math.isfinite(float(loss.detach())) and torch.isfinite(M.grad).all()
        # every query whose feature is present attends to it alone: attention exactly 1, no NaN
        assert attn[0, 0] == 1.0 and attn[1, 1] == 1.0 and attn[3, 3] == 1.0
        assert torch.isfinite(attn).all()


def test_saturated_softmax_in_the_model_is_stable():
    d = 3
    for dtype, big in ((torch.float32, 1e30), (torch.float64, 1e300)):
        model = ReducedAttention(d, dtype=dtype)
        with torch.no_grad():
            model.Q.copy_(big * torch.eye(d, dtype=dtype))
        x = torch.eye(d, dtype=dtype)[[0, 1, 2, 0]].unsqueeze(0)  # context e1 e2 e3, query e1
        y = torch.tensor([[5.0, -1.0, 2.0]], dtype=dtype)
        y_hat, attn = model(x[:, :3], y, x[:, 3])
        y_hat.sum().backward()
        assert attn[0].tolist() == [1.0, 0.0, 0.0] and float(y_hat.detach()) == 5.0
        assert torch.isfinite(model.Q.grad).all()


def test_saturated_run_is_not_mistaken_for_divergence():
    # a huge step size drives attention straight to 1 (loss 0): a saturated, converged run
    run = li.run(None, [*SMALL, "task.L=1e3", "train.lr=1e300"], write=False)
    assert run.summary["status"] == "converged"
    assert run.summary["min_attn"] == pytest.approx(1.0)


# --------------------------------------------------------------------------- NaN from a user's task class


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("engine", ["kernel", "sampled"])
def test_nan_task_fails_cleanly_before_training(engine, tmp_path, monkeypatch):
    # test_broken returns NaN on every call: the kernel engine meets it while estimating Sigma, the
    # sampled engine while drawing its test prompts; both before a run directory exists
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", *SMALL, "plugins=[plugin_task]", "task.kind=test_broken",
                                 f"engine.kind={engine}"])
    FAULTS["injected"] += 1
    assert result.exit_code == 1  # a runtime fault of the class's code, not a bad config
    line = _one_line(result)
    assert "'test_broken'" in line and "plugin_task.Broken" in line and "NaN" in line
    assert list(tmp_path.iterdir()) == []  # no run directory, not even an empty one


def test_nan_mid_training_is_recorded_as_failed_and_named(tmp_path):
    # test_nan_later turns NaN after a few draws: the sampled engine (fresh prompts every step) meets it
    # during training; the run directory records status failed, the class, and the metrics so far
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", *SMALL, "plugins=[plugin_task]", "task.kind=test_nan_later",
                                 "engine.kind=sampled", "train.optimizer=sgd", "train.lr=0.5", "--out", str(out)])
    FAULTS["injected"] += 1
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "plugin_task.NanLater" in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert "TaskEvaluationError" in summary["error"] and "'test_nan_later' (plugin_task.NanLater)" in summary["error"]
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert len(metrics) > 0 and metrics.step.max() < summary["steps"] + 1
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "metrics.parquet", "params.pt", "summary.json"]


def test_nan_exact_kernel_from_a_plugin_is_caught(tmp_path):
    from lipschitz_icl.errors import TaskEvaluationError
    from lipschitz_icl.tasks.builtin import Linear

    class NanKernel(Linear):
        name = "nan_kernel_probe"

        def exact_kernel(self, V):
            return super().exact_kernel(V) * float("nan")

    with pytest.raises(TaskEvaluationError, match="nan_kernel_probe"):
        NanKernel(1.0, 3).kernel(torch.eye(3, dtype=torch.float64), torch.Generator().manual_seed(0))
    FAULTS["injected"] += 1


def test_zz_fault_count():
    print(f"\nnumerical faults injected: {FAULTS['injected']}")
