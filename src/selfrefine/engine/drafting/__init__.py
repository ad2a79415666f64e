"""The ways to produce a run's drafts, one module each, found by name (:mod:`.registry`).

- :mod:`.base`: the interfaces, :class:`~.base.Strategy` (registered; makes one drafter
  per run) and :class:`~.base.Drafter` (first draft, refinements, acceptance, and the
  loop's points of choice it owns);
- :mod:`.fixed`: ``strategy="fixed"`` — :class:`~.one.OneDraft` (the paper's loop),
  :class:`~.best_of.BestOfK` (K samples a step), :class:`~.voting.Votes` (an answer task's
  samples scored by agreement);
- :mod:`.auto`: ``strategy="auto"`` — :class:`~.auto.Budgeted`, width and depth chosen from
  a token budget (the rule: :mod:`.auto_rule`; its prices: :mod:`.budget`).

Nothing is imported here: the modules import the engine's parts, and the engine imports
the registry only.
"""
