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


def fit_words(table: Table, width: int) -> None:
    """Cells wrap at spaces within ``width`` instead of ending in '…' (rich's default cut
    `tasks`' preset column at 80 columns): every word stays whole while the longest words
    fit, and longer words fold onto the next line rather than lose their ends."""
    for column in table.columns:
        column.overflow = "fold"
    _fit_words(table, None, width)


def _fit_words(table: Table, keep: int | None, width: int) -> None:
    """Fixed widths for the columns but ``keep`` when the table is too wide for ``width``:
    each column's longest word, and the room left shared by how much more each wants. When
    even the longest words do not fit, the columns with the shortest longest words keep
    them whole and the rest fold theirs (``keep`` still whole)."""
    n = len(table.columns)
    others = [i for i in range(n) if i != keep]
    overhead = (n - 1) + 2 * n - (0 if table.pad_edge else 2) + (2 if table.show_edge else 0)
    room = width - overhead - (table.columns[keep].min_width or 0 if keep is not None else 0)
    texts = {i: [str(c) for c in [table.columns[i].header, *table.columns[i].cells]] for i in others}
    want = {i: max(len(t) for t in texts[i]) for i in others}
    least = {i: max(len(w) for t in texts[i] for w in t.split() or [""]) for i in others}
    if sum(want.values()) <= room:
        return
    if sum(least.values()) > room:
        _fold_the_longest(table, room, least)
        return
    spare, extra = room - sum(least.values()), {i: want[i] - least[i] for i in others}
    for i in others:
        table.columns[i].width = least[i] + spare * extra[i] // max(1, sum(extra.values()))


FOLDED = 8  # the narrowest a column that folds its words is made


def _fold_the_longest(table: Table, room: int, least: dict[int, int]) -> None:
    """Not every column's longest word fits: from the shortest up, a column gets its longest
    word's width while the columns after it keep ``FOLDED`` each; those share what is left
    and fold ("auto|json_schema|json_object|off" folds, "prefix_cache_mb" beside it does not)."""
    order = sorted(least, key=lambda i: least[i])
    left = room
    for k, i in enumerate(order):
        after = len(order) - k - 1
        fits = left - least[i] >= FOLDED * after
        table.columns[i].width = max(1, least[i] if fits else left // (after + 1))
        left -= table.columns[i].width
