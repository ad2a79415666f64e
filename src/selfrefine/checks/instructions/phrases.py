"""Checks a request states in common English phrasings, read by code: "at least 300 words",
"exactly 3 bullet points", "do not use any commas", "in all lowercase letters", "wrap your
entire response in double quotation marks", "end your response with the phrase '…'", "the
letter q should appear at least twice". A small model lists such instructions unreliably
(it copies its examples); the phrasings are few, so code reads them, and the model's own
list (engine/derivation.py) adds what no phrasing here covers.

Every rule reads the request's text once in linear time (a bounded request, simple
patterns with no nested repeats), and each check it makes quotes the request's own number,
word or phrase. A rule that matches under a negation the check does not state ("do not
include the keywords …") makes the opposite check or none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from .language import LANGUAGES

MAX_READ = 6_000  # the request text read (its instructions come early)
WORD_NUMBERS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
WORD_NUMBERS.update({"a single": 1, "once": 1, "twice": 2, "thrice": 3})
NUM = r"(\d{1,5}|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty)"
# how a request says a relation, and what it is as a check: (relation, shift of the number)
RELATIONS = {
    "at least": ("at least", 0), "no less than": ("at least", 0), "no fewer than": ("at least", 0),
    "a minimum of": ("at least", 0), "more than": ("at least", 1), "over": ("at least", 1),
    "at most": ("at most", 0), "no more than": ("at most", 0), "a maximum of": ("at most", 0),
    "up to": ("at most", 0), "less than": ("at most", -1), "fewer than": ("at most", -1), "under": ("at most", -1),
    "below": ("at most", -1), "exactly": ("exactly", 0), "precisely": ("exactly", 0),
}  # fmt: skip
REL = "(" + "|".join(sorted(RELATIONS, key=len, reverse=True)) + ")"
RANGE = rf"(?:in the range of|between|from)\s+{NUM}\s+(?:to|and|-)\s+{NUM}\b"  # "between 3 and 5"
UNITS = {
    "words": r"words?", "sentences": r"sentences?", "paragraphs": r"paragraphs?", "lines": r"lines?",
    "bullets": r"bullet(?:ed)?(?: points?| lists?)?|bullets?",
    "placeholders": r"placeholders?",
    "highlights": r"(?:highlighted|italic(?:ized)?)(?: text)? (?:sections?|parts?|phrases?)|italic text phrases?",
    "sections": r"sections?",
    "characters": r"characters?|chars",
}  # fmt: skip
# fewer characters than this is a story's cast ("exactly two characters"), not a length
MIN_CHARACTERS = 20
NEGATIONS = ("not ", "n't ", "no ", "without ", "avoid ", "never ", "refrain ", "free of ")
Rule = Callable[[str, str], Iterator[dict[str, Any]]]  # (text, lower-cased text) -> checks as data


def number(said: str) -> int:
    said = said.lower()
    return int(said) if said.isdigit() else WORD_NUMBERS[said]


def relation(said: str, n: int) -> tuple[str, int]:
    rel, shift = RELATIONS[" ".join(said.lower().split())]
    return rel, max(0, n + shift)


def negated(low: str, at: int, window: int = 60) -> bool:
    """Whether a negation is said before position ``at`` in its clause (back to the last
    sentence end, comma, "and" or "but")."""
    before = low[max(0, at - window) : at]
    before = re.split(r"[.!?;,]\s|\sand\s|\sbut\s", before)[-1]
    return any(n in f" {before}" for n in NEGATIONS)


def _counts(text: str, low: str) -> Iterator[dict[str, Any]]:
    """:func:`_all_counts`, but a handful of "characters" is a story's cast, not a length."""
    for check in _all_counts(text, low):
        if check["unit"] != "characters" or check["n"] >= MIN_CHARACTERS:
            yield check


