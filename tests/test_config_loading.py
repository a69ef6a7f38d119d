"""Config files and overrides: one YAML resolver, strict types, duplicate keys, oversized input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cli_support import refused, runner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.config_io import CoreSafeLoader, load_yaml


def test_loader_is_a_safe_loader():
    assert issubclass(CoreSafeLoader, yaml.SafeLoader)
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: !!python/object/apply:os.system ['true']")


@pytest.mark.parametrize(("text", "value"), [
    ("1e-3", 1e-3), ("1E3", 1000.0), (".5", 0.5), ("-2.", -2.0), ("1.5e+2", 150.0), ("010", 10), ("0x1f", 31),
    ("yes", "yes"), ("on", "on"), ("1:30", "1:30"), ("1_000", "1_000"), ("2020-01-01", "2020-01-01"),
])
def test_one_resolver_yaml_1_2_core_schema(text, value):
    assert load_yaml(f"a: {text}") == {"a": value}
    assert load_yaml(f"a: [{text}]") == {"a": [value]}


def test_a_float_in_a_list_reads_like_a_float_alone(tmp_path):
    # PyYAML's YAML 1.1 regex read 1e-3 as the string '1e-3' (refused in probs, accepted in lr)
    cfg = li.load_config(None, ["features.K=2", "features.d=2", "features.probs=[0.999, 1e-3]", "train.lr=1e-3"])
    assert cfg.features.probs == [0.999, 1e-3] and cfg.train.lr == 1e-3
    path = tmp_path / "c.yaml"
    path.write_text("features: {K: 2, d: 2, probs: [0.999, 1e-3]}\ntrain: {lr: 1e-3}\n")
    assert li.load_config(path).features.probs == [0.999, 1e-3]


@pytest.mark.parametrize(("override", "field"), [
    ("train.steps='100'", "train.steps"), ("task.L='2'", "task.L"), ("seed=1.5", "seed"),
    ("engine.resample=yes", "engine.resample"), ("features.K='5'", "features.K"),
])
def test_quoted_numbers_and_yaml_1_1_booleans_are_refused(override, field):
    line = refused(["run", override])
    assert field in line and "valid" in line


def test_quoted_number_in_a_file_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  steps: '100'\n")
    assert "train.steps" in refused(["run", str(path), "--out", str(tmp_path / "r")])
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("text", ["seed: 1\nseed: 2\n", "task:\n  L: 1\n  L: 2\n", "train: {lr: 1, lr: 2}\n"])
def test_duplicate_keys_are_refused_naming_the_key(text, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    line = refused(["run", str(path)])
    assert "duplicate key" in line and ("'seed'" in line or "'L'" in line or "'lr'" in line)


def test_duplicate_key_in_an_override_is_refused():
    assert "duplicate key 'width'" in refused(["run", "task.params={width: 1, width: 2}"])


def test_merge_keys_may_be_overridden():
    assert load_yaml("b: &x {c: 1}\nd:\n  <<: *x\n  c: 2\n") == {"b": {"c": 1}, "d": {"c": 2}}


def test_integer_of_more_than_4300_digits_is_refused(tmp_path):
    assert "4300 digits" in refused(["run", "seed=" + "9" * 5000])
    path = tmp_path / "c.yaml"
    path.write_text("seed: " + "9" * 5000 + "\n")
    line = refused(["run", str(path)])
    assert "c.yaml" in line and "4300 digits" in line


def test_a_long_first_override_is_an_override_not_a_file_name():
    lr = "0." + "1" * 300  # 302 characters: too long for a file name
    result = runner.invoke(app, ["run", f"train.lr={lr}", "--print-config"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["train"]["lr"] == pytest.approx(1 / 9)
    assert "no such file" in refused(["run", "x" * 300 + ".yaml"])


def test_a_nul_byte_in_a_config_path_is_refused():
    assert "no such file" in refused(["run", "c\x00.yaml"])


def test_yaml_tests_do_not_leave_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused(["run", "seed=1", "seed='x'"])
    assert list(Path(tmp_path).iterdir()) == []


@pytest.mark.parametrize("text", ["1e4", "1E4", "10000.0", "1_0000", "10_000"])
def test_a_whole_number_written_as_a_float_or_with_underscores_is_accepted_where_an_integer_is_meant(text):
    # train.steps=1e4 was refused ("valid integer, got 10000.0"); the config, and so its hash, is that of 10000
    assert li.load_config(None, [f"train.steps={text}"]) == li.load_config(None, ["train.steps=10000"])


@pytest.mark.parametrize("text", ["1.5", "1e30", "1_0.5", "_100", "true"])
def test_a_number_that_is_not_a_whole_one_is_still_refused_where_an_integer_is_meant(text):
    assert refused(["run", f"train.steps={text}", "--out", "unused"]).startswith("error: train.steps: ")
