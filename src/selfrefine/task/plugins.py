"""Tasks by name: every task, built-in or a third party's, is a plugin of one group.

The engine takes a :class:`~.task.Task` object; when it is given a name instead, it finds
the task here, in the group ``selfrefine.tasks`` (the package registers its own tasks there
in-process, :mod:`selfrefine.core.builtins`; a third party by an entry point or
:func:`~selfrefine.core.entrypoints.register`), or, for the path of a task file, through the
loader registered for the file's suffix in ``selfrefine.task_files``. So the engine never
imports the tasks package, and a built-in task is found the way a third party's is.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from ..core.builtins import TASK_FILES_GROUP, TASKS_GROUP
from ..core.entrypoints import entry_points
from ..core.errors import TaskError
from .task import Task

__all__ = ["TASKS_GROUP", "TASK_FILES_GROUP", "find_task", "looks_like_path", "task_entry_points"]


def task_entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Every registered task by name, the built-ins first (nothing is imported until one is used)."""
    return entry_points(TASKS_GROUP)


def looks_like_path(spec: str) -> bool:
    return spec.endswith((".yaml", ".yml")) or "/" in spec or "\\" in spec or Path(spec).is_file()


def find_task(spec: str | Task) -> Task:
    """A Task from a registered name or the path of a task file; a Task passes through."""
    if isinstance(spec, Task):
        return spec
    registered = task_entry_points()
    if spec in registered:
        obj = registered[spec].load()
        task = obj() if isinstance(obj, type) else obj
        if not isinstance(task, Task):
            raise TaskError(f"the task entry point {spec!r} ({registered[spec].value}) is not a Task")
        return task
    if looks_like_path(spec):
        return _load_file(spec)
    raise TaskError(f"unknown task {spec!r}; tasks: {', '.join(registered)}, or give the path of a YAML task file")


def _load_file(path: str) -> Task:
    loaders = entry_points(TASK_FILES_GROUP)
    suffix = Path(path).suffix.lstrip(".").lower()
    loader = loaders.get(suffix) or loaders["yaml"]  # the YAML loader (a built-in) names what is wrong
    return loader.load()(path)
