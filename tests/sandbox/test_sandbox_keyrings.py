"""Issue 46 item 14: kernel keyrings are memory no cap counts. A 24 MB run held 1,561 keys of
16 KB, and root's machine-wide key quota was full while it ran. The seccomp filter now
refuses the keyring calls in every run; where there is no filter, model code is refused."""

from __future__ import annotations

import errno
import platform

import pytest

from selfrefine.core.errors import SandboxUnavailableError
from selfrefine.sandbox import confine, process
from selfrefine.sandbox.confine import confinement
from selfrefine.sandbox.isolation import Isolation, network_isolation
from selfrefine.sandbox.process import run_python

NUMBERS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl

# what each call gives: the new key's serial, or the negative errno of a refusal
KEYS = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def made(r):
    return r if r >= 0 else -ctypes.get_errno()
add_key, request_key, keyctl = {numbers}
payload = b"k" * 16000
added = [made(libc.syscall(add_key, b"user", b"selfrefine-probe-%d" % i, payload, len(payload), -2)) for i in range(20)]
requested = made(libc.syscall(request_key, b"user", b"selfrefine-probe-0", None, 0))
joined = made(libc.syscall(keyctl, 1, None))  # KEYCTL_JOIN_SESSION_KEYRING: a new anonymous keyring
print(json.dumps({{"added": added, "requested": requested, "joined": joined}}))
"""


def _numbers() -> tuple[int, int, int]:
    numbers = NUMBERS.get(platform.machine())
    if numbers is None:
        pytest.skip(f"the keyring system call numbers of {platform.machine()} are not listed here")
    return numbers


def test_a_program_cannot_make_keys():
    if not network_isolation().seccomp:
        pytest.skip(f"no seccomp filter here: {network_isolation().problems}")
    import json

    result = run_python(KEYS.format(numbers=_numbers()))
    assert result.ok, result.stderr
    seen = json.loads(result.stdout)
    assert seen == {"added": [-errno.EPERM] * 20, "requested": -errno.EPERM, "joined": -errno.EPERM}, seen


def test_no_filter_refuses_with_the_fix(monkeypatch):
    """Without a filter nothing keeps keys from the machine's quota: model code is not run,
    unless the operator opts out of the barriers beyond the network."""
    if network_isolation().namespace != "user-namespace":
        pytest.skip("no user network namespace here to stand in for the filter")
    if not confinement().ipc_flags:
        pytest.skip("no IPC namespace here: the IPC refusal comes first")
    bare = Isolation(namespace="user-namespace")
    monkeypatch.delenv(confine.FILES_ENV, raising=False)
    monkeypatch.setattr(process, "network_isolation", lambda: bare)
    with pytest.raises(SandboxUnavailableError, match="keyrings.*SELFREFINE_SANDBOX_FILES=allow"):
        run_python("print('ran')", isolation=bare)
    monkeypatch.setenv(confine.FILES_ENV, "allow")
    assert run_python("print('ran')", isolation=bare).stdout.strip() == "ran"
