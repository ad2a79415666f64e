"""Tables that fit a terminal, or a pipe's 80 columns, without breaking what a reader types back."""

from __future__ import annotations

from rich.table import Table


def keep_whole(table: Table, keep: int, width: int) -> None:
    """Column ``keep`` never wraps, at any ``width``; the others make room, wrapping at spaces
    while their longest words fit (``datasets`` broke "commongen_hard" into "commongen_ha" /
    "rd" at 80 columns). The table drops its outer edge and padding for the room."""
    table.show_edge = table.pad_edge = False
    column = table.columns[keep]
    column.no_wrap, column.min_width = True, max(len(str(c)) for c in [column.header, *column.cells])
    _fit_words(table, keep, width)


def _fit_words(table: Table, keep: int, width: int) -> None:
    """Fixed widths for the columns but ``keep`` when the table is too wide for ``width``:
    each column's longest word, and the room left shared by how much more each wants. When
    even the longest words do not fit, rich folds them (``keep`` still whole)."""
    n = len(table.columns)
    others = [i for i in range(n) if i != keep]
    overhead = (n - 1) + 2 * n - (0 if table.pad_edge else 2) + (2 if table.show_edge else 0)
    room = width - overhead - (table.columns[keep].min_width or 0)
    texts = {i: [str(c) for c in [table.columns[i].header, *table.columns[i].cells]] for i in others}
    want = {i: max(len(t) for t in texts[i]) for i in others}
    least = {i: max(len(w) for t in texts[i] for w in t.split() or [""]) for i in others}
    if sum(want.values()) <= room or sum(least.values()) > room:
        return
    spare, extra = room - sum(least.values()), {i: want[i] - least[i] for i in others}
    for i in others:
        table.columns[i].width = least[i] + spare * extra[i] // max(1, sum(extra.values()))
