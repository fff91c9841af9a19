"""Run-to-run reliability of repeated attempts: pass^k, the flip rate and the ICC of repeats.

pass@k asks whether an agent *can* recover a state (any of k tries passes); pass^k asks whether it
does so *reliably* (all k tries pass). Convention (tau-bench's): for a unit (state, agent) with
n repeats of which c passed, pass^k = C(c, k) / C(n, k), the probability that k repeats drawn
without replacement from the n all pass; it is the unbiased estimator of p^k when the repeats are
exchangeable, and with n = k it is "all k passed". Units with n < k are refused, never scored.

Beside it: the *flip rate* (share of units whose repeats disagree, 0 < c < n) and the one-way
intra-class correlation of the pass outcome across repeats of a unit (1: repeats always agree
beyond chance; 0: repeats are as varied as different states). Every interval resamples workflows,
the cluster unit of the takeover protocol (ARCHITECTURE §3.4), so repeats, depths and root causes
of one workflow move together.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._errors import (
    InputError,
    ParameterError,
    RecoveryLabError,
    SchemaError,
    format_keys,
)
from recoverylab.schema import column_names
from recoverylab.takeover import _stages
from recoverylab.takeover._inputs import check_k, check_settings, sort_keys

__all__ = [
    "RELIABILITY_COLUMNS",
    "RELIABILITY_METHOD_COLUMNS",
    "join_reliability",
    "pass_hat_k_expr",
    "reliability",
    "repeats_reliability",
]

#: Columns :func:`reliability` adds after the ``by`` keys.
RELIABILITY_COLUMNS = tuple(
    f"{name}{end}"
    for name in ("pass_hat_k", "flip_rate", "repeat_icc")
    for end in ("", "_ci_low", "_ci_high")
)

#: What :func:`join_reliability` appends after :data:`RELIABILITY_COLUMNS`: the interval method
#: and test of pass^k and the flip rate (one per row), then those of the ICC (a bootstrap).
RELIABILITY_METHOD_COLUMNS = (
    "reliability_ci_method",
    "reliability_test",
    "repeat_icc_ci_method",
    "repeat_icc_test",
)

_ICC_VALUES = ("__s2m", "__s", "__q", "__m", "__m2", "__one")


def pass_hat_k_expr(n: str | pl.Expr, c: str | pl.Expr, k: int) -> pl.Expr:
    """Return pass^k = C(c, k) / C(n, k) (all of k repeats pass) as a polars expression.

    Evaluated as the product ∏ᵢ₌₀^{k−1} (c − i)/(n − i), clipped at 0 once c < k: no factorials,
    exact 0 and 1 at the ends.

    Parameters
    ----------
    n, c
        Column names or expressions for repeats and passes (0 <= c <= n).
    k
        Positive integer.

    Returns
    -------
    polars.Expr
        Float64; null where n < k (undefined).

    Examples
    --------
    >>> frame = pl.DataFrame({"n": [3, 5, 5, 2], "c": [3, 4, 2, 2]})
    >>> frame.select(pass_hat_k_expr("n", "c", 3).round(4)).to_series().to_list()
    [1.0, 0.4, 0.0, None]
    """
    k = check_k(k)
    n_expr = (pl.col(n) if isinstance(n, str) else n).cast(pl.Float64)
    c_expr = (pl.col(c) if isinstance(c, str) else c).cast(pl.Float64)
    hit = pl.lit(1.0)
    for i in range(k):
        hit = hit * ((c_expr - i).clip(lower_bound=0.0) / (n_expr - i))
    return pl.when(n_expr >= k).then(hit)


def _partials(
    frame: pl.LazyFrame, by: Sequence[str], k: int, cluster: str = "workflow_id"
) -> pl.LazyFrame:
    """Per (cluster, cell) partials over scored units: pass^k sum, flips, ICC sums."""
    scored = frame.filter(pl.col("excluded").is_null())
    n = pl.col("repeats").cast(pl.Float64)
    c = pl.col("n_passed").cast(pl.Float64)
    per_unit = scored.with_columns(
        pass_hat_k_expr("repeats", "n_passed", k).alias("__hat"),
        ((pl.col("n_passed") > 0) & (pl.col("n_passed") < pl.col("repeats")))
        .cast(pl.Float64)
        .alias("__flip"),
        (c * c / n).alias("__s2m"),
        c.alias("__s"),
        c.alias("__q"),  # passes are 0/1, so the sum of squares is the sum
        n.alias("__m"),
        (n * n).alias("__m2"),
        pl.lit(1.0).alias("__one"),
    )
    keys = [cluster, *(b for b in by if b != cluster)]
    # Summed in sorted order as one list (polars drops a sort before a plain sum): float sums
    # then do not depend on row order, so cluster types and bootstrap draws never do either.
    return per_unit.group_by(keys).agg(
        *(
            pl.col(v).sort().implode().list.sum().abs().alias(v)
            for v in ("__hat", "__flip", *_ICC_VALUES)
        ),
    )


def _icc_interval(
    partials: pl.DataFrame, by: list[str], settings: dict[str, object]
) -> pl.DataFrame:
    """Return the ICC of repeats with its cluster bootstrap interval (not a rate: not exact).

    ``auto`` and ``korn-graubard`` (the rates' methods) give the ICC the percentile bootstrap.
    """
    method = settings["ci_method"] if settings["ci_method"] in stats.CI_METHODS else "percentile"
    boot = stats.cluster_bootstrap(
        partials,
        cells=by,
        values=list(_ICC_VALUES),
        statistic=stats.icc_oneway,
        **{**settings, "ci_method": method},  # type: ignore[arg-type]
    )
    return boot.select(
        *by,
        pl.col("estimate").fill_nan(None).alias("repeat_icc"),
        pl.col("ci_low").fill_nan(None).alias("repeat_icc_ci_low"),
        pl.col("ci_high").fill_nan(None).alias("repeat_icc_ci_high"),
        pl.lit(method, pl.String).alias("repeat_icc_ci_method"),
        pl.lit(stats.RATE_TESTS[str(method)], pl.String).alias("repeat_icc_test"),
    )


def _rate_intervals(
    partials: pl.DataFrame, by: list[str], settings: dict[str, object]
) -> pl.DataFrame:
    """pass^k and the flip rate with :func:`stats.rate_cells` intervals, one method per row.

    Their per-workflow values are sums of per-unit fractions (pass^k from n > k repeats is
    C(c, k)/C(n, k)) over the workflow's units: bounded cluster means, which the rates'
    intervals take as they are.
    """
    long = stats.rate_cells(
        partials,
        cells=by,
        numerator=["__hat", "__flip"],
        denominator=["__units", "__units"],
        names=["pass_hat_k", "flip_rate"],
        **settings,  # type: ignore[arg-type]
    )
    wide = long.group_by(by).agg(pl.col("ci_method").first(), pl.col("test").first())
    for name in ("pass_hat_k", "flip_rate"):
        part = long.filter(pl.col("rate") == name).select(
            *by,
            pl.col("estimate").alias(name),
            pl.col("ci_low").alias(f"{name}_ci_low"),
            pl.col("ci_high").alias(f"{name}_ci_high"),
        )
        wide = wide.join(part, on=by, how="left", nulls_equal=True)
    return wide


def reliability(
    states: object,
    attempts: object,
    *,
    by: Sequence[str] = ("agent", "depth"),
    k: int = 3,
    common_sample: bool = False,
    common_states: bool = False,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    ci_method: str = "auto",
    seed: int = 0,
    engine: object = "polars",
) -> pl.DataFrame:
    """Return pass^k, the flip rate and the ICC of repeats per (agent, depth, *by*).

    Parameters
    ----------
    states, attempts, by, k, common_sample, common_states
        As in :func:`recoverylab.takeover.summarize` (units with fewer than k repeats are
        refused there and here).
    confidence, n_resamples, ci_method, seed
        Workflow-clustered interval settings. pass^k and the flip rate take
        :func:`recoverylab.stats.rate_cells`' methods (``auto``, the default: Korn–Graubard
        unless the bootstrap is accurate for both; ``korn-graubard``, ``percentile``,
        ``bca``); the ICC, not a rate, takes the bootstrap (percentile under ``auto`` and
        ``korn-graubard``).
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"``) or an engine object (see
        :mod:`recoverylab.engines`); the result is the same.

    Returns
    -------
    polars.DataFrame
        One row per cell: the ``by`` keys, ``k``, ``attempted_states``, then
        :data:`RELIABILITY_COLUMNS`: ``pass_hat_k`` (mean over units of C(c, k)/C(n, k)),
        ``flip_rate`` (share of units with 0 < c < n), ``repeat_icc`` (one-way ANOVA ICC of
        the pass outcome across repeats of a unit; null when undefined, e.g. every repeat
        equal), each with a workflow-clustered interval; then ``ci_method`` and ``test`` (of
        pass^k and the flip rate: ``korn-graubard`` / ``exact-binomial``, or a bootstrap /
        ``none``) and ``repeat_icc_ci_method``, ``repeat_icc_test`` (the ICC's bootstrap).

    Examples
    --------
    >>> from recoverylab import synth
    >>> tables = synth.generate("takeover", 20, seed=3)
    >>> out = reliability(tables["states"], tables["attempts"], n_resamples=200)
    >>> bool((out["pass_hat_k"] <= 1).all())
    True
    """
    columns = column_names("by", by)
    flags: dict[str, Any] = {"common_states": common_states, "common_sample": common_sample}
    settings: dict[str, object] = {
        "n_resamples": n_resamples,
        "confidence": confidence,
        "ci_method": ci_method,
        "seed": seed,
    }
    return engines.run(
        engine,
        plan.Plan(
            inputs=_stages.plan_inputs(states, attempts),
            stages=_stages.workflow_stages(
                columns, k, "reliability partials", _plan_partial, **flags
            ),
            check=functools.partial(check_settings, k, confidence, n_resamples, seed, ci_method),
            finish=functools.partial(
                _finish, by=list(columns), k=k, count="attempted_states", settings=settings
            ),
        ),
    )


def _plan_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    common_sample: bool,
) -> dict[str, pl.LazyFrame]:
    """Per (workflow, cell) partials of one shard's scored units."""
    frame, inputs = _stages.scored_shard(
        frames, state, by=by, k=k, common_states=common_states, common_sample=common_sample
    )
    return {"partials": _partials(frame, list(inputs.by), k)}


def _finish(
    parts: dict[str, pl.DataFrame],
    *,
    by: list[str],
    k: int,
    count: str,
    settings: dict[str, object],
) -> pl.DataFrame:
    """Cells with their unit count and the three statistics with bootstrap intervals."""
    partials = parts["partials"].with_columns(pl.col("__one").alias("__units"))
    cells = partials.group_by(by).agg(pl.col("__units").sum().cast(pl.Int64).alias(count))
    cells = cells.select(*by, pl.lit(k, pl.Int64).alias("k"), count)
    for part in (_rate_intervals(partials, by, settings), _icc_interval(partials, by, settings)):
        cells = cells.join(part, on=by, how="left", nulls_equal=True)
    methods = ("ci_method", "test", *RELIABILITY_METHOD_COLUMNS[2:])
    ordered = cells.select(*by, "k", count, *RELIABILITY_COLUMNS, *methods)
    return ordered.sort(sort_keys(ordered.schema, by), nulls_last=False)


def repeats_reliability(
    trials: object,
    *,
    unit: Sequence[str],
    cluster: str,
    outcome: str = "passed",
    by: Sequence[str] = (),
    k: int = 3,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    ci_method: str = "auto",
    seed: int = 0,
    engine: object = "polars",
) -> pl.DataFrame:
    """pass^k, flip rate and ICC of repeats for any repeated-trials table (one row per trial).

    Parameters
    ----------
    trials
        Any table :func:`recoverylab.io.scan` reads, one row per trial.
    unit
        Columns naming what is repeated (e.g. task_id, model): a unit's rows are its repeats.
    cluster
        The cluster the bootstrap resamples (e.g. task_id or a task family); each unit must
        lie in one cluster.
    outcome
        Boolean column: the trial passed.
    by
        Cell keys (columns constant within a unit).
    k, confidence, n_resamples, ci_method, seed, engine
        As in :func:`reliability`.

    Returns
    -------
    polars.DataFrame
        One row per cell: ``by``, ``k``, ``units``, then :data:`RELIABILITY_COLUMNS` and the
        method columns of :func:`reliability`.

    Raises
    ------
    ParameterError
        For a missing column, or units with fewer than ``k`` trials (named).
    SchemaError
        For an outcome column that is not boolean or has nulls.
    InputError
        For a unit spread over several clusters.

    Examples
    --------
    >>> trials = pl.DataFrame({"task": ["a"] * 3 + ["b"] * 3,
    ...                        "passed": [True, True, True, True, False, False]})
    >>> out = repeats_reliability(trials, unit=["task"], cluster="task", k=2, n_resamples=50)
    >>> out.select("units", "pass_hat_k", "flip_rate").row(0)
    (2, 0.5, 0.5)
    """
    columns: dict[str, Any] = {
        "unit": tuple(unit),
        "cluster": cluster,
        "outcome": outcome,
        "by": tuple(by),
    }
    settings: dict[str, object] = {
        "n_resamples": n_resamples,
        "confidence": confidence,
        "ci_method": ci_method,
        "seed": seed,
    }
    return engines.run(
        engine,
        plan.Plan(
            inputs=(plan.Input("trials", trials, key=functools.partial(_trials_key, **columns)),),
            check=functools.partial(check_settings, k, confidence, n_resamples, seed, ci_method),
            stages=(
                plan.Stage(
                    "counting trials per unit",
                    functools.partial(_trials_partial, **columns),
                    functools.partial(_units_combine, **columns, k=k),
                ),
            ),
            finish=functools.partial(
                _units_finish, by=list(by), cluster=cluster, k=k, settings=settings
            ),
        ),
    )


def _trials_key(
    schema: pl.Schema, *, unit: tuple[str, ...], cluster: str, outcome: str, by: tuple[str, ...]
) -> str:
    """Check the trial columns against ``schema``; return the cluster column."""
    missing = [c for c in (*unit, cluster, outcome, *by) if c not in schema]
    if missing or not unit:
        raise ParameterError(
            f"trials: column `{(missing or ['unit'])[0]}` is not in the table (columns: "
            f"{', '.join(schema.names())}); `unit`, `cluster`, `outcome` and `by` must name "
            "columns, and `unit` at least one."
        )
    if schema[outcome] != pl.Boolean:
        raise SchemaError(f"trials: column `{outcome}` is {schema[outcome]}; it must be boolean.")
    return cluster


def _unit_keys(unit: Sequence[str], by: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*unit, *by]))


