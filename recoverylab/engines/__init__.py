"""Engines run plans: polars (default), sharded polars (tests) and Spark (ARCHITECTURE §7).

Layout: ``_polars`` (PolarsEngine, ShardedEngine), ``_spark`` (SparkEngine, session); here
:func:`resolve`, :func:`run` and :func:`rows` turn a verb's ``engine=`` into an engine and run the
plan. May import plan, io, schema and _errors; never a protocol. The plan never imports it.

Every aggregating verb of recoverylab builds a :class:`recoverylab.plan.Plan` and hands it to
the engine its ``engine=`` argument names:

* ``"polars"`` (default) -- :class:`PolarsEngine`: each stage once over the whole tables, streaming.
* :class:`ShardedEngine` ``(k)`` -- splits every input by its cluster key into ``k`` shards and
  runs the partial queries per shard; equal results prove, without Java, that partials add up.
* a SparkSession (or ``"spark"`` for the active one), or :class:`SparkEngine` ``(spark,
  partitions=...)`` -- the inputs are co-partitioned by cluster key and each stage's partial
  query runs once per partition through ``mapInArrow``. Paths are read by the resolver's rules
  (Spark reads the files itself where that gives the same table; ``hdfs://`` and other URIs
  only Spark reaches). The
  workers need recoverylab installed (``pip install 'recoverylab[spark]'``); pyspark is
  imported only when this engine is used.

:func:`session` starts a SparkSession with settings that suit recoverylab. This package is
also reachable as ``recoverylab.distributed``.

Examples
--------
>>> from recoverylab import engines, paired
>>> spark = engines.session("local[2]")  # doctest: +SKIP
>>> paired.summarize("runs/forks/", by="model", engine=spark)  # doctest: +SKIP
>>> paired.summarize("runs/forks/", engine=engines.ShardedEngine(k=3))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from recoverylab import plan as _plan
from recoverylab._errors import ParameterError
from recoverylab.engines._polars import PolarsEngine, ShardedEngine
from recoverylab.engines._spark import (
    EXTRA,
    SparkEngine,
    is_session,
    jvm_log,
    require_pyspark,
    session,
)
from recoverylab.plan import Plan

__all__ = [
    "EXTRA",
    "PolarsEngine",
    "ShardedEngine",
    "SparkEngine",
    "is_session",
    "jvm_log",
    "require_pyspark",
    "resolve",
    "rows",
    "run",
    "session",
]


def resolve(engine: object) -> Any:
    """Turn an ``engine=`` argument into an engine object.

    Parameters
    ----------
    engine
        ``"polars"``; ``"spark"`` for the active SparkSession (one is started with
        :func:`session` when there is none); a SparkSession; or an engine object (anything
        with a ``run(plan)`` method).

    Returns
    -------
    PolarsEngine, ShardedEngine, SparkEngine or the engine given

    Raises
    ------
    ParameterError
        For any other value.
    MissingDependencyError
        For ``"spark"`` when pyspark is not installed.

    Examples
    --------
    >>> resolve("polars")
    PolarsEngine()
    """
    if isinstance(engine, str) and engine == "polars":
        return PolarsEngine()
    if isinstance(engine, str) and engine == "spark":
        active = require_pyspark().SparkSession.getActiveSession()
        return SparkEngine(active if active is not None else session())
    if is_session(engine):
        return SparkEngine(engine)
    if not isinstance(engine, str) and callable(getattr(engine, "run", None)):
        return engine
    raise ParameterError(
        f"parameter `engine` is {engine!r}; it must be 'polars', 'spark', a SparkSession or "
        "an engine (recoverylab.engines)."
    )


def run(engine: object, plan: Plan) -> Any:
    """Run ``plan`` on the engine an ``engine=`` argument names (see :func:`resolve`).

    Every verb hands its plan here with the ``engine=`` its caller chose; the plan itself
    never chooses (ARCHITECTURE §2).

    Returns
    -------
    Any
        What the plan's finish returns.

    Raises
    ------
    ParameterError
        For an ``engine`` that :func:`resolve` refuses.
    """
    return _plan.run(resolve(engine), plan)


def rows(engine: object, plan: Plan) -> Any:
    """Run a row-level plan (:func:`recoverylab.plan.rows`) on the engine ``engine`` names.

    Returns a polars LazyFrame on the polars engines and a lazy Spark DataFrame on Spark.
    """
    return _plan.rows(resolve(engine), plan)
