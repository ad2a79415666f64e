"""One ``Llama`` per model file in a process (issue 46, item 22): each ``Llama`` is a whole copy
of the model in memory (the file's mapping, llama.cpp's repacked weights, a KV cache), and one
per role held 5.7 GB RSS for the 1.1 GB default model in one ``run``. The roles, and the
backends that load the same file the same way (an eval's judge on --model's file), share one.

The model load itself stands in here (a GGUF file with only the magic cannot be loaded);
what is under test is which loads the backend asks for and when it frees them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from selfrefine.backends.embedded import LlamaCppBackend
from selfrefine.core.records import MODEL_ROLES


class _Model:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Counting(LlamaCppBackend):
    """The backend with its llama.cpp load replaced by a record of each load."""

    loads: list[_Model] = []

    def _load(self) -> Any:
        model = _Model()
        Counting.loads.append(model)
        return model


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    Counting.loads = []
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF\x03\x00")
    return path


def test_every_role_shares_one_llama(model_file):
    backend = Counting(model_file)
    llms = {id(backend._instance(role)[0]) for role in MODEL_ROLES}
    locks = {id(backend._instance(role)[1]) for role in MODEL_ROLES}
    assert len(Counting.loads) == 1 and len(llms) == 1 and len(locks) == 1
    asyncio.run(backend.aclose())
    assert Counting.loads[0].closed


def test_backends_on_one_file_share_it_until_the_last_closes(model_file):
    run, judge = Counting(model_file), Counting(model_file)  # e.g. eval's --eval-judge-model on the same file
    assert run._instance("generate")[0] is judge._instance("judge")[0]
    assert len(Counting.loads) == 1
    asyncio.run(run.aclose())
    assert not Counting.loads[0].closed  # the judge still uses it
    asyncio.run(judge.aclose())
    assert Counting.loads[0].closed
    again = Counting(model_file)  # a closed model is loaded afresh, not handed out closed
    assert not again._instance("generate")[0].closed and len(Counting.loads) == 2
    asyncio.run(again.aclose())


def test_other_load_settings_are_another_llama(model_file):
    small, big = Counting(model_file, n_ctx=2048), Counting(model_file, n_ctx=8192)
    assert small._instance("generate")[0] is not big._instance("generate")[0]
    assert len(Counting.loads) == 2
    asyncio.run(small.aclose())
    asyncio.run(big.aclose())


def test_the_model_file_is_read_not_mapped(model_file, monkeypatch):
    # llama.cpp repacks most of a Q4_K model's weights for its CPU kernels: a mapped file kept
    # the original pages resident beside the copy (1.87 GB RSS after loading the 1.1 GB default
    # model; 1.28 GB read). The load's settings are what is checked: no model is loaded here.
    llama_cpp = pytest.importorskip("llama_cpp")
    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(llama_cpp, "Llama", lambda **kwargs: asked.append(kwargs) or _Model())
    for backend in (LlamaCppBackend(model_file), LlamaCppBackend(model_file, use_mmap=True)):
        backend._instance("generate")
        asyncio.run(backend.aclose())
    assert [kwargs["use_mmap"] for kwargs in asked] == [False, True]
