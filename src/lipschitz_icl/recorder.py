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

A recorder with a ``tracker`` (``tracking.Tracker``; None by default) sends it each record's rows as they are
recorded (``tracking.step_values``): ``record`` does, and the batched trainer, which hands its records over only
when a run ends, calls ``send`` at each record.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from .arrow_np import arrow_numbers, arrow_text, column_numbers, numbers_of
from .tracking import Tracker, step_values

if TYPE_CHECKING:
    import pandas as pd

# (steps, scalars, extra names, attn, scores or None, heads or None): see Recorder._blocks
Thin = Callable[[str], bool]  # metric name -> kept at a run's first and last recorded step only (thin_rows)
Block = tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray, Any, Any]

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
        self.tracker: Tracker | None = None  # set by the run: sent each record's rows as recorded
        self._off_k, self._off_n, self._off = _off_diagonal(K)
        # blocks of records, each appended in a single call, so that Ctrl-C can never leave a half-made
        # record: (steps (T,), [loss, *extra values] (T, C), extra names, attn (T, K, K), scores (T, K, K)
        # or None (no merged Q), heads (T, n_layers, n_heads, K, K) or None)
        self._blocks: list[Block] = []

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
        self._blocks.append((
            np.array([step], dtype=np.int64), np.array([[float(loss), *(float(v) for v in extra.values())]]),
            tuple(extra), _as_array(attn)[None], None if scores is None else _as_array(scores)[None],
            None if heads is None else _as_array(heads)[None]))
        if self.tracker is not None:
            self._send(self._blocks[-1])

    def send(self, step: int, scalars: np.ndarray, names: tuple[str, ...], attn: np.ndarray,
             scores: np.ndarray | None) -> None:
        """Send the tracker one record (scalars (C,) [loss, *extras named ``names``], attn and scores (K, K)) without
        keeping it: the batched trainer's records reach the recorder as one block when the run ends."""
        if self.tracker is not None:
            self._send((np.array([step], dtype=np.int64), np.asarray(scalars, dtype=np.float64)[None], names,
                        np.asarray(attn, dtype=np.float64)[None],
                        None if scores is None else np.asarray(scores, dtype=np.float64)[None], None))

    def _send(self, block: Block) -> None:
        """The tracker gets the rows of one record; a tracker that fails is dropped with a warning (monitoring is
        optional: the run and its files go on)."""
        try:
            for step, values in step_values(self._segment([block])[0]):
                self.tracker.add_scalars(step, values)
        except Exception as e:  # noqa: BLE001 - a full disk, a closed writer: never the run's failure
            warnings.warn(f"tracker {type(self.tracker).__name__} stopped: {type(e).__name__}: {e} (the run goes "
                          "on; its metrics are in metrics.parquet)", RuntimeWarning, stacklevel=2)
            self.tracker = None

    def record_block(self, steps: np.ndarray, scalars: np.ndarray, names: tuple[str, ...], attn: np.ndarray,
                     scores: np.ndarray | None) -> None:
        """T records at once (the batched trainer's, at the end of a run): steps (T,), scalars (T, 1 + len(names))
        [loss, *extras named ``names``], attn (T, K, K), scores (T, K, K) or None; float64 arrays, kept as given."""
        if len(steps):
            self._blocks.append((steps, scalars, names, attn, scores, None))

    @staticmethod
    def _key(block: Block) -> tuple:
        """Blocks with the same key stack into one segment."""
        _, _, names, _, scores, heads = block
        return names, scores is None, None if heads is None else heads.shape[1:]

    def _segment(self, blocks: list[Block], thin: Thin | None = None, runs: np.ndarray | None = None
                 ) -> tuple[pa.Table, np.ndarray]:
        """Rows of the records of ``blocks``, which share their extra names: per record, in order,
        loss, the extras, attn_min, attn_mean, attn_self (k), attn_cross (k, n), then A (k) and
        B (k, n) when the model has a merged Q, then the same attention rows per layer and head; and each
        record's number of rows. ``thin``: the metrics kept at a run's first and last recorded step only
        (``thin_rows``'s rule, without making the rows it drops: not even their values are computed);
        ``runs`` (T,): the run of each record."""
        steps, scalars, attn, scores, heads = (_joined([b[field] for b in blocks]) for field in (0, 1, 3, 4, 5))
        derived = self.derive(scores) if self.derive and scores is not None else {}
        arrays = (blocks[0][2], scalars, attn, scores, heads, derived)
        T = len(steps)
        if thin is None:
            return _every_row(steps, *self._columns(slice(None), *arrays))
        _, metrics, ks, ns = self._columns(np.arange(0), *arrays)  # the columns alone
        named = np.array([bool(thin(m)) for m in metrics], dtype=bool)
        if not named.any():
            return _every_row(steps, self._columns(slice(None), *arrays)[0], metrics, ks, ns)
        at_end = _at_end(steps, np.zeros(T, np.int64) if runs is None else runs)
        per_record = np.where(at_end, len(metrics), int((~named).sum()))
        col, kept = self._thinned(at_end, per_record, ~named, arrays)
        k, n = ks[col], ns[col]
        table = [arrow_numbers(np.repeat(steps, per_record)), _names_at(metrics, col), arrow_numbers(k, k < 0),
                 arrow_numbers(n, n < 0), arrow_numbers(kept)]
        return pa.Table.from_arrays(table, schema=SCHEMA), per_record

    def _thinned(self, at_end: np.ndarray, per_record: np.ndarray, always: np.ndarray, arrays: tuple
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The column and value of every row kept, record by record: every column at a record ``at_end`` (T,) (its
        run's first or last step), the ``always`` columns (W,) at the others, whose other columns are not computed
        (a summary's A, B and attn_cross: nine tenths of a record's values at K = 5)."""
        starts = np.cumsum(per_record) - per_record
        total = int(per_record.sum())
        col, kept = np.empty(total, np.int64), np.empty(total)
        for rows, columns, wanted in ((np.flatnonzero(at_end), np.arange(len(always)), None),
                                      (np.flatnonzero(~at_end), np.flatnonzero(always), always)):
            if len(rows) and len(columns):
                at = starts[rows, None] + np.arange(len(columns))
                col[at], kept[at] = columns, self._columns(rows, *arrays, wanted)[0]
        return col, kept

    def _columns(self, rows: slice | np.ndarray, names: tuple[str, ...], scalars: np.ndarray, attn: np.ndarray,
                 scores: np.ndarray | None, heads: np.ndarray | None, derived: dict[str, np.ndarray],
                 wanted: np.ndarray | None = None) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
        """The values (records ``rows``, W) in ``_segment``'s order, and each column's metric, k and n; ``wanted``
        (W,): the columns to make (None: all), the others left out of the values and never computed."""
        blocks_out: list[np.ndarray] = []
        metrics: list[str] = []
        ks: list[int] = []
        ns: list[int] = []

        def add(make: Callable[[], np.ndarray], metric: str | list[str], k: list[int], n: list[int]) -> None:
            lo = len(ks)
            metrics.extend([metric] * len(k) if isinstance(metric, str) else metric)
            ks.extend(k)
            ns.extend(n)
            mine = None if wanted is None else wanted[lo : len(ks)]
            if mine is None or mine.all():
                blocks_out.append(make())
            elif mine.any():
                blocks_out.append(make()[:, mine])

        width = 1 + len(names)
        add(lambda: scalars[rows], ["loss", *names], [-1] * width, [-1] * width)
        if self.K:
            self._attention_rows(attn, rows, "", add, mean=True)
        if scores is not None:
            self._pair_rows(scores, rows, "A", "B", add)
            for name, column in derived.items():
                add(lambda column=column: np.asarray(column, dtype=np.float64)[rows, None], name, [-1], [-1])
        if heads is not None:  # (T, layers, heads, K, K)
            for layer in range(heads.shape[1]):
                for head in range(heads.shape[2]):
                    self._attention_rows(heads[:, layer, head], rows, f"@L{layer}H{head}", add, mean=False)
        values = np.concatenate(blocks_out, axis=1) if blocks_out else np.zeros((0, 0))
        return values, metrics, np.asarray(ks, dtype=np.int64), np.asarray(ns, dtype=np.int64)

    def _attention_rows(self, a: np.ndarray, rows: slice | np.ndarray, suffix: str, add, mean: bool) -> None:
        """attn_min, (attn_mean), attn_self (k) and attn_cross (k, n) of the records ``rows`` of attention stacks
        a (T, K, K)."""

        @functools.cache  # made once, when attn_min or attn_mean is wanted
        def stats() -> tuple[np.ndarray, np.ndarray]:
            diag = np.ascontiguousarray(np.diagonal(a, axis1=1, axis2=2)[rows])  # (T, K): Attn_k
            finite = np.isfinite(diag).any(1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows are masked below
                amin = np.where(finite, np.nanmin(np.where(finite[:, None], diag, 0.0), axis=1), np.nan)
                # row-wise over the contiguous axis: numpy sums each row as it sums a 1-d array
                amean = np.where(finite, np.nanmean(np.where(finite[:, None], diag, 0.0), axis=1), np.nan)
            return amin, amean

        add(lambda: stats()[0][:, None], "attn_min" + suffix, [-1], [-1])
        if mean:
            add(lambda: stats()[1][:, None], "attn_mean" + suffix, [-1], [-1])
        self._pair_rows(a, rows, "attn_self" + suffix, "attn_cross" + suffix, add)

    def _pair_rows(self, m: np.ndarray, rows: slice | np.ndarray, diag_name: str, off_name: str, add) -> None:
        """The diagonal of the records ``rows`` of K x K stacks m (T, K, K) as diag_name (k), the rest as off_name
        (k, n)."""
        K = self.K
        add(lambda: np.ascontiguousarray(np.diagonal(m, axis1=1, axis2=2)[rows]), diag_name, list(range(K)), [-1] * K)
        if K > 1:
            add(lambda: m[rows][:, self._off], off_name, list(self._off_k), list(self._off_n))

    def table(self) -> pa.Table:
        if not self._blocks:
            return SCHEMA.empty_table()
        keys = [self._key(b) for b in self._blocks]
        bounds = [0] + [t for t in range(1, len(keys)) if keys[t] != keys[t - 1]] + [len(keys)]
        segs = [self._segment(self._blocks[lo:hi])[0] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        return segs[0] if len(segs) == 1 else pa.concat_tables(segs)

    def frame(self) -> pd.DataFrame:
        return metrics_frame(self.table())

    def _one_shape(self) -> tuple | None:
        """What a recorder's blocks share when they make one segment and derive nothing (the batched trainer's
        records: one block per run), else None: recorders of equal shape assemble their tables together."""
        keys = {self._key(b) for b in self._blocks}
        if self.derive is not None or len(keys) != 1:
            return None
        return self.K, keys.pop()


@functools.lru_cache(maxsize=64)
def _off_diagonal(K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (k, n) of the off-diagonal entries of a K x K matrix, row by row, and their mask (K, K); read-only,
    shared by the recorders of one K (a batch makes one per run)."""
    eye = np.eye(K, dtype=bool)
    kk, nn = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
    arrays = kk[~eye], nn[~eye], ~eye
    for a in arrays:
        a.flags.writeable = False
    return arrays


TEXT_BYTES = 2**31 - 1  # the bytes one Arrow string array can hold (32-bit offsets)


def _tiled_text(names: list[str], T: int) -> pa.Array | pa.ChunkedArray:
    """``names`` repeated T times as one Arrow string array, its buffers made by NumPy (the metric column:
    every record has the same names; a string per row from Python, or a gather by index, cost far more).
    Past TEXT_BYTES bytes (a string array's 32-bit offsets) it is cut into chunks of whole records."""
    encoded = [name.encode() for name in names]
    lengths = np.array([len(b) for b in encoded], dtype=np.int64)
    per_record = int(lengths.sum())
    if T > 1 and T * per_record > TEXT_BYTES:  # (one record's names always fit)
        most = max(1, TEXT_BYTES // max(per_record, 1))  # records per chunk
        return pa.chunked_array([_tiled_text(names, min(most, T - s)) for s in range(0, T, most)], pa.string())
    starts = np.concatenate([[0], np.cumsum(lengths)])[:-1].astype(np.int32)
    width = len(names)  # rows per record
    offsets = np.empty(T * width + 1, dtype=np.int32)  # the value i spans data[offsets[i]:offsets[i + 1]]
    np.add(np.arange(T, dtype=np.int32)[:, None] * np.int32(per_record), starts, out=offsets[:-1].reshape(T, width))
    offsets[-1] = T * per_record
    data = np.tile(np.frombuffer(b"".join(encoded), dtype=np.uint8), T)
    return pa.StringArray.from_buffers(T * width, pa.py_buffer(offsets), pa.py_buffer(data))


def as_table(metrics: pa.Table | Recorder) -> pa.Table:
    """A run's metrics as an Arrow table of SCHEMA: the table, or the recorder's."""
    return metrics.table() if isinstance(metrics, Recorder) else metrics.select(SCHEMA.names).cast(SCHEMA)


def joined_table(parts: list[pa.Table | Recorder], thin: Thin | None = None) -> tuple[pa.Table, list[int]]:
    """The metrics of many runs (each a table, or a Recorder standing for its ``table()``) as one table, in
    order, and each run's number of rows: the rows of their tables concatenated, but the records of
    consecutive recorders of one shape assembled in one pass instead of one per run (the tidy rows of
    each record depend on that record alone). ``thin``: the rows of ``thin_rows(table, rows, thin)``, the
    thinned-out rows never made."""
    tables, counts, start = [], [], 0
    while start < len(parts):
        shape = parts[start]._one_shape() if isinstance(parts[start], Recorder) else None
        stop = start + 1
        while shape is not None and stop < len(parts) and isinstance(parts[stop], Recorder) and (
                not parts[stop]._blocks or parts[stop]._one_shape() == shape):
            stop += 1
        if shape is None:
            table = as_table(parts[start])
            tables.append(table if thin is None else thin_rows(table, [table.num_rows], thin)[0])
            counts.append(tables[-1].num_rows)
        else:
            group = parts[start:stop]
            sizes = [sum(len(b[0]) for b in r._blocks) for r in group]  # each run's records
            runs = np.repeat(np.arange(len(group)), sizes)
            table, per_record = group[0]._segment([b for r in group for b in r._blocks], thin, runs)
            tables.append(table)
            counts += np.bincount(runs, weights=per_record, minlength=len(group)).astype(np.int64).tolist()
        start = stop
    return (pa.concat_tables(tables) if tables else SCHEMA.empty_table()), counts


def thin_rows(table: pa.Table, counts: list[int], thin: Thin) -> tuple[pa.Table, list[int]]:
    """The rows of runs' joined metrics ``table`` (``counts[i]`` rows each, records in step order) but those of
    the metrics ``thin`` names outside each run's first and last recorded step; and each run's rows kept."""
    if not table.num_rows:
        return table, counts
    metric = table.column("metric").combine_chunks().dictionary_encode()
    named = np.array([bool(thin(m)) for m in metric.dictionary.to_pylist()], dtype=bool)
    thinned = named[numbers_of(metric.indices)] if len(named) else np.zeros(table.num_rows, dtype=bool)
    steps = column_numbers(table.column("step"))
    sizes = np.asarray(counts, dtype=np.int64)
    run = np.repeat(np.arange(len(counts)), sizes)
    keep = ~thinned | _at_end(steps, run)
    return table.filter(arrow_numbers(keep)), np.bincount(run[keep], minlength=len(counts)).tolist()


def _every_row(steps: np.ndarray, values: np.ndarray, metrics: list[str], ks: np.ndarray, ns: np.ndarray
               ) -> tuple[pa.Table, np.ndarray]:
    """The table of every record's values (T, W), the columns' metrics, k and n; and each record's rows (W)."""
    T, W = values.shape
    k, n = np.tile(ks, T), np.tile(ns, T)
    table = [arrow_numbers(np.repeat(steps, W)), _tiled_text(metrics, T), arrow_numbers(k, k < 0),
             arrow_numbers(n, n < 0), arrow_numbers(values.reshape(-1))]
    return pa.Table.from_arrays(table, schema=SCHEMA), np.full(T, W)


def _at_end(steps: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """(T,): whether each record is at its run's first or last recorded step (``thin_rows``'s rule), from records in
    run order, steps in order; ``runs``: the run of each record."""
    sizes = np.bincount(runs.astype(np.int64))
    stops, held = np.cumsum(sizes), sizes > 0
    first, last = np.zeros(len(sizes), dtype=np.int64), np.zeros(len(sizes), dtype=np.int64)
    first[held], last[held] = steps[(stops - sizes)[held]], steps[stops[held] - 1]
    return (steps == first[runs]) | (steps == last[runs])


def _names_at(names: list[str], col: np.ndarray) -> pa.Array | pa.ChunkedArray:
    """``names[col[i]]`` for every i as Arrow text (a gather by index), cut into chunks of at most TEXT_BYTES."""
    text = arrow_text(names)
    ends = np.cumsum(np.array([len(n.encode()) for n in names], dtype=np.int64)[col])
    if not len(col) or ends[-1] <= TEXT_BYTES:
        return text.take(arrow_numbers(col))
    pieces, start = [], 0
    while start < len(col):
        done = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, done + TEXT_BYTES, side="right")))
        pieces.append(text.take(arrow_numbers(col[start:stop])))
        start = stop
    return pa.chunked_array(pieces, pa.string())


