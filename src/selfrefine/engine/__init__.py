"""The engine: the Self-Refine loop and what it is made of.

The loop: ``loop`` (:class:`SelfRefine`: the draft → feedback → refine loop as a stream of
typed steps), ``spec`` (an engine described as data), ``settings`` (a run's options resolved
once), ``refinement`` (one run's loop), ``focused`` (a focused refinement: one failed check's
repair at a time), ``state`` (its record), ``context`` (the model steps
every part uses), ``drafting`` (the strategies, one module each, found by name: one draft,
best of K, votes, the auto strategy), ``stopping`` (the stop rules), ``calls`` (model calls,
retries, budgets), ``deltas`` (token streaming), ``judge`` (the task's judge in the loop),
``run_checks`` (the run's checks besides the task's), ``derivation`` (checks derived from the
request), ``output_checks`` (the checks the returned output still fails) and ``verify_threads``
(a task's checks in threads, under the run's time budget). ``scoring`` (every draft's scores,
votes, ranking, selection, closed questions) is its sub-package. The task contract is in
``task`` and the checks in ``checks``; the records, run options, errors and the list of
built-in plugins it shares with every layer are in ``core``; it depends only on ``core``,
``backends``, ``checks`` and ``task``; tasks, evaluation, service and cli build on it.
"""
