"""llama.cpp in-process through ``llama-cpp-python``: the embedded models and any GGUF file.

``embedded[:NAME]`` files come from the model catalogue (:mod:`.catalogue`), which finds
them through package metadata, assembles and verifies them; ``gguf:PATH`` is any file.

Prefix reuse, the thing that makes Self-Refine affordable on a CPU:

- one ``Llama`` per model file and load settings in the process, shared by every role and
  every backend that loads the same file the same way (:mod:`.shared_llama`). Each
  ``Llama`` is a whole copy of the model in memory: the file's mapping, the weights
  llama.cpp repacks for its CPU kernels, a KV cache and compute buffers. One per role held
  three or four copies (5.7 GB RSS for the 1.1 GB default model in one ``run``, issue 46);
- a :class:`~.prefix_cache.PrefixCache` of KV snapshots (within ``prefix_cache_mb``).
  A ``Llama`` keeps a single KV sequence and reuses only the longest token prefix shared
  with its previous call. When the roles take turns, or eval interleaves examples, another
  call replaces a prompt's history in the context; before the next call that extends it,
  the snapshot of the previous prompt is restored (a copy of its KV cells, milliseconds),
  so only the newly appended draft and feedback are computed.

A ``Llama`` is not thread-safe: every call on one holds its lock (calls are CPU-bound on
the same cores, so they would only split the threads anyway).
Greedy (temperature 0) outputs are identical with and without reuse on SmolLM2 (tested);
on Qwen the logits are, but grammar-constrained replies can differ (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..core.cancel import cancelled
from ..core.errors import BackendError, ConfigError, ModelNotFoundError
from . import catalogue
from .base import (
    Backend,
    CompletionRequest,
    CompletionResponse,
    ModelInfo,
    TextSink,
    chat_messages,
    flat_prompt,
)
from .grammars import GrammarRefused, check_grammar
from .prefix_cache import PrefixCache, as_tokens, common_prefix
from .shared_llama import Loaded, release, shared_llama
from .token_bans import BanMasks
from .token_probabilities import TopRecorder

log = logging.getLogger("selfrefine.embedded")
MAX_GRAMMARS = 64  # JSON schemas whose grammar is kept (each request's schema, on a server)

INSTALL_HINT = (
    "install it with `bash scripts/setup.sh` (see README), or: "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
    "pip install llama-cpp-python"
)


def default_model_path(name: str = catalogue.DEFAULT) -> Path:
    """The verified file of catalogue entry ``name`` (default: the default embedded model),
    assembled from its installed parts on first use; no fallback."""
    return catalogue.resolve(name)


def check_gguf(path: str | os.PathLike[str]) -> Path:
    """Fail early, with a clear message, on a missing or non-GGUF model file."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelNotFoundError(f"model file not found: {p}")
    if not p.is_file():
        raise ModelNotFoundError(f"model path is not a file: {p}")
    try:
        with p.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ModelNotFoundError(f"cannot read model file {p}: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise ModelNotFoundError(f"{p} is not a GGUF model file (bad magic {magic!r})")
    return p


# Restoring a snapshot costs a memcpy; below this many extra tokens recomputing is as cheap.
MIN_RESTORE_GAIN_TOKENS = 32
MIN_SUFFIX_TOKENS = 2
UBATCH = 64  # the micro-batch, and so the unit of prefix reuse (n_batch must be a multiple)


def aligned_prefix(tokens: int, batch: int) -> int:
    """The longest reusable prefix of at most ``tokens`` that ends on a batch boundary."""
    return max(tokens, 0) // batch * batch if batch > 0 else max(tokens, 0)


def default_threads() -> int:
    # llama-cpp-python defaults to cpu_count()//2, which wastes half of a small machine
    return max(1, os.cpu_count() or 1)


class LlamaCppBackend(Backend):
    """Runs a GGUF model in-process; ``embedded`` and ``gguf:PATH`` resolve here."""

    # Calls are CPU-bound on the same cores; running two at once only splits the threads.
    max_concurrency = 1

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        repeat_penalty: float = 1.0,  # >1 makes output depend on what the KV cache held
        chat_format: str | None = None,
        prefix_reuse: bool = True,
        prefix_cache_mb: float = 512,
        use_mmap: bool = False,
        model: str | None = None,
    ) -> None:
        # model: a catalogue name (embedded, embedded:smollm2-135m); neither it nor
        # model_path means the default, which falls back to SmolLM2 with a warning
        if model_path and model:
            raise ConfigError("give a model file or a catalogue name, not both")
        self.model: catalogue.ResolvedModel | None = None
        if model_path:
            path = check_gguf(model_path)
        else:
            self.model = catalogue.resolve_model(model)
            path = self.model.path
        runs = self.model.entry.name if self.model else f"gguf:{path}"
        fallback = self.model is not None and self.model.fallback_from is not None
        super().__init__(runs if fallback or not name else name)  # a fallback names what runs
        self.model_path = path
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or default_threads())
        self.n_batch = int(n_batch)
        # llama.cpp computes a prompt in micro-batches of n_ubatch tokens; prefix reuse stops
        # at a multiple of it (see _prepare_context), so a small one keeps most of the reuse
        self.n_ubatch = UBATCH if self.n_batch % UBATCH == 0 else self.n_batch
        self.seed = int(seed)
        self.repeat_penalty = float(repeat_penalty)
        self.chat_format = chat_format
        # Read, not mapped: llama.cpp repacks most of a Q4_K model's weights for its CPU kernels,
        # and a mapped file kept the original pages resident beside the copy (1.87 GB RSS after
        # loading the 1.1 GB default model, against 1.28 GB read)
        self.use_mmap = bool(use_mmap)
        if self.n_ctx < 256:
            raise ConfigError(f"n_ctx={self.n_ctx} is too small; use at least 256")
        if prefix_cache_mb < 0:
            raise ConfigError("prefix_cache_mb must be >= 0 (0 turns the snapshot store off)")
        # prefix_reuse=False recomputes every prompt from scratch: the reference code's
        # behaviour, kept to measure what reuse saves
        self.prefix_reuse = bool(prefix_reuse)
        self.prefix_cache = PrefixCache(int(prefix_cache_mb * 2**20))
        self._formatters: dict[int, Any] = {}
        self._shared: Loaded | None = None  # the process's Llama for this file, once loaded
        self._create_lock = threading.Lock()
        self._grammars: dict[str, Any] = {}
        self._bans = BanMasks()  # a request's ban masks its tokens (token_bans.py)

    def cache_identity(self) -> str:
        # a catalogued file is known by its hash, so another file never reuses cached answers
        model = f"{self.model.entry.name}|sha256={self.model.entry.sha256}" if self.model else f"gguf:{self.model_path}"
        return f"{model}|repeat_penalty={self.repeat_penalty}|chat_format={self.chat_format}"

    def model_info(self) -> ModelInfo:
        entry = self.model.entry if self.model else None
        return ModelInfo(
            name=entry.name if entry else f"gguf:{self.model_path}",
            path=str(self.model_path),
            size=entry.size if entry else self.model_path.stat().st_size,
            sha256=entry.sha256 if entry else None,
        )

    def describe(self) -> str:
        reuse = (
            f"prefix cache {self.prefix_cache.budget_bytes // 2**20} MiB" if self.prefix_reuse else "no prefix reuse"
        )
        model = ""
        if self.model is not None:
            model = f", {self.model.entry.title}"
            if self.model.fallback_from:
                model += f" (fallback: {self.model.fallback_from!r} is not installed)"
        return f"{self.name}{model} (llama.cpp, n_ctx={self.n_ctx}, threads={self.n_threads}, {reuse})"

    # -- instances ----------------------------------------------------------------------

    def _instance(self, role: str) -> tuple[Any, threading.Lock]:
        """The ``Llama`` (and its lock) that serves ``role``: the same one for every role."""
        with self._create_lock:
            if self._shared is None:
                self._shared = shared_llama(self._load_key(), self._load)
            return self._shared.llm, self._shared.lock

    def _load_key(self) -> tuple[Any, ...]:
        """What makes two loads the same ``Llama``: the file and every setting it is built with."""
        return (str(self.model_path.resolve()), self.n_ctx, self.n_threads, self.n_batch, self.n_ubatch,
                self.seed, self.chat_format, self.use_mmap)  # fmt: skip

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise BackendError(f"llama-cpp-python is not installed; {INSTALL_HINT}") from None
        keep_other_threads_output()
        try:
            return Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                n_batch=self.n_batch,
                n_ubatch=self.n_ubatch,
                seed=self.seed,
                chat_format=self.chat_format,
                use_mmap=self.use_mmap,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelNotFoundError(f"llama.cpp could not load {self.model_path}: {exc}") from None

    def _grammar(self, schema: dict[str, Any], llm: Any) -> Any:
        """The grammar of a JSON schema, built once (the last ``MAX_GRAMMARS`` are kept: a
        server meets a schema per client). None where llama.cpp cannot decode under it: its
        converter refuses the schema (``not``, a boolean subschema, ...) or writes a grammar
        llama.cpp cannot parse (a pattern's ``\\.``; sampling under it would crash): the
        reply is then decoded free, the loop still validates it, and the log says so once."""
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        with self._create_lock:
            if key not in self._grammars:
                try:
                    # build from the schema as written: llama.cpp keeps property order, and a
                    # sorted dump would make the model write e.g. a "reason" before the scores
                    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
                    check_grammar(llm, grammar)  # llama.cpp's dump of a refused one: one log line
                    self._grammars[key] = grammar
                except Exception as exc:  # noqa: BLE001 - the converter's own errors: Assertion, Key, Attribute
                    said = str(exc) if isinstance(exc, GrammarRefused) else f"{type(exc).__name__}: {exc}"
                    reason = " ".join(said.split())[:240]  # one line, however long the converter's words
                    log.warning("llama.cpp cannot decode under this JSON schema (%s); decoding free", reason)
                    self._grammars[key] = None
                while len(self._grammars) > MAX_GRAMMARS:
                    self._grammars.pop(next(iter(self._grammars)))
            return self._grammars[key]

    # -- calls ----------------------------------------------------------------------------

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return await asyncio.to_thread(self._complete_sync, request)

    async def stream(self, request: CompletionRequest, on_text: TextSink) -> CompletionResponse:
        """The reply as llama.cpp writes it, through the same call as :meth:`complete` (the
        same text, token counts and prefix reuse). With a named ``chat_format``
        llama-cpp-python formats and runs the chat itself: that reply comes whole."""
        if self.chat_format is not None:
            return await super().stream(request, on_text)
        loop = asyncio.get_running_loop()
        pieces = Pieces(lambda text: loop.call_soon_threadsafe(on_text, text))
        try:
            response = await asyncio.to_thread(self._complete_sync, request, pieces)
        except asyncio.CancelledError:
            pieces.cancelled = True  # the model stops at its next token and frees the role
            raise
        # the thread's pieces were queued on the loop before its result: they came first
        pieces.finish(response.text)
        return response

    def _complete_sync(self, request: CompletionRequest, pieces: Pieces | None = None) -> CompletionResponse:
        llm, lock = self._instance(request.role)
        with lock, _recording(llm, request.top_logprobs) as recorder:
            if self.chat_format is not None:  # a named format: llama-cpp-python formats it
                if not self.prefix_reuse:
                    llm.reset()
                out = _rejecting(
                    llm.create_chat_completion,
                    messages=chat_messages(request),
                    stop=request.stop or [],
                    **self._sampling(request, llm),
                )
                choice = out["choices"][0]
                return self._response(choice["message"].get("content"), out, choice, cached=None, recorder=recorder)
            tokens, stop = self._prompt_tokens(llm, request)
            cached = self._prepare_context(llm, tokens)
            # a run cancelled meanwhile (its client left) stops the model at its next token
            watch = {"stopping_criteria": _until_cancelled if pieces is None else pieces.watching(llm, stop)}
            out = _rejecting(llm.create_completion, prompt=tokens, stop=stop, **watch, **self._sampling(request, llm))
            self._after_call(llm, tokens)
        choice = out["choices"][0]
        return self._response(choice.get("text"), out, choice, cached=cached, recorder=recorder)

    def _response(
        self,
        text: str | None,
        out: dict[str, Any],
        choice: dict[str, Any],
        *,
        cached: int | None,
        recorder: TopRecorder | None = None,
    ) -> CompletionResponse:
        usage = out.get("usage") or {}
        return CompletionResponse(
            text=text or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            model=self.name,
            finish_reason=choice.get("finish_reason"),
            cached_prompt_tokens=cached,
            top_logprobs=recorder.steps if recorder is not None and recorder.steps else None,
        )

    def _sampling(self, request: CompletionRequest, llm: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            seed=self.seed if request.seed is None else request.seed,
            repeat_penalty=self.repeat_penalty,
        )
        grammar = self._grammar(request.json_schema, llm) if request.json_schema is not None else None
        if grammar is not None:
            kwargs["grammar"] = grammar
        if request.ban is not None:
            kwargs["logits_processor"] = self._bans.processor(llm, request.ban)
        return kwargs

    # -- prompts and prefix reuse ---------------------------------------------------------

    def _prompt_tokens(self, llm: Any, request: CompletionRequest) -> tuple[list[int], list[str]]:
        """The chat prompt as the model's own GGUF chat template renders it, tokenized the
        way ``create_chat_completion`` would (a conversation's own messages as they are: the
        same tokens, so the same reply, as ``create_chat_completion`` on them); plus the stop
        strings (request + end of turn). A model without a template gets the flat prompt."""
        formatter = self._formatter(llm)
        if formatter is None:  # a base model without a chat template: plain completion
            return llm.tokenize(flat_prompt(request).encode("utf-8"), add_bos=True, special=False), list(request.stop)
        result = formatter(messages=chat_messages(request))
        tokens = llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)
        stops = result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
        return tokens, list(request.stop) + [s for s in stops if s]

    def _formatter(self, llm: Any) -> Any:
        key = id(llm)
        if key not in self._formatters:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = llm.metadata.get("tokenizer.chat_template")
            formatter = None
            if template:
                eos, bos = llm.token_eos(), llm.token_bos()
                formatter = Jinja2ChatFormatter(
                    template=template,
                    eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                    bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
                )
            self._formatters[key] = formatter
        return self._formatters[key]

    def _prepare_context(self, llm: Any, tokens: list[int]) -> int:
        """Make the context hold the longest available prefix of ``tokens``: keep its own,
        or restore a snapshot that shares more. Returns the prompt tokens that will be reused."""
        if not self.prefix_reuse:
            llm.reset()
            return 0
        query = as_tokens(tokens)
        live = common_prefix(as_tokens(llm.input_ids[: llm.n_tokens]), query)
        snap, shared = self.prefix_cache.best(query)
        if snap is not None and shared >= live + MIN_RESTORE_GAIN_TOKENS and _restore(llm, snap):
            self.prefix_cache.record_hit(shared)
            live = shared
        # Reuse only up to a multiple of n_ubatch. llama.cpp computes a prompt in micro-batches
        # of n_ubatch tokens from position 0, and its CPU kernels pick their tiling (and a
        # 1-row batch another path altogether) by the micro-batch's size, so a suffix computed
        # from any other point gets logits that differ in the last bits from a cold run, and
        # greedy decoding can then pick another token (issue 21: 5 of 9 feedback calls
        # differed). Cut at a boundary, the suffix is split into the same micro-batches as
        # cold, and every reused position was itself computed in one: warm equals cold.
        keep = aligned_prefix(min(live, len(tokens) - MIN_SUFFIX_TOKENS), self.n_ubatch)
        if keep < llm.n_tokens:
            llm._ctx.kv_cache_seq_rm(0, max(keep, 0), -1)
            llm.n_tokens = max(keep, 0)
        return max(keep, 0)

    def _after_call(self, llm: Any, tokens: list[int]) -> None:
        """Cut the context back to the prompt (a chat reply is never a later prompt's
        prefix) and snapshot it for the prompts that will extend it."""
        if not self.prefix_reuse:
            return
        n = len(tokens)
        if llm.n_tokens > n:
            llm._ctx.kv_cache_seq_rm(0, n, -1)
            llm.n_tokens = n
        llm._requires_eval = True  # the logits now belong to the reply, not the prompt
        if self.prefix_cache.budget_bytes and n >= 2 * MIN_RESTORE_GAIN_TOKENS:
            data = _save(llm)
            if data is not None:
                self.prefix_cache.put(tokens, data)

    async def aclose(self) -> None:
        with self._create_lock:
            shared, self._shared = self._shared, None
        if shared is not None:
            release(shared)


