"""Scale out on Apache Spark: the same per-cluster partial queries, co-partitioned by cluster.

ARCHITECTURE §7: every metric of recoverylab is computed in two phases - additive per-cluster
partials, then a small combine and the statistics. On Spark the input tables are repartitioned
by the cluster key (``task_id`` for paired forks, the case for goal scoring, the resampling
cluster for goal summaries, ``workflow_id`` for takeover), so every join stays inside one
partition. Each partition is handed whole to the protocol's own polars partial query through
``DataFrame.mapInArrow`` - one Python call per partition, never one per group - and only the
small partials come back to the driver, where the protocol's own combine and statistics run.
Results are identical to the polars path: same seed, same intervals, same p-values.

The protocol functions take ``engine=`` and call these (``paired.summarize(forks,
engine=spark)``); the functions here also take ``partitions=`` and ``progress=``.

* :func:`session` -- start a SparkSession with settings that suit recoverylab.
* :func:`paired_summarize`, :func:`paired_contrast`, :func:`evaluate_policy` -- CIR (§3.1).
* :func:`goal_score` (a lazy Spark DataFrame), :func:`goal_summarize`,
  :func:`goal_barrier_drop` -- AgentHeal (§3.3).
* :func:`takeover_summarize` -- CUA-Recovery (§3.4).

Inputs may be Spark DataFrames, parquet/CSV/NDJSON paths or globs (read by Spark, never by
the driver), or in-memory tables (shipped to Spark). The workers need recoverylab and its
dependencies installed (``pip install 'recoverylab[spark]'``); pyspark itself is imported only
when this engine is used, and a missing pyspark raises :class:`~recoverylab.MissingDependencyError`
naming the extra.

Examples
--------
>>> from recoverylab import distributed, paired
>>> spark = distributed.session("local[2]")  # doctest: +SKIP
>>> paired.summarize("runs/forks/", by="model", engine=spark)  # doctest: +SKIP
"""

from recoverylab.distributed._goal import goal_barrier_drop, goal_score, goal_summarize
from recoverylab.distributed._paired import evaluate_policy, paired_contrast, paired_summarize
from recoverylab.distributed._spark import EXTRA, is_session, resolve_engine, session
from recoverylab.distributed._takeover import takeover_summarize

__all__ = [
    "EXTRA",
    "evaluate_policy",
    "goal_barrier_drop",
    "goal_score",
    "goal_summarize",
    "is_session",
    "paired_contrast",
    "paired_summarize",
    "resolve_engine",
    "session",
    "takeover_summarize",
]
