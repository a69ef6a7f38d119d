"""``lipschitz-icl bench``: run the benchmark suite, print its tables, write bench.json."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..errors import UserInputError
from .common import check_out_path, err, esc, out, user_errors


def _fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return "-" if v is None else ("yes" if v else "no")
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


def section_tables(name: str, section: dict) -> list[Table]:
    tables = []
    rows = section.get("rows") or []
    if rows:
        cols = list(dict.fromkeys(k for r in rows for k in r))
        t = Table(title=f"{section.get('title', name)}  [{section.get('wall_s', '?')} s]", title_justify="left")
        for c in cols:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*(_fmt(r.get(c)) for c in cols))
        tables.append(t)
    if section.get("exponents"):
        t = Table(title="fitted exponents: time (and peak memory) ~ x^exponent", title_justify="left")
        for c in ("engine", "scan", "time exponent", "memory exponent"):
            t.add_column(c)
        for e in section["exponents"]:
            t.add_row(*(_fmt(e.get(c)) for c in ("engine", "scan", "time exponent", "memory exponent")))
        tables.append(t)
    return tables


def targets_table(targets: list[dict]) -> Table:
    t = Table(title="targets", title_justify="left")
    for c in ("target", "measured", "goal", "verdict"):
        t.add_column(c, overflow="fold")
    for tg in targets:
        style = {True: "green", False: "red"}.get(tg["met"], "yellow")
        t.add_row(tg["name"], _fmt(tg["measured"]), f"{tg['op']} {tg['threshold']:g}{tg['unit']}",
                  f"[{style}]{tg['verdict']}[/]" + (f" ({tg['why']})" if tg.get("why") else ""))
    return t


def bench_command(
    quick: bool = typer.Option(False, "--quick", help="Smaller sizes: about a minute on 2 cores."),
    out_path: Path = typer.Option(Path("bench.json"), "--out", "-o", help="Where to write the JSON report."),
    only: list[str] = typer.Option(None, "--only", help="Run only this section (repeatable)."),
    threads: int = typer.Option(1, "--threads", help="torch threads for the run (0: torch's default)."),
    extra: list[str] = typer.Option(None, "--extra", help="Add a section FILE:FUNCTION, FUNCTION(quick) -> dict."),
    tiny: bool = typer.Option(False, "--tiny", hidden=True, help="Tiny sizes (for the test suite)."),
) -> None:
    """Benchmark the toolkit: kernel and sampled engines against a plain-PyTorch loop, scaling in
    K, N, d and B, peak memory, batched runs, and the targets of the performance issue.

    Prints one table per section and a table of targets (met, or missed by how much), and
    writes everything, with the machine and versions, to bench.json.
    """
    import torch

    from ..bench import Size, run_benchmarks, sections
    from ..bench.extras import register_spec
    from ..store import atomic_write_json

    with user_errors():
        check_out_path(out_path, "--out")
        if threads < 0:
            raise UserInputError(f"--threads must be >= 0 (got {threads})")
        for spec in extra or []:
            register_spec(spec)
        known = sections()
        unknown = sorted(set(only or []) - set(known))
        if unknown:
            raise UserInputError(f"--only {unknown[0]!r}: no such section (known: {', '.join(known)})")
        if threads:
            torch.set_num_threads(threads)
        size = Size("tiny" if tiny else "quick" if quick else "full")
        report = run_benchmarks(size, only=list(only or []) or None, progress=lambda t: err.print(f"[dim]{t} ...[/]"))
        try:
            atomic_write_json(out_path, report)
        except OSError as e:
            raise UserInputError(f"cannot write {out_path}: {e.strerror or e}") from None
    m = report["machine"]
    out.print(f"machine: {m['cpu']}, {m['cores']} cores, torch threads {m['torch_threads']}, "
              f"load {m['load_avg_1min_at_start']}; torch {report['versions']['torch']}; size {report['size']}")
    for name, section in report["sections"].items():
        for table in section_tables(name, section):
            out.print(table)
        if section.get("error"):
            out.print(f"[red]{esc(name)} failed:[/] {esc(section['error'])}")
        for note in section.get("notes", []):
            out.print(f"  [dim]{note}[/]")
    out.print(targets_table(report["targets"]))
    out.print(f"total {report['wall_s']} s; report written to {esc(out_path)}")
