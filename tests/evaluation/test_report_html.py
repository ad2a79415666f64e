"""The HTML report in a real headless Chromium: picker, drafts, word diffs, safe escaping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import page_errors
from test_report import make_runs

from selfrefine.evaluation.report import write_report

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _require_browser() -> None:
    """Skip without Playwright or Debian's chromium locally; in CI their absence fails."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install playwright)")
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if missing:
        reason = "the HTML report test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture
def page(tmp_path: Path):
    _require_browser()
    from playwright.sync_api import sync_playwright

    out = tmp_path / "report"
    write_report(list(make_runs(tmp_path)), out)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors = page_errors(page)
            page.goto((out / "report.html").as_uri())
            yield page
            assert errors == [], errors  # no script error, and no injected script ran
        finally:
            browser.close()


def test_picker_shows_drafts_with_word_diffs(page, tmp_path):
    picker = page.locator("#example-picker")
    assert picker.locator("option").count() == 7  # every row, the failed one too
    assert picker.locator("optgroup").evaluate_all("gs => gs.map(g => g.label)") == ["refine", "nofeedback"]

    picker.select_option(value="0:2")  # run "refine", example "c"
    viewer = page.locator("#viewer")
    assert "refine / c" in viewer.locator(".example-title").inner_text()
    cards = viewer.locator(".draft")
    assert cards.count() == 2
    assert viewer.locator(".samples").count() == 0  # one sample per step: no samples list
    assert cards.nth(0).locator(".text").inner_text() == "A cat sleeps on the mat."
    second = cards.nth(1)
    assert second.locator("ins").all_inner_texts() == [" dog"]
    assert second.locator("del").all_inner_texts() == [" cat"]
    assert "feedback on draft 1" in second.locator(".feedback-text").inner_text()
    assert "metric 0.000" in second.locator("h3").inner_text()
    # Model text is shown literally: the feedback's <b> is text, never an element.
    assert "<b>bold</b>" in second.locator(".feedback-text").inner_text()
    assert viewer.locator(".feedback-text b").count() == 0

    picker.select_option(value="0:0")  # three drafts, the last one without feedback
    cards = viewer.locator(".draft")
    assert cards.count() == 3
    assert cards.nth(2).locator("ins").all_inner_texts() == [" 5."]
    assert "stopped before feedback" in cards.nth(2).locator(".feedback-text").inner_text()
    assert cards.nth(2).get_attribute("class") == "draft selected"

    page.locator("#show-diff").uncheck()  # plain drafts without diff markup
    assert viewer.locator(".draft ins").count() == 0
    assert viewer.locator(".draft").nth(2).locator(".text").inner_text() == "The answer is 5."

    shot = tmp_path / "viewer.png"
    page.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000


def test_untrusted_text_is_not_executed(page):
    page.locator("#example-picker").select_option(value="1:1")  # run "nofeedback", example "b"
    text = page.locator("#viewer .draft .text").first.inner_text()
    assert text == "all </script><script>alert(1)</script>"
    assert page.locator("#viewer script").count() == 0


def test_failed_example_shows_its_error(page):
    page.locator("#example-picker").select_option(value="0:3")  # run "refine", example "d"
    assert "InputError: empty input" in page.locator("#viewer .error").inner_text()
    assert page.locator("#viewer .draft").count() == 0


def test_recorded_errors_show_in_the_viewer(tmp_path):
    """A metric that raised on a draft, a failed judge call and an answer-hook crash are
    shown with their messages, not as a bare '-'."""
    _require_browser()
    from playwright.sync_api import sync_playwright
    from test_report import make_result, write_run

    from selfrefine.core.records import StopReason
    from selfrefine.evaluation.runner import ExampleRow
    from selfrefine.evaluation.runstore import RunMeta

    row = ExampleRow(
        id="e",
        metrics=[None, 1.0],
        metric_errors=["ValueError: cannot score", None],
        judge_error="BackendError: 401 invalid key",
        answer_error="RuntimeError: no answer",
        result=make_result("commongen", ["x y", "x y z"], [1, None], StopReason.MAX_ITERATIONS),
    )
    meta = RunMeta(name="errs", task="commongen", data="d", models={"generate": "m"}, config={"max_iterations": 1})
    out = tmp_path / "report"
    write_report([write_run(tmp_path / "run", meta, [row])], out)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page()
            page.goto((out / "report.html").as_uri())
            viewer = page.locator("#viewer")
            assert "judge error: BackendError: 401 invalid key" in viewer.locator(".judge-error").inner_text()
            assert "answer hook error: RuntimeError: no answer" in viewer.locator(".answer-error").inner_text()
            first = viewer.locator(".draft").nth(0)
            assert "metric failed" in first.locator("h3").inner_text()
            assert "metric error: ValueError: cannot score" in first.locator(".metric-error").inner_text()
            assert viewer.locator(".draft").nth(1).locator(".metric-error").count() == 0
            assert "Errors recorded in the rows" in page.locator("body").inner_text()
        finally:
            browser.close()


