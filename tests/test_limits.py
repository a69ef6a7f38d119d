"""The element limit: read when checked, so a bad LIPSCHITZ_ICL_MAX_ELEMENTS is one line (exit 2) from the
command that uses it, and --help still works; 1e10 is a whole number."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.limits import DEFAULT_MAX_ELEMENTS, MAX_ENV, max_elements

runner = CliRunner()


@pytest.mark.parametrize("text,value", [("", DEFAULT_MAX_ELEMENTS), ("1e10", 10**10), (" 2000 ", 2000)])
def test_whole_numbers_are_read(monkeypatch, text, value):
    monkeypatch.setenv(MAX_ENV, text)
    assert max_elements() == value


@pytest.mark.parametrize("text", ["-5", "0", "1.5", "abc", "inf", "nan"])
def test_other_values_are_refused_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv(MAX_ENV, text)
    with pytest.raises(ConfigError, match=MAX_ENV):
        max_elements()


def test_help_works_and_a_run_says_what_is_wrong(monkeypatch, tmp_path):
    monkeypatch.setenv(MAX_ENV, "-5")
    assert runner.invoke(app, ["--help"]).exit_code == 0
    result = runner.invoke(app, ["run", "train.steps=5", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and MAX_ENV in result.output
    assert not (tmp_path / "r").exists()
