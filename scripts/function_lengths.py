"""Functions over the house limits: 40 lines in src/selfrefine/engine/, task/ and checks/ (engine code before they moved out), 60 elsewhere in src/.

Run by the test suite (tests/project/test_architecture.py) and by hand: ``python scripts/function_lengths.py``.
A function's length is its lines from ``def`` to its last statement, decorators excluded.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "selfrefine"


def limit(path: Path) -> int:
    return 40 if path.relative_to(ROOT).parts[0] in ("engine", "task", "checks") else 60


def too_long(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit(path):
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno} {node.name} {lines} lines (limit {limit(path)})"
                    )
    return found


if __name__ == "__main__":
    over = too_long()
    print("\n".join(over) or "none over the limits")
    sys.exit(1 if over else 0)
