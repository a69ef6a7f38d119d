"""reproduce's kernel step: fused (compiled, numba) where numba is installed, unfused otherwise or
with --no-fused; the choice reaches every run that allows it, is recorded in the manifest and the
report, and gives the unfused numbers within 1e-12 relative."""

from __future__ import annotations

import importlib
import importlib.util
import json

import fake_experiments
import numpy as np
import pytest
from typer.testing import CliRunner

from lipschitz_icl import reproduce as reproduce_module
from lipschitz_icl.api import load_run
from lipschitz_icl.cli import app
from lipschitz_icl.experiments import registry
from lipschitz_icl.experiments.runner import Context, base_config, run_group, with_fused_step
from lipschitz_icl.reproduce import fused_available, options_of

cli = CliRunner()
needs_numba = pytest.mark.skipif(not fused_available(), reason="numba is not installed (the fused step needs it)")


def test_only_kernel_runs_of_the_batched_setting_on_the_cpu_take_the_fused_step():
    gd = base_config(["train.steps=5"])
    assert with_fused_step(gd).engine.fused is True
    for other in (["train.optimizer=adam"], ["engine.space=Q"], ["engine.kind=sampled", "engine.batch=8"]):
        cfg = base_config(["train.steps=5", *other])
        assert with_fused_step(cfg) == cfg, other


@needs_numba
def test_a_fused_group_writes_fused_runs_with_the_unfused_numbers(tmp_path):
    configs = [base_config(["train.steps=40", "train.log_every=5", f"task.L={L}", "engine.draws=32"]).with_overrides(
        [f"name=L{L}"]) for L in (1, 3)]
    unfused = run_group(Context(out=tmp_path / "a", quick=True), "g", configs)
    fused = run_group(Context(out=tmp_path / "b", quick=True, fused=True), "g", configs)
    for a, b in zip(unfused, fused, strict=True):
        assert a.config.engine.fused is False and load_run(b.dir).config.engine.fused is True
        assert a.metrics[["step", "metric"]].equals(b.metrics[["step", "metric"]])
        np.testing.assert_allclose(b.metrics["value"], a.metrics["value"], rtol=1e-12, atol=1e-300)


def test_the_manifest_tells_fused_from_unfused_outputs():
    assert options_of("all", True, 0, True) != options_of("all", True, 0, False)
    assert options_of("all", True, 0, True)["kernel_step"] == "fused (numba)"


def test_fused_without_numba_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    result = cli.invoke(app, ["reproduce", "B4", "--quick", "--fused", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "needs numba" in result.output and "--no-fused" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_a_numba_that_fails_to_import_is_named_and_the_default_falls_back(tmp_path, monkeypatch):
    real = importlib.import_module

    def broken(name, *args):
        if name == "numba":
            raise KeyError(0)  # as a half-installed numba does
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", broken)
    assert not reproduce_module.fused_available() and reproduce_module.resolve_fused(None) is False
    result = cli.invoke(app, ["reproduce", "B4", "--quick", "--fused", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "cannot be imported (KeyError: 0)" in result.output
    assert "Traceback" not in result.output


def test_no_fused_is_recorded_in_the_manifest_and_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))
    result = cli.invoke(app, ["reproduce", "all", "--quick", "--no-fused", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "o" / "reproduce.json").read_text())["kernel_step"] == "unfused (torch)"
    assert "kernel step: unfused (torch)" in (tmp_path / "o" / "report.md").read_text()
