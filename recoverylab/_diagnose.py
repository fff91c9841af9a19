"""Find which input file broke a query, and where, so errors name the file (and the line).

polars reports a damaged parquet page as ``Invalid thrift: bad data`` and a bad NDJSON line as
``Syntax at character 31``, without the file, and silently cuts a CSV row with more fields than
the header when only some columns are read. ARCHITECTURE §1.5 asks for one line naming the file
and line. The checks read a file whole with a reader that knows where it is (``csv``, ``json``,
a full polars scan): at scan time for text files, after a failure for binary ones.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar, cast

import polars as pl

from recoverylab._contracts import text_columns
from recoverylab._errors import EngineError, RecoveryLabError, SourceError
from recoverylab._formats import compression_of_path, decompressed_chunks, strip_compression
from recoverylab._json import loads, wide_encoding
from recoverylab._resolve import resolve_paths

__all__ = [
    "TextShape",
    "check_text_file",
    "decode_errors",
    "diagnose",
    "engine_errors",
    "file_columns",
    "files_of",
    "reads_inputs",
    "record_files",
    "translate_read_errors",
    "verify_file",
]

F = TypeVar("F", bound=Callable[..., Any])

#: id(LazyFrame) -> the files it scans (kept while the frame lives).
_PROVENANCE: dict[int, tuple[tuple[Path, str], ...]] = {}
#: id(LazyFrame) -> the columns each of its files holds (hive keys included).
_COLUMNS: dict[int, tuple[tuple[Path, frozenset[str]], ...]] = {}


def record_files(
    frame: pl.LazyFrame,
    files: Iterable[tuple[Path, str]],
    columns: Iterable[tuple[Path, frozenset[str]]] = (),
) -> pl.LazyFrame:
    """Remember which (file, format) pairs ``frame`` reads, and the columns each file holds.

    :func:`diagnose` uses the files after a failure; validation uses the columns to name the file
    that lacks a required column (its rows would otherwise just hold nulls).
    """
    key = id(frame)
    _PROVENANCE[key] = tuple(files)
    _COLUMNS[key] = tuple(columns)
    weakref.finalize(frame, _PROVENANCE.pop, key, None)
    weakref.finalize(frame, _COLUMNS.pop, key, None)
    return frame


def files_of(frame: object) -> tuple[tuple[Path, str], ...]:
    """Return the (file, format) pairs a LazyFrame returned by ``scan`` reads (or none)."""
    return _PROVENANCE.get(id(frame), ())


def file_columns(frame: object) -> tuple[tuple[Path, frozenset[str]], ...]:
    """Return (file, its columns) for each file a LazyFrame returned by ``scan`` reads (or none)."""
    return _COLUMNS.get(id(frame), ())


def _one_line(exc: BaseException) -> str:
    """Return the line of an error's text that says what went wrong.

    The first line, but for a Java stack trace (a Spark job's error through py4j, whose first
    line only names the call) the deepest ``Caused by:`` line, the root cause.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [
        line.removeprefix("Caused by:").strip() for line in lines if line.startswith("Caused by:")
    ]
    if causes:
        return causes[-1]
    return lines[0] if lines else type(exc).__name__


@dataclass(frozen=True)
class TextShape:
    """What the structural check of a text file learned: its columns, and those never filled.

    ``columns``: the CSV header, or the NDJSON keys in first-seen order. ``empty``: the CSV
    columns that hold no value on any row; a reader types them as null rather than text, so a
    file where an integer column happens to be empty combines with the other files.
    """

    columns: tuple[str, ...]
    empty: frozenset[str]


