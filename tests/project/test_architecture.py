"""The house rules that code review would otherwise have to remember: short functions,
a small loop module, no import circle between the package's modules, click only in cli/,
docstrings that name real modules."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src" / "selfrefine"


def _function_lengths():
    spec = importlib.util.spec_from_file_location("function_lengths", ROOT / "scripts" / "function_lengths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_function_over_the_limits():
    # 40 lines in engine/, 60 elsewhere in src/ (scripts/function_lengths.py lists offenders)
    assert _function_lengths().too_long() == []


def test_the_loop_module_stays_small():
    assert len((SRC / "engine" / "loop.py").read_text().splitlines()) < 400
    assert all(len(p.read_text().splitlines()) < 600 for p in SRC.rglob("*.py")), "a module over 600 lines"


def _imports(path: Path) -> set[str]:
    """The package modules a file imports (relative imports resolved)."""
    module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            name = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            found.add(name)
    return {n for n in found if n.startswith("selfrefine")}


def test_no_import_circle_between_modules():
    files = {".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in SRC.rglob("*.py")}  # fmt: skip
    graph = {m: {i for i in _imports(p) if i in files and not files[i].name == "__init__.py"} for m, p in files.items()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            assert state.get(nxt) != 1, f"import circle: {' -> '.join([*path, node, nxt])}"
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


def _imports_click(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.partition(".")[0] == "click" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").partition(".")[0] == "click":
            return True
    return False


def test_only_the_cli_imports_click():
    # commands, flags and echo belong to cli/; evaluation, service, … are library parts it wraps
    outside = [p.relative_to(SRC) for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != "cli"]
    assert sorted(str(p) for p in outside if _imports_click(SRC / p)) == []


# :mod:`selfrefine.x`, :class:`~selfrefine.x.Y`, … in docstrings and comments
_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc):`~?(?:[^`<]*<)?(selfrefine(?:\.\w+)*)>?`")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_docstrings_name_real_modules():
    named = {(str(p.relative_to(SRC)), m) for p in SRC.rglob("*.py") for m in _ROLE.findall(p.read_text())}
    assert named, "the pattern finds the references"
    assert sorted((where, name) for where, name in named if not _resolves(name)) == []
