"""The one JSON reader: every JSON document or line recoverylab reads goes through it.

Python's ``json`` raises ``RecursionError`` on a document nested ~1,000 levels deep, polars'
reader refuses more than 128 levels, a UTF-8 byte-order mark is a ``JSONDecodeError``, and bytes
that are not UTF-8 end in a ``UnicodeDecodeError``: a hostile or damaged log would end in a
traceback, or fail later in a reader that cannot name the file. This module turns each of those
into one :class:`~recoverylab._errors.SourceError` line naming the file (and the line of an
NDJSON file), before anything else sees the value (ARCHITECTURE §8, "Hostile input").

=================  =============================================================================
failure            behaviour
=================  =============================================================================
compressed         ``.gz``, ``.zst``, ``.bz2`` (or a file starting with their magic bytes) is
                   decompressed first; a cut or damaged stream names the file
size               a document over :data:`MAX_BYTES` (decompressed) is refused, naming the file
encoding           UTF-8, with or without a byte-order mark; UTF-16 and UTF-32 with their
                   byte-order mark are decoded; any other bytes that are not UTF-8 are refused
                   (naming the offset of the first bad byte)
depth              values nested more than :data:`MAX_DEPTH` levels are refused (a cheap count of
                   brackets decides when no check is needed; strings holding brackets are exact)
syntax             the JSON parser's message, with line and column
type               :func:`load_object` refuses a document that is not one JSON object
=================  =============================================================================
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

from recoverylab._errors import SourceError
from recoverylab._formats import read_decompressed

__all__ = ["MAX_BYTES", "MAX_DEPTH", "decode", "load", "load_object", "loads", "wide_encoding"]

#: Deepest nesting of arrays and objects read (polars' own JSON reader stops at 128).
MAX_DEPTH = 100
#: Largest JSON document read, in bytes once decompressed.
MAX_BYTES = 2**31
_BLOCK = 1 << 24
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _where(path: Path | str, line: int | None) -> str:
    return f"`{path}` line {line}" if line is not None else f"`{path}`"


def decode(data: bytes, path: Path | str, line: int | None = None) -> str:
    """Return JSON bytes as text: UTF-8 (byte-order mark dropped), or UTF-16/32 by their mark.

    Raises
    ------
    SourceError
        Bytes that are not text in the encoding they claim, naming the file and the offset.
    """
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"{_where(path, line)} is not {encoding.removesuffix('-sig').upper()} text (byte "
            f"0x{data[exc.start]:02x} at offset {exc.start}). Hint: save the file as UTF-8."
        ) from None


def wide_encoding(head: bytes) -> str | None:
    """Return ``utf-16``/``utf-32`` when ``head`` opens with their byte-order mark, else None."""
    return next((n for b, n in _BOMS if head.startswith(b) and n != "utf-8-sig"), None)


def _depth(value: Any) -> int:
    """Return the nesting depth of a parsed value, walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def _too_deep(path: Path | str, line: int | None) -> SourceError:
    return SourceError(
        f"{_where(path, line)}: JSON values nested more than {MAX_DEPTH} levels deep; recoverylab "
        f"reads at most {MAX_DEPTH} levels."
    )


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def loads(text: str, path: Path | str, line: int | None = None, *, allow_nan: bool = True) -> Any:
    """Parse one JSON text read from ``path`` (``line``: its line in an NDJSON file).

    ``allow_nan=False`` refuses the ``NaN``/``Infinity`` tokens Python's reader accepts and
    JSON does not (polars' reader refuses them, without the line).

    Raises
    ------
    SourceError
        Invalid JSON (with the parser's line and column), a refused constant, or nesting
        beyond :data:`MAX_DEPTH`.
    """
    # Fewer brackets than the limit cannot nest deeper than it: no walk needed.
    deep = text.count("[") + text.count("{") > MAX_DEPTH
    try:
        value = json.loads(text, parse_constant=None if allow_nan else _refuse_constant)
    except RecursionError:
        raise _too_deep(path, line) from None
    except json.JSONDecodeError as exc:  # before ValueError: it is one
        if line is not None:
            raise SourceError(
                f"`{path}` line {line}: not valid JSON ({exc.msg} at column {exc.colno})."
            ) from None
        raise SourceError(
            f"`{path}` is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
        ) from None
    except ValueError as exc:  # a NaN or Infinity token, refused
        raise SourceError(
            f"{_where(path, line)}: `{exc}` is not a JSON number; write null (no value) or a "
            "number."
        ) from None
    if deep and _depth(value) > MAX_DEPTH:
        raise _too_deep(path, line)
    return value


def load(path: Path | str, data: bytes | None = None) -> Any:
    """Read one JSON document from ``path`` (decompressed when compressed), or from ``data``.

    Raises
    ------
    SourceError
        One line naming the file: unreadable, cut or damaged compressed data, too large, not
        text, too deep or not JSON.
    """
    path = Path(path)
    if data is None:
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise SourceError(f"`{path}` cannot be read ({exc.strerror or exc}).") from None
        if size > MAX_BYTES:
            raise _too_large(path)
        data = read_decompressed(path)
    if len(data) > MAX_BYTES:
        raise _too_large(path)
    if not data.strip():
        raise SourceError(f"`{path}` is empty; it holds no JSON value.")
    return loads(decode(data, path), path)


def _too_large(path: Path) -> SourceError:
    return SourceError(
        f"`{path}` holds more than {MAX_BYTES // 2**20} MiB of JSON; recoverylab reads JSON "
        "documents up to that size. Hint: write the log as JSON lines (NDJSON)."
    )


def load_object(path: Path | str, data: bytes | None = None, *, what: str = "document") -> dict:
    """Read a JSON document that must be one object (``what`` names it in the error).

    Raises
    ------
    SourceError
        As :func:`load`, or a document that is not a JSON object.
    """
    value = load(path, data)
    if not isinstance(value, dict):
        raise SourceError(
            f"`{path}` is not a JSON object (it holds a JSON {_kind(value)}); the {what} must "
            "be one object."
        )
    return value


def _kind(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
