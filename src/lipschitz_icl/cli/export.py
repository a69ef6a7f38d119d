"""``lipschitz-icl export``: a trained transformer run as a TransformerLens model (``interop.py``)."""

from __future__ import annotations

from pathlib import Path

import typer

from ..api import load_run
from ..config_io import path_kind
from ..errors import UserInputError
from ..interop import TARGETS, TOLERANCE, check_export, to_transformer_lens
from .common import check_out_path, check_run_dir, err, esc, user_errors


def export_command(
    run_dir: Path = typer.Argument(..., help="A run directory of a model.kind=transformer run."),
    to: str = typer.Option(..., "--to", help="What to export to: transformer-lens."),
    out_file: Path = typer.Option(..., "--out", "-o", help="The file to write (torch.save; load it with "
                                  "lipschitz_icl.interop.load_export, or as docs/INTEROP.md shows)."),
    dtype: str = typer.Option(None, "--dtype", help="float32 or float64 (default: the run's engine.dtype)."),
    prompts: int = typer.Option(64, "--prompts", min=1, max=100_000, help="Prompts of the run's setting on which "
                                "the export is checked against the run's own model."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out file."),
) -> None:
    """Export a trained transformer run to TransformerLens, checked against the run's own model. The file holds a
    TransformerBridge's config and weights (every hook, run_with_cache, activation patching: docs/INTEROP.md);
    before it is written, the largest differences of attention patterns and predictions on prompts of the run's
    setting are measured and printed."""
    with user_errors():
        if to not in TARGETS:
            raise UserInputError(f"--to {to}: unknown export target (allowed: {', '.join(TARGETS)})")
        check_out_path(out_file, "--out")
        if path_kind(out_file) == "dir":
            raise UserInputError(f"--out {out_file}: is a folder (allowed: a file name)")
        if path_kind(out_file) != "missing" and not force:
            raise UserInputError(f"--out {out_file}: already exists (--force replaces it)")
        check_run_dir(run_dir)
        run = load_run(run_dir)  # refuses unfinished, mixed or corrupt runs, naming the file
        lens = to_transformer_lens(run, dtype)  # a run of another model kind: one line, before any import
        diff = check_export(run, lens, prompts)
        dtype_of_lens = lens.bridge.state_dict()["embed.weight"].dtype
        if max(diff["pattern"], diff["prediction"]) > TOLERANCE[dtype_of_lens]:
            raise RuntimeError(f"the export differs from the run's model by {diff['pattern']:.3g} (attention) and "
                               f"{diff['prediction']:.3g} (y_hat); nothing written")
        lens.save(out_file)
    err.print(f"checked on {diff['prompts']} prompts ({diff['dtype']}): attention patterns within "
              f"{diff['pattern']:.2g}, predictions within {diff['prediction']:.2g} of the run's model",
              highlight=False, soft_wrap=True)
    err.print(f"wrote {esc(out_file)}", highlight=False, soft_wrap=True)
