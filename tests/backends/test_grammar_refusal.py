"""Issue 46 item 16: a grammar llama.cpp refuses is one log line, not its dump. llama.cpp's
parser writes a refused grammar whole to file descriptor 2 from C (30 KB here, 620 KB in the
audit, for each distinct schema); the parse is now asked with descriptor 2 captured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, require_smollm

from selfrefine.backends.grammars import _reason, captured_stderr


def test_what_c_code_writes_meanwhile_is_captured_not_printed(capfd):
    with captured_stderr() as captured:
        os.write(2, b"parse: error parsing grammar: unknown escape at x\n" + b"rule ::= x\n" * 50_000)
    assert capfd.readouterr().err == ""
    assert _reason(captured, "rule ::= x\n" * 50_000) == ": unknown escape at x"


def test_what_another_thread_writes_meanwhile_still_reaches_stderr(capfd):
    with captured_stderr() as captured:
        os.write(2, b"failed to parse grammar\n")
        os.write(2, b"a server log line\n")
    assert _reason(captured, "root ::= x") == "" and capfd.readouterr().err == "a server log line\n"


@pytest.mark.integration
def test_a_refused_grammar_is_one_log_line():
    require_smollm()
    # a vocabulary is all llama.cpp needs to parse a grammar: SmolLM2's, without its weights
    script = textwrap.dedent(
        """
        import logging, sys
        logging.basicConfig(stream=sys.stderr, format="LOG %(message)s")
        from llama_cpp import Llama
        from selfrefine.backends.embedded import LlamaCppBackend, default_model_path, keep_other_threads_output
        keep_other_threads_output()
        path = default_model_path("embedded:smollm2-135m")
        llm = Llama(str(path), vocab_only=True, verbose=False)
        backend = LlamaCppBackend(path)
        schema = {"type": "string", "pattern": "^[a-z]{1,3000}\\\\.[a-z]{2,3}$"}
        assert backend._grammar(schema, llm) is None and backend._grammar(schema, llm) is None
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # c3793c2: the grammar llama.cpp refused, 30 KB of it, on stderr
    assert len(proc.stderr) < 1000 and proc.stderr.count("\n") == 1, json.dumps(proc.stderr[:2000])
    assert proc.stderr.startswith("LOG llama.cpp cannot decode under this JSON schema (llama.cpp cannot parse")
