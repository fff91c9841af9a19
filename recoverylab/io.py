"""Reading any table source lazily through one resolver, and writing results atomically.

:func:`scan` is the one way in (ARCHITECTURE §1, principle 7): every form of input below becomes a
``pl.LazyFrame``, reading file footers, headers and (for text) a structural pass now and the data
later, so a missing, empty, corrupt, contradictory or unknown input raises :class:`SourceError`
naming the path before any query runs. The same rows give the same frame in every layout.

==================  ==========================================================================
input               what is read
==================  ==========================================================================
DataFrame,          used as given (an Arrow Table, RecordBatch or chunked table and a pandas
LazyFrame, Arrow,   frame are converted, Arrow dictionary strings to String; a pyarrow
pandas              Dataset is scanned lazily).
file                the file, in the format its suffix names (``.parquet``/``.pq``, ``.arrow``/
                    ``.ipc``/``.feather``, ``.csv``/``.tsv``, ``.ndjson``/``.jsonl``/``.json``)
                    or ``format=``; named explicitly, it is read even if its name is hidden. An
                    inspect_ai log is refused with a hint to import it.
compressed file     a text file may be compressed: ``.gz``, ``.zst`` or ``.bz2`` after the
                    format's suffix (``forks.csv.gz`` is CSV, ``runs.ndjson.zst`` NDJSON), or
                    a file without one that starts with a codec's magic bytes. It is read like
                    the plain file (same rows, same checks, same line numbers in errors); a cut
                    or damaged stream is one error naming the file, a stream that holds no
                    bytes is "empty once decompressed". Parquet and Arrow IPC are never wrapped
                    (``x.parquet.gz`` is refused: those formats compress their own pages).
                    The same rules hold for compressed files in directories, globs, lists and
                    hive datasets.
directory           every regular file below it, recursively, sorted by path; ``key=value``
                    directories are hive partitions (``hive=False`` turns them off). A
                    Spark-style output directory (``part-*`` files) is a directory like any other.
glob                the files it matches (``**`` recurses), sorted; directories it matches are not
                    read. Hive partitions only with ``hive=True`` (below the pattern's fixed
                    leading directories).
list                each path or glob in turn, concatenated; no deduplication.
==================  ==========================================================================

==================  ==========================================================================
rule                behaviour
==================  ==========================================================================
ignored             inside a directory or below a glob's fixed part: names starting with ``.``
                    or ``_`` (``_SUCCESS``, ``_temporary/``, ``_committed_*``, ``.part-0.crc``,
                    ``.DS_Store``) and ``*.crc`` checksum files. Nothing else is skipped: a
                    device, FIFO or socket in a directory is an error naming it.
symbolic links      followed; a link that cannot be followed (a loop, a missing target) or that
                    leads back to a directory it lies in is an error naming the link.
schemas             files may hold different columns, in any order: the result has every column
                    any file holds (in the order of the file with most columns, then the others
                    as first seen; hive keys no file holds last), a column absent from a file is
                    null on its rows, and each column takes the common supertype of its types
                    (Int32 and Int64 give Int64); dictionary-encoded (Categorical) strings are
                    read as String, since the encoding is storage, not meaning. Acceptance
                    never depends on how the files are named or ordered. A *required* column of a
                    contract missing from some file is an error naming that file
                    (:func:`recoverylab.schema.validate`), not a column of nulls.
text files          CSV/NDJSON types are inferred from every row of every file; a column with no
                    value in a file is typed null there, so it takes the other files' type;
                    contract text columns (``task_id``, ``condition``...) stay text (``007``).
                    An NDJSON object or array in a contract text column, or in a column whose
                    other rows hold scalars, is an error naming the file, the column and the line
                    (it would be read as its JSON text, a key nobody wrote); so are JSON values
                    nested over 100 levels (:mod:`recoverylab._json`).
hive values         typed as text for contract text columns, else integer or float when every
                    value of the key parses so, else text; ``__HIVE_DEFAULT_PARTITION__`` is
                    null. A file that also holds the column must hold exactly the directory's
                    value on every row, else an error names the file, the column and both values.
empty match         a glob matching no file: ``no file matches `PATTERN`.`` (and which
                    directories it matched, if any); a directory without data files: ```DIR` is a
                    directory with no data files.``; an empty list, a missing path, a 0-byte file:
                    one line each.
many files          binary files are grouped by schema, one scan per group; text files (up to
                    :data:`EAGER_TEXT_BYTES` in all, not in a hive dataset) are parsed once at
                    scan time, the files of one header as one text; larger text is scanned
                    lazily by header. Compressed text is decompressed once at scan time and held
                    in memory (no polars scan streams zstd or bzip2, and its gzip reader
                    decompresses into memory too); the structural check streams it. Reading N
                    small files costs time linear in N.
==================  ==========================================================================

Writers write a temporary file and rename it into place: a failed job leaves nothing at the target
path and never damages a file already there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

import polars as pl

from recoverylab._contracts import text_columns
from recoverylab._diagnose import (
    TextShape,
    check_text_file,
    record_files,
    translate_read_errors,
    verify_file,
)
from recoverylab._errors import ParameterError, SourceError
from recoverylab._formats import (
    FORMATS,
    compression_of_path,
    format_of_path,
    read_decompressed,
    strip_compression,
)
from recoverylab._order import stable_order
from recoverylab._outputs import OutputSet, atomic_file, remove_stale_temporaries
from recoverylab._resolve import InputFile, resolve_paths

__all__ = [
    "FORMATS",
    "WRITE_FORMATS",
    "InputFile",
    "OutputSet",
    "Source",
    "atomic_file",
    "expand_paths",
    "format_of_path",
    "output_format",
    "remove_stale_temporaries",
    "resolve_paths",
    "scan",
    "translate_read_errors",
    "write_parquet",
    "write_table",
    "write_to",
]

_PARQUET_MAGIC = b"PAR1"
#: Bytes of text files held in memory once read (beyond it, text files are scanned lazily).
EAGER_TEXT_BYTES = 256 * 2**20
#: The column naming each row's file while hive values are joined on (dropped after).
_FILE = "__recoverylab_file__"

Source = Any  # a path, a glob, a list of them, or an in-memory table (see ``scan``)


def scan(
    source: Source,
    *,
    format: str | None = None,
    hive: bool | None = None,
    verify: bool = False,
) -> pl.LazyFrame:
    """Return any table source as a LazyFrame, reading only metadata now.

    The rules (what is read and ignored, how schemas unify, how hive values and file columns
    reconcile, what an empty match is) are the tables of this module's documentation.

    Parameters
    ----------
    source
        A path (str or Path) to a file or directory, a glob such as ``"runs/*.parquet"``, a list
        of paths/globs (rows are concatenated; columns are aligned by name and widened), a polars
        DataFrame or LazyFrame, a pyarrow Table, RecordBatch or Dataset, or a pandas DataFrame.
    format
        ``"parquet"``, ``"ipc"``, ``"csv"`` or ``"ndjson"``; by default taken from each file's
        suffix.
    hive
        Read ``key=value`` directory names as columns; by default on for directories, off for
        globs.
    verify
        Decode every binary file now, checking parquet page checksums where the writer stored
        them, so a damaged data page is an error here rather than a wrong value later (costs one
        full read). Text files (CSV, NDJSON) are always checked row by row.

    Returns
    -------
    pl.LazyFrame
        Nothing is read beyond file footers and headers until the caller collects, but for text
        files, which are checked (and, when small, parsed) now.

    Raises
    ------
    SourceError
        A path that matches nothing, an empty file, a file whose footer or header is not of
        its format, an unknown suffix, files whose columns cannot be combined, or a hive value
        that contradicts the file's own column.

    Examples
    --------
    >>> import polars as pl
    >>> scan(pl.DataFrame({"a": [1, 2]})).collect().height
    2
    """
    if isinstance(source, pl.LazyFrame):
        return source
    if isinstance(source, pl.DataFrame):
        return source.lazy()
    in_memory = _scan_in_memory(source)
    if in_memory is not None:
        return in_memory
    sources = path_list(source)
    if sources is None:
        raise SourceError(
            "cannot read a table from an empty list of paths; give at least one path."
            if isinstance(source, Sequence) and not source
            else f"cannot read a table from a {type(source).__name__}; give a path, a glob, a "
            "list of paths, or a polars, pyarrow or pandas table."
        )
    files = resolve_paths(sources, format=format, hive=hive)
    frame, columns = _read(files)
    if verify:
        for file in files:
            if file.format in ("parquet", "ipc"):
                verify_file(file.path, file.format)
    return record_files(frame, [(f.path, f.format) for f in files], columns)


def path_list(source: object) -> list[str] | None:
    """Return a path or a non-empty list of paths as a list of strings; anything else: None."""
    if isinstance(source, (str, os.PathLike)):
        return [os.fspath(source)]
    if (
        isinstance(source, Sequence)
        and source
        and all(isinstance(s, (str, os.PathLike)) for s in source)
    ):
        return [os.fspath(s) for s in source]
    return None


def expand_paths(sources: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Return the files that paths, directories and globs name, in reading order.

    Raises
    ------
    SourceError
        A glob that matches nothing or a path that does not exist.
    """
    return [file.path for file in resolve_paths([os.fspath(s) for s in sources])]


