"""numba's on-disk cache finds a compiled function stale by the stamp of its own file only, yet a cached function
holds the compiled code of what it calls from other files. Every compiled module that calls compiled code from
another file of the package therefore names that file's digest in ``CALLEE_SOURCES``: an edit of the callee then
changes the caller's file too (the test fails until its digest is updated), and no stale copy is ever loaded."""

import ast
import hashlib
import importlib
import importlib.util
from pathlib import Path

import pytest

import lipschitz_icl

ROOT = Path(lipschitz_icl.__file__).parent
pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


def _digest(rel: str) -> str:
    return hashlib.sha256((ROOT / rel).read_bytes().replace(b"\r\n", b"\n")).hexdigest()[:16]


def _compiled(path: Path) -> bool:
    return "numba.njit" in path.read_text(encoding="utf-8")


def _compiled_imports(path: Path) -> set[str]:
    """The package's files with compiled functions that ``path`` imports from (relative imports)."""
    found = set()
    package = path.parent.relative_to(ROOT).parts
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level and node.module:
            base = package[: len(package) - (node.level - 1)]
            target = ROOT.joinpath(*base, *node.module.split(".")).with_suffix(".py")
            if target.is_file() and _compiled(target):
                found.add(target.relative_to(ROOT).as_posix())
    return found


CALLERS = sorted(p for p in ROOT.rglob("*.py") if _compiled(p) and _compiled_imports(p))


def test_the_known_callers_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in CALLERS}
    assert {"stopping_compiled.py", "engines/kernel_fused.py"} <= names


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_caller_names_the_current_digest_of_its_compiled_callees(path: Path):
    rel = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
    module = importlib.import_module(f"lipschitz_icl.{rel}")
    expected = {callee: _digest(callee) for callee in sorted(_compiled_imports(path))}
    assert getattr(module, "CALLEE_SOURCES", None) == expected, (
        f"set CALLEE_SOURCES = {expected!r} in {path.relative_to(ROOT)}")
