"""The recorder: turns engine state at a log step into tidy rows (step, metric, k, n, value).

Metrics (k, n are feature indices; empty where a metric is not per feature):
    loss, test_error, test_error_other, grad_norm, attn_min, attn_mean   scalars
    attn_self  (k)      Attn_k        attention a query of feature k puts on its own feature
    attn_cross (k, n)   Attn_{k->n}   attention it puts on feature n != k
    A          (k)      A_k = v_k^T Q v_k       (models with a merged Q: reduced; factored's Q_eff)
    B          (k, n)   B_{k,n} = v_n^T Q v_k
Multi-layer/multi-head models (transformer) add, for layer l and head h (0-based):
    attn_self@LlHh (k), attn_cross@LlHh (k, n), attn_min@LlHh     the same per layer and head
and their attn_self / attn_cross / attn_min are the head average of the last layer.
With ``eval.geometry``, models with a merged key-query matrix add the scalars of
``geometry.GEOMETRY_METRICS`` (Q_norm_2, Q_norm_F, Q_eig_max, Q_eig_min, Q_eig_ratio, window,
n_eff, attn_distance): passed as extras (sampled engine) or derived from the recorded scores when
the table is made (``derive``: the kernel engine). With continuous inputs (K = 0) there is no
feature to aggregate the attention by: no attn_* rows, and no A, B.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("metric", pa.string()),
        ("k", pa.int64()),
        ("n", pa.int64()),
        ("value", pa.float64()),
    ]
)


class Recorder:
    """Collects the engine state at log steps; the tidy table is assembled once, vectorised, by
    ``table()`` (recording costs a copy of two K x K arrays, whatever the number of steps)."""

    def __init__(self, K: int, derive: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None) -> None:
        self.K = K
        self.derive = derive  # scores (T, K, K) -> extra scalar metrics per record, name -> (T,)
        eye = np.eye(K, dtype=bool)
        kk, nn = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
        self._off_k, self._off_n = kk[~eye], nn[~eye]
        self._off = ~eye
        # one tuple per record, appended in a single call, so that Ctrl-C can never leave a
        # half-made record: (step, [loss, *extra values], extra names, attn, scores or None
        # (no merged Q), heads (n_layers, n_heads, K, K) or None)
        self._records: list[tuple[int, list[float], tuple[str, ...], np.ndarray, Any, Any]] = []

    def record(
        self,
        step: int,
        loss: float,
        attn: torch.Tensor | np.ndarray,
        scores: torch.Tensor | np.ndarray,
        extra: dict[str, float] | None = None,
        heads: torch.Tensor | None = None,
    ) -> None:
        """attn (K, K) Attn_{k->n}; scores (K, K) v_n^T Q v_k or None (no merged Q);
        heads (n_layers, n_heads, K, K) or None (single-head models). Arrays are copied."""
        extra = extra or {}
        record = (int(step), [float(loss), *(float(v) for v in extra.values())], tuple(extra), _as_array(attn),
                  None if scores is None else _as_array(scores), None if heads is None else _as_array(heads))
        self._records.append(record)

    def _key(self, t: int) -> tuple:
        """Records with the same key stack into one segment."""
        _, _, names, _, scores, heads = self._records[t]
        return names, scores is None, None if heads is None else heads.shape

    def _segment(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Rows of the records lo..hi-1, which share their extra names: per record, in order,
        loss, the extras, attn_min, attn_mean, attn_self (k), attn_cross (k, n), then A (k) and
        B (k, n) when the model has a merged Q, then the same attention rows per layer and head."""
        T = hi - lo
        recs = self._records[lo:hi]
        steps, scalars, names_all, attn, scores, heads = zip(*recs, strict=True)
        names = names_all[0]
        blocks: list[np.ndarray] = [np.asarray(scalars, dtype=np.float64)]
        metrics, ks, ns = ["loss", *names], [-1] * (1 + len(names)), [-1] * (1 + len(names))

        def add(block: np.ndarray, metric: str, k: list[int] | np.ndarray, n: list[int] | np.ndarray) -> None:
            blocks.append(block)
            metrics.extend([metric] * block.shape[1])
            ks.extend(k)
            ns.extend(n)

        if self.K:
            self._attention_rows(np.stack(attn), "", add, mean=True)
        if scores[0] is not None:
            self._pair_rows(np.stack(scores), "A", "B", add)
            for name, column in (self.derive(np.stack(scores)) if self.derive else {}).items():
                add(np.asarray(column, dtype=np.float64)[:, None], name, [-1], [-1])
        if heads[0] is not None:
            h = np.stack(heads)  # (T, layers, heads, K, K)
            for layer in range(h.shape[1]):
                for head in range(h.shape[2]):
                    self._attention_rows(h[:, layer, head], f"@L{layer}H{head}", add, mean=False)
        values = np.concatenate(blocks, axis=1)  # (T, rows per record)
        width = values.shape[1]
        return {
            "step": np.repeat(np.asarray(steps, dtype=np.int64), width),
            "metric": np.tile(np.asarray(metrics, dtype=object), T),
            "k": np.tile(np.asarray(ks, dtype=np.int64), T),
            "n": np.tile(np.asarray(ns, dtype=np.int64), T),
            "value": values.reshape(-1),
        }

    def _attention_rows(self, a: np.ndarray, suffix: str, add, mean: bool) -> None:
        """attn_min, (attn_mean), attn_self (k) and attn_cross (k, n) of attention stacks a (T, K, K)."""
        diag = np.ascontiguousarray(np.diagonal(a, axis1=1, axis2=2))  # (T, K): Attn_k
        finite = np.isfinite(diag).any(1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows are masked below
            amin = np.where(finite, np.nanmin(np.where(finite[:, None], diag, 0.0), axis=1), np.nan)
            # row-wise over the contiguous axis: numpy sums each row as it sums a 1-d array
            amean = np.where(finite, np.nanmean(np.where(finite[:, None], diag, 0.0), axis=1), np.nan)
        add(amin[:, None], "attn_min" + suffix, [-1], [-1])
        if mean:
            add(amean[:, None], "attn_mean" + suffix, [-1], [-1])
        self._pair_rows(a, "attn_self" + suffix, "attn_cross" + suffix, add)

    def _pair_rows(self, m: np.ndarray, diag_name: str, off_name: str, add) -> None:
        """The diagonal of K x K stacks m (T, K, K) as diag_name (k), the rest as off_name (k, n)."""
        K = self.K
        add(np.ascontiguousarray(np.diagonal(m, axis1=1, axis2=2)), diag_name, list(range(K)), [-1] * K)
        if K > 1:
            add(m[:, self._off], off_name, list(self._off_k), list(self._off_n))

    def table(self) -> pa.Table:
        if not self._records:
            return SCHEMA.empty_table()
        n = len(self._records)
        bounds = [0] + [t for t in range(1, n) if self._key(t) != self._key(t - 1)]
        bounds.append(n)
        segs = [self._segment(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        cols = {key: np.concatenate([c[key] for c in segs]) for key in SCHEMA.names}
        arrays = [
            pa.array(cols["step"]),
            pa.array(cols["metric"], type=pa.string()),
            pa.array(cols["k"], mask=cols["k"] < 0),
            pa.array(cols["n"], mask=cols["n"] < 0),
            pa.array(cols["value"]),
        ]
        return pa.Table.from_arrays(arrays, schema=SCHEMA)

    def frame(self) -> pd.DataFrame:
        return metrics_frame(self.table())


def _as_array(x: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy().copy()
    return np.array(x, dtype=np.float64)  # a copy


def metrics_frame(table: pa.Table) -> pd.DataFrame:
    """The tidy table as pandas, with nullable integer k and n."""
    df = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    df["step"] = df["step"].astype("int64")
    return df


def metrics_table(frame: pd.DataFrame) -> pa.Table:
    """The inverse of ``metrics_frame``: a tidy DataFrame back to an arrow table with ``SCHEMA``."""
    table = pa.Table.from_pandas(frame[SCHEMA.names], schema=SCHEMA, preserve_index=False)
    return table.replace_schema_metadata(None)
