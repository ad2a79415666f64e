"""Whether llama.cpp can parse a grammar, asked without its error dump.

llama.cpp's grammar parser writes a grammar it refuses to file descriptor 2 whole, from C
(``fprintf(stderr, ...)``): the grammar llama-cpp-python's converter writes for a 178-byte
schema can be 620 KB, printed for every distinct schema a client sends. The parse is asked
with descriptor 2 pointed at a temporary file; what llama.cpp wrote there becomes the one
line of the refusal (its error message, cut short), and whatever else arrived meanwhile
(another thread's output) is written on to the real stderr."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

MAX_REASON_CHARS = 160  # llama.cpp's message in the refusal (it quotes the grammar from the error on)
MAX_CAPTURED_BYTES = 16_000_000  # read back from the temporary file, at most
_STDERR_LOCK = threading.Lock()  # one redirection of descriptor 2 at a time
# the lines llama.cpp writes when it refuses a grammar (llama-grammar.cpp), besides the grammar
_OWN_LINES = ("parse: error parsing grammar", "failed to parse grammar", "llama_grammar_init_impl:")


class GrammarRefused(ValueError):
    """llama.cpp cannot parse a grammar; the message is one line."""


def check_grammar(llm: Any, grammar: Any) -> None:
    """A :class:`GrammarRefused` where llama.cpp cannot parse ``grammar`` (its sampler would
    be NULL), naming llama.cpp's reason in one line; nothing is printed."""
    import llama_cpp

    text = grammar._grammar
    with captured_stderr() as captured:
        sampler = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, text.encode("utf-8"), grammar._root.encode("utf-8")
        )
    reason = _reason(captured, text)
    if not sampler:
        raise GrammarRefused(f"llama.cpp cannot parse the grammar its converter wrote{reason}")
    llama_cpp.llama_sampler_free(sampler)


@contextlib.contextmanager
def captured_stderr() -> Iterator[list[str]]:
    """Descriptor 2 (C code's stderr, and Python's) into a temporary file meanwhile; the
    list holds what was written once the block ends."""
    captured: list[str] = []
    with _STDERR_LOCK, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.append(sink.read(MAX_CAPTURED_BYTES).decode("utf-8", "replace"))


def _reason(captured: list[str], grammar: str) -> str:
    """llama.cpp's error (": unknown escape at ..."), cut short; what others wrote meanwhile
    is written on to stderr."""
    text = "".join(captured).replace(grammar.strip(), "")
    rules = {line.strip() for line in grammar.splitlines()}  # the error quotes the grammar from where it fails
    reason, others = "", []
    for line in text.splitlines(keepends=True):
        if line.startswith(_OWN_LINES):
            _, _, said = line.partition("error parsing grammar: ")
            reason = reason or " ".join(said.split())
        elif line.strip() and line.strip() not in rules:
            others.append(line)
    if others:
        sys.stderr.write("".join(others))
        sys.stderr.flush()
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1] + "…"
    return f": {reason}" if reason else ""
