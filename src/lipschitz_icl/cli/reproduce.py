"""``lipschitz-icl reproduce``: every claim of CLAIMS.md tested, with figures and a report."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..errors import UserInputError
from .common import check_out_path, esc, progress_bar, user_errors
from .common import out as console

VERDICT_STYLE = {"supported": "green", "not supported": "red", "inconclusive": "yellow"}


def _default_out(suite: str, quick: bool) -> Path:
    base = Path("reproduce-out") / (suite + ("-quick" if quick else ""))
    path, i = base, 1
    while path.exists():
        path, i = base.with_name(f"{base.name}-{i}"), i + 1
    return path


def reproduce_command(
    suite: str = typer.Argument("all", help="paper | blog | linear | extensions | all"),
    quick: bool = typer.Option(False, "--quick", help="Reduced sizes: a few minutes on a laptop CPU."),
    out_dir: Path = typer.Option(None, "--out", "-o", help="Output directory (default: reproduce-out/<suite>)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Base seed of every experiment."),
    workers: int = typer.Option(1, "--workers", min=1, help="Parallel workers for multi-run experiments."),
    force: bool = typer.Option(False, "--force", help="Write into --out even if it holds files."),
    update_readme: Path = typer.Option(None, "--update-readme", help="Replace the claims table in this README."),
) -> None:
    """Test the claims of the paper, its predecessor and the write-up (CLAIMS.md).

    Writes figures (PNG and PDF), claims.json, report.md and a self-contained report.html.
    Each claim gets a criterion fixed before the run, a measured statistic and a verdict:
    supported, not supported or inconclusive.
    """
    from ..report import update_readme as write_readme
    from ..reproduce import available_suites, reproduce

    with user_errors():
        check_out_path(out_dir, "--out")
        allowed = [*available_suites(), "all"]
        if suite not in allowed:
            raise UserInputError(f"suite {suite!r} is not known (allowed: {', '.join(allowed)})")
        if out_dir is not None and out_dir.exists() and any(out_dir.iterdir()) and not force:
            raise UserInputError(f"--out {out_dir}: already holds files (choose another folder or pass --force)")
        if update_readme is not None and not update_readme.is_file():
            raise UserInputError(f"--update-readme {update_readme}: no such file")
        out = out_dir or _default_out(suite, quick)
        cmd = f"lipschitz-icl reproduce {suite}" + (" --quick" if quick else "")
        with progress_bar(transient=False) as bar:
            tasks: dict[str, int] = {}

            def progress(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(label, total=total, info="")
                bar.update(tasks[label], completed=done, total=total)

            claims, meta = reproduce(suite, out, quick=quick, seed=seed, workers=workers, progress=progress,
                                     command=cmd)
    table = Table(title=f"claims ({meta['size']} size, {meta['wall_s']:.0f} s) — {esc(out)}/report.html")
    for col in ("claim", "verdict", "experiment", "s"):
        table.add_column(col)
    from ..report import sorted_claims

    for c in sorted_claims(claims):
        style = VERDICT_STYLE.get(c.verdict, "")
        table.add_row(esc(c.id), f"[{style}]{esc(c.verdict)}[/]", esc(c.experiment), f"{c.wall_s:.0f}")
    console.print(table)
    if update_readme is not None:
        ok = write_readme(update_readme, claims, str(out), meta)
        console.print(f"README table {'updated' if ok else 'NOT updated (markers missing)'}: {esc(update_readme)}")
