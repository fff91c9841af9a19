"""Two-cell comparisons of paired forks: condition contrasts and rescue overlap (§3.1).

:func:`contrast` is the effect of one condition minus another at the same (delay, method, *by*),
with one bootstrap that resamples tasks once for both conditions; :func:`rescue_overlap` counts
the tasks two methods rescue, and those both do.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._errors import ParameterError, renamed
from recoverylab.paired import _shards
from recoverylab.paired._pairs import (
    AFTER_END,
    Cohort,
    Design,
    Progress,
    apply_cohort,
    branch_rows,
    design_of,
    key_names,
    prepare,
    raise_after_end,
)
from recoverylab.paired._summary import _check_statistics, design_stage, statistics_options


def contrast(
    forks: object,
    a: str,
    b: str,
    *,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "auto",
    progress: Progress = None,
    engine: object = "polars",
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Compare the recovery effect of condition ``a`` with that of ``b`` at each point.

    At every (delay, method, *by*) the difference ``effect_a - effect_b`` answers "is the same
    recovery more useful under this information state?" (e.g. ``stale2 - clean``). Each task's
    partials for both conditions travel together, so one bootstrap draw of tasks serves both
    effects (joint types (d_a, n_a, d_b, n_b) with counts; a task with no pair in one condition
    contributes zeros there).

    The p-value is a sign-flip test of the per-task difference of effects,
    ``δ_i = d_a,i / n_a,i - d_b,i / n_b,i`` (d = summed y1 - y0, n = pairs of the task in that
    condition), over the tasks paired in *both* conditions: under the null that the condition
    labels are exchangeable within a task, δ_i is symmetric about zero. With one pair per task
    and condition (no pair_by, or pair_by within by) δ_i = d_a,i - d_b,i is an integer in
    [-2, 2] and the test is exact.

    Parameters
    ----------
    forks
        The ``forks`` table.
    a, b
        The two conditions (labels of the ``condition`` column), e.g. ``"stale2"``, ``"clean"``.
    by, pair_by, cohort, confidence, n_resamples, seed, progress, engine, alternative, adjust
        As in :func:`summarize`.
    ci_method
        The difference of two effects (non-integer per-task differences) has no exact
        interval here: ``"auto"`` and the test-based names use the joint ``"percentile"``
        bootstrap; ``"bca"`` is available.

    Returns
    -------
    pl.DataFrame
        One row per (delay, method, *by*) where both conditions have pairs: ``a``, ``b`` (the
        labels), delay, method, *by*, ``n_tasks`` (tasks resampled: with a pair in either
        condition), ``n_a``, ``n_b`` (pairs), ``effect_a``, ``effect_b``, ``difference``,
        ``ci_low``, ``ci_high`` (of the difference), ``p_value``, ``ci_method``, ``sparse``
        (fewer than 10 tasks with a nonzero difference or fewer than 20 tasks), ``test``
        (``"sign-flip"``: the test ``p_value`` is), ``ci_inverts_test`` (false: the bootstrap
        interval is not that test's inversion and may disagree with it) and ``p_adjusted``
        (with ``adjust``).

    Raises
    ------
    ParameterError
        When ``a`` equals ``b`` or either has no recovery rows in ``forks``; otherwise as
        :func:`summarize`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1"] * 4, "condition": ["stale2"] * 2 + ["clean"] * 2,
    ...                       "method": ["none", "refresh"] * 2, "delay": [None, 0] * 2,
    ...                       "success": [False, True, True, False]})
    >>> contrast(forks, "stale2", "clean")["difference"].item()
    2.0
    """
    keys: dict[str, Any] = {"pair_by": pair_by, "by": by, "cohort": cohort}
    statistics = statistics_options(confidence, n_resamples, seed, ci_method, alternative, adjust)
    checked = functools.partial(_labelled_design, a=a, b=b, column="condition")
    return engines.run(
        engine,
        plan.Plan(
            inputs=(_shards.forks_input(forks),),
            check=functools.partial(_contrast_check, a, b, **statistics),
            stages=(
                design_stage(**keys, combine=checked),
                plan.Stage(
                    f"pairing {a} and {b} and counting per task",
                    functools.partial(_contrast_partial, a=a, b=b, **keys),
                ),
            ),
            finish=functools.partial(
                _contrast_finish, by=by, a=a, b=b, progress=progress, **statistics
            ),
            progress=progress,
        ),
    )


