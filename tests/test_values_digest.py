"""store.values_digest, which feeds sha256 from Arrow's buffers chunk by chunk, gives the digest of its
definition (``reference`` below, the whole-column form it replaced): every file written before verifies."""

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from lipschitz_icl.checksums import _runs_of_values, values_digest


def reference(table: pa.Table) -> str:
    """The definition: names, null masks, then numbers as float64/int64, text as lengths then bytes."""
    h = hashlib.sha256()
    for name, column in zip(table.column_names, table.columns, strict=True):
        h.update(name.encode() + b"\0" + column.is_null().to_numpy(zero_copy_only=False).tobytes())
        if pa.types.is_dictionary(column.type):
            column, lengths = _runs_of_values(column)
            h.update(lengths.astype("<i8").tobytes())
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            text = column.combine_chunks().cast(pa.large_string()).fill_null("")
            h.update(pc.binary_length(text).to_numpy(zero_copy_only=False).astype("<i8").tobytes())
            whole = pa.LargeListArray.from_arrays(pa.array([0, len(text)], pa.int64()), text)
            h.update(pc.binary_join(whole, pa.scalar("", pa.large_string()))[0].as_buffer().to_pybytes())
        elif pa.types.is_integer(column.type):
            h.update(column.fill_null(0).to_numpy().astype("<i8").tobytes())
        else:
            h.update(column.cast(pa.float64()).fill_null(0.0).to_numpy().astype("<f8").tobytes())
    return h.hexdigest()


TEXT = st.one_of(st.none(), st.text(max_size=6))
INT = st.one_of(st.none(), st.integers(-(2**40), 2**40))
FLOAT = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
def _maybe(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), values)


KINDS = {"string": (TEXT, pa.string()), "large_string": (TEXT, pa.large_string()), "int64": (INT, pa.int64()),
         "int32": (_maybe(st.integers(-1000, 1000)), pa.int32()), "float64": (FLOAT, pa.float64()),
         "float32": (_maybe(st.floats(width=32)), pa.float32()), "bool": (_maybe(st.booleans()), pa.bool_())}


@st.composite
def chunked_columns(draw, n: int) -> pa.ChunkedArray:
    kind = draw(st.sampled_from([*KINDS, "dictionary"]))
    if kind == "dictionary":
        values = draw(st.lists(st.text(max_size=3), min_size=1, max_size=4))
        codes = draw(st.lists(st.one_of(st.none(), st.integers(0, len(values) - 1)), min_size=n, max_size=n))
        whole = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(values))
    else:
        elements, type_ = KINDS[kind]
        whole = pa.array(draw(st.lists(elements, min_size=n, max_size=n)), type_)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    bounds = [0, *cuts, n]
    pieces = [whole.slice(lo, hi - lo) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    return pa.chunked_array(pieces, whole.type)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_digest_is_its_definition_whatever_the_chunks(data):
    n = data.draw(st.integers(0, 12))
    columns = [data.draw(chunked_columns(n)) for _ in range(data.draw(st.integers(1, 3)))]
    table = pa.table(dict(zip(["a", "b", "c"][: len(columns)], columns, strict=True)))
    assert values_digest(table) == reference(table)
    assert values_digest(table) == values_digest(table.combine_chunks())


def test_a_metrics_sized_table_matches_too():
    rng = np.random.default_rng(0)
    rows = 50_000
    table = pa.table({"step": np.repeat(np.arange(rows // 50), 50),
                      "metric": pa.array(rng.choice(["loss", "attn"], rows)),
                      "k": pa.array(rng.integers(0, 4, rows), mask=rng.random(rows) < 0.3),
                      "value": rng.standard_normal(rows)})
    sliced = pa.concat_tables([table.slice(0, 1234), table.slice(1234)])
    assert values_digest(sliced) == reference(table) == values_digest(table)
