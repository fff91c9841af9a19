"""Table sources as Spark DataFrames, read by the rules of :mod:`recoverylab.io` (internal).

ARCHITECTURE §1.7 (one way in). Spark's own readers differ from recoverylab's resolver in ways
that change results without a word: CSV schema inference turns the task ids ``007`` and ``7``
into one integer, partition discovery types ``key=value`` directories by its own rules (and
finds them below globs the resolver reads without hive columns), a directory's parquet files
take the first file's schema, a ragged CSV row is filled with nulls, and a ``*.crc`` file that
does not start with ``.`` is read as data. So every path goes through :func:`recoverylab.io.scan`
first: the same files are named, checked and typed as on the polars engine, and the same
:class:`~recoverylab._errors.SourceError` is raised for a source that breaks a rule.

Spark then reads the files itself only where that gives exactly the resolved table: every file
parquet, all of one schema (that of the resolved table less its hive columns), no file holding a
column named like a hive key. Each directory is read with its own ``basePath`` (so Spark
discovers no partition), and the hive values are added as literals typed as the resolver typed
them. Anything else (text files, Arrow IPC, files whose schemas differ, files that hold their
hive key, more than :data:`MAX_DIRECTORIES` directories, files with a Hadoop checksum beside them
as local Spark outputs have, files Spark fails to open although the resolver read them,
in-memory tables) is read by the resolver on the driver and shipped to Spark as Arrow.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import polars.selectors as cs

from recoverylab.engines._spark_uris import is_uri, read_uris
from recoverylab.io import InputFile, path_list, resolve_paths, scan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkFrame
    from pyspark.sql import SparkSession

#: Directories Spark reads one by one (and unions) before the table is shipped from the driver
#: instead: a plan of thousands of unions costs Spark more than it saves.
MAX_DIRECTORIES = 256
#: Spark's names of the types the resolver gives a hive value (see ``recoverylab.io``).
_HIVE_TYPES: dict[pl.DataType, str] = {
    pl.Int64(): "bigint",
    pl.Float64(): "double",
    pl.String(): "string",
}
#: PySpark warns on every Arrow UDF that it does not fully support pandas >= 3. recoverylab
#: hands no pandas object to Spark (Arrow batches in and out), so the warning is noise here.
_PANDAS_WARNING = "PySpark does not yet fully support pandas"


@contextmanager
def quiet() -> Iterator[None]:
    """Silence PySpark's pandas >= 3 FutureWarning around calls that build Arrow UDFs."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
        yield


def as_spark(spark: SparkSession, source: object) -> SparkFrame:
    """Return a table source as a Spark DataFrame holding what :func:`scan` reads from it.

    A Spark DataFrame is returned as it is; paths given by URI (``hdfs://``, ``s3a://``), which
    only Spark reaches, are read by :func:`._spark_uris.read_uris`. Raises
    :class:`~recoverylab._errors.SourceError` where the resolver cannot read the source (the
    polars engine's error).
    """
    kind = type(source)
    if kind.__name__ == "DataFrame" and kind.__module__.startswith("pyspark.sql"):
        return source  # type: ignore[return-value]
    paths = path_list(source)
    if paths is not None and any(is_uri(p) for p in paths):
        return read_uris(spark, paths)  # the driver cannot reach them
    resolved = scan(source)  # the resolver's checks and errors, as on the polars engine
    if paths is not None:
        files = resolve_paths(paths)
        read = _read_by_spark(spark, files, resolved.collect_schema())
        if read is not None:
            return read
    return _shipped(spark, resolved)


def _read_by_spark(
    spark: SparkSession, files: Sequence[InputFile], resolved: pl.Schema
) -> SparkFrame | None:
    """Read ``files`` with Spark when that gives the resolved table exactly; else None."""
    directories: dict[Path, list[InputFile]] = {}
    for file in files:
        directories.setdefault(file.path.parent, []).append(file)
    if len(directories) > MAX_DIRECTORIES or any(f.format != "parquet" for f in files):
        return None
    if any(_has_checksum(f.path) for f in files):
        return None
    schema = pl.read_parquet_schema(files[0].path)
    keys = [k for k in resolved if k not in schema]
    if list(resolved) != [*schema, *keys] or any(resolved[c] != schema[c] for c in schema):
        return None
    if any(resolved[k] not in _HIVE_TYPES for k in keys):
        return None
    if any(pl.read_parquet_schema(f.path) != schema for f in files[1:]):
        return None
    pieces = []
    try:
        for directory, members in directories.items():
            frame = spark.read.option("basePath", str(directory)).parquet(
                *(str(f.path) for f in members)
            )
            hive = dict(members[0].hive)
            pieces.append(frame.select(*frame.columns, *_hive_literals(keys, hive, resolved)))
    except _spark_failures():
        # The resolver read these files, Spark cannot (say, a stale `.crc` checksum beside a
        # rewritten part file, which Hadoop's local file system verifies): ship them instead.
        return None
    union = pieces[0]
    for piece in pieces[1:]:
        union = union.unionByName(piece)
    return union


def _has_checksum(path: Path) -> bool:
    """Whether a Hadoop checksum file (``.name.crc``) lies beside ``path``.

    Hadoop's local file system verifies it on every read: a stale one (the part file rewritten
    by another tool) fails Spark's read, and was seen to stall a local Spark session for good
    instead. The resolver skips it as bookkeeping, so such files are shipped from the driver.
    """
    return path.with_name(f".{path.name}.crc").exists()


def _spark_failures() -> tuple[type[BaseException], ...]:
    """Return the exceptions Spark raises when it cannot read a file (on the driver)."""
    errors = importlib.import_module("pyspark.errors")
    protocol = importlib.import_module("py4j.protocol")
    return (errors.PySparkException, protocol.Py4JJavaError)


def _hive_literals(
    keys: Sequence[str], hive: dict[str, str | None], resolved: pl.Schema
) -> list[Any]:
    """Return one directory's hive values as Spark literals of the resolver's types."""
    functions = importlib.import_module("pyspark.sql.functions")
    literals = []
    for key in keys:
        raw = pl.Series([hive.get(key)], dtype=pl.String)
        value = raw.cast(resolved[key], strict=True).item()
        literals.append(functions.lit(value).cast(_HIVE_TYPES[resolved[key]]).alias(key))
    return literals


def _shipped(spark: SparkSession, resolved: pl.LazyFrame) -> SparkFrame:
    """Collect the resolved table on the driver and hand it to Spark as Arrow.

    Categoricals travel as strings (Spark has none).
    """
    frame = resolved.with_columns((cs.categorical() | cs.enum()).cast(pl.String)).collect()
    with quiet():
        return spark.createDataFrame(frame.to_arrow(compat_level=pl.CompatLevel.oldest()))
