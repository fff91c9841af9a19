"""Cell summaries of takeover attempts: EAR, pass@1, pass@k and the repair funnel, with CIs.

Two phases (ARCHITECTURE §1.3): scored units are summed into per-(workflow × cell) partials in a
lazy query; only those partials are collected, then summed into cells and handed to
:mod:`recoverylab.stats` for workflow-clustered intervals and tests. Wilson intervals need no
workflow: their partials are per cell and shard (:func:`_cell_partials`), and the cells' pass@
sums are added from exact integer parts either way, so both give the same counts. The
bootstrap's per-(workflow × cell) partials are, where the units carry integer codes of their
group, sums in a dense table of those codes (:func:`_dense_partials`): the units' few columns
are collected once instead of grouped by a hash table, with the same rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab.schema import column_names
from recoverylab.takeover import _reliability
from recoverylab.takeover._dense_sums import dense_group_sums
from recoverylab.takeover._inputs import (
    CODES,
    DIFFERENCES,
    NOT_COMMON,
    REJECTED,
    check_settings,
    eligibility_counts,
    pass_at_k_expr,
    sort_keys,
    unit_differences,
)
from recoverylab.takeover._packed_units import decoded
from recoverylab.takeover._stages import (
    cluster_keys,
    fixed_point_parts,
    from_fixed_point_parts,
    join_on,
    plan_inputs,
    rate,
    scored_shard,
    workflow_stages,
)

#: (rate, numerator, denominator) of every rate in :func:`summarize`, in output order.
RATES = (
    ("ear", "n_aware", "attempts"),
    ("pass_at_1", "pass_at_1_sum", "attempted_states"),
    ("pass_at_k", "pass_at_k_sum", "attempted_states"),
    ("aware_rate", "n_aware", "attempts"),
    ("fixed_rate", "n_fixed", "attempts"),
    ("derived_rate", "n_derived", "attempts"),
    ("pass_rate", "n_passed", "attempts"),
    ("fixed_given_aware_rate", "aware_fixed", "n_aware"),
    ("derived_given_fixed_rate", "aware_fixed_derived", "aware_fixed"),
    ("pass_given_derived_rate", "aware_fixed_derived_passed", "aware_fixed_derived"),
)

#: Per-unit flags of the repair funnel, summed over a workflow's scored units.
_FUNNEL_COUNTS = (
    "n_aware",
    "n_fixed",
    "n_derived",
    "n_passed",
    "aware_fixed",
    "aware_fixed_derived",
    "aware_fixed_derived_passed",
    "off_funnel_fixed",
    "off_funnel_derived",
    "off_funnel_passed",
)
_COUNTS = (
    "attempted_states",
    "root_causes",
    "attempts",
    "excluded_attempts",
    "excluded_not_common_state",
    "excluded_not_common_sample",
    *_FUNNEL_COUNTS,
)
_SUMS = ("pass_at_1_sum", "pass_at_k_sum")
#: The exact parts (:func:`fixed_point_parts`) of each pass@ sum, added up into cells.
_PARTS = {name: (f"{name}_high", f"{name}_low") for name in _SUMS}
_PART_COLUMNS = tuple(part for pair in _PARTS.values() for part in pair)
_STATE_COUNTS = (
    "eligible_states",
    "rejected_states",
    "rejected_replay_mismatch",
    "rejected_missing_expected",
)


def _partials(
    frame: pl.LazyFrame, by: Sequence[str], unit_keys: Sequence[str], k: int
) -> pl.LazyFrame:
    """Per (workflow_id, *by) additive partials of scored units, plus exclusion counts.

    Unscored units are zeroed (or nulled) before the group-by, so that every aggregation is a
    plain sum or count: a ``filter`` inside a group-by aggregation is several times slower.
    The group-by keys and the root-cause count use integer :data:`CODES` (faster than text;
    :func:`_group_key`); the names are joined back to the few partial rows. When the agent is
    the only attempt-level key, the units are summed in a dense table of their codes instead
    (:func:`_dense_partials`, the same rows). Besides the exact parts of the pass@ sums
    (:data:`_PARTS`), each workflow's sums as floats, for the bootstrap.
    """
    dense = _dense_partials(frame, by, k) if tuple(unit_keys) == ("agent",) else None
    if dense is None:
        keys, decode = _group_key(frame, by, unit_keys)
        dense = decode(_partial_sums(frame, keys, {}))
    partials = dense.with_columns(
        from_fixed_point_parts(pl.col(high), pl.col(low)).alias(name)
        for name, (high, low) in _PARTS.items()
    )
    return partials.select(
        *cluster_keys(by),
        "attempted_states",
        "root_causes",
        *_COUNTS[2:],
        *_SUMS,
        *_PART_COLUMNS,
    )


def _dense_partials(frame: pl.LazyFrame, by: Sequence[str], k: int) -> pl.LazyFrame | None:
    """:func:`_partial_sums` by the state's cell and agent codes, as dense sums; or None.

    The units are collected once (their codes, names and masked counts) and summed by
    :func:`dense_group_sums` (no hash group-by; its names are any row's, no join), which
    answers None where its table would be large or its sums inexact: then the group-by runs.
    A unit's pass@1 and pass@k are functions of its repeats and passes (:func:`units`), which
    take few values: their exact parts are computed once per distinct pair
    (:func:`_pass_parts`), not per unit.
    """
    names = cluster_keys(by)
    counts = _masked_columns({}, parts=False)
    # in memory: one chunk, which numpy reads without a copy
    table = frame.select(pl.col(CODES[2]), pl.col(CODES[3]), *names, *counts).collect(
        engine="in-memory"
    )
    sums = dense_group_sums(
        table,
        [CODES[2], CODES[3]],
        sums=list(_unit_counts()),
        distinct=["__root"],
        carry=names,
        derived=functools.partial(_pass_parts, k=k),
        derived_from=["attempts", "n_passed"],
    )
    if sums is None:
        return None
    differences = unit_differences([c for c in _COUNTS if c in DIFFERENCES])
    return decoded(sums.lazy().rename({"__root": "root_causes"}).with_columns(differences))


def _pass_parts(pairs: pl.DataFrame, *, k: int) -> pl.DataFrame:
    """Return the pass@ parts (:data:`_PARTS`) of scored units with these repeats and passes.

    ``pairs``: ``attempts`` (a scored unit's repeats; 0 for an unscored unit, whose parts are
    0) and ``n_passed``. The same expressions as :func:`units` and :func:`_masked_columns`,
    so the same bits.
    """
    repeats, passed = pl.col("attempts"), pl.col("n_passed")
    rates = {
        "pass_at_1_sum": passed / repeats,
        "pass_at_k_sum": pass_at_k_expr(repeats, passed, k),
    }
    return pairs.select(_exact_parts(rates, repeats > 0))


def _exact_parts(rates: Mapping[str, pl.Expr], scored: pl.Expr) -> list[pl.Expr]:
    """Return the exact parts (:data:`_PARTS`) of each pass@ sum's unit rate, 0 unless scored."""
    return [
        expr.alias(part)
        for name, pair in _PARTS.items()
        for expr, part in zip(
            fixed_point_parts(pl.when(scored).then(rates[name]).otherwise(0.0)), pair, strict=True
        )
    ]


def _cell_partials(frame: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """Per ``by`` cell additive partials of one shard's scored units (no interval needs more).

    As :func:`_partials`, summed over the shard's workflows, with the number of workflows with
    a scored unit: workflows, and the root causes within them, are never split between shards,
    so their distinct counts add up over shards. The few cells group fast by their own keys.
    """
    scored = pl.col("excluded").is_null()
    workflows = {"workflows": pl.when(scored).then(pl.col(CODES[0]))}
    partials = _partial_sums(frame, [pl.col(c) for c in by], workflows)
    return decoded(partials).select(
        *by, "attempted_states", "root_causes", "workflows", *_COUNTS[2:], *_PART_COLUMNS
    )


def _partial_sums(
    frame: pl.LazyFrame, keys: list[pl.Expr], distinct: Mapping[str, pl.Expr]
) -> pl.LazyFrame:
    """Sum each unit's counts and exact pass@ parts by ``keys``; count distinct root causes.

    ``distinct``: more counts (by name) of the distinct values of codes, null for an unscored
    unit. Every column is made before the group-by (:func:`_masked_columns`), which then only
    adds.
    """
    names = [key.meta.output_name() for key in keys]
    masked = frame.select(*keys, *_masked_columns(distinct))

    def count(name: str) -> pl.Expr:
        return (pl.col(name).n_unique() - (pl.col(name).null_count() > 0).cast(pl.UInt32)).cast(
            pl.Int64
        )

    return (
        masked.group_by(names)
        .agg(
            *(pl.col(name).sum() for name in _unit_counts()),
            count("__root").alias("root_causes"),
            *(count(f"__{name}").alias(name) for name in distinct),
            *(pl.col(part).sum() for part in _PART_COLUMNS),
        )
        .with_columns(unit_differences([c for c in _COUNTS if c in DIFFERENCES]))
    )


def _masked_columns(distinct: Mapping[str, pl.Expr], *, parts: bool = True) -> list[pl.Expr]:
    """Each unit's Int64 counts, root-cause code (``__root``), ``distinct`` codes and pass@ parts.

    Zero (codes: null) unless the unit is scored, so that a group's aggregations are plain sums
    and distinct counts. ``parts=False``: without the pass@ parts.
    """
    scored = pl.col("excluded").is_null()
    rates = {name: pl.col(name.removesuffix("_sum")) for name in _PARTS}
    return [
        *(expr.cast(pl.Int64).alias(name) for name, expr in _unit_counts().items()),
        pl.when(scored).then(pl.col(CODES[1])).alias("__root"),
        *(expr.alias(f"__{name}") for name, expr in distinct.items()),
        *(_exact_parts(rates, scored) if parts else []),
    ]


def _unit_counts() -> dict[str, pl.Expr]:
    """Each unit's share of the integer counts of its partial (zero unless scored)."""
    scored = pl.col("excluded").is_null()
    return {
        "attempted_states": scored,
        "attempts": pl.when(scored).then(pl.col("repeats")).otherwise(0),
        "excluded_attempts": pl.when(pl.col("excluded").is_in(REJECTED))
        .then(pl.col("repeats"))
        .otherwise(0),
        "excluded_not_common_state": (pl.col("excluded") == NOT_COMMON[0]).fill_null(False),
        "excluded_not_common_sample": (pl.col("excluded") == NOT_COMMON[1]).fill_null(False),
        **{
            c: pl.when(scored).then(pl.col(c)).otherwise(0)
            for c in _FUNNEL_COUNTS
            if c not in DIFFERENCES
        },
    }


def _group_key(
    frame: pl.LazyFrame, by: Sequence[str], unit_keys: Sequence[str]
) -> tuple[list[pl.Expr], Callable[[pl.LazyFrame], pl.LazyFrame]]:
    """Return the group-by keys of the partials and how to turn them back into the ``by`` keys.

    When the agent is the only attempt-level key, one integer: the state's (workflow, *state
    keys) code ``__cell`` times 2**32 plus the agent's code (a single integer key groups several
    times faster than text ones). Otherwise the workflow code and the cells. The names come
    back through lookups of the few distinct codes, as text (:func:`decoded`).
    """
    cells = [c for c in by if c != "workflow_id"]
    if tuple(unit_keys) != ("agent",):
        names = frame.select(CODES[0], "workflow_id").unique(CODES[0])
        keys = [pl.col(CODES[0]), *(pl.col(c) for c in cells)]
        return keys, lambda partials: decoded(partials.join(names, on=CODES[0]))
    shift = pl.lit(1 << 32, dtype=pl.UInt64)
    key = (pl.col(CODES[2]).cast(pl.UInt64) * shift + pl.col(CODES[3]).cast(pl.UInt64)).alias(
        "__key"
    )
    state_cells = [c for c in cells if c != "agent"]
    lookup = frame.select(CODES[2], "workflow_id", *state_cells).unique(CODES[2])
    agents = frame.select(CODES[3], "agent").unique(CODES[3])

    def decode(partials: pl.LazyFrame) -> pl.LazyFrame:
        split = partials.with_columns(
            (pl.col("__key") // shift).cast(pl.UInt32).alias(CODES[2]),
            (pl.col("__key") % shift).cast(pl.UInt32).alias(CODES[3]),
        )
        return decoded(split.join(lookup, on=CODES[2]).join(agents, on=CODES[3]))

    return [key], decode


def _bootstrap_intervals(
    partials: pl.DataFrame,
    cells: pl.DataFrame,
    by: Sequence[str],
    rates: Sequence[tuple[str, str, str]],
    *,
    confidence: float,
    n_resamples: int,
    ci_method: str,
    seed: int,
) -> pl.DataFrame:
    """Add ``<rate>_ci_low/_ci_high`` from a workflow-clustered bootstrap of every rate.

    Percentile: :func:`stats.cluster_bootstrap_ratios`; one resample of a cell's workflows serves
    all its rates and all cells with the same workflows (ARCHITECTURE §4: the same intervals for
    a fraction of the draws), and cells holding at least half of the workflows share one coupled
    stream, so adding a rate never moves an interval. BCa: :func:`stats.cluster_bootstrap` with
    cells (``*by``, rate). A workflow with attempts in a cell is a cluster of every rate (with
    0/0 for a conditional rate it does not inform: the number of informative workflows is part
    of the sampling variation).

    ``auto`` and ``korn-graubard``: :func:`stats.rate_cells` over the same per-workflow
    partials, one method per cell for all its rates (``auto``: Korn–Graubard unless the
    bootstrap is accurate for every rate of the cell); the other methods are the bootstrap's,
    as before. Adds ``ci_method`` and ``test``: what every interval of the row got.
    """
    metric = "__rate"
    # only the columns the intervals read are filtered (a copy of every column cost more)
    read = list(
        dict.fromkeys([*by, "workflow_id", *(c for _, num, den in rates for c in (num, den))])
    )
    clusters = partials.lazy().filter(pl.col("attempted_states") > 0).select(read).collect()
    if ci_method in ("auto", "korn-graubard"):
        return _rate_cells_intervals(
            clusters,
            cells,
            by,
            rates,
            confidence=confidence,
            n_resamples=n_resamples,
            ci_method=ci_method,
            seed=seed,
        )
    if ci_method == "percentile":
        boot = stats.cluster_bootstrap_ratios(
            clusters,
            cells=list(by),
            cluster="workflow_id",
            ratios=rates,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
        ).rename({"ratio": metric})
    else:
        long = pl.concat(
            [
                clusters.select(
                    *by,
                    pl.lit(name).alias(metric),
                    pl.col(num).cast(pl.Float64).alias("__num"),
                    pl.col(den).cast(pl.Float64).alias("__den"),
                )
                for name, num, den in rates
            ]
        ).filter(pl.col("__den").sum().over([*by, metric]) > 0)
        boot = stats.cluster_bootstrap(
            long,
            cells=[*by, metric],
            values=["__num", "__den"],
            n_resamples=n_resamples,
            confidence=confidence,
            ci_method=ci_method,
            seed=seed,
        )
    for name, _, _ in rates:
        part = boot.filter(pl.col(metric) == name).select(
            *by,
            pl.col("ci_low").fill_nan(None).alias(f"{name}_ci_low"),
            pl.col("ci_high").fill_nan(None).alias(f"{name}_ci_high"),
        )
        cells = join_on(cells, part, by)
    return cells.with_columns(
        pl.lit(ci_method, pl.String).alias("ci_method"),
        pl.lit(stats.RATE_TESTS[ci_method], pl.String).alias("test"),
    )


def _rate_cells_intervals(
    clusters: pl.DataFrame,
    cells: pl.DataFrame,
    by: Sequence[str],
    rates: Sequence[tuple[str, str, str]],
    *,
    confidence: float,
    n_resamples: int,
    ci_method: str,
    seed: int,
) -> pl.DataFrame:
    """Join every rate's interval (one method per cell) to ``cells``.

    Korn–Graubard from :func:`stats.rate_cells`; under ``auto``, the cells where
    :func:`stats.bootstrap_accurate` holds for every rate get the coupled percentile bootstrap
    of :func:`_bootstrap_intervals` instead (one draw of a cell's workflows serves all its rates
    and the cells that share them: a fraction of the cost of a draw per cell). A rate whose
    denominator is 0 in every workflow of a cell has no interval (null), like its estimate.
    """
    by = list(by)
    long = stats.rate_cells(
        clusters,
        cells=by,
        numerator=[num for _, num, _ in rates],
        denominator=[den for _, _, den in rates],
        names=[name for name, _, _ in rates],
        ci_method="korn-graubard",
        confidence=confidence,
    )
    exact = cells
    for name, _, _ in rates:
        part = long.filter(pl.col("rate") == name).select(
            *by,
            pl.col("ci_low").alias(f"{name}_ci_low"),
            pl.col("ci_high").alias(f"{name}_ci_high"),
        )
        exact = join_on(exact, part, by)
    exact = exact.with_columns(
        pl.lit("korn-graubard", pl.String).alias("ci_method"),
        pl.lit(stats.RATE_TESTS["korn-graubard"], pl.String).alias("test"),
    )
    if ci_method != "auto":
        return exact
    accurate = stats.bootstrap_accurate(
        long["n_clusters"].to_numpy(), long["estimate"].to_numpy(), long["n_effective"].to_numpy()
    )
    chosen = (
        long.with_columns(pl.Series("__ok", accurate))
        .group_by(by)
        .agg(pl.col("__ok").all())
        .filter(pl.col("__ok"))
        .drop("__ok")
    )
    if chosen.height == 0:
        return exact
    booted = _bootstrap_intervals(
        clusters.join(chosen, on=by, how="semi", nulls_equal=True),
        cells.join(chosen, on=by, how="semi", nulls_equal=True),
        by,
        rates,
        confidence=confidence,
        n_resamples=n_resamples,
        ci_method="percentile",
        seed=seed,
    )
    kept = exact.join(chosen, on=by, how="anti", nulls_equal=True)
    return pl.concat([kept, booted.select(kept.columns)], how="vertical_relaxed")


def summarize(
    states: object,
    attempts: object,
    *,
    by: Sequence[str] = ("agent", "depth"),
    k: int = 3,
    common_sample: bool = False,
    common_states: bool = False,
    interval: str = "bootstrap",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    ci_method: str = "auto",
    seed: int = 0,
    engine: object = "polars",
    reliability: bool = False,
) -> pl.DataFrame:
    """Summarise takeover attempts per (agent, depth, *by): EAR, pass@1, pass@k and the funnel.

    Each depth row carries its own denominators (ARCHITECTURE §3.4; seed: deeper depths have
    fewer eligible states, so depth rows are not the same sample unless ``common_sample``).
    States whose replay did not match, or whose expected values are missing, are rejected:
    counted in every row of their slice, never scored.

    Definitions, per row (a "unit" is a (state, agent) pair; "attempts" are its repeats):

    * ``ear`` (= ``aware_rate``): aware attempts / attempts.
    * ``pass_at_1``: mean over attempted states of (passed repeats / repeats).
    * ``pass_at_k``: mean over attempted states of 1 − C(n−c, k)/C(n, k), n repeats with c
      passes; with n = k exactly "any of the k repeats passed".
    * ``fixed_rate``, ``derived_rate``, ``pass_rate``: root cause fixed / derived state fixed /
      passed attempts, each over all attempts (``pass_rate`` is attempt-weighted; it equals
      ``pass_at_1`` when every unit has the same number of repeats).
    * The funnel, each layer conditional on the previous layer *holding*, i.e. on every earlier
      layer: ``fixed_given_aware_rate`` = #(aware ∧ fixed) / #aware,
      ``derived_given_fixed_rate`` = #(aware ∧ fixed ∧ derived) / #(aware ∧ fixed),
      ``pass_given_derived_rate`` = #(aware ∧ fixed ∧ derived ∧ passed) /
      #(aware ∧ fixed ∧ derived). Their denominators are the columns ``n_aware``,
      ``aware_fixed`` and ``aware_fixed_derived``. Seed: awareness, root-cause repair, derived
      state repair and the final verifier are scored separately.
    * Attempts annotated as reaching a layer while an earlier layer fails (root cause fixed
      without awareness, derived state fixed without the root cause, passed without the derived
      state) are outside the funnel. They are not dropped: ``off_funnel_fixed``,
      ``off_funnel_derived`` and ``off_funnel_passed`` count them, so that ``n_fixed =
      aware_fixed + off_funnel_fixed``, ``n_derived = aware_fixed_derived +
      off_funnel_derived`` and ``n_passed = aware_fixed_derived_passed + off_funnel_passed``.

    Parameters
    ----------
    states, attempts
        The `states` and `attempts` tables (ARCHITECTURE §3.4), in any form
        :func:`recoverylab.io.scan` reads. Extra columns may be used in ``by``.
    by
        Row keys; must include ``agent``. A column of `states` (depth, split, source_agent...)
        slices states; a column of `attempts` (e.g. budget) becomes part of the unit. For
        self-takeover denominators add ``source_agent``.
    k
        pass@k; every unit on an eligible state needs at least k repeats.
    common_sample
        Keep only root causes scored at every depth of their row group (the ``by`` keys without
        depth), so every depth row of a group is computed on the same root causes. Removed
        states are counted in ``excluded_not_common_sample``.
    common_states
        Keep only states attempted by every agent in the table (common-state comparison). Removed
        units are counted in ``excluded_not_common_state``. Applied before ``common_sample``.
    interval
        ``"bootstrap"`` (the name is kept): workflow-clustered intervals by ``ci_method``;
        ``"wilson"``: Wilson score intervals, which treat the denominator as independent
        trials and so ignore the clustering of repeats and depths within a workflow.
    confidence, n_resamples, ci_method, seed
        Interval settings (:func:`recoverylab.stats.rate_cells`): ``ci_method="auto"``
        (default) gives each row Korn–Graubard intervals (Clopper–Pearson on the workflow
        design effect's effective sample; no resampling) unless the percentile bootstrap is
        accurate for every rate of the row (many workflows, enough events);
        ``"korn-graubard"``, ``"percentile"`` (the coupled bootstrap of every rate) or
        ``"bca"`` force one. The bootstrap is deterministic for a given seed.
    reliability
        Also add pass^k (all k repeats pass, C(c, k)/C(n, k)), the flip rate and the ICC of
        repeats with workflow-clustered intervals (:func:`recoverylab.takeover.reliability`),
        as the last columns, on the same engine.
    engine
        ``"polars"`` (default), or a SparkSession (or ``"spark"`` for the active one): the
        tables are co-partitioned by workflow and the per-workflow partials computed on Spark
        (see :mod:`recoverylab.engines`). The result is the same.

    Returns
    -------
    polars.DataFrame
        One row per ``by`` cell with at least one attempt, sorted by ``by``. Columns: the ``by``
        keys, ``k``; the slice's state counts ``eligible_states``, ``rejected_states``,
        ``rejected_replay_mismatch``, ``rejected_missing_expected`` (state-level, before the
        restrictions); ``attempted_states`` (denominator of pass@1 and pass@k),
        ``root_causes``, ``workflows`` (clusters), ``attempts`` (denominator of EAR and of the
        rates of attempts), ``excluded_attempts`` (attempts on rejected states),
        ``excluded_not_common_state``, ``excluded_not_common_sample``; ``ear``, ``pass_at_1``,
        ``pass_at_k``; the counts ``n_aware``, ``n_fixed``, ``n_derived``, ``n_passed``;
        ``aware_rate``, ``fixed_rate``, ``derived_rate``, ``pass_rate``; the funnel counts
        ``aware_fixed``, ``aware_fixed_derived``, ``aware_fixed_derived_passed``, the
        off-funnel counts ``off_funnel_fixed``, ``off_funnel_derived``, ``off_funnel_passed``
        and the conditional rates. Every rate is followed by ``<rate>_ci_low`` and
        ``<rate>_ci_high``. Rates with a zero denominator are null. Last, ``ci_method``
        (``korn-graubard``, ``percentile``, ``bca`` or ``wilson``: what every interval of the
        row got) and ``test`` (the test it inverts: ``exact-binomial`` on the effective
        sample, ``score`` for Wilson, ``none`` for the bootstrap).

    Raises
    ------
    SchemaError
        A table breaks its contract (including a duplicate (state_id, agent, repeat)).
    InputError
        Attempts of unknown states, a root cause under two workflows, gaps in repeats.
    ParameterError
        A bad parameter, or units with fewer than k repeats (the message names them).

    Examples
    --------
    >>> from recoverylab import synth
    >>> tables = synth.generate("takeover", 20, seed=1)
    >>> out = summarize(tables["states"], tables["attempts"], n_resamples=200)
    >>> out.select("agent", "depth", "attempted_states", "pass_at_k").height > 0
    True
    """
    columns = column_names("by", by)
    flags: dict[str, Any] = {"common_states": common_states, "common_sample": common_sample}
    settings: dict[str, Any] = {
        "confidence": confidence,
        "n_resamples": n_resamples,
        "ci_method": ci_method,
        "seed": seed,
    }
    # Only the bootstrap resamples workflows; other intervals need the cells' sums alone.
    partial = functools.partial(_summary_partial, per_workflow=interval == "bootstrap")
    result = engines.run(
        engine,
        plan.Plan(
            inputs=plan_inputs(states, attempts),
            stages=workflow_stages(columns, k, "takeover partials", partial, **flags),
            check=functools.partial(
                check_settings, k, confidence, n_resamples, seed, ci_method, interval
            ),
            finish=functools.partial(_finish_units, by=columns, k=k, interval=interval, **settings),
        ),
    )
    if not reliability:
        return result
    return _reliability.join_reliability(
        result, states, attempts, engine=engine, by=by, k=k, **flags, **settings
    )


def _summary_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    per_workflow: bool,
    **options: Any,
) -> dict[str, pl.LazyFrame]:
    """One shard's partials: per (workflow, cell) for the bootstrap, else per cell."""
    frame, inputs = scored_shard(frames, state, codes=True, **options)
    partials = (
        _partials(frame, list(inputs.by), inputs.unit_keys, options["k"])
        if per_workflow
        else _cell_partials(frame, list(inputs.by))
    )
    return {
        "partials": partials,
        # the counts the cells show (their distinct root causes and workflows are not read)
        "slices": eligibility_counts(inputs.states, inputs.state_keys).select(
            *inputs.state_keys, *_STATE_COUNTS
        ),
    }


def _finish_units(
    parts: dict[str, pl.DataFrame],
    *,
    by: Sequence[str],
    k: int,
    interval: str,
    confidence: float,
    n_resamples: int,
    ci_method: str,
    seed: int,
) -> pl.DataFrame:
    """Sum the partials into cells, join the slice counts, add rates and intervals.

    ``slices`` may hold a row per slice and shard (their counts are added); ``partials`` holds
    each (workflow, cell) once (a workflow is never split between shards), or for intervals
    other than the bootstrap each cell per shard with its ``workflows``. The pass@ sums of a
    cell are added from their exact parts, so they do not depend on how the units were split.
    """
    partials, slices, by = parts["partials"], parts["slices"], list(by)
    state_keys = [c for c in by if c in slices.columns]
    counts = [pl.col(c).sum() for c in _STATE_COUNTS]
    slices = slices.group_by(list(state_keys)).agg(counts) if state_keys else slices.select(counts)
    workflows = (
        pl.col("workflows") if "workflows" in partials.columns else pl.col("attempted_states") > 0
    )
    cells = partials.group_by(by).agg(
        *(pl.col(c).sum() for c in _COUNTS),
        *(
            from_fixed_point_parts(pl.col(high).sum(), pl.col(low).sum()).alias(name)
            for name, (high, low) in _PARTS.items()
        ),
        workflows.sum().cast(pl.Int64).alias("workflows"),
    )
    cells = join_on(cells, slices.select(*state_keys, *_STATE_COUNTS), state_keys)
    cells = cells.with_columns(
        pl.lit(k, dtype=pl.Int64).alias("k"),
        *(rate(num, den).alias(name) for name, num, den in RATES if name != "aware_rate"),
    ).with_columns(pl.col("ear").alias("aware_rate"))
    with_ci = [r for r in RATES if r[0] != "aware_rate"]
    if interval == "wilson":
        cis = {name: stats.wilson_exprs(num, den, confidence) for name, num, den in with_ci}
        cells = cells.with_columns(
            *(ci.low.alias(f"{name}_ci_low") for name, ci in cis.items()),
            *(ci.high.alias(f"{name}_ci_high") for name, ci in cis.items()),
            pl.lit("wilson", pl.String).alias("ci_method"),
            pl.lit("score", pl.String).alias("test"),
        )
    else:
        cells = _bootstrap_intervals(
            partials,
            cells,
            by,
            with_ci,
            confidence=confidence,
            n_resamples=n_resamples,
            ci_method=ci_method,
            seed=seed,
        )
    cells = cells.with_columns(
        pl.col("ear_ci_low").alias("aware_rate_ci_low"),
        pl.col("ear_ci_high").alias("aware_rate_ci_high"),
    )
    return cells.select(_summary_columns(by)).sort(sort_keys(cells.schema, by), nulls_last=False)


def _summary_columns(by: Sequence[str]) -> list[str]:
    """Output order: keys, counts, then each rate (with its interval) after its counts."""

    def rates(first: int, stop: int) -> list[str]:
        return [f"{r}{end}" for r, _, _ in RATES[first:stop] for end in ("", "_ci_low", "_ci_high")]

    return [
        *by,
        "k",
        *_STATE_COUNTS,
        *_COUNTS[:2],
        "workflows",
        *_COUNTS[2:6],
        *rates(0, 3),
        *_FUNNEL_COUNTS[:4],
        *rates(3, 7),
        *_FUNNEL_COUNTS[4:],
        *rates(7, 10),
        "ci_method",
        "test",
    ]
