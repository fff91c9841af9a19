"""Run a plan's polars partial queries once per co-partitioned Spark partition (internal).

ARCHITECTURE §1.3 and §7. The inputs are tagged, unioned and repartitioned by cluster key, so a
cluster's rows (in every table) land in one partition; ``mapInArrow`` hands each partition whole
to the partial query (one Python call per partition, never one per group). The partials return
to the driver with a record per partition (rows seen, the error a check raised). pyspark is
imported only when used (the ``spark`` extra).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import polars as pl

from recoverylab import _errors, schema
from recoverylab._errors import MissingDependencyError, ParameterError, RecoveryLabError
from recoverylab.engines._polars import raise_empty, run_head
from recoverylab.engines._spark_sources import as_spark, quiet
from recoverylab.plan import Plan, Stage, collect_parts

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, SparkSession
    from pyspark.sql import DataFrame as SparkFrame

__all__ = ["EXTRA", "SparkEngine", "is_session", "require_pyspark", "session"]

#: The pip extra that installs the Spark engine.
EXTRA = "recoverylab[spark]"

#: A partial query: the partition's tables (name -> frame) to named partial frames.
PartialQuery = Callable[[dict[str, pl.DataFrame]], dict[str, pl.DataFrame]]

_KEY = "__key"
_TAG = "__table"
_PART = "__part"
_META = "__meta"
#: Spark has no unsigned integers: partial columns of these types travel widened.
_WIRE = {pl.UInt8: pl.Int16, pl.UInt16: pl.Int32, pl.UInt32: pl.Int64, pl.UInt64: pl.Int64}


def require_pyspark() -> ModuleType:
    """Return ``pyspark.sql``, or say which extra installs it.

    Raises
    ------
    MissingDependencyError
        When pyspark is not installed.
    """
    try:
        return importlib.import_module("pyspark.sql")
    except ImportError as exc:
        raise MissingDependencyError(
            "the Spark engine needs `pyspark`, which is not installed. "
            f"Hint: pip install '{EXTRA}' (Spark also needs a Java 17+ runtime)."
        ) from exc


def is_session(engine: object) -> bool:
    """Whether ``engine`` is a SparkSession (classic or Spark Connect), without importing it."""
    kind = type(engine)
    return kind.__name__ == "SparkSession" and kind.__module__.startswith("pyspark.")


#: Where the console output of the JVM this process started goes (None: inherited stderr).
_JVM_LOG: list[Path] = []


def jvm_log() -> Path | None:
    """Return the file the JVM started by :func:`session` writes its console log to, if any."""
    return _JVM_LOG[0] if _JVM_LOG else None


@contextmanager
def _console_to(log: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``log`` while the block runs (a child inherits them).

    The JVM that pyspark launches writes its warnings and log4j's console output to the
    descriptors it inherits, for as long as it lives; Python's own streams are flushed first and
    restored after.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with log.open("ab") as target:
            os.dup2(target.fileno(), 1)
            os.dup2(target.fileno(), 2)
        yield
    finally:
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)


def session(
    master: str | None = None,
    *,
    app_name: str = "recoverylab",
    config: Mapping[str, str] | None = None,
    log: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Start (or return the running) SparkSession with settings that suit recoverylab.

    On a ``local`` master the Python workers are pointed at this interpreter (so they import
    the same polars, pyarrow and recoverylab); on a cluster the workers need recoverylab
    installed (``pip install 'recoverylab[spark]'`` in their environment). The console
    progress bar is turned off.

    Parameters
    ----------
    master
        Spark master URL (``"local[2]"``, ``"spark://host:7077"``, ``"yarn"``...). ``None``
        (default) keeps what ``spark-submit`` configured, and is ``"local[*]"`` (all cores of
        this machine) in a plain Python process.
    app_name
        Application name shown by the cluster manager.
    config
        Extra Spark settings, e.g. ``{"spark.driver.memory": "1g"}``.
    log
        A file for the console output (JVM warnings, log4j lines) of the JVM this call starts,
        so none reaches stderr; :func:`jvm_log` returns it. A JVM that already runs in this
        process keeps where it writes. ``None`` (default): the JVM writes to stderr.

    Returns
    -------
    SparkSession

    Raises
    ------
    MissingDependencyError
        When pyspark is not installed.

    Examples
    --------
    >>> from recoverylab import distributed
    >>> spark = distributed.session("local[2]", config={"spark.sql.shuffle.partitions": "8"})
    ... # doctest: +SKIP
    """
    sql = require_pyspark()
    # spark-submit starts the Python driver with a gateway port; a plain process runs local.
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    builder = sql.SparkSession.builder.appName(app_name)
    settings = {"spark.ui.showConsoleProgress": "false"}
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            # Workers of a local master are forked by the JVM: without this they run the
            # system interpreter, which may lack pyarrow (or recoverylab).
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            settings["spark.pyspark.python"] = os.environ["PYSPARK_PYTHON"]
    builder = builder.config(map={**settings, **(config or {})})
    starts_jvm = (
        log is not None and importlib.import_module("pyspark").SparkContext._gateway is None
    )
    with quiet(), _console_to(Path(log)) if starts_jvm else contextlib.nullcontext():  # type: ignore[arg-type]
        spark = builder.getOrCreate()
    if starts_jvm:
        _JVM_LOG[:] = [Path(log)]  # type: ignore[arg-type]
    return spark


