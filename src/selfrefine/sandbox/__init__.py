"""Running model-written programs: ``process`` (a child process with limits, cut off from
the network by ``isolation``: a user namespace and a seccomp filter; kept to its own files
and process tree by ``confine``: Landlock (``landlock``) and a PID namespace; started by the
``launcher``, which gives it a size-limited tmpfs as working directory; held to one memory
cap and counted for CPU time by a control group of its own, ``cgroup``; its folder removed
by ``cleanup``) and ``timing`` (comparing two programs' run times)."""
