"""``lipschitz-icl theory``: what the theory says about a config, before training."""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.table import Table

from ..config import default_config, load_config
from ..store import atomic_write_json
from ..theory import theory_report
from .common import check_out_path, esc, fail, out, split_config_and_overrides, user_errors


def _g(v: float | None) -> str:
    if v is None:
        return "— (undefined)"
    return f"{v:.6g}" if math.isfinite(v) else "inf"


def theory_table(rep: dict, title: str) -> Table:
    why = rep.get("theory_undefined")  # continuous inputs, or delta = 0: the line that says what is undefined
    table = Table(title=title, show_header=False, caption=esc(why) if why else None)
    se = "" if rep["delta_se"] is None else f" ± {_g(rep['delta_se'])}" if rep["delta_se"] > 0 else " (exact)"
    lam = _g(rep["lambda_max"]) + ("" if rep["lambda_converged"] else " (not converged)")
    rows = [
        ("Δ = min ‖v_k − v_n‖", _g(rep["Delta"])),
        ("δ (non-degeneracy)", _g(rep["delta"]) + se),
        ("L", _g(rep["L"])),
        (f"L* = {rep['c']:g}/(Δδ)", _g(rep["L_star"])),
        (f"regime (band ±{rep['band']:g})", esc(rep["regime"] or _g(None))),
        ("T_f scale, K log(K/ε)/(ηδ²L²Δ²)", _g(rep["T_f"]) + ("" if rep["T_f"] is None else " (constant unknown)")),
        ("λ_max, loss Hessian at Q⁽⁰⁾", lam),
        ("η_max = 2/λ_max", _g(rep["eta_max"])),
        ("η (train.lr)", _g(rep["lr"])),
    ]
    for label, value in rows:
        table.add_row(label, value)
    return table


def theory_command(
    config: str = typer.Argument(None, help="YAML config file (omit for the defaults)."),
    overrides: list[str] = typer.Argument(None, help="Overrides as key.sub=value, e.g. task.L=1"),
    json_out: Path = typer.Option(None, "--json", help="Also write the report to this JSON file."),
    iters: int = typer.Option(100, "--iters", min=1, help="Lanczos steps (Hessian-vector products) for lambda_max."),
) -> None:
    """Print the theory's quantities for a config: Delta, delta ± se, L, the threshold
    L* = c/(Delta delta), the regime, the flat-regime time scale T_f (a scale: its constant is
    unknown) and the largest stable step eta_max = 2/lambda_max of the loss Hessian at Q^(0)."""
    with user_errors():
        check_out_path(json_out, "--json")
        config, overrides = split_config_and_overrides(config, overrides)
        cfg = load_config(config, overrides) if (config or overrides) else default_config()
        rep = theory_report(cfg, iters=iters)
        if json_out is not None:
            if json_out.is_dir() or not json_out.parent.is_dir():
                fail(f"--json {json_out}: not a writable file path")
            try:
                atomic_write_json(json_out, rep)
            except OSError as e:
                fail(f"--json {json_out}: cannot write ({e.strerror})")
    out.print(theory_table(rep, f"theory: {esc(config or 'defaults')}"))
