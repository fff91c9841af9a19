"""Scoring a recovery policy's decisions against paired forks (ARCHITECTURE §3.1, policies).

A policy (a router, an anomaly detector, "always refresh at delay 1") chooses at most one
recovery point per episode. Because the forks hold both outcomes of every candidate point, its
success rate can be computed without rerunning anything: the recovery outcome at the chosen
delay, else the no-recovery outcome -- compared with never recovering, episode by episode.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._errors import InputError, ParameterError, format_keys
from recoverylab.paired._pairs import (
    Design,
    Forks,
    Progress,
    branch_rows,
    design_of,
    key_names,
    prepare,
    raise_after_end,
)
from recoverylab.paired._shards import forks_input
from recoverylab.paired._summary import (
    _check_statistics,
    design_stage,
    statistics_options,
)
from recoverylab.schema import SPECS, validate

__all__ = ["DECISIONS", "RATE_INTERVAL_COLUMNS", "RESULT_COLUMNS", "evaluate_policy"]

#: Contract of a decision table (one row per episode; see :data:`recoverylab.schema.SPECS`).
DECISIONS = SPECS["decisions"]

#: Columns of :func:`evaluate_policy` after ``condition`` and the ``by`` keys, in order.
RESULT_COLUMNS = (
    "n",
    "base_rate",
    "policy_rate",
    "gain",
    "rescue",
    "harm",
    "interventions",
    "intervention_rate",
    "clean_touch_rate",
    "ci_low",
    "ci_high",
    "p_value",
    "ci_method",
    "sparse",
    "test",
    "ci_inverts_test",
    "p_sign_flip",
)


def _choose(
    joined: pl.LazyFrame, points: pl.LazyFrame, episode: list[str], delay: str, tag: str
) -> pl.LazyFrame:
    """Join the recovery point each episode's decision chose (column ``delay``).

    Adds the outcome under the decisions (``tag``), whether it intervened and three flags
    (``<tag>_bad_point``, ``<tag>_no_none``, ``<tag>_after_end``) for unusable decisions.
    """
    point = points.select(
        *episode,
        pl.col("delay").alias(delay),
        pl.col("y0").alias("__y0_point"),
        pl.col("y1").alias("__y1"),
        pl.col("carried_forward").alias("__carried"),
        pl.col("reason").alias("__reason"),
        pl.lit(True).alias("__point"),
    )
    joined = joined.join(point, on=[*episode, delay], how="left", nulls_equal=True)
    chosen = pl.col(delay).is_not_null()
    usable = pl.col("__point").fill_null(False) & pl.col("__reason").is_null()
    # Never recovering: the shared `none` outcome; without one, the chosen point's baseline.
    never = pl.coalesce("__y0_shared", "__y0_point")
    return joined.with_columns(
        never.alias(f"{tag}_never"),
        pl.when(chosen).then(pl.col("__y1")).otherwise(never).alias(tag),
        # A point after the task ended is carried forward: the recovery never ran.
        (chosen & ~pl.col("__carried").fill_null(False)).alias(f"{tag}_intervened"),
        (chosen & ~usable).alias(f"{tag}_bad_point"),
        (~chosen & pl.col("__y0_shared").is_null()).alias(f"{tag}_no_none"),
        (chosen & (pl.col("__reason") == "after_end").fill_null(False)).alias(f"{tag}_after_end"),
    ).drop("__y0_point", "__y1", "__carried", "__reason", "__point")


def _episodes(
    decisions: pl.LazyFrame,
    table: Forks,
    design: Design,
    method: str,
    by_keys: list[str],
    reference: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """One row per decision with the ``policy`` and ``reference`` outcomes and the flags.

    The reference is never recovering, or with ``reference`` decisions the outcome under them
    (``__ref_delay``; ``__ref_missing`` flags an episode they do not list).
    """
    episode = list(table.episode)
    extra = [k for k in by_keys if k not in table.pair_by]
    points = branch_rows(table, design.only(method)).filter(pl.col("method") == method)
    none = table.lf.filter((pl.col("method") == "none") & pl.col("delay").is_null()).select(
        *episode, pl.col("success").alias("__y0_shared"), *extra
    )
    joined = decisions.join(none, on=episode, how="left", nulls_equal=True)
    joined = _choose(joined, points, episode, "delay", "policy")
    if reference is None:
        return joined.with_columns(
            pl.col("policy_never").alias("reference"),
            pl.col("policy_intervened").alias("intervened"),
        )
    listed = reference.select(
        *episode, pl.col("delay").alias("__ref_delay"), pl.lit(True).alias("__ref_listed")
    )
    joined = joined.join(listed, on=episode, how="left", nulls_equal=True)
    return _choose(joined, points, episode, "__ref_delay", "reference").with_columns(
        pl.col("policy_intervened").alias("intervened"),
        pl.col("__ref_listed").is_null().alias("__ref_missing"),
    )


def _raise_bad(
    episodes: pl.LazyFrame, flag: str, keys: list[str], total: int, message: str
) -> None:
    sample = (
        episodes.filter(pl.col(flag))
        .select(keys)
        .sort(keys, nulls_last=True)
        .head(5)
        .collect(engine="streaming")
    )
    noun = "decision" if total == 1 else "decisions"
    raise InputError(
        message.format(
            n=total,
            noun=noun,
            verb="chooses" if total == 1 else "choose",
            have="has" if total == 1 else "have",
            keys=f"{'/'.join(keys).replace('__ref_delay', 'delay')} "
            f"{format_keys(sample.rows(), total)}",
        )
    )


def _check_choices(
    episodes: pl.LazyFrame,
    table: Forks,
    design: Design,
    method: str,
    *,
    with_reference: bool,
) -> None:
    """Raise InputError for decisions (or reference decisions) the forks cannot score."""
    sources = [("policy", "decisions", "delay")]
    if with_reference:
        sources.append(("reference", "reference", "__ref_delay"))
    names = [f"{tag}_{flag}" for tag, _, _ in sources for flag in _FLAGS]
    flags = episodes.select(
        *(pl.col(n).sum() for n in names),
        *([pl.col("__ref_missing").sum()] if with_reference else []),
    ).collect(engine="streaming")
    if any(flags[f"{tag}_after_end"].item() for tag, _, _ in sources):
        raise_after_end(branch_rows(table, design), table)
    for tag, name, delay in sources:
        keys = [*table.episode, delay]
        for flag, text in _FLAGS.items():
            if flag != "after_end" and flags[f"{tag}_{flag}"].item():
                total = int(flags[f"{tag}_{flag}"].item())
                message = text.replace("decisions:", f"{name}:").replace("{method}", method)
                _raise_bad(episodes, f"{tag}_{flag}", keys, total, message)
    if with_reference and flags["__ref_missing"].item():
        total = int(flags["__ref_missing"].item())
        _raise_bad(
            episodes,
            "__ref_missing",
            list(table.episode),
            total,
            "reference: {n} {noun} {have} no reference decision ({keys}); the reference "
            "decisions must list every episode of `decisions`.",
        )


#: Unusable-decision flags of :func:`_choose` and their messages (``after_end`` raises
#: through :func:`raise_after_end`).
_FLAGS = {
    "after_end": "",
    "bad_point": "decisions: {n} {noun} {verb} a recovery point with no usable `{method}` pair "
    "in forks ({keys}); a chosen delay needs a recovery row paired with a `none` row "
    "(or a task that ended before it).",
    "no_none": "decisions: {n} {noun} without a recovery point {have} no shared `none` row in "
    "forks ({keys}); the no-recovery outcome of every episode must be known.",
}


def evaluate_policy(
    decisions: object,
    forks: object,
    *,
    pair_by: str | Sequence[str] | None = (),
    by: str | Sequence[str] | None = (),
    method: str | None = None,
    clean_label: str = "clean",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "auto",
    progress: Progress = None,
    engine: object = "polars",
    alternative: str = "two-sided",
    adjust: str | None = None,
    reference: object | None = None,
) -> pl.DataFrame:
    """Score a policy's recovery decisions against never recovering, episode by episode.

    Each decision row names an episode (task_id, condition, *pair_by*) and the delay at which
    the policy recovers, or null for no recovery. The episode's outcome under the policy is the
    recovery outcome at that delay (carried forward if the task had already ended: then the
    recovery never ran and is not an intervention), else the no-recovery outcome. "Never" is
    the shared ``none`` row's outcome (the chosen point's ``none`` row when there is no shared
    one). The gain is tested on the per-task summed differences (policy - never), clustered by
    task (all episodes of a task together); its interval is the one ``ci_method`` asks for,
    named per row in the ``ci_method`` column (by default one that inverts an exact test,
    computed without resampling), and ``p_value`` is the p-value of the test that interval
    inverts (named in ``test``), so zero is outside exactly when ``p_value < 1 − confidence``;
    the exact sign-flip test is ``p_sign_flip`` (see
    :func:`recoverylab.stats.paired_effect_cells`).

    With ``reference`` decisions, the same comparison is made against the outcome under those
    decisions instead of never recovering: a paired margin between two policies.

    Parameters
    ----------
    decisions
        Table with task_id, condition, *pair_by*, ``delay`` (int or null); one row per episode.
    forks
        The ``forks`` table holding every chosen point.
    pair_by
        Extra episode keys (model, seed...), in both tables.
    by
        Extra grouping columns, read from the shared ``none`` rows of ``forks``.
    method
        The recovery method the policy applies; may be omitted when forks has only one.
    clean_label
        The condition whose episodes have a correct observation: touching them can only harm.
    confidence, n_resamples, seed, ci_method, progress, engine, alternative, adjust
        As in :func:`~recoverylab.paired.summarize` (on Spark, decisions and forks are
        co-partitioned by task); ``p_adjusted`` is adjusted over all rows of the result.
    reference
        Optional decisions of a reference policy (same contract, same episodes as
        ``decisions``): ``base_rate`` is its success rate, ``gain`` the paired margin policy -
        reference, ``rescue``/``harm`` the episodes only the policy/only the reference wins.
        Default: never recovering.

    Returns
    -------
    pl.DataFrame
        One row per condition (and *by*), then one overall row with a null condition: condition,
        *by*, ``n`` (episodes), ``base_rate`` (never), ``policy_rate``, ``gain``, ``rescue``,
        ``harm``, ``interventions``, ``intervention_rate``, ``clean_touch_rate`` (interventions
        on clean episodes / clean episodes: on the clean row and the overall row; null where
        there are no clean episodes; the two rates' intervals, clustered by task, are the
        last columns, :data:`RATE_INTERVAL_COLUMNS`: ``<rate>_ci_low``, ``<rate>_ci_high``,
        ``<rate>_ci_method`` and ``<rate>_test`` as :func:`recoverylab.stats.rate_cells`
        gives them), ``ci_low``, ``ci_high`` (of the gain), ``p_value``,
        ``ci_method``, ``sparse``, ``test``, ``ci_inverts_test``, ``p_sign_flip`` (as
        :func:`~recoverylab.paired.summarize`) and ``p_adjusted`` (with ``adjust``).

    Raises
    ------
    SchemaError
        When either table breaks its contract (e.g. two decisions for one episode).
    InputError
        For a decision whose chosen point has no usable fork row (no recovery row and no
        carry-forward, or an excluded pair), or whose episode has no ``none`` row.
    ParameterError
        For an unknown method, or as :func:`~recoverylab.paired.summarize`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1", "t1"], "condition": ["stale2"] * 2,
    ...                       "method": ["none", "refresh"], "delay": [None, 1],
    ...                       "success": [False, True]})
    >>> decisions = pl.DataFrame({"task_id": ["t1"], "condition": ["stale2"], "delay": [1]})
    >>> evaluate_policy(decisions, forks)["gain"].to_list()
    [1.0, 1.0]
    """
    # decisions (and reference decisions) meet their forks in one shard: all clustered by task
    references: tuple[plan.Input, ...] = ()
    if reference is not None:
        references = (plan.Input("reference", reference, key="task_id", contract=DECISIONS),)
    statistics = statistics_options(confidence, n_resamples, seed, ci_method, alternative, adjust)
    checked = functools.partial(_policy_design, method=method)
    return engines.run(
        engine,
        plan.Plan(
            inputs=(
                plan.Input("decisions", decisions, key="task_id", contract=DECISIONS),
                forks_input(forks),
                *references,
            ),
            check=functools.partial(check_policy, clean_label, **statistics),
            stages=(
                design_stage(pair_by=pair_by, by=by, cohort="full", combine=checked),
                plan.Stage(
                    "scoring decisions per task",
                    functools.partial(
                        _policy_partial, pair_by=pair_by, by=by, clean_label=clean_label
                    ),
                ),
            ),
            finish=functools.partial(policy_finish, by=by, progress=progress, **statistics),
            progress=progress,
        ),
    )


def _policy_design(parts: dict[str, pl.DataFrame], state: Any, *, method: str | None) -> Any:
    """Read the design grid; resolve the recovery method the policy applies."""
    design = design_of(parts["points"])
    known = design.methods
    if method is None:
        if len(known) == 1:
            return design, known[0]
        raise ParameterError(
            f"parameter `method` is not given and forks has {len(known)} recovery methods "
            f"({', '.join(known) or 'none'}); name the one the policy applies."
        )
    if method not in known:
        raise ParameterError(
            f"parameter `method` is {method!r}; forks has no recovery rows with that method "
            f"(methods: {', '.join(known) or 'none'})."
        )
    return design, method


def check_policy(clean_label: object, **statistics: Any) -> None:
    """Check the parameters of :func:`evaluate_policy` (before any data is read)."""
    _check_statistics(**statistics)
    if not isinstance(clean_label, str):
        raise ParameterError(
            f"parameter `clean_label` is {clean_label!r}; it must be a condition label."
        )


def choices(decisions: object, table: Forks, pair_keys: Sequence[str]) -> pl.LazyFrame:
    """Validate a decisions table; return its episode keys (categoricals as strings) and delay."""
    chosen = validate(decisions, DECISIONS, key=pair_keys).select(*table.episode, pl.col("delay"))
    chosen_schema = chosen.collect_schema()
    return chosen.with_columns(
        pl.col(k).cast(pl.String)
        for k in pair_keys
        if isinstance(chosen_schema[k], (pl.Categorical, pl.Enum))
    )


def _policy_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: tuple[Design, str],
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    clean_label: str,
) -> dict[str, pl.LazyFrame]:
    """Check one shard's decisions against its forks; build per-cell counts and per-task types.

    Raises InputError for unusable decisions (this collects a few counts).
    """
    design, method = state
    table, by_list = prepare(frames["forks"], pair_by=pair_by, by=by)
    by_keys, pair_keys = list(by_list), key_names("pair_by", pair_by)
    chosen = choices(frames["decisions"], table, pair_keys)
    reference = choices(frames["reference"], table, pair_keys) if "reference" in frames else None
    episodes = _episodes(chosen, table, design, method, by_keys, reference)
    _check_choices(episodes, table, design, method, with_reference=reference is not None)
    diff = pl.col("policy").cast(pl.Int64) - pl.col("reference").cast(pl.Int64)
    is_clean = pl.col("condition") == clean_label
    counts = [
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("reference").sum().cast(pl.Int64).alias("__never"),
        pl.col("policy").sum().cast(pl.Int64).alias("__policy"),
        (~pl.col("reference") & pl.col("policy")).sum().cast(pl.Int64).alias("rescue"),
        (pl.col("reference") & ~pl.col("policy")).sum().cast(pl.Int64).alias("harm"),
        pl.col("intervened").sum().cast(pl.Int64).alias("interventions"),
        is_clean.sum().cast(pl.Int64).alias("__clean"),
        (is_clean & pl.col("intervened")).sum().cast(pl.Int64).alias("__clean_touched"),
    ]
    per_condition = ["condition", *by_keys]
    names = [c.meta.output_name() for c in counts]
    null_condition = pl.lit(None, dtype=pl.String).alias("condition")
    overall = episodes.group_by(by_keys).agg(counts) if by_keys else episodes.select(counts)
    counts_query = pl.concat(
        [
            episodes.group_by(per_condition).agg(counts),
            overall.select(null_condition, *by_keys, *names),
        ],
        how="vertical",
    )
    task_partial = [diff.sum().cast(pl.Int64).alias("d"), pl.len().cast(pl.Int64).alias("n")]
    type_count = pl.len().cast(pl.Int64).alias("count")
    types_query = pl.concat(
        [
            episodes.group_by([*per_condition, "task_id"])
            .agg(task_partial)
            .group_by([*per_condition, "d", "n"])
            .agg(type_count),
            episodes.group_by([*by_keys, "task_id"])
            .agg(task_partial)
            .group_by([*by_keys, "d", "n"])
            .agg(type_count)
            .select(null_condition, *by_keys, "d", "n", "count"),
        ],
        how="vertical",
    )
    rate_types = [  # per task: the rates' events and denominators (their intervals' clusters)
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("intervened").sum().cast(pl.Int64).alias("interventions"),
        is_clean.sum().cast(pl.Int64).alias("clean"),
        (is_clean & pl.col("intervened")).sum().cast(pl.Int64).alias("clean_touched"),
    ]
    rates_query = pl.concat(
        [
            episodes.group_by([*per_condition, "task_id"])
            .agg(rate_types)
            .group_by([*per_condition, *_RATE_PARTS])
            .agg(type_count),
            episodes.group_by([*by_keys, "task_id"])
            .agg(rate_types)
            .group_by([*by_keys, *_RATE_PARTS])
            .agg(type_count)
            .select(null_condition, *by_keys, *_RATE_PARTS, "count"),
        ],
        how="vertical",
    )
    return {"counts": counts_query, "types": types_query, "rates": rates_query}


#: Per-task partials of the intervention and clean-touch rates (:func:`_rate_intervals`).
_RATE_PARTS = ("n", "interventions", "clean", "clean_touched")

#: Columns :func:`evaluate_policy` adds after :data:`RESULT_COLUMNS`: the two rates' intervals,
#: each with the method it got and the test that interval inverts.
RATE_INTERVAL_COLUMNS = tuple(
    f"{rate}_{end}"
    for rate in ("intervention_rate", "clean_touch_rate")
    for end in ("ci_low", "ci_high", "ci_method", "test")
)


def _rate_intervals(
    rates: pl.DataFrame, per_condition: list[str], statistics: dict[str, Any]
) -> pl.DataFrame:
    """Task-clustered intervals of the intervention and clean-touch rates of every row.

    :func:`recoverylab.stats.rate_cells` over per-task types (the rates' one interval policy:
    Korn–Graubard unless the bootstrap is accurate, or the bootstrap the gain's ``ci_method``
    names); two-sided whatever the gain's ``alternative`` (a rate has no null to test). A row
    without clean episodes has no clean-touch interval (null), like its rate.
    """
    method = statistics.get("ci_method", "auto")
    types = rates.group_by([*per_condition, *_RATE_PARTS]).agg(pl.col("count").sum())
    long = stats.rate_cells(
        types,
        cells=per_condition,
        numerator=["interventions", "clean_touched"],
        denominator=["n", "clean"],
        names=["intervention_rate", "clean_touch_rate"],
        count="count",
        ci_method=method if method in stats.CI_METHODS else "auto",
        confidence=statistics.get("confidence", 0.95),
        n_resamples=statistics.get("n_resamples", 10_000),
        seed=statistics.get("seed", 0),
    )
    wide = types.select(per_condition).unique()
    for rate in ("intervention_rate", "clean_touch_rate"):
        part = long.filter(pl.col("rate") == rate).select(
            *per_condition,
            *(pl.col(c).alias(f"{rate}_{c}") for c in ("ci_low", "ci_high", "ci_method", "test")),
        )
        wide = wide.join(part, on=per_condition, how="left", nulls_equal=True)
    return wide


def policy_finish(
    parts: dict[str, pl.DataFrame],
    *,
    by: str | Sequence[str] | None,
    progress: Progress = None,
    adjust: str | None = None,
    **statistics: Any,
) -> pl.DataFrame:
    """Turn the counts and types of :func:`_policy_partial` (shards' rows add up) into rows."""
    by_keys = list(key_names("by", by))
    per_condition = ["condition", *by_keys]
    cell_counts = parts["counts"].group_by(per_condition).agg(pl.all().sum())
    types = parts["types"].group_by([*per_condition, "d", "n"]).agg(pl.col("count").sum())
    if progress is not None:
        method = statistics.get("ci_method", "auto")
        progress(f"{method} intervals and sign-flip tests over {cell_counts.height} rows")
    tests = stats.paired_effect_cells(types, cells=per_condition, **statistics).drop("n_clusters")
    n = pl.col("n")
    clean_touch = pl.when(pl.col("__clean") > 0).then(pl.col("__clean_touched") / pl.col("__clean"))
    result = (
        cell_counts.join(tests, on=per_condition, how="left", nulls_equal=True)
        .with_columns(
            (pl.col("__never") / n).alias("base_rate"),
            (pl.col("__policy") / n).alias("policy_rate"),
            ((pl.col("__policy") - pl.col("__never")) / n).alias("gain"),
            (pl.col("interventions") / n).alias("intervention_rate"),
            clean_touch.alias("clean_touch_rate"),
        )
        .join(
            _rate_intervals(parts["rates"], per_condition, statistics),
            on=per_condition,
            how="left",
            nulls_equal=True,
        )
        .select(*per_condition, *RESULT_COLUMNS, *RATE_INTERVAL_COLUMNS)
        .sort(
            [*by_keys, pl.col("condition").is_null(), "condition"],
            nulls_last=True,
        )
    )
    if adjust is None:
        return result
    adjusted = stats.adjust_p_values(result["p_value"].to_numpy(), adjust)
    return result.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64))
