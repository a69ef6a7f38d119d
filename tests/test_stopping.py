"""The stopping rules (stopping.RunState), which the optimizer loop and the batched trainer share."""

import math

import pytest

import lipschitz_icl as li
from lipschitz_icl.stopping import RunState, target_loss


def _cfg(*overrides: str) -> li.Config:
    return li.load_config(None, ["train.steps=10", "train.log_every=4", *overrides])


def _feed(cfg: li.Config, losses: list[float], attn: float = 0.1) -> tuple[RunState, list[int], int]:
    """Observe losses step by step until the rules end the run: (state, recorded steps, last step)."""
    state, recorded = RunState(), []
    for step, loss in enumerate(losses):
        record, ended = state.observe(cfg, step, loss, attn)
        if record:
            recorded.append(step)
        if ended:
            return state, recorded, step
    raise AssertionError("the run did not end")


def test_budget_records_log_steps_and_the_last():
    state, recorded, last = _feed(_cfg("train.eps=1e-9"), [1.0 - 0.01 * s for s in range(20)])
    assert (state.status, last, recorded) == ("budget", 10, [0, 4, 8, 10])
    assert state.last_loss == pytest.approx(0.9) and state.T_eps is None


def test_converged_between_log_steps_is_recorded():
    state, recorded, last = _feed(_cfg("train.eps=0.5"), [1.0, 0.9, 0.6, 0.5, 0.4])
    assert (state.status, state.T_eps, last, recorded) == ("converged", 3, 3, [0, 3])


def test_relative_epsilon_refers_to_the_initial_loss():
    cfg = _cfg("train.eps_mode=relative", "train.eps=0.5")
    assert target_loss(cfg.train, 4.0) == 2.0
    state, _, last = _feed(cfg, [4.0, 3.0, 2.0])
    assert (state.status, last) == ("converged", 2)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 30.0])
def test_diverged_keeps_the_last_finite_loss_and_does_not_record(bad):
    state, recorded, last = _feed(_cfg("train.diverge_factor=10"), [2.0, 1.0, bad])
    assert (state.status, last, recorded) == ("diverged", 2, [0])
    assert state.last_loss == 1.0 and state.outcome().final_loss == 1.0


def test_T1_is_the_first_step_attention_reaches_the_level():
    cfg, state = _cfg("analysis.t1_level=0.5"), RunState()
    for step, attn in enumerate([0.1, 0.4, 0.6, 0.3]):
        state.observe(cfg, step, 1.0, attn)
    assert state.T_1 == 2


def test_single_and_batched_trainers_stop_at_the_same_step():
    """One rule, two trainers: Adam (optimizer loop) and gd (batched trainer) both converge at the
    first step whose loss is <= eps, and record it."""
    for extra in (["train.optimizer=adam", "train.lr=0.05"], []):
        run = li.run(None, ["train.steps=400", "train.log_every=50", "train.eps=0.1", *extra], write=False)
        loss = run.series("loss")
        assert run.summary["status"] == "converged"
        assert run.summary["T_eps"] == run.summary["steps"] == loss.index[-1]
        assert loss.iloc[-1] <= 0.1 < loss.iloc[-2]
