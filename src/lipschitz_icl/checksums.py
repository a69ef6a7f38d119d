"""Checksums of tables and files: the sha256 of a table's values (independent of its encoding), the bytes of a
checksummed parquet file, and the sha256 of bytes (what a run's summary.json and a sweep's index record of
the files written with them)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .arrow_np import arrow_numbers, null_mask, numbers_of


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data``, as hex."""
    return hashlib.sha256(data).hexdigest()


VALUES_SHA256 = b"lipschitz_icl.values_sha256"  # parquet key-value metadata: the digest of the table's values


def values_digest(table: pa.Table) -> str:
    """sha256 of a table's values, column by column (names, null masks, then the values: numbers as
    their float64/int64 bytes, text as its lengths then its bytes, a dictionary column as the lengths of its
    runs of equal values then those values, whatever its dictionary), independent of how the table is chunked
    or encoded. Fed chunk by chunk from Arrow's buffers (copies only where nulls are filled or a type cast):
    hashing dominates, about 30 ms per million rows."""
    h = hashlib.sha256()
    for name, column in zip(table.column_names, table.columns, strict=True):
        h.update(name.encode() + b"\0")
        for chunk in column.chunks:
            h.update(null_mask(chunk))
        if pa.types.is_dictionary(column.type):  # the values it stands for, as runs of equal values
            column, lengths = _runs_of_values(column)
            h.update(lengths.astype("<i8"))
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            _update_text(h, [_nulls_as_empty(c) if c.null_count else c for c in column.chunks])
        else:
            is_int = pa.types.is_integer(column.type)
            for chunk in column.chunks:
                values = numbers_of(chunk if is_int else chunk.cast(pa.float64()))  # nulls as 0
                h.update(np.ascontiguousarray(values, dtype="<i8" if is_int else "<f8"))
    return h.hexdigest()


def _nulls_as_empty(chunk: pa.Array) -> pa.Array:
    """A text chunk with its nulls as empty strings (``chunk.fill_null("")``, whose Python value would import
    pandas: ``arrow_np``)."""
    width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    empty = pa.Array.from_buffers(chunk.type, len(chunk), [None, pa.py_buffer(np.zeros(len(chunk) + 1, width)),
                                                          pa.py_buffer(b"")])
    return pc.coalesce(chunk, empty)


def _update_text(h: Any, chunks: list[pa.Array]) -> None:
    """Every value's length (int64), then every value's bytes, of text chunks without nulls."""
    spans = []
    for chunk in chunks:
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        _, offsets_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
        h.update(np.diff(offsets).astype("<i8"))
        spans.append((data_buf, int(offsets[0]) if len(offsets) else 0, int(offsets[-1]) if len(offsets) else 0))
    for data_buf, start, stop in spans:
        if data_buf is not None and stop > start:
            h.update(memoryview(data_buf)[start:stop])


def _runs_of_values(column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, np.ndarray]:
    """A dictionary column as (the value of each run of equal values, the runs' lengths): the same for the
    same values whatever the dictionary's order, duplicates or unused entries (a parquet file keeps used ones)."""
    whole = column.unify_dictionaries().combine_chunks() if column.num_chunks else pa.chunked_array(
        [], column.type).combine_chunks()
    codes = numbers_of(whole.indices, -1).astype(np.int64)
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]])) if len(codes) else np.zeros(0, int)
    values = whole.take(arrow_numbers(starts.astype(np.int64))).cast(whole.type.value_type)
    if len(values) > 1:  # two codes of one value (a dictionary with duplicates): one run
        text = ["\0null" if v is None else v for v in values.to_pylist()]
        keep = np.concatenate([[True], np.array(text[1:], dtype=object) != np.array(text[:-1], dtype=object)])
        starts, values = starts[keep], values.filter(arrow_numbers(keep))
    return pa.chunked_array([values]), np.diff(np.concatenate([starts, [len(codes)]]))


def parquet_bytes(table: pa.Table, values_sha256: bool = True) -> bytes:
    """A table as the bytes of a parquet file (what ``metrics.parquet`` holds), its pages checksummed (CRC)
    and (``values_sha256``) the sha256 of its values in the file's metadata (``VALUES_SHA256``, checked by
    ``read_metrics_table``). Without it where the sha256 of the whole file is recorded elsewhere and checked on
    every read (a sweep's results file: its index rows): hashing the values again cost ~60 us a run."""
    meta = {**(table.schema.metadata or {}), **({VALUES_SHA256: values_digest(table).encode()} if values_sha256
                                                else {})}
    sink = pa.BufferOutputStream()
    # dictionary pages for the columns that repeat (names, steps, indices), not for float values, where the writer
    # would build a dictionary only to drop it: ~35% faster to write, and smaller. No min/max statistics: nothing
    # reads them, and a file of one row group (a run's, a batch's) could skip nothing by them; writing them was a
    # quarter of the writer's time (a 512-run batch's results file: 81 -> 63 us a run)
    repeating = [f.name for f in table.schema if not pa.types.is_floating(f.type)]
    pq.write_table(table.replace_schema_metadata(meta), sink, write_page_checksum=True, use_dictionary=repeating,
                   write_statistics=False)
    return sink.getvalue().to_pybytes()
