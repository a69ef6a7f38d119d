"""Sweep specs: range strings, expansion order (grid x zip x seeds), and one-line errors."""

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from lipschitz_icl.errors import UserInputError
from lipschitz_icl.sweep import load_sweep, parse_range

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "configs" / "quickstart.yaml"


def test_ranges_match_numpy_conventions():
    assert parse_range("logspace(-1, 1, 3)") == [0.1, 1.0, 10.0]
    assert parse_range("linspace(0, 1, 5)") == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert parse_range(" linspace( 2 , 2e0 , 1 ) ") == [2.0]
    assert parse_range("linspace(0, 1, 11)")[3] == 0.3  # float noise (0.30000000000000004) dropped


@given(st.floats(-50, 50), st.floats(-50, 50), st.integers(2, 200))
def test_linspace_has_n_values_and_its_endpoints(a, b, n):
    xs = parse_range(f"linspace({a!r}, {b!r}, {n})")
    assert len(xs) == n
    assert math.isclose(xs[0], a, rel_tol=1e-11, abs_tol=1e-10)
    assert math.isclose(xs[-1], b, rel_tol=1e-11, abs_tol=1e-10)


@pytest.mark.parametrize("text", ["logspace(1, 2)", "linspace(0, 1, 0)", "arange(0, 1, 2)", "linspace(0, 1, 2.5)",
                                  "__import__('os').system('true')", "logspace(1, 400, 2)"])
def test_bad_range_strings_are_refused_without_eval(text):
    with pytest.raises(ValueError):
        parse_range(text)


def test_grid_zip_seeds_expand_in_order(tmp_path):
    spec = {
        "base": {"train": {"steps": 10}, "seed": 5},
        "grid": {"task.L": [1, 2], "train.lr": "linspace(0.5, 1, 2)"},
        "zip": {"features.K": [3, 4], "features.d": [3, 4]},
        "seeds": 2,
    }
    points = load_sweep(spec).points
    assert len(points) == 2 * 2 * 2 * 2
    first, last = points[0], points[-1]
    assert first.axes == {"task.L": 1, "train.lr": 0.5, "features.K": 3, "features.d": 3, "seed": 5}
    assert last.axes == {"task.L": 2, "train.lr": 1.0, "features.K": 4, "features.d": 4, "seed": 6}
    assert [p.config.seed for p in points[:2]] == [5, 6]  # seeds innermost, counted from the base seed
    assert last.config.task.L == 2.0 and last.config.features.K == 4 and last.config.train.steps == 10
    assert len({p.config.config_hash() for p in points}) == len(points)
    assert len({p.name for p in points}) == len(points)
    assert [p.index for p in points] == list(range(len(points)))


def test_equal_configs_are_kept_once():
    points = load_sweep({"grid": {"task.L": [1, 1.0, 2]}}).points
    assert [p.config.task.L for p in points] == [1.0, 2.0]


def test_base_path_is_relative_to_the_spec_and_overrides_apply(tmp_path, quickstart_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "base.yaml").write_text(quickstart_path.read_text())
    spec = tmp_path / "sub" / "s.yaml"
    spec.write_text(yaml.safe_dump({"base": "../base.yaml", "overrides": ["train.steps=7"], "seeds": [3, 9]}))
    sweep = load_sweep(spec)
    assert sweep.name == "s"
    assert [p.config.seed for p in sweep.points] == [3, 9]
    assert all(p.config.train.steps == 7 and p.config.prompt.N == 50 for p in sweep.points)
    resolved = yaml.safe_load(sweep.resolved_yaml())  # self-contained: the base inlined
    assert resolved["base"]["train"]["steps"] == 7 and "overrides" not in resolved


def test_l_sweep_is_the_quickstart_over_ten_l_values_and_three_seeds():
    sweep = load_sweep(ROOT / "configs" / "sweeps" / "l_sweep.yaml")
    assert len(sweep.points) == 30
    Ls = sorted({p.config.task.L for p in sweep.points})
    assert len(Ls) == 10 and Ls[0] == pytest.approx(10 ** -0.5) and Ls[-1] == 10.0  # no L met at step 0
    assert {p.config.seed for p in sweep.points} == {0, 1, 2}
    quick = load_sweep({"base": yaml.safe_load(QUICK.read_text())}).points[0].config
    assert all(p.config.train == quick.train and p.config.features == quick.features for p in sweep.points)


BAD = [
    ({"grid": {"task.L": "logspace(1, 2)"}}, "grid.task.L"),
    ({"grid": {"task.L": 3}}, "grid.task.L"),
    ({"grid": {"task.L": []}}, "grid.task.L"),
    ({"grid": {"task.Lx": [1]}}, "grid.task.Lx"),  # not a config key
    ({"grid": {"task.L": [1, -1]}}, "grid.task.L"),  # L <= 0 at one point
    ({"zip": {"task.L": [1, 2], "train.lr": [1]}}, "zip"),  # lengths differ
    ({"zip": {"features.K": [9]}}, "zip.features.K"),  # K > d
    ({"zip": [{}]}, "zip"),  # an empty group (once "unexpected RuntimeError", exit 1)
    ({"zip": [{"task.L": [1]}, {}]}, "zip[1]"),
    ({"grid": {"seed": [1]}, "seeds": 2}, "seeds"),
    ({"seeds": 0}, "seeds"),
    ({"gird": {"task.L": [1]}}, "gird"),
    ({"base": "no-such-file.yaml"}, "base"),
    ({"base": {"task": {"L": 0}}}, "base.task.L"),
    ({"name": "../x"}, "name"),
]