def _scan_in_memory(source: object) -> pl.LazyFrame | None:
    module = type(source).__module__.split(".")[0]
    if module == "pyarrow":
        import pyarrow as pa
        import pyarrow.dataset as ds

        if isinstance(source, ds.Dataset):
            frame = pl.scan_pyarrow_dataset(source)
        elif isinstance(source, (pa.Table, pa.RecordBatch)):
            frame = pl.from_arrow(source).lazy()  # type: ignore[union-attr]
        else:
            return None
        # Arrow dictionary arrays are an encoding of strings, read as String like files' are.
        return frame.with_columns(pl.col(pl.Categorical).cast(pl.String))
    if module == "pandas":
        return pl.from_pandas(source).lazy()
    return None


def _check_file(path: Path, fmt: str) -> None:
    """Fail early, naming the path, on an empty file or a damaged footer/header."""
    size = path.stat().st_size
    if size == 0:
        raise SourceError(f"`{path}` is empty (0 bytes); it holds no table.")
    if fmt == "parquet":
        with path.open("rb") as handle:
            head = handle.read(4)
            handle.seek(max(size - 4, 0))
            tail = handle.read(4)
        if head != _PARQUET_MAGIC or tail != _PARQUET_MAGIC or size < 12:
            raise SourceError(
                f"`{path}` is not a readable parquet file (its header or footer is damaged)."
            )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@dataclass
