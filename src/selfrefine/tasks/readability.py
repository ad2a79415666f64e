"""Code readability (CodeNet programs): rewrite a Python program so it is easier to read.

The feedback gives ONE concrete readability suggestion (names, a comment, a helper
function); the refiner applies it. Like the paper the loop has no natural end and runs a
fixed number of rounds (5). The metric is static analysis with :mod:`ast` and
:mod:`tokenize`, never the model's opinion:

* ``comments_per_line`` = lines holding a ``#`` comment (whole-line or trailing) divided by
  lines holding code (non-blank lines with at least one token that is not a comment).
  Docstrings are code lines, not comments: they are string statements to the tokenizer.
* ``functions`` = number of ``def``/``async def`` (lambdas are not counted: they do not
  split a program into named, documented steps, which is what the paper measures).
* ``meaningful_share`` = share of the distinct names the program *binds* (assignment,
  loop, comprehension, ``with``/``except`` targets, arguments, function/class names,
  import aliases) that are meaningful, see :func:`is_meaningful`. Names used but bound
  elsewhere (``print``, ``input``) are the language's choice, not the author's.

``metric()`` returns ``meaningful_share`` alone: it is bounded in 0..1, comparable across
programs of any length, and it is what most suggestions change; the other two numbers are
in :func:`readability_stats`. A draft that does not parse scores 0 on everything.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Any

from pydantic import BaseModel, Field

from ..core.errors import DraftParseError, FeedbackParseError
from ..core.records import Feedback, Verification
from ..task.task import LOOP_BEST, Capabilities, Task, TaskDefaults, system_message
from .parsing import FENCE, extract_program, parse_python

# Single letters that are conventional loop indices, and short words that are real words.
SHORT_ALLOWED = frozenset({"i", "j", "k", "id", "ok", "db", "io", "os"})
# Names that say nothing about what they hold, with or without a number (tmp, var1, foo2).
PLACEHOLDERS = frozenset(
    {
        "tmp",
        "temp",
        "foo",
        "bar",
        "baz",
        "qux",
        "var",
        "val",
        "res",
        "ret",
        "obj",
        "arr",
        "lst",
        "ans",
        "dummy",
        "stuff",
        "thing",
        "data",
        "xxx",
        "aaa",
        "abc",
        "hoge",
        "fuga",
    }
)
MIN_LENGTH = 3
_NUMBERED = re.compile(r"^([a-z]+?)_?\d+$")  # a1, x2, tmp3, var_1

_LABEL = re.compile(r"^\s*(?:suggestion|feedback|improvement)\s*\d*\s*[:.)-]\s*", re.I)
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")

ASPECT_WORDS: dict[str, tuple[str, ...]] = {
    "naming": ("name", "rename", "variable", "identifier"),
    "comments": ("comment", "docstring", "explain", "document"),
    "functions": ("function", "helper", "split", "extract", "def "),
}


class ReadabilityStats(BaseModel):
    """The three static-analysis numbers of one program (all 0 when it does not parse)."""

    comments_per_line: float = 0.0
    comment_lines: int = 0
    code_lines: int = 0
    functions: int = 0
    meaningful_share: float = 0.0
    names: list[str] = Field(default_factory=list)  # distinct names the program binds
    poor_names: list[str] = Field(default_factory=list)  # those that are not meaningful
    syntax_error: str | None = None

    @property
    def parses(self) -> bool:
        return self.syntax_error is None


def is_meaningful(name: str) -> bool:
    """True when a bound name says what it holds.

    Rule (applied to the name without leading/trailing underscores, lower-cased):
    ``i``/``j``/``k`` and a few real short words (``id``, ``ok``…) are meaningful;
    placeholders (``tmp``, ``foo``, ``ans``…) and letters-plus-number names (``a1``,
    ``var2``) are not; anything else is meaningful when it has at least 3 characters.
    """
    core = name.strip("_").lower()
    if not core:  # "_" and "__": deliberately unnamed; callers skip them
        return True
    if core in SHORT_ALLOWED:
        return True
    if core in PLACEHOLDERS:
        return False
    match = _NUMBERED.match(core)
    if match and (len(match.group(1)) <= 2 or match.group(1) in PLACEHOLDERS):
        return False
    return len(core) >= MIN_LENGTH


def bound_names(tree: ast.AST) -> list[str]:
    """Distinct names the program binds, in source order ('_' and '__' excluded)."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = node.id
        elif isinstance(node, ast.arg):
            name = node.arg
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.ExceptHandler) and node.name:
            name = node.name
        elif isinstance(node, ast.alias) and node.asname:
            name = node.asname
        if name and name.strip("_"):
            found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), name))
    return list(dict.fromkeys(name for _, _, name in sorted(found)))


def _line_counts(code: str) -> tuple[int, int]:
    """(lines holding a comment, lines holding code) from the token stream."""
    comment_lines: set[int] = set()
    code_lines: set[int] = set()
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            comment_lines.add(tok.start[0])
        elif tok.type not in skip:
            code_lines.update(range(tok.start[0], tok.end[0] + 1))  # multi-line strings
    return len(comment_lines), len(code_lines)


