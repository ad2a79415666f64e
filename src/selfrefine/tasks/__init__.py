"""Built-in tasks and task lookup (built-in name, plugin entry point or YAML file path)."""

from __future__ import annotations

from ..core.builtins import TASKS
from ..core.errors import TaskError
from ..task.plugins import find_task, looks_like_path, task_entry_points
from ..task.task import Task
from .acronym import Acronym
from .chat import Chat
from .codeopt import CodeOpt
from .commongen import CommonGen
from .dialogue import Dialogue
from .gsm8k import GSM8K
from .readability import Readability
from .sentiment import Sentiment
from .story import Story
from .toxicity import Toxicity

# the paper's seven tasks, in its Table 1 order
PAPER_TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (Sentiment, Dialogue, CodeOpt, Readability, GSM8K, Acronym, CommonGen)
}
_CLASSES = {cls.name: cls for cls in (*PAPER_TASKS.values(), Story, Toxicity, Chat)}
# every built-in task, as the one list of built-ins (selfrefine.core.builtins) orders them:
# the paper's seven, then the project page's other two (story generation, toxicity removal),
# then the general chat task (the OpenAI-compatible endpoint's)
BUILTIN_TASKS: dict[str, type[Task]] = {name: _CLASSES[name] for name in TASKS}
# built-in tasks beyond the paper's Table 1
EXTRA_TASKS: dict[str, type[Task]] = {name: cls for name, cls in BUILTIN_TASKS.items() if name not in PAPER_TASKS}


def task_names() -> list[str]:
    """Built-in tasks (the paper's in its order, then the extras), then plugin tasks."""
    return [*BUILTIN_TASKS, *sorted(set(task_entry_points()) - set(BUILTIN_TASKS))]


def get_task(spec: str | Task) -> Task:
    """A Task from a built-in name, a plugin name or the path of a YAML task file (built-in
    tasks are entry points too: :func:`selfrefine.task.plugins.find_task`)."""
    if isinstance(spec, str) and spec not in task_entry_points() and not looks_like_path(spec):
        # the same error as find_task's, listing the built-ins in the paper's order
        raise TaskError(
            f"unknown task {spec!r}; built-in tasks: {', '.join(task_names())}, or give the path of a YAML task file"
        )
    return find_task(spec)


__all__ = [
    "Acronym",
    "BUILTIN_TASKS",
    "Chat",
    "CodeOpt",
    "CommonGen",
    "Dialogue",
    "EXTRA_TASKS",
    "GSM8K",
    "PAPER_TASKS",
    "Readability",
    "Sentiment",
    "Story",
    "Toxicity",
    "get_task",
    "task_names",
]
