"""Reading, checking and scoring the takeover tables (states × attempts) as lazy queries.

Everything downstream (:func:`summarize`, :func:`compare_agents`, :func:`awareness_split`) starts
from :func:`score`: one row per scored *unit* — a (state, agent) pair, plus any attempt-level
grouping columns — with its repeat count, outcome counts, pass@1, pass@k and, for a unit that is
not scored, the reason it was excluded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from recoverylab import stats
from recoverylab._errors import InputError, ParameterError, format_keys, require_one_of
from recoverylab.schema import (
    column_names,
    data_checks,
    raise_data_problems,
    raise_duplicate_keys,
    spec,
    validate,
)
from recoverylab.takeover._packed_units import (
    UNIT_FIELD,
    coded,
    decoded,
    packed_per_unit,
    unpacked,
)

#: Outcome columns of `attempts`, in funnel order (seed: 觉察 → 修根因 → 重算派生状态 → 业务终态).
FLAGS = ("aware", "root_cause_fixed", "derived_fixed", "passed")

#: Why a unit is not scored. The first two are state rejections (ARCHITECTURE §3.4: counted,
#: never scored); the last two come from the common-state / common-sample restrictions.
REJECTED = ("replay_mismatch", "missing_expected")
NOT_COMMON = ("not_common_state", "not_common_sample")

_STATE_COLUMNS = ("state_id", "workflow_id", "root_cause_id", "depth", "replay_ok", "expected_ok")
_NOT_GROUPABLE = ("state_id", "repeat", *FLAGS)

#: Per-unit columns of :func:`checked_units`' one pass that only the checks read.
_FIRST, _LAST, _DISTINCT = "__first_repeat", "__last_repeat", "__distinct_repeats"
#: Rows of a unit that break a data check of `attempts` (:func:`checked_units`' ``row_checks``).
_BAD = "__bad_rows"

#: Integer codes (per shard) of ``workflow_id``, of ``root_cause_id``, of the state's
#: (workflow, *state-level ``by`` keys) and of ``agent`` that :func:`checked_units` can keep for
#: a caller that groups by them.
CODES = ("__workflow", "__root", "__cell", "__agent")


@dataclass(frozen=True)
class Inputs:
    """Validated takeover tables and where each grouping column comes from."""

    states: pl.LazyFrame
    attempts: pl.LazyFrame
    by: tuple[str, ...]
    state_keys: tuple[str, ...]
    unit_keys: tuple[str, ...]


def check_k(k: object) -> int:
    """Return ``k`` if it is a positive integer, else raise :class:`ParameterError`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ParameterError(f"parameter `k` is {k!r}; it must be a positive integer.")
    return k


def check_settings(
    k: object,
    confidence: object,
    n_resamples: object,
    seed: object,
    ci_method: object,
    interval: object = "bootstrap",
) -> None:
    """Check ``k``, ``interval`` and the interval settings before any data is read.

    ``ci_method`` is one of :data:`recoverylab.stats.RATE_CI_METHODS`: the rates' intervals.
    """
    check_k(k)
    require_one_of("interval", interval, ("bootstrap", "wilson"))
    stats.check_resampling(
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        ci_method=ci_method,
        ci_methods=stats.RATE_CI_METHODS,
    )


def load(
    states: object,
    attempts: object,
    by: Sequence[str],
    *,
    checks: Literal["full", "schema"] = "full",
) -> Inputs:
    """Validate both tables and sort the ``by`` columns into state-level and attempt-level keys.

    A ``by`` column of `states` is a state-level key (depth, split, ...); one only in `attempts`
    becomes part of the unit, like ``agent`` (a state attempted at two budgets is two units),
    and joins the duplicate check of `attempts`. ``checks="schema"`` skips the data checks of
    `attempts` for a stage after one that ran them on every row; it reads the attempts with
    :func:`checked_units`, whose one pass also finds duplicate keys (which a split of the table
    by row position can hide from the first stage).
    """
    columns = column_names("by", by)
    if "agent" not in columns:
        raise ParameterError(
            f"parameter `by` is {list(columns)}; it must include `agent`, because pass@k and the "
            "funnel are scored per (state, agent)."
        )
    bad = [c for c in columns if c in _NOT_GROUPABLE]
    if bad:
        raise ParameterError(
            f"parameter `by` contains `{bad[0]}`; grouping by {', '.join(_NOT_GROUPABLE)} is not "
            "allowed. Hint: use awareness_split() to split by awareness."
        )
    state_lazy = validate(states, "states")
    state_schema = state_lazy.collect_schema()
    attempt_schema = validate(attempts, "attempts", checks="schema").collect_schema()
    both = [c for c in columns if c in state_schema and c in attempt_schema]
    if both:
        raise ParameterError(
            f"parameter `by` names `{both[0]}`, which is a column of both `states` and "
            "`attempts`; a grouping column must come from one table. Hint: drop or rename it in "
            "one of them."
        )
    missing = [c for c in columns if c not in state_schema and c not in attempt_schema]
    if missing:
        raise ParameterError(
            f"parameter `by` names `{missing[0]}`, which is a column of neither `states` nor "
            f"`attempts` (states: {', '.join(state_schema.names())}; attempts: "
            f"{', '.join(attempt_schema.names())})."
        )
    state_keys = tuple(c for c in columns if c in state_schema)
    unit_keys = ("agent", *(c for c in columns if c in attempt_schema and c != "agent"))
    attempt_lazy = validate(attempts, "attempts", key=unit_keys[1:], checks=checks)
    return Inputs(state_lazy, attempt_lazy, columns, state_keys, unit_keys)


