"""Reading any table source lazily, and writing results atomically.

:func:`scan` turns every input form of ARCHITECTURE §1 into a ``pl.LazyFrame``, reading footers and
headers now and data later, so a missing, empty, corrupt or unknown file raises :class:`SourceError`
naming the path before any query runs. Writers write a temporary file and rename it into place: a
failed job leaves nothing at the target path and never damages a file already there.
"""

from __future__ import annotations

import glob as _glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from recoverylab._diagnose import (
    check_text_file,
    record_files,
    translate_read_errors,
    verify_file,
)
from recoverylab._errors import ParameterError, SourceError
from recoverylab._order import stable_order
from recoverylab._outputs import OutputSet, atomic_file, remove_stale_temporaries
from recoverylab.adapters._detect import inspect_log_hint, looks_like_inspect_log

__all__ = [
    "FORMATS",
    "WRITE_FORMATS",
    "OutputSet",
    "Source",
    "atomic_file",
    "expand_paths",
    "format_of_path",
    "output_format",
    "remove_stale_temporaries",
    "scan",
    "translate_read_errors",
    "write_parquet",
    "write_table",
    "write_to",
]

#: File suffix -> format name.
FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "ipc",
    ".ipc": "ipc",
    ".feather": "ipc",
    ".csv": "csv",
    ".tsv": "csv",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".json": "ndjson",
}

_PARQUET_MAGIC = b"PAR1"

Source = Any  # a path, a glob, a list of them, or an in-memory table (see ``scan``)


