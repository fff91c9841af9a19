"""Result tables on stdout: a view that fits the terminal, or csv / json / markdown.

The default ``text`` view shows what a reader looks at first: the row keys, the denominators,
the estimates in percentage points with their intervals (``15.3 [12.0, 18.4]``) and the p-value
(two significant digits, ``< 0.001``), under a line naming the interval method(s) and level.
Which columns are the answer is declared once per result (:data:`recoverylab._display.FACES`):
the fitter keeps a row's keys and its main columns in one table, fills the rest of the width
(``$COLUMNS``, else the terminal, else 80) with secondary columns and drops those that do not
fit (``--wide`` continues them in further blocks that repeat the row keys). When even the main
columns do not fit, they continue in blocks that repeat the keys, the estimates first; when the
keys and an estimate alone do not fit, each row prints as ``header: value`` fields. No line is
longer than the width. The text is plain (no colour, no box drawing) so it reads the same in a
terminal, a pipe or a log.

``csv`` and ``json`` write the result frame unchanged (rates as fractions, every column), for
other programs; ``markdown`` writes every column as the text view shows it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping

import polars as pl

from recoverylab._display import (
    FACES,
    SAID,
    Face,
    Shown,
    count_text,
    key_text,
    shown_columns,
)

__all__ = ["method_line", "render", "render_many", "terminal_width", "wrap_text"]

#: Rows the text view prints before it says how many more there are.
MAX_ROWS = 100
#: Spaces between columns.
GAP = 2
#: Spaces between the ``header: value`` fields of a row printed as fields.
FIELD_GAP = 3


def terminal_width() -> int:
    """Columns available: ``$COLUMNS``, else the terminal's width, else 80."""
    return shutil.get_terminal_size(fallback=(80, 24)).columns


def wrap_text(text: str, width: int, indent: str = "") -> str:
    """Word-wrap each line of ``text`` to ``width`` (a word longer than the width is split).

    Continuation lines start with ``indent``.

    Examples
    --------
    >>> print(wrap_text("95% intervals: fay-lumbard (6 rows), cluster-melded (2 rows)", 30))
    95% intervals: fay-lumbard (6
    rows), cluster-melded (2 rows)
    """
    width = max(width, len(indent) + 1)
    out: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for given in paragraph.split(" "):
            word = given
            candidate = f"{line} {word}" if line.strip() else line + word
            if len(candidate) <= width:
                line = candidate
                continue
            if line.strip():
                out.append(line)
                line = indent
            while len(line) + len(word) > width:  # a word longer than a line is cut
                room = width - len(line)
                out.append(line + word[:room])
                word, line = word[room:], indent
            line += word
        out.append(line)
    return "\n".join(out)


def _wrap(header: str, width: int) -> list[str]:
    """Greedy word wrap of a header into lines of at most ``width`` (a word is never split)."""
    lines: list[str] = []
    for word in header.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _values(frame: pl.DataFrame, name: str) -> str:
    """Name the values of a words column: ``a``, or ``a (6 rows), b (2 rows)`` when they differ.

    ``none`` (a row whose interval inverts no test) and nulls are left out.
    """
    counts = (
        frame.select(pl.col(name).cast(pl.String))
        .drop_nulls()
        .filter(pl.col(name) != "none")
        .group_by(name)
        .len()
        .sort(["len", name], descending=[True, False])
    )
    values = [(str(v), int(n)) for v, n in counts.iter_rows()]
    if len(values) == 1:
        return values[0][0]
    return ", ".join(f"{v} ({count_text(n)})" for v, n in values)


def _words(frame: pl.DataFrame, name: str) -> bool:
    return name in frame.columns and frame.schema[name] == pl.String


def _interval_methods(frame: pl.DataFrame) -> str:
    """Each interval's method, grouped: ``fay-lumbard; intervention rate: korn-graubard``.

    The shared interval (``ci_low``/``ci_high``, its method in ``ci_method``) is named by its
    estimate; a rate's own interval (``X_ci_low``, ``X_ci_method``) by the rate; a rate's test
    (``X_test``) follows its method when it is not the method's own name.
    """
    owner = next((c for c in _SHARED_OWNERS if c in frame.columns), "")
    groups: dict[str, list[str]] = {}
    for column in frame.columns:
        if not _words(frame, column) or not (
            column == "ci_method" or column.endswith("_ci_method")
        ):
            continue
        prefix = column.removesuffix("ci_method").removesuffix("_")
        text = _values(frame, column)
        test = f"{prefix}_test"
        if prefix and _words(frame, test) and (tests := _values(frame, test)) and tests != text:
            text += f" (inverting {tests})"
        if text:
            groups.setdefault(text, []).append((prefix or owner or "rates").replace("_", " "))
    if len(groups) <= 1:
        return next(iter(groups), "")
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in groups.items())


#: Estimates that own an unnamed ``ci_low`` / ``ci_high`` (as :mod:`recoverylab._display`).
_SHARED_OWNERS = ("effect", "difference", "gain", "ts", "drop", "estimate")