class _Group:
    """Files of one format and one layout of columns, read by one scan (or held in memory)."""

    format: str
    separator: str
    schema: pl.Schema  # the columns as the files hold them (text: as inferred per file)
    files: list[InputFile]
    data: pl.DataFrame | None = None  # small text files: their rows, read at scan time
    tag: str | None = None  # the one file of held rows read in a hive dataset (joins its values)


def _file_schema(file: InputFile) -> tuple[pl.Schema, str]:
    """Return a file's columns (text files: inferred, empty columns null) and its separator."""
    path, fmt = file.path, file.format
    separator = _separator(path)
    try:
        if fmt == "parquet":
            return pl.read_parquet_schema(path), separator  # type: ignore[return-value]
        if fmt == "ipc":
            return pl.read_ipc_schema(path), separator  # type: ignore[return-value]
    except (pl.exceptions.PolarsError, OSError) as exc:
        kind = "parquet" if fmt == "parquet" else "Arrow IPC"
        raise SourceError(f"`{path}` is not a readable {kind} file ({_first_line(exc)}).") from exc
    empty = check_text_file(path, fmt, separator).empty
    try:
        schema = _text_scan(path, fmt, separator, None).collect_schema()
    except pl.exceptions.PolarsError as exc:
        raise SourceError(f"`{path}` cannot be read as {fmt} ({_first_line(exc)}).") from None
    return pl.Schema({n: pl.Null() if n in empty else d for n, d in schema.items()}), separator


