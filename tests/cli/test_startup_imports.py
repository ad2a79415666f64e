"""``selfrefine --help`` loads no model runtime, server, SDK or report library (issue 46, item 22:
it took 1.8 s idle). Which modules a command imports is deterministic, unlike its time."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("llama_cpp", "openai", "fastapi", "uvicorn", "starlette", "jsonschema", "numpy", "matplotlib")

PROBE = """
import json, sys
sys.argv = ["selfrefine", *sys.argv[1:]]
from selfrefine.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in %r or m == "selfrefine.evaluation.report")))
"""


def _imported(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,), *args], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_help_imports_no_heavy_library():
    assert _imported("--help") == []


def test_a_commands_help_imports_none_either():
    assert _imported("report", "--help") == []