def check_text_file(
    path: Path, fmt: str, separator: str = ",", data: bytes | None = None
) -> TextShape:
    """Raise :class:`SourceError` naming the line of the first structural problem of a text file.

    CSV: every row has as many fields as the header (a ragged row is an error, never cut or padded)
    and every quote is closed. NDJSON: every non-blank line is one JSON object. Returns the
    file's :class:`TextShape`. A compressed file is checked on its decompressed text (streamed,
    or ``data`` when the caller already holds it); lines are counted in that text.
    """
    shape = TextShape((), frozenset())
    with _open_binary(path, data) as handle:
        wide = wide_encoding(handle.read(4))
    if wide is not None:
        raise SourceError(
            f"`{path}` is {wide.upper()} text; recoverylab reads text tables as UTF-8. Hint: "
            "save the file as UTF-8."
        )
    try:
        if fmt == "csv":
            shape = _check_csv(path, separator, data)
        elif fmt == "ndjson":
            shape = _check_ndjson(path, data)
    except UnicodeDecodeError:
        _raise_not_utf8(path, data)
    _check_final_line_break(path, data)
    return shape


class _Chunks(io.RawIOBase):
    """A readable binary stream over an iterator of byte blocks (a decompressed file)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._rest = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._rest:
            self._rest = next(self._chunks, b"")
            if not self._rest:
                return 0
        size = min(len(buffer), len(self._rest))
        buffer[:size] = self._rest[:size]
        self._rest = self._rest[size:]
        return size


@contextmanager
def _open_binary(path: Path, data: bytes | None) -> Iterator[Any]:
    """Open a text table's bytes: ``data`` if given, else the file, decompressed if compressed."""
    if data is not None:
        yield io.BytesIO(data)
        return
    codec = compression_of_path(path)
    if codec is None:
        with path.open("rb") as handle:
            yield handle
        return
    with io.BufferedReader(_Chunks(decompressed_chunks(path, codec))) as handle:
        yield handle


@contextmanager
def _open_text(path: Path, data: bytes | None, newline: str | None = None) -> Iterator[Any]:
    with _open_binary(path, data) as raw:
        wrapper = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline=newline)
        try:
            yield wrapper
        finally:
            wrapper.detach()


def _raise_not_utf8(path: Path, data: bytes | None) -> NoReturn:
    """Raise the error naming the line and byte of a text table's first non-UTF-8 byte."""
    with _open_binary(path, data) as handle:
        raw = handle.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SourceError(
            f"`{path}` line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}). Hint: save "
            "the file as UTF-8."
        ) from None
    raise SourceError(
        f"`{path}` is not UTF-8 text. Hint: save the file as UTF-8."
    )  # pragma: no cover


def _check_final_line_break(path: Path, data: bytes | None = None) -> None:
    """Refuse a text table without a final line break: its last row may have been cut off."""
    lines, last = 0, b""
    with _open_binary(path, data) as handle:
        while block := handle.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    if last in (b"", b"\n", b"\r"):
        return
    lines += 1
    raise SourceError(
        f"`{path}` line {lines}: the file ends inside a row (no final line break), so the row "
        "may have been cut off. Hint: if the file is complete, end it with a newline."
    )


def _check_csv(path: Path, separator: str, data: bytes | None = None) -> TextShape:
    with _open_text(path, data, newline="") as handle:
        reader = csv.reader(handle, delimiter=separator, strict=True)
        row_start = 1
        try:
            header = next(reader, None)
            if header is None:
                return TextShape((), frozenset())
            width = len(header)
            repeated = sorted({name for name in header if header.count(name) > 1})
            if repeated:
                raise SourceError(
                    f"`{path}` line 1: the header names the column `{repeated[0]}` more than "
                    "once; each column needs its own name."
                )
            unseen = set(range(width))  # columns with no value so far
            row_start = reader.line_num + 1
            for row in reader:
                if row and len(row) != width:
                    raise SourceError(
                        f"`{path}` line {row_start}: a row has {len(row)} fields where the header "
                        f"has {width}; every row must have one value per column."
                    )
                if unseen and row:
                    unseen.difference_update([i for i in unseen if row[i]])
                row_start = reader.line_num + 1
        except csv.Error as exc:
            raise SourceError(
                f"`{path}` line {row_start}: the row cannot be parsed as CSV ({exc}); check for "
                "an unclosed quote."
            ) from None
    return TextShape(tuple(header), frozenset(header[i] for i in unseen))


