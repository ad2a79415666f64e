"""Tasks by name: every task, built-in or a third party's, is an entry point.

The engine takes a :class:`~.task.Task` object; when it is given a name instead, it finds
the task here, in the entry-point group ``selfrefine.tasks`` (the package registers its own
tasks there, as a plugin package does), or, for the path of a task file, through the loader
registered for the file's suffix in ``selfrefine.task_files``. So the engine never imports
the tasks package, and a built-in task is found the way a third party's is.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from ..core.entrypoints import entry_points
from ..core.errors import TaskError
from .task import Task

TASKS_GROUP = "selfrefine.tasks"
TASK_FILES_GROUP = "selfrefine.task_files"


def task_entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Every registered task by name (nothing is imported until one is used)."""
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
    if not registered:
        raise TaskError(
            f"unknown task {spec!r}: no task is registered; install selfrefine "
            "(pip install -e .) so that its entry points exist"
        )
    raise TaskError(f"unknown task {spec!r}; tasks: {', '.join(registered)}, or give the path of a YAML task file")


def _load_file(path: str) -> Task:
    loaders = entry_points(TASK_FILES_GROUP)
    suffix = Path(path).suffix.lstrip(".").lower()
    loader = loaders.get(suffix) or loaders.get("yaml")  # the YAML loader names what is wrong
    if loader is None:
        raise TaskError(
            f"cannot load task file {path}: no task-file loader is registered; install selfrefine (pip install -e .)"
        )
    return loader.load()(path)
