"""Running model-written programs: ``process`` (a child process with limits, cut off from
the network by ``isolation``: a user namespace and a seccomp filter) and ``timing``
(comparing two programs' run times)."""
