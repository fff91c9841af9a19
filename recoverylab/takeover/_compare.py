"""Paired comparison of two agents on common states: pass@k difference, interval and test.

:func:`compare_agents` scores both agents on the states both attempted (ARCHITECTURE §3.4,
common-state comparison), with a workflow-clustered bootstrap of the difference and a sign-flip
test of the per-workflow differences.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._errors import ParameterError, format_keys
from recoverylab.schema import column_names
from recoverylab.takeover._inputs import (
    NOT_COMMON,
    check_k,
    checked_units,
    load,
    restrict,
    restriction_partials,
    sort_keys,
)
from recoverylab.takeover._stages import (
    cluster_keys,
    depths_combine,
    first_combine,
    first_partial,
    group_keys,
    join_on,
    plan_inputs,
    rate,
    stable_sum,
)


def compare_agents(
    states: object,
    attempts: object,
    a: str,
    b: str,
    *,
    by: Sequence[str] = (),
    k: int = 3,
    common_sample: bool = False,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    ci_method: str = "auto",
    seed: int = 0,
    engine: object = "polars",
    alternative: str = "two-sided",
    adjust: str | None = None,
    **deprecated: Any,
) -> pl.DataFrame:
    """Compare two agents' pass@k on the states both attempted, paired and workflow-clustered.

    The seed's warning: self-takeover columns are not a common-pool ranking; a fair comparison
    pairs the same root cause, prefix and state. Here only eligible states attempted by both
    agents (with at least k repeats each) are compared. Per workflow, the partials are the sums
    of each agent's per-state pass@k and the number of paired states; the interval is a cluster
    bootstrap of the difference of the two means (one draw of workflows serves both agents) and
    the p-value a two-sided sign-flip test of the per-workflow summed differences (exact when
    the differences are integers, i.e. when every unit has exactly k repeats).

    Parameters
    ----------
    states, attempts
        The `states` and `attempts` tables.
    a, b
        The two values of ``agent`` to compare; ``difference`` is a − b.
    by
        Extra row keys (e.g. ``("depth",)``); ``agent`` may not be one of them.
    k
        pass@k.
    common_sample
        Within each row group (``by`` without depth), keep only root causes with paired states
        at every depth.
    confidence, n_resamples, ci_method
        Bootstrap settings (``ci_method`` ``percentile`` or ``bca``; the rates' ``auto`` and
        ``korn-graubard``, which the command line passes to every table, mean ``percentile``
        here: a difference of two agents' pass@k is not a rate). The sign-flip test is exact
        when the differences are integers; otherwise it draws 100,000 Monte Carlo sign flips,
        as :func:`recoverylab.paired.contrast` does (the deprecated ``n_permutations``
        keyword still sets that count for one release).
    seed
        Seed of the bootstrap and of any Monte Carlo test.
    engine
        As in :func:`summarize`.
    alternative
        ``"two-sided"`` (default), ``"greater"`` (a is better) or ``"less"``: the sign-flip
        p-value is one-sided and the interval too (one bound of the 2·confidence − 1
        bootstrap interval, the other ±1).
    adjust
        ``None``, ``"holm"`` or ``"bh"``: add ``p_adjusted`` over the rows of the result.

    Returns
    -------
    polars.DataFrame
        One row per ``by`` cell where either agent attempted an eligible state, sorted: the ``by``
        keys, ``a``, ``b`` (the two agents), ``k``, ``common_states`` (paired states: the
        denominator), ``root_causes``, ``workflows`` (clusters), ``only_a_states``,
        ``only_b_states`` (unpaired, excluded), ``excluded_not_common_sample``, ``pass_at_k_a``,
        ``pass_at_k_b``, ``difference``, ``ci_low``, ``ci_high``, ``a_better_states``,
        ``b_better_states`` (states where a's pass@k is higher / lower), ``p_value``, ``p_method``
        (the sign-flip test's), ``ci_method`` (the bootstrap's) and ``test`` (``none``: the
        bootstrap interval inverts no test; ``p_method`` names the one that gives ``p_value``),
        and ``p_adjusted`` with ``adjust``. Statistics are null for a cell without paired states.

    Raises
    ------
    ParameterError
        ``a`` or ``b`` not an agent of `attempts`, ``a == b``, ``agent`` in ``by``, bad
        settings, or units with fewer than k repeats.
    SchemaError, InputError
        As in :func:`summarize`.

    Warns
    -----
    DeprecationWarning
        When ``n_permutations`` is given.

    Examples
    --------
    >>> from recoverylab import synth
    >>> tables = synth.generate("takeover", 20, seed=1)
    >>> out = compare_agents(tables["states"], tables["attempts"], "agent_a", "agent_b",
    ...                      n_resamples=200)
    >>> out.select("common_states", "difference", "p_value").height
    1
    """
    k = check_k(k)
    stats.check_resampling(
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        ci_method=ci_method,
        ci_methods=stats.RATE_CI_METHODS,
        alternative=alternative,
        adjust=adjust,
    )
    if alternative != "two-sided" and confidence <= 0.5:
        raise ParameterError(
            f"parameter `confidence` is {confidence!r}; a one-sided interval needs a confidence "
            "above 0.5."
        )
    cells = list(column_names("by", by))
    _check_agents(cells, a, b)
    options: dict[str, Any] = {"by": cells, "k": k, "a": a, "b": b}
    statistics: dict[str, Any] = {
        "confidence": confidence,
        "n_resamples": n_resamples,
        # a difference of two agents' rates is not a rate: the rates' methods mean percentile
        "ci_method": ci_method if ci_method in stats.CI_METHODS else "percentile",
        "sign_flips": _sign_flips(deprecated),
        "seed": seed,
        "alternative": alternative,
        "adjust": adjust,
    }
    return engines.run(
        engine,
        plan.Plan(
            inputs=plan_inputs(states, attempts),
            stages=_compare_stages(options, common_sample=common_sample),
            finish=functools.partial(_compare_finish, **options, **statistics),
        ),
    )


def _compare_stages(options: dict[str, Any], *, common_sample: bool) -> tuple[plan.Stage, ...]:
    """List the stages: checks (agents named), depths with paired states, workflow partials."""
    cells, a, b = options["by"], options["a"], options["b"]
    checks = plan.Stage(
        "takeover checks",
        functools.partial(first_partial, by=("agent", *cells)),
        functools.partial(_compare_first, a=a, b=b),
        clustered=False,
    )
    depths = plan.Stage(
        "depths with paired states",
        functools.partial(_paired_depths_partial, **options),
        functools.partial(depths_combine, by=cells),
    )
    partials = plan.Stage(
        "paired pass@k per workflow",
        functools.partial(_compare_partial, common_sample=common_sample, **options),
    )
    return (checks, depths, partials) if common_sample else (checks, partials)


def _sign_flips(deprecated: dict[str, Any]) -> int:
    """Monte Carlo sign flips: the deprecated ``n_permutations`` keyword, else the default."""
    unknown = [k for k in deprecated if k != "n_permutations"]
    if unknown:
        raise TypeError(f"compare_agents() got an unexpected keyword argument {unknown[0]!r}")
    if "n_permutations" not in deprecated:
        return SIGN_FLIPS
    warnings.warn(
        "compare_agents: parameter `n_permutations` is deprecated and will be removed in the "
        "next release; the Monte Carlo sign-flip test then draws 100,000 flips, as "
        "paired.contrast does (`n_resamples` sets the bootstrap).",
        DeprecationWarning,
        stacklevel=3,
    )
    return int(deprecated["n_permutations"])


def _check_agents(cells: Sequence[str], a: object, b: object) -> None:
    if "agent" in cells:
        raise ParameterError(
            "parameter `by` contains `agent`; compare_agents compares two agents within each "
            "cell, so `agent` cannot be a cell key."
        )
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str):
            raise ParameterError(f"parameter `{name}` is {value!r}; it must be an agent name.")
    if a == b:
        raise ParameterError(f"parameters `a` and `b` are both {a!r}; compare two agents.")


def _compare_first(parts: dict[str, pl.DataFrame], state: Any, *, a: str, b: str) -> dict[str, Any]:
    """As :func:`first_combine`; then ``a`` and ``b`` must be agents of `attempts`."""
    found = first_combine(parts, state)
    known = parts["agents"].get_column("agent").unique().sort().to_list()
    for name, value in (("a", a), ("b", b)):
        if value not in known:
            raise ParameterError(
                f"parameter `{name}` is {value!r}, which is not an agent in `attempts` "
                f"(agents: {format_keys(known, len(known))})."
            )
    return found


def _per_state(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
) -> tuple[pl.LazyFrame, list[str]]:
    """Each eligible state's pass@k of ``a`` and of ``b``; unpaired states marked excluded."""
    inputs = load(frames["states"], frames["attempts"], ("agent", *by), checks="schema")
    pair = ["state_id", *inputs.unit_keys[1:]]
    state_cols = ["workflow_id", "root_cause_id", "depth"]
    carried = [c for c in inputs.state_keys if c not in state_cols]
    per_state = (
        checked_units(inputs, k, base=state["base"], roots=False)
        .filter(pl.col("excluded").is_null() & pl.col("agent").is_in([a, b]))
        .group_by([*pair, *state_cols, *carried])
        .agg(
            pl.col("pass_at_k").filter(pl.col("agent") == a).first().alias("pass_at_k_a"),
            pl.col("pass_at_k").filter(pl.col("agent") == b).first().alias("pass_at_k_b"),
        )
        .with_columns(
            pl.when(pl.col("pass_at_k_b").is_null())
            .then(pl.lit("only_a"))
            .when(pl.col("pass_at_k_a").is_null())
            .then(pl.lit("only_b"))
            .otherwise(pl.lit(None, dtype=pl.String))
            .alias("excluded")
        )
    )
    return per_state, pair


def _paired_depths_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
) -> dict[str, pl.LazyFrame]:
    per_state, _ = _per_state(frames, state, by, k, a, b)
    return {"depths": restriction_partials(per_state, group_keys(by))["depths"]}


def _compare_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
    common_sample: bool,
) -> dict[str, pl.LazyFrame]:
    """Per (workflow × cell): paired states, each agent's summed pass@k, exclusions."""
    per_state, pair = _per_state(frames, state, by, k, a, b)
    per_state = restrict(
        per_state,
        group=group_keys(by),
        pair=pair,
        common_states=False,
        common_sample=common_sample,
        depths=state.get("depths"),
    )
    paired = pl.col("excluded").is_null()
    d = pl.col("pass_at_k_a") - pl.col("pass_at_k_b")
    partials = (
        per_state.group_by(cluster_keys(list(by)))
        .agg(
            paired.sum().cast(pl.Int64).alias("common_states"),
            pl.col("root_cause_id").filter(paired).n_unique().cast(pl.Int64).alias("root_causes"),
            (pl.col("excluded") == "only_a").sum().cast(pl.Int64).alias("only_a_states"),
            (pl.col("excluded") == "only_b").sum().cast(pl.Int64).alias("only_b_states"),
            (pl.col("excluded") == NOT_COMMON[1])
            .sum()
            .cast(pl.Int64)
            .alias("excluded_not_common_sample"),
            stable_sum(pl.col("pass_at_k_a").filter(paired)).alias("sum_a"),
            stable_sum(pl.col("pass_at_k_b").filter(paired)).alias("sum_b"),
            (d.filter(paired) > 0).sum().cast(pl.Int64).alias("a_better_states"),
            (d.filter(paired) < 0).sum().cast(pl.Int64).alias("b_better_states"),
        )
        .with_columns((pl.col("sum_a") - pl.col("sum_b")).alias("diff"))
    )
    return {"partials": partials}


