"""``lipschitz-icl sweep``: run a sweep spec (``sweep SPEC.yaml`` or ``sweep run SPEC.yaml``),
show a sweep directory's progress (``sweep status DIR``) and its index (``sweep table DIR``)."""

from __future__ import annotations

import io
import math
import time
from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import click
import typer
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from ..errors import UserInputError
from ..recorder import pandas
from ..store import atomic_write_bytes, atomic_write_text
from ..sweep import ClusterPlan, Sweep, is_running, load_index, load_sweep, point_statuses, run_sweep
from ..sweep.dask_backend import SchedulerLost
from ..sweep.execute import warm_workers
from ..sweep.jobqueue import DEFAULT_WALLTIME, MEMORY_PER_WORKER_GB, checked_plan
from ..sweep.kernel_step import with_dir_step
from .common import err, fail, one_line, out, progress_bar, sigterm_as_interrupt, user_errors

if TYPE_CHECKING:
    import pandas as pd


class _RunByDefault(TyperGroup):
    """``sweep SPEC.yaml ...`` means ``sweep run SPEC.yaml ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


sweep_app = typer.Typer(
    cls=_RunByDefault,
    no_args_is_help=True,
    add_completion=False,
    help="Run many configs from a sweep spec (grid, zip, seeds) on this machine's cores or a Dask cluster; resumable; "
    "indexed in SQLite.\n\n"
    "`lipschitz-icl sweep SPEC.yaml` is short for `lipschitz-icl sweep run SPEC.yaml`.",
)


class ClusterKind(StrEnum):
    local = "local"
    slurm = "slurm"
    pbs = "pbs"


CLUSTER_HELP = ("Where the runs go: local (this machine's --workers, or the Dask cluster at --scheduler), or "
                "slurm / pbs: --jobs batch jobs submitted through dask-jobqueue (pip install "
                "'lipschitz-icl\\[cluster]'), this process running the scheduler.")
OPTION_HELP = ("KEY=VALUE for the slurm / pbs cluster (repeat it): cores, processes, memory, walltime, queue, account, "
               "job_extra_directives (once per directive), job_script_prologue, interface, ... (docs/SWEEPS.md). "
               f"Defaults: cores=1, processes=cores (single-threaded workers), memory={MEMORY_PER_WORKER_GB}GB per "
               f"worker process, walltime={DEFAULT_WALLTIME}.")


class CurvesKind(StrEnum):
    summary = "summary"
    full = "full"


class TableFormat(StrEnum):
    markdown = "markdown"
    csv = "csv"
    parquet = "parquet"


# the columns `sweep table` shows in markdown (csv and parquet get every column)
SHOWN = ["name", "status", "steps", "final_loss", "min_attn", "T_1", "T_eps", "L_star", "regime", "wall_s"]


@sweep_app.command("run")
def run_command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML): base config plus grid / zip / seeds axes."),
    workers: int = typer.Option(None, "--workers", "-w", help="Processes training batches side by side, each forked "
                                "from this one (default: one per core, except a sweep that is one batch, which "
                                "runs in this process; 1: in this process)."),
    scheduler: str = typer.Option(None, "--scheduler", help="Address of a running Dask scheduler (tcp://host:8786)."),
    out_dir: Path = typer.Option(None, "--out", "-o", help="Sweep directory (default: sweeps/<spec name>)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Rerun runs whose row says failed."),
    force: bool = typer.Option(False, "--force", help="Rerun every run, finished or not (and write into an --out "
                               "that holds other files)."),
    batch: int = typer.Option(None, "--batch", help="Compatible runs trained together per worker task (default: "
                              "as many as keep a batch's metrics under 64 MB, at most 512; 1: one by one)."),
    run_dirs: bool = typer.Option(False, "--run-dirs", help="Write a directory per run under runs/ (config.yaml, "
                                  "metrics.parquet, summary.json, params.pt) instead of one results file per batch."),
    cluster: ClusterKind = typer.Option(ClusterKind.local, "--cluster", help=CLUSTER_HELP),
    cluster_options: list[str] = typer.Option(None, "--cluster-option", metavar="KEY=VALUE",
                                              help=OPTION_HELP),
    jobs: int = typer.Option(None, "--jobs", help="Batch jobs to submit with --cluster slurm / pbs (default 1; "
                             "fewer where they would give more workers than the sweep has runs)."),
    curves: CurvesKind = typer.Option(None, "--curves", help="What is stored of each run's curves: summary (every "
                                      "scalar and Attn_k at every record, A, B and attn_cross at the first and last; "
                                      "under 10 KB a quickstart run) or full (every recorded row). Default: the "
                                      "spec's curves:, else summary."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --cluster slurm / pbs: print the job script and how "
                                 "many jobs would be submitted, then exit; nothing is submitted, trained or written."),
    fused: bool = typer.Option(None, "--fused/--no-fused", help="The kernel step of the points that allow it (kernel "
                               "engine, gd or sgd in S space, CPU): compiled (engine.fused: true; numba) or torch. "
                               "Default: the spec's fused:, else the step the sweep directory was made with, else "
                               "compiled where numba can be imported (torch with --scheduler or --cluster, whose "
                               "workers may lack numba). It enters each point's config hash."),
) -> None:
    """Run every point of SPEC that has no finished row in the sweep directory's index.

    Writes DIR/sweep.yaml (the spec, base inlined), DIR/results/ (one results file per batch; --run-dirs:
    DIR/runs/<name>/, one run directory each) and DIR/index.sqlite (one row per run). Run it again to resume
    after a crash, Ctrl-C or kill. Read the results back with `sweep table`, or in Python with
    lipschitz_icl.sweep.load_metrics / load_runs.

    Exit code 0 when every run finished, 1 if some failed (recorded, see `sweep status`), 130 if interrupted,
    2 for bad input.
    """
    with user_errors():
        if scheduler is not None and workers is not None:
            raise UserInputError("--workers and --scheduler: give one or the other")
        plan = checked_plan(cluster.value, cluster_options, jobs, workers, scheduler)
        if dry_run and plan is None:
            raise UserInputError("--dry-run: only with --cluster slurm or pbs (it prints their job script)")
        sweep = load_sweep(spec, on_count=warm_workers(workers, scheduler, plan), fused=fused,
                           local=scheduler is None and plan is None, option="--fused")
        target = out_dir if out_dir is not None else Path("sweeps") / sweep.name
        sweep = with_dir_step(sweep, target)
        if plan is not None and dry_run:
            _dry_run(plan, sweep, target)
            return
        start = time.perf_counter()
        todo = _run_with_bar(sweep.name, target, plan, scheduler, lambda progress: run_sweep(
            sweep, target, workers, scheduler, retry_failed, force, progress, batch=batch, run_dirs=run_dirs,
            cluster=plan or "local", curves=None if curves is None else curves.value, rows=False))
        statuses = point_statuses(target, sweep.points)  # from the index: no rows built, pandas not imported
    _report(sweep.name, statuses, todo, time.perf_counter() - start, target)


def _run_with_bar(name: str, target: Path, plan: ClusterPlan | None, scheduler: str | None,
                  run: Callable[[Callable[[int, int, int], None]], object]) -> int:
    """``run(progress)`` under a progress bar: the number of runs it had to do. Ctrl-C (exit 130),
    a write error and a lost scheduler or cluster (exit 1) are one line each, saying what is kept."""
    with progress_bar(transient=False, eta=True, auto_refresh=False) as bar, sigterm_as_interrupt():
        task = bar.add_task(f"sweep {escape(name)}", total=None, info="")
        todo = 0

        def progress(done: int, failed: int, total: int) -> None:
            nonlocal todo
            todo = total
            info = f"{done} done · {failed} failed · {total - done - failed} left"
            if plan is not None and done + failed == 0:  # the jobs may wait in the queue
                info += f" · the runs start as the {plan.kind} jobs do"
            bar.update(task, total=total, completed=done + failed, info=info)
            bar.refresh()  # no thread redraws it (the sweep forks): the sweep calls this every REFRESH_S at least

        try:
            run(progress)
        except KeyboardInterrupt:
            err.print(f"[yellow]interrupted:[/] finished runs are kept in {escape(str(target))}; "
                      "run the same command to resume", soft_wrap=True, highlight=False)
            raise typer.Exit(130) from None
        except OSError as e:
            fail(f"cannot write the sweep: {e}", 1)
        except SchedulerLost as e:
            where = f"--scheduler {scheduler}" if plan is None else f"--cluster {plan.kind}"
            fail(f"{where}: {e}; the runs recorded are kept in {target}: run the same command to resume", 1)
    return todo


def _jobs(plan: ClusterPlan, runs: int) -> str:
    """E.g. ``3 slurm jobs of 4 Dask workers each``: what ``plan`` submits for ``runs`` runs."""
    jobs = plan.jobs_for(runs)
    each = f"{plan.processes} Dask workers each" if plan.processes > 1 else "1 Dask worker each"
    return f"{jobs} {plan.kind} job{'s' if jobs > 1 else ''} of {each}"


def _dry_run(plan: ClusterPlan, sweep: Sweep, target: Path) -> None:
    """``--dry-run``: the job script and the number of jobs, on stdout; nothing submitted, trained or written."""
    out.print(plan.job_script(), end="", markup=False, highlight=False, soft_wrap=True)
    out.print(f"# dry run: would submit {_jobs(plan, len(sweep.points))} with {plan.submit_command} for the "
              f"{len(sweep.points)} runs of sweep {sweep.name} (fewer if some are finished in {target}); the "
              "scheduler address above is this dry run's. Nothing was submitted.", markup=False, highlight=False,
              soft_wrap=True)


def _report(name: str, statuses: list[str], todo: int, elapsed: float, target: Path) -> None:
    """The sweep's last lines: its runs by status (``statuses``: each run's), how many ran; exit 1 when some are
    recorded failed."""
    counts = Counter(statuses)
    shown = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    skipped = len(statuses) - todo
    out.print(
        f"sweep {escape(name)}: {len(statuses)} runs ({escape(shown)}); ran {todo}, skipped {skipped} already done; "
        f"{elapsed:.1f} s. Results: {escape(str(target))}",
        highlight=False,
        soft_wrap=True,
    )
    failed_now = counts["failed"]
    if failed_now:
        err.print(f"[red]{failed_now} runs failed[/]: `lipschitz-icl sweep status {escape(str(target))}` lists "
                  "their errors; --retry-failed reruns them", soft_wrap=True, highlight=False)
        raise typer.Exit(1)


@sweep_app.command("status")
def status_command(
    sweep_dir: Path = typer.Argument(..., help="A sweep directory (holds index.sqlite)."),
    show_all: bool = typer.Option(False, "--all", help="Count the runs of earlier specs written into it too."),
) -> None:
    """Count a sweep's runs by status (those of the spec run last; --all: every run) and list the failed ones."""
    with user_errors():
        rows = load_index(sweep_dir, current_only=not show_all)
    # the folder on a line of its own: as a table title it was wrapped to the table's width, mid-word
    out.print(f"sweep {escape(str(sweep_dir))}" + (" (running)" if is_running(sweep_dir) else ""), highlight=False,
              soft_wrap=True)
    table = Table()
    table.add_column("status")
    table.add_column("runs", justify="right")
    for status, n in rows["status"].value_counts().sort_index().items():
        table.add_row(escape(str(status)), str(n))
    table.add_row("[bold]total[/]", f"[bold]{len(rows)}[/]")
    out.print(table)
    wall = rows["elapsed_s"].sum(skipna=True)
    out.print(f"compute time of the recorded runs: {wall:.1f} s", highlight=False)
    failed = rows[rows["status"] == "failed"]
    for _, row in failed.head(20).iterrows():
        text = one_line(f"{row['name']}: {row['error']}")
        out.print(f"[red]failed[/] {escape(text)}", highlight=False, soft_wrap=True)
    if len(failed) > 20:
        out.print(f"... and {len(failed) - 20} more failed runs", highlight=False)