def method_line(
    frame: pl.DataFrame, confidence: float | None = None, alternative: str | None = None
) -> str | None:
    """Return the line above a table naming its interval method(s) and level, and its test.

    Taken from the result's own columns: ``ci_method`` (and ``<rate>_ci_method``) for the
    intervals, ``test`` (or ``p_method``) for the p-values, ``confidence`` when the result
    holds it (else ``confidence``, the level the command asked for). A result that does not
    record a method says so rather than guessing one.

    Examples
    --------
    >>> frame = pl.DataFrame({"effect": [0.1, 0.2], "ci_low": [0.0, 0.1], "ci_high": [0.2, 0.3],
    ...                       "p_value": [0.04, 0.01], "ci_method": ["fay-lumbard", "meld"]})
    >>> method_line(frame, 0.95)
    '95% intervals: fay-lumbard (1 row), meld (1 row); p: test not recorded in the result'
    """
    columns = frame.columns
    parts = []
    if any(c == "ci_low" or c.endswith("_ci_low") for c in columns):
        if "confidence" in columns and frame["confidence"].n_unique() == 1:
            confidence = float(frame["confidence"][0])
        level = "" if confidence is None else f"{100 * confidence:g}% "
        sided = "" if alternative in (None, "two-sided") else f"one-sided ({alternative}) "
        methods = _interval_methods(frame) or "method not recorded in the result"
        parts.append(f"{level}{sided}intervals: {methods}")
    shared = [c for c in ("test", "p_method") if _words(frame, c)]
    tests = "; ".join(t for t in (_values(frame, c) for c in shared) if t)
    if "p_value" in columns or "p_adjusted" in columns:
        parts.append(f"p: {tests or 'test not recorded in the result'}")
    elif tests:  # no p-value printed: the test the interval inverts
        parts.append(f"test inverted: {tests}")
    if "ci_inverts_test" in columns and frame.schema["ci_inverts_test"] == pl.Boolean:
        apart = int((~frame["ci_inverts_test"]).sum())
        if apart:  # two procedures, both named above: say that they are two
            parts.append(f"the interval does not invert p's test in {count_text(apart)}")
    if "interpretation" in columns and frame["interpretation"].n_unique() == 1:
        parts.append(str(frame["interpretation"][0]))
    return "; ".join(parts) if parts else None


def _pack(order: list[int], widths: list[int], keys: list[int], limit: int) -> list[list[int]]:
    """Split ``order`` (column indices) into blocks that fit ``limit``, each after the keys."""
    key_width = sum(widths[i] + GAP for i in keys)
    blocks: list[list[int]] = []
    current: list[int] = []
    used = key_width
    for i in order:
        if current and used + widths[i] > limit:
            blocks.append(current)
            current, used = [], key_width
        current.append(i)
        used += widths[i] + GAP
    if current or not blocks:
        blocks.append(current)
    return [sorted(keys + block) for block in blocks]


def _fit(
    shown: list[Shown], widths: list[int], width: int, *, wide: bool
) -> list[list[int]] | None:
    """Choose the blocks of columns to print, or None when a row must print as fields.

    The main columns come first (by rank: estimates, p, counts, others); secondary columns fill
    what width is left and are dropped (``wide``: continued in further blocks).
    """
    keys = [i for i, c in enumerate(shown) if c.key]
    main = sorted(
        (i for i, c in enumerate(shown) if not c.key and c.main), key=lambda i: (shown[i].rank, i)
    )
    rest = [i for i, c in enumerate(shown) if not c.key and not c.main]
    if not wide:  # a column whose one value the method line names adds nothing
        rest = [i for i in rest if shown[i].rank < SAID]
    key_width = sum(widths[i] + GAP for i in keys)
    # every main column (every column with ``wide``) must fit beside the keys
    needed = main + rest if wide else main or rest[:1]
    if key_width - GAP > width or any(key_width + widths[i] > width for i in needed):
        return None
    if wide:
        return _pack(main + rest, widths, keys, width)
    if key_width + sum(widths[i] + GAP for i in main) - GAP > width:
        return _pack(main, widths, keys, width)
    chosen, used = list(main), key_width + sum(widths[i] + GAP for i in main)
    for i in rest:
        if used + widths[i] <= width:
            chosen.append(i)
            used += widths[i] + GAP
    return [sorted(keys + chosen)]


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


def _unwrapped(
    shown: list[Shown], widths: list[int], longest: tuple, block: list[int], width: int
) -> list[int]:
    """Widths that keep every header of ``block`` on one line, when the block still fits."""
    full = list(widths)
    for i in block:
        full[i] = max(int(longest[i] or 0), len(shown[i].header))
    return full if sum(full[i] + GAP for i in block) - GAP <= width else widths