def test_best_badge_needs_a_score_and_unparsed_feedback_is_marked(tmp_path):
    """No 'best feedback' badge on a draft no critique scored (select "best" then falls back
    to the last draft); a critique that never parsed says so beside its raw text."""
    _require_browser()
    from playwright.sync_api import sync_playwright
    from test_report import make_result, write_run

    from selfrefine.core.records import Feedback, StopReason
    from selfrefine.evaluation.runner import ExampleRow
    from selfrefine.evaluation.runstore import RunMeta

    unscored = make_result("commongen", ["x y", "x y z"], [None, None], StopReason.MAX_ITERATIONS)
    garbled = make_result("commongen", ["p", "p q"], [None, None], StopReason.MAX_ITERATIONS)
    garbled.iterations[0].feedback = Feedback(text='{"missing_concepts": [', parse_error="not valid JSON")
    rows = [
        ExampleRow(id="none", metrics=[0.5, 1.0], result=unscored),
        ExampleRow(id="bad", metrics=[0.5, 1.0], result=garbled),
    ]
    meta = RunMeta(name="r", task="commongen", data="d", models={"generate": "m"}, config={"max_iterations": 1})
    out = tmp_path / "report"
    write_report([write_run(tmp_path / "run", meta, rows)], out)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page()
            page.goto((out / "report.html").as_uri())
            viewer = page.locator("#viewer")
            assert "best feedback" not in viewer.inner_text()
            assert "returned" in viewer.locator(".draft").nth(1).locator("h3").inner_text()
            page.locator("#example-picker").select_option(value="0:1")
            first = viewer.locator(".draft").nth(0)
            assert "unparsed" in first.locator(".feedback h4").inner_text()
            assert "not valid JSON" in first.locator(".feedback-error").inner_text()
            assert first.locator(".feedback-text").inner_text() == '{"missing_concepts": ['
            assert viewer.locator(".draft").nth(1).locator(".feedback-error").count() == 0
        finally:
            browser.close()


HOSTILE = "dog and ball <img src=x onerror=alert(1)></script><script>alert(2)</script>"


def test_every_sample_of_a_step_shows_with_its_score_and_mark(tmp_path):
    """A run with --samples 3 on the fake model: under the draft, a folded list of the three
    samples, each with its text, verifier score, pass/fail and chosen/lost; a hostile sample
    is text, never markup."""
    import json

    from click.testing import CliRunner

    from selfrefine.cli.commands import cli

    _require_browser()
    from playwright.sync_api import sync_playwright

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"concepts": ["dog", "ball", "park"]}) + "\n")
    replies = tmp_path / "r.json"
    done = json.dumps({"missing_concepts": [], "commonsense": "NONE"})
    replies.write_text(
        json.dumps({"generate": ["A dog.", "A dog plays with a ball in the park.", HOSTILE], "default": done})
    )
    run = tmp_path / "run"
    args = ["eval", "commongen", "--data", str(data), "--out", str(run), "-m", f"fake:{replies}", "--no-cache"]
    out = CliRunner().invoke(cli, [*args, "--samples", "3", "--max-iters", "0"])
    assert out.exit_code == 0, out.output
    write_report([run], tmp_path / "report")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page()
            errors = page_errors(page)
            page.goto((tmp_path / "report" / "report.html").as_uri())
            card = page.locator("#viewer .draft").first
            assert card.locator(".text").inner_text() == "A dog plays with a ball in the park."
            box = card.locator("details.samples")
            assert (
                box.locator("summary").inner_text()
                == "3 samples, verifier scores: lost 0.33 · ✓ chosen 1.00 · lost 0.67"
            )
            assert box.locator(".sample-text").first.is_hidden()  # folded until opened
            box.locator("summary").click()
            samples = box.locator(".sample")
            assert samples.evaluate_all("xs => xs.map(x => x.className)") == [
                "sample lost",
                "sample chosen",
                "sample lost",
            ]
            assert samples.locator("h5").all_inner_texts() == [
                "lost · sample 1 · verifier score 0.33 · fail",
                "✓ chosen · sample 2 · verifier score 1.00 · pass",
                "lost · sample 3 · verifier score 0.67 · fail",
            ]
            texts = samples.locator(".sample-text").all_inner_texts()
            assert texts == ["A dog.", "A dog plays with a ball in the park.", HOSTILE]  # shown as text
            assert page.locator("#viewer img, #viewer script").count() == 0
            page.wait_for_timeout(200)  # an onerror handler would have fired by now
            assert errors == [], errors
        finally:
            browser.close()