#: Monte Carlo draws of the sign-flip test when it is not exact (stats.sign_flip_cells' default).
SIGN_FLIPS = 100_000


_COMPARE_COUNTS = (
    "common_states",
    "root_causes",
    "only_a_states",
    "only_b_states",
    "excluded_not_common_sample",
    "a_better_states",
    "b_better_states",
)


_COMPARE_COLUMNS = (
    *_COMPARE_COUNTS[:2],
    "workflows",
    *_COMPARE_COUNTS[2:5],
    "pass_at_k_a",
    "pass_at_k_b",
    "difference",
    "ci_low",
    "ci_high",
    *_COMPARE_COUNTS[5:],
    "p_value",
    "p_method",
    "ci_method",
    "test",
)


def _compare_finish(
    parts: dict[str, pl.DataFrame],
    *,
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
    confidence: float,
    n_resamples: int,
    ci_method: str,
    sign_flips: int,
    seed: int,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Sum the workflow partials into cells; add the joint bootstrap and the sign-flip test."""
    cells = list(by)
    partials = parts["partials"]
    aggregates = [
        *(pl.col(c).sum() for c in _COMPARE_COUNTS),
        *(stable_sum(pl.col(c)).alias(c) for c in ("sum_a", "sum_b")),
        (pl.col("common_states") > 0).sum().cast(pl.Int64).alias("workflows"),
    ]
    table = partials.group_by(cells).agg(aggregates) if cells else partials.select(aggregates)
    # stats needs at least one cell column; a constant one stands for "the whole table".
    stat_cells = cells or ["__all"]
    table = table.with_columns(
        rate("sum_a", "common_states").alias("pass_at_k_a"),
        rate("sum_b", "common_states").alias("pass_at_k_b"),
        pl.lit(0).alias("__all"),
    ).with_columns((pl.col("pass_at_k_a") - pl.col("pass_at_k_b")).alias("difference"))
    clusters = partials.filter(pl.col("common_states") > 0).with_columns(
        pl.col("common_states").cast(pl.Float64).alias("n_a"),
        pl.col("common_states").cast(pl.Float64).alias("n_b"),
        pl.lit(0).alias("__all"),
    )
    boot = stats.cluster_bootstrap(
        clusters,
        cells=stat_cells,
        values=["sum_a", "n_a", "sum_b", "n_b"],
        statistic=stats.ratio_difference,
        n_resamples=n_resamples,
        confidence=confidence if alternative == "two-sided" else 2 * confidence - 1,
        ci_method=ci_method,
        seed=seed,
    ).select(
        *stat_cells,
        pl.lit(-1.0).alias("ci_low") if alternative == "less" else pl.col("ci_low").fill_nan(None),
        pl.lit(1.0).alias("ci_high")
        if alternative == "greater"
        else pl.col("ci_high").fill_nan(None),
    )
    tests = stats.sign_flip_cells(
        clusters,
        cells=stat_cells,
        difference="diff",
        n_resamples=sign_flips,
        seed=seed,
        alternative=alternative,
    ).select(*stat_cells, "p_value", "p_method")
    table = join_on(join_on(table, boot, stat_cells), tests, stat_cells)
    labels = [
        pl.lit(a).alias("a"),
        pl.lit(b).alias("b"),
        pl.lit(k, dtype=pl.Int64).alias("k"),
    ]
    table = table.with_columns(
        pl.lit(ci_method, pl.String).alias("ci_method"),
        pl.lit(stats.RATE_TESTS[ci_method], pl.String).alias("test"),
    )
    result = table.select(*cells, *labels, *_COMPARE_COLUMNS).sort(
        sort_keys(table.schema, cells), nulls_last=False
    )
    if adjust is None:
        return result
    adjusted = stats.adjust_p_values(result["p_value"].fill_null(float("nan")).to_numpy(), adjust)
    return result.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64).fill_nan(None))
