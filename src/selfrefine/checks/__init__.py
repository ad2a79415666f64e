"""The checks: verifiers as data.

``declared`` (a task file's ``checks:`` mapping and function verifiers), ``instructions``
(checkable instructions, one module per kind) and ``incomplete`` (refusals, cut-off drafts).
It depends on ``core`` only; the task contract, the engine and the tasks build on it.
"""