@pytest.mark.parametrize("spec,field", BAD)
def test_spec_errors_name_the_field(spec, field):
    with pytest.raises(UserInputError) as info:
        load_sweep(spec)
    message = str(info.value)
    assert message.startswith(f"{field}:"), message
    assert "\n" not in message


def test_points_built_without_a_deep_copy_leave_the_base_as_it_was():
    """``copied_along`` copies only the mappings an override changes: the base a sweep builds every point from
    stays unchanged (a popped file digest, a new section, a replaced section), and the point gets the values."""
    import copy as copy_module

    from lipschitz_icl.config_io import apply_overrides, copied_along

    base = {"task": {"L": 1.0, "params": {"a": [1, 2]}}, "features": {"kind": "file", "path": "v.npy",
                                                                     "file_sha256": "ab"}, "seed": 0}
    before = copy_module.deepcopy(base)
    overrides = ["task.L=2.5", "task.params.a=[3]", "features.path=w.npy", "train.lr=0.5", "seed=4"]
    point = apply_overrides(copied_along(base, overrides), overrides)
    assert base == before
    assert point["task"] == {"L": 2.5, "params": {"a": [3]}} and point["train"] == {"lr": 0.5}
    assert point["features"] == {"kind": "file", "path": "w.npy"} and point["seed"] == 4



HELPED = """
import sys
import lipschitz_icl.sweep.expansion as spec_module
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.forked import ForkedCall, single_threaded
from lipschitz_icl.sweep import load_sweep

def records(points):
    return [(p.index, p.axes, p.config_hash, p.name, p.seed, p.group) for p in points]

def refusal(spec):
    try:
        load_sweep(spec)
    except UserInputError as e:
        return str(e)

quick = sys.argv[1]
spec = {"base": quick, "grid": {"task.L": [0.5, 1, 1.0, 2], "train.lr": [0.5, 1.0]}, "seeds": 3}
bad = {"base": quick, "grid": {"task.L": [0.5, 1, 2, 4, 8, 16, 32, -1]}}  # the last point: the helper's
alone, refused_alone = load_sweep(spec).points, refusal(bad)
calls = []
spec_module.PARALLEL_POINTS = 2
spec_module.ForkedCall = lambda *a: calls.append(a) or ForkedCall(*a)
assert single_threaded()
helped, refused_helped = load_sweep(spec).points, refusal(bad)
assert len(calls) == 2, calls
assert records(helped) == records(alone) and len(alone) == 18  # task.L 1 and 1.0: one point each
assert [p.config for p in helped] == [p.config for p in alone]
assert refused_helped == refused_alone and "grid.task.L" in refused_alone, (refused_helped, refused_alone)
print("same points")
"""


def test_a_large_spec_expanded_with_a_forked_helper_gives_the_points_of_one_process():
    """PARALLEL_POINTS lowered so that small specs take the helper, in a fresh interpreter (single-threaded: a
    process with other threads never forks one): the same points in the same order (hashes, names, groups,
    duplicates dropped where they fall), the helper's configs rebuilt equal to those made by one process, and a point
    the helper cannot validate refused with the message of one process."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", HELPED, str(QUICK)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "same points" in done.stdout, done.stderr[-2000:]


def test_points_of_a_seeds_axis_made_from_templates_equal_points_validated_whole(monkeypatch):
    """``PointConfigs``: a point that differs from a template in its seed only is the template with that seed; every
    point equals its whole validation (values, hash, fields set), with one template kept (evicted at every other
    axis value) too; a seed Config refuses is refused with the message of a whole validation."""
    import pickle

    from lipschitz_icl.sweep.expansion import PointConfigs, _point_config

    spec = {"base": str(QUICK), "grid": {"task.L": [0.5, 2.0], "train.lr": [0.5, 1.0]}, "seeds": [3, 0, 7]}
    sweep = load_sweep(spec, fused=False)
    for kept in (256, 1):
        monkeypatch.setattr(PointConfigs, "TEMPLATES", kept)
        configs = PointConfigs(sweep.spec, sweep.base, {}, False)
        for p in sweep.points + sweep.points[::-1]:  # reversed: each template evicted before its next use
            whole, made = _point_config(sweep.spec, sweep.base, p.axes, {}, False), configs(p.axes)
            assert made.model_dump() == whole.model_dump() and made.model_fields_set == whole.model_fields_set
            assert made.config_hash() == whole.config_hash() == p.config_hash
        assert len(configs._templates) == min(kept, 4)
        assert not pickle.loads(pickle.dumps(configs))._templates  # pickled without them
    with pytest.raises(UserInputError) as whole:
        load_sweep({**spec, "seeds": [2**63]}, fused=False)
    with pytest.raises(UserInputError) as templated:
        load_sweep({**spec, "seeds": [0, 2**63]}, fused=False)
    assert str(templated.value) == str(whole.value)  # the same point's error: the seed refused, as without templates
    assert "seeds.seed" in str(whole.value), str(whole.value)