def attempt_facts(inputs: Inputs) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Check the rows of `attempts` in the one pass that finds its first repeat and its agents.

    For ``inputs`` loaded with ``checks="schema"``: the data checks of :func:`validate` (same
    errors) are summed in the pass that finds the first repeat (one row, ``repeat``; null for
    no rows) and the distinct agents (strings), returned as two frames. Duplicate keys are left
    to the units pass of a later stage (:func:`checked_units`), which sees each unit whole.
    """
    attempts = inputs.attempts
    contract = spec("attempts")
    checks = data_checks(contract, attempts.collect_schema())
    facts = attempts.select(
        pl.len().alias("__rows"),
        *(expr.sum().alias(f"__check {name}") for name, expr in checks.items()),
        pl.col("repeat").min().alias("repeat"),
        pl.col("agent").cast(pl.String).unique().implode().alias("agent"),
    ).collect(engine="streaming")
    raise_data_problems(
        attempts,
        contract,
        (*contract.key, *inputs.unit_keys[1:]),
        {name: int(facts[f"__check {name}"][0]) for name in checks},
        int(facts["__rows"][0]),
    )
    return facts.select("repeat"), facts.select(pl.col("agent").explode()).drop_nulls()


def check_consistency(
    inputs: Inputs,
    k: int,
    *,
    base: int | None = None,
    roots: bool = True,
    per_unit: pl.LazyFrame,
) -> None:
    """Raise a one-line error for inputs that are valid one by one but not together.

    In this order: attempts of unknown states, root causes under more than one workflow, units
    whose repeats have gaps, units with fewer than ``k`` repeats on an eligible state; all in
    one ``collect_all`` over ``per_unit`` (the small per-unit table of :func:`checked_units`,
    already joined with its state: ``replay_ok`` is null for a state not in `states`).
    ``base`` (the first repeat of the whole table) and ``roots=False`` serve a shard: the
    root-cause check and the first repeat are decided over all shards (:func:`check_roots`).
    Without the root-cause check, one narrow pass first asks whether any unit fails; only then
    are the unit keys read to name them.
    """
    if not roots and not _may_fail(per_unit, k, base):
        return
    unit = ["state_id", *inputs.unit_keys]
    units = per_unit.select(
        *unit,
        pl.col("repeats").alias("n"),
        pl.col(_FIRST).alias("lo"),
        pl.col(_LAST).alias("hi"),
        (pl.col("replay_ok") & pl.col("expected_ok")).alias("eligible"),
        pl.col("replay_ok").is_null().alias("unknown"),
    )
    unknown = units.filter(pl.col("unknown"))
    base_query = (
        units.select(pl.col("lo").min().alias("base"))
        if base is None
        else pl.LazyFrame({"base": [base]}, schema={"base": pl.Int64})
    )
    gaps = units.join(base_query, how="cross").filter(
        (pl.col("lo") != pl.col("base")) | (pl.col("hi") - pl.col("lo") + 1 != pl.col("n"))
    )
    short = units.filter(pl.col("eligible") & (pl.col("n") < k))
    queries = {
        "unknown": unknown.select(
            pl.col("n").sum().alias("rows"), pl.col("state_id").n_unique().alias("states")
        ),
        "unknown_keys": unknown.select(pl.col("state_id").unique().sort().head(5)),
        "gaps": gaps.select(pl.len()),
        "gaps_keys": gaps.sort(unit).head(5).select(unit),
        "base": base_query,
        "short": short.select(pl.len(), pl.col("n").min().alias("fewest")),
        "short_keys": short.sort(unit).head(5).select(unit),
    }
    if roots:
        queries["roots"], queries["roots_keys"] = _root_queries(inputs.states)
    got = dict(zip(queries, pl.collect_all(list(queries.values())), strict=True))
    rows = int(got["unknown"]["rows"][0])
    if rows:
        n = int(got["unknown"]["states"][0])
        raise InputError(
            f"attempts: {rows} row{_s(rows)} refer to {n} state{_s(n)} that "
            f"{'is' if n == 1 else 'are'} not in `states` (state_id "
            f"{format_keys(got['unknown_keys']['state_id'], n)}); every attempt must take over a "
            "known state. Hint: pass the states table the attempts were run on."
        )
    if roots:
        _raise_split_roots(got["roots"], got["roots_keys"])
    label = "/".join(unit)
    pairs = f"({', '.join(unit)})"
    n = int(got["gaps"].item())
    if n:
        first = int(got["base"]["base"][0])
        raise InputError(
            f"attempts: column `repeat` has gaps in {n} {pairs} unit{_s(n)} ({label} "
            f"{format_keys(got['gaps_keys'].rows(), n)}); the repeats of every unit must run "
            f"{first}, {first + 1}, ... without gaps (the first repeat in the table is {first}). "
            "Hint: a missing repeat is usually a crashed run; rerun it or drop the unit."
        )
    n = int(got["short"]["len"][0])
    if n:
        fewest = int(got["short"]["fewest"][0])
        raise ParameterError(
            f"parameter `k` is {k} but {n} {pairs} unit{_s(n)} on eligible states "
            f"{'has' if n == 1 else 'have'} fewer repeats ({label} "
            f"{format_keys(got['short_keys'].rows(), n)}; fewest: {fewest}); pass@k needs at least "
            f"k repeats of every scored unit. Hint: lower `k` to {fewest} or drop those units."
        )


def _may_fail(per_unit: pl.LazyFrame, k: int, base: int | None) -> bool:
    """Whether :func:`check_consistency` finds an unknown state, a gap or a short unit."""
    lo, n = pl.col(_FIRST), pl.col("repeats")
    first = lo.min() if base is None else pl.lit(base, dtype=pl.Int64)
    eligible = pl.col("replay_ok") & pl.col("expected_ok")
    found = per_unit.select(
        pl.col("replay_ok").is_null().any()
        | ((lo != first) | (pl.col(_LAST) - lo + 1 != n)).any()
        | (eligible & (n < k)).any()
    ).collect()
    return bool(found.item())


def checked_units(
    inputs: Inputs,
    k: int,
    *,
    base: int | None = None,
    roots: bool = True,
    codes: bool = False,
    row_checks: bool = False,
) -> pl.LazyFrame:
    """Run :func:`check_consistency` and return :func:`units`, reading the attempts once.

    One group-by per unit, joined with its state and collected once (far fewer rows than
    attempts), gives the unit counts and what the checks need (first and last repeat; distinct
    repeats, which also catch duplicate (state_id, agent, repeat) keys, with :func:`validate`'s
    message, after ``checks="schema"``). The states are joined once, here: the checks and every
    later query read the joined units from memory (:func:`_units_pass`: by one integer key per
    attempt where it can). ``codes`` keeps the integer :data:`CODES` (workflow, root cause,
    state cell, agent), which group faster than text, and may leave text columns as
    ``Categorical`` codes (:func:`decoded` turns them back into text).

    ``row_checks``: the whole `attempts` table, loaded with ``checks="schema"`` and not checked
    yet (the first stage of a plan was skipped): the same pass counts the rows that break a data
    check of :func:`validate`, and only if there are any (or no rows) are they read again to
    raise its error (:func:`attempt_facts`); the root causes are then checked before the keys,
    in the order of the stages.
    """
    unit = ["state_id", *inputs.unit_keys]
    per_unit, states, rows, bad = _units_pass(inputs, row_checks)
    if row_checks:
        if not rows or bad:
            attempt_facts(inputs)
        check_roots(states)
        roots = False
    repeated = decoded(
        per_unit.filter(pl.col(_DISTINCT) < pl.col("repeats")).select(unit)
    ).collect()
    if repeated.height:
        contract = spec("attempts")
        raise_duplicate_keys(
            inputs.attempts.join(repeated.lazy(), on=unit, how="semi"),
            contract,
            (*contract.key, *inputs.unit_keys[1:]),
        )
    check_consistency(inputs, k, base=base, roots=roots, per_unit=per_unit)
    found = units(per_unit.drop(_FIRST, _LAST, _DISTINCT, _BAD, strict=False), k)
    return found if codes else decoded(found.drop(CODES))


def _state_table(inputs: Inputs) -> pl.LazyFrame:
    """Return the states' columns the units need, with their integer :data:`CODES`."""
    state_columns = [*_STATE_COLUMNS, *(c for c in inputs.state_keys if c not in _STATE_COLUMNS)]
    cell = list(dict.fromkeys(["workflow_id", *inputs.state_keys]))
    return (
        inputs.states.select(state_columns)
        .with_row_index(CODES[2])
        .with_columns(
            pl.col("workflow_id").rank("dense").cast(pl.UInt32).alias(CODES[0]),
            pl.col("root_cause_id").rank("dense").cast(pl.UInt32).alias(CODES[1]),
            pl.col(CODES[2]).min().over(cell),
        )
    )


