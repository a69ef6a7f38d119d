"""``lipschitz-icl run``: train once and write a run directory."""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.table import Table

from ..api import run as run_api
from ..config import default_config, load_config
from .common import (
    StopEta,
    cell,
    check_out_path,
    err,
    esc,
    fail,
    format_eta,
    out,
    progress_bar,
    sigterm_as_interrupt,
    split_config_and_overrides,
    user_errors,
)
from .config_doc import annotated_yaml

SUMMARY_ROWS = [
    ("status", "status"), ("steps", "steps"), ("wall time (s)", "wall_s"), ("final loss", "final_loss"),
    ("test error (unseen f)", "final_test_error"), ("min_k Attn_k", "min_attn"), ("T_1", "T_1"),
    ("T_eps", "T_eps"), ("Delta", "Delta"), ("delta", "delta"), ("L", "L"), ("L*", "L_star"),
    ("regime", "regime"),
]


def summary_table(summary: dict, title: str) -> Table:
    why = summary.get("theory_undefined")  # continuous inputs: why Delta, delta, L*, the regime are empty
    table = Table(title=title, show_header=False, caption=esc(why) if why else None)
    for label, key in SUMMARY_ROWS:
        table.add_row(label, esc(cell(summary.get(key), 6)))
    if summary.get("error"):
        table.add_row("error", esc(summary["error"]))
    return table


def run_command(
    config: str = typer.Argument(None, help="YAML config file (omit for the defaults)."),
    overrides: list[str] = typer.Argument(None, help="Overrides as key.sub=value, e.g. task.L=1 train.lr=0.5"),
    out_dir: Path = typer.Option(None, "--out", "-o", help="Run directory (default: runs/<name>)."),
    force: bool = typer.Option(False, "--force", help="Write into --out even if it holds files."),
    print_config: bool = typer.Option(False, "--print-config", help="Print the resolved config and exit: YAML "
                                      "with each key's meaning and allowed values as comments (it loads back)."),
    tracker: str = typer.Option(None, "--tracker", help="Also write the metrics as they are recorded, for a live "
                                "view: tensorboard (event files in the run directory; `tensorboard --logdir runs`)."),
) -> None:
    """Train the one-layer softmax-attention model once and record its attention dynamics.

    Writes config.yaml (resolved), metrics.parquet (tidy: step, metric, k, n, value), params.pt (the trained
    parameters) and summary.json into the run directory. Exit code 0 for converged/trivial/budget/diverged runs,
    130 when interrupted (Ctrl-C or SIGTERM), 1 when the run failed or could not be written,
    2 for bad input (one line on stderr naming the field or file, no run directory).
    """
    with user_errors():
        check_out_path(out_dir, "--out")
        config, overrides = split_config_and_overrides(config, overrides)
        cfg = load_config(config, overrides) if (config or overrides) else default_config()
        if print_config:
            out.print(annotated_yaml(cfg), end="", highlight=False, markup=False, soft_wrap=True)
            return
        with progress_bar() as bar, sigterm_as_interrupt():
            task = bar.add_task("training", total=cfg.train.steps, info="")
            # the time left to the expected stop (loss <= eps), not to the step budget
            eta = StopEta(cfg.train.eps, cfg.train.steps, relative=cfg.train.eps_mode == "relative")

            def progress(step: int, loss: float, attn_min: float) -> None:
                left = format_eta(eta.update(step, loss))
                attn = f"  min Attn_k {attn_min:.3f}" if not math.isnan(attn_min) else ""  # none: continuous inputs
                bar.update(task, completed=step, info=f"loss {loss:.3e}{attn}  {left}")

            try:
                result = run_api(cfg, out=out_dir, force=force, progress=progress, tracker=tracker)
            except OSError as e:
                fail(f"cannot write the run: {e}", 1)
            except KeyboardInterrupt:
                fail("interrupted (the run directory, if any, holds what was written)", 130)
    out.print(summary_table(result.summary, f"run {esc(result.dir)}"))
    status = result.summary["status"]
    if status == "failed":
        err.print(f"[red]run failed:[/] {esc(result.summary.get('error'))}", soft_wrap=True)
        raise typer.Exit(1)
    if status == "interrupted":
        raise typer.Exit(130)
