"""The launcher: the source that runs first in the sandbox's child (``python -I -c``), kept
as source because the child must not import selfrefine.

Every run starts it with the same command line and environment, timed or not: the run's
parameters (file names, descriptors, the control group's CPU counter) come on stdin, ahead of
the program's own input, in a header that it reads with ``os.read`` before the program runs,
so ``sys.orig_argv``, ``sys.argv`` and ``os.environ`` show nothing of the run, the server's
pid or its folders. With a mount namespace the program's folder is :data:`FOLDER`, whatever
the folder on the caller's disk is called.

In order, before any model-written code runs, it

0. reads its parameters from stdin (:func:`header`);
1. blocks the socket constructors (a clear message for the program itself) and takes the
   package directories off ``sys.path`` (their files are not readable in any case);
2. reads and compiles ``main.py``;
3. with a PID namespace, forks: it stays outside as the waiting parent, the program runs as
   the namespace's init (:mod:`.confine`);
4. with a mount namespace, mounts empty read-only tmpfs over the package directories below
   the standard library (:mod:`.landlock`), a size-limited tmpfs over ``/tmp`` (the disk cap)
   with the program's folder :data:`FOLDER` in it (``main.py`` is written into it again; over
   the caller's own folder where the interpreter itself lives below ``/tmp``), and a private
   ``/dev/shm``;
5. writes the CPU time used so far (the run's control group's counter, or its own
   ``os.times()`` where there is no group) to the measure pipe, and closes it, in every run:
   with ``measure`` the caller subtracts it from what it reads itself once every process of
   the run is gone, and the program never holds a descriptor through which it could report a
   time;
6. applies the Landlock ruleset, with rules for the new mounts added first;
7. runs ``main.py`` in a fresh module that it makes ``sys.modules["__main__"]``, under its
   real file name, so tracebacks show its lines; ``import __main__`` finds the program's
   own names, not the launcher's. A program that ends normally then exits without the
   interpreter's teardown, timed or not: a program must not be able to tell a timed run
   from another (a timed run's output is compared too, :mod:`.timing`).
"""

from __future__ import annotations

from .confine import PID_MAX
from .landlock import RESTRICT_SOURCE

CONFINE_FAILED = "__SELFREFINE_CONFINE_FAILED__"  # the launcher could not confine the program
FOLDER = "/tmp/selfrefine"  # the program's folder, with a mount namespace (a tmpfs over /tmp)
# where the interpreter itself lives below /tmp (a virtual environment in a checkout there),
# a tmpfs over /tmp would hide it: the next of these whose parent holds no part of it
FOLDERS = (FOLDER, "/var/tmp/selfrefine")
INODES = 16_384  # files and directories the program may create in its working directory
SHM_MB = 16

