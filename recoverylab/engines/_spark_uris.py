"""Paths only Spark can reach (``hdfs://``, ``s3a://``, ``file://`` URIs), read by Spark (internal).

The driver cannot list or open such paths, so :mod:`recoverylab.io` cannot read them; Spark's own
readers do, with the two corrections where they would silently change a value (ARCHITECTURE
§1.5): a contract text column (an id such as ``task_id``) stays text, both where a CSV's types are
inferred (``007`` stays ``"007"`` rather than becoming 7) and where a partition directory names it
(``task_id=007/``). Spark's own rules apply otherwise (which files are bookkeeping, how the files'
schemas combine). Local paths go through the resolver instead (see :mod:`._spark_sources`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from recoverylab._contracts import text_columns
from recoverylab._errors import SourceError
from recoverylab.io import FORMATS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkFrame
    from pyspark.sql import SparkSession

#: ``scheme://``: a path handed to Spark as it is.
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: The formats Spark reads by URI (a path without a known suffix is a parquet directory).
_SPARK_FORMATS = ("parquet", "csv", "ndjson")


def is_uri(path: str) -> bool:
    """Return whether ``path`` names a file system by its scheme (``hdfs://...``).

    Examples
    --------
    >>> [is_uri(p) for p in ("hdfs:///runs/forks", "s3a://b/k.csv", "/tmp/x", "runs/x")]
    [True, True, False, False]
    """
    return _URI.match(path) is not None


def read_uris(spark: SparkSession, paths: Sequence[str]) -> SparkFrame:
    """Read parquet, CSV or NDJSON paths with Spark, keeping contract text columns as text.

    Raises
    ------
    SourceError
        Paths of another format or of several formats, or paths Spark cannot read.
    """
    formats = {FORMATS.get(PurePosixPath(p.rstrip("/")).suffix.lower(), "parquet") for p in paths}
    if len(formats) != 1 or not formats <= set(_SPARK_FORMATS):
        raise SourceError(
            f"{_shown(paths)}: Spark reads paths given by URI as parquet, CSV or NDJSON, one "
            f"format at a time (found: {', '.join(sorted(formats))}). Hint: convert the files, "
            "or give local paths, which recoverylab reads in every format."
        )
    errors = importlib.import_module("pyspark.errors")
    try:
        if formats == {"csv"}:
            return _csv(spark, paths)
        if formats == {"ndjson"}:
            return spark.read.json(list(paths))  # a JSON string is text already
        return _parquet(spark, paths)
    except errors.AnalysisException as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(f"{_shown(paths)}: Spark cannot read it: {first}") from exc


def _csv(spark: SparkSession, paths: Sequence[str]) -> SparkFrame:
    """Read CSV with inferred types, but every contract text column as text."""
    inferred = spark.read.csv(list(paths), header=True, inferSchema=True).schema
    if all(f.name not in text_columns() or _is_string(f) for f in inferred.fields):
        return spark.read.csv(list(paths), header=True, schema=inferred)
    # enforceSchema off: the header's names are checked against the schema, not assumed
    reader = spark.read.option("enforceSchema", False)
    return reader.csv(list(paths), header=True, schema=_text_kept(inferred, inferred.fieldNames()))


def _parquet(spark: SparkSession, paths: Sequence[str]) -> SparkFrame:
    """Read parquet; a partition directory's value of a contract text column stays text."""
    frame = spark.read.parquet(*paths)
    files = frame.inputFiles()
    if not files:
        return frame
    own = set(spark.read.parquet(files[0]).schema.fieldNames())  # one file: no partitions
    partitions = [f.name for f in frame.schema.fields if f.name not in own]
    if all(name not in text_columns() for name in partitions):
        return frame
    return spark.read.schema(_text_kept(frame.schema, partitions)).parquet(*paths)


def _text_kept(schema: Any, names: Sequence[str]) -> Any:
    """Return ``schema`` with the contract text columns among ``names`` typed as strings."""
    types = importlib.import_module("pyspark.sql.types")
    return types.StructType(
        [
            types.StructField(f.name, types.StringType(), f.nullable)
            if f.name in names and f.name in text_columns()
            else f
            for f in schema.fields
        ]
    )


def _is_string(field: Any) -> bool:
    return type(field.dataType).__name__ == "StringType"


def _shown(paths: Sequence[str]) -> str:
    """Return the first paths, quoted, for a message."""
    return ", ".join(f"`{p}`" for p in paths[:3]) + (", ..." if len(paths) > 3 else "")
