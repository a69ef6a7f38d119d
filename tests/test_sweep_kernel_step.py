"""The kernel step of a sweep's points (sweep/kernel_step.py): the compiled step by default where numba can be
imported, for the points that allow it only; a spec's ``fused:``, ``--fused/--no-fused`` and a point's own
``engine.fused`` choose otherwise; a sweep directory keeps the step it was made with when run again without a
choice; without numba the default is the torch step and asking for the compiled one is one line (exit 2)."""

import pytest
import yaml
from typer.testing import CliRunner

from lipschitz_icl import numba_support
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.sweep import load_sweep, run_sweep

needs_numba = pytest.mark.skipif(not numba_support.fused_available(), reason="numba is not installed")
TINY = {"features": {"K": 3, "d": 3}, "prompt": {"N": 8}, "engine": {"draws": 8},
        "train": {"steps": 30, "log_every": 10}, "eval": {"functions": 8}}
MIXED = {"name": "k", "base": TINY, "zip": {"train.optimizer": ["gd", "adam"], "engine.space": ["auto", "Q"]}}


def _fused(sweep) -> list[bool]:
    return [p.config.engine.fused for p in sweep.points]


@needs_numba
def test_by_default_the_points_that_allow_it_take_the_compiled_step_and_the_spec_records_it():
    sweep = load_sweep(MIXED)
    assert sweep.fused and not sweep.step_chosen
    assert _fused(sweep) == [True, False]  # adam in Q space: no compiled step
    assert yaml.safe_load(sweep.resolved_yaml())["fused"] is True
    torch_step = load_sweep({**MIXED, "fused": False})
    assert _fused(torch_step) == [False, False] and torch_step.step_chosen
    assert torch_step.points[0].config_hash != sweep.points[0].config_hash  # the step enters the hash
    assert _fused(load_sweep(MIXED, fused=False)) == [False, False]


@needs_numba
def test_a_point_whose_spec_sets_engine_fused_keeps_it_and_a_base_value_yields():
    own = load_sweep({**MIXED, "overrides": ["engine.fused=false"], "zip": {"task.L": [1, 2]}})
    assert _fused(own) == [False, False]
    axis = load_sweep({"name": "a", "base": TINY, "grid": {"engine.fused": [False, True]}})
    assert _fused(axis) == [False, True]
    printed = {**TINY, "engine": {**TINY["engine"], "fused": False}}  # as run --print-config writes every field
    assert _fused(load_sweep({"name": "p", "base": printed, "grid": {"task.L": [1, 2]}})) == [True, True]


@needs_numba
def test_workers_elsewhere_default_to_the_torch_step():
    remote = load_sweep(MIXED, local=False)
    assert not remote.fused and not remote.step_chosen and _fused(remote) == [False, False]
    assert _fused(load_sweep(MIXED, local=False, fused=True)) == [True, False]


def test_a_step_that_is_not_a_boolean_is_refused_in_one_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**MIXED, "fused": 1}))
    result = CliRunner().invoke(app, ["sweep", str(path), "--workers", "1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "fused" in result.output and "\n" not in result.output.strip()
    with pytest.raises(UserInputError, match="fused: 1 is not allowed"):
        run_sweep(MIXED, tmp_path / "o", workers=1, fused=1)
    assert not (tmp_path / "o").exists()


@needs_numba
def test_a_sweep_directory_keeps_the_step_it_was_made_with(tmp_path):
    spec = {"name": "d", "base": TINY, "grid": {"task.L": [1, 2]}}
    made = run_sweep({**spec, "fused": False}, tmp_path, workers=1)
    stored = yaml.safe_load((tmp_path / "sweep.yaml").read_text())
    assert stored["fused"] is False
    del stored["fused"]  # as a build before the field wrote it: the torch step
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(stored))
    again = run_sweep(spec, tmp_path, workers=1)  # no choice: the directory's step, nothing to train
    assert list(again["config_hash"]) == list(made["config_hash"])
    assert list(again["finished_at"]) == list(made["finished_at"])
    chosen = run_sweep(spec, tmp_path, workers=1, fused=True)
    assert set(chosen["config_hash"]).isdisjoint(made["config_hash"])
    assert yaml.safe_load((tmp_path / "sweep.yaml").read_text())["fused"] is True


def test_without_numba_the_default_is_the_torch_step_and_asking_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(numba_support, "numba_installed", lambda: False)
    sweep = load_sweep(MIXED)
    assert not sweep.fused and _fused(sweep) == [False, False]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**MIXED, "fused": True}))
    for args in (["sweep", str(path)], ["sweep", str(path), "--no-fused", "--fused"]):
        result = CliRunner().invoke(app, [*args, "--workers", "1", "--out", str(tmp_path / "o")])
        assert result.exit_code == 2 and "needs numba" in result.output and "\n" not in result.output.strip()
    assert not (tmp_path / "o").exists()


@needs_numba
def test_a_directory_made_with_the_compiled_step_is_refused_in_one_line_where_numba_is_gone(tmp_path, monkeypatch):
    spec = {"name": "g", "base": TINY, "grid": {"task.L": [1, 2]}}
    made = run_sweep(spec, tmp_path, workers=1)
    monkeypatch.setattr(numba_support, "numba_installed", lambda: False)
    with pytest.raises(UserInputError, match="made with the compiled kernel step.*allowed: --no-fused") as err:
        run_sweep(spec, tmp_path, workers=1)
    assert "\n" not in str(err.value)
    torch_step = run_sweep(spec, tmp_path, workers=1, fused=False)
    assert set(torch_step["config_hash"]).isdisjoint(made["config_hash"]) and len(torch_step) == 2


def test_a_directory_none_of_whose_points_took_the_compiled_step_is_not_refused_without_numba(tmp_path, monkeypatch):
    adam = {"name": "m", "base": {**TINY, "train": {**TINY["train"], "optimizer": "adam"}}, "grid": {"task.L": [1, 2]},
            "fused": True}
    made = run_sweep(adam, tmp_path, workers=1) if numba_support.fused_available() else None
    if made is None:  # no numba here at all: write the directory's spec as a build with numba would have
        made = run_sweep({**adam, "fused": False}, tmp_path, workers=1)
        stored = yaml.safe_load((tmp_path / "sweep.yaml").read_text())
        (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({**stored, "fused": True}))
    monkeypatch.setattr(numba_support, "numba_installed", lambda: False)
    spec = {k: v for k, v in adam.items() if k != "fused"}
    again = run_sweep(spec, tmp_path, workers=1)  # adam: no point took the compiled step, nothing to train
    assert list(again["config_hash"]) == list(made["config_hash"])
    assert list(again["finished_at"]) == list(made["finished_at"])


@needs_numba
def test_the_step_of_another_sweeps_folder_is_not_adopted(tmp_path):
    run_sweep({"name": "other", "base": TINY, "grid": {"task.L": [1]}, "fused": False}, tmp_path, workers=1)
    mine = {"name": "mine", "base": TINY, "grid": {"task.L": [1]}}
    with pytest.raises(UserInputError, match="not a sweep named"):
        run_sweep(mine, tmp_path, workers=1)
    run_sweep(mine, tmp_path, workers=1, force=True)  # written over: this sweep's default, not the folder's step
    assert yaml.safe_load((tmp_path / "sweep.yaml").read_text())["fused"] is True