def readability_stats(code: str) -> ReadabilityStats:
    """All three numbers for one program; a SyntaxError gives zeros and the error text."""
    try:
        tree = parse_python(code)
        comments, lines = _line_counts(code)
    except SyntaxError as exc:
        return ReadabilityStats(syntax_error=f"line {exc.lineno}: {exc.msg}")
    except (tokenize.TokenError, ValueError) as exc:  # e.g. null bytes, unterminated brackets
        return ReadabilityStats(syntax_error=str(exc))
    names = bound_names(tree)
    poor = [n for n in names if not is_meaningful(n)]
    functions = sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(tree))
    return ReadabilityStats(
        comments_per_line=round(comments / lines, 4) if lines else 0.0,
        comment_lines=comments,
        code_lines=lines,
        functions=functions,
        # no bound names at all: nothing is badly named
        meaningful_share=round(1 - len(poor) / len(names), 4) if names else 1.0,
        names=names,
        poor_names=poor,
    )


COMMENTS_TARGET = 0.25  # comment lines per code line at which comments count in full
FUNCTIONS_TARGET = 2  # functions at which splitting into functions counts in full


def readability_score(stats: ReadabilityStats) -> float:
    """The three numbers as one, for ranking drafts (the verifier's score): the mean of
    ``meaningful_share``, comments per line relative to one per 4 code lines, and the
    functions relative to 2, each capped at 1. 0 when the program does not parse."""
    if not stats.parses:
        return 0.0
    comments = min(1.0, stats.comments_per_line / COMMENTS_TARGET)
    functions = min(1.0, stats.functions / FUNCTIONS_TARGET)
    return round((stats.meaningful_share + comments + functions) / 3, 4)


def suggestion_aspect(text: str) -> str:
    low = text.lower()
    for aspect, words in ASPECT_WORDS.items():
        if any(w in low for w in words):
            return aspect
    return "other"


class Readability(Task):
    name = "readability"
    description = "Code readability: rewrite a Python program to be easier to read, same behaviour"
    prompt_dir = "readability"
    metric_name = "share of meaningful names (static analysis)"
    stop_description = "none: fixed rounds (5)"
    defaults = TaskDefaults(
        system=system_message(
            "an expert Python programmer who writes clean, readable code. Each message asks you to rewrite, review or improve a program's readability without changing its behaviour"
        ),
        generic_feedback="Improve the readability of the code.",
        temperature={"generate": 0.0, "feedback": 0.0, "refine": 0.0},  # code task
        max_tokens={"generate": 500, "feedback": 80, "refine": 500},
        max_iterations=5,
        stop_sequences={
            # the model opens a ```python fence after the cue; the closing fence ends the program
            "generate": ["\n```", "\nProgram:"],
            "feedback": ["\n\n", "```", "\nProgram:"],
            "refine": ["\n```", "\nProgram:"],
        },
        best=LOOP_BEST,  # not measured on this task: the loop measured on commongen and acronym
        echo="off",  # a rewrite may rightly stay close to its input (checks/incomplete.py)
    )
    capabilities = Capabilities(verifier=True)
    judge_aspects = ("readable",)

    def parse_draft(self, text: str) -> str:
        code = extract_program(text)
        if not code.strip():
            raise DraftParseError("the model returned no program")
        return code

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned an empty suggestion")
        suggestion = _first_suggestion(raw)
        if len(re.findall(r"[A-Za-z]{2,}", suggestion)) < 3:
            raise FeedbackParseError(f"the suggestion {suggestion[:60]!r} is not a sentence of advice")
        return Feedback(
            text=raw,
            done=None,  # readability has no natural end: fixed rounds
            fields={"suggestion": suggestion, "aspect": suggestion_aspect(suggestion)},
        )

    def metric(self, input: str, output: str, reference: Any = None) -> float:
        return readability_stats(output).meaningful_share

    def verify(self, input: str, draft: str) -> Verification:
        stats = readability_stats(draft)
        if not stats.parses:
            return Verification(text=f"Syntax error: {stats.syntax_error}. Fix it first.", passed=None, score=0.0)
        worst = ", ".join(stats.poor_names[:5]) or "none"
        text = (
            "Syntax: OK\n"
            f"Comments per line: {stats.comments_per_line:.2f} "
            f"({stats.comment_lines} comment lines / {stats.code_lines} code lines)\n"
            f"Functions: {stats.functions}\n"
            f"Meaningful names: {stats.meaningful_share:.0%} of {len(stats.names)}; unclear names: {worst}"
        )
        return Verification(text=text, passed=None, score=readability_score(stats))


def _first_suggestion(raw: str) -> str:
    """The first non-empty line of advice, without a 'Suggestion:' label or list bullet."""
    prose = FENCE.sub("", raw)
    for line in prose.splitlines():
        line = _ITEM.sub("", _LABEL.sub("", line)).strip()
        if line and not line.startswith("```"):
            return line
    return ""
