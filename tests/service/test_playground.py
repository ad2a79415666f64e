"""The playground page of ``selfrefine serve`` in a real headless Chromium against a real
uvicorn server: tasks listed, a run streamed live with word diffs, the output marked, errors
shown, and the API key asked for when the server needs one."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import page_errors
from test_report_html import ARGS, CHROMIUM, _require_browser

from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.roles import RoleBackends
from selfrefine.service.app import ServeSettings, create_app

CONCEPTS = "dog, frisbee, catch, throw"
FIRST = "A dog runs in the park."
# tags in model text must stay text: the page sets it with textContent
REFINED = "A boy throws a <b>frisbee</b> and a dog runs to catch it."
KEY = "s3cret-key"


def fake_reply(request: CompletionRequest) -> str:
    """Draft 0 misses three concepts; the critic says so (with markup that must not run);
    the refinement uses them all and the critic then says it is done."""
    if request.role == "generate":
        return FIRST
    if request.role == "refine":
        return REFINED
    if f"Sentence: {REFINED}" in request.prompt:
        return json.dumps({"missing_concepts": [], "commonsense": "NONE"})
    return json.dumps(
        {
            "missing_concepts": ["frisbee", "catch", "throw"],
            "commonsense": "Say who throws. <img src=x onerror=alert(1)>",
        }
    )


def fake(refines: list[str | Exception] | None = None) -> FakeBackend:
    """``refines``: the refiner's first replies, before the default one."""
    # the refinement is slow enough that the page must show draft 0 before the result
    return FakeBackend(
        {"refine": refines or []}, default=fake_reply, latency={"generate": 0.05, "feedback": 0.05, "refine": 0.6}
    )


