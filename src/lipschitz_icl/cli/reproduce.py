"""``lipschitz-icl reproduce``: every claim of docs/CLAIMS.md tested, with figures and a report."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..errors import UserInputError
from ..experiments import claim_ids
from ..experiments.checkpoint import ExperimentsInterrupted, signal_watch
from ..experiments.claims import NO_VERDICT
from ..experiments.controls import can_fail_cell
from ..papers import load_plugins
from ..report import Comparison, sorted_claims
from ..report import update_readme as write_readme
from ..report.evidence import counts_line
from ..reproduce import (
    available_papers,
    available_suites,
    check_jobs,
    check_seed,
    clear_output,
    finished_runs,
    listing,
    listing_markdown,
    make_out_dir,
    options_of,
    recorded_options,
    reproduce,
    resolve_fused,
    resolve_targets,
)
from ..store import claim_new_dir
from ..tracking import check_tracker
from .common import check_out_path, err, esc, fail, forced_progress, sigterm_as_interrupt, user_errors
from .common import out as console
from .reproduce_progress import ReproduceProgress, reproduce_bar

VERDICT_STYLE = {"supported": "green", "not supported": "red", "inconclusive": "yellow", NO_VERDICT: "cyan"}
FORCED_STYLE = "magenta"  # a forced outcome is not evidence: never the green of a supported claim


def _default_out(suite: str, quick: bool, resume: bool = False) -> Path:
    """reproduce-out/<suite>[-quick], or the first free -1, -2, ..., created atomically so that two
    simultaneous jobs never share it (with ``resume``: the base, as it is)."""
    base = Path("reproduce-out") / (suite.replace(" ", "-") + ("-quick" if quick else ""))
    return base if resume else claim_new_dir(base)


def _choose_out(out_dir: Path | None, suite: str, quick: bool, seed: int, fused: bool, *, resume: bool,
                force: bool, plugins: list[str] | None = None) -> tuple[Path, bool]:
    """The output directory and whether to resume in it: a non-empty one made with the same options
    resumes (unless --force, which starts over); --resume requires such a directory."""
    out = out_dir or _default_out(suite, quick, resume)
    wanted = options_of(suite, quick, seed, fused, plugins)
    occupied = out.is_dir() and any(out.iterdir())
    found = recorded_options(out) if occupied else None
    same = occupied and found == wanted
    if out.exists() and not out.is_dir():
        raise UserInputError(f"--out {out}: exists and is not a directory")
    made_by = f"it holds `reproduce {_options_text(found)}`" if found else "it holds no reproduce output"
    if resume and not same:
        raise UserInputError(f"--resume: {out} cannot be resumed as `reproduce {_options_text(wanted)}` ({made_by})")
    if occupied and not same and not force:
        raise UserInputError(f"--out {out}: already holds files ({made_by}; the same command again resumes it); "
                             "choose another folder or pass --force to start over")
    return out, bool(same and (resume or not force))


def _options_text(options: dict) -> str:
    """A manifest's options as the command line that makes them (suite, size, seed, kernel step)."""
    flags = [str(options.get("suite", "?"))]
    flags += ["--quick"] if options.get("size") == "quick" else []
    flags += [f"--seed {options['seed']}"] if options.get("seed") else []
    flags += ["--no-fused"] if str(options.get("kernel_step", "")).startswith("unfused") else []
    flags += [f"--plugins {','.join(options['plugins'])}"] if options.get("plugins") else []
    return " ".join(flags)


def _check_files(update_readme: Path | None, compare_with: Path | None) -> Comparison | None:
    """--update-readme must name a file; --compare-with is loaded (a bad one is one line, exit 2)."""
    if update_readme is not None and not update_readme.is_file():
        raise UserInputError(f"--update-readme {update_readme}: no such file")
    return Comparison.load(compare_with) if compare_with is not None else None


TARGETS_ARGUMENT = typer.Argument(
    None, show_default=False, metavar="[SUITE|PAPER|CLAIM]...",
    help=f"Suites ({' | '.join([*available_suites(), 'all'])}; default all), papers "
         f"({', '.join(available_papers())}) and/or claim ids ({', '.join(claim_ids())}): only the experiments "
         "those claims need run.")
JOBS_OPTION = typer.Option(None, "--jobs", "-j", min=1, help="Experiments run at a time, each in a process of its own, "
                           "and processes an experiment's unbatched runs (sampled engine, neural models) share "
                           "(default: one per core; 1: one after the other, in this process). The numbers are the "
                           "same either way.")
FUSED_OPTION = typer.Option(None, "--fused/--no-fused", show_default=False,
                            help="Train the kernel-engine runs with the compiled step (engine.fused; within 1e-12 "
                                 "relative; reproduce all --quick ~1.4x faster), and Ahn et al.'s gd_layers with "
                                 "its compiled loss and gradient (within 1e-12; 2.6x faster). Default: fused where "
                                 "numba is installed.")


