"""What an API client may read of a run: not the upstream's address, not the server's files,
not the operator's templates. The server's log keeps what is left out.

- a failure's message loses every URL (the upstream's address, e.g. ``cannot reach server
  ... (at http://10.0.0.5:8000/v1)``, an IPv6 host in brackets included);
- a model name that holds a path on the server (``gguf:/srv/models/x.gguf``) reads
  ``gguf:<server file>``, in the run's config and in every call record, and the config's
  ``model_files`` (paths, sizes, hashes) is left out;
- an error of the server's own task during a run (a template that fails to render, a verify
  function that fails) is the server's fault, not the request's: :class:`BrokenTaskError`,
  which the API answers with 500 and a message that names the task and nothing of it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import aclosing

from ..core.errors import SelfRefineError, TaskError, TemplateError
from ..core.records import (
    CallRecord,
    CallStep,
    Candidate,
    ChecksStep,
    DecisionStep,
    DraftStep,
    Iteration,
    ResultStep,
    RunResult,
    Step,
)

# a scheme, then everything up to a space, quote, parenthesis or angle bracket: square
# brackets are part of it (http://[::1]:9/v1, http://user@[fe80::1%25eth0]/)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s()'\"<>]+")
# what else of the server's network and disk an upstream's own message text names: an
# absolute path of two parts or more (/srv/models/x.gguf, ~/keys, C:\\models), an IPv4
# or bracketed IPv6 address (its port too), a name with a port (gpu-7:8000), and a host name: three labels
# or more (gpu-7.lab.example), or two whose last is a common top-level name (corp.internal)
_PATH = re.compile(r"(?<![\w./<>-])(?:~|[A-Za-z]:)?(?:[/\\][\w.@%+~-]+){2,}[/\\]?")
_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b|\[[0-9A-Fa-f:.%]+\](?::\d{1,5})?")
_LABEL = r"[A-Za-z][A-Za-z0-9-]*"
_TLDS = "com|net|org|io|ai|dev|cloud|internal|local|lan|corp|home|intranet|localdomain"
_HOST = re.compile(
    rf"\b(?:(?:{_LABEL}\.){{2,}}{_LABEL}|{_LABEL}\.(?:{_TLDS}))(?::\d{{1,5}})?\b|\b{_LABEL}:\d{{2,5}}\b",
    re.IGNORECASE,
)
_HIDDEN = ((_URL, "<upstream>"), (_PATH, "<server path>"), (_IPV4, "<host>"), (_HOST, "<host>"))
SERVER_FILE = "<server file>"
log = logging.getLogger("selfrefine.serve")


class BrokenTaskError(SelfRefineError):
    """The server's task failed during a run (its template, its verifier): a server error."""


def public_message(message: str) -> str:
    """A failure's message without any URL (:data:`_URL`), path, address or host name of the
    server's (:data:`_HIDDEN`); logged whole when cut. The texts it reads are bounded (an
    error message, a note), and each pattern is linear."""
    redacted = message
    for pattern, placeholder in _HIDDEN:
        redacted = pattern.sub(placeholder, redacted)
    if redacted != message:
        log.warning("%s", message)
    return redacted


def public_model(name: str) -> str:
    """A model's name without a path on the server: ``gguf:PATH`` (or any name whose part
    after the scheme is a path) reads ``gguf:<server file>``; other names are as they are."""
    scheme, colon, rest = name.partition(":")
    if colon and (scheme == "gguf" or rest.startswith(("/", "~", ".")) or "\\" in rest):
        return f"{scheme}:{SERVER_FILE}"
    return name


async def public_steps(steps: AsyncIterator[Step], task: str) -> AsyncIterator[Step]:
    """A run's steps as a client may see them (module docstring). Closing this closes
    ``steps`` at once (a client that leaves cancels the run's calls)."""
    async with aclosing(steps):  # type: ignore[type-var]
        try:
            async for step in steps:
                yield public_step(step)
        except TaskError as exc:
            log.error("task %r failed during a run: %s", task, exc)
            what = (
                "a prompt template failed to render" if isinstance(exc, TemplateError) else "the task raised an error"
            )
            raise BrokenTaskError(
                f"the server's task {task!r} is broken ({what}); this is the server's fault, not the request's: "
                "its operator's log has the details"
            ) from None


def public_step(step: Step) -> Step:
    if isinstance(step, ResultStep):
        return step.model_copy(update={"result": public_result(step.result)})
    if isinstance(step, CallStep):
        return step.model_copy(update={"call": _public_call(step.call)})
    if isinstance(step, DraftStep):
        call = _public_call(step.call) if step.call is not None else None
        return step.model_copy(update={"call": call, "candidates": _public_candidates(step.candidates)})
    if isinstance(step, DecisionStep) and step.detail:  # "stop (error): ..."
        return step.model_copy(update={"detail": public_message(step.detail)})
    if isinstance(step, ChecksStep):  # "the derivation failed (<the upstream's error>); ..."
        call = _public_call(step.call) if step.call is not None else None
        return step.model_copy(update={"note": public_message(step.note), "call": call})
    return step


def public_result(result: RunResult) -> RunResult:
    error = public_message(result.error) if result.error else result.error
    models = {role: public_model(name) for role, name in result.config.models.items()}
    config = result.config.model_copy(update={"models": models, "model_files": {}})
    return result.model_copy(
        update={
            "error": error,
            "calls": [_public_call(c) for c in result.calls],
            "iterations": [_public_iteration(it) for it in result.iterations],
            "config": config,
        }
    )


def _public_call(call: CallRecord) -> CallRecord:
    update: dict[str, str] = {"model": public_model(call.model)}
    if call.error:
        update["error"] = public_message(call.error)
    return call.model_copy(update=update)


def _public_candidates(candidates: list[Candidate]) -> list[Candidate]:
    return [c if c.call is None else c.model_copy(update={"call": _public_call(c.call)}) for c in candidates]


def _public_iteration(it: Iteration) -> Iteration:
    return it.model_copy(update={"candidates": _public_candidates(it.candidates)}) if it.candidates else it