def _joined(parts: list[Any]) -> Any:
    """One array field of several blocks as one array (None when the field is absent)."""
    if parts[0] is None or len(parts) == 1:
        return parts[0]
    return np.concatenate(parts)


def _as_array(x: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy().copy()
    return np.array(x, dtype=np.float64)  # a copy


def pandas() -> ModuleType:
    """pandas, imported when a table first becomes a DataFrame: training, recording and writing a run never need
    it, and its import is about 0.2 CPU-s of a 1.3 CPU-s ``lipschitz-icl run`` (docs/PERFORMANCE.md, "Start-up").
    The package's one deferred import of a library: here, and in the sweep's index and results readers, whose
    ``sweep run`` trains, stores and counts its runs without pandas (the other readers import it as usual)."""
    return importlib.import_module("pandas")


def metrics_frame(table: pa.Table) -> pd.DataFrame:
    """The tidy table as pandas, with nullable integer k and n."""
    df = table.to_pandas(types_mapper={pa.int64(): pandas().Int64Dtype()}.get)
    df["step"] = df["step"].astype("int64")
    return df


def metrics_table(frame: pd.DataFrame) -> pa.Table:
    """The inverse of ``metrics_frame``: a tidy DataFrame back to an arrow table with ``SCHEMA``."""
    table = pa.Table.from_pandas(frame[SCHEMA.names], schema=SCHEMA, preserve_index=False)
    return table.replace_schema_metadata(None)
