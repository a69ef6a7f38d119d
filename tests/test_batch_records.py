"""``BatchRecords``: what each run's recorder receives equals what was recorded for it, in order, across
chunk boundaries, with runs recorded at different steps and handed over at different times."""

import numpy as np
import pytest

from lipschitz_icl import batch_records
from lipschitz_icl.batch_records import BatchRecords
from lipschitz_icl.recorder import Recorder


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_each_run_gets_its_own_records_in_order(monkeypatch, chunk):
    monkeypatch.setattr(batch_records, "CHUNK", chunk)
    R, K, steps = 6, 3, 20
    rng = np.random.default_rng(chunk)
    records = BatchRecords(R, K, steps + 1)
    sent: dict[int, list] = {i: [] for i in range(R)}
    got: dict[int, Recorder] = {}
    alive = list(range(R))
    for step in range(steps + 1):
        runs = np.array([i for i in alive if rng.random() < 0.7], dtype=np.int64)
        if len(runs):
            scalars = rng.random((len(runs), 3))
            attn, scores = rng.random((len(runs), K, K)), rng.random((len(runs), K, K))
            records.add(runs, step, scalars, ("a", "b"), attn, scores)
            for j, i in enumerate(runs.tolist()):
                sent[i].append((step, scalars[j], attn[j], scores[j]))
        for i in [i for i in alive if rng.random() < 0.1 or step == steps]:  # runs that end now
            alive.remove(i)
            got[i] = Recorder(K)
            records.hand_over(i, got[i])
    for i in range(R):
        blocks = got[i]._blocks
        if not sent[i]:
            assert blocks == []
            continue
        (steps_i, scalars_i, names, attn_i, scores_i, heads), = blocks
        assert names == ("a", "b") and heads is None
        assert steps_i.tolist() == [s[0] for s in sent[i]]
        for got_values, k in ((scalars_i, 1), (attn_i, 2), (scores_i, 3)):
            assert np.array_equal(got_values, np.stack([s[k] for s in sent[i]]))


def test_one_set_of_metric_names_per_batch():
    records = BatchRecords(2, 2, 10)
    records.add(np.array([0]), 0, np.zeros((1, 2)), ("a",), np.zeros((1, 2, 2)), np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="one set of metrics"):
        records.add(np.array([1]), 0, np.zeros((1, 2)), ("b",), np.zeros((1, 2, 2)), np.zeros((1, 2, 2)))
