"""selfrefine: Self-Refine (Madaan et al., NeurIPS 2023) as a library, CLI and engine.

One model drafts an answer, writes actionable feedback on it and refines it with the
history of earlier drafts and feedback, until a stop rule holds::

    from selfrefine import SelfRefine
    engine = SelfRefine("commongen", model="embedded", max_iterations=2)
    result = engine.run("dog, frisbee, catch, throw")
    print(result.output, result.stop_reason)
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backends import (
        Backend,
        CompletionRequest,
        CompletionResponse,
        FakeBackend,
        RoleBackends,
        get_backend,
    )
    from .checks.declared import Checks
    from .core.config import RefineConfig
    from .core.errors import (
        BackendError,
        ConfigError,
        EngineClosedError,
        FeedbackParseError,
        InputError,
        ParseError,
        SelfRefineError,
        TaskError,
        TaskFileError,
        TemplateError,
        TransientBackendError,
    )
    from .core.records import (
        CallRecord,
        ChecksStep,
        DecisionStep,
        DeltaStep,
        DraftStep,
        Feedback,
        FeedbackStep,
        Iteration,
        ProgressStep,
        ResultStep,
        RunResult,
        StopReason,
        Usage,
        Verification,
    )
    from .engine.loop import SelfRefine, refine
    from .engine.spec import BackendPool, EngineSpec, ModelSpec
    from .task.task import Capabilities, Task, TaskDefaults
    from .tasks import get_task
    from .tasks.taskfile import load_task

# The names below are imported on first use (PEP 562): `selfrefine --help` and a command that
# needs none of the engine do not pay for all of it (pydantic models, templates, tasks).
_EXPORTS = {  # name -> the module it comes from, imported on first use
    "Backend": ".backends",
    "CompletionRequest": ".backends",
    "CompletionResponse": ".backends",
    "FakeBackend": ".backends",
    "RoleBackends": ".backends",
    "get_backend": ".backends",
    "RefineConfig": ".core.config",
    "BackendError": ".core.errors",
    "ConfigError": ".core.errors",
    "EngineClosedError": ".core.errors",
    "FeedbackParseError": ".core.errors",
    "InputError": ".core.errors",
    "ParseError": ".core.errors",
    "SelfRefineError": ".core.errors",
    "TaskError": ".core.errors",
    "TaskFileError": ".core.errors",
    "TemplateError": ".core.errors",
    "TransientBackendError": ".core.errors",
    "CallRecord": ".core.records",
    "ChecksStep": ".core.records",
    "DecisionStep": ".core.records",
    "DeltaStep": ".core.records",
    "DraftStep": ".core.records",
    "Feedback": ".core.records",
    "FeedbackStep": ".core.records",
    "Iteration": ".core.records",
    "ProgressStep": ".core.records",
    "ResultStep": ".core.records",
    "RunResult": ".core.records",
    "StopReason": ".core.records",
    "Usage": ".core.records",
    "Verification": ".core.records",
    "Checks": ".checks.declared",
    "SelfRefine": ".engine.loop",
    "refine": ".engine.loop",
    "BackendPool": ".engine.spec",
    "EngineSpec": ".engine.spec",
    "ModelSpec": ".engine.spec",
    "Capabilities": ".task.task",
    "Task": ".task.task",
    "TaskDefaults": ".task.task",
    "get_task": ".tasks",
    "load_task": ".tasks.taskfile",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'selfrefine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendPool",
    "Capabilities",
    "Checks",
    "EngineSpec",
    "ModelSpec",
    "TaskDefaults",
    "BackendError",
    "CallRecord",
    "CompletionRequest",
    "CompletionResponse",
    "ConfigError",
    "ChecksStep",
    "DecisionStep",
    "DeltaStep",
    "DraftStep",
    "EngineClosedError",
    "FakeBackend",
    "Feedback",
    "FeedbackParseError",
    "FeedbackStep",
    "InputError",
    "Iteration",
    "ParseError",
    "ProgressStep",
    "RefineConfig",
    "RoleBackends",
    "ResultStep",
    "RunResult",
    "SelfRefine",
    "SelfRefineError",
    "StopReason",
    "Task",
    "TaskError",
    "TaskFileError",
    "TemplateError",
    "TransientBackendError",
    "Usage",
    "Verification",
    "get_backend",
    "get_task",
    "load_task",
    "refine",
]
