"""Smoke test of the embedded model: one short completion in a child process.

A llama.cpp build with the wrong CPU flags segfaults in the first decode, so the check
runs in a subprocess and reports failure instead of crashing the caller.
"""

import subprocess
import sys

CHILD = r"""
import time
from llama_cpp import Llama
from selfrefine.backends.catalogue import resolve
path = resolve("embedded:smollm2-135m")  # the small model: this only checks the llama.cpp build
llm = Llama(model_path=str(path), n_ctx=512, n_threads=2, verbose=False)
t = time.perf_counter()
out = llm.create_completion("The capital of France is", max_tokens=8, temperature=0)
n = out["usage"]["completion_tokens"]
print(f"llama-cpp-python OK: {n} tokens in {time.perf_counter() - t:.2f}s")
"""

proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
if proc.returncode != 0:
    sys.stderr.write(proc.stderr[-2000:] or f"exit code {proc.returncode}\n")
    sys.exit(1)
print(proc.stdout.strip())
