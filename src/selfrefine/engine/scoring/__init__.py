"""Scoring: how a run's drafts are scored, ranked and chosen.

``scoreboard`` (every draft's scores, stored once), ``votes``, ``ranking`` and ``selection``
(votes, how drafts rank, which is returned) and ``questions`` (closed questions read as
probabilities). The task's judge in the loop (``judge``) needs a run's context, so it stays in
the engine beside it.
"""