def scan(
    source: Source,
    *,
    format: str | None = None,
    hive: bool | None = None,
    verify: bool = False,
) -> pl.LazyFrame:
    """Return any table source as a LazyFrame, reading only metadata now.

    Parameters
    ----------
    source
        A path (str or Path) to a file or directory, a glob such as ``"runs/*.parquet"``, a list
        of paths/globs (rows are concatenated; columns are aligned by name and widened), a polars
        DataFrame or LazyFrame, a pyarrow Table, RecordBatch or Dataset, or a pandas DataFrame.
    format
        ``"parquet"``, ``"ipc"``, ``"csv"`` or ``"ndjson"``; by default taken from the suffix
        (a directory is read as a parquet dataset).
    hive
        Read ``key=value`` directory names as columns; by default on for directories.
    verify
        Decode every binary file now, checking parquet page checksums where the writer stored
        them, so a damaged data page is an error here rather than a wrong value later (costs one
        full read). Text files (CSV, NDJSON) are always checked row by row.

    Returns
    -------
    pl.LazyFrame
        Nothing is read beyond file footers and headers until the caller collects.

    Raises
    ------
    SourceError
        A path that matches nothing, an empty file, a file whose footer or header is not of
        its format, or an unknown suffix.

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
    directories = [Path(s) for s in sources if Path(s).is_dir()]
    files = expand_paths([s for s in sources if not Path(s).is_dir()])
    # Files of one format and schema become one scan: polars then reads them in parallel with
    # one streaming pipeline (one scan per file, concatenated, costs several times the memory).
    read: list[tuple[Path, str]] = []
    frames = [_scan_directory(d, format, hive, read) for d in directories]
    frames.extend(_scan_files(files, format, read))  # no files: no frames
    frame = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
    if verify:
        for path, fmt in read:
            if fmt in ("parquet", "ipc"):
                verify_file(path, fmt)
    return record_files(frame, read)


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
    """Expand globs and check that every path exists, keeping the given order.

    Raises
    ------
    SourceError
        A glob that matches nothing or a path that does not exist.
    """
    paths: list[Path] = []
    for entry in sources:
        text = os.fspath(entry)
        if _glob.has_magic(text):
            matches = sorted(_glob.glob(text, recursive=True))
            if not matches:
                raise SourceError(f"no file matches `{text}`.")
            paths.extend(Path(m) for m in matches if not Path(m).is_dir())
        elif Path(text).exists():
            paths.append(Path(text))
        else:
            raise SourceError(f"`{text}` does not exist.")
    return paths


def _scan_in_memory(source: object) -> pl.LazyFrame | None:
    module = type(source).__module__.split(".")[0]
    if module == "pyarrow":
        import pyarrow as pa
        import pyarrow.dataset as ds

        if isinstance(source, ds.Dataset):
            return pl.scan_pyarrow_dataset(source)
        if isinstance(source, (pa.Table, pa.RecordBatch)):
            return pl.from_arrow(source).lazy()  # type: ignore[union-attr]
        return None
    if module == "pandas":
        return pl.from_pandas(source).lazy()
    return None


def format_of_path(path: Path, format: str | None = None) -> str:
    """Return the format of ``path``: ``format`` if given (checked), else its suffix's.

    Raises
    ------
    ParameterError
        An unknown ``format``.
    SourceError
        An unknown suffix (with a hint to name the format).
    """
    if format is not None:
        if format not in set(FORMATS.values()):
            allowed = ", ".join(sorted(set(FORMATS.values())))
            raise ParameterError(f"parameter `format` is {format!r}; it must be one of {allowed}.")
        return format
    if looks_like_inspect_log(path):  # an evaluation log is not a table (issue 15)
        raise SourceError(inspect_log_hint(path))
    suffix = path.suffix.lower()
    if suffix == ".gz" and len(path.suffixes) > 1:
        suffix = path.suffixes[-2].lower()
    try:
        return FORMATS[suffix]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise SourceError(
            f"`{path}` has an unknown suffix {path.suffix!r}; recoverylab reads {known}. "
            "Hint: name the format to read it anyway (`format=` in Python, `--input-format` on "
            "the command line)."
        ) from None


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
    if fmt in ("parquet", "ipc"):
        kind = "parquet" if fmt == "parquet" else "Arrow IPC"
        read_schema = pl.read_parquet_schema if fmt == "parquet" else pl.read_ipc_schema
        try:
            read_schema(path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise SourceError(
                f"`{path}` is not a readable {kind} file ({_first_line(exc)})."
            ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _scan_files(
    paths: list[Path], format: str | None, read: list[tuple[Path, str]]
) -> list[pl.LazyFrame]:
    by_format: dict[str, list[Path]] = {}
    for path in paths:
        fmt = format_of_path(path, format)
        _check_file(path, fmt)
        by_format.setdefault(fmt, []).append(path)
        read.append((path, fmt))
    frames = []
    for fmt, group in by_format.items():
        if fmt == "parquet" and _same_schema(group):
            frames.append(pl.scan_parquet(group))
        else:
            frames.extend(_scan_one(p, fmt) for p in group)
    return frames


def _same_schema(paths: list[Path]) -> bool:
    first = pl.read_parquet_schema(paths[0])
    return all(pl.read_parquet_schema(p) == first for p in paths[1:])


def _text_columns() -> dict[str, pl.DataType]:
    """Contract columns that hold text: read from CSV as strings, so ``007`` stays ``007``."""
    from recoverylab.schema import SPECS

    return {
        column.name: pl.String()
        for contract in SPECS.values()
        for column in contract.columns
        if column.kind == "str"
    }


def _scan_one(path: Path, fmt: str) -> pl.LazyFrame:
    if fmt == "parquet":
        return pl.scan_parquet(path)
    if fmt == "ipc":
        return pl.scan_ipc(path)
    separator = "\t" if path.suffix.lower() == ".tsv" else ","
    check_text_file(path, fmt, separator)
    # Types are inferred from every row (a value late in the file never fails a later query),
    # and text columns of the contracts stay text whatever they look like.
    try:
        if fmt == "csv":
            frame = pl.scan_csv(
                path,
                separator=separator,
                infer_schema_length=None,
                schema_overrides=_text_columns(),
            )
        else:
            frame = pl.scan_ndjson(path, infer_schema_length=None)
        frame.collect_schema()
    except pl.exceptions.PolarsError as exc:
        raise SourceError(f"`{path}` cannot be read as {fmt} ({_first_line(exc)}).") from None
    return frame


def _scan_directory(
    directory: Path, format: str | None, hive: bool | None, read: list[tuple[Path, str]]
) -> pl.LazyFrame:
    files = sorted(
        p
        for p in directory.rglob("*")
        if p.is_file()
        and not any(part.startswith((".", "_")) for part in p.relative_to(directory).parts)
    )
    if not files:
        raise SourceError(f"`{directory}` is a directory with no data files.")
    fmt = format or format_of_path(files[0], None)
    for path in files:
        read.append((path, format_of_path(path, format)))
        _check_file(*read[-1])
    if fmt != "parquet":
        return pl.concat([_scan_one(p, fmt) for p in files], how="diagonal_relaxed")
    _check_dataset_schema(directory, files)
    try:
        return pl.scan_parquet(directory, hive_partitioning=True if hive is None else hive)
    except pl.exceptions.PolarsError as exc:
        raise SourceError(
            f"`{directory}` is not a readable parquet dataset ({_first_line(exc)})."
        ) from exc


def _check_dataset_schema(directory: Path, files: list[Path]) -> None:
    """Refuse a parquet dataset whose files disagree on their columns or types."""
    first = pl.read_parquet_schema(files[0])
    for path in files[1:]:
        other = pl.read_parquet_schema(path)
        if other == first:
            continue
        missing = [c for c in first if c not in other]
        extra = [c for c in other if c not in first]
        retyped = [c for c in first if c in other and first[c] != other[c]]
        if missing:
            problem = f"lacks column `{missing[0]}`"
        elif extra:
            problem = f"has an extra column `{extra[0]}`"
        else:
            name = retyped[0]
            problem = f"has column `{name}` as {other[name]} where it is {first[name]}"
        raise SourceError(
            f"`{path}` {problem} compared with `{files[0]}`; the files of dataset `{directory}` "
            "must share one schema."
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


def write_to(
    frame: pl.DataFrame | pl.LazyFrame, out: BinaryIO, fmt: str, *, target: object = "output"
) -> None:
    """Write ``frame`` to an open binary handle in format ``fmt`` (LazyFrames stream to parquet).

    Rows are written in one deterministic order, sorted by every column left to right (see
    :mod:`recoverylab._order`), so the same result gives the same bytes whatever the thread
    count, the order of the input rows or the number of input files.

    Raises
    ------
    ParameterError
        CSV asked for a table with nested (list or struct) columns, which CSV cannot hold.
    """
    if fmt == "csv":
        nested = [name for name, dtype in frame.collect_schema().items() if dtype.is_nested()]
        if nested:
            raise ParameterError(
                f"`{target}` is CSV, which cannot hold the nested column `{nested[0]}`; write "
                ".parquet, .arrow, .ndjson or .json instead."
            )
    frame = stable_order(frame)
    if isinstance(frame, pl.LazyFrame):
        if fmt == "parquet":
            frame.sink_parquet(out)
            return
        frame = frame.collect(engine="streaming")
    frame = frame.rechunk()  # one chunk: IPC record batches must not follow the thread count
    if fmt == "json":
        out.write(frame.write_json().encode())
    elif fmt == "ipc":  # plain Arrow strings: string views keep buffer layouts of the input files
        frame.write_ipc(out, compat_level=pl.CompatLevel.oldest())
    else:  # write_parquet, write_csv, write_ndjson
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
