"""Compare two ``reproduce`` output directories: the claims (statistics, verdicts, criteria,
statements, figures, runs) of their claims.json, ignoring wall times, dates and experiment
names; each run's metrics.parquet bit for bit; its config.yaml with the output directory's own
path masked (feature files are written under it); and its summary.json without its wall time
and config hash (the hash covers those paths).

    python -m lipschitz_icl.experiments.compare OLD_DIR NEW_DIR     # exit 1 when they differ
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

IGNORED_CLAIM_KEYS = ("wall_s", "experiment")  # timing, and names that a refactor may change
IGNORED_SUMMARY_KEYS = ("wall_s", "config_hash")


def _claims(path: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text())
    return {c["id"]: {k: v for k, v in c.items() if k not in IGNORED_CLAIM_KEYS} for c in data["claims"]}


def claims_differences(old: Path, new: Path) -> list[str]:
    """One line per claim whose fields differ (or that only one file holds)."""
    a, b = _claims(old), _claims(new)
    out = [f"{cid}: only in {old}" for cid in a if cid not in b]
    out += [f"{cid}: only in {new}" for cid in b if cid not in a]
    for cid in a.keys() & b.keys():
        out += [f"{cid}.{key}: {a[cid].get(key)!r} != {b[cid].get(key)!r}"
                for key in sorted(a[cid].keys() | b[cid].keys()) if a[cid].get(key) != b[cid].get(key)]
    if [c for c in a if c in b] != [c for c in b if c in a]:
        out.append("claims are in a different order")
    return sorted(out)


def runs_differences(old_runs: Path, new_runs: Path) -> list[str]:
    """One line per run directory whose metrics or summary differ (or that only one side holds)."""
    def runs(root: Path) -> set[str]:
        return {str(p.parent.relative_to(root)) for p in root.rglob("summary.json")}

    a, b = runs(old_runs), runs(new_runs)
    out = [f"run {r}: only in {old_runs}" for r in sorted(a - b)]
    out += [f"run {r}: only in {new_runs}" for r in sorted(b - a)]
    for r in sorted(a & b):
        if not pq.read_table(old_runs / r / "metrics.parquet").equals(pq.read_table(new_runs / r / "metrics.parquet")):
            out.append(f"run {r}: metrics differ")
        ca, cb = ((root / r / "config.yaml").read_text().replace(str(root.parent.resolve()), "<out>")
                  for root in (old_runs, new_runs))
        if ca != cb:
            out.append(f"run {r}: config differs")
        sa, sb = (json.loads((root / r / "summary.json").read_text()) for root in (old_runs, new_runs))
        if {k: v for k, v in sa.items() if k not in IGNORED_SUMMARY_KEYS} != {
                k: v for k, v in sb.items() if k not in IGNORED_SUMMARY_KEYS}:
            out.append(f"run {r}: summary differs")
    return out


def compare_outputs(old: Path, new: Path) -> list[str]:
    return claims_differences(old / "claims.json", new / "claims.json") + runs_differences(old / "runs", new / "runs")


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all((Path(p) / "claims.json").is_file() for p in argv):
        print("usage: python -m lipschitz_icl.experiments.compare OLD_DIR NEW_DIR (each holding claims.json)",
              file=sys.stderr)
        return 2
    diffs = compare_outputs(Path(argv[0]), Path(argv[1]))
    print("\n".join(diffs) if diffs else "identical (ignoring wall times, dates, experiment names and the output path)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
