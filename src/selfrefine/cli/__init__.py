"""The ``selfrefine`` command line (``commands``) and its live display of a run (``display``)."""

from .commands import cli, main

__all__ = ["cli", "main"]
