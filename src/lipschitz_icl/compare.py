"""Comparing runs: what differs between their configs, their summaries side by side, and one analysis
table for several runs. The Python side of ``lipschitz-icl diff`` and of ``analyze`` with several runs.

    >>> import lipschitz_icl as li
    >>> d = li.diff("runs/L1", "runs/L2")   # RunDiff: d.config (the keys that differ), d.summary
    >>> print(d)                            # both as text tables
    >>> differing_keys([run_a, run_b, run_c])   # ['task.L', 'train.lr']: what plots.compare labels by
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .analysis import analyze_run_object
from .api import Run, load_run
from .config import Config
from .errors import UserInputError

RunLike = Run | str | Path
# the summary fields put side by side (summary.json keys), in this order
SUMMARY_KEYS = ["status", "steps", "wall_s", "final_loss", "final_test_error", "min_attn", "T_1", "T_eps",
                "Delta", "delta", "L", "L_star", "regime"]
IGNORED_KEYS = {"name"}  # a run's name is not part of what it computes (config_hash leaves it out too)


def as_run(run: RunLike) -> Run:
    return run if isinstance(run, Run) else load_run(run)


def flat_config(cfg: Config) -> dict[str, Any]:
    """The resolved config as ``section.key`` -> value (lists and mappings of a key kept whole)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value and prefix.count(".") < 1:
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            out[prefix] = value

    walk("", cfg.model_dump(mode="json"))
    return out


def differing_keys(runs: Iterable[RunLike]) -> list[str]:
    """The config keys (``task.L``, ``train.lr``, ...) whose values are not the same in every run, in the
    config's order; ``name`` is left out."""
    flats = [flat_config(as_run(r).config) for r in runs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    return [k for k in keys if k not in IGNORED_KEYS and len({repr(f.get(k)) for f in flats}) > 1]


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _text(value: Any, digits: int | None) -> str:
    """A value as text: floats to ``digits`` significant digits (None: the shortest repr that reads back
    as the same float), ``-`` for none, yes/no, lists joined by commas."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(float(value)) if digits is None else f"{value:.{digits}g}"
    if isinstance(value, list | tuple):
        return ", ".join(_text(v, digits) for v in value)
    return str(value)


def row_texts(values: list[Any], digits: int = 6) -> list[str]:
    """One row of a side-by-side table as text: numbers to ``digits`` significant digits, unless values that
    differ would then read alike (L = 2.0000001 and 2.0000002 both ``2``): then every float of the row with
    the fewest digits that tell them apart (at most 17, or the shortest repr: 2 and 2.0 differ too)."""
    distinct = len({repr(v) for v in values})
    for n in range(digits, 18):
        texts = [_text(v, n) for v in values]
        if len(set(texts)) == distinct:
            return texts
    return [_text(v, None) for v in values]


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its value columns (all but the first) as text, row by row (``row_texts``)."""
    rows = [[row[0], *row_texts(list(row[1:]))] for row in frame.itertuples(index=False)]
    return pd.DataFrame(rows, columns=frame.columns)


def run_labels(runs: list[Run], keys: list[str] | None = None) -> list[str]:
    """One label per run from the config keys that differ (``task.L=1, train.lr=0.5``); a run that
    differs in nothing is named by its directory (or ``run i``)."""
    keys = differing_keys(runs) if keys is None else keys
    labels = []
    for i, r in enumerate(runs):
        flat = flat_config(r.config)
        text = ", ".join(f"{k}={_short(flat.get(k))}" for k in keys)
        labels.append(text or (Path(r.dir).name if r.dir is not None else f"run {i}"))
    return labels


def _name(run: Run, fallback: str) -> str:
    return Path(run.dir).name if run.dir is not None else fallback


@dataclass
class RunDiff:
    """Two runs compared: ``config`` (one row per config key that differs: key, a, b) and ``summary``
    (one row per summary field: quantity, a, b), columns named by the runs' directories."""

    config: pd.DataFrame
    summary: pd.DataFrame
    names: tuple[str, str]

    def __str__(self) -> str:
        head = f"config keys that differ ({len(self.config)}):"
        cfg = _as_text(self.config).to_string(index=False) if len(self.config) else "  (none: the same config)"
        return f"{head}\n{cfg}\n\nsummary:\n{_as_text(self.summary).to_string(index=False)}"

    def _repr_html_(self) -> str:  # Jupyter shows both tables
        return (f"<b>config keys that differ ({len(self.config)})</b>{_as_text(self.config).to_html(index=False)}"
                f"<b>summary</b>{_as_text(self.summary).to_html(index=False)}")


def _summary_values(run: Run, name: str) -> list[Any]:
    """The SUMMARY_KEYS fields of a run's summary; one that is not a number, text or null (a list nested
    600 deep, say) is bad input naming the file."""
    values = [run.summary.get(k) for k in SUMMARY_KEYS]
    for key, value in zip(SUMMARY_KEYS, values, strict=True):
        if value is not None and not isinstance(value, int | float | str):
            where = Path(run.dir) / "summary.json" if run.dir is not None else f"run {name}: summary"
            raise UserInputError(f"{where}: corrupt, {key} is a {type(value).__name__} (a number, text or null "
                                 "expected)")
    return values


def diff(a: RunLike, b: RunLike) -> RunDiff:
    """The config keys in which runs ``a`` and ``b`` differ, and their summaries side by side (Runs or
    run directories). The command line's ``lipschitz-icl diff RUN_A RUN_B`` prints it."""
    ra, rb = as_run(a), as_run(b)
    na, nb = _name(ra, "a"), _name(rb, "b")
    if na == nb:
        na, nb = f"{na} (a)", f"{nb} (b)"
    fa, fb = flat_config(ra.config), flat_config(rb.config)
    keys = differing_keys([ra, rb])
    config = pd.DataFrame({"key": keys, na: [fa.get(k) for k in keys], nb: [fb.get(k) for k in keys]})
    summary = pd.DataFrame({"quantity": SUMMARY_KEYS, na: _summary_values(ra, na), nb: _summary_values(rb, nb)})
    return RunDiff(config, summary, (na, nb))


def analysis_table(runs: Iterable[RunLike], osc_tol: float = 1e-4) -> pd.DataFrame:
    """One row per run: its label (the config keys that differ, ``run_labels``), its directory and the
    phase analysis of ``analysis.analyze`` (scalar fields; per-feature ones left out)."""
    items = [as_run(r) for r in runs]
    if any(r.metrics.empty for r in items):
        raise UserInputError("every run needs its metrics to be analysed (metrics.parquet)")
    rows = []
    for label, r in zip(run_labels(items), items, strict=True):
        res = analyze_run_object(r, osc_tol=osc_tol)
        rows.append({"run": label, "dir": str(r.dir) if r.dir is not None else None,
                     **{k: v for k, v in res.items() if not isinstance(v, dict | list)}})
    return pd.DataFrame(rows)
