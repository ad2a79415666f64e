"""The house rules that code review would otherwise have to remember: short functions,
a small loop module, no import circle between the package's modules, no import that a
"never" rule of the layer map (docs/design/layers.json) forbids, click only in cli/,
docstrings that name real modules."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src" / "selfrefine"
LAYERS = json.loads((ROOT / "docs" / "design" / "layers.json").read_text())


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


# -- the layer map: each "never" rule of docs/design/layers.json, read from the code -------


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")


def _absolute(name: str, level: int, package: str) -> str:
    """``name`` imported ``level`` dots up from ``package`` (0: as written)."""
    if not level:
        return name
    base = package
    for _ in range(level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{name}" if name else base


def _every_import(source: str, module: str, is_package: bool) -> set[str]:
    """Every package module a module's source imports, wherever it sits (top level, inside a
    function, under TYPE_CHECKING): ``import x``, ``from x import y`` (and x.y where that is a
    module: ``from .. import tasks``), and ``importlib.import_module("x")`` / ``__import__("x")``
    with a literal name."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            found.add(base)
            found.update(n for n in (f"{base}.{alias.name}" for alias in node.names) if _is_module(n))
        elif isinstance(node, ast.Call) and _names_a_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                dots = len(first.value) - len(first.value.lstrip("."))
                found.add(_absolute(first.value.lstrip("."), dots, package))
    return {name for name in found if name == "selfrefine" or name.startswith("selfrefine.")}


def _is_module(name: str) -> bool:
    where = SRC.parent.joinpath(*name.split("."))
    return where.is_dir() or where.with_suffix(".py").is_file()


def _names_a_module(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


def _part_of(module: str) -> str | None:
    """The layer map's part (CLI, Engine, …) a module or package belongs to, by its folder or file."""
    where = "src/" + module.replace(".", "/")
    for part, spec in LAYERS["parts"].items():
        for place in spec["is"]:
            if (where + "/").startswith(place) if place.endswith("/") else f"{where}.py" == place:
                return part
    return None


def _broken_rules(module: str, source: str, is_package: bool = False) -> list[str]:
    """The "never" rules of the layer map that a module's imports break, one line each."""
    never = {(low, high): why for low, high, why in LAYERS["never"]}
    part = _part_of(module)
    broken = []
    for name in sorted(_every_import(source, module, is_package)):
        rule = (part, _part_of(name))
        if rule in never:
            broken.append(f"{module} imports {name}: {rule[0]} never imports {rule[1]} ({never[rule]})")
    return broken


def test_every_module_sits_in_one_part_of_the_layer_map():
    outside = [m for m in map(_module_of, SRC.rglob("*.py")) if _part_of(m) is None]
    assert outside == ["selfrefine"], outside  # only the package's own __init__, the public API above all parts


def test_no_module_breaks_a_never_rule_of_the_layer_map():
    assert len(LAYERS["never"]) >= 20, "the rules are read from layers.json"
    broken = [
        b for p in SRC.rglob("*.py") for b in _broken_rules(_module_of(p), p.read_text(), p.name == "__init__.py")
    ]
    assert broken == []


def test_the_layer_check_sees_lazy_string_and_relative_imports():
    # each of these, written in an engine module, would break "Engine never imports Tasks"
    lazy = "def find(name):\n    from ..tasks import get_task\n    return get_task(name)\n"
    by_string = "import importlib\n\ndef find():\n    return importlib.import_module('selfrefine.tasks.gsm8k')\n"
    relative_string = "from importlib import import_module\nM = import_module('..tasks', __package__)\n"
    package_name = "from .. import tasks\n"
    for source in (lazy, by_string, relative_string, package_name):
        [line] = _broken_rules("selfrefine.engine.loop", source)
        assert "Engine never imports Tasks" in line, source
    assert _broken_rules("selfrefine.tasks.gsm8k", "from ..task.task import Task\n") == []  # an allowed arrow
    assert _broken_rules("selfrefine.tasks.gsm8k", "from ..engine.loop import SelfRefine\n") != []  # a task, the loop
    assert _broken_rules("selfrefine.checks.declared", "from ..task.task import Task\n") != []  # a check, a task
    assert _broken_rules("selfrefine.core.config", "import selfrefine.cli.commands\n") != []  # a plain import


def _imports_of_package(folder: str) -> set[str]:
    return {
        name
        for p in (SRC / folder).rglob("*.py")
        for name in _every_import(p.read_text(), _module_of(p), p.name == "__init__.py")
    }


def test_the_tasks_import_the_contract_and_the_checks_not_the_loop():
    # tasks/ builds on task/ and checks/; the loop (engine/) takes a task object and is never imported by one
    imported = _imports_of_package("tasks")
    assert sorted(n for n in imported if n == "selfrefine.engine" or n.startswith("selfrefine.engine.")) == []
    assert any(n.startswith("selfrefine.task.") for n in imported)
    assert any(n.startswith("selfrefine.checks.") for n in imported)


def test_the_contract_and_the_checks_sit_below_the_loop():
    # checks/ knows no task and no loop; task/ knows the checks but no loop
    below = {"selfrefine.core", "selfrefine.checks"}
    for folder, allowed in (("checks", below), ("task", below | {"selfrefine.task"})):
        outside = sorted(
            n for n in _imports_of_package(folder) if n != "selfrefine" and ".".join(n.split(".")[:2]) not in allowed
        )
        assert outside == [], (folder, outside)


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