def empty_like(frame: SparkFrame) -> pl.DataFrame:
    """Return an empty polars frame of ``frame``'s columns, in the types partitions receive."""
    arrow = _arrow_schema(frame.sparkSession, frame.schema)
    return pl.from_arrow(arrow.empty_table())  # type: ignore[return-value]


def _arrow_schema(spark: SparkSession, spark_schema: Any) -> pa.Schema:
    types = importlib.import_module("pyspark.sql.pandas.types")
    zone = spark.conf.get("spark.sql.session.timeZone")
    return types.to_arrow_schema(spark_schema, timezone=zone)


def column(frame: SparkFrame, name: str) -> Column:
    """Return the column called ``name`` (quoted: names may hold dots or spaces)."""
    return frame["`" + name.replace("`", "``") + "`"]


@dataclass(frozen=True)
class Table:
    """One input of a Spark run: frame, cluster key (``None``: no shuffle), contract, columns."""

    name: str
    frame: Any
    key: Any
    contract: str | schema.TableSpec | None
    columns: tuple[str, ...]


@dataclass(frozen=True)
class _Layout:
    """How the tables travel in one unioned frame and the partials travel back (picklable)."""

    tables: tuple[tuple[str, tuple[str, ...]], ...]
    parts: tuple[tuple[str, tuple[str, ...]], ...]
    wire: tuple[tuple[str, pl.DataType], ...]
    envelope: bool


