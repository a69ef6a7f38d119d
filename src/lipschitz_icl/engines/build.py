"""Build the engine a config asks for."""

from __future__ import annotations

from ..problem import Problem
from .base import Engine
from .kernel import KernelEngine
from .kernel_spec import engine_inputs, kernel_spec
from .sampled import SampledEngine


def build_engine(problem: Problem) -> Engine:
    cfg = problem.config
    if cfg.engine.kind == "kernel":
        return KernelEngine(kernel_spec(problem))
    device, _, fs, test_tasks, model = engine_inputs(problem)
    return SampledEngine(
        fs, problem.task, model.to(device), cfg.prompt.N, batch=cfg.engine.batch,
        resample=cfg.resample, tau=cfg.task.label_noise, seed=cfg.seed, test_tasks=test_tasks,
        test_prompts=cfg.eval.functions, device=device, train_prompts=cfg.engine.train_prompts,
    )
