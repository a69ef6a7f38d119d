"""Every ```python and ```bash block of README.md and of the docs pages in DOCUMENTS runs, in that
order, in one temporary directory that holds a copy of configs/ (so later blocks see the runs and sweeps
earlier ones wrote: docs/ANALYSIS.md analyses the runs docs/USAGE.md trained).

Why a small extractor here rather than pytest-examples or pytest-markdown-docs: both run Python
blocks only, each on its own, while the documents' bash and Python blocks build on each other.

How blocks run. Python blocks are executed in this process (``exec``). In bash blocks, each
``lipschitz-icl ...`` command runs in this process through typer's CliRunner (a fresh
interpreter per command would cost seconds of imports each); a leading ``VAR=value`` is set in
the environment for the command, and ``PYTHONPATH`` entries are also put on ``sys.path``, as the
interpreter would; any other command, or one with shell syntax (pipes, redirections, ``&&``,
``$``), runs in ``bash``. Every command must exit with code 0.

Markers: an HTML comment on the line right before a block changes how it runs; keep them rare.

- ``<!-- readme-test: skip REASON -->`` does not run the block (installs packages, or minutes).
- ``<!-- readme-test: file NAME -->`` writes the block to NAME instead of running it (a module
  that a later block imports).
- ``<!-- readme-test: append ARGS -->`` appends ARGS (a small size, e.g. ``train.steps=20``) to
  every ``lipschitz-icl`` command of the block (an option given twice takes the last value).

Small sizes: the copy of configs/sweeps/l_sweep.yaml is replaced by SMALL_L_SWEEP (8 short
runs instead of 30 long ones), so the sweep blocks and the figures drawn from them stay fast.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lipschitz_icl.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# the documents whose blocks run, in the order they run (a page's blocks may use what an earlier one wrote)
DOCUMENTS = ("README.md", "docs/USAGE.md", "docs/ANALYSIS.md", "docs/REPRODUCE.md", "docs/EXTENDING.md",
             "docs/LINEAR_ATTENTION.md")
MARKER = re.compile(r"^<!--\s*readme-test:\s*(skip|file|append)\b\s*(.*?)\s*-->$")
FENCE = re.compile(r"^```([\w-]*)\s*$")
SHELL_SYNTAX = re.compile(r"[|;&<>$`()]")
SMALL_L_SWEEP = """\
# configs/sweeps/l_sweep.yaml at the README test's size: 4 values of L x 2 seeds, eps = 2e-2
name: l_sweep
base: ../quickstart.yaml
overrides: [train.eps=2e-2, engine.draws=32, eval.functions=32]
grid:
  task.L: [0.8, 1.2, 2.0, 3.0]
seeds: 2
"""


@dataclass(frozen=True)
class Block:
    lang: str  # python | bash
    code: str
    line: int  # 1-based line of the opening fence
    marker: tuple[str, str] | None  # (skip | file | append, its argument)
    source: str = "README.md"  # the document, relative to the repository root


def readme_blocks(text: str, source: str = "README.md") -> list[Block]:
    """The fenced python and bash blocks at the top level of a Markdown text, in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(previous)
        if fence.group(1) in ("python", "bash"):
            blocks.append(Block(fence.group(1), "\n".join(lines[i + 1:end]) + "\n", i + 1,
                                marker.groups() if marker else None, source))
        i = end + 1
    return blocks


def shell_commands(code: str) -> list[str]:
    """The commands of a bash block: backslash continuations joined, blank and comment lines dropped."""
    joined = re.sub(r"\\\n", " ", code)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_command(command: str, append: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = shlex.split(command, comments=True)
    env = {}
    while argv and re.match(r"^[A-Za-z_]\w*=", argv[0]):
        key, value = argv.pop(0).split("=", 1)
        env[key] = value
    if not argv or argv[0] != "lipschitz-icl" or SHELL_SYNTAX.search(command.split("#")[0]):
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", command], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        return
    with monkeypatch.context() as patch:
        for path in reversed(env.get("PYTHONPATH", "").split(os.pathsep)):
            if path:
                patch.syspath_prepend(os.path.abspath(path))
        args = argv[1:] + append
        result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, f"{shlex.join(argv[:1] + args)} exited {result.exit_code}:\n{result.output}"


BLOCKS = [block for doc in DOCUMENTS for block in readme_blocks((ROOT / doc).read_text(encoding="utf-8"), doc)]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A temporary directory with a copy of configs/ (the sweep spec at its small size), as cwd."""
    root = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "configs", root / "configs")
    (root / "configs" / "sweeps" / "l_sweep.yaml").write_text(SMALL_L_SWEEP)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        yield root


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.source}:{b.line}" for b in BLOCKS])
def test_readme_block_runs(block: Block, workspace: Path, monkeypatch: pytest.MonkeyPatch,
                           isolated_registry: None) -> None:
    """Each block runs; a paper or claim its Python registers is gone after it (the README's plugin example
    would otherwise stay in the suites that later tests list)."""
    kind, argument = block.marker or ("", "")
    if kind == "skip":
        pytest.skip(argument or "marked skip")
    if kind == "file":
        (workspace / argument).write_text(block.code)
        return
    if block.lang == "python":
        exec(compile(block.code, f"{block.source}:{block.line}", "exec"), {"__name__": "__readme__"})  # noqa: S102
        return
    for command in shell_commands(block.code):
        run_command(command, shlex.split(argument) if kind == "append" else [], monkeypatch)


def test_the_extractor_finds_blocks_and_markers():
    text = "x\n<!-- readme-test: skip slow -->\n\n```bash\nls\n```\n```yaml\na: 1\n```\n```python\nprint(1)\n```\n"
    blocks = readme_blocks(text)
    assert [(b.lang, b.line, b.marker) for b in blocks] == [("bash", 4, ("skip", "slow")), ("python", 10, None)]
    assert shell_commands("a \\\n  b  # c\n# d\n\ne\n") == ["a    b  # c", "e"]


def test_every_document_has_blocks_that_run():
    """A page listed in DOCUMENTS whose blocks all vanished (renamed, moved) would otherwise pass unnoticed."""
    for doc in DOCUMENTS:
        assert any(b.source == doc and not (b.marker and b.marker[0] == "skip") for b in BLOCKS), doc


def test_the_readme_answers_the_first_questions_on_its_first_screen():
    """The README stays short, and its first 40 lines say how to run the main job and the tests."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    first_screen = "\n".join(lines[:40])
    assert "lipschitz-icl reproduce all --quick" in first_screen and "python -m pytest -q" in first_screen


def test_skips_are_rare_and_give_a_reason():
    skips = [b for b in BLOCKS if b.marker and b.marker[0] == "skip"]
    assert len(skips) <= 3 and all(b.marker[1] for b in skips)
    assert len(BLOCKS) - len(skips) >= 12  # the rest all run


def test_a_module_in_the_working_directory_is_not_importable_without_pythonpath(tmp_path, monkeypatch):
    """The README's plugin command failed as first written (the console script does not put the
    working directory on sys.path); the in-process runner must not hide that."""
    (tmp_path / "readme_probe_tasks.py").write_text("")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="cannot be imported"):
        run_command("lipschitz-icl run plugins=[readme_probe_tasks] train.steps=1", [], monkeypatch)
    run_command("PYTHONPATH=. lipschitz-icl run plugins=[readme_probe_tasks] train.steps=1 --out r", [], monkeypatch)