def _cell(v: object) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pandas().NA:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    lines = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *lines]) + "\n"


def _shown_columns(frame: pd.DataFrame) -> list[str]:
    axes = list(frame.attrs.get("axes", []))
    cols = ["name", *axes, *[c for c in SHOWN[1:] if c not in axes]]
    if frame["error"].notna().any():
        cols.append("error")
    return cols


@sweep_app.command("table")
def table_command(
    sweep_dir: Path = typer.Argument(..., help="A sweep directory (holds index.sqlite)."),
    fmt: TableFormat = typer.Option(TableFormat.markdown, "--format", "-f", help="markdown (a summary), csv, parquet."),
    output: Path = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
    show_all: bool = typer.Option(False, "--all", help="Rows of earlier specs written into the folder too."),
) -> None:
    """Print or save a sweep's index: one row per run of the spec run last (--all: of every spec), its axis
    values and summary numbers.

    markdown shows the main columns; csv and parquet hold every column of the index."""
    with user_errors():
        rows = load_index(sweep_dir, current_only=not show_all)
        if fmt is TableFormat.parquet:
            if output is None:
                raise UserInputError("--format parquet needs --output FILE")
            buf = io.BytesIO()
            rows.to_parquet(buf, index=False)
            atomic_write_bytes(output, buf.getvalue())
            return
        text = rows.to_csv(index=False) if fmt is TableFormat.csv else markdown_table(rows[_shown_columns(rows)])
        if output is not None:
            atomic_write_text(output, text)
        else:
            out.print(text, end="", highlight=False, markup=False, soft_wrap=True)