def _check_ndjson(path: Path, data: bytes | None = None) -> TextShape:
    """Check every line is one JSON object, and no nested value stands where text belongs.

    A JSON object or array in a contract text column (``task_id``, ``condition``...), or in a
    column (or field of a nested object, ``run.task``) whose other rows hold scalars, would be
    read as its JSON text: a key nobody wrote (ARCHITECTURE §8, "an object where a key
    belongs"). Both are errors naming the column and the line; so is an integer beyond 64 bits
    (polars refuses it without the line). Only rows whose text holds a bracket, a second brace
    or a 19-digit run are walked (flat rows cannot hold either); when a top-level column holds
    nested values somewhere, a second pass looks for its scalars in the flat rows.
    """
    keys: dict[str, None] = {}
    scalar: dict[str, int] = {}  # column -> first line holding a scalar (walked rows)
    nested: dict[str, int] = {}  # column -> first line holding an object or array
    flat = False  # some rows were not walked
    with _open_text(path, data) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            value = loads(line, path, number, allow_nan=False)
            if not isinstance(value, dict):
                raise SourceError(
                    f"`{path}` line {number}: a JSON {type(value).__name__} where each line must "
                    "be one object (a row)."
                )
            keys.update(dict.fromkeys(value))
            if "[" in line or line.count("{") > 1 or _LONG_DIGITS.search(line):
                _walk_row(path, number, value, scalar, nested)
            else:
                flat = True
    unmatched = [n for n in nested if "." not in n and n not in scalar]
    if flat and unmatched:
        _find_flat_scalars(path, data, unmatched, nested)
    return TextShape(tuple(keys), frozenset())


_LONG_DIGITS = re.compile(r"\d{19}")


def _walk_row(
    path: Path, number: int, value: dict[str, Any], scalar: dict[str, int], nested: dict[str, int]
) -> None:
    """Record the kinds of one row's fields (nested ones by dotted path); raise on a clash."""
    text = text_columns()
    fields = list(value.items())
    while fields:
        name, item = fields.pop()
        if item is None:
            continue
        kinds = nested if isinstance(item, (dict, list)) else scalar
        kinds.setdefault(name, number)
        if isinstance(item, int) and not -(2**63) <= item < 2**63:
            raise SourceError(
                f"`{path}` line {number}: column `{name}` holds the integer "
                f"{str(item)[:12]}..., beyond 64 bits; write it as a float or as text."
            )
        if name in nested and (name in text or name in scalar):  # text: one line
            _raise_nested(path, name, nested[name], scalar.get(name))
        if isinstance(item, dict):
            fields.extend((f"{name}.{key}", inner) for key, inner in item.items())


def _find_flat_scalars(
    path: Path, data: bytes | None, columns: list[str], nested: dict[str, int]
) -> None:
    """Raise if a flat row holds a scalar in a column other rows hold nested values in."""
    with _open_text(path, data) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip() or "[" in line or line.count("{") > 1:
                continue
            row = json.loads(line)
            for name in columns:
                if row.get(name) is not None:
                    _raise_nested(path, name, nested[name], number)


def _raise_nested(path: Path, name: str, nested: int, scalar: int | None) -> NoReturn:
    if name in text_columns() or scalar is None:
        line, found = nested, "a JSON object or array where a key or label (text) belongs"
    else:
        line = max(nested, scalar)
        kinds = ("a JSON object or array", "a scalar")
        first, second = kinds if line == nested else kinds[::-1]
        found = f"{first} where line {min(nested, scalar)} holds {second}"
    raise SourceError(
        f"`{path}` line {line}: column `{name}` holds {found}; a key or label column holds one "
        "text or number per row. Hint: move the nested value to a column of its own, or "
        "flatten it."
    )


def verify_file(path: Path, fmt: str) -> None:
    """Decode every value of a binary file, checking parquet page checksums where written.

    A flipped bit inside a parquet data page that carries no checksum decodes to a different
    value without any error; files written with page checksums (``write_page_checksum=True``
    in pyarrow) reveal it here. Raises :class:`SourceError` naming the file.
    """
    kind = "parquet" if fmt == "parquet" else "Arrow IPC"
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with pq.ParquetFile(path, page_checksum_verification=True) as handle:
                for _ in handle.iter_batches(batch_size=1 << 16):
                    pass
        reader = pl.scan_parquet if fmt == "parquet" else pl.scan_ipc
        reader(path).select(pl.all().null_count()).collect(engine="streaming")
    except decode_errors() as exc:
        raise SourceError(
            f"`{path}` is a damaged {kind} file: its data cannot be decoded ({_one_line(exc)})."
        ) from None


