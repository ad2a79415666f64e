"""Write the built-in code-optimization benchmark as PIE-style JSONL for `selfrefine eval`.

    .venv/bin/python benchmarks/export_codeopt.py runs/codeopt_bench.jsonl
    selfrefine eval codeopt --data runs/codeopt_bench.jsonl --out runs/codeopt

Each row holds the slow program (`input`), a known faster one (`target`) and its id
(`problem_id`); the codeopt metric finds the row's test inputs in the benchmark by source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from selfrefine.tasks.codeopt_bench import load_benchmark


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "codeopt_bench.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for program in load_benchmark():
            fh.write(json.dumps({"input": program.slow, "target": program.fast, "problem_id": program.id}) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
