"""Safe loading and determinism through the CLI's files: YAML only through the safe loader, NumPy
without pickles, no eval/exec, run names that cannot leave the output folder, identical metrics for
the same config and seed."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.store import safe_name

runner = CliRunner()
SRC = Path(__file__).resolve().parents[1] / "src" / "lipschitz_icl"
SMALL = ["train.steps=30", "train.log_every=3", "engine.draws=16", "eval.functions=16", "engine.batch=32"]


def _refused(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


# --------------------------------------------------------------------------- determinism (CLI files)


@pytest.mark.parametrize("engine", ["kernel", "sampled"])
def test_same_config_and_seed_give_identical_metrics_files(engine, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"seed: 11\nengine: {{kind: {engine}, batch: 32}}\nfeatures: {{noise: 0.2, kind: gaussian}}\n"
                   "task: {kind: relu_net, kernel_samples: 256}\n")
    for out in ("a", "b"):
        result = runner.invoke(app, ["run", str(cfg), *SMALL, "--out", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
    a, b = (pd.read_parquet(tmp_path / out / "metrics.parquet") for out in ("a", "b"))
    assert len(a) > 100
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    sa, sb = (json.loads((tmp_path / out / "summary.json").read_text()) for out in ("a", "b"))
    sa.pop("wall_s"), sb.pop("wall_s")
    assert sa == sb
    assert (tmp_path / "a" / "config.yaml").read_text() == (tmp_path / "b" / "config.yaml").read_text()
    # the recorded config reproduces the run too
    result = runner.invoke(app, ["run", str(tmp_path / "a" / "config.yaml"), "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(a, pd.read_parquet(tmp_path / "c" / "metrics.parquet"), check_exact=True)
    other = runner.invoke(app, ["run", str(cfg), *SMALL, "seed=12", "--out", str(tmp_path / "d")])
    assert other.exit_code == 0
    assert not a.value.equals(pd.read_parquet(tmp_path / "d" / "metrics.parquet").value)


# --------------------------------------------------------------------------- YAML and NumPy


@pytest.mark.parametrize("payload", [
    "!!python/object/apply:os.system ['touch pwned']",
    "seed: !!python/object/apply:os.system ['touch pwned']",
    "task: !!python/object/new:subprocess.Popen [['touch', 'pwned']]",
    "name: !!python/name:os.system",
])
def test_yaml_with_python_tags_is_refused(payload, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("c.yaml").write_text(payload + "\n")
    line = _refused(runner.invoke(app, ["run", "c.yaml"]))
    assert "c.yaml" in line and "malformed YAML" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]  # nothing ran, nothing created


def test_pickled_feature_file_is_refused_and_never_unpickled(tmp_path, monkeypatch):
    import pickle

    monkeypatch.chdir(tmp_path)

    class Boom:
        def __reduce__(self):
            return (Path("pwned").touch, ())

    buf = io.BytesIO()
    np.save(buf, np.array([Boom(), Boom()], dtype=object), allow_pickle=True)
    Path("f.npy").write_bytes(buf.getvalue())
    Path("raw.npy").write_bytes(pickle.dumps(Boom()))
    for name in ("f.npy", "raw.npy"):
        line = _refused(runner.invoke(app, ["run", "features.kind=file", f"features.path={name}"]))
        assert name in line
    assert not Path("pwned").exists()


UNSAFE = [
    (re.compile(r"(?<![\w.])eval\("), "eval("),
    (re.compile(r"(?<![\w.])exec\("), "exec("),
    (re.compile(r"(?<![\w.])(__import__|compile)\("), "__import__/compile("),
    (re.compile(r"pickle\.loads?\(|import pickle|cloudpickle|dill\."), "pickle"),
    (re.compile(r"yaml\.(load|load_all|unsafe_load|full_load)\((?![^)]*SafeLoader)"), "yaml.load without SafeLoader"),
    (re.compile(r"yaml\.(Unsafe|Full)?Loader\b"), "an unsafe YAML loader"),
    (re.compile(r"torch\.load\((?!(?:[^()]|\([^()]*\))*weights_only=True)"),  # one level of nested calls
     "torch.load without weights_only=True"),
    (re.compile(r"np\.load\((?![^)]*allow_pickle=False)"), "np.load without allow_pickle=False"),
    (re.compile(r"allow_pickle=True"), "allow_pickle=True"),
    (re.compile(r"os\.system\(|shell=True"), "a shell"),
]


def test_no_unsafe_loading_or_code_execution_in_the_source():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = re.sub(r"#.*$", "", line)
            for pattern, what in UNSAFE:
                if pattern.search(code):
                    offenders.append(f"{path.relative_to(SRC)}:{i}: {what}: {line.strip()}")
    assert offenders == []
    # and the patterns do catch what they are meant to catch
    for bad in ("x = eval(s)", "exec(code)", "yaml.load(f)", "torch.load(p)", "np.load(p)", "pickle.load(f)",
                "yaml.load(f, Loader=yaml.FullLoader)", "np.load(p, allow_pickle=True)",
                "torch.load(io.BytesIO(raw), map_location='cpu')"):
        assert any(p.search(bad) for p, _ in UNSAFE), bad
    for ok in ("model.eval()", "yaml.safe_load(t)", "torch.load(p, weights_only=True)",
               "torch.load(io.BytesIO(raw), weights_only=True)", "np.load(p, allow_pickle=False)",
               "task.evaluate(f, x)"):
        assert not any(p.search(ok) for p, _ in UNSAFE), ok


# --------------------------------------------------------------------------- names and paths


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "..", ".", ".hidden", "a\\b", "~", "x" * 129, "a b", ""])
def test_run_names_cannot_escape_the_output_folder(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _refused(runner.invoke(app, ["run", *SMALL, f"name={name!r}"]))  # quoted: YAML reads a string
    assert line.startswith("error: name:") and "letters, digits" in line
    assert list(tmp_path.iterdir()) == []


def test_a_hostile_task_class_name_stays_inside_runs(tmp_path, monkeypatch):
    from lipschitz_icl import register_task
    from lipschitz_icl.tasks.base import _REGISTRY
    from lipschitz_icl.tasks.builtin import Linear

    class Hostile(Linear):
        name = "../../../escaped/x"

    register_task(Hostile)
    try:
        monkeypatch.chdir(tmp_path)
        run = li.run(None, [*SMALL, f"task.kind={Hostile.name}"])
        assert run.dir.resolve().parent == (tmp_path / "runs").resolve()
        assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    finally:
        _REGISTRY.pop(Hostile.name)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(text=st.text(max_size=80))
def test_safe_name_is_always_one_plain_folder_name(text):
    name = safe_name(text)
    assert name and "/" not in name and "\\" not in name and not name.startswith(".")
    assert name not in (".", "..") and len(name) <= 128
    assert re.fullmatch(r"[A-Za-z0-9._-]+", name)
    assert (Path("runs") / name).parent == Path("runs")
