"""Three tiny experiments standing in for a reproduce suite (claims P1, P2, P3), so interruption and
resumption are tested in seconds. ``install()`` makes them the only suite, named ``linear``.
With FAKE_SLOW=1 the middle experiment trains until it is interrupted."""

from __future__ import annotations

import os

import lipschitz_icl.papers  # noqa: F401  (the built-in claims: the fakes reuse the ids P1-P3)
from lipschitz_icl.experiments import registry
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.experiments.runner import base_config, rel_runs, run_group

_REAL = dict(registry._EXPERIMENTS)  # the fakes are registered only by install()


def experiment(*claim_ids: str):
    return registry.experiment(*claim_ids, suites=("linear",))


TINY = ["train.steps=20", "train.log_every=5", "engine.draws=8", "eval.functions=8"]
SLOW = ["train.steps=1000000", "task.label_noise=0.5", "train.eps=1e-12"]


def _losses(ctx, group: str, Ls: tuple[float, ...], extra: list[str] | None = None, slow: tuple[float, ...] = ()):
    """Runs at each L (those in ``slow`` with ``extra``) under out/runs/<group>/, and their final losses."""
    cfgs = [base_config([*TINY, *(extra or [] if L in slow else []), f"task.L={L}", f"name=L{L:g}"]) for L in Ls]
    runs = run_group(ctx, group, cfgs)
    return runs, [r.summary["final_loss"] for r in runs]


@experiment("P1")
def exp_first(ctx):
    runs, loss = _losses(ctx, "first", (1.0, 2.0))
    return [claim("P1", "fake: loss falls with L", {"final_loss": loss}, loss[1] < loss[0], False,
                  runs=rel_runs(ctx, runs))]


@experiment("P2")
def exp_slow(ctx):
    # two fast runs and, last, one that with FAKE_SLOW=1 trains until it is interrupted
    runs, loss = _losses(ctx, "slow", (0.5, 1.0, 1.5), SLOW if os.environ.get("FAKE_SLOW") == "1" else None, (1.5,))
    return [claim("P2", "fake: a loss", {"final_loss": loss, "status": runs[-1].summary["status"]}, True, False,
                  runs=rel_runs(ctx, runs))]


@experiment("P3")
def exp_last(ctx):
    runs, loss = _losses(ctx, "last", (0.5, 3.0))
    return [claim("P3", "fake: loss falls with L", {"final_loss": loss}, loss[1] < loss[0], False,
                  runs=rel_runs(ctx, runs))]


FAKE = [exp_first, exp_slow, exp_last]
registry._EXPERIMENTS.clear()
registry._EXPERIMENTS.update(_REAL)
FAKE_REGISTRY = {e.__name__: e for e in FAKE}


def install() -> None:
    """The fake experiments become suite ``linear`` (and ``all``)."""
    registry._EXPERIMENTS.clear()
    registry._EXPERIMENTS.update(FAKE_REGISTRY)


if __name__ == "__main__":  # python tests/fake_experiments.py reproduce linear --out ...
    install()
    from lipschitz_icl.__main__ import entry

    entry()
