"""Build the engine a config asks for."""

from __future__ import annotations

import torch

from ..features import FeatureSet
from ..models import make_model
from ..problem import Problem
from ..tasks import make_task
from .base import Engine, make_generator, resolve_device
from .kernel import KernelEngine
from .sampled import SampledEngine


def _cast(fs: FeatureSet, dtype: torch.dtype) -> FeatureSet:
    return FeatureSet(fs.V.to(dtype), fs.p.to(dtype), fs.noise)


def build_engine(problem: Problem) -> Engine:
    cfg = problem.config
    device = resolve_device(cfg.engine.device)
    dtype = problem.dtype
    fs = _cast(problem.features, dtype)
    test_tasks = {"test_error": problem.task}
    if cfg.eval.other_class:
        test_tasks["test_error_other"] = make_task(cfg.eval.other_class, cfg.task.L, cfg.features.d)
    model = make_model(cfg.model, cfg.features.d, make_generator(cfg.seed, "init"), dtype, "cpu")
    if cfg.engine.kind == "kernel":
        test_gen = make_generator(cfg.seed, "test")
        test_sigmas = {}
        for name, task in test_tasks.items():
            F = task.values_on(task.sample(cfg.eval.functions, test_gen, torch.float64), problem.features.V)
            test_sigmas[name] = (F.T @ F / F.shape[0]).to(dtype)  # Sigma of the unseen functions
        space = cfg.engine.space
        if space == "auto":
            space = "Q" if cfg.train.optimizer == "adam" else "S"
        return KernelEngine(
            fs, problem.task, problem.kernel.sigma.to(dtype), cfg.prompt.N,
            draws=cfg.engine.draws, mean_field=cfg.engine.counts == "mean_field",
            resample=cfg.resample, space=space, tau=cfg.task.label_noise, seed=cfg.seed,
            test_sigmas=test_sigmas, Q0=model.Q.detach(), device=device,
        )
    return SampledEngine(
        fs, problem.task, model.to(device), cfg.prompt.N, batch=cfg.engine.batch,
        resample=cfg.resample, tau=cfg.task.label_noise, seed=cfg.seed, test_tasks=test_tasks,
        test_prompts=cfg.eval.functions, device=device, train_prompts=cfg.engine.train_prompts,
    )
