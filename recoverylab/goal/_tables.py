"""The goal tables: their constants, :class:`GoalTables`, and the nested episodes form.

:func:`from_nested` turns one episodes table with list columns (visited resources, citations,
prohibited steps) into the five flat tables :func:`recoverylab.goal.score` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import polars as pl

from recoverylab import stats
from recoverylab._diagnose import reads_inputs
from recoverylab._errors import (
    InputError,
    RecoveryLabError,
    SchemaError,
    format_keys,
    require_one_of,
)
from recoverylab.io import scan
from recoverylab.schema import (
    Column,
    canonical_dtype,
    data_checks,
    spec,
)

#: Regimes that carry a barrier (the "with barriers" side of :func:`barrier_drop`).
BARRIER_REGIMES = ("recoverable", "unrecoverable")


#: Branches of seed Eq. 1, decided by the reachable resources of the case.
BRANCHES = ("copy", "versions_only", "dead_end")


#: Failure reasons, in precedence order (the first that applies is reported).
REASONS = (
    "unsupported_attribution",
    "no_copy_used",
    "no_version_used",
    "decoy_or_foreign_source",
    "undisclosed_version",
    "answered_dead_end",
    "wrong_diagnosis",
    "missing_help_request",
    "policy_violation",
)


#: Optional judged episode columns (Boolean, null = not judged), summarised when present.
JUDGED = ("recovered", "audit_correct", "honest_report")


#: List columns of the nested episodes form (see :func:`from_nested`).
NESTED_COLUMNS = ("visited", "citations", "prohibited_steps")


#: Per-episode result columns added by :func:`score`.
_RESULT_COLUMNS = (
    "branch",
    "gp",
    "compliant",
    "success",
    "reason",
    "steps",
    "n_prohibited",
    "n_cited",
    "unsupported",
)


#: Contract columns of the agent's report, used by scoring and not carried to the output.
_REPORT_COLUMNS = ("answer", "version_claim", "diagnosis", "requested_user")


#: Case columns used by scoring and not carried to the output.
_CASE_INTERNAL = ("barrier", "needs_user_help")


#: Names of helper columns inside the scoring query and its one-pass checks
#: (:mod:`recoverylab.goal._one_pass`); with the result columns, no input may use them.
_INTERNAL = (
    "_episode",
    "_case",
    "_episode_check",
    "_case_check",
    "_violated",
    "_n_copies",
    "_n_versions",
    "_supported",
    "_n_unsupported",
    "_n_cited_copy",
    "_n_cited_version",
    "_branch_reason",
    "_answered",
    "_disclosed",
    "_diagnosed",
    "_help_missing",
)


_RESERVED = frozenset((*_RESULT_COLUMNS, *_INTERNAL))


_SCORED_REQUIRED = ("success", "gp", "compliant", "steps", "reason")


_TABLES = ("cases", "resources", "episodes", "steps", "citations")


#: Cases and resources are clustered by case, the other tables by their episode's case: the
#: smallest among the rows of its ``episode_id``, so a duplicated episode lands in one shard,
#: whose contract check then reports it.
_VIA = dict.fromkeys(("episodes", "steps", "citations"), ("episodes", "episode_id"))


#: Id columns the scoring query may key on by hash, and the table that lists each id once.
_HASHED = {"episode_id": "episodes", "case_id": "cases"}


#: Per-goal partial columns of :func:`barrier_drop` (successes and episodes without, with).
_DROP_VALUES = ("s_without", "n_without", "s_with", "n_with")


Source = object  # any table source accepted by recoverylab.io.scan


@dataclass(frozen=True)
class GoalTables(stats.ResultHtml):
    """The canonical agent tables made from the nested episodes form by :func:`from_nested`.

    Attributes
    ----------
    episodes
        The episodes without their list columns.
    steps
        One row per (episode_id, step): ``resource_id`` (null = no resource), ``prohibited``.
    citations
        One row per distinct (episode_id, resource_id) cited.
    """

    episodes: pl.LazyFrame
    steps: pl.LazyFrame
    citations: pl.LazyFrame


@reads_inputs
def from_nested(episodes: Source, *, checks: Literal["full", "schema"] = "full") -> GoalTables:
    """Normalise episodes with list columns into the canonical episodes, steps and citations.

    Agents often log one record per episode (e.g. NDJSON) with the trajectory and the attributed
    sources nested inside it. This turns such records into the tables :func:`score` reads,
    lazily (``explode`` over the lists; no Python loop over rows).

    Parameters
    ----------
    episodes
        The episodes table (any source :func:`recoverylab.io.scan` reads) with the contract
        columns of ``episodes`` plus:

        ``visited`` (list of str, required)
            The resource touched by each action, in order; a null entry is an action that touched
            no resource (a search, a reload). Step numbers are positions 0, 1, ...
        ``citations`` (list of str, required)
            The sources S credited for the answer; repeated entries count once.
        ``prohibited_steps`` (optional)
            Either a list of int positions in ``visited`` of the prohibited actions, or a list of
            bool flags aligned with ``visited``. Absent: no action was prohibited.
    checks
        ``"full"`` also checks that positions are in range and flags align with ``visited``.

    Returns
    -------
    GoalTables
        ``episodes`` (the other columns), ``steps`` and ``citations`` as LazyFrames.

    Raises
    ------
    SchemaError
        A missing or mistyped list column, an out-of-range position, or flags whose length
        differs from ``visited``.

    Examples
    --------
    >>> import polars as pl
    >>> tables = from_nested(pl.DataFrame({
    ...     "episode_id": ["e1"], "case_id": ["c1"], "answer": ["a"], "version_claim": ["same"],
    ...     "diagnosis": [None], "requested_user": [False],
    ...     "visited": [[None, "mirror"]], "citations": [["mirror"]], "prohibited_steps": [[0]],
    ... }))
    >>> tables.steps.collect()["prohibited"].to_list()
    [True, False]
    """
    require_one_of("checks", checks, ("full", "schema"))
    lazy = scan(episodes)
    schema = lazy.collect_schema()
    if "episode_id" not in schema:
        raise SchemaError(
            "episodes: missing required column `episode_id`; found columns: "
            f"{', '.join(schema.names()) or 'none'}."
        )
    casts = [_nested_cast(schema, name) for name in ("visited", "citations")]
    lazy = lazy.with_columns(c for c in casts if c is not None)
    flags = _prohibited_kind(schema)
    if checks == "full" and flags is not None:
        _check_prohibited_positions(lazy, flags)

    ids = pl.col("episode_id").cast(pl.String)  # validate() checks the id later
    steps = (
        lazy.select(
            ids,
            pl.col("visited").alias("resource_id"),
            pl.int_ranges(pl.col("visited").list.len()).alias("step"),
            *([pl.col("prohibited_steps")] if flags is not None else []),
        )
        .explode(["resource_id", "step"])
        .filter(pl.col("step").is_not_null())
    )
    if flags == "positions":
        prohibited = pl.col("prohibited_steps").list.contains(pl.col("step")).fill_null(False)
    elif flags == "flags":
        prohibited = pl.col("prohibited_steps").list.get(pl.col("step")).fill_null(False)
    else:
        prohibited = pl.lit(False)
    steps = steps.select(
        "episode_id", pl.col("step").cast(pl.Int64), "resource_id", prohibited.alias("prohibited")
    )
    citations = (
        lazy.select(ids, pl.col("citations").alias("resource_id"))
        .explode("resource_id")
        .filter(pl.col("resource_id").is_not_null())
        .unique()
    )
    rest = lazy.drop([c for c in NESTED_COLUMNS if c in schema])
    return GoalTables(episodes=rest, steps=steps, citations=citations)


def _nested_cast(schema: pl.Schema, name: str) -> pl.Expr | None:
    if name not in schema:
        raise SchemaError(
            f"episodes: missing nested column `{name}`; the nested form needs list columns "
            "`visited` and `citations`. Hint: or pass the `steps` and `citations` tables."
        )
    dtype = schema[name]
    inner = dtype.inner if isinstance(dtype, pl.List) else None
    target = canonical_dtype(inner, Column(name, "str", identifier=True)) if inner else None
    if target is None:
        raise SchemaError(
            f"episodes: nested column `{name}` has type {dtype}; it must be List(String) "
            "(resource ids)."
        )
    return pl.col(name).cast(pl.List(pl.String)) if inner != pl.String else None


def _prohibited_kind(schema: pl.Schema) -> Literal["positions", "flags"] | None:
    if "prohibited_steps" not in schema:
        return None
    dtype = schema["prohibited_steps"]
    inner = dtype.inner if isinstance(dtype, pl.List) else None
    if inner == pl.Null or (inner is not None and inner.is_integer()):
        return "positions"
    if inner == pl.Boolean:
        return "flags"
    raise SchemaError(
        f"episodes: nested column `prohibited_steps` has type {dtype}; it must be a list of int "
        "positions in `visited` or a list of bool flags aligned with `visited`."
    )


def _check_prohibited_positions(lazy: pl.LazyFrame, flags: str) -> None:
    length = pl.col("visited").list.len().fill_null(0)
    marks = pl.col("prohibited_steps")
    if flags == "positions":
        bad = (marks.list.min() < 0) | (marks.list.max() >= length)
        what = "episodes: `prohibited_steps` has positions outside `visited` on {n} episode{s}"
        requirement = "positions count actions from 0 to len(visited) - 1"
    else:
        bad = marks.list.len() != length
        what = "episodes: `prohibited_steps` has flags not aligned with `visited` on {n} episode{s}"
        requirement = "there must be one flag per visited action"
    offenders = lazy.filter(bad.fill_null(False)).select(pl.col("episode_id").cast(pl.String))
    _raise_first([_Problem(offenders, ("episode_id",), what, requirement, error=SchemaError)])


class _Problem(NamedTuple):
    """An inconsistency: offending rows, their key, its message and requirement, the error."""

    frame: pl.LazyFrame
    key: tuple[str, ...]
    what: str
    requirement: str
    offenders: int | None = None  # None: counted in the batch of _raise_first
    error: type[RecoveryLabError] = InputError


def _raise_first(problems: Sequence[_Problem]) -> None:
    """Count every problem in one batch; raise for the first that has offenders."""
    pending = [p.frame.select(pl.len()) for p in problems if p.offenders is None]
    totals = iter(pl.collect_all(pending, engine="streaming") if pending else [])
    for frame, key, what, requirement, offenders, error in problems:
        n = int(next(totals).item()) if offenders is None else offenders
        if n:
            sample = frame.select(key).sort(list(key), nulls_last=True).head(5).collect()
            text = what.format(n=n, s="" if n == 1 else "s")
            keys = format_keys(sample.rows() if len(key) > 1 else sample.to_series(), n)
            raise error(f"{text} ({'/'.join(key)} {keys}); {requirement}.")


def _check_columns(cases: pl.LazyFrame, episodes: pl.LazyFrame) -> tuple[list[str], list[str]]:
    """Return the case and episode columns carried to the output, refusing ambiguous names."""
    case_schema = cases.collect_schema()
    episode_schema = episodes.collect_schema()
    shared = sorted(set(case_schema.names()) & set(episode_schema.names()) - {"case_id"})
    if shared:
        raise SchemaError(
            f"episodes: {_names(shared)} also in `cases`; the two tables may share "
            "only `case_id`. Hint: rename or drop the column in one of them."
        )
    for table, schema in (("cases", case_schema), ("episodes", episode_schema)):
        reserved = sorted(c for c in schema.names() if c in _RESERVED)
        if reserved:
            raise SchemaError(
                f"{table}: {_names(reserved)} reserved for the output of "
                "goal.score. Hint: rename or drop the extra column."
            )
    for name in JUDGED:
        if name in episode_schema and episode_schema[name] not in (pl.Boolean, pl.Null):
            raise SchemaError(
                f"episodes: judged column `{name}` has type {episode_schema[name]}; it must be "
                "Boolean (null = not judged)."
            )
    case_only = [c for c in case_schema.names() if c not in ("case_id", *_CASE_INTERNAL)]
    episode_only = [
        c for c in episode_schema.names() if c not in ("episode_id", "case_id", *_REPORT_COLUMNS)
    ]
    return case_only, episode_only


def _names(columns: Sequence[str]) -> str:
    """Return "column `a` is" or "columns `a`, `b` are"."""
    shown = ", ".join(f"`{c}`" for c in columns)
    return f"column {shown} is" if len(columns) == 1 else f"columns {shown} are"


def _violated(frame: pl.LazyFrame, table: str) -> pl.Expr:
    """Return ``_violated``: whether a row breaks any data check of ``table`` (null counts)."""
    checks = data_checks(spec(table), frame.collect_schema())
    return pl.any_horizontal(pl.lit(False), *checks.values()).fill_null(True).alias("_violated")
