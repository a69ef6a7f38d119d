"""Golden metrics: tiny runs of every engine path, recomputed and compared bit for bit.

The numbers in tests/data/golden/golden.json were produced by the code before the engines were
reorganised; a refactor must leave them unchanged. Regenerate (only for an intended change of
numbers) with ``python tests/test_golden.py``.

Bits depend on the CPU as well as on the code: MKL and torch's vectorised kernels choose their
code path by CPU vendor and instruction set, and two paths round differently in the last place.
The file records the machine it was made on (``machine``). On a machine of the same kind every
number must be equal bit for bit; on another kind every integer, status and length must be
equal and every float within ``CROSS_MACHINE_RTOL`` (measured: 4e-15 between an AMD Zen 4 and an
Intel Sapphire Rapids, both AVX-512), and the trained parameters are compared by their moments.
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
CROSS_MACHINE_RTOL = 1e-12
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


def machine() -> dict:
    """What decides the bits besides the code: CPU vendor, torch's kernel instruction set, torch."""
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text() if cpuinfo.exists() else ""
    vendor = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("vendor_id")),
                  "unknown")
    return {"vendor": vendor, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch": torch.__version__}


def _record(run: li.Run) -> dict:
    """Everything a run computes, exactly: summary (without wall time and versions), the tidy
    metrics with values as hex floats, a hash of the trained parameters and their moments (sum and
    sum of squares per tensor, for machines where the bits may differ)."""
    summary = {k: _hex(v) for k, v in run.summary.items() if k not in ("wall_s", "versions")}
    m = run.metrics
    rows = [[int(s), str(me), None if pd.isna(k) else int(k), None if pd.isna(n) else int(n), float(v).hex()]
            for s, me, k, n, v in zip(m.step, m.metric, m.k, m.n, m.value, strict=True)]
    h = hashlib.sha256()
    for key in sorted(run.params or {}):
        h.update(key.encode())
        h.update(run.params[key].detach().to(torch.float64).contiguous().numpy().tobytes())
    moments = {key: [float(t.sum()).hex(), float((t * t).sum()).hex()]
               for key, t in ((k, run.params[k].detach().to(torch.float64)) for k in sorted(run.params or {}))}
    return {"summary": summary, "metrics": rows, "params": h.hexdigest(), "params_moments": moments}


def _theory(name: str) -> dict:
    rep = theory_report(_config(name), iters=30)
    return {k: _hex(v) if not (isinstance(v, float) and math.isinf(v)) else "inf" for k, v in rep.items()}


def compute() -> dict:
    return {
        "machine": machine(),
        "runs": {name: _record(li.run(_config(name), write=False)) for name in CASES},
        "theory": {name: _theory(name) for name in THEORY},
    }


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.fixture(scope="module")
def exact(golden) -> bool:
    """Bit for bit on the kind of machine that made the file, to CROSS_MACHINE_RTOL elsewhere."""
    return golden["machine"] == machine()


def _as_float(x):
    if isinstance(x, str):
        try:
            return float.fromhex(x)
        except ValueError:
            return x
    return x


def _close(got, want) -> bool:
    """Equal, or both hex floats within CROSS_MACHINE_RTOL of each other."""
    g, w = _as_float(got), _as_float(want)
    if isinstance(g, float) and isinstance(w, float) and math.isfinite(g) and math.isfinite(w):
        return abs(g - w) <= CROSS_MACHINE_RTOL * max(abs(g), abs(w))
    return got == want


def _same(got: dict, want: dict, name: str, exact: bool) -> None:
    same = (lambda a, b: a == b) if exact else _close
    assert got["summary"].keys() == want["summary"].keys(), name
    for key, value in want["summary"].items():
        assert same(got["summary"][key], value), f"{name}: {key} {got['summary'][key]} != {value}"
    assert len(got["metrics"]) == len(want["metrics"]), name
    for g, w in zip(got["metrics"], want["metrics"], strict=True):
        assert g[:4] == w[:4] and same(g[4], w[4]), f"{name}: {g} != {w}"
    if exact:
        assert got["params"] == want["params"], name
    assert got["params_moments"].keys() == want["params_moments"].keys(), name
    for key, pair in want["params_moments"].items():
        assert all(map(_close, got["params_moments"][key], pair)), f"{name}: parameter {key}"


def test_cross_machine_comparison_can_fail():
    """The tolerant comparison still tells a changed number from a rounding difference."""
    x = 0.1234567
    assert _close(x.hex(), (x * (1 + 1e-14)).hex())
    assert not _close(x.hex(), (x * (1 + 1e-9)).hex())
    assert not _close("converged", "budget")


@pytest.mark.parametrize("name", list(CASES))
def test_single_run_matches_golden(golden, exact, name):
    _same(_record(li.run(_config(name), write=False)), golden["runs"][name], name, exact)


def test_run_many_matches_golden(golden, exact):
    runs = run_many([_config(n) for n in BATCHED])
    for name, run in zip(BATCHED, runs, strict=True):
        _same(_record(run), golden["runs"][name], name, exact)


@pytest.mark.parametrize("name", THEORY)
def test_theory_matches_golden(golden, exact, name):
    got, want = _theory(name), golden["theory"][name]
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert (got[key] == value) if exact else _close(got[key], value), f"{name}: {key}"


if __name__ == "__main__":
    torch.set_num_threads(1)
    GOLDEN.write_text(json.dumps(compute(), separators=(",", ":")) + "\n")
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)", file=sys.stderr)
