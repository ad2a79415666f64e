"""How often commongen's scene check (tasks/scene.py) flags text as a list: human sentences,
which it must essentially never flag, and returned outputs (issue 45). No model call.

    .venv/bin/python benchmarks/scene_check.py                                  # packaged + docs
    .venv/bin/python benchmarks/scene_check.py --shared ../shared/datasets      # + Yelp and FED
    .venv/bin/python benchmarks/scene_check.py --runs runs/x/results.jsonl      # an eval's outputs

- **human sentences**: each sentence of the GSM8K dev questions (packaged), and with
  ``--shared`` of the Yelp reviews and FED turns, checked with its own content words as its
  concepts (so every short fragment "uses a concept": the strictest reading);
- **returned outputs**: those docs/judged_loop.json keeps (``--preset best`` on commongen
  rows 56-75), and of each ``--runs`` file: eval rows (``{"result": {"input", "output"}}``)
  or ``{"input"|"concepts", "output"}`` lines. The share flagged is
  :func:`selfrefine.tasks.commongen.is_list_like`'s.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from selfrefine.tasks.commongen import is_list_like
from selfrefine.tasks.scene import sentences

ROOT = Path(__file__).resolve().parent.parent
STOP = frozenset(
    "a an the and or but if then so of to in on at by for with from into over under about as is are was were be "
    "been it its this that these those he she they we you i me my our your their his her them us him do does did "
    "have has had not no yes will would can could should may might must there here what which who when where why "
    "how all any some each very just too also than more most much many such own same other only out up down off".split()
)


def content_words(sentence: str) -> list[str]:
    return sorted({w for w in re.findall(r"[a-z]{3,}", sentence.lower()) if w not in STOP})


def human(shared: Path | None) -> Iterator[tuple[str, str]]:
    """(source, sentence) pairs of human text."""
    data = resources.files("selfrefine.evaluation").joinpath("data/gsm8k.dev.jsonl").read_text(encoding="utf-8")
    for line in data.splitlines():
        yield from (("gsm8k", s) for s in sentences(json.loads(line)["input"]))
    if shared is None:
        return
    for line in (shared / "yelp_extreme.dev.jsonl").read_text(encoding="utf-8").splitlines():
        for paragraph in json.loads(line)["review"].replace("\\n", "\n").splitlines():
            yield from (("yelp", s) for s in sentences(paragraph))
    for item in json.loads((shared / "fed.dev.json").read_text(encoding="utf-8")):
        for turn in item["context"].splitlines():
            yield from (("fed", s) for s in sentences(re.sub(r"^(User|System):\s*", "", turn)))


def outputs(runs: list[Path]) -> Iterator[tuple[str, str, list[str] | str]]:
    """(source, output, concepts) of returned outputs."""
    rows = resources.files("selfrefine.evaluation").joinpath("data/commongen_hard.dev.jsonl").read_text("utf-8")
    concepts = [json.loads(line)["concepts"] for line in rows.splitlines()]
    for entry in json.loads((ROOT / "docs" / "judged_loop.json").read_text(encoding="utf-8")):
        if entry.get("task") == "commongen":
            for key, text in entry["best"].get("returned_outputs", {}).items():
                yield "docs/judged_loop.json", text, concepts[int(key.rsplit("-", 1)[1])]
    for path in runs:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            row = row.get("result") or row
            if row and row.get("output") is not None:
                yield str(path), row["output"], row.get("concepts") or row["input"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", type=Path, help="a folder with yelp_extreme.dev.jsonl and fed.dev.json")
    p.add_argument("--runs", type=Path, nargs="*", default=[], help="JSONL files of returned outputs")
    p.add_argument("--show", type=int, default=5, help="flagged texts shown per source")
    args = p.parse_args(argv)
    seen, flagged = Counter(), Counter()
    for source, sentence in human(args.shared):
        seen[source] += 1
        if is_list_like(sentence, content_words(sentence)):
            flagged[source] += 1
            if flagged[source] <= args.show:
                print(f"  flagged ({source}): {sentence[:160]}")
    for source in seen:
        print(f"human sentences, {source}: {flagged[source]} of {seen[source]} flagged")
    seen, flagged = Counter(), Counter()
    for source, text, concepts in outputs(args.runs):
        seen[source] += 1
        flagged[source] += is_list_like(text, concepts)
    for source in seen:
        print(f"returned outputs, {source}: {flagged[source]} of {seen[source]} flagged as lists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