class Pieces:
    """Hands a reply to ``emit`` while llama.cpp writes it, from llama.cpp's thread. It is
    called as a stopping criterion (always answering "go on") after each sampled token; it
    decodes the tokens so far and sends what is new, holding back what may still become a
    stop string or a whole character. llama.cpp calls it before adding the newest token, so
    it runs one token behind; :meth:`finish` sends the rest of the finished reply."""

    def __init__(self, emit: TextSink) -> None:
        self.emit = emit
        self.sent = ""
        self.cancelled = False  # set from the event loop: stop generating
        self.llm: Any = None
        self.stops: list[str] = []
        self.start: int | None = None  # where the reply begins in the context's tokens

    def watching(self, llm: Any, stops: list[str]) -> Callable[[Any, Any], bool]:
        self.llm, self.stops = llm, [s for s in stops if s]
        return self.check

    def check(self, input_ids: Any, logits: Any) -> bool:
        if self.cancelled or cancelled():
            return True
        if self.start is None:  # first call: nothing sampled is in the context yet
            self.start = len(input_ids)
        reply = self.llm.detokenize(list(input_ids[self.start :])).decode("utf-8", errors="ignore")
        self._send(settled(reply, self.stops))
        return False

    def finish(self, text: str) -> None:
        self._send(text)

    def _send(self, text: str) -> None:
        if self.cancelled or len(text) <= len(self.sent) or not text.startswith(self.sent):
            return
        piece, self.sent = text[len(self.sent) :], text
        self.emit(piece)