def _all_counts(text: str, low: str) -> Iterator[dict[str, Any]]:
    """A relation and a number before a unit: "at least 300 words", "less than 6 sentences";
    a bare number of paragraphs, bullet points or sections is that many ("3 paragraphs")."""
    for unit, noun in UNITS.items():
        yield from _range_counts(low, unit, noun)
        for m in re.finditer(rf"\b(?:{REL}\s+)?{NUM}(\+)?[\s-]+(or more\s+)?(?:{noun})\b", low):
            if re.search(rf"{NUM}\s+(?:to|-|or)\s+$", low[max(0, m.start() - 12) : m.start()]):
                continue  # the upper end of a range (above)
            if negated(low, m.start(), 40) and re.search(
                r"(?:longer|more) than\s+$", low[max(0, m.start() - 15) : m.start()]
            ):
                continue  # "nothing longer than N": at most N (above)
            if unit == "sections" and re.search(r"highlight|italic", low[max(0, m.start() - 40) : m.end() + 30]):
                continue  # "highlight at least 2 sections": highlights (below)
            if unit == "words" and re.search(CAPS, low[m.end() : m.end() + 60]):
                continue  # "at least 5 words in all caps": capital words (below)
            if unit == "sections" and "***" in low and not _marker(text, low, unit):
                continue  # sections divided by ***: paragraphs (below)
            rel, n, plus = m.group(1), number(m.group(2)), m.group(3) or m.group(4)
            if rel is not None:
                relation_said, n = relation(rel, n)
            elif plus:
                relation_said = "at least"
            elif unit in ("paragraphs", "bullets", "sections"):
                relation_said = "exactly"
            else:
                continue  # "a 500 word essay": a size, said loosely
            check = {"type": "count", "unit": unit, "relation": relation_said, "n": n}
            marker = _marker(text, low, unit)
            if unit == "sections" and not marker:
                continue  # sections counted by their headings: none named
            yield {**check, "marker": marker} if marker else check


def _range_counts(low: str, unit: str, noun: str) -> Iterator[dict[str, Any]]:
    """Counts said as a range or a bound after the number: "100 to 120 words", "5 or 6",
    "200 words or less", "in the range of 40 to 60", "nothing longer than 30 words"."""
    for m in re.finditer(rf"\b{NUM}\s+(?:to|-|or)\s+{NUM}\s+(?:{noun})\b", low):
        yield {"type": "count", "unit": unit, "relation": "at least", "n": number(m.group(1))}
        yield {"type": "count", "unit": unit, "relation": "at most", "n": number(m.group(2))}
    for m in re.finditer(rf"\b{NUM}\s+(?:(?:{noun})\s+or\s+(?:less|fewer)|or\s+(?:less|fewer)\s+(?:{noun}))\b", low):
        yield {"type": "count", "unit": unit, "relation": "at most", "n": number(m.group(1))}
    for m in re.finditer(rf"\bnumber of (?:{noun})\b[^.]{{0,40}}?\b{RANGE}", low):
        yield {"type": "count", "unit": unit, "relation": "at least", "n": number(m.group(1))}
        yield {"type": "count", "unit": unit, "relation": "at most", "n": number(m.group(2))}
    for m in re.finditer(rf"\b(?:longer|more) than\s+{NUM}\s+(?:{noun})\b", low):
        if negated(low, m.start(), 40):
            yield {"type": "count", "unit": unit, "relation": "at most", "n": number(m.group(1))}


def _marker(text: str, low: str, unit: str) -> str:
    """What divides paragraphs ("***") or heads each section ("SECTION" for "SECTION X")."""
    if unit == "paragraphs":
        return "***" if "***" in low else ""
    if unit == "sections":
        # "with SECTION X", "noted as Part X", "(Section 1 and Section 2)"
        m = re.search(r"(?:\b(?:with|by|using|as)\s+|\()[\"“']?([A-Za-z]+)\s+(?:x|X|\d|N)\b", text)
        return m.group(1) if m else ""
    return ""