def _contrast_check(a: object, b: object, **statistics: Any) -> None:
    """Check the parameters of :func:`contrast` (before any data is read)."""
    _check_statistics(**statistics)
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str):
            raise ParameterError(f"parameter `{name}` is {value!r}; it must be a condition label.")
    if a == b:
        raise ParameterError(f"parameters `a` and `b` are both {a!r}; contrast two conditions.")


def _labelled_design(
    parts: dict[str, pl.DataFrame], state: Any, *, a: str, b: str, column: str
) -> Design:
    """Read the design grid; check that ``a`` and ``b`` are conditions/methods of its points."""
    design = design_of(parts["points"])
    known = design.conditions if column == "condition" else design.methods
    rows, empty = ("recovery rows", "none") if column == "condition" else ("rows", "")
    for name, value in (("a", a), ("b", b)):
        if value not in known:
            raise ParameterError(
                f"parameter `{name}` is {value!r}; forks has no {rows} with that {column} "
                f"({column}s: {', '.join(known) or empty})."
            )
    return design


#: Per-task partials of :func:`contrast`: summed y1 - y0 and pairs, in condition a and b.
_JOINT = ("d_a", "n_a", "d_b", "n_b")


def _contrast_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    cohort: str,
    a: str,
    b: str,
) -> dict[str, pl.DataFrame]:
    """Count one shard's tasks by joint type (d_a, n_a, d_b, n_b) per (delay, method, *by*)."""
    table, by_keys = prepare(frames["forks"], pair_by=pair_by, by=by, cohort=cohort)
    cells = ["delay", "method", *by_keys]
    rows = apply_cohort(branch_rows(table, design, carry=by_keys), table, cohort).filter(
        pl.col("condition").is_in([a, b])
    )
    valid = pl.col("reason").is_null()
    diff = pl.col("y1").cast(pl.Int64) - pl.col("y0").cast(pl.Int64)
    partial = []
    for suffix, label in (("a", a), ("b", b)):
        mine = valid & (pl.col("condition") == label)
        partial += [
            pl.when(mine).then(diff).otherwise(0).sum().cast(pl.Int64).alias(f"d_{suffix}"),
            mine.sum().cast(pl.Int64).alias(f"n_{suffix}"),
        ]
    types = (
        rows.group_by([*cells, "task_id"])
        .agg(*partial, (pl.col("reason") == AFTER_END).sum().alias("__after_end"))
        .group_by([*cells, *_JOINT])
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("__after_end").sum())
        .collect(engine="streaming")
    )
    if int(types["__after_end"].sum()):
        raise_after_end(rows, table)
    return {"types": types}


