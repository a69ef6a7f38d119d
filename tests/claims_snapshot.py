"""The claims of every experiment at the TINY size, as a reference file (tests/data/claims_tiny.json):
a refactor that moves experiments must leave every verdict, statistic, interval, flag and path as it was.

Bit for bit on the kind of machine that made the file (CPU vendor, torch's kernel instruction set, torch
version); elsewhere strings, booleans, integers and lengths must be equal and floats within 1e-4
relative: the TINY runs include float32 training (R7, B5: 4e-6 apart between torch's default and AVX2
kernels on one CPU) and BFGS optima to a gradient tolerance (P4c, R3d: up to 1e-6).

A change that is meant to move the numbers regenerates the file:
``python tests/claims_snapshot.py`` (about 3 minutes), and says so in its commit. New or changed claims
alone: ``python tests/claims_snapshot.py CL1 H2 ...`` recomputes the experiments of those claims and
replaces those claims' entries only (every other entry is left as it was); an entry made on another kind
of machine than the file's records its own under ``machines``, so each is compared bit for bit where it
was made."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

import lipschitz_icl.papers  # noqa: F401  (registers the built-in claims)
from lipschitz_icl.experiments import experiments_for_claims, registered, run_experiments
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY

SNAPSHOT = Path(__file__).parent / "data" / "claims_tiny.json"
# claims whose numbers go through torch.linalg.eigh (AH1: the reflections of Lambda's eigenbasis that close the
# gd_layers quadrature), whose last bit moved between two Python environments on one machine (same torch, numpy
# and scipy; a fresh venv gave another last bit), as the golden runs' eta_max and lambda_max did: compared by the
# tolerance everywhere
EIGH_CLAIMS = frozenset({"AH1"})
FIELDS = ("verdict", "statistic", "forced", "censored", "interval", "figures", "runs", "data")
RTOL, ATOL = 1e-4, 1e-12
# a coefficient of variation is a ratio of order one: across copies of one setting it is zero up to the BFGS
# optimum's gradient tolerance (about 1e-8), which no relative tolerance can compare; absolute for those keys
CV_ATOL = 1e-6


def machine() -> dict:
    """What decides the bits besides the code: the CPU (vendor, family and model: MKL and oneDNN pick their
    kernels by it, so two AVX-512 CPUs of one vendor can differ in the last bit of a matrix product), torch's
    kernel instruction set, torch."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    fields = {k.strip(): v for k, v in (line.split(":", 1) for line in text.splitlines()[:40] if ":" in line)}
    cpu = {k: fields.get(k, "unknown").strip() for k in ("vendor_id", "cpu family", "model")}
    return {"vendor": cpu["vendor_id"], "cpu": f"family {cpu['cpu family']} model {cpu['model']}",
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}


def record(claims) -> dict:
    """claim id -> the fields a refactor must keep, as claims.json holds them (JSON types)."""
    return json.loads(json.dumps({c.id: {k: v for k, v in c.as_dict().items() if k in FIELDS} for c in claims}))


def differences(got, want, path: str = "", exact: bool = False) -> list[str]:
    """Where ``got`` and ``want`` differ (floats by RTOL unless ``exact``), as 'path: got != want'."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return [f"{path}: keys {sorted(set(got) ^ set(want))} differ"]
        return [d for k in want for d in differences(got[k], want[k], f"{path}[{k}]", exact)]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: length {len(got)} != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True)) for d in differences(g, w, f"{path}[{i}]",
                                                                                               exact)]
    if isinstance(want, float) and isinstance(got, float) and not exact:
        atol = CV_ATOL if path.rsplit("[", 1)[-1].startswith("cv") else ATOL
        ok = abs(got - want) <= RTOL * max(abs(got), abs(want)) + atol
        return [] if ok else [f"{path}: {got!r} != {want!r}"]
    return [] if (got == want and type(got) is type(want)) else [f"{path}: {got!r} != {want!r}"]


def check(claims) -> None:
    """Assert that ``claims`` (from a TINY run) match the snapshot's, for the claims it has."""
    data = json.loads(SNAPSHOT.read_text())
    made_on = data.get("machines", {})  # claim id -> the machine of an entry made elsewhere than data["machine"]
    found = []
    for cid, fields in record(claims).items():
        if cid in data["claims"]:
            exact = made_on.get(cid, data["machine"]) == machine() and cid not in EIGH_CLAIMS
            found += [f"{d} ({'bit for bit' if exact else 'to 1e-4'})"
                      for d in differences(fields, data["claims"][cid], cid, exact)]
    assert not found, f"claims differ from {SNAPSHOT.name}: {found[:8]}"


def compute(experiments: list | None = None) -> dict:
    """Every registered experiment (or ``experiments``) at TINY, one output directory each (as the tiny tests run
    them)."""
    torch.set_num_threads(1)
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for exp in registered() if experiments is None else experiments:
            ctx = Context(out=Path(tmp) / exp.__name__, quick=True, sizes=TINY)
            out.update(record(run_experiments(ctx, [exp])))
    return out


def update(ids: list[str]) -> dict:
    """The snapshot with the entries of claims ``ids`` recomputed here and every other entry as it was."""
    data = json.loads(SNAPSHOT.read_text())
    fresh = compute(experiments_for_claims(ids))
    made_on = data.setdefault("machines", {})
    for cid in ids:
        data["claims"][cid] = fresh[cid]
        made_on.pop(cid, None)
        if machine() != data["machine"]:
            made_on[cid] = machine()
    if not made_on:
        del data["machines"]
    return data


if __name__ == "__main__":
    ids = sys.argv[1:]
    data = update(ids) if ids else {"machine": machine(), "claims": compute()}
    SNAPSHOT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}" + (f" ({', '.join(ids)} only)" if ids else ""), file=sys.stderr)