def _units_pass(inputs: Inputs, row_checks: bool) -> tuple[pl.LazyFrame, pl.LazyFrame, int, int]:
    """Return the per-unit table, the states it read, its rows and its rows' data-check failures.

    When the agent is the only attempt-level key, :func:`packed_per_unit` groups the attempts
    by one integer key and the table is a view of its narrow result (:func:`_packed_view`);
    where its conditions fail, and for other unit keys, the attempts are grouped by their text
    keys (:func:`_per_unit`). Both give the same table. Data-check failures are counted only
    with ``row_checks``.
    """
    states = _state_table(inputs)
    checks = data_checks(spec("attempts"), inputs.attempts.collect_schema()) if row_checks else {}
    if tuple(inputs.unit_keys) == ("agent",):
        table = states.collect()
        # A null state_id or agent gives a null key, which sends the pass to the text group-by
        # as surely as its check would: the first pass need not read the two text columns.
        rows = [e for e in checks.values() if not set(e.meta.root_names()) <= {"state_id", "agent"}]
        odd = pl.any_horizontal(*rows) if rows else None
        packed = packed_per_unit(inputs.attempts, table, counts=unit_flags(), odd=odd)
        if packed is not None:
            view = _packed_view(*packed, table, row_checks)
            return view, table.lazy(), packed[0].height, 0
    per_unit = _per_unit(inputs, states, checks).collect(engine="streaming")
    bad = int(per_unit[_BAD].sum()) if checks else 0
    return per_unit.lazy(), inputs.states, per_unit.height, bad


