"""Every built-in plugin of the package, listed once: its tasks, strategies and task-file
loaders, by name and import path.

:func:`register_builtins` registers them through :func:`~.entrypoints.register`, the path a
third party may take in-process (a third party's package may instead list entry points in
the same groups). Nothing here is imported until a run asks for it by name, so this low
layer names higher ones as strings only. A new built-in is one line here (no reinstall).
"""

from __future__ import annotations

from collections.abc import Callable

TASKS_GROUP = "selfrefine.tasks"
STRATEGIES_GROUP = "selfrefine.strategies"
TASK_FILES_GROUP = "selfrefine.task_files"

# the paper's seven tasks in its Table 1 order, then the project page's other two (story
# generation, toxicity removal), then the general chat task (the OpenAI-compatible endpoint's)
TASKS: dict[str, str] = {
    "sentiment": "selfrefine.tasks.sentiment:Sentiment",
    "dialogue": "selfrefine.tasks.dialogue:Dialogue",
    "codeopt": "selfrefine.tasks.codeopt:CodeOpt",
    "readability": "selfrefine.tasks.readability:Readability",
    "gsm8k": "selfrefine.tasks.gsm8k:GSM8K",
    "acronym": "selfrefine.tasks.acronym:Acronym",
    "commongen": "selfrefine.tasks.commongen:CommonGen",
    "story": "selfrefine.tasks.story:Story",
    "toxicity": "selfrefine.tasks.toxicity:Toxicity",
    "chat": "selfrefine.tasks.chat:Chat",
}
STRATEGIES: dict[str, str] = {
    "fixed": "selfrefine.engine.drafting.fixed:Fixed",
    "auto": "selfrefine.engine.drafting.auto:Auto",
    "sequential": "selfrefine.engine.drafting.sequential:Sequential",
}
TASK_FILES: dict[str, str] = {  # by the file's suffix
    "yaml": "selfrefine.tasks.taskfile:load_task",
    "yml": "selfrefine.tasks.taskfile:load_task",
}
BUILTINS: dict[str, dict[str, str]] = {TASKS_GROUP: TASKS, STRATEGIES_GROUP: STRATEGIES, TASK_FILES_GROUP: TASK_FILES}


def register_builtins(register: Callable[[str, str, str], None]) -> None:
    """Register every built-in through ``register(group, name, "module:attr")``."""
    for group, plugins in BUILTINS.items():
        for name, target in plugins.items():
            register(group, name, target)
