"""Checks on how a takeover benchmark was built: failure latency, split leakage, verifier gate.

None of these resample, so they stay lazy: a DataFrame in gives a DataFrame out, anything else a
LazyFrame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recoverylab import stats
from recoverylab._errors import InputError, ParameterError, format_keys
from recoverylab.schema import validate
from recoverylab.takeover._inputs import check_by, sort_keys


def latency(failures: object, *, by: Sequence[str] = (), confidence: float = 0.95) -> pl.LazyFrame:
    """How long root causes stay latent: median steps to surfacing, and where they surface.

    Seed: the median root cause surfaced 17 steps later and 60.0 % of the surfaced failures
    surfaced at the final step — a share whose denominator is the 602 surfaced failures, not the
    619 annotated. Both denominators are therefore reported side by side, and each share says
    which one it uses.

    Parameters
    ----------
    failures
        The `failures` table: ``root_cause_id``, ``root_cause_step``, ``surfaced_step`` (null =
        never surfaced), ``final_step``.
    by
        Optional columns of `failures` to group by (e.g. ``source_agent``).
    confidence
        Level of the interval of ``final_step_rate``: Clopper–Pearson (every failure is its
        own cluster: the rates' Korn–Graubard interval with design effect 1).

    Returns
    -------
    polars.LazyFrame
        One row per ``by`` cell, sorted: the ``by`` keys,
        ``annotated`` (all failures), ``surfaced``, ``never_surfaced``, ``surfaced_rate``
        (surfaced / annotated), ``median_latency``, ``mean_latency``, ``latency_q25``,
        ``latency_q75`` (surfaced_step − root_cause_step over surfaced failures; null if none
        surfaced), ``at_final_step`` (surfaced at the final step), ``final_step_rate``
        (at_final_step / surfaced) with ``final_step_rate_ci_low``/``_ci_high``, its
        ``ci_method`` (``korn-graubard``) and ``test`` (``exact-binomial``), null when nothing
        surfaced, and ``final_step_annotated_rate`` (at_final_step / annotated).

    Raises
    ------
    SchemaError
        `failures` breaks its contract (e.g. a failure surfacing before its root cause).
    ParameterError
        A ``by`` column is missing.

    Examples
    --------
    >>> failures = pl.DataFrame({"root_cause_id": ["r1", "r2", "r3"],
    ...     "root_cause_step": [2, 5, 1], "surfaced_step": [10, None, 4],
    ...     "final_step": [10, 30, 9]})
    >>> latency(failures).select("annotated", "surfaced", "median_latency").collect().row(0)
    (3, 2, 5.5)
    """
    if not isinstance(confidence, float | int) or not 0 < confidence < 1:
        raise ParameterError(f"parameter `confidence` is {confidence!r}; it must be in (0, 1).")
    lazy = validate(failures, "failures")
    schema = lazy.collect_schema()
    keys = check_by(schema, by, "failures")
    surfaced = pl.col("surfaced_step").is_not_null()
    steps = (pl.col("surfaced_step") - pl.col("root_cause_step")).filter(surfaced)
    aggregates = [
        pl.len().cast(pl.Int64).alias("annotated"),
        surfaced.sum().cast(pl.Int64).alias("surfaced"),
        (~surfaced).sum().cast(pl.Int64).alias("never_surfaced"),
        (surfaced.sum() / pl.len()).alias("surfaced_rate"),
        steps.median().alias("median_latency"),
        steps.mean().alias("mean_latency"),
        steps.quantile(0.25, interpolation="linear").alias("latency_q25"),
        steps.quantile(0.75, interpolation="linear").alias("latency_q75"),
        (pl.col("surfaced_step") == pl.col("final_step"))
        .sum()
        .cast(pl.Int64)
        .alias("at_final_step"),
    ]
    grouped = lazy.group_by(keys).agg(aggregates) if keys else lazy.select(aggregates)
    bounds = pl.struct("at_final_step", "surfaced").map_batches(
        lambda counts: _exact_bounds(counts, float(confidence)),
        return_dtype=pl.Struct({"low": pl.Float64, "high": pl.Float64}),
    )
    result = grouped.with_columns(
        pl.when(pl.col("surfaced") > 0)
        .then(pl.col("at_final_step") / pl.col("surfaced"))
        .alias("final_step_rate"),
        bounds.struct.field("low").alias("final_step_rate_ci_low"),
        bounds.struct.field("high").alias("final_step_rate_ci_high"),
        pl.when(pl.col("surfaced") > 0).then(pl.lit("korn-graubard")).alias("ci_method"),
        pl.when(pl.col("surfaced") > 0).then(pl.lit("exact-binomial")).alias("test"),
        (pl.col("at_final_step") / pl.col("annotated")).alias("final_step_annotated_rate"),
    )
    if keys:
        result = result.sort(sort_keys(schema, keys), nulls_last=False)
    return result


def _exact_bounds(counts: pl.Series, confidence: float) -> pl.Series:
    """Clopper–Pearson bounds of at_final_step / surfaced (null where nothing surfaced).

    Every failure is its own cluster (one root cause each), so the rates' interval policy
    (:func:`stats.korn_graubard`, design effect 1) is exactly Clopper–Pearson.
    """
    x = counts.struct.field("at_final_step").cast(pl.Float64).to_numpy()
    n = counts.struct.field("surfaced").cast(pl.Float64).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        p = x / n
        squares = x * (1.0 - p) ** 2 + (n - x) * p**2
    low, high, _, _ = stats.korn_graubard(n, n, x, squares, confidence=confidence)
    frame = pl.DataFrame({"low": low, "high": high}).fill_nan(None)
    return frame.to_struct(counts.name)


def leakage(states: object, *, split: str = "split") -> pl.LazyFrame:
    """Workflows and root causes that appear in more than one split.

    Seed: everything derived from one workflow (rollouts, states, recoveries) belongs to one
    split; a workflow or root cause in two splits leaks test information into training. A null
    split counts as a split of its own, so half-labelled workflows are reported too.

    Parameters
    ----------
    states
        The `states` table with a split column.
    split
        Name of the split column (default ``split``).

    Returns
    -------
    polars.LazyFrame
        One row per leaked entity, sorted by ``kind`` and ``id``: ``kind`` (``workflow_id`` or
        ``root_cause_id``), ``id``, ``n_splits``, ``splits`` (sorted list, nulls first) and
        ``states``. Empty (with these columns) when nothing leaks.

    Raises
    ------
    SchemaError
        `states` breaks its contract.
    ParameterError
        The split column is missing.

    Examples
    --------
    >>> states = pl.DataFrame({"state_id": ["s1", "s2"], "workflow_id": ["w1", "w1"],
    ...     "root_cause_id": ["r1", "r2"], "depth": [0, 0], "replay_ok": [True, True],
    ...     "expected_ok": [True, True], "split": ["train", "test"]})
    >>> leakage(states).select("kind", "id", "n_splits").collect().rows()
    [('workflow_id', 'w1', 2)]
    """
    if not isinstance(split, str):
        raise ParameterError(f"parameter `split` is {split!r}; it must be a column name.")
    lazy = validate(states, "states")
    schema = lazy.collect_schema()
    if split not in schema:
        raise ParameterError(
            f"states: no column `{split}` (parameter `split`); leakage needs the split of every "
            f"state (columns: {', '.join(schema.names())})."
        )
    labels = pl.col(split).cast(pl.String)
    parts = [
        lazy.group_by(kind)
        .agg(
            labels.n_unique().cast(pl.Int64).alias("n_splits"),
            labels.unique().sort(nulls_last=False).alias("splits"),
            pl.len().cast(pl.Int64).alias("states"),
        )
        .filter(pl.col("n_splits") > 1)
        .select(
            pl.lit(kind).alias("kind"),
            pl.col(kind).alias("id"),
            "n_splits",
            "splits",
            "states",
        )
        for kind in ("workflow_id", "root_cause_id")
    ]
    return pl.concat(parts).sort("kind", "id", descending=[True, False])


def verifier_gate(mutations: object, *, min_catch: float = 0.5) -> pl.LazyFrame:
    """Which workflows' verifiers catch at least ``min_catch`` of their executed mutations.

    Seed: a frozen verifier is mutation-tested and a workflow is kept only if it caught at least
    half of the executed mutations. The gate covers the tested mutations only; it is not a proof
    that the verifier is a complete oracle. Every workflow is returned, with the reason it fails.

    Parameters
    ----------
    mutations
        The `mutations` table: ``workflow_id``, ``mutation_id``, ``executed``, ``caught``.
    min_catch
        Smallest catch rate that passes, in [0, 1] (default 0.5, the seed's "at least half").

    Returns
    -------
    polars.LazyFrame
        One row per workflow, sorted: ``workflow_id``, ``mutations``, ``executed``, ``caught``,
        ``catch_rate`` (caught / executed; null when nothing was executed), ``passes_gate`` and
        ``reason`` (null when it passes, else ``low_catch_rate`` or ``no_executed_mutations``).

    Raises
    ------
    SchemaError
        `mutations` breaks its contract.
    InputError
        A mutation marked caught but not executed.
    ParameterError
        ``min_catch`` outside [0, 1].

    Examples
    --------
    >>> mutations = pl.DataFrame({"workflow_id": ["w1", "w1", "w2"],
    ...     "mutation_id": ["m1", "m2", "m1"], "executed": [True, True, True],
    ...     "caught": [True, False, False]})
    >>> verifier_gate(mutations).select("workflow_id", "catch_rate", "passes_gate").collect().rows()
    [('w1', 0.5, True), ('w2', 0.0, False)]
    """
    if (
        isinstance(min_catch, bool)
        or not isinstance(min_catch, float | int)
        or not 0 <= min_catch <= 1
    ):
        raise ParameterError(f"parameter `min_catch` is {min_catch!r}; it must be in [0, 1].")
    lazy = validate(mutations, "mutations")
    impossible = lazy.filter(pl.col("caught") & ~pl.col("executed"))
    count, sample = pl.collect_all(
        [
            impossible.select(pl.len()),
            impossible.select("workflow_id", "mutation_id")
            .sort("workflow_id", "mutation_id")
            .head(5),
        ]
    )
    n = int(count.item())
    if n:
        raise InputError(
            f"mutations: column `caught` is true on {n} row{'' if n == 1 else 's'} whose "
            f"`executed` is false (workflow_id/mutation_id {format_keys(sample.rows(), n)}); "
            "only an executed mutation can be caught."
        )
    return (
        lazy.group_by("workflow_id")
        .agg(
            pl.len().cast(pl.Int64).alias("mutations"),
            pl.col("executed").sum().cast(pl.Int64).alias("executed"),
            pl.col("caught").sum().cast(pl.Int64).alias("caught"),
        )
        .with_columns(
            pl.when(pl.col("executed") > 0)
            .then(pl.col("caught") / pl.col("executed"))
            .alias("catch_rate")
        )
        .with_columns(
            (pl.col("catch_rate") >= min_catch).fill_null(False).alias("passes_gate"),
        )
        .with_columns(
            pl.when(pl.col("executed") == 0)
            .then(pl.lit("no_executed_mutations"))
            .when(~pl.col("passes_gate"))
            .then(pl.lit("low_catch_rate"))
            .otherwise(pl.lit(None, dtype=pl.String))
            .alias("reason")
        )
        .sort("workflow_id")
    )