def _packed_view(
    packed: pl.DataFrame, agents: pl.Series, states: pl.DataFrame, row_checks: bool
) -> pl.LazyFrame:
    """Return :func:`_per_unit`'s table as a lazy view of :func:`packed_per_unit`'s units.

    Its text columns are 32-bit codes (:func:`coded`; :func:`checked_units` decodes them unless
    its caller keeps codes); state columns are gathered only by the queries that read them.
    """
    codes = states.with_columns(
        coded(states.get_column(c)) for c in states.columns if states.schema[c] == pl.String
    )

    def state(column: str) -> pl.Expr:
        return pl.lit(codes.get_column(column)).gather(pl.col("__state")).alias(column)

    carried = [c for c in states.columns if c != "state_id"]
    view = packed.lazy().select(
        state("state_id"),
        pl.lit(agents).gather(pl.col("__agent")).alias("agent"),
        "repeats",
        *unpacked(list(unit_flags()), UNIT_FIELD),
        pl.col("first").alias(_FIRST),
        pl.col("last").alias(_LAST),
        pl.col("distinct").alias(_DISTINCT),
        *([pl.lit(0, dtype=pl.UInt32).alias(_BAD)] if row_checks else []),
        pl.col("__agent").alias(CODES[3]),
        *(state(c) for c in carried),
    )
    order = [*UNIT_COUNTS, _FIRST, _LAST, _DISTINCT, *([_BAD] if row_checks else [])]
    return view.with_columns(unit_differences()).select(
        "state_id", "agent", *order, CODES[3], *carried
    )


