"""Issue 46 item 13: a sandboxed program told a timed run from an untimed one by
``sys.orig_argv`` (the measure pipe's descriptor, ``'-1'`` vs ``'4'``), which also showed the
server's pid, a per-run counter (the control group's name) and host paths. The launcher's
command line and environment are now the same in every run; the run's parameters come on
stdin, ahead of the program's input."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import pytest

from selfrefine.sandbox.confine import confinement
from selfrefine.sandbox.isolation import CLONE_NEWNS
from selfrefine.sandbox.process import program_folder, run_python
from selfrefine.sandbox.timing import time_once

SEEN = (
    "import json, os, sys\n"
    "line = input()\n"  # the program's own input still comes first on its stdin
    "print(json.dumps({'orig_argv': sys.orig_argv, 'argv': sys.argv, 'environ': dict(os.environ),\n"
    "                  'cwd': os.getcwd(), 'file': __file__, 'input': line, 'path': sys.path}))\n"
)


def _seen(measure: bool) -> dict:
    result = time_once(SEEN, "hello\n") if measure else run_python(SEEN, stdin="hello\n")
    assert result.ok, result.stderr
    return json.loads(result.stdout)


def test_timed_and_untimed_runs_look_the_same_down_to_orig_argv():
    untimed, timed = _seen(False), _seen(True)
    assert untimed["input"] == "hello"
    assert untimed == timed
    launcher = untimed["orig_argv"]
    assert launcher[1:3] == ["-I", "-c"] and len(launcher) == 4, launcher[:2] + launcher[4:]


def test_the_program_sees_no_host_path_pid_or_run_counter():
    seen = _seen(True)
    shown = json.dumps({k: seen[k] for k in ("orig_argv", "argv", "environ", "cwd", "file")})
    host_tmp = os.path.realpath(tempfile.gettempdir()).rstrip("/") + "/selfrefine-"
    assert host_tmp not in shown and tempfile.gettempdir().rstrip("/") + "/selfrefine-" not in shown
    assert f"selfrefine-{os.getpid()}-" not in shown  # the run's control group
    assert str(os.getpid()) not in json.dumps(seen["orig_argv"]) + json.dumps(seen["environ"])
    tops = (sys.base_prefix.rstrip("/") + "/", sys.base_exec_prefix.rstrip("/") + "/")
    assert all(p.startswith(tops) for p in seen["path"]), seen["path"]  # no .pth-added source folder
    if not confinement().pid_flags & CLONE_NEWNS:
        pytest.skip("no mount namespace here: the program works in the caller's own temporary folder")
    folder = program_folder()  # /tmp/selfrefine; /var/tmp/selfrefine where the interpreter lives below /tmp
    assert folder is not None and folder.endswith("/selfrefine")
    assert seen["cwd"] == folder and seen["file"] == f"{folder}/main.py" and seen["argv"] == [seen["file"]]
    assert seen["environ"]["HOME"] == seen["environ"]["TMPDIR"] == folder
    assert _seen(False) == seen  # and one run does not differ from the next


def test_the_program_still_works_in_its_folder_and_reads_all_its_input():
    code = (
        "import os, sys\nopen('note.txt', 'w').write('kept')\nimport tempfile\n"
        "with tempfile.NamedTemporaryFile('w', delete=False) as fh:\n    fh.write('x')\n"
        "data = sys.stdin.read()\nprint(len(data), data[:4], open('note.txt').read(), os.path.dirname(fh.name) == os.getcwd())\n"
    )
    big = "abcd" + "x" * 300_000
    result = run_python(code, stdin=big)
    assert result.ok, result.stderr
    assert result.stdout.split() == [str(len(big)), "abcd", "kept", "True"]
    empty = run_python("import sys\nprint(repr(sys.stdin.read()))")
    assert empty.ok and empty.stdout.strip() == "''", empty.stderr