def _fields(cells: pl.DataFrame, shown: list[Shown], index: list[int], width: int) -> str:
    """Each row as ``header: value`` fields packed into lines of ``width``, rows apart."""
    records = []
    for row in cells.select(str(i) for i in index).iter_rows():
        lines: list[str] = []
        joinable = False  # a field that had to wrap ends its line
        for i, value in zip(index, row, strict=True):
            field = f"{shown[i].header}: {value}"
            if joinable and len(lines[-1]) + FIELD_GAP + len(field) <= width:
                lines[-1] += " " * FIELD_GAP + field
            else:
                wrapped = wrap_text(field, width, indent="  ").split("\n")
                lines.extend(wrapped)
                joinable = len(wrapped) == 1
        records.append("\n".join(lines))
    return "\n\n".join(records)


def _text(frame: pl.DataFrame, *, wide: bool, width: int, face: Face | None) -> str:
    shown = shown_columns(frame, wide=True, face=face)
    if not shown:
        return "(no columns)"
    if frame.height == 0:
        return "(no rows)"
    cells = frame.head(MAX_ROWS).select(c.cells.alias(str(i)) for i, c in enumerate(shown))
    longest = cells.select(pl.all().str.len_chars().max()).row(0)
    # a header wraps to the column's width, never narrower than its longest word
    widths = [
        max(int(longest[i] or 0), *(len(w) for w in c.header.split())) for i, c in enumerate(shown)
    ]
    blocks = _fit(shown, widths, width, wide=wide)
    if blocks is None:  # the keys and an estimate do not fit side by side: rows as fields
        index = [i for i, c in enumerate(shown) if c.key or c.main or wide]
        text, printed = _fields(cells, shown, index, width), set(index)
    else:
        text = "\n\n".join(
            _text_block(cells, shown, _unwrapped(shown, widths, longest, block, width), block)
            for block in blocks
        )
        printed = {i for block in blocks for i in block}
    notes = []
    if frame.height > MAX_ROWS:
        notes.append(f"{frame.height - MAX_ROWS:,} more rows (--format csv prints every row)")
    hidden = len(shown) - len(printed)
    if hidden:
        noun = "column" if hidden == 1 else "columns"
        notes.append(f"{hidden} secondary {noun} not shown; --wide shows every column")
    return text + "\n" + wrap_text("; ".join([count_text(frame.height), *notes]), width)


def _markdown(frame: pl.DataFrame, face: Face | None = None) -> str:
    shown = shown_columns(frame, wide=True, face=face)
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
    frame: pl.DataFrame,
    fmt: str = "text",
    *,
    wide: bool = False,
    width: int | None = None,
    face: Face | str | None = None,
    confidence: float | None = None,
    alternative: str | None = None,
    line: str | None = None,
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
        Text view: every column (the secondary ones in further blocks) instead of the main
        ones and the secondary ones that fit.
    width
        Text view: the line length to fit (default :func:`terminal_width`).
    face
        The result's declared main columns (a :class:`~recoverylab._display.Face` or its name
        in :data:`~recoverylab._display.FACES`); default: inferred from the column names.
    confidence, alternative
        The level and sidedness of the intervals, for the line naming them (text and
        markdown), when the result does not hold its level in a ``confidence`` column.
    line
        Words that replace that line (``""``: none), where the caller says more than the
        columns can (the gate's family-adjusted bounds).

    Returns
    -------
    str
        The table, without a trailing newline.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({"condition": [None], "n": [20], "gain": [0.15]})
    >>> print(render(frame, width=40))
    condition   n  gain pp
    ---------  --  -------
    all        20    +15.0
    1 row
    >>> print(render(frame, width=20))
                    gain
    condition   n     pp
    ---------  --  -----
    all        20  +15.0
    1 row
    """
    if isinstance(face, str):
        face = FACES[face]
    if fmt == "csv":
        return _plain(frame).write_csv().rstrip("\n")
    if fmt == "json":
        return json.dumps(frame.to_dicts(), default=str)
    if line is None:
        line = method_line(frame, confidence, alternative)
    if fmt == "markdown":
        return (f"{line}\n\n" if line else "") + _markdown(frame, face)
    width = width or terminal_width()
    table = _text(frame, wide=wide, width=width, face=face)
    return (wrap_text(line, width) + "\n" if line and frame.height else "") + table


def render_many(
    frames: Mapping[str, pl.DataFrame],
    fmt: str = "text",
    *,
    wide: bool = False,
    width: int | None = None,
    faces: Mapping[str, Face | str] | None = None,
    confidence: float | None = None,
) -> str:
    """Render several named result tables: one JSON object, or titled sections."""
    if fmt == "json":
        return json.dumps({name: frame.to_dicts() for name, frame in frames.items()}, default=str)
    title = {"csv": "# {}\n", "markdown": "## {}\n\n"}.get(fmt, "== {}\n\n")
    faces = faces or {}
    return "\n\n".join(
        title.format(name)
        + render(frame, fmt, wide=wide, width=width, face=faces.get(name), confidence=confidence)
        for name, frame in frames.items()
    )
