"""The fused kernel step (engine.fused: true) against the unfused one: the same loss, attention,
gradient, test errors and trajectories within 1e-12 relative, and the same bits alone and in a batch."""

import importlib.util

import numpy as np
import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.api import prepare
from lipschitz_icl.batch import run_many
from lipschitz_icl.engines.kernel_batch import KernelBatch
from lipschitz_icl.errors import ConfigError

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")

SMALL = ["train.steps=50", "train.log_every=1", "train.eps=1e-12", "eval.functions=32", "engine.draws=64"]
RTOL = 1e-12


def _batch(variants: list[list[str]], lrs: list[float] | None = None) -> KernelBatch:
    specs = [prepare(li.load_config(None, [*SMALL, *v]))[1].spec for v in variants]
    return KernelBatch(specs, lrs or [1.0] * len(specs))


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    """Within RTOL of the larger magnitude in the tensor (entries near 0 are differences of O(1) terms)."""
    scale = b.abs().max().clamp(min=1e-300)
    assert float((a - b).abs().max() / scale) <= RTOL, (a, b)


BATCHES = {
    "one run, diagonal Sigma": [["task.L=2"]],
    "runs with different L": [["task.L=0.5"], ["task.L=2", "seed=1"], ["task.L=8", "seed=2"]],
    "label noise": [["task.label_noise=0.3", "seed=4", "features.probs=imbalanced"], ["task.label_noise=0.1"]],
    "dense Sigma, G != I": [["features.kind=gaussian", "features.d=7", "task.L=3"],
                            ["features.kind=gaussian", "features.d=7", "task.L=1", "seed=5"]],
    "relu_net kernel": [["task.kind=relu_net", "task.kernel_samples=64", "seed=2"]],
    "mean-field counts": [["engine.counts=mean_field", "task.L=3"]],
    "two test classes": [["eval.other_class=relu_net", "task.label_noise=0.2"],
                         ["eval.other_class=relu_net", "task.label_noise=0.5", "task.L=3"]],
}


@needs_numba
@pytest.mark.parametrize("name", list(BATCHES))
def test_fused_step_matches_unfused(name):
    batch = _batch(BATCHES[name])
    gen = torch.Generator().manual_seed(0)
    batch.M = batch.M + torch.randn(batch.M.shape, generator=gen, dtype=batch.M.dtype)  # away from Q = 0
    ref = batch.step_unfused(True)
    ref = {k: getattr(ref, k).clone() for k in ("loss", "attn_self", "attn", "grad")} | {
        "tests": batch.test_errors(list(range(batch.R)), ref)}  # diagonal Sigma: computed apart from the step
    out = batch.step_fused(True)
    for key in ("loss", "attn_self", "attn", "grad"):
        _close(getattr(out, key), ref[key])
    assert set(out.tests) == set(ref["tests"]) and "test_error" in out.tests
    for name, value in ref["tests"].items():
        _close(out.tests[name], value)
    assert torch.equal(out.summary_table()[:, 1], out.attn_self.amin(-1))


@needs_numba
def test_underflowed_attention_is_recomputed_in_log_space():
    batch = _batch([["task.L=2", "prompt.N=3"], ["task.L=1", "seed=3", "prompt.N=3"]])
    M = torch.zeros_like(batch.M)
    M[0, :, 0] = 2000.0  # P_kn underflows to 0 for n != 0: prompts without feature 0 need the log-space form
    batch.M = M
    assert (batch.counts[0, 0] == 0).any()
    ref = batch.step_unfused(True)
    ref = {k: getattr(ref, k).clone() for k in ("loss", "attn", "grad")} | {
        "tests": batch.test_errors(list(range(batch.R)), ref)["test_error"]}
    out = batch.step_fused(True)
    assert torch.isfinite(out.loss).all() and torch.isfinite(out.tests["test_error"]).all()
    for key in ("loss", "attn", "grad"):
        _close(getattr(out, key), ref[key])
    _close(out.tests["test_error"], ref["tests"])


TRAJECTORIES = [
    ["task.L=2"],
    ["task.L=3", "train.lr=0.5", "task.label_noise=0.3"],
    ["train.optimizer=sgd", "seed=8", "task.L=4"],  # fresh count draws every step
    ["features.kind=gaussian", "features.d=6", "task.L=2", "seed=1"],
]


def _assert_runs_close(fused: li.Run, plain: li.Run) -> None:
    assert fused.summary["steps"] == plain.summary["steps"] and fused.summary["status"] == plain.summary["status"]
    a, b = fused.metrics, plain.metrics
    assert a[["step", "metric", "k", "n"]].equals(b[["step", "metric", "k", "n"]])
    va, vb = a.value.to_numpy(), b.value.to_numpy()
    scale = np.maximum(np.abs(vb), 1e-300)
    big = np.abs(vb) > 1e-8  # A_k, B_kn start at exactly 0: relative error only where there is a value
    assert np.max(np.abs(va - vb)[big] / scale[big]) <= RTOL
    assert np.max(np.abs(va - vb)) <= 1e-14


@needs_numba
@pytest.mark.parametrize("overrides", TRAJECTORIES, ids=lambda o: " ".join(o))
def test_fifty_step_trajectory_matches_unfused(overrides):
    plain = li.run(li.load_config(None, [*SMALL, *overrides]), write=False)
    fused = li.run(li.load_config(None, [*SMALL, *overrides, "engine.fused=true"]), write=False)
    assert fused.summary["steps"] == 50
    _assert_runs_close(fused, plain)