def _separator_of(path: Path) -> str:
    return "\t" if strip_compression(path).suffix.lower() == ".tsv" else ","


def diagnose(files: Iterable[tuple[Path, str]], exc: BaseException) -> RecoveryLabError:
    """Return the error that explains ``exc``: the first broken file, or an :class:`EngineError`."""
    for path, fmt in files:
        if not Path(path).is_file():
            continue
        try:
            if fmt in ("parquet", "ipc"):
                verify_file(Path(path), fmt)
            else:
                check_text_file(Path(path), fmt, _separator_of(Path(path)))
        except SourceError as found:
            return found
    shown = ", ".join(f"`{p}`" for p, _ in list(files)[:3])
    where = f" while reading {shown}" if shown else ""
    return EngineError(f"the query failed{where}: {_one_line(exc)} ({type(exc).__name__}).")


#: (module, exception) pairs that count as engine errors once their module is loaded.
_LOADED_ENGINE_ERRORS = (
    ("pyarrow", "ArrowException"),
    ("pyspark.errors", "PySparkException"),
    ("py4j.protocol", "Py4JJavaError"),
)


def engine_errors() -> tuple[type[BaseException], ...]:
    """Return the exception types the engines raise on bad data (polars panics included).

    The errors of :data:`_LOADED_ENGINE_ERRORS` (pyarrow's, and a Spark job's: a Java exception
    reaches Python as py4j's ``Py4JJavaError``) are included only when their module has been
    imported (none of them can be raised before): resolving them on the except path keeps
    those imports (0.1-0.3 s for pyarrow) off ``import recoverylab`` and ``recoverylab --help``.
    """
    errors: list[type[BaseException]] = [pl.exceptions.PolarsError, pl.exceptions.PanicException]
    for module, name in _LOADED_ENGINE_ERRORS:
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type) and issubclass(found, BaseException):
            errors.append(found)
    return tuple(errors)


def decode_errors() -> tuple[type[BaseException], ...]:
    """Return what decoding a damaged file may raise (the engines' errors and OSError)."""
    return (*engine_errors(), OSError)


def sources_files(sources: Iterable[object]) -> list[tuple[Path, str]]:
    """Return the files behind LazyFrames (from ``scan``), paths, globs and directories.

    Paths are listed by the same resolver :func:`recoverylab.io.scan` reads with, so the file
    diagnosed is a file that was read; a path the resolver refuses is skipped here (its own
    error is raised when it is read).
    """
    found: list[tuple[Path, str]] = []
    for source in sources:
        if isinstance(source, pl.LazyFrame):
            found.extend(files_of(source))
        elif isinstance(source, (list, tuple)):
            found.extend(sources_files(source))
        elif isinstance(source, (str, os.PathLike)):
            try:
                files = resolve_paths([os.fspath(source)], hive=False)
            except SourceError:
                continue
            found.extend((file.path, file.format) for file in files)
    return found


def reads_inputs(function: F) -> F:
    """Decorate a public verb: an engine error on its inputs becomes our error naming the file.

    The inputs are the verb's arguments that are paths, globs, directories or LazyFrames made
    by ``scan`` (which remembers its files).
    """

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        with translate_read_errors([*args, *kwargs.values()]):
            return function(*args, **kwargs)

    return cast(F, wrapper)


@contextmanager
def translate_read_errors(sources: Iterable[object]) -> Iterator[None]:
    """Turn an engine error raised inside the block into our error naming the broken file.

    ``sources`` are the inputs of the work in the block (LazyFrames from ``scan`` or paths).
    """
    try:
        yield
    except engine_errors() as exc:
        raise diagnose(sources_files(sources), exc) from exc
