"""A run's numbers depend on its config and seed only: not on the process that trains it, on what that
process trained before, nor on ``LIPSCHITZ_ICL_THREADS`` inside reproduce and sweeps (the number of torch
threads changes float reductions: the geometry's window over 2048 x 128 distances differs in its last bit
between one and two threads), where every run takes the caller's single thread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from lipschitz_icl import threads
from lipschitz_icl.batch import run_many
from lipschitz_icl.engines.sampled import SampledEngine
from lipschitz_icl.engines.sampled_batch import SampledBatch
from lipschitz_icl.experiments import Context, base_config, registry, run_experiments
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.sweep.worker import execute_config
from lipschitz_icl.threads import THREADS_ENV, torch_threads

ROOT = Path(__file__).resolve().parents[1]
# a Collins-like sampled run: linear attention, Adam, continuous inputs, label noise, geometry recorded
SAMPLED = ["features.kind=sphere", "features.d=3", "prompt.N=16", "task.kind=relu_net", "task.L=2",
           "task.label_noise=0.5", "model.kind=linear_attention", "engine.kind=sampled", "engine.resample=true",
           "engine.batch=32", "train.optimizer=adam", "train.lr=0.1", "train.steps=40", "train.log_every=5",
           "train.eps=1e-9", "eval.functions=32", "seed=3"]
CHILD = """
import sys, torch
import pandas as pd
import pyarrow.parquet as pq
from lipschitz_icl.batch import run_many
from lipschitz_icl.experiments import base_config
from lipschitz_icl.threads import torch_threads
with torch_threads(1):
    run = run_many([base_config(sys.argv[2:])])[0]
pq.write_table(run.table(), sys.argv[1] + ".parquet")
torch.save(run.params, sys.argv[1] + ".pt")
"""


def test_a_sampled_run_in_a_fresh_process_equals_the_one_trained_after_others(tmp_path):
    before = base_config([*SAMPLED, "model.kind=reduced", "seed=4"])  # another run first, in this process
    with torch_threads(1):
        here = run_many([before, base_config(SAMPLED)])[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), THREADS_ENV: ""}
    subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "child"), *SAMPLED], env=env, check=True,
                   timeout=120)
    child = pq.read_table(tmp_path / "child.parquet").to_pandas()
    pd.testing.assert_frame_equal(child, here.table().to_pandas(), check_exact=True)  # every metric, bit for bit
    params = torch.load(tmp_path / "child.pt", weights_only=True)
    assert params.keys() == here.params.keys()
    assert all(torch.equal(params[k], here.params[k]) for k in params)


@pytest.fixture
def threads_seen(monkeypatch):
    """The torch threads of every sampled-engine step, with LIPSCHITZ_ICL_THREADS=2 in the environment."""
    monkeypatch.setattr(threads, "cores", lambda: 4)  # the setting is never lowered to this machine's cores
    monkeypatch.setenv(THREADS_ENV, "2")
    seen: set[int] = set()
    for cls in (SampledEngine, SampledBatch):  # a run alone, and runs stepped together (``train_stacked``)
        step = cls.forward_backward

        def counting(self, *rows, step=step):
            seen.add(torch.get_num_threads())
            return step(self, *rows)

        monkeypatch.setattr(cls, "forward_backward", counting)
    return seen


def test_run_many_trains_a_run_alone_with_the_callers_threads(threads_seen):
    cfg = base_config([*SAMPLED, "train.steps=3"])
    with torch_threads(1):
        run_many([cfg])  # reproduce's and the sweeps' path: stepped together (a group of one)
        assert execute_config(cfg.model_dump(mode="json"))["summary"]["status"] == "budget"  # a sweep worker's
    assert threads_seen == {1}


def test_every_experiment_runs_with_one_thread(tmp_path, threads_seen, monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", {})
    counts = []

    @registry.experiment("P1", suites=("linear",))
    def exp_threads(ctx):
        counts.append(torch.get_num_threads())
        run_many([base_config([*SAMPLED, "train.steps=3"])])
        return [claim("P1", "threads", {}, True, False)]

    with torch_threads(2):  # the command line's setting: LIPSCHITZ_ICL_THREADS=2
        run_experiments(Context(out=tmp_path, quick=True), [exp_threads])
        assert torch.get_num_threads() == 2  # given back afterwards
    assert counts == [1] and threads_seen == {1}
