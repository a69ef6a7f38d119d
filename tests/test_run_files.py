"""A run's files are bound together: summary.json records the sha256 of config.yaml, metrics.parquet and
params.pt, so a file of another run (another L, another model kind) is refused by load_run, analyze and
evaluate, naming it; runs written before the digests load as before; evaluate refuses parameters that are
not finite, huge, not floating point, or not the model's."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.store import FILES_KEY

runner = CliRunner()
SMALL = ["train.steps=10", "train.log_every=5", "engine.draws=8", "eval.functions=8"]
EVALUATE = ["--prompts", "4", "--contexts", "1,2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Three finished runs: ``a``, ``L`` (another L) and ``kind`` (another model kind)."""
    root = tmp_path_factory.mktemp("runs")
    li.run(None, SMALL, out=root / "a")
    li.run(None, [*SMALL, "task.L=0.5"], out=root / "L")
    li.run(None, [*SMALL, "model.kind=linear_attention"], out=root / "kind")
    return {p.name: p for p in root.iterdir()}


def _copy(runs: dict[str, Path], tmp_path: Path, old: bool = False) -> Path:
    """A copy of run ``a``; ``old``: as written before summary.json recorded its files' digests."""
    out = tmp_path / "x"
    shutil.copytree(runs["a"], out)
    if old:
        summary = json.loads((out / "summary.json").read_text())
        del summary[FILES_KEY]
        (out / "summary.json").write_text(json.dumps(summary))
    return out


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_summary_records_the_digest_of_each_file(runs):
    files = json.loads((runs["a"] / "summary.json").read_text())[FILES_KEY]
    assert sorted(files) == ["config.yaml", "metrics.parquet", "params.pt"]
    assert FILES_KEY not in li.load_run(runs["a"]).summary  # checked, then left out: the summary the run made


@pytest.mark.parametrize("source", ["L", "kind"])
@pytest.mark.parametrize("names", [["metrics.parquet"], ["params.pt"], ["config.yaml", "summary.json"]])
def test_a_file_of_another_run_is_refused_naming_it(runs, tmp_path, source, names):
    out = _copy(runs, tmp_path)
    for name in names:
        shutil.copy(runs[source] / name, out / name)
    named = "metrics.parquet" if "summary.json" in names else names[0]  # another summary: this run's metrics
    with pytest.raises(UserInputError, match=named):
        li.load_run(out)
    with pytest.raises(UserInputError, match=named):
        li.load_run(out, require_finished=False)
    for command in (["analyze", str(out)], ["evaluate", str(out), *EVALUATE]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2 and named in _one_line(result), result.output
    assert not (out / "evaluation.parquet").exists()


def test_a_listed_file_that_is_missing_or_an_unlisted_one_is_refused(runs, tmp_path):
    out = _copy(runs, tmp_path)
    (out / "params.pt").unlink()
    with pytest.raises(UserInputError, match="params.pt: missing"):
        li.load_run(out)
    summary = json.loads((out / "summary.json").read_text())
    del summary[FILES_KEY]["params.pt"]
    (out / "summary.json").write_text(json.dumps(summary))
    li.load_run(out)  # a run written without params
    shutil.copy(runs["L"] / "params.pt", out / "params.pt")
    with pytest.raises(UserInputError, match="params.pt: not written with this run"):
        li.load_run(out)


def test_runs_written_before_the_digests_load_analyse_and_evaluate_as_before(runs, tmp_path):
    out = _copy(runs, tmp_path, old=True)
    loaded = li.load_run(out)
    assert FILES_KEY not in loaded.summary and loaded.params is not None
    assert runner.invoke(app, ["analyze", str(out)]).exit_code == 0
    result = runner.invoke(app, ["evaluate", str(out), *EVALUATE])
    assert result.exit_code == 0, result.output


def _set_params(out: Path, change) -> None:
    state = torch.load(out / "params.pt", weights_only=True)
    torch.save(change(state), out / "params.pt")


def _first(state: dict, value) -> dict:
    key = next(iter(state))
    return {**state, key: value(state[key])}


BAD_PARAMS = {
    "nan": (lambda s: _first(s, lambda t: torch.full_like(t, float("nan"))), "NaN or infinite"),
    "inf": (lambda s: _first(s, lambda t: torch.full_like(t, float("inf"))), "NaN or infinite"),
    "huge": (lambda s: _first(s, lambda t: torch.full_like(t, 1e300)), "at most 1e\\+08"),
    "bool": (lambda s: _first(s, lambda t: torch.ones_like(t, dtype=torch.bool)), "is bool"),
    "int": (lambda s: _first(s, lambda t: torch.ones_like(t, dtype=torch.int64)), "is int64"),
    "shape": (lambda s: _first(s, lambda t: torch.zeros(3, 3, dtype=t.dtype)), "has shape"),
    "names": (lambda s: {"W": torch.zeros(2)}, "not those of a"),
}


@pytest.mark.parametrize("bad", sorted(BAD_PARAMS))
def test_evaluate_refuses_parameters_it_cannot_use_naming_the_file(runs, tmp_path, bad):
    change, said = BAD_PARAMS[bad]
    out = _copy(runs, tmp_path, old=True)  # no digest: the values themselves are checked
    _set_params(out, change)
    result = runner.invoke(app, ["evaluate", str(out), *EVALUATE])
    line = _one_line(result)
    assert result.exit_code == 2 and "params.pt" in line, result.output
    assert re.search(said, line), line
    assert not (out / "evaluation.parquet").exists()
    fresh = _copy(runs, tmp_path / "digest")  # with the digest: refused as another file
    _set_params(fresh, change)
    result = runner.invoke(app, ["evaluate", str(fresh), *EVALUATE])
    assert result.exit_code == 2 and "params.pt: not the file written" in _one_line(result)


def test_parameters_of_another_model_kind_in_an_old_run_are_refused_naming_the_file(runs, tmp_path):
    out = _copy(runs, tmp_path, old=True)
    shutil.copy(runs["kind"] / "params.pt", out / "params.pt")
    result = runner.invoke(app, ["evaluate", str(out), *EVALUATE])
    assert result.exit_code == 2 and "params.pt" in _one_line(result) and "model" in _one_line(result)
