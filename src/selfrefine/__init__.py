"""selfrefine: Self-Refine (Madaan et al., NeurIPS 2023) as a library, CLI and engine.

One model drafts an answer, writes actionable feedback on it and refines it with the
history of earlier drafts and feedback, until a stop rule holds::

    from selfrefine import SelfRefine
    engine = SelfRefine("commongen", model="embedded", max_iterations=2)
    result = engine.run("dog, frisbee, catch, throw")
    print(result.output, result.stop_reason)
"""

from .backends import (
    Backend,
    CompletionRequest,
    CompletionResponse,
    FakeBackend,
    RoleBackends,
    get_backend,
)
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
from .engine.checks import Checks
from .engine.loop import SelfRefine, refine
from .engine.spec import BackendPool, EngineSpec, ModelSpec
from .engine.task import Capabilities, Task, TaskDefaults
from .tasks import get_task
from .tasks.taskfile import load_task

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
