"""Running model-written programs: ``process`` (a child process with limits, cut off from
the network by ``isolation``: a user namespace and a seccomp filter; kept to its own files
and process tree by ``confine``: Landlock (``landlock``) and a PID namespace) and ``timing``
(comparing two programs' run times)."""
