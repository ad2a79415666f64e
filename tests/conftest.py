from __future__ import annotations

import asyncio
import json
import os

import pytest

from selfrefine import Task

FB_MISSING = json.dumps({"missing_concepts": ["frisbee"], "commonsense": "NONE"})
FB_DONE = json.dumps({"missing_concepts": [], "commonsense": "NONE"})


def scored_task(**kw) -> Task:
    """A small user task with a score regex, as a code user would define it."""
    params = dict(
        generate="Write about {{ input }}.",
        feedback="Critique: {{ draft }}",
        refine=(
            "Topic: {{ input }}\n"
            "{% for h in history %}OLD[{{ h.draft }}|{{ h.feedback }}]\n{% endfor %}"
            "CUR[{{ draft }}|{{ feedback }}]\nBetter:"
        ),
        score=r"score:\s*(\d+)",
    )
    params.update(kw)
    return Task("scored", **params)


@pytest.fixture
def task() -> Task:
    return scored_task()


def require_embedded() -> None:
    """Skip without the embedded model locally; in CI its absence is a failure."""
    try:
        import llama_cpp  # noqa: F401

        from selfrefine.backends.embedded import default_model_path

        default_model_path()
    except Exception as exc:  # pragma: no cover - depends on the machine
        if os.environ.get("CI"):
            pytest.fail(f"the embedded model must be installed in CI: {exc}")
        pytest.skip(f"embedded model not installed: {exc}")


@pytest.fixture(scope="session")
def embedded():
    """One embedded backend for the session: each role's few-shot prefix stays in its KV cache."""
    require_embedded()
    from selfrefine.backends.embedded import LlamaCppBackend

    backend = LlamaCppBackend(name="embedded", n_ctx=2048)
    yield backend
    asyncio.run(backend.aclose())