def _held_in_memory(file: InputFile, budget: int, compressed: bool) -> bool:
    """Whether a text file is read now, with the others of its header, rather than scanned.

    Text is parsed whole at scan time anyway (the structural check); holding small files'
    rows saves opening every file again on every later query, which made many small files
    cost far more than their rows. Hive files keep the per-file scan (their rows are tagged
    with their file), as does plain text beyond the budget. Compressed text is always held:
    no polars scan reads zstd or bz2, and its gzip reader decompresses into memory anyway, so
    the bytes are decompressed once (by :func:`recoverylab._formats.read_decompressed`) and
    parsed from memory (a compressed file of a hive dataset on its own, tagged with its file).
    """
    if file.format not in ("csv", "ndjson"):
        return False
    return compressed or (not file.hive and file.path.stat().st_size <= budget)


def _read_together(
    fmt: str,
    separator: str,
    members: list[tuple[InputFile, TextShape]],
    texts: dict[Path, bytes],
) -> pl.DataFrame:
    """Parse text files of one header as one text: their bytes joined, headers but the first cut.

    Types are inferred from every row of every file, so a column empty in one file takes the
    type of the others; a CSV column empty in every file is typed null. ``texts`` holds the
    decompressed bytes of compressed members.
    """
    buffer = bytearray()
    for index, (file, _) in enumerate(members):
        data = texts[file.path] if file.path in texts else file.path.read_bytes()
        data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark is not text
        if b"\n" not in data:  # a line break of "\r" alone: rows would run together
            raise SourceError(
                f"`{file.path}` ends its lines with a carriage return alone; recoverylab reads "
                "lines that end in a line feed (\\n or \\r\\n). Hint: convert the line endings."
            )
        if fmt == "csv" and index:
            data = data[data.find(b"\n") + 1 :]
        buffer += data
        if not buffer.endswith(b"\n"):
            buffer += b"\n"
    try:
        if fmt == "csv":
            frame = pl.read_csv(
                bytes(buffer),
                separator=separator,
                infer_schema_length=None,
                schema_overrides=text_columns(),
            )
        else:
            frame = pl.read_ndjson(bytes(buffer), infer_schema_length=None)
    except pl.exceptions.PolarsError as exc:
        # Name the file that cannot be read on its own.
        unreadable = (f.path for f, _ in members if not _readable(f.path, fmt, separator))
        culprit = next(unreadable, members[0][0].path)
        hint = " Hint: save the file as UTF-8." if "utf-8" in str(exc).lower() else ""
        raise SourceError(
            f"`{culprit}` cannot be read as {fmt} ({_first_line(exc)}).{hint}"
        ) from None
    empty = frozenset.intersection(*(shape.empty for _, shape in members))
    if empty:
        frame = frame.with_columns(pl.lit(None).alias(name) for name in empty)  # typed null
    return frame


def _decompressed(path: Path) -> bytes:
    """Return a compressed text file's bytes, decompressed; refuse a stream holding none."""
    data = read_decompressed(path)
    if not data:
        raise SourceError(f"`{path}` is empty once decompressed; it holds no table.")
    return data


def _readable(path: Path, fmt: str, separator: str) -> bool:
    try:
        _text_frame(path, fmt, separator).collect()
    except pl.exceptions.PolarsError:
        return False
    return True


def _separator(path: Path) -> str:
    return "\t" if strip_compression(path).suffix.lower() == ".tsv" else ","


