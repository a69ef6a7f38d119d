"""The recorder: turns engine state at a log step into tidy rows (step, metric, k, n, value).

Metrics (k, n are feature indices; empty where a metric is not per feature):
    loss, test_error, test_error_other, grad_norm, attn_min, attn_mean   scalars
    attn_self  (k)      Attn_k        attention a query of feature k puts on its own feature
    attn_cross (k, n)   Attn_{k->n}   attention it puts on feature n != k
    A          (k)      A_k = v_k^T Q v_k
    B          (k, n)   B_{k,n} = v_n^T Q v_k
"""

from __future__ import annotations

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
    def __init__(self, K: int) -> None:
        self.K = K
        eye = np.eye(K, dtype=bool)
        kk, nn = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
        self._diag = np.arange(K)
        self._off_k, self._off_n = kk[~eye], nn[~eye]
        self._off = ~eye
        self._chunks: list[dict[str, np.ndarray]] = []

    def _add(self, step: int, metric: str, values, k=None, n=None) -> None:
        v = np.atleast_1d(np.asarray(values, dtype=np.float64))
        m = len(v)
        self._chunks.append(
            {
                "step": np.full(m, step, dtype=np.int64),
                "metric": np.full(m, metric, dtype=object),
                "k": np.full(m, -1, dtype=np.int64) if k is None else np.asarray(k, dtype=np.int64),
                "n": np.full(m, -1, dtype=np.int64) if n is None else np.asarray(n, dtype=np.int64),
                "value": v,
            }
        )

    def record(
        self,
        step: int,
        loss: float,
        attn: torch.Tensor,
        scores: torch.Tensor,
        extra: dict[str, float] | None = None,
    ) -> None:
        a = attn.detach().double().cpu().numpy()
        s = scores.detach().double().cpu().numpy()
        diag = np.diagonal(a)
        self._add(step, "loss", loss)
        for name, value in (extra or {}).items():
            self._add(step, name, value)
        self._add(step, "attn_min", np.nanmin(diag) if np.isfinite(diag).any() else np.nan)
        self._add(step, "attn_mean", np.nanmean(diag) if np.isfinite(diag).any() else np.nan)
        self._add(step, "attn_self", diag, k=self._diag)
        self._add(step, "A", np.diagonal(s), k=self._diag)
        if self.K > 1:
            self._add(step, "attn_cross", a[self._off], k=self._off_k, n=self._off_n)
            self._add(step, "B", s[self._off], k=self._off_k, n=self._off_n)

    def table(self) -> pa.Table:
        if not self._chunks:
            return SCHEMA.empty_table()
        cols = {key: np.concatenate([c[key] for c in self._chunks]) for key in SCHEMA.names}
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


def metrics_frame(table: pa.Table) -> pd.DataFrame:
    """The tidy table as pandas, with nullable integer k and n."""
    df = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    df["step"] = df["step"].astype("int64")
    return df


def metrics_table(frame: pd.DataFrame) -> pa.Table:
    """The inverse of ``metrics_frame``: a tidy DataFrame back to an arrow table with ``SCHEMA``."""
    table = pa.Table.from_pandas(frame[SCHEMA.names], schema=SCHEMA, preserve_index=False)
    return table.replace_schema_metadata(None)