def _divided_sections(text: str, low: str) -> Iterator[dict[str, Any]]:
    """ "Exactly 4 sections, separated by the markdown divider ***": paragraphs divided so."""
    if "***" not in low or _marker(text, low, "sections"):
        return
    m = re.search(rf"\b(?:{REL}\s+)?{NUM}\s+sections?\b", low)
    if m and not re.search(r"highlight|italic", low[max(0, m.start() - 40) : m.end() + 30]):
        n = number(m.group(2))
        rel, n = relation(m.group(1), n) if m.group(1) else ("exactly", n)
        yield {"type": "count", "unit": "paragraphs", "relation": rel, "n": n, "marker": "***"}


def _divided(text: str, low: str) -> Iterator[dict[str, Any]]:
    """ "An answer with two parts, separated by ***": paragraphs divided so."""
    m = re.search(rf"\b{NUM}\s+(?:parts|paragraphs)\b", low)
    if m and "***" in low and not re.search(rf"{REL}\s+$", low[max(0, m.start() - 16) : m.start()]):
        yield {"type": "count", "unit": "paragraphs", "relation": "exactly", "n": number(m.group(1)), "marker": "***"}
    m = re.search(rf"\b(?:exactly\s+)?{NUM}\s+stanzas\b", low)  # "6 stanzas, separated by ***": paragraphs
    if m and "***" in low:
        yield {"type": "count", "unit": "paragraphs", "relation": "exactly", "n": number(m.group(1)), "marker": "***"}


def _shown_divided(text: str, low: str) -> Iterator[dict[str, Any]]:
    """A format shown with lines of *** between its parts ("Part 1 … *** … Part 2"): that many
    paragraphs, when no count of paragraphs or sections is said."""
    dividers = sum(1 for line in low.splitlines() if line.strip() == "***")
    if dividers and not re.search(r"\b(?:paragraphs?|sections?|parts)\b", low):
        yield {"type": "count", "unit": "paragraphs", "relation": "exactly", "n": dividers + 1, "marker": "***"}


def _highlights(text: str, low: str) -> Iterator[dict[str, Any]]:
    """ "Highlight at least 2 sections", "at least 6 sections should be highlighted", "one
    italic text section" (markdown *highlights*)."""
    said = (
        rf"\b(?:highlight|italicize)\s+(?:{REL}\s+)?{NUM}\s+(?:\w+\s+){{0,2}}?(?:sections?|parts?|(?:key)?words?|phrases?)",
        rf"\b(?:{REL}\s+)?{NUM}\s+(?:\w+\s+){{0,2}}?(?:sections?|parts?)\s+(?:should|must)\s+be\s+(?:highlighted|italicized)",
        rf"\b(?:{REL}\s+)?{NUM}\s+italic(?:ized)?\s+(?:text\s+)?(?:sections?|parts?)",
    )
    found = False
    for pattern in said:
        for m in re.finditer(pattern, low):
            n = number(m.group(2))
            rel, n = relation(m.group(1), n) if m.group(1) else ("at least", n)
            found = True
            yield {"type": "count", "unit": "highlights", "relation": rel, "n": n}
    # no number: "highlight some key parts with "*"", "… by wrapping it with *", "like *highlighted text*"
    m = None if found else re.search(r"\b(?:highlight|italici[sz]e)\w*\b([^.\n]{0,80})", low)
    if m and not negated(low, m.start(), 30) and re.search(ASTERISK, low[m.start() : m.end() + 80]):
        yield {"type": "count", "unit": "highlights", "relation": "at least", "n": 2 if "twice" in m.group(1) else 1}


# markdown's emphasis named or shown: "with *", "with "*"", "*highlighted section*", "the asterisk symbol"
ASTERISK = r"\bwith\s+[\"“']?\*(?![*])|\*[a-z][^*\n]{0,60}\*(?!\*)|\basterisk symbol"


def _no_commas(text: str, low: str) -> Iterator[dict[str, Any]]:
    for m in re.finditer(r"\bcommas?\b", low):
        after = low[m.end() : m.end() + 30]
        if negated(low, m.start(), 60) or re.match(r"\s+(?:are|is)\s+(?:not allowed|forbidden|prohibited)", after):
            yield {"type": "forbidden_chars", "chars": ","}
            return


