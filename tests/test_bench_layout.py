"""The benchmark package's layout: no imports inside functions, no import of the CLI, short functions."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "lipschitz_icl"
FILES = sorted((PKG / "bench").rglob("*.py")) + [PKG / "cli" / "bench.py", PKG / "cli" / "evaluate.py"]


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_import_inside_a_function(path):
    tree = ast.parse(path.read_text())
    inner = [(f.name, n.lineno) for f in _functions(tree) for n in ast.walk(f)
             if isinstance(n, ast.Import | ast.ImportFrom)]
    assert inner == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_functions_are_under_60_lines(path):
    tree = ast.parse(path.read_text())
    long = [(f.name, f.end_lineno - f.lineno + 1) for f in _functions(tree) if f.end_lineno - f.lineno + 1 > 60]
    assert long == []


def test_the_bench_never_imports_the_cli():
    for path in sorted((PKG / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                assert not module.lstrip(".").startswith("cli") and "lipschitz_icl.cli" not in module, (path, module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("lipschitz_icl.cli") for a in node.names), path


def test_sections_are_named_files_not_sec_modules():
    names = {p.stem for p in (PKG / "bench").rglob("*.py")}
    assert not any(n.startswith("sec_") for n in names)
    assert {"step_time", "scaling", "memory", "batched", "evaluate", "reproduce"} <= names
