"""The engine package's docstring is its map: it names each of its modules and sub-packages,
and no module that does not exist (it named ``judged`` and ``judging`` after they were gone)."""

from __future__ import annotations

import re
from pathlib import Path

import selfrefine.engine

ENGINE = Path(selfrefine.engine.__file__).parent
OUTSIDE = {"core", "backends", "sandbox"}  # the parts it names as what it depends on


def test_the_engine_docstring_names_exactly_its_modules():
    named = set(re.findall(r"``(\w+)``", selfrefine.engine.__doc__ or "")) - OUTSIDE
    modules = {p.stem for p in ENGINE.glob("*.py") if p.stem != "__init__"}
    packages = {p.name for p in ENGINE.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(named - modules - packages) == []  # named, but not there
    assert sorted((modules | packages) - named) == []  # there, but not named
