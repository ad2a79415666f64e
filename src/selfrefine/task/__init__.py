"""The task contract: what a task author imports.

``task`` (the Task), ``declaration`` (what a task declares, compiled once), ``templates`` and
``template_bounds`` (strict, bounded prompt rendering), ``preamble`` (a draft's announcing
first line) and ``plugins`` (tasks by name). It depends on ``core`` and ``checks`` only; the
engine, the tasks and every layer above build on it.
"""
