"""``arrow_np`` builds and reads the arrays pyarrow's own conversions do, without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lipschitz_icl.arrow_np import arrow_numbers, arrow_text, column_numbers, null_mask, numbers_of

DTYPES = [np.int64, np.int32, np.float64, np.float32, np.bool_]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.sampled_from(DTYPES), st.integers(0, 2**31), st.booleans(), st.integers(0, 5))
def test_numbers_round_trip_as_pyarrow_makes_and_reads_them(n, dtype, seed, masked, cut):
    rng = np.random.default_rng(seed)
    values = (rng.normal(size=n) * 100).astype(dtype)
    mask = rng.random(n) < 0.3 if masked else None
    made = arrow_numbers(values, mask)
    assert made.equals(pa.array(values, mask=mask)) and made.null_count == (0 if mask is None else mask.sum())
    sliced = made.slice(min(cut, n))  # an offset into the buffers
    expected = sliced.fill_null(False if dtype == np.bool_ else 0).to_numpy(zero_copy_only=False)
    assert np.array_equal(numbers_of(sliced), expected) and numbers_of(sliced).dtype == expected.dtype
    assert np.array_equal(null_mask(sliced), sliced.is_null().to_numpy(zero_copy_only=False))


def test_text_and_chunked_columns():
    names = ["loss", "", "attn_self@L0H1", "é"]
    assert arrow_text(names).equals(pa.array(names, pa.string())) and arrow_text([]).equals(pa.array([], pa.string()))
    column = pa.chunked_array([pa.array([1, None, 3]), pa.array([4])])
    assert column_numbers(column, -1).tolist() == [1, -1, 3, 4]
    assert column_numbers(pa.chunked_array([], pa.float64())).dtype == np.float64
    assert numbers_of(pa.array([1, 2, 3]).dictionary_encode().indices).tolist() == [0, 1, 2]


def test_other_arrays_are_refused():
    with pytest.raises(TypeError, match="1-d array"):
        arrow_numbers(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="1-d array"):
        arrow_numbers(np.array(["a"]))


def test_none_of_it_imports_pandas():
    code = ("import sys, numpy as np\nfrom lipschitz_icl.arrow_np import *\n"
            "a = arrow_numbers(np.arange(5), np.arange(5) > 2)\nnumbers_of(a, -1); null_mask(a); arrow_text(['x'])\n"
            "column_numbers(a); numbers_of(arrow_numbers(np.ones(3, bool)))\nprint('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
