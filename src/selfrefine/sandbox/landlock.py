"""A file system of its own for model-written code, with the kernel's Landlock LSM.

Landlock (Linux >= 5.13) lets an unprivileged process give up file access for itself and
every process it later forks or execs; no later process can lift it. The ruleset built
here (:func:`build_ruleset`) allows only:

- reading the base interpreter's standard library (``sys.base_prefix``'s
  ``stdlib``/``platstdlib``: in a virtualenv, not the virtualenv's own ``lib``; listing the
  directory itself, reading every entry but the package directories), the
  interpreter binary, its shared ``libpython`` and a virtualenv's ``pyvenv.cfg``;
- reading and executing the system library directories (``/lib``, ``/lib64``,
  ``/usr/lib``, ``/usr/lib64``), which the dynamic loader needs to start any program, and
  the system programs in ``/bin`` and ``/usr/bin`` (``os.system``, ``subprocess`` of
  ``sh``/``echo``); what they can open is limited by the same rules;
- never any ``site-packages`` or ``dist-packages`` directory (the virtualenv's, the base
  interpreter's inside its standard library, the system's ``/usr/lib/python3*/``): Landlock
  cannot take a right back below a granted directory, so a granted directory that holds one
  is granted entry by entry instead (:func:`_grant`); third-party packages can then be
  neither imported nor read;
- ``/dev/null`` (read/write) and ``/dev/zero``, ``/dev/random``, ``/dev/urandom`` (read);
- everything inside the program's own temporary directory (read, write, create, delete).

Everything else (``/etc``, ``/home``, ``/root``, ``/proc``, ``/dev/shm``, the server's
working directory, its caches and task files) cannot be opened, listed, written or
executed. From ABI 6 on the ruleset also scopes signals and abstract UNIX sockets to the
sandbox (a program cannot signal the server). The network is left to :mod:`.isolation`.

The system calls are made with ``ctypes`` (the kernel interface is small and stable); the
parent builds the ruleset, the launcher in the child applies it with
``RESTRICT_SOURCE`` just before the model's code runs.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import stat
import sys
import sysconfig

# x86_64, arm64 and every other architecture share these numbers (added together in 5.13)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_FILE, MAKE_REG = 1 << 5, 1 << 8
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
SYSTEM_LIBRARIES = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
SYSTEM_PROGRAMS = ("/bin", "/usr/bin")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed))
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.lru_cache(maxsize=1)
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> tuple[int, str | None]:
    """The kernel's Landlock ABI (0 when unavailable) and why it is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is Linux-only, this is {sys.platform}"
    version = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    if version > 0:
        return int(version), None
    err = ctypes.get_errno()
    if err == 38:  # ENOSYS: kernel older than 5.13 or a container's seccomp profile
        return 0, "the kernel has no Landlock system calls (Linux < 5.13, or blocked by a container's seccomp profile)"
    return 0, "Landlock is built into the kernel but not enabled (it is missing from the lsm= boot parameter)"


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # the 13 rights of ABI 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def shm_rights(abi: int) -> int:
    """What the program may do in its private ``/dev/shm`` (multiprocessing's semaphores)."""
    return (READ_FILE | WRITE_FILE | READ_DIR | REMOVE_FILE | MAKE_REG | TRUNCATE) & _fs_rights(abi)


def build_ruleset(workdir: str, abi: int) -> int:
    """A ruleset fd (close-on-exec) allowing what the module docstring lists; raises OSError."""
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = _libc().syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        add = _libc().syscall
        for path, rights in _allowed(workdir, handled):
            _add_rule(add, fd, path, rights)
    except OSError:
        os.close(fd)
        raise
    return fd


def _allowed(workdir: str, handled: int) -> list[tuple[str, int]]:
    rules = [(workdir, handled), ("/dev/null", READ_FILE | WRITE_FILE | TRUNCATE)]
    rules += [(path, READ_FILE) for path in ("/dev/zero", "/dev/random", "/dev/urandom")]
    rules = [rule for rule in rules if os.path.exists(rule[0])] + list(_shared_rules())
    return [(path, rights & handled) for path, rights in rules]


