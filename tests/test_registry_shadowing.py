"""A name in a registry means one class, and a kept value changed in place is never reused: a plain config computes
the same numbers under the same hash whatever was imported, run or mutated before in the process."""

import textwrap

import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl import TaskClass, register_task
from lipschitz_icl.engines import engine_class, register_engine
from lipschitz_icl.engines.kernel import KernelEngine
from lipschitz_icl.errors import ConfigError, UserInputError
from lipschitz_icl.problem import build_problem
from lipschitz_icl.sweep import run_sweep
from lipschitz_icl.tasks.base import _REGISTRY

PLAIN = ["train.steps=200", "train.log_every=50", "engine.draws=64", "eval.functions=64", "task.L=1.5"]
SHADOW = """
    import torch
    from lipschitz_icl import TaskClass, register_task

    @register_task
    class Linear(TaskClass):  # takes the built-in name: refused
        name = "linear"

        def sample(self, n, gen, dtype, device="cpu"):
            return {"w": 3 * torch.ones(n, self.d, dtype=dtype)}

        def evaluate(self, funcs, x):
            return torch.einsum("nmd,nd->nm", x, funcs["w"])
"""


def _outcome(run: li.Run) -> tuple:
    s = run.summary
    return s["config_hash"], s["steps"], s["final_loss"], s["min_attn"], run.metrics["value"].sum()


@pytest.fixture
def shadow_module(tmp_path, monkeypatch):
    (tmp_path / "shadow_linear.py").write_text(textwrap.dedent(SHADOW))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "shadow_linear"


def test_a_plugin_cannot_take_a_built_in_task_name(shadow_module):
    before = _outcome(li.run(None, PLAIN, write=False))
    linear = _REGISTRY["linear"]
    with pytest.raises(ConfigError, match=r"plugins: module 'shadow_linear' failed .*'linear' is built in"):
        li.load_config(None, [*PLAIN, f"plugins=[{shadow_module}]"])
    assert _REGISTRY["linear"] is linear
    assert _outcome(li.run(None, PLAIN, write=False)) == before


def test_a_plugin_cannot_take_a_built_in_engine_name():
    class Mine(KernelEngine):
        name = "kernel"

    with pytest.raises(ValueError, match="engine 'kernel' is built in"):
        register_engine(Mine)
    assert engine_class("kernel") is KernelEngine


def test_another_modules_class_cannot_take_a_plugin_name():
    class First(TaskClass):
        name = "test_taken_once"

    class Second(TaskClass):
        name = "test_taken_once"

    Second.__module__ = "some_other_plugin"
    register_task(First)
    register_task(First)  # the same class again: fine
    with pytest.raises(ValueError, match=r"already registered by .*First; register some_other_plugin\..*Second under"):
        register_task(Second)
    assert _REGISTRY["test_taken_once"] is First


def test_the_same_class_defined_again_replaces_it_and_forgets_kept_values():
    from lipschitz_icl.problem import _RECENT_FEATURES

    def define(scale: float):
        class Redefined(li.TaskClass):  # a notebook cell run twice: same module, same qualified name
            name = "test_redefined"

            def sample(self, n, gen, dtype, device="cpu"):
                return {"w": scale * torch.randn(n, self.d, generator=gen, dtype=dtype)}

            def evaluate(self, funcs, x):
                return torch.einsum("nmd,nd->nm", x, funcs["w"])

        return Redefined

    register_task(define(1.0))
    build_problem(li.load_config(None, ["task.kind=test_redefined"]))
    assert _RECENT_FEATURES
    second = define(2.0)
    register_task(second)
    assert _REGISTRY["test_redefined"] is second and not _RECENT_FEATURES


def test_a_sweep_whose_grid_adds_a_shadowing_plugin_is_refused(tmp_path, shadow_module):
    spec = {"name": "t", "base": {"train": {"steps": 40}, "engine": {"draws": 32}, "eval": {"functions": 32}},
            "grid": {"plugins": [[], [shadow_module]]}}
    with pytest.raises(UserInputError, match="'linear' is built in"):
        run_sweep(spec, tmp_path / "s", workers=1)
    assert not list((tmp_path / "s").glob("results/*.parquet"))  # nothing stored under the plain point's hash


@pytest.mark.parametrize("mutate", [
    lambda p: p.features.V.mul_(2.0),
    lambda p: p.features.p.copy_(torch.tensor([0.4, 0.3, 0.1, 0.1, 0.1])),
    lambda p: p.features.V.numpy().__setitem__((0, 0), 7.0),  # through a NumPy view: no version bump
])
def test_a_problem_changed_in_place_does_not_change_the_next_run(mutate):
    cfg = li.load_config(None, PLAIN)
    before = _outcome(li.run(cfg, write=False))
    problem = build_problem(cfg)
    mutate(problem)
    assert _outcome(li.run(cfg, write=False)) == before
    fresh = build_problem(cfg)
    assert fresh.features is not problem.features


def test_an_engine_spec_changed_in_place_does_not_change_the_next_run():
    cfg = li.load_config(None, PLAIN)
    before = _outcome(li.run(cfg, write=False))
    _, engine, _ = li.api.prepare(cfg)
    engine.spec.sigma.mul_(3.0)
    engine.spec.M0.add_(1.0)
    assert _outcome(li.run(cfg, write=False)) == before