def _text_frame(path: Path, fmt: str, separator: str) -> pl.LazyFrame:
    """One text file as a frame with inferred types; a compressed one parsed from memory."""
    if compression_of_path(path) is None:
        return _text_scan(path, fmt, separator, None)
    data = read_decompressed(path)
    if fmt == "csv":
        return pl.read_csv(
            data, separator=separator, infer_schema_length=None, schema_overrides=text_columns()
        ).lazy()
    return pl.read_ndjson(data, infer_schema_length=None).lazy()


def _text_scan(
    path: Path | list[Path], fmt: str, separator: str, schema: pl.Schema | None
) -> pl.LazyFrame:
    """Scan text files: types inferred from every row unless given; contract text stays text."""
    sources = [str(p) for p in path] if isinstance(path, list) else str(path)
    extra: dict[str, Any] = {"include_file_paths": _FILE} if isinstance(path, list) else {}
    if fmt == "csv":
        if schema is not None:
            return pl.scan_csv(sources, separator=separator, schema=schema, glob=False, **extra)
        return pl.scan_csv(
            sources,
            separator=separator,
            infer_schema_length=None,
            schema_overrides=text_columns(),
            glob=False,
        )
    if schema is not None:
        return pl.scan_ndjson(sources, schema=schema, **extra)
    return pl.scan_ndjson(sources, infer_schema_length=None)  # JSON strings are already text


def _read(files: list[InputFile]) -> tuple[pl.LazyFrame, list[tuple[Path, frozenset[str]]]]:
    """Read resolved files as one frame: one scan per group, schemas unified, hive joined."""
    groups: dict[tuple[object, ...], _Group] = {}
    schemas: dict[Path, pl.Schema] = {}
    small: dict[tuple[str, str, tuple[str, ...], str], list[tuple[InputFile, TextShape]]] = {}
    texts: dict[Path, bytes] = {}  # compressed text files: their decompressed bytes
    budget = EAGER_TEXT_BYTES
    for file in files:
        _check_file(file.path, file.format)
        separator = _separator(file.path)
        compressed = file.format in ("csv", "ndjson") and compression_of_path(file.path) is not None
        if _held_in_memory(file, budget, compressed):  # read now, with the others of its header
            if compressed:
                texts[file.path] = _decompressed(file.path)
            else:
                budget -= file.path.stat().st_size
            shape = check_text_file(file.path, file.format, separator, texts.get(file.path))
            header = shape.columns if file.format == "csv" else ()
            tag = str(file.path) if file.hive else ""
            small.setdefault((file.format, separator, header, tag), []).append((file, shape))
            continue
        schemas[file.path] = _join_scan_group(file, groups)
    for key, members in small.items():
        data = _read_together(key[0], key[1], members, texts)
        for file, shape in members:
            # The file's own columns, as the joined text typed them (names polars changed,
            # such as a repeated header name, fall back to every column of the group).
            names = shape.columns if set(shape.columns) <= set(data.schema) else data.columns
            schemas[file.path] = pl.Schema({name: data.schema[name] for name in names})
        group_files = [file for file, _ in members]
        groups[("memory", key)] = _Group(
            key[0], key[1], data.schema, group_files, data, key[3] or None
        )
    unified = _unify(files, schemas)
    hive = _hive_table(files, schemas, unified)
    frames = [_scan_group(group, unified) for group in groups.values()]
    frame = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
    if hive is not None:
        frame = _join_hive(frame, hive, unified)
    frame = frame.select([*unified, *(c for c in _hive_keys(files) if c not in unified)])
    columns = [(f.path, frozenset(schemas[f.path]) | {k for k, _ in f.hive}) for f in files]
    return frame, columns