def _per_unit(inputs: Inputs, states: pl.LazyFrame, checks: dict[str, pl.Expr]) -> pl.LazyFrame:
    """Aggregate the attempts per unit by their text keys; join their ``states`` (any unit keys).

    With ``checks``, also the number of rows per unit that break a data check (``_BAD``).
    """
    bad = [pl.any_horizontal(*checks.values()).sum().alias(_BAD)] if checks else []
    unit = ["state_id", *inputs.unit_keys]
    return (
        inputs.attempts.group_by(unit)
        .agg(
            *unit_aggregates(),
            pl.col("repeat").min().alias(_FIRST),
            pl.col("repeat").max().alias(_LAST),
            pl.col("repeat").n_unique().alias(_DISTINCT),
            *bad,
        )
        .with_columns(unit_differences())
        .select(
            *unit,
            *UNIT_COUNTS,
            _FIRST,
            _LAST,
            _DISTINCT,
            *(_BAD for _ in bad),
            _agent_code(pl.col("agent")),
        )
        .join(states, on="state_id", how="left")
    )


def check_roots(states: pl.LazyFrame) -> None:
    """Raise for root causes whose states name more than one workflow.

    Distinct (root_cause_id, workflow_id) pairs gathered from every shard give the same answer
    as the whole `states` table. States with their integer :data:`CODES` (dense ranks of the
    two columns) are first checked on the codes (a root's smallest and largest workflow code
    differ), which groups faster than the text; the text names the root causes.
    """
    schema = states.collect_schema()
    if CODES[0] in schema and CODES[1] in schema:
        workflow = pl.col(CODES[0])
        split = states.group_by(CODES[1]).agg((workflow.min() != workflow.max()).alias("split"))
        if not split.select(pl.col("split").any()).collect().item():
            return
    _raise_split_roots(*pl.collect_all(_root_queries(states)))


def _root_queries(states: pl.LazyFrame) -> list[pl.LazyFrame]:
    """Count and first keys of the root causes under more than one workflow."""
    split_root = (
        states.group_by("root_cause_id")
        .agg(pl.col("workflow_id").n_unique().alias("workflows"))
        .filter(pl.col("workflows") > 1)
    )
    return [split_root.select(pl.len()), split_root.select(pl.col("root_cause_id").sort().head(5))]


def _raise_split_roots(count: pl.DataFrame, keys: pl.DataFrame) -> None:
    n = int(count.item())
    if n:
        raise InputError(
            f"states: {n} root cause{_s(n)} appear{'s' if n == 1 else ''} under more than one "
            f"workflow (root_cause_id {format_keys(keys['root_cause_id'], n)}); all "
            "states of one root cause must share one `workflow_id`."
        )


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def pass_at_k_expr(n: str | pl.Expr, c: str | pl.Expr, k: int) -> pl.Expr:
    """Return the unbiased pass@k estimator 1 − C(n−c, k) / C(n, k) as a polars expression.

    ``n`` repeats of which ``c`` passed. With exactly k repeats this is "any of the k repeats
    passed"; with more, it is the probability that k repeats drawn without replacement from the
    n include a pass, i.e. the average of "any of k" over all k-subsets (ARCHITECTURE §3.4).

    The ratio is evaluated in the product form ∏ᵢ₌₀^{k−1} (n−c−i)/(n−i), clipped at 0 once
    n−c < k: no factorials, no overflow, exact 0 and 1 at the ends, and a relative error of a
    few ulps per factor.

    Parameters
    ----------
    n, c
        Column names or expressions for repeats and passes (0 <= c <= n).
    k
        Positive integer.

    Returns
    -------
    polars.Expr
        Float64; null where n < k (pass@k is undefined there).

    Examples
    --------
    >>> frame = pl.DataFrame({"n": [3, 5, 5], "c": [1, 1, 0]})
    >>> frame.select(pass_at_k_expr("n", "c", 3).round(4)).to_series().to_list()
    [1.0, 0.6, 0.0]
    """
    k = check_k(k)
    n_expr = (pl.col(n) if isinstance(n, str) else n).cast(pl.Float64)
    c_expr = (pl.col(c) if isinstance(c, str) else c).cast(pl.Float64)
    miss = pl.lit(1.0)
    for i in range(k):
        miss = miss * ((n_expr - c_expr - i).clip(lower_bound=0.0) / (n_expr - i))
    return pl.when(n_expr >= k).then(1.0 - miss)