@needs_numba
def test_batched_fused_runs_equal_single_fused_runs_bit_for_bit():
    variants = [["task.L=0.5"], ["task.L=2", "train.lr=0.5", "seed=1"], ["task.L=3", "train.eps=0.05"],
                ["task.L=8", "train.lr=0.1", "train.steps=30"]]  # runs end at different steps
    cfgs = [li.load_config(None, [*SMALL, *v, "engine.fused=true"]) for v in variants]
    many = run_many(cfgs)
    assert len({r.summary["steps"] for r in many}) >= 2
    for cfg, batched in zip(cfgs, many, strict=True):
        single = li.run(cfg, write=False)
        assert single.metrics.equals(batched.metrics)
        plain = li.run(cfg.with_overrides(["engine.fused=false"]), write=False)
        _assert_runs_close(batched, plain)


@pytest.mark.parametrize(("overrides", "needle"), [
    (["train.optimizer=adam"], "optimizer=adam"),
    (["engine.space=Q"], "space=Q"),
    (["engine.device=auto"], "CPU only"),
    (["engine.kind=sampled"], "engine.kind=kernel"),
])
def test_fused_refused_where_it_does_not_apply(overrides, needle):
    with pytest.raises(ConfigError, match="engine.fused") as err:
        li.load_config(None, [*overrides, "engine.fused=true"])
    assert needle in str(err.value)


@needs_numba
def test_fused_enters_the_config_hash_only_when_true():
    plain = li.load_config(None, [])
    assert plain.config_hash() == li.load_config(None, ["engine.fused=false"]).config_hash()
    assert plain.config_hash() != li.load_config(None, ["engine.fused=true"]).config_hash()


@needs_numba
def test_a_diverging_run_stops_as_the_unfused_one_does():
    overrides = [*SMALL, "task.L=1e6", "train.lr=1e300"]
    plain = li.run(li.load_config(None, overrides), write=False)
    fused = li.run(li.load_config(None, [*overrides, "engine.fused=true"]), write=False)
    assert plain.summary["status"] == fused.summary["status"] == "diverged"
    assert plain.summary["steps"] == fused.summary["steps"]


@needs_numba
def test_assigning_new_scores_between_fused_steps_is_seen():
    batch = _batch([["task.L=2"], ["task.L=1", "seed=3"]])
    batch.step_fused(False)
    batch.update()
    batch.M = batch.M * 0.5  # a new tensor: the fused step must read it, and update it
    ref = batch.step_unfused(False).grad.clone()
    _close(batch.step_fused(False).grad, ref)
    before = batch.M.clone()
    batch.update()
    assert torch.equal(batch.M, before - batch.lr * batch.grad)


def test_fused_without_numba_is_refused_with_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else real(name, *a))
    with pytest.raises(ConfigError, match="engine.fused") as err:
        li.load_config(None, ["engine.fused=true"])
    assert "numba" in str(err.value) and "\n" not in str(err.value)


def _fused_outputs(batch: KernelBatch, sigma: np.ndarray, diag: bool) -> tuple[np.ndarray, ...]:
    """fused_step of ``batch`` with Sigma ``sigma`` and the flag ``diag``: (summary, attn, grad, tests)."""
    from lipschitz_icl.engines.kernel_fused import fused_step

    R, K, B = batch.counts.shape
    T = torch.stack(list(batch.tests.values()), 1).contiguous().numpy()
    out = (np.empty((R, 2 + K)), np.empty((R, K, K)), np.empty((R, K, K)), np.empty((R, T.shape[1])))
    inv_c = batch.counts.numpy() if batch.inv_c is None else batch.inv_c.numpy()
    assert fused_step(batch.M.numpy(), batch.counts.numpy(), inv_c, sigma, diag, batch.p.numpy(),
                      batch.tau2.numpy(), T, *out, np.ones(R, dtype=bool))
    return out


@needs_numba
def test_a_diagonal_sigma_takes_the_closed_form_and_agrees_with_the_general_query():
    batch = _batch(BATCHES["label noise"])
    batch.M = batch.M + torch.randn(batch.M.shape, generator=torch.Generator().manual_seed(3), dtype=batch.M.dtype)
    sigma = batch.sigma.numpy().copy()
    assert batch.diag is not None
    closed, general = _fused_outputs(batch, sigma, True), _fused_outputs(batch, sigma, False)
    for a, b in zip(closed, general, strict=True):
        assert np.max(np.abs(a - b)) <= RTOL * np.max(np.abs(b))
    K = sigma.shape[-1]
    dense = sigma + 0.25 * (1 - np.eye(K))  # the closed form reads only the diagonal, the general query all
    assert all(np.array_equal(a, b) for a, b in zip(_fused_outputs(batch, dense, True), closed, strict=True))
    assert not np.array_equal(_fused_outputs(batch, dense, False)[0], general[0])


@needs_numba
@pytest.mark.parametrize("name", ["runs with different L", "dense Sigma, G != I", "two test classes"])
def test_the_test_errors_of_the_runs_wanted_only_and_the_rest_of_the_step_unchanged(name):
    """``want``: the test errors of those runs (the same bits as with every run's), NaN for the others, whose
    loss, attention and gradient are those of the step with every run's test errors."""
    batch = _batch(BATCHES[name])
    batch.M = batch.M + torch.randn(batch.M.shape, generator=torch.Generator().manual_seed(1), dtype=batch.M.dtype)
    every = {k: v.clone() for k, v in (lambda o: {"loss": o.loss, "attn": o.attn, "grad": o.grad,
                                                  **o.tests})(batch.step_fused(True)).items()}
    want = np.arange(batch.R) % 2 == 0
    some = batch.step_fused(True, want)
    for key in ("loss", "attn", "grad"):
        assert torch.equal(getattr(some, key), every[key]), key
    for test, values in some.tests.items():
        assert torch.equal(values[torch.as_tensor(want)], every[test][torch.as_tensor(want)])
        assert torch.isnan(values[torch.as_tensor(~want)]).all()