def _trials_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    unit: tuple[str, ...],
    cluster: str,
    outcome: str,
    by: tuple[str, ...],
) -> dict[str, pl.LazyFrame]:
    """Per (unit, cluster) of one shard: trials, passes and null outcomes."""
    lazy = frames["trials"]
    _trials_key(lazy.collect_schema(), unit=unit, cluster=cluster, outcome=outcome, by=by)
    keys = _unit_keys(unit, by)
    counts = lazy.group_by(list(dict.fromkeys([*keys, cluster]))).agg(
        pl.len().cast(pl.Int64).alias("repeats"),
        pl.col(outcome).sum().cast(pl.Int64).alias("n_passed"),
        pl.col(outcome).null_count().cast(pl.Int64).alias("__nulls"),
    )
    return {"units": counts}


def _units_combine(
    parts: dict[str, pl.DataFrame],
    state: Any,
    *,
    unit: tuple[str, ...],
    cluster: str,
    outcome: str,
    by: tuple[str, ...],
    k: int,
) -> pl.DataFrame:
    """Per unit: repeats and passes over every shard; then check nulls, one cluster a unit, k."""
    keys = _unit_keys(unit, by)
    per_unit = (
        parts["units"]
        .group_by(keys)
        .agg(
            pl.col("repeats").sum(),
            pl.col("n_passed").sum(),
            pl.col("__nulls").sum(),
            pl.col(cluster).n_unique().alias("__clusters"),
            *([] if cluster in keys else [pl.col(cluster).first()]),
        )
    )
    _check_units(per_unit, keys, outcome, k)
    return per_unit