SOURCE = (
    r"""
import sys, os
_CONFINE_FAILED = "__SELFREFINE_CONFINE_FAILED__"
"""
    + RESTRICT_SOURCE
    + f"_PID_MAX, _INODES, _SHM_MB = {PID_MAX}, {INODES}, {SHM_MB}\n"
    + r"""
def _fail(what, err):
    os.write(2, ("%s %s errno %d\n" % (_CONFINE_FAILED, what, err)).encode())
    os._exit(97)
def _confine_processes():
    # The launcher stays outside; the program becomes init of the new PID namespace, so
    # when it ends (or the launcher dies: PDEATHSIG) the kernel kills all it started.
    import ctypes, select, signal
    alive, held = os.pipe()  # EOF on `alive` once the launcher is gone
    child = os.fork()
    if child:
        os.close(alive)
        _, status = os.waitpid(child, 0)
        if os.WIFSIGNALED(status):
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
            os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
    os.close(held)
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if select.select([alive], [], [], 0)[0]:  # the launcher died before PDEATHSIG was set
        os._exit(1)
    os.close(alive)
    try:
        with open("/proc/sys/kernel/pid_max", "w") as fh:
            fh.write(str(_PID_MAX))
    except OSError:
        pass  # kernels before 6.14 have one global pid_max
def _header():
    # "<length>\n" and that many bytes of NUL-separated fields, read with os.read so that
    # sys.stdin, not yet read from, starts at the program's own input
    size = b""
    while not size.endswith(b"\n") and len(size) < 16:
        byte = os.read(0, 1)
        if not byte:
            break
        size += byte
    if not size.strip().isdigit():
        _fail("reading the run's parameters from stdin", 0)
    data = b""
    while len(data) < int(size):
        chunk = os.read(0, int(size) - len(data))
        if not chunk:
            _fail("reading the run's parameters from stdin", 0)
        data += chunk
    return data.decode("utf-8").split("\0")
def _mount(libc, target, flags, options):
    return libc.mount(b"tmpfs", target.encode(), b"tmpfs", flags, options.encode()) == 0
def _allow(libc, fd, path, rights):
    import ctypes, struct
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, target))
    ok = libc.syscall(445, fd, 1, rule, 0) == 0
    os.close(target)
    return ok
def _private_mounts(fd, shm, work, disk_mb, path, source, hide, own):
    # Only ever called inside a new mount namespace (MS_NOSUID | MS_NODEV = 6). `own`: the
    # folder is the caller's, mounted over; else FOLDER, made in a tmpfs over its parent.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"none", b"/", None, 16384 | 262144, None) != 0:  # MS_REC | MS_PRIVATE
        _fail("mount --make-rprivate /", ctypes.get_errno())
    for empty in hide:  # MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC (before a tmpfs may cover them)
        if empty and not _mount(libc, empty, 15, "size=4k,nr_inodes=2,mode=555"):
            _fail("hiding " + empty, ctypes.get_errno())
    folder = os.path.dirname(path)
    top = folder if own else os.path.dirname(folder)
    if not _mount(libc, top, 6, "size=%dm,nr_inodes=%d,mode=700" % (disk_mb, _INODES)):
        _fail("tmpfs on the working directory", ctypes.get_errno())
    if not own:
        os.mkdir(folder, 0o700)
    os.chdir(folder)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(source)
    # (a working directory inside /dev/shm would be hidden by a new tmpfs there)
    inside = (top + "/").startswith("/dev/shm/")
    shm_ok = not inside and _mount(libc, "/dev/shm", 6, "size=%dm,nr_inodes=1024,mode=1777" % _SHM_MB)
    if fd >= 0 and not (_allow(libc, fd, folder, work) and (not shm_ok or _allow(libc, fd, "/dev/shm", shm))):
        _fail("landlock_add_rule", ctypes.get_errno())
def _spent(cpu_file):
    # CPU seconds so far: of the run's control group, else of this process
    if cpu_file:
        with open(cpu_file) as fh:
            text = fh.read()
        if cpu_file.endswith("cpu.stat"):
            return "cgroup %d" % int(text.split("usage_usec", 1)[1].split()[0])
        return "cgroup %d" % (int(text.split()[0]) // 1000)
    t = os.times()
    return "rusage %d" % int((t.user + t.system) * 1e6)
def _forget_packages():
    # site.py put the package directories on sys.path and listed them into the importers'
    # caches before Landlock applied: forget both, and any module imported from there; and
    # what .pth files added outside the interpreter (an editable install's source folder)
    tops = tuple(p.rstrip(os.sep) + os.sep for p in (sys.base_prefix, sys.base_exec_prefix))
    found = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")
             or not (p + os.sep).startswith(tops)]
    sys.path[:] = [p for p in sys.path if p not in found]
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if any(where.startswith(p + os.sep) for p in found):
            del sys.modules[name]
    sys.path_importer_cache.clear()
def _blocked(*args, **kwargs):
    raise PermissionError("network access is disabled in the selfrefine sandbox")
import socket as _s, _socket
for _mod in (_s, _socket):
    for _name in ("socket", "socketpair", "create_connection", "create_server", "fromfd"):
        if hasattr(_mod, _name):
            setattr(_mod, _name, _blocked)
del _mod, _name, _s, _socket
_args = _header()
_path, _shown, _fd, _rules, _pidns = _args[0], _args[1], int(_args[2]), int(_args[3]), _args[4] == "1"
_shm, _work, _disk, _cpu = int(_args[5]), int(_args[6]), int(_args[7]), _args[8]
_hide = _args[9].split(os.pathsep)
sys.argv = [_shown]
_forget_packages()
with open(_path, encoding="utf-8") as _fh:
    _source = _fh.read()
_code = compile(_source, _shown, "exec")
if _pidns:
    _confine_processes()
if _disk:
    _private_mounts(_rules, _shm, _work, _disk, _shown, _source, _hide, _shown == _path)
os.write(_fd, _spent(_cpu).encode())  # in every run; only a timed one reads it
os.close(_fd)
if _rules >= 0:
    _err = _landlock(_rules)
    if _err:
        _fail("landlock_restrict_self", _err)
# Nothing that tells a timed run from another stays behind: the program runs in a module
# of its own as __main__ (not this one, whose names it could read), and every run ends the
# same way below.
_main = type(sys)("__main__")
_main.__file__, _main.__builtins__, _main.__cached__ = _shown, __builtins__, None
sys.modules["__main__"] = _main
del _args, _fd, _rules, _pidns, _shm, _work, _disk, _cpu, _hide, _source, _fh, _path, _shown
exec(_code, _main.__dict__)
# Skip the interpreter's teardown, a few ms of CPU that would be added to every measured
# program; what a program can see of a normal exit still happens.
if "threading" in sys.modules:
    sys.modules["threading"]._shutdown()
import atexit
atexit._run_exitfuncs()
for _stream in (sys.stdout, sys.stderr):
    try:
        _stream.flush()
    except Exception:
        pass
os._exit(0)
"""
)
