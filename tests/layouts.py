"""A seeded generator that writes the same rows in many layouts (issue 26, metamorphic tests).

:func:`write` lays one table's rows out on disk as a drawn :class:`Layout`: a single file, many
files (named as a directory, a glob or a list), a hive dataset by one or two keys, or a
Spark-style output directory with its bookkeeping (``_SUCCESS``, ``.crc`` files, ``_temporary/``
holding rows that must not be read); each file parquet, Arrow IPC, CSV or NDJSON (one format or
a mix), string columns sometimes dictionary-encoded, rows always shuffled, and an optional
column left out of files where it holds no value. :func:`in_memory` hands the rows over as the
in-memory kinds instead. A small share of layouts is genuinely ambiguous: a file placed under a
hive directory that contradicts its own column, which every command must refuse in one line.
Text files are sometimes compressed (gzip, zstandard, bzip2; issue 39): the same rows, read
through the same resolver.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds

#: File encodings drawn: the four formats, and text compressed by each codec (issue 39).
FORMATS = ("parquet", "ipc", "csv", "ndjson", "csv.gz", "ndjson.gz", "csv.zst", "ndjson.bz2")
SUFFIX = {fmt: "." + fmt.replace("ipc", "arrow") for fmt in FORMATS}
#: Kinds of on-disk layout, and how often each is drawn.
KINDS = {"single": 2, "files": 4, "hive": 3, "spark": 2, "contradiction": 1}
#: In-memory kinds (Python API only).
MEMORY = ("DataFrame", "LazyFrame", "arrow_chunked", "arrow_dictionary", "dataset", "pandas")
#: The column an optional-column layout leaves out of files where it holds no value.
OPTIONAL = "note"


@dataclass(frozen=True)
class Layout:
    """One drawn layout of one table: what was written and how it is named."""

    kind: str
    naming: str  # directory, glob, list or file
    formats: tuple[str, ...]
    hive_keys: tuple[str, ...] = ()
    dictionary: bool = False
    dropped_optional: int = 0  # files written without the optional column

    def __str__(self) -> str:
        keys = f" by {','.join(self.hive_keys)}" if self.hive_keys else ""
        return f"{self.kind}{keys} as {self.naming} of {'+'.join(self.formats)}"


@dataclass(frozen=True)
class Written:
    """A written layout: the command-line arguments naming it, and whether it is ambiguous."""

    args: list[str]
    layout: Layout
    ambiguous: bool = False


def draw_kind(rng: np.random.Generator) -> str:
    """Draw a layout kind with the weights of :data:`KINDS`."""
    names = list(KINDS)
    weights = np.array([KINDS[n] for n in names], dtype=float)
    return str(rng.choice(names, p=weights / weights.sum()))


def write(
    frame: pl.DataFrame,
    folder: Path,
    rng: np.random.Generator,
    *,
    kind: str,
    hive_keys: Sequence[str] = (),
    text: bool = True,
) -> Written:
    """Write ``frame``'s rows into ``folder`` as a drawn layout of ``kind``.

    ``hive_keys`` are the columns a hive layout may partition by (without nulls); ``text=False``
    keeps text formats out (a table whose types text cannot carry).
    """
    folder.mkdir(parents=True)
    formats = FORMATS if text else ("parquet", "ipc")
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=int(rng.integers(2**31)))
    if kind == "single":
        fmt = str(rng.choice(formats))
        path = folder / f"table{SUFFIX[fmt]}"
        _write_file(shuffled, path, fmt, dictionary=bool(rng.random() < 0.3))
        return Written([str(path)], Layout("single", "file", (fmt,)))
    if kind in ("hive", "contradiction") and hive_keys:
        return _write_hive(shuffled, folder, rng, formats, hive_keys, kind == "contradiction")
    spark = kind == "spark"
    chunks, dropped = _chunks(shuffled, rng, n=int(rng.integers(2, 5)))
    mixed = not spark and rng.random() < 0.5
    fmt = str(rng.choice(formats))
    dictionary = bool(rng.random() < 0.3)
    used: list[str] = []
    paths = []
    for i, chunk in enumerate(chunks):
        chosen = str(rng.choice(formats)) if mixed else fmt
        name = f"part-{i:05d}-{uuid.UUID(int=int(rng.integers(2**62))).hex[:8]}"
        path = folder / f"{name}{'.c000.snappy' if spark else ''}{SUFFIX[chosen]}"
        _write_file(chunk, path, chosen, dictionary=dictionary)
        used.append(chosen)
        paths.append(path)
        if spark:
            (folder / f".{path.name}.crc").write_bytes(b"crc\x00" + bytes(rng.integers(0, 255, 8)))
    if spark:
        _spark_bookkeeping(frame, folder, fmt)
    naming = "directory" if spark else str(rng.choice(["directory", "glob", "list"]))
    if naming == "glob":
        args = [str(folder / "part-*")]
    elif naming == "list":
        args = [str(p) for p in paths]
    else:
        args = [str(folder)]
    layout = Layout(kind if spark else "files", naming, tuple(sorted(set(used))), (), dictionary)
    return Written(args, _with_dropped(layout, dropped))


def _with_dropped(layout: Layout, dropped: int) -> Layout:
    return Layout(
        layout.kind, layout.naming, layout.formats, layout.hive_keys, layout.dictionary, dropped
    )


def _chunks(
    frame: pl.DataFrame, rng: np.random.Generator, n: int
) -> tuple[list[pl.DataFrame], int]:
    """Split rows into about ``n`` files; files where the optional column is null may lack it.

    Rows with and without a value of :data:`OPTIONAL` are split separately (so some files hold
    no value of it), then the files are shuffled so which file lacks it is drawn too.
    """
    parts = [frame]
    if OPTIONAL in frame.columns and rng.random() < 0.6:
        parts = [
            frame.filter(pl.col(OPTIONAL).is_null()),
            frame.filter(pl.col(OPTIONAL).is_not_null()),
        ]
    chunks: list[pl.DataFrame] = []
    dropped = 0
    for part in parts:
        if part.height == 0:
            continue
        cuts = (
            np.sort(
                rng.choice(np.arange(1, part.height), size=min(n, part.height) - 1, replace=False)
            )
            if part.height > 1
            else np.array([], dtype=int)
        )
        bounds = [0, *cuts.tolist(), part.height]
        for lo, hi in itertools.pairwise(bounds):
            chunk = part.slice(lo, hi - lo)
            if OPTIONAL in chunk.columns and chunk[OPTIONAL].is_null().all() and rng.random() < 0.7:
                chunk = chunk.drop(OPTIONAL)
                dropped += 1
            chunks.append(chunk)
    order = rng.permutation(len(chunks))
    return [chunks[i] for i in order], dropped


def _write_hive(
    frame: pl.DataFrame,
    folder: Path,
    rng: np.random.Generator,
    formats: Sequence[str],
    hive_keys: Sequence[str],
    contradict: bool,
) -> Written:
    """Partition by one or two keys into ``key=value/`` directories, maybe keeping the column."""
    count = 2 if len(hive_keys) > 1 and rng.random() < 0.5 else 1
    keys = [str(k) for k in rng.choice(list(hive_keys), size=count, replace=False)]
    keep = contradict or bool(rng.random() < 0.5)
    fmt = str(rng.choice(formats))
    mixed = rng.random() < 0.3
    used = set()
    groups = frame.partition_by(keys, as_dict=True, maintain_order=True)
    labels = sorted(groups, key=str)
    swap = set()
    if contradict and len(labels) > 1:
        swap = {0}  # the first group is written under the second group's directory
    for index, label in enumerate(labels):
        target = labels[1] if index in swap else label
        directory = folder.joinpath(*(f"{k}={v}" for k, v in zip(keys, target, strict=True)))
        directory.mkdir(parents=True, exist_ok=True)
        rows = groups[label] if keep else groups[label].drop(keys)
        chosen = str(rng.choice(formats)) if mixed else fmt
        used.add(chosen)
        name = f"part-{index:03d}{SUFFIX[chosen]}"
        _write_file(rows, directory / name, chosen, dictionary=bool(rng.random() < 0.3))
    layout = Layout(
        "contradiction" if swap else "hive", "directory", tuple(sorted(used)), tuple(keys)
    )
    return Written([str(folder)], layout, ambiguous=bool(swap))


def _spark_bookkeeping(frame: pl.DataFrame, folder: Path, fmt: str) -> None:
    """What Spark leaves beside its part files: none of it may be read."""
    (folder / "_SUCCESS").touch()
    attempt = folder / "_temporary" / "0" / "_temporary" / "attempt_0001_m_000000_0"
    attempt.mkdir(parents=True)
    _write_file(frame.head(3), attempt / f"part-00000{SUFFIX[fmt]}", fmt, dictionary=False)
    (folder / ".DS_Store").write_bytes(b"\x00\x01junk")


def _write_file(frame: pl.DataFrame, path: Path, fmt: str, *, dictionary: bool) -> None:
    fmt, _, codec = fmt.partition(".")
    if codec:
        plain = path.with_name(f".plain-{uuid.uuid4().hex}.{fmt}")  # hidden: never read
        _write_file(frame, plain, fmt, dictionary=dictionary)
        data = plain.read_bytes()
        plain.unlink()
        if codec == "gz":
            data = gzip.compress(data, mtime=0)
        elif codec == "bz2":
            data = bz2.compress(data)
        else:
            import zstandard

            data = zstandard.ZstdCompressor().compress(data)
        path.write_bytes(data)
        return
    if dictionary and fmt in ("parquet", "ipc"):
        frame = frame.with_columns(pl.col(pl.String).cast(pl.Categorical))
    if fmt == "parquet":
        frame.write_parquet(path, row_group_size=max(1, frame.height // 2))
    elif fmt == "ipc":
        frame.write_ipc(path)
    elif fmt == "csv":
        frame.write_csv(path)
    else:
        frame.write_ndjson(path)


def in_memory(frame: pl.DataFrame, kind: str, rng: np.random.Generator) -> object:
    """Hand ``frame``'s rows (shuffled) over as one of the in-memory :data:`MEMORY` kinds."""
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=int(rng.integers(2**31)))
    if kind == "DataFrame":
        return shuffled
    if kind == "LazyFrame":
        return shuffled.lazy()
    table = shuffled.to_arrow()
    if kind == "arrow_chunked":
        cuts = sorted(int(c) for c in rng.integers(0, frame.height, size=3))
        bounds = [0, *cuts, frame.height]
        slices = [table.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)]
        return pa.concat_tables(slices)
    if kind == "arrow_dictionary":
        columns = [
            column.dictionary_encode()
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
            else column
            for column in table.columns
        ]
        return pa.table(columns, names=table.column_names)
    if kind == "dataset":
        return ds.dataset(table)
    return shuffled.to_pandas(use_pyarrow_extension_array=True)
