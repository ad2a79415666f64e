"""Each package's docstring is its map: it names each of its modules and sub-packages, and no
module that does not exist (the engine's named ``judged`` and ``judging`` after they were gone).
The engine, its scoring sub-package, the task contract and the checks each keep one."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import selfrefine.engine

ENGINE = Path(selfrefine.engine.__file__).parent
# the parts each map names as what it depends on or what sits beside it
OUTSIDE = {
    "selfrefine.engine": {"core", "backends", "sandbox", "task", "checks"},
    "selfrefine.engine.scoring": {"judge"},
    "selfrefine.task": {"core", "checks"},
    "selfrefine.checks": {"core", "checks"},
}


@pytest.mark.parametrize("package", sorted(OUTSIDE))
def test_the_package_docstring_names_exactly_its_modules(package):
    module = importlib.import_module(package)
    where = Path(module.__file__).parent
    named = set(re.findall(r"``(\w+)``", module.__doc__ or "")) - OUTSIDE[package]
    modules = {p.stem for p in where.glob("*.py") if p.stem != "__init__"}
    packages = {p.name for p in where.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(named - modules - packages) == []  # named, but not there
    assert sorted((modules | packages) - named) == []  # there, but not named
