"""Feature files: read once when the config is loaded, hashed by content, carried with the config;
degenerate feature scales refused before training."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_support import refused, runner

import lipschitz_icl as li
from lipschitz_icl import features as features_module
from lipschitz_icl.cli import app
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.problem import build_problem

SMALL = ["train.steps=5", "engine.draws=8", "eval.functions=8"]
FILE = ["features.kind=file", "features.path=f.npy", "features.K=null", "features.d=null"]



def test_configs_without_a_feature_file_keep_their_hash():
    # existing sweep directories and run names depend on these values
    assert li.load_config(None).config_hash() == "6827401f119dd7c0"
    assert li.load_config("configs/quickstart.yaml").config_hash() == "2387cd15277adcb2"
    assert "file_sha256" not in li.load_config(None).to_yaml()


def test_hash_follows_the_file_content(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("f.npy", np.eye(4)[:3])
    first = li.load_config(None, FILE)
    np.save("f.npy", 2 * np.eye(4)[:3])  # same path, same shape, new content
    second = li.load_config(None, FILE)
    assert first.config_hash() != second.config_hash()
    assert second.features.file_sha256 != first.features.file_sha256


def test_path_is_resolved_when_loaded_and_the_values_travel_with_the_config(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    np.save(tmp_path / "a" / "f.npy", np.eye(4)[:3])
    np.save(tmp_path / "b" / "f.npy", 5 * np.eye(4)[:3])
    monkeypatch.chdir(tmp_path / "a")
    cfg = li.load_config(None, FILE)
    assert cfg.features.path == str(tmp_path / "a" / "f.npy")
    shipped = pickle.dumps(cfg)  # what a worker receives
    (tmp_path / "a" / "f.npy").unlink()
    monkeypatch.chdir(tmp_path / "b")  # a worker with another file under the same relative path
    problem = build_problem(pickle.loads(shipped))
    assert problem.features.delta_sep == pytest.approx(2**0.5)  # a's features, not b's (5 * sqrt 2)


def test_a_recorded_config_whose_file_changed_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("f.npy", np.eye(4)[:3])
    result = runner.invoke(app, ["run", *FILE, *SMALL, "--out", "r"])
    assert result.exit_code == 0, result.output
    recorded = yaml.safe_load(Path("r/config.yaml").read_text())["features"]
    assert recorded["path"] == str(tmp_path / "f.npy") and len(recorded["file_sha256"]) == 64
    np.save("f.npy", 3 * np.eye(4)[:3])
    line = refused(["run", "r/config.yaml", "--out", "r2"])
    assert "features.path" in line and "content changed" in line
    assert not Path("r2").exists()


def test_rerunning_after_the_file_changed_gives_another_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hashes = []
    for scale in (1, 2):
        np.save("f.npy", scale * np.eye(4)[:3])
        result = runner.invoke(app, ["run", *FILE, *SMALL, "--out", f"r{scale}"])
        assert result.exit_code == 0, result.output
        summary = yaml.safe_load(Path(f"r{scale}/summary.json").read_text())
        hashes.append((summary["config_hash"], summary["Delta"]))
    assert hashes[0][0] != hashes[1][0] and hashes[1][1] == pytest.approx(2 * hashes[0][1])


def test_file_sha256_without_a_file_is_refused():
    assert "features.file_sha256" in refused(["run", "features.file_sha256=abc"])


def test_csv_numbers_are_counted_before_parsing(tmp_path, monkeypatch):
    path = tmp_path / "f.csv"
    path.write_text("\n".join(",".join(["1"] * 50) for _ in range(40)) + "\n")  # 2000 numbers
    monkeypatch.setattr(features_module, "MAX_FILE_ELEMENTS", 1000)

    def tripwire(*args, **kwargs):
        raise AssertionError("parsed before the element limit was checked")

    monkeypatch.setattr(np, "loadtxt", tripwire)
    with pytest.raises(ConfigError, match=r"features.path: .*2000 numbers \(at most 1000\)"):
        features_module.read_feature_file(path)


@pytest.mark.parametrize(("values", "extra"), [
    (1e-300 * np.eye(3), []),  # Delta underflows: was "converged" at step 0 with delta null
    (np.eye(3), ["features.scale=5e-324"]),
    (1e200 * np.eye(3), []),  # overflows: was blamed on the task class, exit 1
    (np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1e-12]]), []),  # two features closer than rounding
])
def test_degenerate_feature_scales_are_refused(values, extra, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("f.npy", values)
    for command in ("run", "theory"):
        line = refused([command, *FILE, *SMALL, *extra, *(["--out", "r"] if command == "run" else [])])
        assert "features" in line and ("||v_k||" in line or "Delta" in line)
    assert not Path("r").exists()


def test_degenerate_scale_of_built_in_features_is_refused():
    assert "features.scale=5e-324" in refused(["run", "features.scale=5e-324", *SMALL])


def test_overriding_the_path_of_a_loaded_config_reads_the_new_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("f.npy", np.eye(4)[:3])
    np.save("g.npy", 2 * np.eye(5)[:4])
    cfg = li.load_config(None, FILE)
    other = cfg.with_overrides(["features.path=g.npy", "features.K=null", "features.d=null"])
    assert (other.features.K, other.features.d) == (4, 5)
    assert other.features.file_sha256 != cfg.features.file_sha256
    assert other.features.path == str(tmp_path / "g.npy")
