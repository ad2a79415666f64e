"""Evaluation: an engine over a dataset, measured.

``datasets`` (loaders of the paper's files), ``catalog`` (the sets known by name, shipped
in ``data/`` or read from the user's own copy, and ``hf:ID``), ``runner`` (examples → rows with the metric
of every draft, and their summary), ``driver`` (the ``eval`` command's run: progress,
response cache, run folder), ``runstore`` (durable, resumable run folders), ``cache``
(the response cache), ``judge`` (pairwise preference), ``stats`` (bootstrap intervals)
and ``report`` (Markdown/HTML reports and comparisons).
"""
