"""Malformed sweep specs (hypothesis) are refused with one line, never a traceback or a run; and
a sweep gives the same metrics whatever the number of workers."""

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lipschitz_icl.config import validate_config
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.sweep import load_metrics, load_sweep, run_configs

SPECS = {"count": 0}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=12), st.binary(max_size=6))
bad_axis_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.sampled_from(["logspace(1, 0)", "linspace(0, 1, -3)", "logspace(a, b, c)", "__import__('os')",
                     "linspace(0, 1, 10**9)", "logspace(1e400, 2, 3)", "", "linspace()"]),
)
bad_keys = st.sampled_from(["task.L", "task.Lx", "nope", "features.K", "train.lr", "seed", "", "a..b", "task"])


@st.composite
def malformed_specs(draw):
    kind = draw(st.sampled_from(["grid", "zip", "seeds", "base", "top", "name"]))
    spec = {"base": {"train": {"steps": 5}}}
    if kind == "grid":
        spec["grid"] = draw(st.one_of(scalars, st.dictionaries(bad_keys, bad_axis_values, min_size=1, max_size=2)))
    elif kind == "zip":
        spec["zip"] = draw(st.dictionaries(bad_keys, st.lists(scalars, min_size=1, max_size=3), min_size=1,
                                           max_size=2))
    elif kind == "seeds":
        spec["seeds"] = draw(st.one_of(scalars.filter(lambda v: not (isinstance(v, int) and 1 <= v <= 10**6)),
                                       st.just(-1), st.just(10**9)))
    elif kind == "base":
        spec["base"] = draw(st.one_of(scalars, st.dictionaries(bad_keys, scalars, min_size=1, max_size=2)))
    elif kind == "top":
        spec[draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in ("base", "grid", "zip", "seeds",
                                                                            "name")))] = draw(scalars)
    else:
        spec["name"] = draw(st.sampled_from(["../x", "/abs", "a/b", "", "x" * 300, ".hidden"]))
    return spec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=malformed_specs())
def test_malformed_specs_give_one_line_errors(spec):
    SPECS["count"] += 1
    try:
        load_sweep(spec)  # a drawn spec that happens to be valid loads; any other exception fails the test
    except UserInputError as e:
        text = str(e)
        assert text and "\n" not in text and "Traceback" not in text
        assert ":" in text  # names the field or file, then what is wrong


def test_zz_spec_fuzz_count():
    print(f"\nsweep specs fuzzed: {SPECS['count']}")
    assert SPECS["count"] >= 300


def test_same_metrics_with_one_and_two_workers(tmp_path):
    configs = [validate_config({"task": {"L": L}, "train": {"steps": 40}, "engine": {"draws": 16}, "seed": s})
               for L in (0.5, 2.0) for s in (0, 1)]
    one = run_configs(configs, tmp_path / "w1", workers=1)
    two = run_configs(configs, tmp_path / "w2", workers=2)
    pd.testing.assert_frame_equal(load_metrics(tmp_path / "w1"), load_metrics(tmp_path / "w2"))
    assert list(one["name"]) == list(two["name"])
