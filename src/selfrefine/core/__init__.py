"""The ground floor: typed records, run options and the error hierarchy.

Every layer imports these (the engine, the backends, the sandbox, the tasks and the
service), and they import nothing of the package, so no arrow runs back up.
"""
