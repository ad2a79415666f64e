"""Run model-written Python in a separate, limited process.

The code runs in a fresh interpreter (``python -I``: no user site, no env-based paths) in
a temporary working directory, with CPU-time, address-space and file-size limits, a
wall-clock timeout and capped output. It never runs in the caller's process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

MARKER = "__SELFREFINE_RESULT__"


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    value: str | None = None  # repr() of the returned value, when a function was called
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # short description of what went wrong
    timed_out: bool = False


def _limits(cpu_seconds: int, memory_mb: int, file_mb: int):  # pragma: no cover - runs in the child
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
        mem = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        size = file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        os.setsid()  # so a timeout can kill the whole process group

    return apply


def run_python(
    code: str,
    *,
    call: str | None = None,
    timeout: float = 5.0,
    memory_mb: int = 512,
    max_output: int = 65_536,
    stdin: str = "",
) -> SandboxResult:
    """Execute ``code``; with ``call`` (e.g. ``"solution"``) also call it and return its repr."""
    script = code
    if call:
        script += f"\n\nif __name__ == '__main__':\n    print({MARKER!r} + repr({call}()))\n"
    with tempfile.TemporaryDirectory(prefix="selfrefine-") as tmp:
        path = os.path.join(tmp, "main.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(script)
        env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "HOME": tmp, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            proc = subprocess.run(
                [sys.executable, "-I", path],
                input=stdin,
                capture_output=True,
                text=True,
                cwd=tmp,
                env=env,
                timeout=timeout,
                preexec_fn=_limits(max(1, int(timeout) + 1), memory_mb, 16),
            )
        except subprocess.TimeoutExpired as exc:
            return SandboxResult(
                ok=False,
                stdout=_cap(exc.stdout, max_output),
                stderr=_cap(exc.stderr, max_output),
                error=f"timed out after {timeout:g}s",
                timed_out=True,
            )
    stdout, stderr = _cap(proc.stdout, max_output), _cap(proc.stderr, max_output)
    if proc.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {proc.returncode}"
        if proc.returncode < 0:
            last = f"killed by signal {-proc.returncode} (CPU or memory limit?)"
        return SandboxResult(ok=False, stdout=stdout, stderr=stderr, error=last)
    value = None
    if call:
        lines = [ln for ln in stdout.splitlines() if ln.startswith(MARKER)]
        if not lines:
            return SandboxResult(ok=False, stdout=stdout, stderr=stderr, error="no result printed")
        value = lines[-1][len(MARKER):]
        stdout = "\n".join(ln for ln in stdout.splitlines() if not ln.startswith(MARKER))
    return SandboxResult(ok=True, value=value, stdout=stdout, stderr=stderr)


def _cap(text: str | bytes | None, limit: int) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "\n[output truncated]"
