"""The engine: the Self-Refine loop and what it is made of.

``loop`` (:class:`SelfRefine`: the draft → feedback → refine loop as a stream of typed
steps), ``spec`` (an engine described as data), ``settings`` (a run's options resolved
once), ``refinement`` (one run's loop), ``state`` (its record), ``context`` (the model
steps every part uses), ``drafting`` (the strategies, one module each, found by name: one
draft, best of K, votes, the auto strategy), ``stopping`` (the stop rules), ``calls`` (model
calls, retries, budgets), ``scoreboard`` (every draft's scores, stored once), ``votes``,
``ranking`` and ``selection`` (votes, how drafts rank, which is returned), ``judged`` and
``judging`` (the task's judge in the loop; closed questions read as probabilities), ``task`` (the Task contract), ``plugins``
(tasks by name), ``templates`` and ``template_bounds`` (strict, bounded prompt rendering),
``checks`` (verifiers as data), ``deltas`` (token streaming) and ``incomplete`` (refusals,
cut-off drafts). The records, run options and errors it shares with every layer are in
``core``; it depends only on ``core`` and ``backends``; tasks, evaluation, service and cli
build on it.
"""
