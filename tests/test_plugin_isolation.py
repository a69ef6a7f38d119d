"""A plugin's import cannot take the command over: no exit code of its own, no command-line arguments, nothing
printed into a command's output; a failure is one line naming the module (exit 2)."""

import subprocess
import sys
import textwrap

import pytest

from lipschitz_icl.config_io import PluginImportError, import_isolated

PLUGINS = {
    "exit_zero_plugin": "import sys\nsys.exit(0)\n",
    "exit_three_plugin": "import sys\nsys.exit(3)\n",
    "argv_plugin": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--only-mine", required=True)
        parser.parse_args()
    """,
    "lenient_argv_plugin": """
        import argparse
        ARGS = argparse.ArgumentParser().parse_args()  # fails on a command's own arguments unless it sees none
    """,
    "printing_plugin": "print('hello from the plugin')\n",
}


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    for name, text in PLUGINS.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in PLUGINS:
        sys.modules.pop(name, None)
    return tmp_path


@pytest.mark.parametrize("name, why", [
    ("exit_zero_plugin", "called sys.exit(0) while importing"),
    ("exit_three_plugin", "called sys.exit(3) while importing"),
    ("argv_plugin", "called sys.exit(2) while importing; it printed: "),
])
def test_an_exit_at_import_is_an_error_saying_so(plugin_dir, name, why):
    with pytest.raises(PluginImportError, match=why.replace("(", r"\(").replace(")", r"\)")):
        import_isolated(name)


def test_a_plugin_sees_no_command_line_and_prints_to_stderr(plugin_dir, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["lipschitz-icl", "run", "--out", "x"])
    import_isolated("lenient_argv_plugin")
    import_isolated("printing_plugin")
    out, err = capsys.readouterr()
    assert out == "" and "hello from the plugin" in err
    assert sys.argv == ["lipschitz-icl", "run", "--out", "x"]


def _cli(args: list[str], cwd) -> subprocess.CompletedProcess:
    env_path = f"PYTHONPATH={cwd}"
    return subprocess.run(["env", env_path, sys.executable, "-m", "lipschitz_icl", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", ["exit_zero_plugin", "exit_three_plugin", "argv_plugin"])
def test_run_with_an_exiting_plugin_exits_2_with_one_line(plugin_dir, name):
    result = _cli(["run", f"plugins=[{name}]", "train.steps=5", "--out", str(plugin_dir / "r")], plugin_dir)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: plugins: ") and name in lines[0]
    assert not (plugin_dir / "r").exists()


def test_a_printing_plugin_leaves_the_markdown_list_clean(plugin_dir):
    plain = _cli(["reproduce", "--list", "--markdown"], plugin_dir)
    with_plugin = _cli(["reproduce", "--list", "--markdown", "--plugins", "printing_plugin"], plugin_dir)
    assert plain.returncode == with_plugin.returncode == 0
    assert with_plugin.stdout == plain.stdout and "hello from the plugin" in with_plugin.stderr
