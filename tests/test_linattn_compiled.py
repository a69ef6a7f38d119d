"""gd_compiled: gd_layers' loss and gradient in one compiled loop agree with the torch path (autograd of
engines.gd_layers_loss) to float64 round-off, and a compiled training run follows the torch run."""

import importlib.util

import pytest
import torch

pytest.importorskip("numba")

from lipschitz_icl.errors import UserInputError  # noqa: E402
from lipschitz_icl.linattn import Form, GaussianTask, train_linear  # noqa: E402
from lipschitz_icl.linattn.engines import ExactEngine, gd_layers_loss  # noqa: E402
from lipschitz_icl.linattn.gd_compiled import CompiledGdLayers  # noqa: E402


def _task() -> GaussianTask:
    cov = torch.diag(torch.tensor([2.0, 1.0, 0.6, 0.4], dtype=torch.float64))
    return GaussianTask.make(cov, n_context=12, noise=0.3)


@pytest.mark.parametrize("layers", [1, 2, 3, 4])
def test_loss_and_gradient_match_autograd(layers):
    task = _task()
    covs = ExactEngine(task, seed=3, context_draws=64).covs()
    gen = torch.Generator().manual_seed(layers)
    a = (0.3 * torch.randn(layers, 4, 4, generator=gen, dtype=torch.float64)).requires_grad_()
    ref = gd_layers_loss(a, task, covs)
    (ref_grad,) = torch.autograd.grad(ref, a)
    got = CompiledGdLayers(task, covs)(a)
    (got_grad,) = torch.autograd.grad(3.0 * got, a)  # the chain rule through the custom backward
    assert got.item() == pytest.approx(ref.item(), rel=1e-13)
    torch.testing.assert_close(got_grad, 3.0 * ref_grad, rtol=1e-12, atol=1e-14)


def test_compiled_training_follows_torch():
    task, form = _task(), Form("gd_layers", layers=3)
    runs = [train_linear(form, task, lr=0.1, steps=60, engine="exact", seed=1, init_scale=0.01,
                         record_every=20, context_draws=64, compiled=flag) for flag in (False, True)]
    torch.testing.assert_close(runs[1].params["A"], runs[0].params["A"], rtol=1e-10, atol=1e-12)
    assert runs[1].curve["loss"].tolist() == pytest.approx(runs[0].curve["loss"].tolist(), rel=1e-12)
    assert runs[1].curve["loss"].iloc[-1] < runs[1].curve["loss"].iloc[0]  # it trained


def test_without_numba_the_compiled_path_is_refused_in_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else real(name, *a))
    with pytest.raises(UserInputError, match="compiled: needs numba"):
        ExactEngine(_task(), compiled=True)
    assert ExactEngine(_task()).compiled is False  # the torch path needs nothing more


def test_refined_engine_keeps_the_compiled_path():
    engine = ExactEngine(_task(), seed=0, context_draws=32, compiled=True)
    assert engine.refined().compiled and engine.refined().context_draws == 64
