"""Strategies by name: every strategy, built-in or a third party's, is a plugin of the group
``selfrefine.strategies`` (``name = "package.module:StrategyClass"``), as tasks and backends
are: the built-ins registered in-process (:mod:`selfrefine.core.builtins`), a third party's
by an entry point of its package. A new strategy is one module: a :class:`~.base.Strategy` subclass and the
:class:`~.base.Drafter` it makes, registered by its package; the engine finds it by the
name a run gives (``strategy="NAME"``, ``--strategy NAME``, ``"strategy": "NAME"``).
"""

from __future__ import annotations

import difflib
import importlib.metadata

from ...core.builtins import STRATEGIES_GROUP
from ...core.entrypoints import entry_points, registered
from ...core.errors import ConfigError
from .base import Strategy

__all__ = ["STRATEGIES_GROUP", "find_strategy", "strategy_entry_points", "strategy_names"]


def strategy_entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Every registered strategy by name (nothing is imported until one is used)."""
    return entry_points(STRATEGIES_GROUP)


def strategy_names() -> tuple[str, ...]:
    """The registered strategies' names: those registered in-process (the built-ins first),
    then the entry points' in name order."""
    first = registered(STRATEGIES_GROUP)
    return (*first, *sorted(set(strategy_entry_points()) - set(first)))


def find_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; an unknown name is a ConfigError that lists them."""
    registered = strategy_entry_points()
    if name not in registered:
        valid = list(strategy_names())
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown strategy {name!r}{hint}; strategies: {', '.join(valid)}")
    found = registered[name].load()
    strategy = found() if isinstance(found, type) else found
    if not isinstance(strategy, Strategy):
        raise ConfigError(f"the strategy entry point {name!r} ({registered[name].value}) is not a Strategy")
    return strategy
