"""Golden metrics: tiny runs of every engine path, recomputed and compared bit for bit.

The numbers in tests/data/golden/golden.json were produced by the code before the engines were
reorganised; a refactor must leave them unchanged. Regenerate (only for an intended change of
numbers) with ``python tests/test_golden.py``.

Bits depend on the CPU as well as on the code: MKL and torch's vectorised kernels choose their
code path by CPU vendor, model and instruction set, and two paths round differently in the last place
(two AVX-512 AMD CPUs of different models differ in eta_max by one ulp).
The file records the machine it was made on (``machine``) and the dtype each value was computed
in (``dtypes``: float64, float32, int, str, ...). On a machine of the same kind every number must
be equal bit for bit; on another kind (another vendor or CPU model, or torch's kernels forced to a lower
instruction set with ``ATEN_CPU_CAPABILITY=default`` or ``avx2``, as .ci/run does) every integer,
status and length must be equal and every float within the relative tolerance of its dtype
(``RTOL``: 1e-12 for float64, measured 4e-15 between an AMD Zen 4 and an Intel Sapphire Rapids;
1e-6, a few float32 ULP of 1.2e-7, for float32), and the trained parameters are compared by their
moments, a sum within the tolerance of the sum of absolute values.
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
from claims_snapshot import machine

import lipschitz_icl as li
from lipschitz_icl.batch import run_many
from lipschitz_icl.theory import theory_report

GOLDEN = Path(__file__).parent / "data" / "golden" / "golden.json"
RTOL = {"float64": 1e-12, "float32": 1e-6}  # by the dtype a value was computed in; other dtypes exactly
# summary values computed from the config and the features, in float64 whatever engine.dtype says
CONFIG_FLOATS = frozenset({"eps", "Delta", "delta", "delta_se", "L", "L_star", "lr"})
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
    metrics with values as hex floats, a hash of the trained parameters and their moments (sum, sum
    of squares and sum of absolute values per tensor, for machines where the bits may differ)."""
    summary = {k: _hex(v) for k, v in run.summary.items() if k not in ("wall_s", "versions")}
    m = run.metrics
    rows = [[int(s), str(me), None if pd.isna(k) else int(k), None if pd.isna(n) else int(n), float(v).hex()]
            for s, me, k, n, v in zip(m.step, m.metric, m.k, m.n, m.value, strict=True)]
    h = hashlib.sha256()
    for key in sorted(run.params or {}):
        h.update(key.encode())
        h.update(run.params[key].detach().to(torch.float64).contiguous().numpy().tobytes())
    moments = {key: [float(t.sum()).hex(), float((t * t).sum()).hex(), float(t.abs().sum()).hex()]
               for key, t in ((k, run.params[k].detach().to(torch.float64)) for k in sorted(run.params or {}))}
    return {"summary": summary, "metrics": rows, "params": h.hexdigest(), "params_moments": moments}


def _dtype(value, float_dtype: str):
    """The dtype of a recorded value (a container of dtypes for a list or a mapping)."""
    if isinstance(value, list):
        return [_dtype(v, float_dtype) for v in value]
    if isinstance(value, dict):
        return {k: _dtype(v, float_dtype) for k, v in value.items()}
    if value is None or isinstance(value, bool):
        return "null" if value is None else "bool"
    if isinstance(value, int):
        return "int"
    return float_dtype if isinstance(_as_float(value), float) else "str"


def run_dtypes(name: str, record: dict) -> dict:
    """The dtype each value of a run was computed in: engine.dtype for what training computes (metrics,
    parameters, the final loss and error), float64 for the quantities of the config and features."""
    run_dtype = _config(name).engine.dtype
    summary = {k: _dtype(v, "float64" if k in CONFIG_FLOATS else run_dtype) for k, v in record["summary"].items()}
    return {"summary": summary, "metrics": run_dtype, "params": run_dtype}


def _theory(name: str) -> dict:
    rep = theory_report(_config(name), iters=30)
    return {k: _hex(v) if not (isinstance(v, float) and math.isinf(v)) else "inf" for k, v in rep.items()}


def compute() -> dict:
    runs = {name: _record(li.run(_config(name), write=False)) for name in CASES}
    theory = {name: _theory(name) for name in THEORY}
    return {
        "machine": machine(), "runs": runs, "theory": theory,
        "dtypes": {"runs": {name: run_dtypes(name, rec) for name, rec in runs.items()},
                   "theory": {name: _dtype(rep, "float64") for name, rep in theory.items()}},
    }


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.fixture(scope="module")
def exact(golden) -> bool:
    """Bit for bit on the kind of machine that made the file, to the tolerance of each dtype elsewhere."""
    return golden["machine"] == machine()


def _as_float(x):
    """A hex float written by float.hex() as a float; anything else (a config hash of hex digits too) as it is."""
    return float.fromhex(x) if isinstance(x, str) and x.startswith(("0x", "-0x")) else x