def _join_scan_group(file: InputFile, groups: dict[tuple[object, ...], _Group]) -> pl.Schema:
    """Add a file to the scan group of its layout; return its schema.

    Binary files of one exact schema share a scan; text files are read with the unified types,
    so one header (CSV, by position) or one set of names (NDJSON) is enough.
    """
    schema, separator = _file_schema(file)
    layout: tuple[object, ...] = (file.format, separator, tuple(schema.items()))
    if file.format == "csv":
        layout = (file.format, separator, tuple(schema))
    elif file.format == "ndjson":
        layout = (file.format, separator, tuple(sorted(schema)))
    group = groups.setdefault(layout, _Group(file.format, separator, pl.Schema(), []))
    group.schema = pl.Schema({**schema, **group.schema})
    group.files.append(file)
    return schema


def _unify(files: list[InputFile], schemas: dict[Path, pl.Schema]) -> pl.Schema:
    """Every column any file holds, in first-seen order, each at the supertype of its types."""
    distinct: dict[tuple[object, ...], Path] = {}
    for file in files:
        distinct.setdefault(tuple(schemas[file.path].items()), file.path)
    empties = [pl.DataFrame(schema=schemas[path]) for path in distinct.values()]
    try:
        types = pl.concat(empties, how="diagonal_relaxed").schema
    except pl.exceptions.PolarsError:
        _raise_incompatible(list(distinct.values()), schemas)
    # The order of the widest file (the first of them), then columns only other files hold:
    # which file lacks an optional column does not change the order.
    # Dictionary encoding is how a file stores strings, not what they mean: read them as String.
    types = pl.Schema(
        {n: pl.String() if d in (pl.Categorical, pl.Enum) else d for n, d in types.items()}
    )
    widest = max(distinct.values(), key=lambda path: len(schemas[path]))
    order = [*schemas[widest], *(name for name in types if name not in schemas[widest])]
    return pl.Schema({name: types[name] for name in order})


def _raise_incompatible(paths: list[Path], schemas: dict[Path, pl.Schema]) -> NoReturn:
    """Raise the error naming two files whose types of one column have no common supertype."""
    seen: dict[str, tuple[pl.DataType, Path]] = {}
    for path in paths:
        for name, dtype in schemas[path].items():
            if name in seen and seen[name][0] != dtype and dtype != pl.Null:
                first_type, first_path = seen[name]
                try:
                    pl.concat(
                        [
                            pl.DataFrame(schema={name: first_type}),
                            pl.DataFrame(schema={name: dtype}),
                        ],
                        how="vertical_relaxed",
                    )
                except pl.exceptions.PolarsError:
                    raise SourceError(
                        f"`{path}` has column `{name}` as {dtype} where `{first_path}` has it as "
                        f"{first_type}; the files' columns cannot be combined."
                    ) from None
            seen.setdefault(name, (dtype, path))
    raise SourceError("the input files' columns cannot be combined.")  # pragma: no cover


def _scan_group(group: _Group, unified: pl.Schema) -> pl.LazyFrame:
    """One scan of a group's files, cast to the unified types, missing columns as nulls."""
    paths = [f.path for f in group.files]
    if group.data is not None:
        frame = group.data.lazy().with_columns(pl.lit(group.tag, pl.String).alias(_FILE))
    elif group.format in ("csv", "ndjson"):
        read = pl.Schema(
            {n: pl.String() if unified[n] == pl.Null else unified[n] for n in group.schema}
        )
        frame = _text_scan(paths, group.format, group.separator, read)
    elif group.format == "parquet":
        frame = pl.scan_parquet(
            paths, hive_partitioning=False, glob=False, include_file_paths=_FILE
        )
    else:
        frame = pl.scan_ipc(paths, hive_partitioning=False, glob=False, include_file_paths=_FILE)
    return frame.select(
        pl.col(_FILE),
        *(
            pl.col(name).cast(dtype) if name in group.schema else pl.lit(None, dtype).alias(name)
            for name, dtype in unified.items()
        ),
    )