def _contrast_finish(
    parts: dict[str, pl.DataFrame],
    *,
    by: str | Sequence[str] | None,
    a: str,
    b: str,
    confidence: float,
    n_resamples: int,
    seed: int,
    ci_method: str,
    progress: Progress = None,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Turn the joint types into the contrast rows (equal types of several shards add up)."""
    cells = ["delay", "method", *key_names("by", by)]
    types = (
        parts["types"]
        .group_by([*cells, *_JOINT])
        .agg(pl.col("count").sum())
        .filter((pl.col("n_a") + pl.col("n_b")) > 0)
    )
    weighted = [(pl.col(v) * pl.col("count")).sum().alias(v) for v in _JOINT]
    counts = (
        types.group_by(cells)
        .agg(*weighted, pl.col("count").sum().alias("n_tasks"))
        .filter((pl.col("n_a") > 0) & (pl.col("n_b") > 0))
    )
    types = types.join(counts.select(cells), on=cells, how="semi", nulls_equal=True)
    if progress is not None:
        progress(f"joint bootstrap over {counts.height} cells")
    method = ci_method if ci_method in ("percentile", "bca") else "percentile"
    boot = stats.cluster_bootstrap(
        types,
        cells=cells,
        values=list(_JOINT),
        count="count",
        statistic=stats.ratio_difference,
        n_resamples=n_resamples,
        confidence=confidence if alternative == "two-sided" else 2 * confidence - 1,
        ci_method=method,
        seed=seed,
    ).select(
        *cells,
        pl.lit(-2.0).alias("ci_low") if alternative == "less" else "ci_low",
        pl.lit(2.0).alias("ci_high") if alternative == "greater" else "ci_high",
        pl.lit(method).alias("ci_method"),
    )
    effect_a = pl.col("d_a") / pl.col("n_a")
    effect_b = pl.col("d_b") / pl.col("n_b")
    result = (
        counts.join(boot, on=cells, how="left", nulls_equal=True)
        .join(
            _contrast_test(types, cells, seed, alternative), on=cells, how="left", nulls_equal=True
        )
        .select(
            pl.lit(a).alias("a"),
            pl.lit(b).alias("b"),
            *cells,
            "n_tasks",
            "n_a",
            "n_b",
            effect_a.alias("effect_a"),
            effect_b.alias("effect_b"),
            (effect_a - effect_b).alias("difference"),
            "ci_low",
            "ci_high",
            "p_value",
            "ci_method",
            pl.col("sparse").fill_null(True),
            # the bootstrap inverts no test: the p-value is the sign-flip test's, named
            pl.lit(stats.BOOTSTRAP_TEST).alias("test"),
            pl.lit(False).alias("ci_inverts_test"),
        )
        .sort(cells, nulls_last=False)
    )
    if adjust is not None:
        adjusted = stats.adjust_p_values(result["p_value"].to_numpy(), adjust)
        result = result.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64))
    return result


def _contrast_test(
    types: pl.DataFrame, cells: list[str], seed: int, alternative: str
) -> pl.DataFrame:
    """Per cell: the sign-flip p-value over tasks paired in both conditions, and ``sparse``."""
    both = types.filter((pl.col("n_a") > 0) & (pl.col("n_b") > 0)).with_columns(
        (pl.col("d_a") / pl.col("n_a") - pl.col("d_b") / pl.col("n_b")).alias("delta")
    )
    flip = stats.sign_flip_cells(
        both, cells=cells, difference="delta", count="count", seed=seed, alternative=alternative
    ).select(*cells, "p_value")
    sparse = both.group_by(cells).agg(
        (
            (pl.col("count").filter(pl.col("delta") != 0).sum() < stats.SPARSE_NONZERO_CLUSTERS)
            | (pl.col("count").sum() < stats.SPARSE_CLUSTERS)
        ).alias("sparse")
    )
    return flip.join(sparse, on=cells, how="full", coalesce=True, nulls_equal=True)


def rescue_overlap(
    forks: object,
    a: str | None = None,
    b: str | None = None,
    *,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    engine: object = "polars",
    **deprecated: Any,
) -> pl.DataFrame:
    """Count the episodes two recovery methods rescue, and how many both rescue.

    Shows whether two operations work through the same runs: e.g. whether the rescues of a
    full refresh survive when the refreshed content is hidden (seed: 8 of refresh's 10 rescues
    are shared with the content-ablated variant). An episode is (task_id, condition, *pair_by*)
    at one delay; carried-forward pairs are never rescues.

    Parameters
    ----------
    forks
        The ``forks`` table.
    a, b
        Two recovery methods present in ``forks`` (``method_a``/``method_b``: deprecated
        aliases).
    by, pair_by, cohort, engine
        As in :func:`summarize`.

    Returns
    -------
    pl.DataFrame
        One row per (condition, delay, *by*) where either method has pairs: ``a``,
        ``b`` (the two methods), condition, delay, *by*, ``n_a``, ``n_b`` (pairs), ``n_both``
        (episodes paired under both), ``rescue_a``, ``rescue_b``, ``rescue_both``.

    Raises
    ------
    ParameterError
        When the methods are equal, ``none``, or absent from ``forks``; otherwise as
        :func:`~recoverylab.paired.pairs`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1"] * 3, "condition": ["stale2"] * 3,
    ...                       "method": ["none", "refresh", "replan_only"],
    ...                       "delay": [None, 4, 4], "success": [False, True, True]})
    >>> rescue_overlap(forks, "refresh", "replan_only")["rescue_both"].item()
    1
    """
    names = renamed("rescue_overlap", deprecated, {"method_a": "a", "method_b": "b"})
    method_a: Any = names.get("a", a)
    method_b: Any = names.get("b", b)
    keys: dict[str, Any] = {"pair_by": pair_by, "by": by, "cohort": cohort}
    checked = functools.partial(_labelled_design, a=method_a, b=method_b, column="method")
    return engines.run(
        engine,
        plan.Plan(
            inputs=(_shards.forks_input(forks),),
            check=functools.partial(_check_methods, method_a, method_b),
            stages=(
                design_stage(**keys, combine=checked),
                plan.Stage(
                    "rescues per episode",
                    functools.partial(_overlap_partial, a=method_a, b=method_b, **keys),
                ),
            ),
            finish=functools.partial(_overlap_finish, by=by, a=method_a, b=method_b),
        ),
    )


def _check_methods(a: object, b: object) -> None:
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str) or value == "none":
            raise ParameterError(
                f"parameter `{name}` is {value!r}; it must be a recovery method (not 'none')."
            )
    if a == b:
        raise ParameterError(f"parameters `a` and `b` are both {a!r}; compare two methods.")


_OVERLAP_COUNTS = ("n_a", "n_b", "n_both", "rescue_a", "rescue_b", "rescue_both")


def _overlap_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    cohort: str,
    a: str,
    b: str,
) -> dict[str, pl.DataFrame]:
    """Per-episode rescues of both methods, counted per (condition, delay, *by*)."""
    table, by_keys = prepare(frames["forks"], pair_by=pair_by, by=by, cohort=cohort)
    rows = apply_cohort(branch_rows(table, design, carry=by_keys), table, cohort).filter(
        pl.col("method").is_in([a, b])
    )
    valid = pl.col("reason").is_null()
    rescue = valid & ~pl.col("y0") & pl.col("y1")
    is_a, is_b = pl.col("method") == a, pl.col("method") == b
    episode = [*table.episode, *(k for k in by_keys if k not in table.pair_by), "delay"]
    per_episode = rows.group_by(episode).agg(
        (valid & is_a).any().alias("__a"),
        (valid & is_b).any().alias("__b"),
        (rescue & is_a).any().alias("__ra"),
        (rescue & is_b).any().alias("__rb"),
        (pl.col("reason") == AFTER_END).sum().alias("__after_end"),
    )
    total = [
        pl.col("__a").sum().cast(pl.Int64).alias("n_a"),
        pl.col("__b").sum().cast(pl.Int64).alias("n_b"),
        (pl.col("__a") & pl.col("__b")).sum().cast(pl.Int64).alias("n_both"),
        pl.col("__ra").sum().cast(pl.Int64).alias("rescue_a"),
        pl.col("__rb").sum().cast(pl.Int64).alias("rescue_b"),
        (pl.col("__ra") & pl.col("__rb")).sum().cast(pl.Int64).alias("rescue_both"),
        pl.col("__after_end").sum().alias("__after_end"),
    ]
    cells = ["condition", "delay", *by_keys]
    counts = per_episode.group_by(cells).agg(total).collect(engine="streaming")
    if int(counts["__after_end"].sum()):
        raise_after_end(rows, table)
    return {"counts": counts.drop("__after_end")}


def _overlap_finish(
    parts: dict[str, pl.DataFrame], *, by: str | Sequence[str] | None, a: str, b: str
) -> pl.DataFrame:
    cells = ["condition", "delay", *key_names("by", by)]
    counts = parts["counts"].group_by(cells).agg(pl.col(c).sum() for c in _OVERLAP_COUNTS)
    return (
        counts.filter((pl.col("n_a") + pl.col("n_b")) > 0)
        .select(pl.lit(a).alias("a"), pl.lit(b).alias("b"), *cells, *_OVERLAP_COUNTS)
        .sort(cells, nulls_last=False)
    )
