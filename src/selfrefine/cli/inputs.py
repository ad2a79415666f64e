"""What ``selfrefine run`` reads as its input: INPUT, ``--input-file`` or stdin, as strict
UTF-8 within a size limit, one line for a task whose input is one line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..core.errors import InputError
from ..task.task import Task

MAX_INPUT_BYTES = 10_000_000


def read_input(text: str | None, input_file: Path | None) -> str:
    if text is not None and input_file is not None:
        raise click.UsageError("give INPUT or --input-file, not both")
    if input_file is not None:
        try:
            if input_file.stat().st_size > MAX_INPUT_BYTES:
                raise InputError(f"input file {input_file} is larger than {MAX_INPUT_BYTES:,} bytes")
            return input_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read input file {input_file}: {exc}") from None
    if text is not None and text != "-":
        return _valid_text(text, "INPUT")
    if text is None and sys.stdin.isatty():
        raise click.UsageError("no input: give INPUT, --input-file PATH, or pipe it on stdin")
    return _read_stdin()


def one_input(task: Task, text: str, input_file: Path | None, where: str) -> None:
    """Refuse several lines for a task whose input is one line (a concept list, a title):
    they would be joined into one input silently, where ``eval`` reads one input a line. A
    JSON value (``[...]``, ``{...}``) may span lines."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not task.one_line_input or len(lines) < 2 or text.lstrip().startswith(("[", "{")):
        return
    where, data = (f"--input-file {input_file}", input_file) if input_file is not None else (where, "FILE")
    raise InputError(
        f"{task.name} takes one input on one line, and {where} has {len(lines)} lines: for one input "
        f"per line use `selfrefine eval {task.name} --data {data} --out DIR`, or join them into one line"
    )


def _read_stdin() -> str:
    """stdin as strict UTF-8, as ``-f`` reads a file (Python's own stdin may turn bad bytes
    into lone surrogates that fail much later, at the first write)."""
    data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"stdin is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "convert it first, e.g. with iconv -t UTF-8"
        ) from None


def _valid_text(text: str, where: str) -> str:
    """``text`` unless it holds a lone surrogate (a command-line argument's undecodable byte)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{where} is not UTF-8 text (character {exc.start}); pass UTF-8 text") from None
    return text