def unit_flags() -> dict[str, pl.Expr]:
    """Per-attempt 0/1 flags whose per-unit sums are the outcome and funnel counts."""
    aware, fixed, derived, passed = (pl.col(f) for f in FLAGS)
    return {
        "n_passed": passed,
        "n_aware": aware,
        "n_fixed": fixed,
        "n_derived": derived,
        # The funnel: each layer reached only if every earlier layer holds.
        "aware_fixed": aware & fixed,
        "aware_fixed_derived": aware & fixed & derived,
        "aware_fixed_derived_passed": aware & fixed & derived & passed,
        "aware_passed": aware & passed,
    }


def unit_aggregates() -> list[pl.Expr]:
    """Per-unit counts of repeats, outcomes and funnel layers (all Int64).

    The counts outside the funnel and ``unaware_passed`` are differences of these
    (:func:`unit_differences`): exact, and a third fewer sums over the attempts.
    """
    exprs = {"repeats": pl.len(), **{name: flag.sum() for name, flag in unit_flags().items()}}
    return [expr.cast(pl.Int64).alias(name) for name, expr in exprs.items()]


def _agent_code(agent: pl.Expr) -> pl.Expr:
    """Code each agent by an integer (:data:`CODES`): a ``Categorical`` of its own, exact."""
    return agent.cast(pl.Categorical(pl.Categories.random())).to_physical().alias(CODES[3])


#: Counts that are differences of two :func:`unit_aggregates` (name: (total, part)), in
#: output order after ``aware_fixed_derived_passed``. Attempts that reach a layer while an
#: earlier one fails (say fixed without aware) are outside the funnel: counted so that
#: n_fixed = aware_fixed + off_funnel_fixed, etc.
DIFFERENCES = {
    "off_funnel_fixed": ("n_fixed", "aware_fixed"),
    "off_funnel_derived": ("n_derived", "aware_fixed_derived"),
    "off_funnel_passed": ("n_passed", "aware_fixed_derived_passed"),
    "unaware_passed": ("n_passed", "aware_passed"),
}

#: Per-unit count columns, in output order.
UNIT_COUNTS = (
    "repeats",
    "n_passed",
    "n_aware",
    "n_fixed",
    "n_derived",
    "aware_fixed",
    "aware_fixed_derived",
    "aware_fixed_derived_passed",
    *list(DIFFERENCES)[:3],
    "aware_passed",
    "unaware_passed",
)


def unit_differences(names: Sequence[str] = tuple(DIFFERENCES)) -> list[pl.Expr]:
    """Return the counts of :data:`DIFFERENCES` named ``names``, from their two sums."""
    return [
        (pl.col(DIFFERENCES[name][0]) - pl.col(DIFFERENCES[name][1])).alias(name) for name in names
    ]


def units(joined: pl.LazyFrame, k: int) -> pl.LazyFrame:
    """One row per (state, *unit keys) with counts, pass@1, pass@k and the rejection reason.

    ``joined``: the attempts aggregated by :func:`unit_aggregates` per unit, joined with their
    states (see :func:`checked_units`, whose checks refuse units of unknown states).
    """
    return joined.with_columns(
        (pl.col("n_passed") / pl.col("repeats")).alias("pass_at_1"),
        pass_at_k_expr("repeats", "n_passed", k).alias("pass_at_k"),
        pl.when(~pl.col("replay_ok"))
        .then(pl.lit(REJECTED[0]))
        .when(~pl.col("expected_ok"))
        .then(pl.lit(REJECTED[1]))
        .otherwise(pl.lit(None, dtype=pl.String))
        .alias("excluded"),
    ).drop("replay_ok", "expected_ok")


def restrict(
    frame: pl.LazyFrame,
    *,
    group: Sequence[str],
    pair: Sequence[str],
    common_states: bool,
    common_sample: bool,
    agents: int | None = None,
    depths: pl.DataFrame | None = None,
) -> pl.LazyFrame:
    """Mark units outside the common-state and common-sample restrictions in ``excluded``.

    common_states: a unit's state (with its non-agent attempt keys, ``pair``) must have been
    attempted by every agent that has a scored unit anywhere in the frame.
    common_sample: within each ``group`` (the row keys without depth), a root cause is kept only
    if it has a scored unit at every depth that has one in that group, so every depth row of the
    group is computed on the same root causes. Applied after common_states.
    A shard holds only some workflows, so both are decided over all shards and passed in:
    ``agents`` (agents with a scored unit) and ``depths`` (the ``group`` columns and
    ``__depths``, the depths with a scored unit after common_states; :func:`restriction_partials`).
    """
    open_ = pl.col("excluded").is_null()
    if common_states:
        everyone = pl.col("agent").filter(open_).n_unique() if agents is None else pl.lit(agents)
        here = pl.col("agent").filter(open_).n_unique().over(list(pair))
        frame = frame.with_columns(
            pl.when(open_ & (here < everyone))
            .then(pl.lit(NOT_COMMON[0]))
            .otherwise(pl.col("excluded"))
            .alias("excluded")
        )
    if common_sample:
        scored_depths = pl.col("depth").filter(open_).n_unique()
        if depths is None:
            all_depths = scored_depths.over(list(group)) if group else scored_depths
        else:
            frame = _with_depths(frame, group, depths)
            all_depths = pl.col("__depths").fill_null(0)
        root_depths = scored_depths.over([*group, "root_cause_id"])
        frame = frame.with_columns(
            pl.when(open_ & (root_depths < all_depths))
            .then(pl.lit(NOT_COMMON[1]))
            .otherwise(pl.col("excluded"))
            .alias("excluded")
        )
        if depths is not None:
            frame = frame.drop("__depths")
    return frame


