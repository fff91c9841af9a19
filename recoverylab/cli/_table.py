"""Result tables on stdout: a narrow view that fits the terminal, or csv / json / markdown.

The default ``text`` view shows what a reader looks at first: the row keys, the denominators,
the rates in percentage points with their intervals (``15.3 [12.0, 18.4]``) and the p-value
(two significant digits, ``< 0.001``). ``--wide`` shows every column. Columns are never cut:
headers wrap at word boundaries, and when the columns do not fit the width (``$COLUMNS``, else the
terminal, else 80) they continue in further blocks that repeat the row keys. The text is plain
(no colour, no box drawing) so it reads the same in a terminal, a pipe or a log.

``csv`` and ``json`` write the result frame unchanged (rates as fractions, every column), for
other programs; ``markdown`` writes every column as the text view shows it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping

import polars as pl

from recoverylab._display import Shown, count_text, key_text, shown_columns

__all__ = ["render", "render_many", "terminal_width"]

#: Rows the text view prints before it says how many more there are.
MAX_ROWS = 100
#: Spaces between columns.
GAP = 2


def terminal_width() -> int:
    """Columns available: ``$COLUMNS``, else the terminal's width, else 80."""
    return shutil.get_terminal_size(fallback=(80, 24)).columns


def _wrap(header: str, width: int) -> list[str]:
    """Greedy word wrap of a header into lines of at most ``width`` (a word is never split)."""
    lines: list[str] = []
    for word in header.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _blocks(widths: list[int], keys: list[int], limit: int) -> list[list[int]]:
    """Split column indices into blocks that fit ``limit``, each starting with the keys."""
    key_width = sum(widths[i] + GAP for i in keys)
    blocks: list[list[int]] = []
    current: list[int] = []
    used = key_width
    for i, width in enumerate(widths):
        if i in keys:
            continue
        if current and used + width > limit:
            blocks.append(current)
            current, used = [], key_width
        current.append(i)
        used += width + GAP
    if current or not blocks:
        blocks.append(current)
    return [keys + block for block in blocks]


def _text_block(
    cells: pl.DataFrame, shown: list[Shown], widths: list[int], index: list[int]
) -> str:
    heads = [_wrap(shown[i].header, widths[i]) for i in index]
    depth = max(len(h) for h in heads)
    lines = []
    for row in range(depth):
        parts = []
        for i, head in zip(index, heads, strict=True):
            text = head[row - (depth - len(head))] if row >= depth - len(head) else ""
            parts.append(text.ljust(widths[i]) if shown[i].key else text.rjust(widths[i]))
        lines.append((" " * GAP).join(parts).rstrip())
    lines.append((" " * GAP).join("-" * widths[i] for i in index))
    padded = [
        pl.col(str(i)).str.pad_end(widths[i])
        if shown[i].key
        else pl.col(str(i)).str.pad_start(widths[i])
        for i in index
    ]
    body = cells.select(pl.concat_str(padded, separator=" " * GAP).str.strip_chars_end())
    lines.extend(body.to_series().to_list())
    return "\n".join(lines)


def _text(frame: pl.DataFrame, *, wide: bool, width: int) -> str:
    shown = shown_columns(frame, wide=wide)
    if not shown:
        return "(no columns)"
    if frame.height == 0:
        return "(no rows)"
    cells = frame.head(MAX_ROWS).select(c.cells.alias(str(i)) for i, c in enumerate(shown))
    longest = cells.select(pl.all().str.len_chars().max()).row(0)
    # a header wraps to the column's width, never narrower than its longest word; the wide
    # view (no width limit) keeps every header on one line
    widths = [
        max(int(longest[i] or 0), *(len(w) for w in ([c.header] if wide else c.header.split())))
        for i, c in enumerate(shown)
    ]
    keys = [i for i, c in enumerate(shown) if c.key]
    blocks = _blocks(widths, keys, 10**9 if wide else width)
    text = "\n\n".join(_text_block(cells, shown, widths, block) for block in blocks)
    notes = []
    if frame.height > MAX_ROWS:
        notes.append(f"{frame.height - MAX_ROWS:,} more rows (--format csv prints every row)")
    if not wide and len(shown) < len(shown_columns(frame, wide=True)):
        notes.append("main columns shown; --wide shows every column")
    return text + "\n" + "; ".join([count_text(frame.height), *notes])


def _markdown(frame: pl.DataFrame) -> str:
    shown = shown_columns(frame, wide=True)
    cells = frame.select(
        c.cells.str.replace_all("|", r"\|", literal=True).alias(str(i)) for i, c in enumerate(shown)
    )
    head = "| " + " | ".join(c.header for c in shown) + " |"
    rule = "|" + "|".join("---" if c.key else "---:" for c in shown) + "|"
    body = cells.select(
        pl.concat_str([pl.lit("| "), pl.concat_str(pl.all(), separator=" | "), pl.lit(" |")])
    )
    return "\n".join([head, rule, *body.to_series().to_list()])


def _plain(frame: pl.DataFrame) -> pl.DataFrame:
    """Columns csv cannot hold (lists, structs) as text; everything else unchanged."""
    nested = [n for n, d in frame.schema.items() if isinstance(d, pl.List | pl.Struct | pl.Array)]
    return frame.with_columns(key_text(n, frame.schema[n]).alias(n) for n in nested)


def render(
    frame: pl.DataFrame, fmt: str = "text", *, wide: bool = False, width: int | None = None
) -> str:
    """Render one result frame for stdout.

    Parameters
    ----------
    frame
        A result frame (rates as fractions, as the protocol functions return them).
    fmt
        ``"text"`` (fits ``width``), ``"csv"``, ``"json"`` (the frame unchanged: every column,
        fractions) or ``"markdown"`` (every column, as the text view shows it).
    wide
        Text view: every column instead of the main ones, one line per row.
    width
        Text view: the line length to fit (default :func:`terminal_width`).

    Returns
    -------
    str
        The table, without a trailing newline.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({"condition": [None], "n": [20], "gain": [0.15]})
    >>> print(render(frame, width=40))
                    gain
    condition   n     pp
    ---------  --  -----
    all        20  +15.0
    1 row
    """
    if fmt == "csv":
        return _plain(frame).write_csv().rstrip("\n")
    if fmt == "json":
        return json.dumps(frame.to_dicts(), default=str)
    if fmt == "markdown":
        return _markdown(frame)
    return _text(frame, wide=wide, width=width or terminal_width())


def render_many(
    frames: Mapping[str, pl.DataFrame],
    fmt: str = "text",
    *,
    wide: bool = False,
    width: int | None = None,
) -> str:
    """Render several named result tables: one JSON object, or titled sections."""
    if fmt == "json":
        return json.dumps({name: frame.to_dicts() for name, frame in frames.items()}, default=str)
    title = {"csv": "# {}\n", "markdown": "## {}\n\n"}.get(fmt, "== {}\n\n")
    return "\n\n".join(
        title.format(name) + render(frame, fmt, wide=wide, width=width)
        for name, frame in frames.items()
    )
