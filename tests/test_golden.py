"""Golden metrics: tiny runs of every engine path, recomputed and compared bit for bit.

The numbers in tests/data/golden/golden.json were produced by the code before the engines were
reorganised; a refactor must leave them unchanged. Regenerate (only for an intended change of
numbers) with ``python tests/test_golden.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.batch import run_many
from lipschitz_icl.theory import theory_report

GOLDEN = Path(__file__).parent / "data" / "golden" / "golden.json"
TINY = ["features.K=3", "features.d=3", "prompt.N=12", "train.steps=12", "train.log_every=4",
        "eval.functions=16", "engine.draws=16", "train.eps=1e-9"]
SAMPLED = ["engine.kind=sampled", "engine.batch=16", "model.init=random"]

# name -> overrides: kernel gd/sgd with diagonal and dense Sigma, label noise, mean field, Q space
# and Adam, and the sampled engine with the reduced, factored and transformer models
CASES: dict[str, list[str]] = {
    "kernel_gd_diag": ["task.L=2"],
    "kernel_gd_full": ["features.kind=gaussian", "features.d=4", "task.L=3", "seed=1"],
    "kernel_gd_relu": ["task.kind=relu_net", "task.kernel_samples=64", "seed=2", "train.lr=2"],
    "kernel_sgd": ["train.optimizer=sgd", "seed=3", "task.L=4"],
    "kernel_noise": ["task.label_noise=0.3", "seed=4", "features.probs=imbalanced"],
    "kernel_mean_field": ["engine.counts=mean_field", "task.L=3"],
    "kernel_converges": ["task.L=3", "train.eps=0.2", "train.log_every=5"],  # between log steps
    "kernel_relative_eps": ["train.eps_mode=relative", "train.eps=0.5", "seed=6"],
    "kernel_diverges": ["task.L=1e6", "train.lr=1e300", "train.log_every=1"],
    "kernel_space_q_gd": ["engine.space=Q", "features.kind=gaussian", "features.d=4"],
    "kernel_adam": ["train.optimizer=adam", "train.lr=0.05", "seed=5"],
    "sampled_gd": [*SAMPLED, "features.noise=0.1"],
    "sampled_converges": [*SAMPLED, "train.eps=0.3", "train.log_every=5"],
    "sampled_diverges": [*SAMPLED, "engine.dtype=float32", "task.L=1e6", "train.lr=1e30", "features.noise=0.5"],
    "sampled_sgd_factored": [*SAMPLED, "train.optimizer=sgd", "model.kind=factored", "train.lr=0.5",
                             "engine.dtype=float64"],  # pinned: float32 is the neural models' default
    "sampled_train_prompts": [*SAMPLED, "engine.train_prompts=40", "engine.batch=8", "train.optimizer=sgd"],
    "sampled_transformer": [*SAMPLED, "model.kind=transformer", "model.width=8", "model.n_heads=2",
                            "engine.dtype=float64",  # pinned: float32 is the neural models' default
                            "train.optimizer=adam", "train.lr=0.01", "train.steps=6", "train.log_every=3"],
}
BATCHED = ["kernel_gd_diag", "kernel_gd_full", "kernel_gd_relu", "kernel_noise", "kernel_mean_field",
           "kernel_converges", "kernel_relative_eps", "kernel_diverges", "kernel_sgd"]
THEORY = ["kernel_gd_full", "kernel_noise", "sampled_gd"]


def _config(name: str) -> li.Config:
    return li.load_config(None, [*TINY, *CASES[name]])


def _hex(x):
    return x.hex() if isinstance(x, float) else x


def _record(run: li.Run) -> dict:
    """Everything a run computes, exactly: summary (without wall time and versions), the tidy
    metrics with values as hex floats, and a hash of the trained parameters."""
    summary = {k: _hex(v) for k, v in run.summary.items() if k not in ("wall_s", "versions")}
    m = run.metrics
    rows = [[int(s), str(me), None if pd.isna(k) else int(k), None if pd.isna(n) else int(n), float(v).hex()]
            for s, me, k, n, v in zip(m.step, m.metric, m.k, m.n, m.value, strict=True)]
    h = hashlib.sha256()
    for key in sorted(run.params or {}):
        h.update(key.encode())
        h.update(run.params[key].detach().to(torch.float64).contiguous().numpy().tobytes())
    return {"summary": summary, "metrics": rows, "params": h.hexdigest()}


def _theory(name: str) -> dict:
    rep = theory_report(_config(name), iters=30)
    return {k: _hex(v) if not (isinstance(v, float) and math.isinf(v)) else "inf" for k, v in rep.items()}


def compute() -> dict:
    return {
        "runs": {name: _record(li.run(_config(name), write=False)) for name in CASES},
        "theory": {name: _theory(name) for name in THEORY},
    }


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def _same(got: dict, want: dict, name: str) -> None:
    assert got["summary"] == want["summary"], name
    assert len(got["metrics"]) == len(want["metrics"]), name
    for g, w in zip(got["metrics"], want["metrics"], strict=True):
        assert g == w, f"{name}: {g} != {w}"
    assert got["params"] == want["params"], name


@pytest.mark.parametrize("name", list(CASES))
def test_single_run_matches_golden(golden, name):
    _same(_record(li.run(_config(name), write=False)), golden["runs"][name], name)


def test_run_many_matches_golden(golden):
    runs = run_many([_config(n) for n in BATCHED])
    for name, run in zip(BATCHED, runs, strict=True):
        _same(_record(run), golden["runs"][name], name)


@pytest.mark.parametrize("name", THEORY)
def test_theory_matches_golden(golden, name):
    assert _theory(name) == golden["theory"][name]


if __name__ == "__main__":
    torch.set_num_threads(1)
    GOLDEN.write_text(json.dumps(compute(), separators=(",", ":")) + "\n")
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)", file=sys.stderr)
