"""What a chat request may ask that Self-Refine cannot do: tools, messages of roles it has no
place for, and content parts other than text. Each is refused with 400 naming the field
(dropping it silently would answer a different question than the one asked)."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError

from .schemas import CHAT_ROLES, ChatCompletionRequest

ROLES = tuple(CHAT_ROLES)


def refuse_unsupported(body: ChatCompletionRequest) -> None:
    """Raise a 400 (as a validation error: the field is the ``param``) for the first field
    of ``body`` this server cannot honour."""
    found = _unsupported(body)
    if found is not None:
        param, message = found
        raise RequestValidationError([{"loc": ("body", *param.split(".")), "msg": message, "type": "unsupported"}])


def _unsupported(body: ChatCompletionRequest) -> tuple[str, str] | None:
    extra: dict[str, Any] = body.model_extra or {}
    choice = extra.get("tool_choice")
    if extra.get("tools") and choice != "none":  # tools the model is told not to use change nothing
        return (
            "tools",
            "tools are not supported: Self-Refine returns text, never a tool call (or send tool_choice 'none')",
        )
    if extra.get("functions") and extra.get("function_call") != "none":
        return "functions", "functions are not supported: Self-Refine returns text, never a function call"
    if choice not in (None, "none", "auto"):
        return "tool_choice", f"tool_choice {choice!r} is not supported: there are no tools here"
    for i, message in enumerate(body.messages):
        if message.role not in ROLES:
            return f"messages.{i}.role", (f"role {message.role!r} is not supported; roles here: {', '.join(ROLES)}")
        if (message.model_extra or {}).get("tool_calls"):
            return f"messages.{i}.tool_calls", "tool_calls are not supported: there are no tools here"
        if isinstance(message.content, list):
            for j, part in enumerate(message.content):
                if part.get("type") != "text":
                    return f"messages.{i}.content.{j}.type", (
                        f"content part type {part.get('type')!r} is not supported: only 'text' parts are"
                    )
    return None
