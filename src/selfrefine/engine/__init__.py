"""The engine: the Self-Refine loop and what it is made of.

``loop`` (the draft → feedback → refine loop as a stream of typed steps), ``records``
(the typed steps and results), ``config`` (loop options), ``task`` (the Task contract),
``templates`` (strict, prefix-stable prompt rendering), ``parsing`` (reading model
output) and ``errors`` (the one error hierarchy every layer raises). It depends only on
``backends``; tasks, evaluation, sandbox and cli build on it.
"""
