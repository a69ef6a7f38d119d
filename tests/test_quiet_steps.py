"""Fused batches make the steps at which no run records or ends in one compiled loop (stopping_compiled.quiet_steps):
the runs' outcomes and every recorded metric equal, bit for bit, those of the trainer making each step itself."""

import importlib.util
from contextlib import ExitStack
from unittest import mock

import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl import stopping_batch, train_batch
from lipschitz_icl.api import prepare
from lipschitz_icl.engines.kernel_batch import KernelBatch
from lipschitz_icl.recorder import Recorder
from lipschitz_icl.train_batch import train_batched

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")

SMALL = ["engine.fused=true", "eval.functions=32", "engine.draws=64"]
DENSE = 5  # every step is recorded until T_1 for this many steps only, so that T_1 falls between log steps
BATCHES = {  # name -> per-run overrides: every way a run ends or records between log steps
    "T_1 and convergence between log steps": [  # T_1 at 176 and 20, T_eps at 178 and 171
        ["task.L=1", "train.steps=900", "train.log_every=7", "train.eps=3e-2"],
        ["task.L=3", "seed=1", "train.steps=600", "train.eps=1e-2", "train.log_every=11"]],
    "budget, label noise": [["task.label_noise=0.3", "train.steps=400", "train.log_every=13"],
                            ["task.label_noise=0.1", "seed=2", "train.steps=250"]],
    "relative eps, a run diverging at step 13": [
        ["train.eps_mode=relative", "train.eps=0.3", "train.steps=500", "task.label_noise=0.1", "train.log_every=9"],
        ["task.label_noise=10", "train.lr=30", "train.diverge_factor=2", "train.steps=300"]],
    "met at step 0": [["train.eps=10", "train.steps=50"], ["task.L=2", "train.steps=300"]],
}

EXPECTED = {"T_1 and convergence between log steps": ["converged", "converged"],
            "budget, label noise": ["budget", "budget"],
            "relative eps, a run diverging at step 13": ["converged", "diverged"],
            "met at step 0": ["trivial", "budget"]}


def _train(variants: list[list[str]], quiet: bool) -> tuple[list, list, int]:
    cfgs = [li.load_config(None, [*SMALL, *v]) for v in variants]
    engines = [prepare(c)[1] for c in cfgs]
    recorders = [Recorder(c.features.K) for c in cfgs]
    made = []  # the steps the trainer made itself
    advance = train_batch._BatchLoop._advance

    def counted(loop: train_batch._BatchLoop) -> bool:
        made.append(loop.step)
        return advance(loop)

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(stopping_batch, "DENSE_STEPS", DENSE))
        stack.enter_context(mock.patch.object(train_batch._BatchLoop, "_advance", counted))
        stack.enter_context(mock.patch.object(train_batch, "QUIET_CAP", 7))  # chunk ends inside the runs
        if not quiet:
            stack.enter_context(mock.patch.object(KernelBatch, "quiet_inputs", lambda self: None))
        outcomes = train_batched(cfgs, engines, recorders)
    return outcomes, [r.frame() for r in recorders], len(made)


def _fields(outcome) -> dict:
    return {k: v for k, v in outcome.__dict__.items() if k not in ("wall_s", "final_scores")}


@pytest.mark.parametrize("name", list(BATCHES))
def test_quiet_steps_give_the_trainers_outcomes_and_records_bit_for_bit(name: str) -> None:
    quiet, quiet_frames, quiet_made = _train(BATCHES[name], True)
    plain, plain_frames, plain_made = _train(BATCHES[name], False)
    assert [o.status for o in plain] == EXPECTED[name]
    for a, b in zip(quiet, plain, strict=True):
        assert _fields(a) == _fields(b)
        assert torch.equal(a.final_scores, b.final_scores)
    for a, b in zip(quiet_frames, plain_frames, strict=True):
        assert a.equals(b)
    assert plain_made == max(o.steps for o in plain) + 1  # the trainer made every step itself
    if name != "met at step 0":
        assert quiet_made < plain_made / 2  # most steps were made in the compiled loop (of at most 7 steps here)


def test_batches_without_a_fused_step_take_no_quiet_steps() -> None:
    cfg = li.load_config(None, ["engine.fused=false", "eval.functions=32", "engine.draws=64", "train.steps=60"])
    engine = prepare(cfg)[1]
    with mock.patch("lipschitz_icl.stopping_batch.BatchStates.quiet_steps") as quiet:
        train_batched([cfg], [engine], [Recorder(cfg.features.K)])
    quiet.assert_not_called()