def _close(got, want, dtype, scale: float = 0.0) -> bool:
    """Equal; or, for a float dtype, both hex floats within RTOL[dtype] of the larger of them (or of `scale`,
    the sum of absolute values behind a sum that may cancel). Lists and mappings compare element by element."""
    if isinstance(dtype, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_close, got, want, dtype))
    if isinstance(dtype, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(
            _close(got[k], want[k], dtype[k]) for k in want)
    g, w = _as_float(got), _as_float(want)
    if dtype in RTOL and isinstance(g, float) and isinstance(w, float) and math.isfinite(g) and math.isfinite(w):
        return abs(g - w) <= RTOL[dtype] * max(abs(g), abs(w), scale)
    return got == want


def _same(got: dict, want: dict, dtypes: dict, name: str, exact: bool) -> None:
    def same(a, b, dtype):
        return a == b if exact else _close(a, b, dtype)

    assert got["summary"].keys() == want["summary"].keys(), name
    for key, value in want["summary"].items():
        assert same(got["summary"][key], value, dtypes["summary"][key]), \
            f"{name}: {key} {got['summary'][key]} != {value} ({dtypes['summary'][key]})"
    assert len(got["metrics"]) == len(want["metrics"]), name
    for g, w in zip(got["metrics"], want["metrics"], strict=True):
        assert g[:4] == w[:4] and same(g[4], w[4], dtypes["metrics"]), f"{name}: {g} != {w} ({dtypes['metrics']})"
    if exact:
        assert got["params"] == want["params"], name
    assert got["params_moments"].keys() == want["params_moments"].keys(), name
    for key, (total, squares, *_) in want["params_moments"].items():
        g_total, g_squares, g_abs = got["params_moments"][key]
        assert _close(g_total, total, dtypes["params"], float.fromhex(g_abs)), f"{name}: parameter {key} sum"
        assert _close(g_squares, squares, dtypes["params"]), f"{name}: parameter {key} sum of squares"


def test_cross_machine_comparison_can_fail():
    """The tolerant comparison still tells a changed number from a rounding difference, by dtype."""
    x = 0.1234567
    assert _close(x.hex(), (x * (1 + 1e-14)).hex(), "float64")
    assert not _close(x.hex(), (x * (1 + 1e-9)).hex(), "float64")
    assert _close(x.hex(), (x * (1 + 4 * 2.0**-23)).hex(), "float32")  # 4 float32 ULP
    assert not _close(x.hex(), (x * (1 + 1e-4)).hex(), "float32")
    assert not _close(3, 4, "int") and not _close("converged", "budget", "str")
    assert _close(2.0**-53, -(2.0**-52), "float64", scale=3.0)  # a sum that cancels, against its absolute sum
    assert not _close([1, None], [1, 2], ["int", "null"])


def test_golden_records_the_dtype_of_every_value(golden):
    """Every run and theory value has its dtype in the file; the float32 runs are the sampled float32 ones."""
    dtypes = golden["dtypes"]
    for name, run in golden["runs"].items():
        assert dtypes["runs"][name]["summary"].keys() == run["summary"].keys(), name
        assert dtypes["runs"][name]["metrics"] == _config(name).engine.dtype, name
    assert {n for n, d in dtypes["runs"].items() if d["metrics"] == "float32"} == {
        n for n in CASES if _config(n).engine.dtype == "float32"} != set()
    assert dtypes["theory"].keys() == golden["theory"].keys()


@pytest.mark.parametrize("name", list(CASES))
def test_single_run_matches_golden(golden, exact, name):
    _same(_record(li.run(_config(name), write=False)), golden["runs"][name], golden["dtypes"]["runs"][name],
          name, exact)


def test_run_many_matches_golden(golden, exact):
    runs = run_many([_config(n) for n in BATCHED])
    for name, run in zip(BATCHED, runs, strict=True):
        _same(_record(run), golden["runs"][name], golden["dtypes"]["runs"][name], name, exact)


# eigenvalues from Lanczos: torch.linalg.eigh of the small tridiagonal matrix goes through the LAPACK torch loads,
# whose last bit moved between two Python environments on one machine (same torch, numpy and scipy, other packages
# installed): compared by their dtype's tolerance everywhere
EIGEN_KEYS = ("eta_max", "lambda_max")


@pytest.mark.parametrize("name", THEORY)
def test_theory_matches_golden(golden, exact, name):
    got, want, dtypes = _theory(name), golden["theory"][name], golden["dtypes"]["theory"][name]
    assert got.keys() == want.keys()
    for key, value in want.items():
        bitwise = exact and key not in EIGEN_KEYS
        assert (got[key] == value) if bitwise else _close(got[key], value, dtypes[key]), f"{name}: {key}"


if __name__ == "__main__":
    torch.set_num_threads(1)
    GOLDEN.write_text(json.dumps(compute(), separators=(",", ":")) + "\n")
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)", file=sys.stderr)