def _with_depths(frame: pl.LazyFrame, group: Sequence[str], depths: pl.DataFrame) -> pl.LazyFrame:
    if not group:
        return frame.join(depths.lazy().select("__depths"), how="cross")
    schema = frame.collect_schema()
    lookup = depths.lazy().with_columns(pl.col(c).cast(schema[c]) for c in group)
    return frame.join(lookup, on=list(group), how="left", nulls_equal=True)


def restriction_partials(frame: pl.LazyFrame, group: Sequence[str]) -> dict[str, pl.LazyFrame]:
    """Return one shard's share of the globals of :func:`restrict`, as distinct values.

    ``agents``: the agents with a scored unit (before any restriction; their number over all
    shards is the ``agents`` of :func:`restrict`); ``depths``: distinct (``group``, depth) with a
    scored unit (after common_states; counted per group over all shards, its ``depths``).
    """
    scored = frame.filter(pl.col("excluded").is_null())
    return {
        "agents": scored.select("agent").unique(),
        "depths": scored.select(*group, "depth").unique(),
    }


def score(
    states: object,
    attempts: object,
    *,
    by: Sequence[str] = ("agent", "depth"),
    k: int = 3,
    common_sample: bool = False,
    common_states: bool = False,
) -> pl.LazyFrame:
    """Score every (state, agent) unit: repeats, outcome counts, pass@1, pass@k, exclusion.

    This is the per-unit layer under :func:`summarize`; it is exposed so an analyst can join
    units back to their own tables or check which root causes a restriction kept.

    Parameters
    ----------
    states, attempts
        The `states` and `attempts` tables (ARCHITECTURE §3.4), in any form
        :func:`recoverylab.io.scan` reads.
    by
        Result keys; must include ``agent``. Columns of `attempts` (besides ``agent``) become
        part of the unit; columns of `states` are carried along.
    k
        pass@k parameter; every unit on an eligible state needs at least k repeats.
    common_sample, common_states
        The restrictions of :func:`summarize`; units they remove are kept with a reason.

    Returns
    -------
    polars.LazyFrame
        One row per unit with ``state_id``, the unit keys, ``workflow_id``, ``root_cause_id``,
        ``depth``, the state-level keys, ``repeats``, ``n_passed``, ``n_aware``, ``n_fixed``,
        ``n_derived``, ``aware_fixed``, ``aware_fixed_derived``, ``aware_fixed_derived_passed``,
        ``aware_passed``, ``unaware_passed``, ``pass_at_1`` (n_passed / repeats), ``pass_at_k`` and
        ``excluded`` (null when scored, else ``replay_mismatch``, ``missing_expected``,
        ``not_common_state`` or ``not_common_sample``).

    Raises
    ------
    SchemaError
        A table breaks its contract (including a duplicate (state_id, agent, repeat)).
    InputError
        Attempts of unknown states, a root cause under two workflows, gaps in repeats.
    ParameterError
        A bad ``by`` or ``k``, or units with fewer than k repeats.

    Examples
    --------
    >>> import polars as pl
    >>> states = pl.DataFrame({"state_id": ["s1"], "workflow_id": ["w1"],
    ...     "root_cause_id": ["r1"], "depth": [0], "replay_ok": [True], "expected_ok": [True]})
    >>> attempts = pl.DataFrame({"state_id": ["s1"] * 3, "agent": ["a"] * 3,
    ...     "repeat": [0, 1, 2], "aware": [True, False, False],
    ...     "root_cause_fixed": [True, False, False], "derived_fixed": [True, False, False],
    ...     "passed": [True, False, False]})
    >>> score(states, attempts).collect()["pass_at_k"].to_list()
    [1.0]
    """
    k = check_k(k)
    inputs = load(states, attempts, by)
    found = checked_units(inputs, k)
    return scored_units(
        inputs, common_sample=common_sample, common_states=common_states, found=found
    )


