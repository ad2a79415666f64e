"""One checks vocabulary: a task file's ``checks:`` mapping is a spelling of the instruction
checks a ``checks:`` list declares, so both forms give the same verdict on every draft, with one
word count (IFEval's: runs of letters and digits), whatever the draft's hyphens, dashes and
contractions."""

from __future__ import annotations

import pytest

from selfrefine import Checks
from selfrefine.checks.instructions import parse_checks
from selfrefine.core.errors import TaskFileError
from selfrefine.tasks.taskfile import load_task

HEAD = """\
name: vocab
generate: "Write about {{ input }}."
feedback: "Draft: {{ draft }}\\nCritique:"
refine: "Draft: {{ draft }}\\nCritique: {{ feedback }}\\nBetter:"
"""
MAPPING = HEAD + "checks:\n  max_words: 40\n  required_words: [x]\n  min_lines: 2\n  must_match: '^A'\n"
LISTED = HEAD + (
    "checks:\n"
    "  - {type: count, unit: words, relation: at most, n: 40}\n"
    "  - {type: count, unit: lines, relation: at least, n: 2}\n"
    "  - {type: keywords, words: [x], whole: true}\n"
    "  - {type: regex, pattern: '^A'}\n"
)


def _words(n: int, word: str = "lamp") -> str:
    return " ".join([word] * n)


# where words between spaces and IFEval's words differ, across the bound of 40
DRAFTS = {
    "passes": "A x\n" + _words(30),
    "hyphenated, 40 between spaces": "A x\n" + _words(36) + " well-known state-of-the-art",  # IFEval: 44
    "dashes, 45 between spaces": "A x\n" + _words(33) + " — — – -- ... ?!",  # IFEval: 35
    "contractions, 39 between spaces": "A x\n" + _words(34) + " don't can't it's",  # IFEval: 42
    "a contraction is not the word": "A xs\nx's " + _words(3),  # "x" whole in "x's": it is
    "one line": "A x " + _words(10),
    "no match, no word": "lamp\nlamp-x",
    "blank lines do not count": "A x\n\n   \n",
    "empty": "",
    "long": "A x\n" + "a-b " * 2_000,
}


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    (root / "mapping.yaml").write_text(MAPPING)
    (root / "listed.yaml").write_text(LISTED)
    return load_task(root / "mapping.yaml"), load_task(root / "listed.yaml")


@pytest.mark.parametrize("draft", DRAFTS.values(), ids=DRAFTS)
def test_the_mapping_and_the_list_give_the_same_verdicts(forms, draft):
    mapping, listed = (task.declared.verifier for task in forms)
    assert isinstance(mapping, Checks)
    one, other = mapping("in", draft), listed("in", draft)
    assert (one.passed, one.score) == (other.passed, other.score)
    assert forms[0].metric("in", draft) == forms[1].metric("in", draft)
    own = [c.check(draft).passed for c in mapping.instructions]
    assert own == [c.check(draft).passed for c in listed.fn.checks]  # check by check
    assert one.score == sum(own) / 4 and one.text == other.text  # the same findings too


def test_the_edge_cases_count_words_as_the_list_does(forms):
    mapping = forms[0].declared.verifier
    # between spaces these were 40, 45 and 39 words: the mapping passed, failed, passed
    assert not mapping("in", DRAFTS["hyphenated, 40 between spaces"]).passed
    assert mapping("in", DRAFTS["dashes, 45 between spaces"]).passed
    assert mapping.findings(DRAFTS["contractions, 39 between spaces"]) == ["needs at most 40 words, has 42"]


def test_the_mapping_keys_spell_the_instruction_kinds():
    checks = Checks.parse(
        {"min_words": 3, "max_words": 8, "min_chars": 5, "max_lines": 1, "min_lines": 1, "required_words": ["moon"]}
        | {"must_match": ["^A", {"pattern": "b$", "says": "end with b"}], "must_not_match": "(?i)sorry"}
    )
    assert [c.model_dump() for c in checks.instructions] == [
        c.model_dump()
        for c in parse_checks(
            [
                {"type": "count", "unit": "words", "relation": "at least", "n": 3},
                {"type": "count", "unit": "words", "relation": "at most", "n": 8},
                {"type": "count", "unit": "characters", "relation": "at least", "n": 5},
                {"type": "count", "unit": "lines", "relation": "exactly", "n": 1},
                {"type": "keywords", "words": ["moon"], "whole": True},
                {"type": "regex", "pattern": "^A", "present": True},
                {"type": "regex", "pattern": "b$", "present": True, "says": "end with b"},
                {"type": "regex", "pattern": "(?i)sorry", "present": False},
            ]
        )
    ]
    assert checks.count() == 8
    assert checks == Checks.parse(checks.model_dump()) != Checks(max_words=8)  # a mapping is its keys' values
    # a regex without its rule in words is still named by its key and place
    found = Checks(must_match=["^A", "^B"])("in", "A")
    assert found.text == "does not have the required form (check must_match 2)" and found.score == 1 / 2


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        (
            "  required_words: ['" + "w" * 61 + "']",
            "checks.required_words.0': String should have at most 60 characters",
        ),
        ("  required_words: ['  ']", "checks.required_words.0': String should match pattern"),
        ("  max_words: 100001", "checks.max_words': Input should be less than or equal to 100000"),
        ("  must_match: ''", "checks.must_match': a regex is 1 to 500 characters, not 0"),
        (
            "  must_not_match: [{pattern: '" + "a" * 501 + "'}]",
            "Pattern.pattern': String should have at most 500 characters",
        ),
    ],
)
def test_a_mapping_the_kinds_refuse_is_refused_when_the_file_loads(tmp_path, checks, message):
    path = tmp_path / "bad.yaml"
    path.write_text(HEAD + "checks:\n" + checks + "\n")
    with pytest.raises(TaskFileError) as err:
        load_task(path)
    assert message in str(err.value) and "\n" not in str(err.value)
