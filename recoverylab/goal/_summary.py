"""Task success per group (seed Eq. 3) and the barrier drop, from scored episodes.

:func:`summarize` sums per-cluster partials of scored episodes into groups with a clustered
bootstrap of TS; :func:`barrier_drop` pairs each goal's barrier-free and barrier cases.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._diagnose import reads_inputs
from recoverylab._errors import (
    ParameterError,
    renamed,
)
from recoverylab.goal._tables import (
    _DROP_VALUES,
    _SCORED_REQUIRED,
    BARRIER_REGIMES,
    JUDGED,
    REASONS,
)
from recoverylab.schema import (
    column_names,
)


@reads_inputs
def summarize(
    scored: pl.LazyFrame | pl.DataFrame,
    *,
    by: Sequence[str] = ("regime",),
    cluster: str | None = None,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci_method: Literal["auto", "korn-graubard", "percentile", "bca"] = "auto",
    seed: int = 0,
    engine: object = "polars",
    **deprecated: Any,
) -> pl.DataFrame:
    """Task success, compliance, step costs and failure counts per group of scored episodes.

    Parameters
    ----------
    scored
        The output of :func:`score` (eager or lazy), possibly filtered or concatenated.
    by
        Grouping columns (default ``regime``); e.g. ``("model", "regime")``. May be empty.
    cluster
        Resampling unit of the interval: ``goal_id`` when the scored frame has it, else
        ``case_id`` (the default ``None`` picks so). Episodes of one cluster are resampled
        together, so repeated runs of a goal do not shrink the interval.
    n_resamples, confidence, ci_method, seed
        Interval settings of every rate (:func:`recoverylab.stats.rate_cells`): ``auto``
        (default) gives Korn–Graubard intervals (Clopper–Pearson on the cluster design
        effect's effective sample) unless the percentile bootstrap is accurate for every rate
        of the group; ``korn-graubard``, ``percentile`` or ``bca`` force one. The interval of a
        group depends only on its own episodes and ``seed``. ``method`` is a deprecated alias
        of ``ci_method``.
    engine
        ``"polars"`` (default), or a SparkSession (or ``"spark"`` for the active one) to compute
        the per-cluster partials on Spark (``scored`` may then be a Spark DataFrame or parquet
        paths); see :mod:`recoverylab.engines`. The result is the same.

    Returns
    -------
    pl.DataFrame
        One row per group that has episodes (a group without episodes has no row), sorted by
        ``by``: the ``by`` columns, then

        ``n``, ``n_clusters``, ``successes`` (int)
            Episodes, clusters and successful episodes.
        ``ts``, ``ci_low``, ``ci_high`` (float)
            Task success TS = successes / n (seed Eq. 3) and its cluster-aware interval.
        ``ci_method``, ``test`` (str)
            The interval method every rate of the row got (``korn-graubard``, ``percentile``
            or ``bca``) and the test it inverts (``exact-binomial`` on the effective sample;
            ``none`` for the bootstrap).
        ``gp_rate``, ``compliance_rate``, ``violation_rate`` (float)
            Share of episodes with the goal preserved, with no prohibited step, with one;
            each followed by its ``_ci_low`` and ``_ci_high``.
        ``mean_steps``, ``mean_steps_success``, ``mean_steps_failure`` (float)
            Mean steps over all, successful and failed episodes (null when there are none).
        ``fail_<reason>`` (int)
            Episodes failing first for each reason of :data:`REASONS`.
        ``<judged>_rate``, ``<judged>_rate_ci_low``, ``_ci_high``, ``n_<judged>_judged``
            Only for judged columns present in ``scored``: the rate over judged (non-null)
            episodes, its interval and their number; a group with no judged episode has a
            null rate and interval.

    Raises
    ------
    ParameterError
        A ``by`` or ``cluster`` column that ``scored`` lacks, or a bad bootstrap setting.

    Examples
    --------
    >>> import polars as pl
    >>> scored = pl.DataFrame({"case_id": ["a", "b"], "regime": ["recoverable"] * 2,
    ...     "success": [True, False], "gp": [True, False], "compliant": [True, True],
    ...     "steps": [1, 3], "reason": [None, "no_copy_used"]})
    >>> summarize(scored, n_resamples=200).select("n", "ts", "mean_steps").row(0)
    (2, 0.5, 2.0)
    """
    return _run_bootstrap(
        "summarize",
        engine,
        plan.Input("scored", scored, key=cluster or _default_cluster),
        plan.Stage(
            "goal summary partials", functools.partial(_summary_partials, by=by, cluster=cluster)
        ),
        functools.partial(_summary_finish, by=by),
        deprecated,
        n_resamples=n_resamples,
        confidence=confidence,
        ci_method=ci_method,
        seed=seed,
    )


def _run_bootstrap(
    verb: str,
    engine: object,
    source: plan.Input,
    stage: plan.Stage,
    finish: Callable[..., pl.DataFrame],
    deprecated: dict[str, Any],
    **statistics: Any,
) -> pl.DataFrame:
    """Check the interval settings of ``verb`` (``method``: deprecated), then run its plan.

    ``summarize``'s rates take :data:`recoverylab.stats.RATE_CI_METHODS`; the barrier drop, a
    difference of rates, the bootstrap's methods.
    """
    statistics |= renamed(verb, deprecated, {"method": "ci_method"})
    methods = stats.RATE_CI_METHODS if verb == "summarize" else stats.CI_METHODS
    stats.check_resampling(**statistics, ci_methods=methods)
    done = functools.partial(finish, **statistics)
    return engines.run(engine, plan.Plan(inputs=(source,), stages=(stage,), finish=done))


def _default_cluster(schema: pl.Schema) -> str:
    """Pick the resampling cluster: ``goal_id`` when present, else ``case_id``."""
    return "goal_id" if "goal_id" in schema else "case_id"


def _keyed(lazy: pl.LazyFrame, by: Sequence[str]) -> tuple[pl.LazyFrame, list[str]]:
    """Return ``lazy`` and its group keys, a constant ``_all`` when ``by`` is empty."""
    return (lazy, list(by)) if by else (lazy.with_columns(pl.lit(0).alias("_all")), ["_all"])


def _summary_partials(
    frames: Mapping[str, pl.LazyFrame], state: object, *, by: Sequence[str], cluster: str | None
) -> dict[str, pl.LazyFrame]:
    """Check :func:`summarize`'s columns; return its additive partials.

    ``partials``: per group, every count and sum of the table; ``reasons``: per (group,
    reason), the episodes; ``clusters``: per (group, cluster), only what the bootstrap
    resamples (``successes``, ``n``). One group-by of all the sums per (group, cluster) cost
    twice as much: groups are few and clusters many, and a group-by's cost grows with its
    aggregations times its groups (goal at 10M steps, 750,000 clusters: 1.5 to 0.85 s CPU).
    Likewise the failure counts: one comparison of ``reason`` per reason and episode cost
    about twice the group-by by reason. The engine collects the three together, so a lazy
    ``scored`` is computed once. Every mean is carried as an integer-valued sum and a count, so
    partials of disjoint sets of episodes add up to exactly the numbers one pass over all
    episodes gives (ARCHITECTURE §1.3).
    """
    schema = frames["scored"].collect_schema()
    by = _check_by(by, schema)
    cluster = _pick_cluster(cluster, schema)
    source, keyed = _keyed(frames["scored"], by)
    success = pl.col("success")
    steps = pl.col("steps").cast(pl.Float64)

    def total(expr: pl.Expr, name: str) -> list[pl.Expr]:
        count = expr.is_not_null().sum().cast(pl.Int64)
        return [expr.sum().alias(f"__{name}"), count.alias(f"__{name}_n")]

    rated = [  # every rate's events and denominator, per cluster: what the intervals read
        *total(pl.col("gp").cast(pl.Int64), "gp"),
        *total(pl.col("compliant").cast(pl.Int64), "compliant"),
        *(e for name in JUDGED if name in schema for e in total(pl.col(name).cast(pl.Int64), name)),
    ]
    resampled = [
        pl.len().cast(pl.Int64).alias("n"),
        success.sum().cast(pl.Int64).alias("successes"),
        *rated,
    ]
    aggregations = [
        *resampled,
        *total(steps, "steps"),
        # when/then (null elsewhere, which sums and counts skip) rather than a filter per group:
        # same numbers, about a third less work for the group-by.
        *total(pl.when(success).then(steps), "steps_success"),
        *total(pl.when(~success).then(steps), "steps_failure"),
    ]
    return {
        "partials": source.group_by(keyed).agg(aggregations),
        "reasons": source.group_by([*keyed, "reason"]).agg(pl.len().cast(pl.Int64).alias("n")),
        "clusters": source.group_by([*keyed, cluster]).agg(resampled),
    }


def _summary_finish(
    parts: dict[str, pl.DataFrame], *, by: Sequence[str], **statistics: Any
) -> pl.DataFrame:
    """Sum the partials of :func:`_summary_partials` into groups and add the TS interval."""
    partials = parts["partials"]
    by = list(column_names("by", by))
    judged = [name for name in JUDGED if f"__{name}" in partials.columns]
    keyed = by or ["_all"]
    # Integer-valued sums: a group's totals are its partial rows' sums however the episodes were
    # sharded. The bootstrap needs one row per cluster, which the partials already are: the
    # plan's input is keyed by the cluster, so every engine keeps a cluster's rows in one shard.
    table = (
        partials.group_by(keyed)
        .agg(pl.all().sum())
        .join(_failure_counts(parts["reasons"], keyed), on=keyed, how="left", nulls_equal=True)
    )

    def mean(name: str) -> pl.Expr:
        return pl.when(pl.col(f"__{name}_n") > 0).then(pl.col(f"__{name}") / pl.col(f"__{name}_n"))

    compliant_n = pl.col("__compliant_n")
    rates = {
        "gp_rate": mean("gp"),
        "compliance_rate": mean("compliant"),
        "violation_rate": pl.when(compliant_n > 0).then(
            (compliant_n - pl.col("__compliant")) / compliant_n
        ),
        "mean_steps": mean("steps"),
        "mean_steps_success": mean("steps_success"),
        "mean_steps_failure": mean("steps_failure"),
    }
    table = table.with_columns(
        *(mean(name).cast(pl.Float64).alias(f"{name}_rate") for name in judged),
        *(pl.col(f"__{name}_n").alias(f"n_{name}_judged") for name in judged),
        **rates,
    )
    out = table.join(
        _rate_intervals(parts["clusters"], keyed, judged, statistics),
        on=keyed,
        how="left",
        nulls_equal=True,
    ).with_columns((pl.col("successes") / pl.col("n")).alias("ts"))
    with_ci = ("gp_rate", "compliance_rate", "violation_rate")
    columns = [*by, "n", "n_clusters", "successes", "ts", "ci_low", "ci_high", "ci_method", "test"]
    columns += [c for name in rates for c in _with_interval(name, name in with_ci)]
    columns += [f"fail_{r}" for r in REASONS]
    columns += [
        c for name in judged for c in (*_with_interval(f"{name}_rate", True), f"n_{name}_judged")
    ]
    return out.select(columns).sort(by, nulls_last=False) if by else out.select(columns)


def _with_interval(name: str, interval: bool) -> tuple[str, ...]:
    return (name, f"{name}_ci_low", f"{name}_ci_high") if interval else (name,)


def _rate_intervals(
    clusters: pl.DataFrame, keyed: list[str], judged: list[str], statistics: dict[str, Any]
) -> pl.DataFrame:
    """Per group: the intervals of TS and of every rate, one ``ci_method`` for them all.

    :func:`recoverylab.stats.rate_cells` over the per-cluster counts: under ``auto`` each group
    gets the Korn–Graubard interval unless the bootstrap is accurate for every one of its
    rates, so ``ci_method`` and ``test`` name the method of every interval of the row. A rate
    without a judged episode in a group has no interval (null), like its estimate.
    """
    violations = (pl.col("__compliant_n") - pl.col("__compliant")).alias("__violations")
    rates = {  # name: (events, denominator) per cluster
        "ts": ("successes", "n"),
        "gp_rate": ("__gp", "__gp_n"),
        "compliance_rate": ("__compliant", "__compliant_n"),
        "violation_rate": ("__violations", "__compliant_n"),
        **{f"{name}_rate": (f"__{name}", f"__{name}_n") for name in judged},
    }
    long = stats.rate_cells(
        clusters.with_columns(violations),
        cells=keyed,
        numerator=[num for num, _ in rates.values()],
        denominator=[den for _, den in rates.values()],
        names=list(rates),
        **statistics,
    )
    wide = long.filter(pl.col("rate") == "ts").select(
        *keyed, "ci_low", "ci_high", "n_clusters", "ci_method", "test"
    )
    for name in list(rates)[1:]:
        part = long.filter(pl.col("rate") == name).select(
            *keyed,
            pl.col("ci_low").alias(f"{name}_ci_low"),
            pl.col("ci_high").alias(f"{name}_ci_high"),
        )
        wide = wide.join(part, on=keyed, how="left", nulls_equal=True)
    return wide


def _failure_counts(reasons: pl.DataFrame, keyed: list[str]) -> pl.DataFrame:
    """Per group: ``fail_<reason>`` for every reason of :data:`REASONS` (0 when none).

    ``reasons``: the partials' episodes per (group, reason), of any number of shards; reasons
    that are not in :data:`REASONS` (a scored frame the caller changed) and nulls count nowhere.
    """
    n = pl.col("n")
    return reasons.group_by(keyed).agg(
        n.filter(pl.col("reason") == r).sum().cast(pl.Int64).alias(f"fail_{r}") for r in REASONS
    )


@reads_inputs
def barrier_drop(
    scored: pl.LazyFrame | pl.DataFrame,
    *,
    by: Sequence[str] = (),
    cluster: str = "goal_id",
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci_method: Literal["percentile", "bca"] = "percentile",
    seed: int = 0,
    engine: object = "polars",
    **deprecated: Any,
) -> pl.DataFrame:
    """TS without barriers minus TS with barriers, paired by goal, with a cluster interval.

    The seed instantiates every goal in the three regimes; the drop compares each goal's
    ``barrier_free`` episodes with its ``recoverable`` and ``unrecoverable`` episodes. Only goals
    with episodes on both sides (within the group) are paired; the others are counted in
    ``unpaired_goals`` and left out. The interval resamples goals once for both sides
    (joint per-goal types, :func:`recoverylab.stats.ratio_difference`).

    Parameters
    ----------
    scored
        The output of :func:`score`, with a ``goal_id`` column (from ``cases``).
    by
        Grouping columns (default none: one row); e.g. ``("model",)``. ``regime`` cannot be
        one: the drop compares the regimes.
    cluster
        The pairing and resampling unit (default ``goal_id``).
    n_resamples, confidence, ci_method, seed
        Cluster bootstrap settings (``method``: deprecated alias of ``ci_method``).
    engine
        ``"polars"`` (default) or a SparkSession, as in :func:`summarize`.

    Returns
    -------
    pl.DataFrame
        One row per group with at least one paired goal, sorted by ``by``: the ``by`` columns,
        ``goals`` (paired), ``unpaired_goals``, ``n_without`` / ``n_with`` (episodes of the
        paired goals), ``ts_without``, ``ts_with``, ``drop`` = ts_without - ts_with,
        ``ci_low``, ``ci_high`` (the goal bootstrap's), ``ci_method`` (``percentile`` or
        ``bca``) and ``test`` (``none``: a bootstrap interval inverts no test).

    Raises
    ------
    ParameterError
        A missing ``by`` or ``cluster`` column, or ``regime`` among ``by``.

    Examples
    --------
    >>> import polars as pl
    >>> scored = pl.DataFrame({"goal_id": ["g1", "g1", "g1"],
    ...     "regime": ["barrier_free", "recoverable", "unrecoverable"],
    ...     "success": [True, True, False]})
    >>> barrier_drop(scored, n_resamples=200)["drop"].to_list()
    [0.5]
    """
    return _run_bootstrap(
        "barrier_drop",
        engine,
        plan.Input("scored", scored, key=cluster),
        plan.Stage(
            "barrier drop partials", functools.partial(_drop_partials, by=by, cluster=cluster)
        ),
        functools.partial(_drop_finish, cluster=cluster),
        deprecated,
        n_resamples=n_resamples,
        confidence=confidence,
        ci_method=ci_method,
        seed=seed,
    )


def _drop_partials(
    frames: Mapping[str, pl.LazyFrame], state: object, *, by: Sequence[str], cluster: str
) -> dict[str, pl.LazyFrame]:
    """Check :func:`barrier_drop`'s columns; return its per (group, goal) additive partials."""
    schema = frames["scored"].collect_schema()
    by = _check_by(by, schema)
    if "regime" in by:
        raise ParameterError(
            "parameter `by` includes `regime`; barrier_drop compares the regimes of each goal. "
            "Hint: group by the other keys only."
        )
    for name in ("regime", "success"):
        if name not in schema:
            raise ParameterError(
                f"scored frame has no column `{name}`; pass the output of goal.score."
            )
    if cluster not in schema:
        raise ParameterError(
            f"parameter `cluster` is {cluster!r}, which is not a column of the scored frame; "
            "barrier_drop pairs the regimes of a goal. Hint: give `cases` a `goal_id` column."
        )
    source, keyed = _keyed(frames["scored"], by)
    free = pl.col("regime") == "barrier_free"
    barrier = pl.col("regime").is_in(list(BARRIER_REGIMES))
    success = pl.col("success")
    per_goal = source.group_by([*keyed, cluster]).agg(
        (success & free).sum().cast(pl.Int64).alias("s_without"),
        free.sum().cast(pl.Int64).alias("n_without"),
        (success & barrier).sum().cast(pl.Int64).alias("s_with"),
        barrier.sum().cast(pl.Int64).alias("n_with"),
    )
    return {"per_goal": per_goal}


def _drop_finish(
    parts: dict[str, pl.DataFrame], *, cluster: str, **statistics: Any
) -> pl.DataFrame:
    """Pair the goals of :func:`_drop_partials` and add the joint cluster interval."""
    per_goal = parts["per_goal"]
    by = [c for c in per_goal.columns if c not in (cluster, "_all", *_DROP_VALUES)]
    keyed = by or ["_all"]
    # Partials of one goal may come from several shards: add them up first.
    per_goal = per_goal.group_by([*keyed, cluster]).agg(pl.all().sum())
    paired = (pl.col("n_without") > 0) & (pl.col("n_with") > 0)
    table = (
        per_goal.group_by(keyed)
        .agg(
            paired.sum().cast(pl.Int64).alias("goals"),
            (~paired).sum().cast(pl.Int64).alias("unpaired_goals"),
            pl.col(*_DROP_VALUES).filter(paired).sum(),
        )
        .filter(pl.col("goals") > 0)
    )
    intervals = stats.cluster_bootstrap(
        per_goal.filter(paired),
        cells=keyed,
        values=list(_DROP_VALUES),
        statistic=stats.ratio_difference,
        **statistics,
    )
    ts_without = pl.col("s_without") / pl.col("n_without")
    ts_with = pl.col("s_with") / pl.col("n_with")
    out = table.join(intervals, on=keyed, how="left", nulls_equal=True).select(
        *by,
        "goals",
        "unpaired_goals",
        "n_without",
        "n_with",
        ts_without.alias("ts_without"),
        ts_with.alias("ts_with"),
        (ts_without - ts_with).alias("drop"),
        "ci_low",
        "ci_high",
        pl.lit(statistics["ci_method"], pl.String).alias("ci_method"),
        # the percentile and BCa bootstrap intervals invert no test
        pl.lit(stats.RATE_TESTS[statistics["ci_method"]], pl.String).alias("test"),
    )
    return out.sort(by, nulls_last=False) if by else out


def _check_by(by: Sequence[str], schema: pl.Schema) -> list[str]:
    names = list(column_names("by", by))
    missing = [c for c in names if c not in schema]
    if missing:
        shown = ", ".join(f"`{c}`" for c in missing)
        raise ParameterError(
            f"parameter `by` names {shown}, which the scored frame does not have; its "
            f"columns are: {', '.join(schema.names())}."
        )
    return names


def _pick_cluster(cluster: str | None, schema: pl.Schema) -> str:
    absent = [c for c in _SCORED_REQUIRED if c not in schema]
    if absent:
        shown = ", ".join(f"`{c}`" for c in absent)
        raise ParameterError(f"scored frame lacks {shown}; pass the output of goal.score.")
    if cluster is None:
        cluster = _default_cluster(schema)
    if cluster not in schema:
        raise ParameterError(
            f"parameter `cluster` is {cluster!r}, which is not a column of the scored frame; "
            "use `goal_id` or `case_id`."
        )
    return cluster
