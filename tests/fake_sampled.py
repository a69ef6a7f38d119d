"""A small reproduce suite of sampled-engine runs (and a few kernel ones), standing in for the Collins
sweep so that a reproduce can be killed and resumed many times in seconds. ``install()`` makes its
experiments the only suite, named ``linear``. Each claim's statistic holds its runs' final losses and
test errors at full precision, so equal claims mean equal numbers."""

from __future__ import annotations

import lipschitz_icl.papers  # noqa: F401  (the built-in claims: the fakes reuse the ids P1-P3)
from lipschitz_icl.config import Config
from lipschitz_icl.experiments import registry
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.experiments.runner import base_config, rel_runs, run_group

_REAL = dict(registry._EXPERIMENTS)
COLLINS = ["features.kind=sphere", "features.d=3", "prompt.N=16", "task.kind=relu_net", "engine.kind=sampled",
           "engine.resample=true", "engine.batch=32", "train.optimizer=adam", "train.lr=0.1", "train.steps=60",
           "train.log_every=1", "train.eps=1e-9", "eval.functions=32"]  # every step recorded: a job of seconds
KERNEL = ["train.steps=150", "train.log_every=10", "engine.draws=8", "eval.functions=8", "task.kernel_samples=64"]


def _claim(ctx, cid: str, runs) -> list:
    stats = {r.config.name: [r.summary["final_loss"], r.summary.get("final_test_error"), r.summary["steps"]]
             for r in runs}
    return [claim(cid, "fake: numbers of sampled runs", stats, True, False, runs=rel_runs(ctx, runs))]


def _collins(model: str, L: float, tau: float, seed: int) -> Config:
    return base_config([*COLLINS, f"model.kind={model}", f"task.L={L:g}", f"task.label_noise={tau:g}",
                        f"seed={seed}", f"name={model}-L{L:g}-tau{tau:g}-s{seed}"])


@registry.experiment("P1", suites=("linear",))
def exp_sampled_L(ctx):
    cfgs = [_collins(m, L, 0.5, s) for m in ("reduced", "linear_attention") for L in (1.0, 16.0) for s in (0, 1)]
    return _claim(ctx, "P1", run_group(ctx, "sampled_L", cfgs))


@registry.experiment("P2", suites=("linear",))
def exp_sampled_tau(ctx):
    cfgs = [_collins(m, 4.0, tau, s) for m in ("linear_attention", "reduced") for tau in (0.1, 2.0) for s in (0, 1)]
    return _claim(ctx, "P2", run_group(ctx, "sampled_tau", cfgs))


@registry.experiment("P3", suites=("linear",))
def exp_kernel(ctx):
    cfgs = [base_config([*KERNEL, f"task.L={L}", f"seed={s}", f"name=L{L:g}-s{s}"]) for L in (0.5, 2.0) for s in (0, 1)]
    return _claim(ctx, "P3", run_group(ctx, "kernel", cfgs))


FAKE = [exp_sampled_L, exp_sampled_tau, exp_kernel]
registry._EXPERIMENTS.clear()
registry._EXPERIMENTS.update(_REAL)
FAKE_REGISTRY = {e.__name__: e for e in FAKE}


def install() -> None:
    """The fake experiments become suite ``linear`` (and ``all``)."""
    registry._EXPERIMENTS.clear()
    registry._EXPERIMENTS.update(FAKE_REGISTRY)