CAPS = r"\b(?:all caps|all capital letters|all capitals|capital letters|capitalized|uppercase)\b"


def _case(text: str, low: str) -> Iterator[dict[str, Any]]:
    lower = re.search(
        r"\b(?:all\s+)?lower\s*-?case\b|\bno capital letters\b|\bwithout (?:using )?capital letters\b|\blowercased\b|"
        r"\bnot (?:contain|use|include|have) any capital letters\b",
        low,
    )
    not_capitalized = re.search(r"\bnot (?:a single letter|any letter)[^.]{0,60}capitali[sz]ed", low)
    said_lower = (lower is not None and not negated(low, lower.start(), 20)) or not_capitalized is not None
    said_upper = _all_capitals(text, low)
    if said_lower and said_upper:
        # no reply is in both cases: "all capital letters ... not a single word should contain
        # lowercase letters" negates the lowercase further back; else neither is read, and the
        # model's derivation reads the wording (the case group stays uncovered)
        negated_lower = lower is not None and not not_capitalized and negated(low, lower.start(), 60)
        said_lower, said_upper = False, negated_lower
    if said_lower:
        yield {"type": "case", "letters": "lower"}
    if said_upper:
        yield {"type": "case", "letters": "upper"}


def _all_capitals(text: str, low: str) -> bool:
    """Whether the whole reply is asked in capitals ("use all capital letters"), not some words."""
    capital = re.search(
        r"\b(?:all|only(?: use)?|entirely in|entire response[^.]{0,40}in)\s+(?:capital|upper\s*-?case|caps)\b"
        r"|\bcapitali[sz]e (?:all|every|each) (?:of )?(?:your |the )?(?:words|letters?)\b",
        low,
    )
    some = capital and re.search(
        r"\b(?:some|a few|several|certain)\s+words?\s+$", low[max(0, capital.start() - 30) : capital.start()]
    )
    return bool(capital and not some and not any(True for _ in _capital_words(text, low)))


def _capital_words(text: str, low: str) -> Iterator[dict[str, Any]]:
    """Words in capitals a number of times: "words with all capital letters … less than 10
    times", "at least 5 words in all caps"."""
    m = re.search(rf"(?:capital(?:ized|s)?|\ball[ -]caps)[^?!]{{0,120}}?{REL}\s+{NUM}\s+times", low)
    if m and not re.search(r"\b(?:letter|word)\s+[\"“']?\w+[\"”']?\s+(?:should|must|to|appears?)", m.group(0)):
        rel, n = relation(m.group(1), number(m.group(2)))
        yield {"type": "capital_words", "relation": rel, "n": n}
        return
    m = re.search(rf"\b{REL}\s+{NUM}\s+words?(?:\s+or\s+phrases)?\b[^.]{{0,50}}?{CAPS}", low) or re.search(
        rf"\bnumber of words (?:with|in) (?:all )?(?:capital letters|caps|capitals|uppercase)[^.]{{0,20}}?\b{REL}\s+{NUM}\b",
        low,
    )  # "limit the number of words with all capital letters to less than four"
    if m:
        rel, n = relation(m.group(1), number(m.group(2)))
        yield {"type": "capital_words", "relation": rel, "n": n}


def _forms(text: str, low: str) -> Iterator[dict[str, Any]]:
    """Quotes, JSON, a title, two responses."""
    if re.search(
        r"\b(?:wrap|put|enclose|surround)\w*\b[^.]{0,90}double quot|double quot\w*(?: marks?)?[^.]{0,30}\baround", low
    ):
        yield {"type": "quoted"}
    if re.search(r"\bjson\b", low) and re.search(
        r"\bjson (?:format|block|object)|\bin json\b|\bas json\b|\bwrap[^.]{0,40}json", low
    ):
        yield {"type": "json"}
    if "<<" in low or "double angular bracket" in low:
        yield {"type": "title"}
    if "******" in low and re.search(r"\btwo\b|\bseparate", low):
        yield {"type": "two_responses"}
    answers = re.findall(r"my answer is (yes|no|maybe)\.?", low)
    if len(set(answers)) >= 2:
        yield {"type": "one_of", "options": [f"My answer is {a}." for a in dict.fromkeys(answers)]}


