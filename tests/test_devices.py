"""Every engine, the batched trainer, the baselines and ``evaluate`` on ``engine.device``.

Parametrised over the available devices (the ``device`` fixture: the CPU always, CUDA where a GPU
is present, skipped with a reason elsewhere): on each, every tensor a run holds is on that device
and its results agree with the CPU's. Without a GPU, the "meta" device stands in for one: the
kernel step, the models and the baselines run on meta tensors, which raise on any operand left
on the CPU.
"""

import pandas as pd
import pytest
import torch
from cli_support import refused

import lipschitz_icl as li
from lipschitz_icl.api import prepare
from lipschitz_icl.baselines import BASELINES, kernel_posterior_mean, min_norm_solution, pinv_solution
from lipschitz_icl.batch import run_many
from lipschitz_icl.engines.kernel_batch import KernelBatch
from lipschitz_icl.engines.kernel_grad import _loss_grad
from lipschitz_icl.evaluate import evaluate_run
from lipschitz_icl.models import make_model
from lipschitz_icl.rng import make_generator

SHORT = ["train.steps=40", "train.log_every=5", "eval.functions=32", "engine.draws=32"]
SAMPLED = ["engine.kind=sampled", "engine.batch=64", "train.optimizer=sgd", "engine.dtype=float64"]
ENGINES = {
    "kernel": [],
    "kernel sgd, label noise, gaussian features": ["train.optimizer=sgd", "task.label_noise=0.2",
                                                   "features.kind=gaussian", "features.d=7"],
    "sampled reduced": SAMPLED,
    "sampled transformer": [*SAMPLED, "model.kind=transformer", "model.width=8", "model.n_heads=2",
                            "model.n_layers=2", "model.mlp=true", "model.layernorm=true", "train.lr=0.02",
                            "train.steps=15"],
}
RTOL, ATOL = 1e-6, 1e-9  # CUDA against the CPU, float64: reductions run in another order


def _cfg(overrides: list[str], device: str) -> li.Config:
    return li.load_config(None, [*SHORT, *overrides, f"engine.device={device}"])


def _same_numbers(a: li.Run, b: li.Run) -> None:
    """Equal steps and status; metrics equal within RTOL (bit for bit on one device)."""
    assert (a.summary["steps"], a.summary["status"]) == (b.summary["steps"], b.summary["status"])
    ma, mb = a.metrics, b.metrics
    pd.testing.assert_frame_equal(ma.drop(columns="value"), mb.drop(columns="value"))
    torch.testing.assert_close(torch.tensor(ma.value.to_numpy()), torch.tensor(mb.value.to_numpy()),
                               rtol=RTOL, atol=ATOL, equal_nan=True)