def _until_cancelled(input_ids: Any, logits: Any) -> bool:
    """A stopping criterion: stop once the run this call belongs to is cancelled (core/cancel.py)."""
    return cancelled()


def settled(text: str, stops: list[str]) -> str:
    """The part of a reply being written that can no longer change: up to its first stop
    string, or short of an end that may be the start of one."""
    hits = [text.index(s) for s in stops if s in text]
    if hits:
        return text[: min(hits)]
    for k in range(min(len(text), max((len(s) for s in stops), default=1) - 1), 0, -1):
        if any(s.startswith(text[-k:]) for s in stops):
            return text[:-k]
    return text


@contextlib.contextmanager
def _recording(llm: Any, k: int | None) -> Iterator[TopRecorder | None]:
    """Record the reply's token probabilities where the request asks for them (see
    :mod:`.token_probabilities`); otherwise the call runs as it always did."""
    if k is None:
        yield None
        return
    with TopRecorder(llm, k) as recorder:
        yield recorder


def _rejecting(call: Any, **kwargs: Any) -> dict[str, Any]:
    """Run a llama.cpp call; its ValueError (e.g. "Requested tokens (N) exceed context
    window") becomes a BackendError that says what to do."""
    try:
        return call(**kwargs)
    except ValueError as exc:
        raise BackendError(
            f"llama.cpp rejected the request: {exc}. Shorten the input or raise n_ctx "
            "(-o n_ctx=8192 for --model; --feedback-option/--refine-option n_ctx=8192 for those roles' models)"
        ) from None


