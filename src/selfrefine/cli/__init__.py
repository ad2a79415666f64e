"""The ``selfrefine`` command line (``commands``) and its live display of a run (``display``).

``cli`` is the group with every command; ``main`` starts it with click alone (:mod:`.group`)."""

from typing import Any

from .group import main


def __getattr__(name: str) -> Any:
    if name == "cli":  # the group with its commands registered
        from .commands import cli

        return cli
    raise AttributeError(f"module 'selfrefine.cli' has no attribute {name!r}")


__all__ = ["cli", "main"]