def reproduce_command(
    targets: list[str] = TARGETS_ARGUMENT,
    paper: list[str] = typer.Option(None, "--paper", help="A paper's claims (repeatable): the same as naming the "
                                    "paper id as a target; `--list` shows the papers."),
    list_only: bool = typer.Option(False, "--list", help="List the papers, their claims and the suites, then exit."),
    markdown: bool = typer.Option(False, "--markdown", help="With --list: print it as markdown (docs/CLAIMS.md)."),
    plugins: str = typer.Option("", "--plugins", help="Comma-separated modules to import first: a user's paper "
                                "packages (docs/EXTENDING.md, 'A paper'), e.g. --plugins mypaper."),
    quick: bool = typer.Option(False, "--quick", help="Reduced sizes: a few minutes on a laptop CPU."),
    out_dir: Path = typer.Option(None, "--out", "-o",
                                 help="Output directory (default: reproduce-out/<suite>[-quick])."),
    seed: int = typer.Option(0, "--seed", help="Base seed of every experiment (0 to 2^31 - 1)."),
    workers: int = typer.Option(1, "--workers", min=1, help="With --jobs 1: processes for an experiment's "
                                "groups of runs (a sweep's --workers)."),
    jobs: int = JOBS_OPTION,
    force: bool = typer.Option(False, "--force", help="Write into --out even if it holds files (start over)."),
    resume: bool = typer.Option(False, "--resume", help="Finish an interrupted reproduce in --out (same options)."),
    update_readme: Path = typer.Option(None, "--update-readme", help="Replace the claims table in this Markdown file."),
    compare_with: Path = typer.Option(None, "--compare-with", help="A previous output's claims.json (e.g. the "
                                      "quick run): its verdicts go beside these, with why they differ."),
    fused: bool = FUSED_OPTION,
    tracker: str = typer.Option(None, "--tracker", help="Also write each run's metrics as tensorboard event files "
                                "into its directory under OUT/runs/, as the run is written."),
) -> None:
    """Test the claims of the paper, its predecessor, Collins et al. and the write-up (docs/CLAIMS.md).

    `reproduce P4 B3 --quick` runs only the experiments that test P4 and B3 (with every claim
    they test); suite names and claim ids can be mixed.

    Writes figures (PNG, PDF and SVG), claims.json, claims.csv, claims.tex, report.md and a
    self-contained report.html (`lipschitz-icl report OUT` writes the report again).
    Each claim gets a criterion fixed before the run, a measured statistic and a verdict:
    supported, not supported or inconclusive. Ctrl-C or SIGTERM stops it with exit 130 and a
    report whose unfinished claims say `interrupted`; the same command again (or --resume)
    reuses the finished experiments and runs the rest.
    """
    with user_errors(), sigterm_as_interrupt():
        plugin_list = [m.strip() for m in plugins.split(",") if m.strip()]
        load_plugins(plugin_list)
        if list_only:
            typer.echo(listing_markdown(), nl=False) if markdown else _print_listing()
            return
        _check_options(out_dir, seed, tracker)
        names, experiments = resolve_targets([*(targets or []), *(paper or [])] or ["all"])
        suite = " ".join(names)
        compare = _check_files(update_readme, compare_with)
        fused_flag, fused = fused, resolve_fused(fused, "--fused", "--no-fused")
        out, resuming = _choose_out(out_dir, suite, quick, seed, fused, resume=resume, force=force,
                                    plugins=plugin_list)
        make_out_dir(out)  # a read-only file system or folder is bad input, before --force clears anything
        _announce(out, resuming, force)
        cmd = _command_line(suite, quick, out, seed, workers, fused_flag, plugin_list, jobs)
        claims, meta = _run_with_progress(names, experiments, out, quick=quick, seed=seed, workers=workers, jobs=jobs,
                                          command=cmd, resume=resuming, compare=compare, fused=fused,
                                          plugins=plugin_list, tracker=tracker)
    _finish(claims, meta, out, update_readme)


def _check_options(out_dir: Path | None, seed: int, tracker: str | None) -> None:
    """--out, --seed and --tracker, before anything is written or cleared (UserInputError: one line, exit 2)."""
    check_out_path(out_dir, "--out")
    check_seed(seed, "--seed")
    if tracker is not None:
        check_tracker(tracker)


def _finish(claims, meta: dict, out: Path, readme: Path | None) -> None:
    """The claims table, the README update, and exit 1 naming the experiments that failed."""
    _print_claims(claims, meta, out)
    _update_readme(readme, claims, out, meta)
    if meta.get("failed_experiments"):
        failed = meta["failed_experiments"]
        fail(f"{len(failed)} experiment(s) failed ({', '.join(failed)}): their claims are inconclusive, with the "
             f"error in {out}/report.md; the other claims are in the report", 1)