def _postscript(text: str, low: str) -> Iterator[dict[str, Any]]:
    if re.search(r"\bp\.\s?p\.\s?s\b", low):
        yield {"type": "postscript", "marker": "P.P.S"}
    elif re.search(r"\bp\.\s?s\b", low) or "postscript" in low:
        yield {"type": "postscript", "marker": "P.S."}


QUOTED = r"[\"“']([^\"”']{1,200})[\"”']"
UNTIL_END = r"[^\n\"“”]{1,120}?(?:[.?!](?=\s|$)|(?=\n|$))"  # an unquoted phrase: to its sentence's or line's end


def _phrases(text: str, low: str) -> Iterator[dict[str, Any]]:
    """How the response must end or start: a quoted phrase."""
    ends = (
        r"\b(?:end|finish|conclude)\w*\b|\b(?:last|final) (?:sentence|line) of (?:your|the) (?:response|answer|reply)"
    )
    for m in re.finditer(rf"(?:{ends})[^.\"“']{{0,60}}?{QUOTED}", text, re.I):
        if re.search(r"\w", m.group(1)):  # a phrase, not a mark ("starting and ending with '*'")
            yield {"type": "ends_with", "phrase": m.group(1).strip()}
    # unquoted: "Finish your response with this exact phrase: So what is next?" (to its sentence's end)
    unquoted = rf"\b(?:end|finish|conclude)\w*\b[^.\"“'\n]{{0,50}}?\bexact phrase\s*:?\s+(?![\"“'])({UNTIL_END})"
    for m in re.finditer(unquoted, text, re.I):
        yield {"type": "ends_with", "phrase": m.group(1).strip()}
    for m in re.finditer(
        rf"\b(?:start|begin)\w*\s+(?:your|the)\s+(?:response|answer|reply)\s+with\b[^\"“']{{0,30}}{QUOTED}", text, re.I
    ):
        yield {"type": "starts_with", "phrase": m.group(1).strip()}


def _paragraph_start(text: str, low: str) -> Iterator[dict[str, Any]]:
    ordinals = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5}
    nth = r"(first|second|third|fourth|fifth|\d)(?:st|nd|rd|th)? paragraph"
    word = r"with (?:the )?word [\"“']?(\w+)"
    m = (
        re.search(rf"\b{nth}\b[^.]{{0,40}}?(?:start|begin)s? {word}", low)
        or re.search(rf"\b(?:start|begin) the {nth} {word}", low)
        or re.search(rf"\bparagraph (\d)\b[^.]{{0,20}}?(?:start|begin)s? {word}", low)  # "paragraph 2 must start …"
    )
    if m:
        yield {"type": "paragraph_start", "nth": ordinals.get(m.group(1)) or int(m.group(1)), "word": m.group(2)}
        return
    # "exactly 7 paragraphs … the last paragraph must start with the word X": the 7th
    last = re.search(rf"\b(?:last|final) paragraph\b[^.]{{0,40}}?(?:start|begin)s? {word}", low)
    count = re.search(rf"\b(?:exactly\s+)?{NUM}\s+paragraphs\b", low)
    if (
        last
        and count
        and not re.search(rf"{REL}\s+$", low[max(0, count.start() - 16) : count.start()].replace("exactly", ""))
    ):
        yield {"type": "paragraph_start", "nth": number(count.group(1)), "word": last.group(1)}


