"""``lipschitz-icl analyze``: the phase analysis of run directories, saved as analysis.json."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..analysis import analyze_run_object
from ..api import load_run
from ..compare import differing_keys, run_labels
from ..errors import UserInputError
from ..store import ANALYSIS_FILE, METRICS_FILE, SUMMARY_FILE, atomic_write_json
from .common import cell, check_run_dir, err, esc, out, user_errors


def phase_rows(res: dict) -> list[tuple[str, object]]:
    """(label, value) of each field of an analysis, in the order the tables show them."""
    return [
        (f"T_1 (min_k Attn_k ≥ {res['t1_level']:g})", res["T_1"]),
        (f"T_ε (loss ≤ {res['eps']:g})", res["T_eps"]),
        ("rate before T_1, −d log(1−Attn)/dt", res["rate_fast"]),
        ("rate after T_1", res["rate_slow"]),
        (f"phases (rate ratio > {res['phase_factor']:g})", res["n_phases"]),
        (f"oscillations of Attn_k→n after T_1 (tol {res['osc_tol']:g})", res["oscillations"]),
        ("oscillating pairs", res["oscillating_pairs"]),
        ("oscillation amplitude", res["osc_amplitude"]),
        ("loss monotone", res["loss_monotone"]),
        ("final min_k Attn_k", res["final_min_attn"]),
        ("final test error (unseen f)", res["final_test_error"]),
        ("run status", res["status"]),
        (f"verdict (Attn ≥ {1 - res['eps_attn']:g}, error ≤ {res['eps']:g})", res["verdict"]),
    ]


def phase_table(res: dict, title: str) -> Table:
    table = Table(title=title, show_header=False)
    for label, value in phase_rows(res):
        table.add_row(label, esc(cell(value)))
    return table


def phases_side_by_side(results: list[dict], runs: list, dirs: list[Path]) -> Table:
    """One table for several runs: a row per quantity, a column per run, each headed by its directory and
    the config keys in which the runs differ. A row label that depends on a run's own settings (t1_level,
    eps) is the first run's."""
    keys = differing_keys(runs)
    labels = run_labels(runs, keys)
    title = f"analysis of {len(runs)} runs" + (f", differing in {', '.join(keys)}" if keys else "")
    table = Table(title=esc(title))
    table.add_column("quantity")
    for d, label in zip(dirs, labels, strict=True):
        table.add_column(esc(f"{d.name}: {label}" if label != d.name else d.name), justify="right")
    per_run = [phase_rows(res) for res in results]
    for i, (label, _) in enumerate(per_run[0]):
        table.add_row(label, *(esc(cell(rows[i][1])) for rows in per_run))
    return table


def analyze_command(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories written by `lipschitz-icl run`."),
    osc_tol: float = typer.Option(1e-4, "--osc-tol", min=0.0, help="Oscillation tolerance (hysteresis)."),
) -> None:
    """Phase analysis of each run: T_1, T_eps, the fast and slow growth rates, oscillation of
    the irrelevant-feature attention after T_1, loss monotonicity and the convergence verdict.
    Several runs give one table, a column per run headed by the config keys that differ.
    Writes analysis.json into each run directory."""
    with user_errors():
        runs = []
        for d in run_dirs:
            check_run_dir(d)
            run = load_run(d)  # refuses a run still `running`, with mismatched or corrupt files (named)
            if run.metrics.empty:
                raise UserInputError(f"{d}: not a run directory (needs {SUMMARY_FILE} and {METRICS_FILE})")
            runs.append(run)
        unwritten = 0
        results = [analyze_run_object(run, osc_tol=osc_tol) for run in runs]
        if len(runs) == 1:
            out.print(phase_table(results[0], f"analysis {esc(run_dirs[0])}"))
        else:
            out.print(phases_side_by_side(results, runs, run_dirs))
        for d, res in zip(run_dirs, results, strict=True):
            try:
                atomic_write_json(d / ANALYSIS_FILE, res)
            except OSError as e:
                unwritten += 1
                err.print(f"[bold red]error:[/] {esc(f'{d}: cannot write {ANALYSIS_FILE} ({e.strerror or e})')}",
                          highlight=False, soft_wrap=True)
    if unwritten:
        raise typer.Exit(1)