def _announce(out: Path, resuming: bool, force: bool) -> None:
    """Say that a resume reuses what is there; with --force, clear what an earlier job wrote."""
    if resuming:
        err.print(esc(f"resuming in {out}: finished experiments and runs are reused"), highlight=False)
    elif force:
        clear_output(out)  # starting over: nothing of the earlier job may be reused later


def _command_line(suite: str, quick: bool, out: Path, seed: int, workers: int, fused: bool | None,
                  plugins: list[str], jobs: int | None = None) -> str:
    """The command as given (every option that was set, and the output directory), for the report."""
    flags = [suite] + (["--quick"] if quick else []) + ["--out", str(out)]
    flags += ([f"--seed {seed}"] if seed else []) + ([f"--workers {workers}"] if workers > 1 else [])
    flags += [f"--jobs {jobs}"] if jobs is not None else []
    flags += [] if fused is None else ["--fused" if fused else "--no-fused"]
    flags += [f"--plugins {','.join(plugins)}"] if plugins else []
    return " ".join(["lipschitz-icl reproduce", *flags])


def _run_with_progress(names: list[str], experiments: list, out: Path, **kw):
    """``reproduce`` under the whole-job view (``reproduce_progress``: an overall bar, a few group bars, and
    a line per experiment into a log); an interrupt is one line and exit 130, saying what was kept."""
    with reproduce_bar(disable=not err.is_terminal and not forced_progress()) as bar, signal_watch() as fired:
        view = ReproduceProgress(experiments, kw["quick"], bar, jobs=check_jobs(kw["jobs"]))  # a disabled bar (no
        try:  # terminal) draws nothing
            return reproduce(names, out, progress=view, log=view.log, **kw)
        except ExperimentsInterrupted as stop:
            n = sum(c.statistic.get("status") == "interrupted" for c in stop.claims)
            fail(f"interrupted ({stop.signal_name}): {n} claims marked interrupted in {out}/report.md; "
                 f"{finished_runs(out)} finished runs kept; run the same command again to finish", 130)
        except KeyboardInterrupt:  # after the last experiment, while the report was written: it is whole
            sig = fired[0] if fired else "SIGINT"
            fail(f"interrupted ({sig}) after every experiment had finished: the report in {out} is complete; "
                 "nothing to resume", 130)


def _print_listing() -> None:
    """The papers with their claims, then the suites with their experiments (``reproduce --list``)."""
    data = listing()
    for paper in data["papers"]:
        table = Table(title=f"{esc(paper['id'])}: {esc(paper['citation'])}", title_justify="left")
        for col in ("claim", "statement", "experiment", "suites"):
            table.add_column(col, overflow="fold")
        for row in paper["claims"]:
            table.add_row(esc(row["id"]), esc(row["statement"]), esc(row["experiment"]), esc(", ".join(row["suites"])))
        console.print(table)
    suites_table = Table(title="suites (lipschitz-icl reproduce SUITE)", title_justify="left")
    suites_table.add_column("suite")
    suites_table.add_column("experiments (claims)", overflow="fold")
    for name, exps in data["suites"].items():
        suites_table.add_row(esc(name), esc("; ".join(f"{e['experiment']} ({', '.join(e['claims'])})" for e in exps)))
    console.print(suites_table)


def _update_readme(readme: Path | None, claims, out: Path, meta: dict) -> None:
    if readme is not None:
        ok = write_readme(readme, claims, str(out), meta)
        console.print(f"README table {'updated' if ok else 'NOT updated (markers missing)'}: {esc(readme)}")


def _print_claims(claims, meta: dict, out: Path) -> None:
    table = Table(title=f"claims ({meta['size']} size, {meta['wall_s']:.0f} s) — {esc(out)}/report.html")
    for col in ("claim", "verdict", "can fail", "experiment", "s"):
        table.add_column(col)
    for c in sorted_claims(claims):
        style = VERDICT_STYLE.get(c.verdict, "default")  # never empty: "[]...[/]" is a markup error
        if c.forced:
            verdict = f"[{FORCED_STYLE}]forced[/] (outcome {esc(c.verdict)})"
        elif not c.comparison and c.can_fail is not True:  # not evidence: never in a verdict's colour
            verdict = f"[{FORCED_STYLE}]{esc(c.verdict)}[/] (not evidence)"
        else:
            verdict = f"[{style}]{esc(c.verdict)}[/]"
        table.add_row(esc(c.id), verdict, esc(can_fail_cell(c)), esc(c.experiment), f"{c.wall_s:.0f}")
    console.print(table)
    console.print(f"counts: {esc(counts_line(claims))}")