def _words(text: str, low: str) -> Iterator[dict[str, Any]]:
    """Words to use or to avoid, quoted or listed after "keywords"."""
    cue = r"\b(?:include|includes|including|contain|containing|use|using|mention|mentioning|say|saying|exclude|excluding|avoid)\b"
    named = (  # "the words: …", "negative words such as 'sad', 'crazy'", or the quote itself
        r"(?:[^.]{0,40}?\b(?:key\s*words?|words?|terms?|phrases?|items?)\b\s*:?\s*(?:such as\s+|like\s+)?|"
        r"\s+(?:the\s+)?(?=[\"“']))"
    )
    for m in re.finditer(rf"{cue}{named}", low):
        listed = _listed(text[m.end() : m.end() + 200])
        if not listed:
            continue
        kind = "forbidden_words" if negated(low, m.end()) or re.match(r"exclud|avoid", m.group(0)) else "keywords"
        yield {"type": kind, "words": listed}


def _listed(after: str) -> list[str]:
    """The quoted words right after a cue, or a short unquoted list ("X, Y and Z")."""
    quoted = re.match(rf"\[?((?:\s*(?:,|and|or)?\s*{QUOTED})+)", after)
    if quoted:
        return [w.strip() for w in re.findall(QUOTED, quoted.group(1)) if w.strip()][:20]
    plain = re.match(
        r"([A-Za-z][\w-]*(?:\s*,\s*[A-Za-z][\w-]*)*(?:,?\s+(?:and|or)\s+[A-Za-z][\w-]*)?)\s*(?:[.;\n]|in\b|$)", after
    )
    if plain and re.search(r",|\s(?:and|or)\s", plain.group(1)):
        return [w.strip() for w in re.split(r",|\band\b|\bor\b", plain.group(1)) if w.strip()][:20]
    return []


def _cannot_appear(text: str, low: str) -> Iterator[dict[str, Any]]:
    """ "The words startup and capsule cannot be in the response"."""
    said = (
        r"\bthe words? (.{1,80}?) (?:cannot|can't|should not|must not|shouldn't|mustn't|does not|doesn't|do not|"
        r"don't|should never|must never|may not) (?:be|appear)\b(?!\s+(?:more|over|less|fewer|at most|at least|twice|once|\d))"
    )
    m = re.search(said, text, re.I)
    if m:
        words = re.findall(QUOTED, m.group(1)) or [w for w in re.split(r",|\band\b|\bor\b|\s", m.group(1)) if w.strip()]
        if 0 < len(words) <= 5:
            yield {"type": "forbidden_words", "words": [w.strip() for w in words]}


def _frequencies(text: str, low: str) -> Iterator[dict[str, Any]]:
    """A word's or a letter's number of times."""
    times = rf"(?:{REL}\s+{NUM}\s+times?|{REL}\s+(once|twice)|(once|twice)|{NUM}\s+or\s+more\s+times)"
    for m in re.finditer(rf"\bletter\s+[\"“']?([a-z])[\"”']?[^.]{{0,40}}?{times}", low):
        rel, n = _not_more(low, m, *_times(m, 2))
        yield {"type": "letter_frequency", "letter": m.group(1), "relation": rel, "n": n}
    for m in re.finditer(
        r"\bthe letter\s+[\"“']?([a-z])[\"”']?(?![\w\"”'])(?![^.]{0,40}\b(?:times|once|twice)\b)", low
    ):
        if negated(low, m.start(), 40):  # "do not include the letter c anywhere": none of it
            yield {"type": "letter_frequency", "letter": m.group(1), "relation": "at most", "n": 0}
    for m in re.finditer(rf"\b(?:key)?word\s+[\"“']?([a-z][\w'-]*)[\"”']?[^.]{{0,40}}?{times}", low):
        rel, n = _not_more(low, m, *_times(m, 2))
        yield {"type": "word_frequency", "word": m.group(1).strip("'"), "relation": rel, "n": n}
    ranged = rf"\b(letter|word)\s+[\"“']?([a-z][\w'-]*)[\"”']?[^.]{{0,40}}?\b(?:between\s+)?{NUM}\s+(?:to|and|-)\s+{NUM}\s+times"
    for m in re.finditer(ranged, low):  # "the word unfortunately appears 3 to 5 times"
        if m.group(1) == "word" or len(m.group(2)) == 1:
            kind, what = ("word_frequency", "word") if m.group(1) == "word" else ("letter_frequency", "letter")
            yield {"type": kind, what: m.group(2), "relation": "at least", "n": number(m.group(3))}
            yield {"type": kind, what: m.group(2), "relation": "at most", "n": number(m.group(4))}


