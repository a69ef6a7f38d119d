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
        # a copy: values may be views of tensors that the optimiser later changes in place
        v = np.atleast_1d(np.array(values, dtype=np.float64, copy=True))
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
        heads: torch.Tensor | None = None,
    ) -> None:
        """attn (K, K) Attn_{k->n}; scores (K, K) v_n^T Q v_k or None (no merged Q);
        heads (n_layers, n_heads, K, K) or None (single-head models)."""
        self._add(step, "loss", loss)
        for name, value in (extra or {}).items():
            self._add(step, name, value)
        self._attention(step, attn, "")
        if heads is not None:
            h = heads.detach()
            for layer in range(h.shape[0]):
                for head in range(h.shape[1]):
                    self._attention(step, h[layer, head], f"@L{layer}H{head}", mean=False)
        if scores is not None:
            s = scores.detach().double().cpu().numpy()
            self._add(step, "A", np.diagonal(s), k=self._diag)
            if self.K > 1:
                self._add(step, "B", s[self._off], k=self._off_k, n=self._off_n)

    def _attention(self, step: int, attn: torch.Tensor, suffix: str, mean: bool = True) -> None:
        a = attn.detach().double().cpu().numpy()
        diag = np.diagonal(a)
        some = np.isfinite(diag).any()
        self._add(step, "attn_min" + suffix, np.nanmin(diag) if some else np.nan)
        if mean:
            self._add(step, "attn_mean" + suffix, np.nanmean(diag) if some else np.nan)
        self._add(step, "attn_self" + suffix, diag, k=self._diag)
        if self.K > 1:
            self._add(step, "attn_cross" + suffix, a[self._off], k=self._off_k, n=self._off_n)

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
