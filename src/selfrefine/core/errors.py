"""One error hierarchy for the whole package.

Every error the library raises on purpose is a :class:`SelfRefineError`; its message is
written for the person at the keyboard and, where possible, says how to fix the problem.
The CLI prints ``str(error)`` on one line and exits non-zero (``--debug`` shows tracebacks).
"""

from __future__ import annotations


class SelfRefineError(Exception):
    """Base class of every error raised on purpose by selfrefine."""

    exit_code = 1


class ConfigError(SelfRefineError):
    """An option or combination of options is invalid."""

    exit_code = 2


class SandboxUnavailableError(ConfigError):
    """This machine cannot cut model-written code off from the network, so it is not run."""


class EngineClosedError(ConfigError):
    """A :class:`~selfrefine.SelfRefine` engine was used after ``close()``."""


class InputError(SelfRefineError):
    """The input given to a task is empty, too large or malformed."""

    exit_code = 2


class StorageError(SelfRefineError):
    """A run folder or the response cache cannot be written or read: a read-only folder, a
    full disk, a damaged cache file, a path that cannot exist. Finished rows stay on disk."""


class TaskError(SelfRefineError):
    """A task is unknown or its definition is broken."""

    exit_code = 2


class TaskFileError(TaskError):
    """A YAML task file is missing, unreadable or invalid."""


class TemplateError(TaskError):
    """A prompt template failed to parse or to render."""


class BackendError(SelfRefineError):
    """A model backend failed in a way retries cannot fix."""


class ModelNotFoundError(BackendError):
    """A model spec names a backend or file that does not exist."""

    exit_code = 2


class TransientBackendError(BackendError):
    """A backend failure worth retrying: connection, rate limit, 5xx, timeout."""


class ParseError(SelfRefineError):
    """Model output could not be parsed into what the task needs."""


class FeedbackParseError(ParseError):
    """Feedback text could not be parsed into the task's fields."""


class DraftParseError(ParseError):
    """A generated or refined draft is empty or lacks what the task needs."""


class RunInterrupted(BaseException):  # noqa: N818 - it carries an interrupt, like KeyboardInterrupt
    """A task's check raised ``KeyboardInterrupt`` or ``SystemExit`` (Ctrl-C, ``sys.exit()``)
    in the thread it runs in: the run stops. asyncio passes this on as it does any error
    (the interrupt itself would break out of the event loop and leave the run's tasks on
    it), and, not being an ``Exception``, no ``except Exception`` keeps the run going. The
    sync ``SelfRefine.run()`` raises ``interrupt`` itself once its loop is clear."""

    def __init__(self, message: str, interrupt: BaseException) -> None:
        super().__init__(message)
        self.interrupt = interrupt


def error_text(exc: BaseException) -> str:
    """How a caught error is recorded in a result or row: its type and message."""
    return f"{type(exc).__name__}: {exc}"
