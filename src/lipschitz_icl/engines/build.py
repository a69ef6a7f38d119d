"""Build the engine a config asks for."""

from __future__ import annotations

from ..models import make_model
from ..problem import Problem
from ..tasks import make_task
from .base import Engine, make_generator, resolve_device
from .kernel import KernelEngine
from .kernel_spec import cast_features, kernel_spec
from .sampled import SampledEngine


def build_engine(problem: Problem) -> Engine:
    cfg = problem.config
    if cfg.engine.kind == "kernel":
        return KernelEngine(kernel_spec(problem))
    device = resolve_device(cfg.engine.device)
    dtype = problem.dtype
    fs = cast_features(problem.features, dtype)
    test_tasks = {"test_error": problem.task}
    if cfg.eval.other_class:
        test_tasks["test_error_other"] = make_task(cfg.eval.other_class, cfg.task.L, cfg.features.d)
    model = make_model(cfg.model, cfg.features.d, make_generator(cfg.seed, "init"), dtype, "cpu")
    return SampledEngine(
        fs, problem.task, model.to(device), cfg.prompt.N, batch=cfg.engine.batch,
        resample=cfg.resample, tau=cfg.task.label_noise, seed=cfg.seed, test_tasks=test_tasks,
        test_prompts=cfg.eval.functions, device=device, train_prompts=cfg.engine.train_prompts,
    )
