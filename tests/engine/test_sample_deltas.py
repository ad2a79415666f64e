"""Several samples a step are shown as they come (issue 39, item 14): with deltas (the live
view, the API's stream) each sample of a step arrives before the step does, numbered, so a
best of K is not silent until its last sample ends; the run itself is the one without deltas."""

from __future__ import annotations

import asyncio

from selfrefine import DeltaStep, DraftStep, FakeBackend, SelfRefine, Task


def words() -> Task:
    task = Task(
        "words", generate="Write about {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}"
    )
    return task.with_verifier(lambda _input, draft: min(1.0, len(draft.split()) / 4))


def steps(backend: FakeBackend, **options) -> list:
    engine = SelfRefine(words(), backend, samples=3, max_iterations=0, **options)

    async def collect() -> list:
        return [s async for s in engine.astream("cats", deltas=True)]

    return asyncio.run(collect())


def test_each_sample_arrives_whole_and_numbered_before_its_step_on_a_parallel_backend():
    backend = FakeBackend({"generate": ["a cat", "a cat sat", "a cat sat down"]})
    got = steps(backend)
    deltas = [s for s in got if isinstance(s, DeltaStep)]
    # sample 1 is this task's greedy draft, a call of its own, streamed as written; the two
    # sampled at its temperature are one batch, each shown whole as it ends
    assert "".join(d.text for d in deltas if d.sample == 1) == "a cat"
    assert [(d.sample, d.text) for d in deltas if d.sample != 1] == [(2, "a cat sat"), (3, "a cat sat down")]
    draft = next(s for s in got if isinstance(s, DraftStep))
    assert got.index(draft) > got.index(deltas[-1])  # every sample is shown before the step
    assert draft.draft == "a cat sat down"


def test_a_backend_serving_one_call_at_a_time_streams_each_sample_in_turn():
    backend = FakeBackend({"generate": ["one two three", "four five six", "seven eight"]})
    backend.max_concurrency = 1  # as the embedded model: a streamed call per sample costs nothing more
    got = steps(backend)
    deltas = [s for s in got if isinstance(s, DeltaStep)]
    assert len(deltas) > 3  # pieces, not whole samples
    by_sample: dict[int, str] = {}
    for d in deltas:
        by_sample[d.sample] = by_sample.get(d.sample, "") + d.text
    assert by_sample == {1: "one two three", 2: "four five six", 3: "seven eight"}
    assert [d.sample for d in deltas] == sorted(d.sample for d in deltas)  # in turn, not interleaved


def test_the_run_with_deltas_is_the_run_without():
    replies = {"generate": ["a cat", "a cat sat", "a cat sat down"]}
    with_deltas = [s for s in steps(FakeBackend(dict(replies))) if not isinstance(s, DeltaStep)][-1].result
    plain = SelfRefine(words(), FakeBackend(dict(replies)), samples=3, max_iterations=0).run("cats")
    assert with_deltas.drafts == plain.drafts and with_deltas.output == plain.output
    assert [c.call.prompt_tokens for c in with_deltas.iterations[0].candidates] == [
        c.call.prompt_tokens for c in plain.iterations[0].candidates
    ]
