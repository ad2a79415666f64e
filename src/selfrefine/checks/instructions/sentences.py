"""Counting sentences the way IFEval's verifier does, without NLTK.

IFEval counts sentences with NLTK's Punkt model for English. Punkt ends a sentence at ``.``,
``?`` or ``!`` followed by a space (or by closing punctuation), never at a line break, and
keeps a period that closes a known abbreviation ("Dr.", "U.S."), an initial ("J.") or a
number before a lowercase word ("5. then") inside the sentence unless the next word is a
common word capitalised ("etc. The"). This module applies those rules with the model's list
of abbreviations and a list of common words standing in for its word statistics; the
agreement with Punkt is measured in tests/engine/test_instruction_checks.py and by
benchmarks/ifeval_checks.py. One pass over the whitespace-separated tokens: linear time.
"""

from __future__ import annotations

# Punkt's English abbreviations (the types it learned, lowercase, without the final period)
_ABBREVIATIONS = frozenset(
    "a.a a.c a.d a.g a.h a.m a.m.e a.s a.t adm ala ariz aug ave b.f b.v bros c c.i.t c.o.m.b c.v calif chg cie co "
    "col colo conn corp cos ct d d.c d.h d.w dec dr e e.f e.h e.l e.m f f.g f.j feb fla fri ft g g.d g.f g.k ga gen "
    "h h.c h.f h.m i.m.s ill inc j.b j.c j.j j.k j.p j.r jan jr k kan ky l l.a l.f l.p lt ltd m m.b.a m.d.c m.j maj "
    "messrs mg mich minn mr mrs ms n n.c n.d n.h n.j n.m n.v n.y nev nov oct ok okla ore p p.a.m p.m pa ph.d prof r "
    "r.a r.h r.i r.j r.k r.t rep reps s s.a s.a.y s.c s.g s.p.a s.s sen sep sept sr st sw t t.j tenn tues u.k u.n "
    "u.s u.s.a u.s.s.r v va vs vt w w.c w.r w.va w.w wash wed wis yr".split()
)
# words Punkt's model has seen begin a sentence often enough to break before them when capitalised
_STARTERS = frozenset(
    "according although among both but despite even he however i if in indeed instead it many meanwhile moreover "
    "most nevertheless nonetheless nor sales separately similarly since so some the there these they this though "
    "thus under when while yet".split()
)
# common words, which Punkt has seen in lowercase and so takes, capitalised, to begin a sentence
_COMMON = _STARTERS | frozenset(
    "a about above after again all also always an and another any anyone anything are as at be because been before "
    "being below best better between by can could did do does doing done during each either else every everything "
    "few finally first for from further get go good great had has have having her here hers him his how its just "
    "last least less let like look make many may maybe me might mine more much must my never new next no none not "
    "nothing now of off often on once one only or other others our ours out over perhaps please rather really "
    "remember same see she should simply still such than thank thanks that their them then therefore those three "
    "through to today together too two until up upon use very was we well were what whatever where whether which "
    "who whose why will with within without would yes you your yours".split()
)
_END = ".?!"
_NON_WORD = frozenset(")\";}]*:@'({[\u2018\u2019\u201c\u201d\xab\xbb?!")  # may follow a sentence end
_REALIGNED = frozenset("\"')]}\u2018\u2019\u201c\u201d\xab\xbb")  # closing marks kept with the sentence
_SPLIT_OFF = '("`{[:;&#*@)}]-,'  # characters Punkt splits off the start of a word


def sentences(text: str) -> int:
    """How many sentences Punkt would find in ``text`` (0 when it is blank)."""
    tokens = text.split()
    count, last = (1 if tokens else 0), None
    for k, token in enumerate(tokens):
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        end, after = _candidate(token, following)
        if end < 0:
            continue
        count += token[0] in "?!" and end > 0 and token[1] in _NON_WORD  # "??": Punkt ends at each
        if _breaks(token[: end + 1], after):
            count, last = count + 1, (k, end)
    if last is not None:  # closing marks alone after the last break join its sentence
        k, end = last
        rest = [token for token in [tokens[k][end + 1 :], *tokens[k + 1 : k + 3]] if token]
        count -= len(rest) == 1 and all(c in _REALIGNED for c in rest[0])
    return count


def _candidate(token: str, following: str | None) -> tuple[int, str]:
    """Where in ``token`` a sentence may end (the last ``.?!`` followed by punctuation, or
    ending the token before another), and what comes after it; -1 where nowhere."""
    for i in range(len(token) - 1, -1, -1):
        if token[i] not in _END:
            continue
        if i + 1 < len(token) and token[i + 1] in _NON_WORD:
            return i, token[i + 1]
        if i + 1 == len(token) and following is not None:
            return i, following
    return -1, ""


def _breaks(word: str, after: str) -> bool:
    """Whether Punkt breaks after ``word`` (ending in ``.?!``) before ``after``: by its
    decision on the word, or (as NLTK does) when a sentence ends inside either of them."""
    return _inner_break(word[:-1]) or _ends(word, after) or _inner_break(after)


def _inner_break(chunk: str) -> bool:
    """Whether a sentence ends inside ``chunk`` with more of it after: a ``?`` or ``!``, a word's
    period before punctuation ("end.)"), an ellipsis before a capital ("Then...When")."""
    for i in range(len(chunk) - 1):
        if chunk[i] in "?!" or (chunk[i] == "." and chunk[i + 1] in _NON_WORD and _ends(chunk[: i + 1], chunk[i + 1])):
            return True
        if chunk[i] == "." and i and chunk[i - 1] == "." and chunk[i + 1].isupper():
            return True
    return False


def _ends(word: str, after: str) -> bool:
    """Punkt's decision for a word ending in ``.``, ``?`` or ``!`` before the word ``after``."""
    after = after[0] if after[0] in _SPLIT_OFF else after
    if word[-1] in "?!" or (len(word) > 1 and word[-2] in "?!"):
        return True
    if word.endswith(".."):  # an ellipsis
        return _starts_sentence(after)
    core = word[:-1].lstrip(_SPLIT_OFF).lower()
    initial = len(core) == 1 and core.isalpha()
    if core in _ABBREVIATIONS or core.rsplit("-", 1)[-1] in _ABBREVIATIONS:
        return not initial and _starts_sentence(after)
    if initial:  # Punkt breaks before a word it has seen in lowercase: an English word, not a name
        return _english_capitalised(after) or not (after[:1].isalpha() or after[:1] in ";:,.!?")
    if _is_number(core):
        return not (after[:1].islower() or after[:1] in ";:,.!?")
    return True


def _starts_sentence(after: str) -> bool:
    """Whether Punkt takes ``after`` to begin a sentence after an abbreviation or an ellipsis:
    a capitalised word (Punkt's statistics say so for words it has seen in lowercase)."""
    return _common_capitalised(after) or (after[:1].isupper() and _bare(after) in _STARTERS)


def _english_capitalised(after: str) -> bool:
    word = _bare(after.rstrip(",;:*\"')"))
    return after[:1].isupper() and word.isascii() and word.isalpha() and not after[1:2].isupper()


def _common_capitalised(after: str) -> bool:
    return after[:1].isupper() and _bare(after) in _COMMON


def _bare(word: str) -> str:
    return word.rstrip(_END + ",;:*\"')").lower()


def _is_number(core: str) -> bool:
    body = core.removeprefix("-")
    body = body[1:] if body[:1] in (".", ",") else body
    return body[:1].isdigit() and all(c.isdigit() or c in ",.-" for c in body)
