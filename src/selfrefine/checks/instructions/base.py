"""What every instruction check shares: the record base, the relations, the outcome.

A check is a small frozen pydantic record, declared as data (a task file, an API request, or
the model itself under the checks' JSON schema). It reads a draft and says whether the
draft follows it and, where not, what to change, with numbers: "needs exactly 3 bullet
points, has 5". Drafts are model output, so untrusted: a check reads at most
``MAX_CHECK_CHARS`` of a draft (a longer draft fails, saying so) and does linear work on it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from ...core.bans import TokenBan
from ...core.records import Finding
from ...core.wording import plural
from .grounding import names

MAX_CHECK_CHARS = 100_000  # the longest draft a check reads; ~15,000 words, far past any asked length

Relation = Literal["at least", "at most", "exactly"]


class Outcome(NamedTuple):
    """A check's verdict on a draft: passed, and where not, the finding in plain words."""

    passed: bool
    finding: str  # "" when passed


KINDS: dict[str, type[Instruction]] = {}  # every kind by its ``type``, in the order they were defined


class Instruction(BaseModel):
    """One checkable instruction. Subclasses declare ``type`` (the discriminator, a Literal
    with its default) and their arguments, and implement ``_problem`` (the finding, or None),
    ``describe``, ``_repair`` (the short instruction that repairs a failure: a focused
    refinement's prompt says it) and ``grounded`` (whether a request states it). Defining
    such a class registers it: task files, requests and the derivation's prompt and schema
    know it from then on (:data:`KINDS`)."""

    # strict: a number is a number ("40" is not 40, and true is not 1), said naming the key
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    # words a request names the kind by, for the default ``grounded`` (none: its type)
    kind_words: ClassVar[tuple[str, ...]] = ()
    # whether a request's checks may be of this kind (its schema offers it to the model)
    from_request: ClassVar[bool] = True
    # its example in the derivation prompt's list of kinds ("" for none), and where it
    # stands there: (line, place in the line); a kind placed nowhere gets a line of its own
    example: ClassVar[str] = ""
    example_at: ClassVar[tuple[int, int]] = (1_000, 0)
    # the wording groups (checks/instructions/coverage.py) a check of this kind reads:
    # where code read one, the model's derivation is not asked about that wording again
    covers_groups: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        field = cls.model_fields.get("type")
        kind = field.default if field is not None else None
        if isinstance(kind, str):  # a concrete kind (an abstract base declares no type)
            known = KINDS.get(kind)
            if known is not None and known.__qualname__ != cls.__qualname__:
                raise TypeError(f"check type {kind!r} is taken by {known.__module__}.{known.__qualname__}")
            KINDS[kind] = cls  # a class defined again (a reloaded module) takes its own place

    def grounded(self, text: str) -> bool:
        """Whether the request (``text``, lower-cased) states this check, besides its number
        (:func:`selfrefine.engine.derivation.grounded` holds that): by default, that it names
        the kind by one of its ``kind_words`` (or its type)."""
        return any(names(text, w) for w in self.kind_words or (str(type(self).model_fields["type"].default),))

    def covers(self) -> frozenset[str]:
        """The request wording groups this check accounts for (:mod:`.coverage`)."""
        return self.covers_groups

    def check(self, text: str) -> Outcome:
        """Whether ``text`` follows the instruction, and if not, what to change."""
        if len(text) > MAX_CHECK_CHARS:
            return Outcome(False, f"is {len(text):,} characters; checks read at most {MAX_CHECK_CHARS:,}")
        problem = self._problem(text)
        return Outcome(problem is None, problem or "")

    def _problem(self, text: str) -> str | None:  # pragma: no cover - every kind overrides it
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - every kind overrides it
        """The instruction in words, as a request would state it: "exactly 3 bullet points"."""
        raise NotImplementedError

    def repair(self, text: str) -> str:
        """The short instruction that repairs this check's failure on ``text``, in the kind's
        own words with its arguments and, where it counts, the number measured: "It has 74
        words; shorten it to at most 60 words; keep the meaning." A small model acts on one
        narrow instruction where it copies a long critique (issue 45)."""
        if len(text) > MAX_CHECK_CHARS:
            return f"Shorten the text to well under {MAX_CHECK_CHARS:,} characters; keep what the request asks for."
        return self._repair(text)

    def finding(self, text: str, outcome: Outcome) -> Finding:
        """The record of this check failing on ``text`` (``outcome``, from :meth:`check`): the
        check in words, what it found, its repair, its kind and where more text repairs it."""
        kind = str(type(self).model_fields["type"].default)
        return Finding(
            check=self.describe(), text=outcome.finding, repair=self.repair(text), kind=kind,
            extend=self.extension(text),
        )  # fmt: skip

    def extension(self, text: str) -> str | None:
        """Where more text after ``text``'s end repairs this check's failure (it is too short):
        what a continuation must add ("at least 230 more words"); None where it must be edited."""
        return None

    def ban(self) -> TokenBan | None:
        """What this check forbids outright, which a decoder can refuse token by token
        (core/bans.py: "use no commas", "use only capital letters"); None for a check a
        ban cannot hold (counts, words, format)."""
        return None

    def _repair(self, text: str) -> str:
        """Each kind's repair (a kind without its own says its instruction; a test holds that
        every registered kind has one)."""
        return f"Change the text so that it does this: {self.describe()}; change nothing else."


def holds(n: int, relation: Relation, target: int) -> bool:
    """Whether a count ``n`` stands in ``relation`` to ``target``."""
    if relation == "at least":
        return n >= target
    if relation == "at most":
        return n <= target
    return n == target


def amount(relation: Relation, target: int, noun: str, many: str | None = None) -> str:
    """``exactly 3 bullet points``, ``at least 1 word``: a relation and its count in words."""
    return f"{relation} {plural(target, noun, many)}"


def quoted(text: str, limit: int = 200) -> str:
    """A phrase from a check or a draft, quoted on one line and cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