@contextmanager
def serving(backend: FakeBackend | None = None, api_key: str | None = None) -> Iterator[str]:
    """A real uvicorn server on a free 127.0.0.1 port, in a background thread."""
    import uvicorn

    app = create_app(ServeSettings(backends=RoleBackends.of(backend or fake()), api_key=api_key))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the uvicorn server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (a launch costs seconds); a context per test."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def browser_page(browser, url: str):
    """The playground at ``url`` in a fresh narrow window, its tasks loaded unless a key is
    needed; at the end: no script error, no injected script ran, nothing fetched elsewhere."""
    context = browser.new_context(viewport={"width": 420, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
        errors = page_errors(page)
        external: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(url) else external.append(r.url))
        page.goto(url)
        yield page
        assert errors == [], errors
        assert external == [], external
    finally:
        context.close()


def tasks_loaded(page) -> None:
    page.wait_for_function("document.querySelectorAll('#task option').length > 0")


def run_commongen(page) -> None:
    page.locator("#task").select_option("commongen")
    page.locator("#input").fill(CONCEPTS)
    page.locator("#max-iterations").fill("3")
    page.locator("#run").click()


def test_run_streams_drafts_diffs_and_marks_the_output(browser):
    with serving() as url, browser_page(browser, url) as page:
        task = page.locator("#task")
        tasks_loaded(page)
        names = task.locator("option").all_inner_texts()
        assert "commongen" in names and "acronym" in names and "gsm8k" not in names  # no --allow-code-tasks
        task.select_option("commongen")
        assert "CommonGen" in page.locator("#task-description").inner_text()

        run_commongen(page)
        # live: draft 0 is on the page while the refinement is still being written
        page.locator(".draft").first.wait_for()
        assert page.locator(".draft").count() == 1
        assert page.locator("#final").is_hidden()
        assert page.locator("#trace").get_attribute("aria-live") == "polite"

        page.locator("#final").wait_for()
        drafts = page.locator(".draft")
        assert drafts.count() == 2
        assert drafts.nth(0).locator(".text").text_content() == FIRST
        assert drafts.nth(1).locator(".text").text_content() == REFINED
        diff = drafts.nth(1).locator(".diff")
        assert diff.is_visible()
        # kept words (" dog runs") unmarked; the rest inserted or deleted, word by word
        assert diff.locator("ins").all_text_contents() == [" boy throws a <b>frisbee</b> and a", " to catch it."]
        assert diff.locator("del").all_text_contents() == [" in the park."]
        assert diff.text_content() == "A boy throws a <b>frisbee</b> and a dog runs in the park. to catch it."
        # the critique and the decisions, model markup as text
        assert "frisbee" in drafts.nth(0).locator(".feedback-text").text_content()
        assert "<img src=x" in drafts.nth(0).locator(".feedback-text").text_content()
        assert page.locator("#trace img, #trace b").count() == 0
        assert "refine" in drafts.nth(0).locator(".decision").text_content()
        assert "stop" in drafts.nth(1).locator(".decision").text_content()
        assert page.locator("#trace .samples").count() == 0  # one sample per step: no samples list

        # the returned output, marked on its draft and in #final
        assert page.locator("#final-text").text_content() == REFINED
        assert page.locator("#final").get_attribute("data-selected") == "1"
        assert drafts.nth(1).get_attribute("data-selected") == "true"
        assert drafts.nth(0).get_attribute("data-selected") is None
        assert page.locator("#stop-reason").get_attribute("data-reason") == "feedback"
        assert "4 calls" in page.locator("#usage").text_content()

        # "show changes" off: the refined draft's plain text instead of its diff
        page.locator("#show-diff").uncheck()
        assert diff.is_hidden() and drafts.nth(1).locator(".text").is_visible()


def test_an_error_before_the_stream_shows_its_message(browser):
    with serving() as url, browser_page(browser, url) as page:
        tasks_loaded(page)
        page.locator("#task").select_option("commongen")
        page.locator("#input").fill(" , ; ")  # no concept: the server answers 400
        page.locator("#run").click()
        error = page.locator("#error")
        error.wait_for()
        assert "needs at least one concept" in error.inner_text()
        assert page.locator("#final").is_hidden()
        assert page.locator("#run").is_enabled()


def test_an_error_after_the_stream_started_shows_its_message(browser):
    with serving(fake([RuntimeError("the refiner broke")])) as url, browser_page(browser, url) as page:
        tasks_loaded(page)
        run_commongen(page)
        error = page.locator("#error")
        error.wait_for()
        assert "the refiner broke" in error.inner_text()
        assert page.locator(".draft").count() == 1  # what arrived before the error stays
        assert page.locator("#final").is_hidden()
        assert page.locator("#run").is_enabled()


def test_stop_cancels_the_run_on_the_server(browser):
    backend = fake()
    with serving(backend) as url, browser_page(browser, url) as page:
        tasks_loaded(page)
        run_commongen(page)
        page.locator(".decision").first.wait_for()  # the refinement call is under way
        page.locator("#cancel").click()
        page.wait_for_function("document.querySelector('#status').textContent.startsWith('stopped')")
        deadline = time.monotonic() + 5
        while not backend.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [r.role for r in backend.cancelled] == ["refine"]  # the server cut the call off
        assert page.locator("#final").is_hidden() and page.locator("#error").is_hidden()
        assert page.locator("#run").is_enabled()


def test_a_rejected_refinement_is_marked_and_the_next_one_diffs_against_its_base(browser):
    worse = "A cat sleeps."  # no concept at all: fewer than draft 0's "dog"
    with serving(fake([worse, REFINED])) as url, browser_page(browser, url) as page:
        tasks_loaded(page)
        page.locator("#accept").select_option("not_worse")
        run_commongen(page)
        page.locator("#final").wait_for(timeout=15_000)
        drafts = page.locator(".draft")
        assert drafts.count() == 3
        rejected = drafts.nth(1)
        assert rejected.get_attribute("data-accepted") == "false"
        assert "rejected" in rejected.locator(".badge").text_content()
        assert "rejected" in rejected.locator(".decision").text_content()
        # draft 2 refines draft 0 (not the rejected draft 1): its diff is against draft 0
        third = drafts.nth(2)
        assert "refines draft 0" in third.locator("h3").text_content()
        assert third.locator(".diff del").all_text_contents() == [" in the park."]
        assert page.locator("#final").get_attribute("data-selected") == "2"
        assert page.locator("#final-text").text_content() == REFINED


def test_the_page_asks_for_the_api_key_and_then_runs(browser):
    with serving(api_key=KEY) as url, browser_page(browser, url) as page:
        auth = page.locator("#auth")
        auth.wait_for()  # the page loads without a key; /v1/models answers 401
        assert "missing API key" in page.locator("#auth-message").inner_text()
        assert page.locator("#task option").count() == 0

        page.locator("#api-key").fill("wrong")
        page.locator("#use-key").click()
        page.wait_for_function("document.querySelector('#auth-message').textContent.includes('invalid API key')")
        assert auth.is_visible()

        page.locator("#api-key").fill(KEY)
        page.locator("#use-key").click()
        tasks_loaded(page)
        assert auth.is_hidden()
        # the key stays in this tab's session only
        assert page.evaluate("sessionStorage.getItem('selfrefine.apiKey')") == KEY
        assert page.evaluate("localStorage.length") == 0

        run_commongen(page)
        page.locator("#final").wait_for()
        assert page.locator("#final-text").text_content() == REFINED
        assert page.locator(".draft").count() == 2


def test_typed_feedback_shows_its_fields_and_keeps_the_raw_text_folded(browser):
    """commongen's critique is JSON: the reader sees "missing concepts: frisbee, catch,
    throw", not the JSON; the raw text stays one click away."""
    with serving() as url, browser_page(browser, url) as page:
        tasks_loaded(page)
        run_commongen(page)
        page.locator("#final").wait_for()
        first = page.locator(".draft").nth(0).locator(".feedback")
        names = first.locator(".feedback-fields dt").all_text_contents()
        values = first.locator(".feedback-fields dd").all_text_contents()
        shown = dict(zip(names, values))
        assert shown["missing concepts"] == "frisbee, catch, throw"
        assert not any("not concepts" in name for name in names)  # an internal field, empty
        assert shown["commonsense"] == "Say who throws. <img src=x onerror=alert(1)>"  # text, not markup
        assert first.locator(".feedback-text").is_hidden()  # the JSON, folded
        first.locator("details summary").click()
        assert '"missing_concepts"' in first.locator(".feedback-text").inner_text()
        last = page.locator(".draft").nth(1).locator(".feedback .feedback-fields")
        assert "missing concepts" in last.locator("dt").all_text_contents()
        assert last.locator("dd").first.text_content() == "none"  # an empty list
        assert page.locator("#trace img").count() == 0


HOSTILE = "A dog and a frisbee <img src=x onerror=alert(1)></script><script>alert(2)</script>"


def test_every_sample_of_a_step_is_listed_with_its_score_and_mark(browser):
    """Samples per step = 3: each draft card folds its three samples, each with its text,
    verifier score, pass/fail and chosen/lost; a hostile sample stays text."""
    backend = FakeBackend(
        {
            "generate": ["A boy throws a frisbee and the dog runs.", HOSTILE, "A dog."],
            "refine": ["A dog catches a frisbee.", REFINED, "A dog."],
        },
        default=fake_reply,
    )
    with serving(backend) as url, browser_page(browser, url) as page:
        tasks_loaded(page)
        page.locator("#task").select_option("commongen")
        page.locator("#input").fill(CONCEPTS)
        page.locator("#max-iterations").fill("1")
        page.locator("#samples").fill("3")
        page.locator("#run").click()
        page.locator("#final").wait_for()
        drafts = page.locator(".draft")
        assert drafts.count() == 2
        assert drafts.nth(0).locator(".text").text_content() == "A boy throws a frisbee and the dog runs."
        first = drafts.nth(0).locator("details.samples")
        assert (
            first.locator("summary").text_content()
            == "3 samples, verifier scores: ✓ chosen 0.75 · lost 0.50 · lost 0.25"
        )
        assert first.locator(".sample-text").first.is_hidden()  # folded until opened
        first.locator("summary").click()
        samples = first.locator(".sample")
        assert samples.evaluate_all("xs => xs.map(x => x.className)") == ["sample chosen", "sample lost", "sample lost"]
        assert samples.locator("h4").all_text_contents() == [
            "✓ chosen · sample 1 · verifier score 0.75 · fail",
            "lost · sample 2 · verifier score 0.50 · fail",
            "lost · sample 3 · verifier score 0.25 · fail",
        ]
        texts = samples.locator(".sample-text").all_text_contents()
        assert texts == ["A boy throws a frisbee and the dog runs.", HOSTILE, "A dog."]  # markup as text
        second = drafts.nth(1).locator("details.samples summary")
        assert second.text_content() == "3 samples, verifier scores: lost 0.75 · ✓ chosen 1.00 · lost 0.25"
        assert drafts.nth(1).locator(".sample.chosen .sample-text").text_content() == REFINED
        assert page.locator("#final-text").text_content() == REFINED
        assert page.locator("#trace img, #trace script, #trace b").count() == 0
        page.wait_for_timeout(200)  # an onerror handler would have fired by now (browser_page checks)