def _hive_keys(files: list[InputFile]) -> list[str]:
    keys: list[str] = []
    for file in files:
        keys.extend(k for k, _ in file.hive if k not in keys)
    return keys


def _hive_table(
    files: list[InputFile], schemas: dict[Path, pl.Schema], unified: pl.Schema
) -> pl.DataFrame | None:
    """One row per file with its typed hive values; checks them against the file's columns."""
    keys = _hive_keys(files)
    if not keys:
        return None
    raw = pl.DataFrame(
        {
            _FILE: [str(f.path) for f in files],
            **{k: [dict(f.hive).get(k) for f in files] for k in keys},
        },
        schema={_FILE: pl.String, **dict.fromkeys(keys, pl.String)},
    )
    typed = raw.select(_FILE, *(_hive_type(raw[k], unified.get(k)) for k in keys))
    for row, file in enumerate(files):
        for key, value in file.hive:
            if key in schemas[file.path]:
                _reconcile(file, key, value, typed[key][row], unified[key])
    return typed


def _hive_type(values: pl.Series, file_type: pl.DataType | None) -> pl.Series:
    """Type a hive key's values: as the files' column, text for contract text, else inferred."""
    name = str(values.name)
    if file_type is not None and file_type != pl.Null:
        try:
            return values.cast(file_type, strict=True)
        except pl.exceptions.PolarsError:
            return values
    if name in text_columns():
        return values
    for dtype in (pl.Int64, pl.Float64):
        parsed = values.cast(dtype, strict=False)
        if parsed.null_count() == values.null_count():  # every value parses
            return parsed
    return values


def _reconcile(
    file: InputFile, key: str, raw: str | None, value: object, dtype: pl.DataType
) -> None:
    """Raise unless every row of ``file`` holds the value its ``key=raw`` directory names."""
    if file.format in ("csv", "ndjson"):
        frame = _text_frame(file.path, file.format, _separator(file.path))
    elif file.format == "parquet":
        frame = pl.scan_parquet(file.path, hive_partitioning=False, glob=False)
    else:
        frame = pl.scan_ipc(file.path, hive_partitioning=False, glob=False)
    found = frame.select(pl.col(key).cast(dtype, strict=False).unique()).collect()[key]
    expected = pl.Series([value], dtype=found.dtype, strict=False)
    different = found.filter(
        found.ne_missing(expected[0]) if expected[0] is not None else found.is_not_null()
    )
    if different.len():
        raise SourceError(
            f"`{file.path}` has column `{key}` = {different[0]!r} where its directory "
            f"`{key}={raw if raw is not None else '__HIVE_DEFAULT_PARTITION__'}` says {raw!r}; "
            "a partition directory and the file's own column must agree. Hint: move the file "
            "to the directory of its value, or drop the column from the file."
        )


def _join_hive(frame: pl.LazyFrame, hive: pl.DataFrame, unified: pl.Schema) -> pl.LazyFrame:
    """Attach each file's hive values; a file without a key keeps its own column's values."""
    renamed = hive.rename({k: f"__hive__{k}" for k in hive.columns if k != _FILE})
    joined = frame.join(renamed.lazy(), on=_FILE, how="left")
    keys = [k for k in hive.columns if k != _FILE]
    return joined.with_columns(
        (
            pl.coalesce(pl.col(f"__hive__{k}"), pl.col(k).cast(hive.schema[k], strict=False))
            if k in unified
            else pl.col(f"__hive__{k}")
        ).alias(k)
        for k in keys
    )