def scored_units(
    inputs: Inputs,
    *,
    common_sample: bool,
    common_states: bool,
    agents: int | None = None,
    depths: pl.DataFrame | None = None,
    found: pl.LazyFrame,
) -> pl.LazyFrame:
    """Restrict checked units ``found`` (:func:`restrict`; ``agents``, ``depths``: a shard's)."""
    return restrict(
        found,
        group=[c for c in inputs.by if c != "depth"],
        pair=["state_id", *inputs.unit_keys[1:]],
        common_states=common_states,
        common_sample=common_sample,
        agents=agents,
        depths=depths,
    )


def eligibility(states: object, *, by: Sequence[str] = ("depth",)) -> pl.LazyFrame:
    """Count eligible and rejected states per slice, rejections by reason.

    A state is eligible when its replay matched the original trajectory (``replay_ok``) and its
    expected values exist (``expected_ok``); otherwise it is rejected and never scored
    (ARCHITECTURE §3.4). A state failing both checks is counted once, under
    ``replay_mismatch`` (the replay check comes first).

    Parameters
    ----------
    states
        The `states` table.
    by
        State columns to slice by (default depth); may be empty.

    Returns
    -------
    polars.LazyFrame
        One row per slice, sorted: the ``by`` columns,
        ``states``, ``eligible_states``, ``rejected_states``, ``rejected_replay_mismatch``,
        ``rejected_missing_expected``, ``eligible_root_causes``, ``eligible_workflows``.

    Raises
    ------
    SchemaError
        `states` breaks its contract.
    ParameterError
        A ``by`` column is not in `states`.

    Examples
    --------
    >>> import polars as pl
    >>> states = pl.DataFrame({"state_id": ["s1", "s2"], "workflow_id": ["w1", "w1"],
    ...     "root_cause_id": ["r1", "r1"], "depth": [0, 5], "replay_ok": [True, False],
    ...     "expected_ok": [True, True]})
    >>> eligibility(states).collect()["eligible_states"].to_list()
    [1, 0]
    """
    columns = column_names("by", by)  # a bad `by` is reported before a bad table
    lazy = validate(states, "states")
    return eligibility_counts(lazy, check_by(lazy.collect_schema(), columns, "states"))


def check_by(schema: pl.Schema, by: object, table: str) -> list[str]:
    """Return the ``by`` columns, each of which must be a column of ``table``."""
    columns = list(column_names("by", by))
    missing = [c for c in columns if c not in schema]
    if missing:
        raise ParameterError(
            f"parameter `by` names `{missing[0]}`, which is not a column of `{table}` "
            f"(columns: {', '.join(schema.names())})."
        )
    return columns


def eligibility_counts(states: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """Build the query of :func:`eligibility` on validated states."""
    ok = pl.col("replay_ok") & pl.col("expected_ok")
    aggregates = [
        pl.len().cast(pl.Int64).alias("states"),
        ok.sum().cast(pl.Int64).alias("eligible_states"),
        (~ok).sum().cast(pl.Int64).alias("rejected_states"),
        (~pl.col("replay_ok")).sum().cast(pl.Int64).alias("rejected_replay_mismatch"),
        (pl.col("replay_ok") & ~pl.col("expected_ok"))
        .sum()
        .cast(pl.Int64)
        .alias("rejected_missing_expected"),
        pl.col("root_cause_id").filter(ok).n_unique().cast(pl.Int64).alias("eligible_root_causes"),
        pl.col("workflow_id").filter(ok).n_unique().cast(pl.Int64).alias("eligible_workflows"),
    ]
    if not by:
        return states.select(aggregates)
    schema = states.collect_schema()
    return states.group_by(list(by)).agg(aggregates).sort(sort_keys(schema, by), nulls_last=False)


def sort_keys(schema: pl.Schema, columns: Sequence[str]) -> list[pl.Expr]:
    """Sort expressions that do not depend on input order (categoricals sort by their text)."""
    return [
        pl.col(c).cast(pl.String) if isinstance(schema.get(c), pl.Categorical) else pl.col(c)
        for c in columns
    ]