def base_paths() -> dict[str, str]:
    """``sysconfig`` paths of the base interpreter (a virtualenv's own ones left out)."""
    return sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})


@functools.lru_cache(maxsize=1)
def package_dirs() -> frozenset[str]:
    """Every directory of third-party packages the interpreter or the system has."""
    dirs = set()
    for paths in (sysconfig.get_paths(), base_paths()):
        dirs |= {paths["purelib"], paths["platlib"]}
    dirs |= {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
    for root in ("/usr/lib", "/usr/local/lib", "/usr/lib64", sys.base_prefix, sys.prefix):
        dirs |= set(glob.glob(os.path.join(root, "python*", "*-packages")))
        dirs |= set(glob.glob(os.path.join(root, "lib", "python*", "*-packages")))
    return frozenset(os.path.realpath(d) for d in dirs)


@functools.lru_cache(maxsize=1)
def _shared_rules() -> tuple[tuple[str, int], ...]:
    """The rules every run shares (computed once: listing directories costs)."""
    read = READ_FILE | READ_DIR
    denied = package_dirs()
    rules: list[tuple[str, int]] = []
    for key in ("stdlib", "platstdlib"):
        rules += _grant(base_paths()[key], read, denied)
        # the import system lists the directory itself (a package directory below it is
        # listable too, its files not: the launcher mounts an empty tmpfs over it)
        rules.append((base_paths()[key], READ_DIR))
    rules.append((os.path.realpath(sys.executable), READ_FILE | EXECUTE))
    # a virtualenv's interpreter reads its pyvenv.cfg at start-up (a child running sys.executable)
    rules.append((os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "pyvenv.cfg"), READ_FILE))
    libdir, libpython = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    if libdir and libpython:
        rules.append((os.path.join(libdir, libpython), READ_FILE | EXECUTE))
    for path in SYSTEM_LIBRARIES + SYSTEM_PROGRAMS:
        rules += _grant(path, read | EXECUTE, denied)
    unique: dict[str, int] = {}
    for path, rights in rules:
        if os.path.exists(path):
            unique[os.path.realpath(path)] = unique.get(os.path.realpath(path), 0) | rights
    return tuple(sorted(unique.items()))


@functools.lru_cache(maxsize=1)
def hidden_dirs() -> tuple[str, ...]:
    """The package directories inside the standard library directories (listable there)."""
    tops = {os.path.realpath(base_paths()[key]).rstrip("/") + "/" for key in ("stdlib", "platstdlib")}
    return tuple(sorted(d for d in package_dirs() if any(d.startswith(top) for top in tops) and os.path.isdir(d)))


def workdir_rights(abi: int) -> int:
    """Every right Landlock handles at ``abi``: what the program may do in its own folder."""
    return _fs_rights(abi)


def _grant(path: str, rights: int, denied: frozenset[str]) -> list[tuple[str, int]]:
    """Rules granting ``rights`` on ``path`` and below, except on the ``denied`` directories."""
    real = os.path.realpath(path)
    if real in denied or not os.path.exists(real):
        return []
    if not any(d.startswith(real.rstrip("/") + "/") for d in denied):
        return [(real, rights)]
    try:
        entries = sorted(os.scandir(real), key=lambda entry: entry.name)
    except OSError:
        return []
    # a link below a granted directory grants nothing where it points (as Landlock resolves it)
    return [rule for e in entries if not e.is_symlink() for rule in _grant(e.path, rights, denied)]


def _add_rule(add, ruleset: int, path: str, rights: int) -> None:
    target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not stat.S_ISDIR(os.fstat(target).st_mode):
            rights &= FILE_ONLY  # directory rights on a file are EINVAL
        attr = _PathBeneathAttr(rights, target)
        if add(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(attr), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(target)


# Applied by the launcher in the child (see process.py); kept as source because the child
# runs ``python -I -c`` and must not import selfrefine.
RESTRICT_SOURCE = r"""
def _landlock(fd):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, required by restrict_self
        return ctypes.get_errno()
    if libc.syscall(446, fd, 0) != 0:
        return ctypes.get_errno()
    os.close(fd)
    return 0
"""
