"""NumPy arrays to and from Arrow arrays through their buffers.

pyarrow's own conversions (``pa.array`` of an ndarray or a list, ``Array.to_numpy``, ``fill_null`` with a Python
value) import pandas the first time they run (pyarrow's pandas shim checks every input for pandas types): about
0.2 CPU-s, a sixth of a 400-step ``lipschitz-icl run``, which needs no pandas to train, record and write a run
(docs/PERFORMANCE.md, "Start-up"). These helpers build and read the same arrays from their buffers: primitive
arrays (integers, floats, booleans) and text.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_ARROW = {np.dtype(np.int64): pa.int64(), np.dtype(np.int32): pa.int32(), np.dtype(np.float64): pa.float64(),
          np.dtype(np.float32): pa.float32(), np.dtype(np.bool_): pa.bool_()}


def arrow_numbers(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """A 1-d NumPy array (int32/int64, float32/float64 or bool) as the Arrow array of its type, null where ``mask``
    (bool, same length) is True; what ``pa.array(values, mask=mask)`` makes."""
    values = np.ascontiguousarray(values)
    kind = _ARROW.get(values.dtype)
    if kind is None or values.ndim != 1:
        raise TypeError(f"arrow_numbers takes a 1-d array of {', '.join(map(str, _ARROW))} (got {values.dtype}, "
                        f"{values.ndim}-d)")
    data = np.packbits(values, bitorder="little") if values.dtype == np.bool_ else values
    nulls = 0 if mask is None else int(np.count_nonzero(mask))
    validity = pa.py_buffer(np.packbits(~np.asarray(mask, dtype=bool), bitorder="little")) if nulls else None
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def arrow_text(values: list[str]) -> pa.StringArray:
    """Python strings as an Arrow string array (no nulls): ``pa.array(values, pa.string())``."""
    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.StringArray.from_buffers(len(encoded), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded)))


def null_mask(array: pa.Array) -> np.ndarray:
    """Whether each value of ``array`` is null (bool): ``array.is_null().to_numpy()``."""
    if not array.null_count:
        return np.zeros(len(array), dtype=bool)
    return _bits(array.is_null())


def numbers_of(array: pa.Array, fill: int | float = 0) -> np.ndarray:
    """The values of a primitive Arrow array (integers, floats or booleans; a dictionary array's indices are one)
    as a NumPy array of its type, ``fill`` where null: ``array.fill_null(fill).to_numpy()``."""
    if pa.types.is_boolean(array.type):
        values = _bits(array)
    else:
        dtype = np.dtype(array.type.to_pandas_dtype())  # a NumPy dtype (no pandas import)
        data = array.buffers()[1]
        values = np.zeros(0, dtype) if data is None else np.frombuffer(data, dtype)
        values = values[array.offset: array.offset + len(array)]
    if array.null_count:
        return np.where(null_mask(array), np.asarray(fill, dtype=values.dtype), values)
    return values


def column_numbers(column: pa.ChunkedArray | pa.Array, fill: int | float = 0) -> np.ndarray:
    """``numbers_of`` of every chunk of a column, joined (an empty column of its type when it has no chunk)."""
    if isinstance(column, pa.Array):
        return numbers_of(column, fill)
    if not column.num_chunks:
        return numbers_of(column.combine_chunks(), fill)  # an empty array of the column's type
    parts = [numbers_of(chunk, fill) for chunk in column.chunks]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _bits(array: pa.Array) -> np.ndarray:
    """The values of a boolean array without nulls, unpacked from its bit buffer."""
    data = array.buffers()[1]
    if data is None or not len(array):
        return np.zeros(len(array), dtype=bool)
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
    return bits[array.offset: array.offset + len(array)].astype(bool)
