"""The stopping rules (stopping.RunState), which the optimizer loop and the batched trainer share."""

import math

import pytest

import lipschitz_icl as li
from lipschitz_icl.stopping import DENSE_STEPS, RunState, rel_key, rel_level, target_loss


def _cfg(*overrides: str) -> li.Config:
    return li.load_config(None, ["train.steps=10", "train.log_every=4", *overrides])


def _feed(cfg: li.Config, losses: list[float], attn: float = 0.9) -> tuple[RunState, list[int], int]:
    """Observe losses step by step until the rules end the run: (state, recorded steps, last step).
    attn = 0.9 puts T_1 at step 0, so only the log grid (and events) decide what is recorded."""
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


def test_every_step_is_recorded_until_T1_then_the_log_grid():
    """Before: only the log grid was recorded, so a T_1 between log steps (or before the first
    one) was missing from the table. Now every step until T_1, T_1 itself, then the grid."""
    cfg, state, recorded = _cfg("train.steps=30", "train.log_every=10"), RunState(), []
    for step in range(31):
        record, _ = state.observe(cfg, step, 1.0, 0.6 if step >= 3 else 0.1)
        if record:
            recorded.append(step)
    assert recorded == [0, 1, 2, 3, 10, 20, 30] and state.T_1 == 3


def test_T1_after_the_dense_window_is_recorded_exactly():
    cfg, state, recorded = _cfg("train.steps=400", "train.log_every=100"), RunState(), []
    for step in range(401):
        record, _ = state.observe(cfg, step, 1.0, 0.6 if step >= 257 else 0.1)
        if record:
            recorded.append(step)
    assert recorded == [*range(DENSE_STEPS), 200, 257, 300, 400]
    assert state.T_1 == 257


def test_half_times_and_relative_levels_are_exact_steps():
    cfg, state = _cfg("train.steps=50", "train.eps=1e-9"), RunState()
    for step in range(51):
        loss = 0.8 ** step  # level 10^(-j/8) is first reached at ceil(j log 10 / (8 log 1.25))
        attn = [0.2 + 0.02 * step, 0.2 + 0.01 * step]  # gap 0.8 halves at steps 20 and 40
        state.observe(cfg, step, loss, min(attn), attn)
    out = state.outcome()
    assert out.T_half == [20, 40]
    for key, step in out.T_rel.items():
        assert 0.8 ** step <= float(key) * 1.0000001 < 0.8 ** (step - 1) * 1.001
    assert out.T_rel[rel_key(rel_level(8))] == math.ceil(math.log(10) / math.log(1.25))


def test_trainer_events_match_every_step_of_a_run():
    """T_1, T_half and T_rel of the trainer equal the first crossings of a run recorded at every step."""
    run = li.run(None, ["train.steps=300", "train.log_every=1", "train.eps=1e-9"], write=False)
    s = run.summary
    amin, loss, att = run.series("attn_min"), run.series("loss"), run.attention()
    assert s["T_1"] == int(amin.index[(amin >= 0.5).to_numpy()][0])
    for k, t in enumerate(s["T_half"]):
        gap = 1 - att[k]
        assert t == int(gap.index[(gap <= 0.5 * gap.iloc[0]).to_numpy()][0])
    assert len(s["T_rel"]) >= 8
    for j, (key, t) in enumerate(s["T_rel"].items(), start=1):
        assert key == rel_key(rel_level(j))
        assert t == int(loss.index[(loss <= rel_level(j) * loss.iloc[0]).to_numpy()][0])


def test_single_and_batched_trainers_stop_at_the_same_step():
    """One rule, two trainers: Adam (optimizer loop) and gd (batched trainer) both converge at the
    first step whose loss is <= eps, and record it."""
    for extra in (["train.optimizer=adam", "train.lr=0.05"], []):
        run = li.run(None, ["train.steps=400", "train.log_every=50", "train.eps=0.1", *extra], write=False)
        loss = run.series("loss")
        assert run.summary["status"] == "converged"
        assert run.summary["T_eps"] == run.summary["steps"] == loss.index[-1]
        assert loss.iloc[-1] <= 0.1 < loss.iloc[-2]
