"""Pairing recovery branches with their no-recovery branch (ARCHITECTURE §3.1).

One lazy query turns a ``forks`` table into *branch rows*: one row per recovery point of an
episode (task_id, condition, *pair_by) -- a real pair, a carried-forward pair, or an excluded
recovery row with its ``reason``. Everything public in :mod:`recoverylab.paired` is built on it:
:func:`pairs` keeps the pairs, :func:`exclusions` counts the excluded rows, and the summaries
aggregate it to per-task partials on polars' streaming engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from recoverylab._errors import InputError, ParameterError, format_keys, require_one_of
from recoverylab.paired import _rules as rules
from recoverylab.paired._rules import AFTER_END, REASONS
from recoverylab.schema import SPECS, column_names, validate

__all__ = ["Cohort", "exclusions", "pairs"]

Cohort = Literal["full", "factual_success"]
COHORTS = ("full", "factual_success")
OUTCOMES = ("rescue", "harm", "kept", "unchanged")

_FORKS = SPECS["forks"]
_CONTRACT = tuple(c.name for c in _FORKS.columns)
#: Columns of the pairing itself; a grouping key may not reuse them.
_CELL_COLUMNS = ("task_id", "condition", "method", "delay")
_BRANCH_COLUMNS = ("success", "prefix_hash", "perturb_action", "end_action")

Progress = Callable[[str], None] | None


@dataclass(frozen=True)
class Forks:
    """A validated forks table and the keys that pair its branches (internal)."""

    lf: pl.LazyFrame
    pair_by: tuple[str, ...]
    columns: frozenset[str]
    int_ids: pl.LazyFrame | None = None
    """The table with integer task ids left Int64 (``None`` for string ids), which the per-task
    group-by of :mod:`._bits` groups, casting only its result."""

    @property
    def episode(self) -> list[str]:
        """Key of an episode: the branches forked from one state share it."""
        return rules.episode_key(self.pair_by)

    @property
    def has_factual(self) -> bool:
        """Whether the table has the optional ``factual_success`` column."""
        return "factual_success" in self.columns


#: Normalise a ``by``/``pair_by`` parameter (the name the paired modules import).
key_names = column_names


def prepare(
    forks: object,
    *,
    pair_by: str | Sequence[str] | None = (),
    by: str | Sequence[str] | None = (),
    cohort: str = "full",
    progress: Progress = None,
    checks: Literal["full", "schema"] = "full",
) -> tuple[Forks, tuple[str, ...]]:
    """Validate ``forks`` against its contract and the ``pair_by``/``by``/``cohort`` choices.

    Parameters are checked on the schema first: a typo fails before any data is read. Returns
    the table (categorical keys cast to strings: results do not depend on how keys were stored)
    and the ``by`` keys. ``checks="schema"`` leaves the data checks to the caller's aggregation.
    """
    require_one_of("cohort", cohort, COHORTS)
    pair_keys = key_names("pair_by", pair_by)
    by_keys = key_names("by", by)
    for name, keys, forbidden in (
        ("pair_by", pair_keys, _CONTRACT),
        ("by", by_keys, (*_CELL_COLUMNS, *_BRANCH_COLUMNS)),
    ):
        clash = [k for k in keys if k in forbidden]
        if clash:
            role = (
                "a contract column of forks; pair_by names extra keys such as model or seed"
                if name == "pair_by"
                else "a cell key or a branch-level column; by names extra grouping columns"
            )
            raise ParameterError(f"parameter `{name}` names `{clash[0]}`, which is {role}.")
    ints = validate(forks, "forks", key=pair_keys, checks="schema", integer_ids=True)
    schema = ints.collect_schema()
    integer = schema["task_id"].is_integer()
    # the canonical table: task ids as strings (identical to validate's own cast)
    lazy = ints.with_columns(pl.col("task_id").cast(pl.String)) if integer else ints
    check_by_columns(by_keys, schema.names())
    if cohort == "factual_success" and "factual_success" not in schema:
        raise ParameterError(
            "forks: parameter `cohort` is 'factual_success' but the table has no "
            "`factual_success` column. Hint: add it, or use cohort='full'."
        )
    if checks == "full":
        if progress is not None:
            progress("validating forks")
        lazy = validate(lazy, "forks", key=pair_keys)
    categorical = [
        pl.col(k).cast(pl.String)
        for k in dict.fromkeys((*pair_keys, *by_keys))
        if isinstance(schema[k], (pl.Categorical, pl.Enum))
    ]
    if categorical:
        lazy = lazy.with_columns(categorical)
        ints = ints.with_columns(categorical)
    return Forks(lazy, pair_keys, frozenset(schema.names()), ints if integer else None), by_keys


def check_by_columns(by: Sequence[str], columns: Sequence[str]) -> None:
    """Raise ParameterError naming the first ``by`` key that is not one of ``columns``."""
    missing = [k for k in by if k not in columns]
    if missing:
        raise ParameterError(
            f"forks: parameter `by` names column `{missing[0]}`, which is not in the table "
            f"(columns: {', '.join(columns)})."
        )


@dataclass(frozen=True)
class Design:
    """The candidate recovery points of a forks table, and whether it replays per delay."""

    points: pl.DataFrame
    """Distinct (condition, *pair_by, method, delay) of the recovery rows."""
    specific_none: bool
    """Whether some `none` row has a delay (delay-specific no-recovery branches)."""

    @property
    def conditions(self) -> list[str]:
        """Conditions with recovery rows, sorted."""
        return sorted(self.points["condition"].unique().to_list())

    @property
    def methods(self) -> list[str]:
        """Recovery methods, sorted."""
        return sorted(self.points["method"].unique().to_list())

    def only(self, method: str) -> Design:
        """Return the design restricted to one recovery method."""
        return Design(self.points.filter(pl.col("method") == method), self.specific_none)


def design_grid(forks: Forks) -> Design:
    """Return the candidate recovery points: distinct (condition, *pair_by, method, delay).

    A task that ended before a point has no recovery row there: its points are read from the
    other tasks (same condition, pair_by keys, method). The same pass of the few key columns
    tells whether any `none` row is delay-specific (if none is, the pairing needs one join).
    """
    return design_of(design_points(forks).collect(engine="streaming"))


def design_points(forks: Forks) -> pl.LazyFrame:
    """Return the distinct (condition, *pair_by*, method, delay) of a table (or of a shard)."""
    return forks.lf.select("condition", *forks.pair_by, "method", "delay").unique()


def design_of(found: pl.DataFrame) -> Design:
    """Turn the distinct design keys (of one table, or of its shards concatenated) into a Design."""
    found = found.unique()
    is_none = rules.is_baseline()
    return Design(
        points=found.filter(~is_none),
        specific_none=found.filter(is_none & pl.col("delay").is_not_null()).height > 0,
    )


def _opt(forks: Forks, name: str, dtype: pl.DataType | type[pl.DataType]) -> pl.Expr:
    return pl.col(name) if name in forks.columns else pl.lit(None, dtype=dtype)


def branch_rows(forks: Forks, design: Design, carry: Sequence[str] = ()) -> pl.LazyFrame:
    """Build the pairing query: one row per recovery point, paired, carried or excluded.

    Columns: the episode, method, delay, ``y0``/``y1`` (outcome without/with recovery),
    ``carried_forward``, ``reason`` (null for a pair; ``unpaired``, ``prefix_mismatch`` or
    ``after_end``), ``factual_success`` if present, and the ``carry`` columns (of the recovery
    row; of the ``none`` row when carried forward).
    """
    episode = forks.episode
    carry = [c for c in carry if c not in (*episode, "factual_success")]
    none = forks.lf.filter(rules.is_baseline())
    recovery = forks.lf.filter(~rules.is_baseline())
    baseline = [
        pl.col("success").alias("y0"),
        _opt(forks, "prefix_hash", pl.String).alias("__prefix0"),
        _opt(forks, "perturb_action", pl.Int64).alias("__perturb"),
        _opt(forks, "end_action", pl.Int64).alias("__end"),
        _opt(forks, "factual_success", pl.Boolean).alias("__factual0"),
    ]
    names = [e.meta.output_name() for e in baseline]
    # A `none` row with a delay replays that delay only and wins over the shared one (§3.1).
    specific = none.filter(pl.col("delay").is_not_null()).select(
        *episode, "delay", *(e.name.suffix("_d") for e in baseline), pl.lit(True).alias("__d")
    )
    shared = none.filter(pl.col("delay").is_null()).select(
        *episode, *(e.name.suffix("_s") for e in baseline), pl.lit(True).alias("__s")
    )
    joined = recovery.select(
        *episode,
        "method",
        "delay",
        pl.col("success").alias("y1"),
        _opt(forks, "prefix_hash", pl.String).alias("__prefix1"),
        _opt(forks, "factual_success", pl.Boolean).alias("__factual1"),
        *carry,
    )
    if design.specific_none:
        joined = joined.join(specific, on=[*episode, "delay"], how="left", nulls_equal=True)
    joined = joined.join(shared, on=episode, how="left", nulls_equal=True)
    if design.specific_none:
        has_d = pl.col("__d").fill_null(False)
        joined = joined.with_columns(
            pl.when(has_d).then(pl.col(f"{n}_d")).otherwise(pl.col(f"{n}_s")).alias(n)
            for n in names
        )
        paired = has_d | pl.col("__s").fill_null(False)
    else:
        joined = joined.rename({f"{n}_s": n for n in names})
        paired = pl.col("__s").fill_null(False)
    # Carry-forward reads perturb_action and end_action from the `none` row (§3.1).
    gap = rules.run_gap(pl.col("__perturb"), pl.col("__end"))
    ended = rules.after_end(pl.col("delay"), gap).fill_null(False)
    mismatch = rules.prefix_differs(pl.col("__prefix1"), pl.col("__prefix0"))
    reason = rules.reason(paired, ended, mismatch)
    factual = [pl.coalesce("__factual0", "__factual1").alias("factual_success")]
    real = joined.select(
        *episode,
        "method",
        "delay",
        "y0",
        "y1",
        pl.lit(False).alias("carried_forward"),
        reason.alias("reason"),
        *(factual if forks.has_factual else []),
        *carry,
    )
    carried = _carried(forks, design, none, specific, baseline, carry)
    if carried is None:
        return real
    return pl.concat([real, carried], how="vertical")


def _carried(
    forks: Forks,
    design: Design,
    none: pl.LazyFrame,
    specific: pl.LazyFrame,
    baseline: list[pl.Expr],
    carry: list[str],
) -> pl.LazyFrame | None:
    """Carried-forward pairs: recovery points after the no-recovery run ended, y1 = y0 (§3.1).

    A recovery row at such a point is reported as ``after_end`` by the main join (callers raise).
    """
    grid = design.points
    if not {"perturb_action", "end_action"} <= forks.columns or grid.height == 0:
        return None
    episode = forks.episode
    points = grid.lazy()
    latest = int(grid["delay"].max())  # type: ignore[arg-type]
    gap = rules.run_gap(pl.col("__perturb"), pl.col("__end"))
    # Only runs that ended before the latest candidate point can carry anything forward.
    ended = none.select(*episode, "delay", *baseline, *carry).filter(
        rules.after_end(pl.lit(latest), gap).fill_null(False)
    )
    from_shared = (
        ended.filter(pl.col("delay").is_null())
        .drop("delay")
        .join(points, on=["condition", *forks.pair_by], how="inner", nulls_equal=True)
    )
    if not design.specific_none:
        sources = [from_shared]
    else:
        # a delay-specific `none` row decides its own delay (§3.1)
        from_shared = from_shared.join(
            specific.select(*episode, "delay"),
            on=[*episode, "delay"],
            how="anti",
            nulls_equal=True,
        )
        from_specific = ended.filter(pl.col("delay").is_not_null()).join(
            points, on=["condition", *forks.pair_by, "delay"], how="inner", nulls_equal=True
        )
        sources = [from_specific, from_shared]
    factual = [pl.col("__factual0").alias("factual_success")] if forks.has_factual else []
    columns = [
        *episode,
        "method",
        "delay",
        "y0",
        pl.col("y0").alias("y1"),
        pl.lit(True).alias("carried_forward"),
        pl.lit(None, dtype=pl.String).alias("reason"),
        *factual,
        *carry,
    ]
    at_end = rules.after_end(pl.col("delay"), gap)
    return pl.concat([s.filter(at_end).select(columns) for s in sources], how="vertical")


def apply_cohort(rows: pl.LazyFrame, forks: Forks, cohort: str) -> pl.LazyFrame:
    """Keep the rows of the cohort: all, or tasks whose factual run succeeded."""
    if cohort == "full":
        return rows
    return rows.filter(pl.col("factual_success").fill_null(False))


def raise_after_end(rows: pl.LazyFrame, forks: Forks) -> None:
    """Raise InputError naming recovery rows given for a point after their task ended."""
    keys = [*forks.episode, "method", "delay"]
    bad = rows.filter(pl.col("reason") == AFTER_END)
    first = bad.select(keys).sort(keys, nulls_last=True).head(5)
    total_frame, sample = pl.collect_all([bad.select(pl.len()), first], engine="streaming")
    total = int(total_frame.item())
    if not total:
        return
    noun = "recovery row is" if total == 1 else "recovery rows are"
    raise InputError(
        f"forks: {total} {noun} at or after the end of the no-recovery run "
        f"({'/'.join(keys)} {format_keys(sample.rows(), total)}); a task that ended before the "
        "recovery point (perturb_action + delay >= end_action) is carried forward with the "
        "no-recovery outcome and must have no recovery row. Hint: drop these rows, or fix "
        "`end_action` on the `none` row."
    )


def pairs(
    forks: object,
    *,
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
) -> pl.LazyFrame:
    """Pair every recovery branch with the no-recovery branch forked from the same state.

    Each recovery row (``method != "none"``) joins the ``none`` row with the same (task_id,
    condition, *pair_by*): the one with its ``delay`` if any (delay-specific replay), else the
    shared one (null delay). A task whose no-recovery run ended before a recovery point
    (``perturb_action + delay >= end_action``, from the ``none`` row) stays in the denominator
    there with ``y1 = y0``, at every delay the table has for its (condition, *pair_by*, method),
    without a recovery row. Recovery rows with no ``none`` row (``unpaired``) or another
    ``prefix_hash`` (``prefix_mismatch``) are left out and counted by :func:`exclusions`. Only
    the design grid and the validation counts are collected.

    Parameters
    ----------
    forks
        The ``forks`` table (any source :func:`recoverylab.io.scan` reads; eager or lazy).
    pair_by
        Extra keys a pair must share, such as model or seed.
    cohort
        ``"full"`` or ``"factual_success"`` (tasks whose factual run succeeded).

    Returns
    -------
    pl.LazyFrame
        One row per pair: task_id, condition, *pair_by, method, delay, ``y0``, ``y1`` (bool),
        ``outcome`` (``rescue``: y0 false, y1 true; ``harm``: y0 true, y1 false; ``kept``: both
        true; ``unchanged``: both false), ``carried_forward`` (bool), ``factual_success`` when
        present, then the other extra columns of the recovery row (of the ``none`` row when
        carried forward).

    Raises
    ------
    SchemaError
        When ``forks`` breaks its contract (missing column, null ``success``, duplicate branch
        key (task_id, condition, method, delay, *pair_by*), ...).
    InputError
        When a recovery row is given for a point after its task ended.
    ParameterError
        For an unknown ``cohort`` or a ``pair_by`` key that is a contract column.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1", "t1"], "condition": ["stale2"] * 2,
    ...                       "method": ["none", "refresh"], "delay": [None, 0],
    ...                       "success": [False, True]})
    >>> pairs(forks).select("outcome").collect().item()
    'rescue'
    """
    table, _ = prepare(forks, pair_by=pair_by, cohort=cohort)
    return pair_rows(table, design_grid(table), cohort)


def pair_rows(
    table: Forks, design: Design, cohort: str = "full", carry: Sequence[str] | None = None
) -> pl.LazyFrame:
    """Return the rows of :func:`pairs` of a prepared table (or shard) against ``design``.

    ``design``: the whole table's grid, so a shard's carried-forward pairs are right (§7).
    ``carry``: the extra columns kept (default: every column outside the contract).
    """
    if carry is None:
        names = table.lf.collect_schema().names()
        carry = [c for c in names if c not in (*_CONTRACT, *table.pair_by)]
    rows = apply_cohort(branch_rows(table, design, carry=carry), table, cohort)
    raise_after_end(rows, table)
    head = [*table.episode, "method", "delay", "y0", "y1"]
    return rows.filter(pl.col("reason").is_null()).select(
        *head, outcome_expr().alias("outcome"), pl.exclude(*head, "reason")
    )


def outcome_expr() -> pl.Expr:
    """Return the paired outcome of y0 (no recovery) and y1 (recovery): one of OUTCOMES."""
    classes = rules.outcomes(pl.lit(True), pl.lit(False), pl.col("y0"), pl.col("y1"))
    return pl.coalesce(pl.when(classes[name]).then(pl.lit(name)) for name in OUTCOMES)


def exclusions(
    forks: object,
    *,
    pair_by: str | Sequence[str] | None = (),
    by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    keys: bool = False,
) -> pl.LazyFrame:
    """Count the recovery rows left out of the pairing, by reason (never dropped silently).

    Parameters
    ----------
    forks, pair_by, cohort
        As in :func:`pairs`.
    by
        Extra grouping columns of the counts.
    keys
        Return the excluded rows' keys instead of counts.

    Returns
    -------
    pl.LazyFrame
        With ``keys=False``: one row per (condition, delay, method, *by*, ``reason``) that has
        excluded rows, with ``rows`` (count). With ``keys=True``: one row per excluded recovery
        row with task_id, condition, *pair_by*, method, delay, *by*, ``reason``. Reasons are
        ``unpaired`` (no ``none`` row for the episode and delay) and ``prefix_mismatch``.

    Raises
    ------
    SchemaError, InputError, ParameterError
        As :func:`pairs`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1"], "condition": ["clean"],
    ...                       "method": ["refresh"], "delay": [0], "success": [True]})
    >>> exclusions(forks).collect().row(0)
    ('clean', 0, 'refresh', 'unpaired', 1)
    """
    table, by_keys = prepare(forks, pair_by=pair_by, by=by, cohort=cohort)
    rows = apply_cohort(branch_rows(table, design_grid(table), carry=by_keys), table, cohort)
    raise_after_end(rows, table)
    excluded = rows.filter(pl.col("reason").is_in(list(REASONS)))
    by_cols = [k for k in by_keys if k not in table.pair_by]
    if keys:
        return excluded.select(*table.episode, "method", "delay", *by_cols, "reason").sort(
            [*table.episode, "method", "delay", "reason"], nulls_last=True
        )
    cells = ["condition", "delay", "method", *by_keys]
    return (
        excluded.group_by([*cells, "reason"])
        .agg(pl.len().cast(pl.Int64).alias("rows"))
        .sort([*cells, "reason"], nulls_last=True)
    )