def _tensors(obj, seen=None):
    """Every tensor reachable from an engine's attributes (dicts, lists, dataclasses, modules)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v, seen)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _tensors(v, seen)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("lipschitz_icl"):
        for name, v in vars(obj).items():
            if name != "fs":  # the features stay on the CPU: count draws and prompts are drawn there
                yield from _tensors(v, seen)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_one_run_per_engine_on_the_device(engine, device):
    cfg = _cfg(ENGINES[engine], device)
    _, eng, _ = prepare(cfg)
    eng.forward_backward()
    held = list(_tensors(eng))
    assert held and {t.device.type for t in held} == {device}
    run = li.run(cfg, write=False)
    assert run.summary["status"] in ("budget", "converged") and run.summary["steps"] > 0
    assert all(v.device.type == "cpu" for v in run.params.values())  # what a run saves is on the CPU
    _same_numbers(run, li.run(_cfg(ENGINES[engine], "cpu"), write=False))


def test_batched_runs_on_the_device(device):
    variants = [["task.L=0.5"], ["task.L=2", "seed=1", "train.lr=0.5"], ["task.L=4", "train.eps=0.05"]]
    many = run_many([_cfg(v, device) for v in variants])
    batch = KernelBatch([prepare(_cfg(v, device))[1].spec for v in variants], [1.0] * 3)
    assert {t.device.type for t in _tensors(batch)} == {device}
    for got, want in zip(many, run_many([_cfg(v, "cpu") for v in variants]), strict=True):
        _same_numbers(got, want)


def _prompts(device: str, B: int = 6, N: int = 9, d: int = 4):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(B, N, d, generator=g, dtype=torch.float64)
    x[:, 1] = x[:, 0]  # duplicate tokens: rank-deficient systems, ties in the distances
    y, xq = torch.randn(B, N, generator=g, dtype=torch.float64), torch.randn(B, d, generator=g, dtype=torch.float64)
    return x.to(device), y.to(device), xq.to(device)


def test_baselines_on_the_device(device):
    x, y, xq = _prompts(device)
    cpu = _prompts("cpu")
    for name, fn in BASELINES.items():
        got = fn(x, y, xq)
        assert got.device.type == device and got.shape == (6,), name
        torch.testing.assert_close(got.cpu(), fn(*cpu), rtol=RTOL, atol=ATOL, msg=name)
    sigma = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    sigma = sigma @ sigma.T
    ids = torch.randint(5, (6, 10), generator=torch.Generator().manual_seed(2))
    got = kernel_posterior_mean(sigma.to(device), ids[:, :-1].to(device), y.to(device), ids[:, -1].to(device), 0.0)
    want = kernel_posterior_mean(sigma, ids[:, :-1], cpu[1], ids[:, -1], 0.0)
    torch.testing.assert_close(got.cpu(), want, rtol=RTOL, atol=ATOL)


def test_the_pinv_solution_off_the_cpu_is_the_minimum_norm_one():
    """What ``min_norm_solution`` does on CUDA (pinv) against what it does on the CPU (lstsq, gelsd),
    on rank-deficient systems (duplicated rows and columns)."""
    x, y, _ = _prompts("cpu")
    A = torch.cat([x, x[..., :1]], -1)  # a repeated column too: rank < d + 1
    want = min_norm_solution(A, y.unsqueeze(-1))
    torch.testing.assert_close(pinv_solution(A, y.unsqueeze(-1)), want, rtol=1e-9, atol=1e-10)
    assert (torch.linalg.matrix_rank(A) < A.shape[-1]).all()  # the systems have many solutions: the norm picks one


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("dev") / "run"
    li.run(None, ["train.steps=40", "engine.draws=32", "eval.functions=32", "prompt.N=8"], out=out)
    return out


def test_evaluate_on_the_device(trained, device):
    args = {"prompts": 16, "contexts": [1, 4, 8], "classes": ["linear", "relu_net"]}
    got = evaluate_run(trained, device=device, **args)
    want = evaluate_run(trained, device="cpu", **args)
    pd.testing.assert_frame_equal(got.drop(columns=["error", "se"]), want.drop(columns=["error", "se"]))
    torch.testing.assert_close(torch.tensor(got[["error", "se"]].to_numpy()),
                               torch.tensor(want[["error", "se"]].to_numpy()), rtol=RTOL, atol=ATOL)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_without_a_gpu_is_one_line(trained):
    assert "engine.device" in refused(["run", "engine.device=cuda", "train.steps=2"])
    line = refused(["evaluate", str(trained), "--device", "cuda"])
    assert "--device cuda" in line and "allowed: auto, cpu" in line


def test_an_unknown_device_is_one_line(trained):
    line = refused(["evaluate", str(trained), "--device", "tpu"])
    assert "'tpu'" in line and "auto, cpu, cuda" in line


# -- without a GPU: "meta" tensors stand in for another device; any operation that mixes in a CPU
# tensor (one created without device=, say) raises


def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


@pytest.mark.parametrize("gaussian", [False, True])
def test_kernel_step_stays_on_another_device(gaussian):
    """The batched kernel step on meta tensors: loss, attention, gradient and tests (the fast and the
    exact path; ``kernel_loss_grad`` around them reads one number back to choose), the update, rows
    leaving the batch."""
    extra = ["features.kind=gaussian", "features.d=7"] if gaussian else []  # dense Sigma, G; diagonal Sigma
    cfgs = [_cfg([*extra, f"task.label_noise={tau}", f"seed={i}"], "cpu") for i, tau in enumerate((0.2, 0.1))]
    batch = KernelBatch([prepare(c)[1].spec for c in cfgs], [1.0, 0.5])
    for name in ("M", "sigma", "diag", "p", "tau2", "G", "lr", "counts", "inv_c"):
        if getattr(batch, name) is not None:
            setattr(batch, name, _meta(getattr(batch, name)))
    batch.tests = {k: _meta(v) for k, v in batch.tests.items()}
    batch.device = torch.device("meta")
    args = (batch.counts, batch.inv_c, batch.sigma, batch.p, batch.tau2, batch.tests, True, True, 2**16, batch.diag,
            batch.weights)
    for exact in (False, True):
        out = _loss_grad(batch.M, *args, exact=exact)
        for t in (out.loss, out.attn_self, out.attn, out.grad, *out.tests.values()):
            assert t.device.type == "meta"
    batch.grad = out.grad
    batch.update()
    batch.keep([1])
    assert batch.M.device.type == "meta" and batch.M.shape[0] == 1


@pytest.mark.parametrize("kind,extra", [("reduced", {}), ("factored", {}), ("linear_attention", {}),
                                        ("transformer", {"n_layers": 2, "n_heads": 2, "width": 8, "mlp": True,
                                                         "layernorm": True})])
def test_models_stay_on_another_device(kind, extra):
    mcfg = li.load_config(None, ["engine.kind=sampled", f"model.kind={kind}",
                                 *(f"model.{k}={v}" for k, v in extra.items())]).model
    model = make_model(mcfg, 4, make_generator(0, "init"), torch.float32, "cpu").to("meta")
    x, y, xq = (torch.empty(s, device="meta") for s in ((3, 5, 4), (3, 5), (3, 4)))
    y_hat, attn = model(x, y, xq)
    assert y_hat.device.type == "meta" and attn.device.type == "meta"


def test_baselines_stay_on_another_device():
    x, y, xq = (torch.empty(s, dtype=torch.float64, device="meta") for s in ((3, 5, 4), (3, 5), (3, 4)))
    for name, fn in BASELINES.items():
        assert fn(x, y, xq).device.type == "meta", name
