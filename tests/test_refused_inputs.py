"""Hostile inputs to attention_map, diff and evaluate are refused with one line naming what is wrong (never a
number computed from NaN, never a traceback); diff never prints two different values alike."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.compare import row_texts
from lipschitz_icl.errors import UserInputError

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
TINY = ["train.eps=2e-2", "engine.draws=32", "eval.functions=32", "train.log_every=5"]
cli = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return (li.run(QUICKSTART, [*TINY, "task.L=2.0000001"], out=root / "a"),
            li.run(QUICKSTART, [*TINY, "task.L=2.0000002"], out=root / "b"))


X, XQ = np.random.default_rng(0).normal(size=(7, 5)), np.ones(5)
BAD_PROMPTS = [
    ({"x": np.full((7, 5), np.nan), "x_q": XQ}, r"prompt\.x: holds NaN or infinite"),
    ({"x": X, "x_q": np.full(5, np.inf)}, r"prompt\.x_q: holds NaN or infinite"),
    ({"x": X, "x_q": XQ, "y": np.full(7, np.nan)}, r"prompt\.y: holds NaN or infinite"),
    ({"x": X, "x_q": XQ, "y_q": np.nan}, r"prompt\.y_q: holds NaN or infinite"),
    ({"x": X, "x_q": XQ, "ids": np.full(7, 99)}, r"prompt\.ids: feature ids are integers in 0\.\.4 \(got 99\)"),
    ({"x": X, "x_q": XQ, "ids": np.full(7, 1.5)}, r"prompt\.ids: .*in 0\.\.4 \(got 1\.5\)"),
    ({"x": X, "x_q": XQ, "ids": np.ones(7, bool)}, r"prompt\.ids: .*booleans"),
    ({"x": X, "x_q": XQ, "ids": [1, 2]}, r"prompt\.ids: must be 7 integers"),
    ({"x": X, "x_q": XQ, "query_feature": -3}, r"prompt\.query_feature: .*in 0\.\.4 \(got -3\)"),
    ({"x": X, "x_q": XQ, "query_feature": "a"}, r"prompt\.query_feature: must be an integer of real numbers"),
    ({"x": X, "x_q": XQ, "foo": 1}, r"prompt: unknown key 'foo' \(allowed keys: x, x_q, y, y_q, ids, query_fe"),
    ({"x": "abc", "x_q": XQ}, r"prompt\.x: must be an \(N, 5\) array of real numbers \(got str\)"),
    ({"x": np.zeros((0, 5)), "x_q": XQ}, r"prompt\.x: needs at least one context token"),
    ({"x_q": XQ}, r"prompt: needs x"),
]


@pytest.mark.parametrize("prompt,message", BAD_PROMPTS)
def test_a_bad_given_prompt_is_refused_naming_the_key(runs, prompt, message):
    with pytest.raises(UserInputError, match=message):
        li.attention_map(runs[0], prompt=prompt)


def test_a_good_given_prompt_with_every_key_is_read(runs):
    table = li.attention_map(runs[0], prompt={"x": X, "x_q": XQ, "y": np.arange(7.0), "y_q": 1.5,
                                              "ids": [0.0, 1, 2, 3, 4, 0, 1], "query_feature": np.int64(4)})
    assert table["feature"].tolist() == [0, 1, 2, 3, 4, 0, 1] and (table["query_feature"] == 4).all()
    assert table.attrs["target"] == 1.5 and np.isfinite(table["attention"]).all()


def test_diff_tells_values_that_differ_apart(runs):
    assert row_texts([2.0000001, 2.0000002]) == ["2.0000001", "2.0000002"]
    assert row_texts([0.125, 0.125]) == ["0.125", "0.125"] and row_texts([2, 2.0]) == ["2", "2.0"]
    assert row_texts([1 / 3, 1 / 3 + 1e-16]) == ["0.3333333333333333", "0.3333333333333334"]
    res = cli.invoke(app, ["diff", str(runs[0].dir), str(runs[1].dir)], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "2.0000001" in res.output and "2.0000002" in res.output and "1 key differs" in res.output
    assert "2.0000001" in str(li.diff(*runs)) and "2.0000002" in str(li.diff(*runs))


def test_diff_of_a_summary_nested_600_deep_is_one_line(runs, tmp_path):
    deep = tmp_path / "deep"
    shutil.copytree(runs[1].dir, deep)
    summary = json.loads((deep / "summary.json").read_text())
    summary["L"] = json.loads("[" * 600 + "1" + "]" * 600)
    (deep / "summary.json").write_text(json.dumps(summary))
    res = cli.invoke(app, ["diff", str(runs[0].dir), str(deep)])
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    assert "summary.json: corrupt, L is a list (a number, text or null expected)" in res.output


@pytest.mark.parametrize("state,message", [({"Q": torch.zeros(5, 5), 0: torch.zeros(2)}, "parameter 0 is not"),
                                           ({"Q": "text"}, "not a state dict of tensors")])
def test_evaluate_of_params_with_an_odd_key_or_value_is_one_line(runs, tmp_path, state, message):
    odd = tmp_path / "odd"
    shutil.copytree(runs[0].dir, odd)
    summary = json.loads((odd / "summary.json").read_text())
    summary.pop("files")  # a run written before its files were bound together: the parameters themselves are read
    (odd / "summary.json").write_text(json.dumps(summary))
    torch.save(state, odd / "params.pt")
    res = cli.invoke(app, ["evaluate", str(odd), "--prompts", "8"])
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    assert "params.pt: " + message in res.output