def _union(tables: Sequence[Table], shuffle: bool, partitions: int | None) -> SparkFrame:
    functions = importlib.import_module("pyspark.sql.functions")
    pieces = [
        t.frame.select(
            (t.key if t.key is not None else functions.lit(None).cast("string")).alias(_KEY),
            functions.lit(i).cast("int").alias(_TAG),
            *(column(t.frame, c).alias(f"__t{i}_{j}") for j, c in enumerate(t.columns)),
        )
        for i, t in enumerate(tables)
    ]
    union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), pieces)
    if not shuffle:
        return union.drop(_KEY)
    count = partitions or int(union.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    # The key decides the partition; the partial query does not need it.
    return union.repartition(count, _KEY).drop(_KEY)


def _unpack(
    data: pl.DataFrame, tag: str, prefix: str, frames: tuple[tuple[str, tuple[str, ...]], ...]
) -> dict[str, pl.DataFrame]:
    """Split a packed frame by tag: column ``j`` of part ``i`` is ``{prefix}{i}_{j}``."""
    return {
        name: data.filter(pl.col(tag) == i).select(
            pl.col(f"{prefix}{i}_{j}").alias(c) for j, c in enumerate(columns)
        )
        for i, (name, columns) in enumerate(frames)
    }


def _pack(
    outputs: Mapping[str, pl.DataFrame], meta: dict[str, Any] | None, layout: _Layout
) -> pl.DataFrame:
    pieces = [
        out.select(pl.col(c).alias(f"__p{i}_{j}") for j, c in enumerate(columns)).with_columns(
            pl.lit(i, dtype=pl.Int32).alias(_PART)
        )
        if layout.envelope
        else out.select(columns)
        for i, (name, columns) in enumerate(layout.parts)
        if (out := outputs.get(name)) is not None and out.height
    ]
    if meta is not None:
        pieces.append(pl.DataFrame({_META: [json.dumps(meta)]}))
    packed = pl.concat(pieces, how="diagonal") if pieces else pl.DataFrame()
    return packed.select(
        pl.col(n).cast(dtype) if n in packed.columns else pl.lit(None, dtype=dtype).alias(n)
        for n, dtype in layout.wire
    )


def _worker(
    batches: Iterator[pa.RecordBatch], *, layout: _Layout, partial: PartialQuery, target: Any
) -> Iterator[pa.RecordBatch]:
    """Run the partial query on one partition (in a Spark Python worker process)."""
    import pyarrow as pa
    from pyspark import TaskContext

    received = [b for b in batches if b.num_rows]
    if not received:  # an empty partition: nothing to check, nothing to report
        return
    data: pl.DataFrame = pl.from_arrow(pa.Table.from_batches(received))  # type: ignore[assignment]
    frames = _unpack(data, _TAG, "__t", layout.tables)
    meta: dict[str, Any] | None = None
    if layout.envelope:
        context = TaskContext.get()
        meta = {
            "partition": context.partitionId() if context is not None else -1,
            "rows": {name: frame.height for name, frame in frames.items()},
            "error": None,
        }
    # A partition holds only some clusters: a table may be empty here (see schema.shard_scope).
    try:
        with schema.shard_scope():
            outputs = partial(frames)
    except RecoveryLabError as exc:
        if meta is None:
            raise
        meta["error"] = [type(exc).__name__, str(exc)]
        outputs = {}
    packed = _pack(outputs, meta, layout)
    if packed.height:
        yield from packed.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(target).to_batches()


def _job(
    tables: Sequence[Table], stage: Stage, state: Any, partitions: int | None, *, envelope: bool
) -> tuple[_Layout, SparkFrame, dict[str, pl.Schema]]:
    """Return the lazy ``mapInArrow`` job of ``stage``'s partial over the co-partitioned tables.

    The output schema is learnt by running the partial on empty tables of the input types.
    """
    partial = functools.partial(_call, partial=stage.partial, state=state)
    empties = {
        t.name: empty_like(t.frame.select([column(t.frame, c) for c in t.columns])) for t in tables
    }
    with schema.shard_scope():
        outputs = partial(empties)
    parts = {name: frame.schema for name, frame in outputs.items()}
    wire: list[tuple[str, pl.DataType]] = [
        (f"__p{i}_{j}" if envelope else name, _WIRE.get(t, t))  # type: ignore[call-overload]
        for i, part in enumerate(parts.values())
        for j, (name, t) in enumerate(part.items())
    ]
    if envelope:
        wire += [(_PART, pl.Int32()), (_META, pl.String())]
    types = importlib.import_module("pyspark.sql.pandas.types")
    empty = pl.DataFrame(schema=dict(wire)).to_arrow(compat_level=pl.CompatLevel.oldest())
    spark_schema = types.from_arrow_schema(empty.schema, prefer_timestamp_ntz=True)
    target = _arrow_schema(tables[0].frame.sparkSession, spark_schema)
    layout = _Layout(
        tables=tuple((t.name, t.columns) for t in tables),
        parts=tuple((name, tuple(s.names())) for name, s in parts.items()),
        wire=tuple(wire),
        envelope=envelope,
    )
    union = _union(tables, stage.clustered, partitions)

    def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _worker(batches, layout=layout, partial=partial, target=target)

    with quiet():
        return layout, union.mapInArrow(apply, spark_schema), parts


def worker_import_error(exc: BaseException) -> MissingDependencyError | None:
    """Say what to install when Spark's Python workers failed to import a module, else None."""
    found = re.search(r"No module named '([^']+)'", str(exc))
    if found is None:
        return None
    return MissingDependencyError(
        f"Spark's Python workers cannot import `{found.group(1)}`. Hint: install "
        f"'{EXTRA}' in the workers' Python environment and point Spark at that interpreter "
        "(spark.pyspark.python or PYSPARK_PYTHON)."
    )


def _raise_errors(metas: Sequence[Mapping[str, Any]]) -> None:
    failed = sorted((m["partition"], m["error"]) for m in metas if m["error"] is not None)
    if not failed:
        return
    partition, (kind, message) = failed[0]
    error = getattr(_errors, kind, None)
    if not (isinstance(error, type) and issubclass(error, RecoveryLabError)):
        error = RecoveryLabError
    if len(failed) > 1:
        # Each partition counted its own offenders; say so rather than add them up.
        message += (
            f" [Spark: {len(failed)} of {len(metas)} partitions found problems; counts and "
            f"keys above are partition {partition}'s.]"
        )
    raise error(message)


def _call(
    frames: dict[str, pl.DataFrame], *, partial: Callable[..., Any], state: Any
) -> dict[str, pl.DataFrame]:
    """Run a plan's partial query on one partition's frames (in a Spark worker)."""
    return collect_parts(partial({n: f.lazy() for n, f in frames.items()}, state))


@dataclass(frozen=True)
class SparkEngine:
    """Run a plan on Spark: each stage's partial query once per co-partitioned partition.

    The inputs are read by the resolver's rules (see :func:`as_spark`), unioned and
    repartitioned by cluster key, and each partition is handed whole to the stage's polars
    partial query through ``mapInArrow``; only the partials come back to the driver, where
    the plan's combine and finish run. Results equal the polars engine's.

    Parameters
    ----------
    spark
        The SparkSession.
    partitions
        Partitions of the shuffle (default ``spark.sql.shuffle.partitions``).
    """

    spark: Any
    partitions: int | None = None

    def _tables(self, plan: Plan) -> list[Table]:
        """Read every input; key it by its cluster key (through another input where ``via``)."""
        require_pyspark()
        if not is_session(self.spark):
            raise ParameterError(
                f"parameter `spark` is {type(self.spark).__name__}; it must be a SparkSession. "
                "Hint: recoverylab.distributed.session() starts a local one."
            )
        frames = {i.name: as_spark(self.spark, i.source) for i in plan.inputs}
        functions = importlib.import_module("pyspark.sql.functions")
        by_name = {i.name: i for i in plan.inputs}
        tables = []
        for table in plan.inputs:
            frame = frames[table.name]
            shipped = table.columns if table.columns is not None else tuple(frame.columns)
            if table.via is not None:
                other, on = table.via
                owner = frames[other]
                owner_key = by_name[other].key_column(empty_like(owner).schema) or on
                mapping = owner.groupBy(column(owner, on).cast("string").alias("__via")).agg(
                    functions.min(column(owner, owner_key).cast("string")).alias("__key")
                )
                frame = frame.join(
                    mapping, column(frame, on).cast("string") == mapping["__via"], "left"
                )
                key = functions.col("__key")
            elif table.key is not None:
                key = column(frame, table.key_column(empty_like(frame).schema) or "").cast("string")
            else:
                key = None
            tables.append(Table(table.name, frame, key, table.contract, shipped))
        return tables

    def run(self, plan: Plan) -> Any:
        """Run ``plan``; return its finish's result.

        Raises the first error a partition's checks raised (with a note when several partitions
        raised), or the "table is empty" error of an input with no rows at all.
        """
        return self._execute(plan, [])

    def _execute(self, plan: Plan, every: list[Table]) -> Any:
        """Run ``plan``, reading its inputs into ``every`` at the first stage (unless read)."""

        def run_stage(stage: Stage, state: Any) -> dict[str, pl.DataFrame]:
            if not every:
                every.extend(self._tables(plan))
            tables = _reads(plan, stage, every)
            layout, job, parts = _job(tables, stage, state, self.partitions, envelope=True)
            if plan.progress is not None:
                plan.progress(f"spark: {stage.label} on each partition")
            errors = importlib.import_module("pyspark.errors")
            try:
                with quiet():
                    arrow = job.toArrow()
            except errors.PythonException as exc:
                missing = worker_import_error(exc)
                if missing is None:
                    raise
                raise missing from exc
            data: pl.DataFrame = pl.from_arrow(arrow)  # type: ignore[assignment]
            metas = [json.loads(m) for m in data.get_column(_META).drop_nulls().to_list()]
            rows = {t.name: sum(m["rows"][t.name] for m in metas) for t in tables}
            raise_empty(tables, rows, lambda t: empty_like(t.frame))
            _raise_errors(metas)
            collected = {
                n: f.cast(parts[n]) for n, f in _unpack(data, _PART, "__p", layout.parts).items()
            }
            if plan.progress is not None:
                plan.progress(
                    f"spark: collected {data.height - len(metas)} partial rows from {len(metas)} "
                    f"partitions ({sum(rows.values())} input rows)"
                )
            return collected

        return plan.execute(run_stage)

    def rows(self, plan: Plan) -> SparkFrame:
        """Run every stage but the last; return the last stage's one part as a lazy Spark frame.

        Nothing is collected (row-level verbs: scored episodes). An error in the last stage fails
        the Spark job, so the plan's earlier stages should run the checks.
        """
        every: list[Table] = []
        state = run_head(lambda head: self._execute(head, every), plan)  # reads the inputs once
        last = plan.stages[-1]
        tables = _reads(plan, last, every or self._tables(plan))
        return _job(tables, last, state, self.partitions, envelope=False)[1]


def _reads(plan: Plan, stage: Stage, tables: list[Table]) -> list[Table]:
    """Return the tables ``stage`` reads (only these are shipped)."""
    names = {i.name for i in stage.read(plan.inputs)}
    return [t for t in tables if t.name in names]
