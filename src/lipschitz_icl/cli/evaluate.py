"""``lipschitz-icl evaluate``: a trained run against in-context baselines on the same prompts."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..api import load_run
from ..engines import device_option
from ..errors import UserInputError
from ..evaluate import LINEAR, MODEL, evaluate_run, write_evaluation
from ..plots.evaluate import evaluation_figure
from .common import check_out_path, check_run_dir, err, esc, out, progress_bar, user_errors
from .grid import Grid, print_grid
from .progress import LineProgress


def _parse_contexts(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserInputError(f"--contexts {text!r}: expected comma-separated integers, e.g. 1,2,4,8") from None
    if not values or min(values) < 1:
        raise UserInputError(f"--contexts {text!r}: expected positive integers")
    return values


SHORT = {MODEL: "trained", LINEAR: "lin-attn",
         "Nadaraya-Watson": "NW", "least squares": "LS", "context mean": "mean", "Bayes (Sigma)": "Bayes"}


CAPTION = ("bold: lowest; trained: this run's model; lin-attn: linear attention trained by GD here; "
           "NW Nadaraya-Watson, LS least squares, Bayes: kernel regression with the class's Sigma on the "
           "feature ids; n*: more examples than the training N; standard errors in evaluation.csv")


def _class_rows(table, cls: str, methods: list[str]) -> list[tuple[str, list[tuple[str, bool]]]]:
    """Per context size of one class: its label (n, or n* beyond the training N) and, per method,
    the error to 3 digits and whether it is the lowest."""
    sub = table[table["class"] == cls]
    best = sub.loc[sub.groupby("n_context")["error"].idxmin()].set_index("n_context")["method"]
    rows = []
    for n, group in sub.groupby("n_context", sort=True):
        beyond = bool(group["beyond_N"].iloc[0]) if "beyond_N" in group else False
        cells = [(f"{group[group.method == m].iloc[0].error:.3g}", best[n] == m) for m in methods]
        rows.append((f"{n}*" if beyond else str(n), cells))
    return rows


def _title(cls: str, trained: str) -> str:
    kind = "the run's class" if cls == trained else "held out"
    return f"{cls} ({kind}): error 1/2 E[(y_hat - f(x_q))^2] on unseen functions"


def evaluation_tables(table, trained: str) -> list[Table]:
    """One rich table per class: rows n_context, columns methods, cells the error (best in bold)."""
    tables = []
    methods = list(dict.fromkeys(table["method"]))
    for cls in dict.fromkeys(table["class"]):
        t = Table(title=esc(_title(cls, trained)), caption=CAPTION)
        t.add_column("n", justify="right")
        for m in methods:
            t.add_column(esc(SHORT.get(m, m)), justify="right")
        for label, cells in _class_rows(table, cls, methods):
            t.add_row(label, *(f"[bold]{text}[/]" if lowest else text for text, lowest in cells))
        tables.append(t)
    return tables


def evaluation_grids(table, trained: str) -> list[Grid]:
    """The same tables as plain cells for a file or a pipe (markdown; the lowest in **bold**)."""
    methods = list(dict.fromkeys(table["method"]))
    return [Grid(_title(cls, trained), ["n", *(SHORT.get(m, m) for m in methods)],
                 [[label, *(f"**{text}**" if lowest else text for text, lowest in cells)]
                  for label, cells in _class_rows(table, cls, methods)])
            for cls in dict.fromkeys(table["class"])]


def evaluate_command(
    run_dir: Path = typer.Argument(..., help="A run directory written by `lipschitz-icl run`."),
    prompts: int = typer.Option(512, "--prompts", min=2, help="Prompts per class (unseen functions)."),
    contexts: str = typer.Option(None, "--contexts", help="Context sizes, e.g. 1,2,4,8 (default: powers of 2 "
                                 "to 4N, and N, 2N, 4N)."),
    classes: list[str] = typer.Option(None, "--class", help="Task class to test on (repeatable; default: the "
                                      "run's class and a held-out one)."),
    out_dir: Path = typer.Option(None, "--out", "-o", help="Where to write the outputs (default: RUN_DIR)."),
    device: str = typer.Option(None, "--device", help="auto, cpu or cuda: where the model and the baselines "
                               "run (default: the run's engine.device)."),
) -> None:
    """Error against the number of context examples on unseen functions: the trained model beside
    linear attention trained by GD here (lin-attn), 1-NN, 3-NN, Nadaraya-Watson, least squares, GP
    regression, the context mean and the Bayes predictor with the class's Sigma, on the very same
    prompts. Writes evaluation.parquet, evaluation.csv and evaluation.png."""
    with user_errors():
        check_out_path(out_dir, "--out")
        if device is not None:
            device_option(device, "--device")
        check_run_dir(run_dir)
        run = load_run(run_dir)  # refuses unfinished, mixed or corrupt runs, naming the file
        ctx = _parse_contexts(contexts)
        # stderr not a terminal (a log): a line every 10 s with the time left; stdout keeps only the tables
        lines = LineProgress(err, "evaluated (class, n) cells", every=10.0) if not err.is_terminal else None
        with progress_bar() as bar:
            task = bar.add_task("evaluating", total=None, info="")

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)
                if lines is not None:
                    lines(done, total)

            table = evaluate_run(run, prompts=prompts, contexts=ctx, classes=list(classes or []) or None,
                                 progress=progress, device=device)
        target = out_dir or run_dir
        try:
            paths = write_evaluation(table, target)
            paths.append(evaluation_figure(table, Path(target) / "evaluation.png", title=run.config.model.kind))
        except OSError as e:
            raise UserInputError(f"cannot write the evaluation into {target}: {e.strerror or e}") from None
    if out.is_terminal:
        for t in evaluation_tables(table, run.config.task.kind):
            out.print(t)
    else:  # a file or a pipe: markdown tables, every digit, ready to paste
        for grid in evaluation_grids(table, run.config.task.kind):
            print_grid(grid, markdown=True)
        out.print(CAPTION, markup=False, highlight=False, soft_wrap=True)
    for warning in table.attrs.get("warnings", []):
        err.print(f"[yellow]warning:[/] {esc(warning)}")
    err.print("wrote " + ", ".join(esc(p) for p in paths), highlight=False, soft_wrap=True)