def _save(llm: Any) -> bytes | None:
    """The KV cells of the context's sequence 0 (no logits): what a restore needs."""
    import llama_cpp

    ctx = llm._ctx.ctx
    size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
    if size <= 0:
        return None
    buf = (ctypes.c_uint8 * size)()
    n = int(llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0))
    return ctypes.string_at(buf, n) if n > 0 else None


def _restore(llm: Any, snap: Any) -> bool:
    import llama_cpp

    llm._ctx.kv_cache_seq_rm(0, 0, -1)
    buf = (ctypes.c_uint8 * len(snap.data)).from_buffer_copy(snap.data)
    if int(llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buf, len(snap.data), 0)) == 0:
        llm.reset()  # nothing restored: start clean rather than trust a half-written cache
        return False
    n = len(snap.tokens)
    llm.input_ids[:n] = snap.tokens
    llm.n_tokens = n
    llm._requires_eval = True  # the restored state has no logits: recompute the last token
    return True


class _KeepOutput:
    """Stands in for llama-cpp-python's ``suppress_stdout_stderr``: does nothing."""

    def __init__(self, disable: bool = True) -> None:
        pass

    def __enter__(self) -> _KeepOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def keep_other_threads_output() -> None:
    """Stop llama-cpp-python from silencing the whole process while a model loads.

    With ``verbose=False`` it wraps each load in ``suppress_stdout_stderr``, which swaps the
    process-wide ``sys.stdout``/``sys.stderr`` and file descriptors 1 and 2 for /dev/null:
    whatever another thread prints meanwhile is lost (the server's log lines, a client's
    streamed reply printed while the feedback role's context loads). The swap is disabled,
    and llama.cpp's own log lines go through :func:`_log_errors_only` instead."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is not None:  # done once per process, on the first model load
        return
    import llama_cpp
    import llama_cpp._internals
    import llama_cpp.llama

    for module in (llama_cpp._internals, llama_cpp.llama):
        if hasattr(module, "suppress_stdout_stderr"):
            module.suppress_stdout_stderr = _KeepOutput
    # kept in a global: ctypes must not free a callback llama.cpp still holds
    _LOG_CALLBACK = llama_cpp.llama_log_callback(_log_errors_only)
    llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))


# ggml's log levels (ggml.h): a continuation line keeps the level of the line it continues
_GGML_LOG_ERROR, _GGML_LOG_CONT = 4, 5
_LOG_CALLBACK: Any = None
_log_level = 0


def _log_errors_only(level: int, text: bytes, user_data: Any) -> None:
    """llama.cpp's log lines, errors only, to stderr. llama-cpp-python's own callback maps
    ggml's WARN (3) to logging.ERROR, so with ``verbose=False`` every model load printed
    warnings such as Qwen's "control-looking token … is probably a bug in the model"."""
    global _log_level
    if level != _GGML_LOG_CONT:
        _log_level = level
    if _log_level == _GGML_LOG_ERROR:
        sys.stderr.write(text.decode("utf-8", "replace"))
        sys.stderr.flush()
