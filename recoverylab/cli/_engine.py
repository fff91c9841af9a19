"""The command line's ``--engine spark [--spark-master URL]`` (used by the protocol commands).

With ``--engine spark`` the input paths are handed to the Spark engine as they are: local paths
are read by the resolver's rules (Spark reads parquet files itself where that gives the same
table), ``hdfs://`` or ``s3a://`` paths by Spark (see ``recoverylab.engines``); results are
written and printed as with polars. Under ``spark-submit`` the session it configured is
used.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoverylab._errors import ParameterError

if TYPE_CHECKING:
    import polars as pl

ENGINES = ("polars", "spark")


def add_engine(parser: argparse.ArgumentParser) -> None:
    """Add ``--engine`` and ``--spark-master`` to a subcommand."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="polars",
        help="compute the per-cluster partials with polars on this machine (default) or on "
        "Spark (needs `pip install 'recoverylab[spark]'` and Java; the input paths are read by "
        "Spark)",
    )
    parser.add_argument(
        "--spark-master",
        metavar="URL",
        default=None,
        help="Spark master for --engine spark, e.g. local[4], spark://host:7077, yarn "
        "(default: the one spark-submit configured, else local[*])",
    )


def engine_from(args: argparse.Namespace) -> object:
    """Return ``"polars"`` or a SparkSession for the parsed ``--engine``/``--spark-master``.

    The JVM's console output (its warnings, log4j lines) goes to a log file, never to stderr,
    so a failed run still prints one line: with ``--debug`` the log is kept and named on stderr,
    otherwise it is removed when the process ends.
    """
    if args.engine == "polars":
        if args.spark_master is not None:
            raise ParameterError("`--spark-master` needs `--engine spark`.")
        return "polars"
    from recoverylab.engines import jvm_log, require_pyspark, session

    active = require_pyspark().SparkSession.getActiveSession()
    if active is not None and args.spark_master is None:
        return active
    log = Path(tempfile.gettempdir()) / f"recoverylab-spark-{os.getpid()}.log"
    spark = session(args.spark_master, log=log)
    spark.sparkContext.setLogLevel("ERROR")
    if jvm_log() == log:  # this run started the JVM: its console output went to the log
        if args.debug:
            print(f"recoverylab {args.command}: Spark log: {log}", file=sys.stderr)
        else:
            atexit.register(log.unlink, missing_ok=True)
    return spark


def refuse(args: argparse.Namespace, options: Sequence[str]) -> None:
    """Raise for options that have no Spark implementation (they read rows on the driver)."""
    given = [f"--{o.replace('_', '-')}" for o in options if getattr(args, o, None)]
    if given:
        raise ParameterError(
            f"{', '.join(f'`{g}`' for g in given)} {'is' if len(given) == 1 else 'are'} not "
            "available with `--engine spark`. Hint: run them with --engine polars."
        )


def goal(
    args: argparse.Namespace,
    spark: Any,
    sources: Sequence[Sequence[str] | None],
    by: Sequence[str],
    progress: Callable[[str], None],
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Run ``recoverylab goal`` on Spark; return the summary and the barrier drop (or None).

    The scored episodes stay on Spark: with ``--episodes-out`` Spark writes them as a parquet
    directory at that path (see :func:`_write_sorted`), and the summaries read them back;
    otherwise each summary runs the (lazy) scoring again.
    """
    from recoverylab import goal as protocol
    from recoverylab.cli._common import announce_written, current_outputs, guard_output

    progress("checking the tables on Spark")
    scored: Any = protocol.score(*(list(s) if s else None for s in sources), engine=spark)
    if args.episodes_out is not None:
        target = Path(args.episodes_out)
        guard_output(target, args)
        # Spark writes a staging directory, renamed onto the target with the other outputs
        staging = current_outputs().stage_dir(target)
        progress(f"scoring episodes into {target}/ (parquet directory written by Spark)")
        _write_sorted(scored, staging)
        scored = spark.read.parquet(str(staging))
        announce_written(f"wrote {target}/ ({scored.count()} rows)")
    statistics = {"n_resamples": args.resamples, "confidence": args.confidence, "seed": args.seed}
    progress(f"summarising on Spark with {args.resamples} bootstrap resamples")
    summary = protocol.summarize(scored, by=by, cluster=args.cluster, engine=spark, **statistics)
    drop = None
    if args.drop_out is not None:
        progress("pairing barrier-free and barrier cases by goal on Spark")
        drop = protocol.barrier_drop(
            scored, by=[c for c in scored.columns if c == "model"], engine=spark, **statistics
        )
    return summary, drop


def _write_sorted(frame: Any, directory: Path) -> None:
    """Write a Spark DataFrame as a byte-stable parquet directory (ARCHITECTURE §1.6).

    Spark names its part files with a random UUID and splits rows by how its input was read, so
    the same episodes written twice gave other files. The rows are sorted as every recoverylab
    writer sorts them (by each orderable column, left to right, nulls last: the unique
    ``episode_id`` first) into one part file, renamed ``part-00000.parquet`` (with its checksum
    file): the same rows give the same bytes whatever the input's order or file split.
    """
    functions = importlib.import_module("pyspark.sql.functions")
    types = importlib.import_module("pyspark.sql.types")
    nested = (types.ArrayType, types.MapType, types.StructType)
    keys = [
        functions.col(f"`{field.name}`").asc_nulls_last()
        for field in frame.schema.fields
        if not isinstance(field.dataType, nested)
    ]
    frame.orderBy(*keys).coalesce(1).write.mode("overwrite").parquet(str(directory))
    parts = sorted(p for p in directory.iterdir() if p.name.startswith("part-"))
    for index, part in enumerate(parts):
        name = f"part-{index:05d}.parquet"
        checksum = directory / f".{part.name}.crc"
        part.rename(directory / name)
        if checksum.exists():
            checksum.rename(directory / f".{name}.crc")
