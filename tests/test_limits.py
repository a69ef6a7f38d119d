"""The element limit: read when checked, so a bad LIPSCHITZ_ICL_MAX_ELEMENTS is one line (exit 2) from the
command that uses it, and --help still works; 1e10 is a whole number. Work that would take minutes or
memory past the limit (exact counts, a factored d_k, a huge YAML list) is estimated and refused up front."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from lipschitz_icl import load_config
from lipschitz_icl.cli import app
from lipschitz_icl.config_io import read_yaml
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


# Work estimated before it is done (reliability issue, item 7): each refused in well under a second.

@pytest.mark.parametrize("N,K,count", [(3, 100, "171,700"), (1, 1000, "1,000")])
def test_exact_counts_whose_steps_take_minutes_are_refused_up_front(N, K, count):
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"engine\.counts: exact: N={N}, K={K} has {count} count vectors, about .* "
                       r"multiply-adds a step .*use engine\.counts=multinomial \(draws\) or mean_field"):
        load_config(None, [f"features.K={K}", f"features.d={K}", f"prompt.N={N}", "engine.counts=exact"])
    assert time.perf_counter() - start < 2
    load_config(None, ["features.K=5", "features.d=5", "prompt.N=50", "engine.counts=exact"])  # 316,251: allowed


def test_drawn_counts_whose_steps_take_minutes_are_refused_up_front():
    # K = 1000 with the default 256 draws took about 30 s a step (the test errors' K^3 per draw): refused, naming
    # the field and what is allowed; fewer draws, or the mean field, are accepted
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"engine\.draws: 256 count draws at K=1000 take about 2\.6e\+11 "
                       r"multiply-adds a step .*use fewer draws or engine\.counts=mean_field"):
        load_config(None, ["features.K=1000", "features.d=1000", "prompt.N=1", "train.steps=5"])
    assert time.perf_counter() - start < 2
    load_config(None, ["features.K=1000", "features.d=1000", "prompt.N=1", "train.steps=5", "engine.draws=64"])
    load_config(None, ["features.K=1000", "features.d=1000", "prompt.N=1", "train.steps=5", "engine.counts=mean_field"])


def test_a_huge_factored_d_k_is_refused_before_allocating():
    base = ["model.kind=factored", "model.init=auto", "engine.kind=sampled", "features.d=1000", "features.K=5"]
    with pytest.raises(ConfigError, match=r"model\.d_k: the factored model's W_Q and W_K \(2e\+08 parameters"):
        load_config(None, [*base, "model.d_k=100000"])
    with pytest.raises(ConfigError, match=r"model\.d_k: the factored model's keys \(batch=1024, N\+1=51, d_k=20000\)"):
        load_config(None, [*base, "model.d_k=20000", "engine.batch=1024"])
    load_config(None, [*base, "model.d_k=1000"])


def test_a_15_mb_yaml_list_is_refused_in_seconds(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("task:\n  params:\n    w: [" + "0.123456, " * (15 * 2**20 // 10) + "1]\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"big\.yaml: holds more than 100000 values"):
        read_yaml(path)
    assert time.perf_counter() - start < 5  # was a minute and 1.6 GB: everything was built before it was counted
    with pytest.raises(ConfigError, match=r"override 'x=.*: holds more than 100000 values"):
        load_config(None, ["x=[" + "1," * 100_001 + "1]"])
