"""BatchStates (the stopping rules vectorised over a batch) against RunState run by run: the same record and
end decisions at every step and the same outcome, on random loss and attention sequences."""

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lipschitz_icl as li
from lipschitz_icl import stopping, stopping_batch
from lipschitz_icl.stopping import RunState
from lipschitz_icl.stopping_batch import BatchStates

K = 3
# (steps, log_every, eps, eps_mode, diverge_factor, t1_level)
SETTINGS = [(12, 4, 0.01, "absolute", 10.0, 0.5), (30, 1, 1e-3, "relative", 2.0, 0.7),
            (20, 7, 0.02, "absolute", 1e4, 0.3), (5, 2, 1e-12, "relative", 3.0, 0.9)]
CONFIGS = [li.load_config(None, [f"train.steps={steps}", f"train.log_every={every}", f"train.eps={eps}",
                                 f"train.eps_mode={mode}", f"train.diverge_factor={div}", f"analysis.t1_level={t1}"])
           for steps, every, eps, mode, div, t1 in SETTINGS]
LOSS = st.one_of(st.floats(0.0, 5.0), st.sampled_from([math.nan, math.inf, 0.0, 1e-300, 0.01, 0.02]))  # and eps
ATTN = st.one_of(st.floats(0.0, 1.0), st.just(math.nan), st.sampled_from([0.3, 0.5, 0.7, 0.9, 1.0]))  # and T_1 levels


def _step_values(draw, runs: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Loss (steps, runs), mostly falling with some jumps; attention (steps, runs, K), mostly rising."""
    start = np.array(draw(st.lists(LOSS, min_size=runs, max_size=runs)))
    factors = np.array(draw(st.lists(st.floats(0.7, 1.25), min_size=steps * runs, max_size=steps * runs)))
    loss = start * np.cumprod(factors.reshape(steps, runs), axis=0)
    odd = draw(st.lists(st.tuples(st.integers(0, steps - 1), st.integers(0, runs - 1), LOSS), max_size=4))
    for s, r, v in odd:
        loss[s, r] = v
    attn = np.array(draw(st.lists(ATTN, min_size=steps * runs * K, max_size=steps * runs * K))).reshape(steps, runs, K)
    return loss, np.sort(attn, axis=0)


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "numba"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_batch_states_equal_run_states(data, compiled: bool):
    dense = data.draw(st.sampled_from([stopping.DENSE_STEPS, 3]))  # 3: steps after the dense phase, T_1 records
    with mock.patch.object(stopping, "DENSE_STEPS", dense), mock.patch.object(stopping_batch, "DENSE_STEPS", dense):
        _compare(data, compiled)


def _compare(data, compiled: bool) -> None:
    runs = data.draw(st.integers(1, 6))
    cfgs = [CONFIGS[data.draw(st.integers(0, len(CONFIGS) - 1))] for _ in range(runs)]
    last = max(c.train.steps for c in cfgs)
    loss, attn = _step_values(data.draw, runs, last + 1)
    singles, batch = [RunState() for _ in cfgs], BatchStates(cfgs, compiled=compiled)
    with_self = data.draw(st.booleans())  # the kernel engine gives Attn_k; continuous inputs give none
    rows = np.arange(runs)
    for step in range(last + 1):
        with np.errstate(invalid="ignore"):
            mins = np.min(attn[step, rows], axis=1)  # NaN where any Attn_k is NaN, as torch's amin
        wanted = batch.wants_record(rows, step) if data.draw(st.booleans()) else None  # as the trainer passes it
        record, ended = batch.observe(rows, step, loss[step, rows], mins, attn[step, rows] if with_self else None,
                                      wanted)
        for j, i in enumerate(rows.tolist()):
            expect = singles[i].observe(cfgs[i], step, float(loss[step, i]), float(mins[j]),
                                        attn[step, i].tolist() if with_self else None)
            assert (bool(record[j]), bool(ended[j])) == expect, (step, i)
            if expect[1]:
                singles[i].steps = step
        batch.finish(rows[ended], step, 0.0)
        rows = rows[~ended]
        if not len(rows):
            break
    assert not len(rows)
    for i, single in enumerate(singles):
        assert batch.outcome(i) == single.outcome()
