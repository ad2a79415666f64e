"""Argument helpers shared by the benchmark scripts."""

from __future__ import annotations

import sys


def names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    """A comma-separated choice of ``allowed`` names; an unknown one exits with the choices."""
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    if bad := [n for n in chosen if n not in allowed]:
        sys.exit(f"unknown {what}(s) {', '.join(bad)}; choose from {', '.join(allowed)}")
    return chosen
