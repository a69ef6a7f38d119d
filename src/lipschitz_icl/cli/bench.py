"""``lipschitz-icl bench``: run the benchmark suite, print its tables, write the JSON report if asked.

On a terminal the tables are rich tables; when stdout is a file or a pipe they are markdown
tables at full width (no column squeezed into 80 characters), ready to paste into a document.
"""

from __future__ import annotations

from pathlib import Path

import torch
import typer

from ..bench import Size, registered_sections, run_benchmarks
from ..bench.extras import register_spec
from ..engines import device_option
from ..errors import UserInputError
from ..store import atomic_write_json
from .common import cell, check_out_path, err, esc, out, user_errors
from .grid import Grid, print_grid

STYLE = {True: "green", False: "red", None: "yellow"}  # a target's colour by whether it was met
EXPONENT_COLUMNS = ("engine", "scan", "time exponent", "memory exponent")


def section_grids(name: str, section: dict) -> list[Grid]:
    """A section's rows (one column per key) and its fitted exponents, if any."""
    grids = []
    rows = section.get("rows") or []
    if rows:
        cols = list(dict.fromkeys(k for r in rows for k in r))
        grids.append(Grid(f"{section.get('title', name)}  [{section.get('wall_s', '?')} s]", cols,
                          [[cell(r.get(c)) for c in cols] for r in rows]))
    if section.get("exponents"):
        grids.append(Grid("fitted exponents: time (and peak memory) ~ x^exponent", list(EXPONENT_COLUMNS),
                          [[cell(e.get(c)) for c in EXPONENT_COLUMNS] for e in section["exponents"]]))
    return grids


def targets_grid(targets: list[dict]) -> Grid:
    grid = Grid("targets", ["target", "measured", "goal", "verdict"])
    for tg in targets:
        verdict = tg["verdict"] + (f" ({tg['why']})" if tg.get("why") else "")
        grid.rows.append([tg["name"], cell(tg["measured"]), f"{tg['op']} {tg['threshold']:g}{tg['unit']}", verdict])
        grid.styles.append(STYLE[tg["met"]])
    return grid


def print_report(report: dict, json_path: Path | None, markdown: bool) -> None:
    m = report["machine"]
    plain = {"markup": False, "highlight": False, "emoji": False, "soft_wrap": True}
    gpu = f", GPU {m['cuda']}" if m.get("cuda") else ", no GPU"
    out.print(f"machine: {m['cpu']}, {m['cores']} cores{gpu}, torch threads {m['torch_threads']}, "
              f"load {m['load_avg_1min_at_start']}; torch {report['versions']['torch']}; size {report['size']}; "
              f"device {report.get('device', 'cpu')}", **plain)
    for name, section in report["sections"].items():
        for grid in section_grids(name, section):
            print_grid(grid, markdown)
        if section.get("error"):
            out.print(f"{name} failed: {section['error']}", **plain)
        for note in section.get("notes", []):
            if note:
                out.print(f"  {note}", **plain)
    print_grid(targets_grid(report["targets"]), markdown)
    written = f"report written to {esc(json_path)}" if json_path else "no JSON report written (--json PATH writes one)"
    out.print(f"total {report['wall_s']} s; {written}", **plain)


def bench_command(
    quick: bool = typer.Option(False, "--quick", help="Smaller sizes: about 6 minutes on 2 cores, half of them in "
                               "the reproduce section (`reproduce all --quick` of this build and of an "
                               "earlier one; leave it out with --only)."),
    json_path: Path = typer.Option(None, "--json", "--out", "-o",
                                   help="Write the JSON report (machine, versions, every row and target) here."),
    only: list[str] = typer.Option(None, "--only", help="Run only this section (repeatable): step_time, "
                                   "step_floor, scaling, memory, batched, sweep_batched, sweep_scale, evaluate, "
                                   "reproduce, sweep."),
    threads: int = typer.Option(1, "--threads", help="torch threads for the run (0: torch's default)."),
    extra: list[str] = typer.Option(None, "--extra", help="Add a section FILE:FUNCTION, FUNCTION(quick) -> dict."),
    markdown: bool = typer.Option(None, "--markdown/--rich", help="Tables as markdown or as rich tables "
                                  "(default: rich on a terminal, markdown when stdout is a file or a pipe)."),
    device: str = typer.Option("cpu", "--device", help="Where the sections that train run: cpu, cuda, or auto "
                               "(cuda when a GPU is present); every table has a device column."),
    tiny: bool = typer.Option(False, "--tiny", hidden=True, help="Tiny sizes (for the test suite)."),
) -> None:
    """Benchmark the toolkit: kernel and sampled engines against a plain-PyTorch loop, scaling in
    K, N, d and B, peak memory, batched runs and sweeps, the fused step against its floor, `evaluate`,
    and `reproduce all --quick` against an earlier build, each with its targets.

    Prints one table per section and a table of targets (met, or missed by how much); with
    --json PATH, writes everything, with the machine and versions, to PATH.
    """
    with user_errors():
        check_out_path(json_path, "--json")
        if threads < 0:
            raise UserInputError(f"--threads must be >= 0 (got {threads})")
        on = device_option(device, "--device").type
        for spec in extra or []:
            register_spec(spec)
        known = registered_sections()
        unknown = sorted(set(only or []) - set(known))
        if unknown:
            raise UserInputError(f"--only {unknown[0]!r}: no such section (known: {', '.join(known)})")
        if json_path is not None and json_path.is_dir():
            raise UserInputError(f"--json {json_path}: is a directory (expected a file name, e.g. "
                                 f"{json_path / 'bench.json'})")
        if threads:
            torch.set_num_threads(threads)
        size = Size("tiny" if tiny else "quick" if quick else "full", on)
        report = run_benchmarks(size, only=list(only or []) or None,
                                progress=lambda t: err.print(f"[dim]{esc(t)} ...[/]"))
        if json_path is not None:
            try:
                json_path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_json(json_path, report)
            except OSError as e:
                raise UserInputError(f"cannot write {json_path}: {e.strerror or e}") from None
    print_report(report, json_path, not out.is_terminal if markdown is None else markdown)
