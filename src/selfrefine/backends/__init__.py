"""Model backends behind one async contract (see :mod:`selfrefine.backends.base`)."""

from .base import Backend, CompletionRequest, CompletionResponse, TokenChoices, Turn
from .fake import FakeBackend
from .probabilities import answer_probabilities
from .registry import DEFAULT_MODEL, get_backend, schemes
from .roles import RoleBackends

__all__ = [
    "Backend",
    "CompletionRequest",
    "CompletionResponse",
    "DEFAULT_MODEL",
    "FakeBackend",
    "RoleBackends",
    "get_backend",
    "schemes",
    "TokenChoices",
    "Turn",
    "answer_probabilities",
]