def write_parquet(frame: pl.DataFrame | pl.LazyFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``frame`` to ``path`` as parquet atomically (temporary file, then rename).

    A LazyFrame is streamed to disk without collecting it. If anything fails, the temporary file
    is removed, nothing is left at ``path`` and a file already at ``path`` is unchanged.

    Parameters
    ----------
    frame
        The result to write.
    path
        Target file; its directory is created if needed.

    Returns
    -------
    Path
        The written path.

    Examples
    --------
    >>> import polars as pl, tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.parquet"
    >>> write_parquet(pl.DataFrame({"a": [1]}), target).name
    'out.parquet'
    """
    with atomic_file(path) as out:
        write_to(frame, out, "parquet")
    return Path(path)


#: Output suffix -> format written: those read, but ``.tsv``, and ``.json`` as one JSON document.
WRITE_FORMATS = {**{s: f for s, f in FORMATS.items() if s != ".tsv"}, ".json": "json"}


def output_format(path: str | os.PathLike[str]) -> str:
    """Return the format an output path's suffix names (parquet, ipc, csv, ndjson, json).

    A path without a suffix is written as parquet.

    Raises
    ------
    ParameterError
        A suffix recoverylab does not write, so a ``.txt`` never silently holds parquet bytes.
    """
    suffix = Path(path).suffix.lower()
    if not suffix:
        return "parquet"  # the default format (ARCHITECTURE §5)
    try:
        return WRITE_FORMATS[suffix]
    except KeyError:
        known = ", ".join(sorted(WRITE_FORMATS))
        raise ParameterError(
            f"output `{path}` has the suffix {suffix!r}; recoverylab writes {known}."
        ) from None


#: Rows per row group of a parquet output. Streamed without a fixed size, the groups follow the
#: morsels of the query, which depend on the thread count: the same rows, other bytes.
PARQUET_ROW_GROUP = 100_000


def write_to(
    frame: pl.DataFrame | pl.LazyFrame,
    out: BinaryIO,
    fmt: str,
    *,
    target: object = "output",
    unique_key: Sequence[str] = (),
) -> None:
    """Write ``frame`` to an open binary handle in format ``fmt`` (flat LazyFrames stream).

    Rows are written in one deterministic order, sorted by every column left to right (see
    :mod:`recoverylab._order`), so the same result gives the same bytes whatever the thread
    count, the order of the input rows or the number of input files. Parquet row groups hold
    :data:`PARQUET_ROW_GROUP` rows. A lazy table streams to parquet unless it has nested (list,
    struct) columns: the pages of those follow the query's morsels, so such a table is collected
    into one chunk first (it costs the memory of the table; the sort held it anyway).
    ``unique_key``: leading columns no two rows share (:func:`recoverylab._order.stable_order`).

    Raises
    ------
    ParameterError
        CSV asked for a table with nested (list or struct) columns, which CSV cannot hold.
    """
    nested = [name for name, dtype in frame.collect_schema().items() if dtype.is_nested()]
    if fmt == "csv" and nested:
        raise ParameterError(
            f"`{target}` is CSV, which cannot hold the nested column `{nested[0]}`; write "
            ".parquet, .arrow, .ndjson or .json instead."
        )
    frame = stable_order(frame, unique_key=unique_key)
    if isinstance(frame, pl.LazyFrame):
        if fmt == "parquet" and not nested:
            frame.sink_parquet(out, row_group_size=PARQUET_ROW_GROUP)
            return
        frame = frame.collect(engine="streaming")
    frame = frame.rechunk()  # one chunk: IPC record batches must not follow the thread count
    if fmt == "json":
        out.write(frame.write_json().encode())
    elif fmt == "ipc":  # plain Arrow strings: string views keep buffer layouts of the input files
        frame.write_ipc(out, compat_level=pl.CompatLevel.oldest())
    elif fmt == "parquet":
        frame.write_parquet(out, row_group_size=PARQUET_ROW_GROUP)
    else:  # write_csv, write_ndjson
        getattr(frame, f"write_{fmt}")(out)


def write_table(frame: pl.DataFrame | pl.LazyFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``frame`` atomically in the format ``path``'s suffix names (see :data:`WRITE_FORMATS`).

    Raises
    ------
    ParameterError
        An unknown suffix.
    """
    fmt = output_format(path)
    with atomic_file(path) as out:
        write_to(frame, out, fmt, target=path)
    return Path(path)
