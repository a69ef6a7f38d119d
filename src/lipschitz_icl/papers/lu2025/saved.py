"""The authors' saved finite-d simulations (``data/authors_gtask.csv``: g_task = e_ICL - e_IDG at alpha = 10,
tau = 10, rho = 0.01, lambda = 1e-6, 20 draws, d = 10, 32, 64; provenance in the file's header) and their
reproduction here in the same setting: the paper's d x (d+1) Gamma (the y^2 column), the authors' counts (k =
floor(kappa d), each task repeated round(tau d^2 / k) times), 20 independent draws. The gamma form (no y^2
column) is run alongside: the column is what separates the saved values from the theory at small k."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .model import LuSetting, simulate
from .theory import e_icl, e_idg

DATA = Path(__file__).parent / "data" / "authors_gtask.csv"
SOURCE = ("github.com/mletey/incontext-cleanup @ c6902221cf58acc58520d58518041a05acc5ac10, "
          "quick_and_easy_figure/saved_data/d{10,32,64}_gamma.csv")
ALPHA, TAU, RHO, RIDGE, DRAWS = 10.0, 10.0, 0.01, 1e-6, 20


def authors_table() -> pd.DataFrame:
    """The saved rows: d, alpha, kappa, tau, rho, lam, numavg, gtask_mean, gtask_std."""
    return pd.read_csv(DATA, comment="#")


def theory_gtask(kappa: float, alpha: float = ALPHA, tau: float = TAU, rho: float = RHO) -> float:
    """The ridgeless theory's g_task = e_ICL - e_IDG (what the authors' plot.py draws)."""
    return e_icl(alpha, kappa, tau, rho) - e_idg(alpha, kappa, tau, rho)


def reproduce(d: int, kappas: list[float], draws: int = DRAWS, seed0: int = 0) -> pd.DataFrame:
    """Per (model, kappa): our g_task mean and the authors' spread sqrt(std_ICL^2 + std_IDG^2) over ``draws``."""
    rows = []
    for model in ("augmented", "gamma"):
        for kappa in kappas:
            s = LuSetting(d, ALPHA, kappa, TAU, RHO, RIDGE)
            runs = [simulate(s, seed0 + i, augmented=model == "augmented", authors=True, stream="lu:saved")
                    for i in range(draws)]
            icl, idg = np.array([r["icl"] for r in runs]), np.array([r["idg"] for r in runs])
            rows.append({"d": d, "model": model, "kappa": kappa, "draws": draws,
                         "gtask_mean": float((icl - idg).mean()),
                         "gtask_std": float(np.sqrt(icl.std() ** 2 + idg.std() ** 2)),
                         "gtask_sem": float((icl - idg).std(ddof=1) / np.sqrt(draws)),
                         "icl_mean": float(icl.mean()), "idg_mean": float(idg.mean()), "theory": theory_gtask(kappa)})
    return pd.DataFrame(rows)


def agreement(ours: pd.DataFrame) -> dict:
    """Per (d, model): z = (ours - saved) / sqrt(ours_std^2/draws + saved_std^2/numavg) at each kappa (the stds are
    the authors' combined spread, an approximation of the g_task spread); max |z|, the share within |z| < 2, and the
    mean relative gaps to the saved values and to the theory."""
    saved = authors_table()
    out = {}
    for (d, model), g in ours.groupby(["d", "model"]):
        m = g.merge(saved[saved["d"] == d], on="kappa", suffixes=("", "_saved"))
        if m.empty:
            continue
        z = (m["gtask_mean"] - m["gtask_mean_saved"]) / np.sqrt(m["gtask_std"] ** 2 / m["draws"]
                                                               + m["gtask_std_saved"] ** 2 / m["numavg"])
        out[f"d{d}_{model}"] = {"kappas": m["kappa"].tolist(), "z": [round(float(v), 3) for v in z],
                                "max_abs_z": float(np.abs(z).max()), "share_within_2": float((np.abs(z) < 2).mean()),
                                "mean_rel_gap_to_saved": float((m["gtask_mean"] / m["gtask_mean_saved"] - 1).mean()),
                                "mean_rel_gap_to_theory": float((m["gtask_mean"] / m["theory"] - 1).mean())}
    return out