def _units_finish(
    per_unit: pl.DataFrame, *, by: list[str], cluster: str, k: int, settings: dict[str, object]
) -> pl.DataFrame:
    """Sum the units per (cluster, cell); bootstrap the three statistics over clusters."""
    # One cell for the whole table when there are no keys (joins need a key).
    cells = by or ["__cell"]
    units = per_unit.lazy().with_columns(
        pl.lit(None, pl.String).alias("excluded"), pl.lit("all").alias("__cell")
    )
    partials = _partials(units, cells, k, cluster=cluster).collect(engine="streaming")
    out = _finish({"partials": partials}, by=cells, k=k, count="units", settings=settings)
    return out if by else out.drop("__cell")


def _check_units(per_unit: pl.DataFrame, keys: list[str], outcome: str, k: int) -> None:
    checks: tuple[tuple[pl.Expr, str, type[RecoveryLabError]], ...] = (
        (
            pl.col("__nulls") > 0,
            f"have nulls in `{outcome}`; every trial must pass or fail",
            SchemaError,
        ),
        (pl.col("__clusters") > 1, "lie in more than one cluster", InputError),
        (
            pl.col("repeats") < k,
            f"have fewer than k = {k} trials (pass^k needs k)",
            ParameterError,
        ),
    )
    for mask, message, error in checks:
        bad = per_unit.filter(mask)
        if bad.height:
            shown = format_keys(bad.select(keys).rows(), bad.height)
            raise error(f"trials: {bad.height} unit(s) {message} ({shown}).")


def join_reliability(
    summary: pl.DataFrame, states: object, attempts: object, **options: object
) -> pl.DataFrame:
    """Append :data:`RELIABILITY_COLUMNS` and :data:`RELIABILITY_METHOD_COLUMNS` to a summary.

    The summary is :func:`~recoverylab.takeover.summarize`'s; its own ``ci_method`` and ``test``
    name its rates' intervals, ``reliability_ci_method`` and ``reliability_test`` those of
    pass^k and the flip rate.
    """
    by = list(options["by"])  # type: ignore[call-overload]
    found = reliability(states, attempts, **options)  # type: ignore[arg-type]
    extra = found.select(
        *by,
        *RELIABILITY_COLUMNS,
        pl.col("ci_method").alias("reliability_ci_method"),
        pl.col("test").alias("reliability_test"),
        *RELIABILITY_METHOD_COLUMNS[2:],
    )
    return summary.join(extra, on=by, how="left", nulls_equal=True, maintain_order="left")