def _not_more(low: str, m: re.Match[str], rel: str, n: int) -> tuple[str, int]:
    """A count said under a negation: "avoid using the letter i more than twice" is at most 2."""
    if rel == "at least" and (negated(low, m.start(), 40) or re.search(r"\bnot\b|n't\b|\bnever\b", m.group(0))):
        return "at most", max(0, n - 1)
    return rel, n


def _times(m: re.Match[str], first: int) -> tuple[str, int]:
    rel, n, rel2, once, bare, more = (
        m.group(first),
        m.group(first + 1),
        m.group(first + 2),
        m.group(first + 3),
        m.group(first + 4),
        m.group(first + 5),
    )
    if more is not None:  # "10 or more times"
        return "at least", number(more)
    if rel is not None:
        return relation(rel, number(n))
    if rel2 is not None:
        return relation(rel2, number(once))
    return "exactly", number(bare)


def _language(text: str, low: str) -> Iterator[dict[str, Any]]:
    """ "Answer in Finnish, no other language", "use only the Nepali language", "your
    response is in English": the language the whole response is in."""
    names = {name.lower().split()[0]: code for code, name in LANGUAGES.items() if code != "zh-tw"}
    case = r"(?:(?:all\s+)?(?:lower\s*-?case|upper\s*-?case|capital)\s+)?"  # "in lowercase English"
    said = rf"\b(?:in|use|using)\s+(?:only\s+)?(?:the\s+)?{case}([a-z]+)(?:\s+language)?\b"
    for m in re.finditer(said, low):
        code = names.get(m.group(1))
        if code is None:
            continue
        around = low[max(0, m.start() - 40) : m.end() + 60]
        # the reply's language, said of the reply or beside its letter case ("in English and all lowercase")
        if re.search(
            r"no other language|only|entire|whole|throughout|respon|reply|answer|write|written|(?:should|must) be in|"
            r"capital|lower\s*-?case|upper\s*-?case",
            around,
        ):
            yield {"type": "language", "code": code}
            return


def _repeat(text: str, low: str) -> Iterator[dict[str, Any]]:
    """ "First repeat the request above word for word": the reply starts with the request's text."""
    sentences = [s for s in re.split(r"(?<=[.?!])\s+|(?<=[.?!][\"”'])\s+", text.strip()) if s]
    marks = [i for i, s in enumerate(sentences) if re.search(r"\brepeat", s, re.I)]
    if not marks or not re.search(r"repeat[^.]{0,40}\b(?:request|question|sentence|prompt|text)", low):
        return
    below = re.search(r"repeat[^.]{0,40}\bbelow\b", low) or marks[0] == 0  # the request follows the instruction
    part = sentences[marks[-1] + 1 :] if below else sentences[: marks[0]]
    phrase = " ".join(part).strip()
    if 10 <= len(phrase) <= 1000:
        yield {"type": "starts_with", "phrase": phrase}


RULES: tuple[Rule, ...] = (
    _counts, _divided, _divided_sections, _shown_divided, _highlights, _cannot_appear, _no_commas, _case, _capital_words, _forms, _postscript, _phrases, _paragraph_start,
    _words, _frequencies, _language, _repeat,
)  # fmt: skip


def stated(request: str) -> list[dict[str, Any]]:
    """The checks ``request`` states in phrasings these rules read, as data, none twice."""
    text = request[:MAX_READ]
    low = text.lower()
    found: dict[str, dict[str, Any]] = {}
    for rule in RULES:
        for check in rule(text, low):
            found.setdefault(repr(sorted(check.items())), check)
    counted = {c["word"].lower() for c in found.values() if c["type"] == "word_frequency"}
    return [  # a word counted needs no keyword check of its own
        c for c in found.values() if not (c["type"] == "keywords" and {w.lower() for w in c["words"]} <= counted)
    ]
