"""Per-task partials of a gate's claims, with each task's arrival position (ARCHITECTURE §9).

The gate and the monitor judge each claim on its cells from the same per-task numbers: for a
cell (condition, delay, method, *by*) and a task, ``x`` = summed y1 - y0 over the task's pairs
in the cell (``rescue`` - ``harm``), ``m`` = its pairs, and ``harm`` -- or, for a clean-touch
claim, ``x`` = the task's clean episodes the policy intervened on, ``m`` = its clean episodes.
Counting is polars; only these per-task rows are collected.

Arrival order: a task arrives when its last row has arrived -- the largest value of the
``order`` column over the task's rows in ``forks`` -- or, without an ``order`` column, at the
position of its last row in file-then-row order (the order :func:`recoverylab.io.scan` reads
files in: as given, a directory's files sorted by path). Ties go by task_id. With an ``order``
column, the result does not depend on how the rows are split over files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from recoverylab import io
from recoverylab._errors import ParameterError
from recoverylab.paired._gate_policy import Claim, Policy
from recoverylab.paired._pairs import pairs, prepare

__all__ = ["ClaimCells", "claim_cells", "task_arrivals"]

_ROW = "__recoverylab_row"
#: Cell keys of a paired claim, before its ``by`` keys.
CELL_KEYS = ("condition", "delay", "method")


@dataclass(frozen=True)
class ClaimCells:
    """The per-task partials of one claim, one group per cell.

    Attributes
    ----------
    claim
        The claim.
    keys
        The cell key columns (condition, delay, method, *by*; for clean touch: condition,
        *by*).
    tasks
        One row per (cell, task): the keys, ``task_id``, ``x``, ``m``, ``rescue``, ``harm``,
        ``arrival`` (the task's rank in arrival order, 1-based over all tasks).
    """

    claim: Claim
    keys: tuple[str, ...]
    tasks: pl.DataFrame


def task_arrivals(forks: pl.LazyFrame, order: str | None) -> pl.DataFrame:
    """Return each task's arrival rank (``task_id``, ``arrival``: 1, 2, ... in arrival order)."""
    names = forks.collect_schema().names()
    if order is not None and order not in names:
        raise ParameterError(
            f"parameter `order` is {order!r}; forks has no such column (columns: "
            f"{', '.join(names)})."
        )
    key = order if order is not None else _ROW
    frame = forks if order is not None else forks.with_row_index(_ROW)
    last = frame.group_by("task_id").agg(pl.col(key).max().alias("__last"))
    nulls = last.filter(pl.col("__last").is_null()).select("task_id").head(5).collect()
    if nulls.height:
        raise ParameterError(
            f"forks: column `{order}` is null on every row of task "
            f"{', '.join(nulls['task_id'].cast(pl.String))}; it orders tasks by arrival."
        )
    return (
        last.sort(["__last", "task_id"], nulls_last=True)
        .with_row_index("arrival", offset=1)
        .select(pl.col("task_id").cast(pl.String), pl.col("arrival").cast(pl.Int64))
        .collect()
    )


def _match(claim: Claim, present: Sequence[str]) -> pl.Expr:
    """Return the claim's filters as one polars predicate."""
    expr = pl.lit(True)
    for column in ("condition", "method", "delay"):
        values = getattr(claim, column)
        if values is not None and column in present:
            expr = expr & pl.col(column).is_in(list(values))
    return expr


def _paired_tasks(rows: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    y0, y1 = pl.col("y0"), pl.col("y1")
    return rows.group_by([*CELL_KEYS, *by, "task_id"]).agg(
        (y1.cast(pl.Int64) - y0.cast(pl.Int64)).sum().alias("x"),
        pl.len().cast(pl.Int64).alias("m"),
        (~y0 & y1).sum().cast(pl.Int64).alias("rescue"),
        (y0 & ~y1).sum().cast(pl.Int64).alias("harm"),
    )


def _touch_tasks(decisions: pl.LazyFrame, claim: Claim, clean: str) -> pl.LazyFrame:
    """Per (condition, *by*, task): clean episodes the policy touched (x) of its clean ones."""
    return (
        decisions.filter(pl.col("condition") == clean)
        .group_by(["condition", *claim.by, "task_id"])
        .agg(
            pl.col("delay").is_not_null().sum().cast(pl.Int64).alias("x"),
            pl.len().cast(pl.Int64).alias("m"),
        )
        .with_columns(pl.lit(0, pl.Int64).alias("rescue"), pl.col("x").alias("harm"))
    )


def _describe(claim: Claim) -> str:
    parts = [
        f"{c} in {list(getattr(claim, c))}"
        for c in ("condition", "method", "delay")
        if getattr(claim, c) is not None
    ]
    return ", ".join(parts) or "every cell"


def _check_columns(claim: Claim, names: Sequence[str], table: str) -> None:
    missing = [k for k in claim.by if k not in names]
    if missing:
        raise ParameterError(
            f"claim {claim.name!r}: `by` names `{missing[0]}`, which {table} does not have "
            f"(columns: {', '.join(names)})."
        )


def claim_cells(
    forks: object, policy: Policy, *, order: str | None = None, decisions: object = None
) -> list[ClaimCells]:
    """Return the per-task partials of every claim of ``policy`` (see the module docstring).

    Raises
    ------
    ParameterError
        A claim whose filters match no cell, a cell of a claim with no pairs (all excluded), a
        ``by`` or ``order`` column that is not in the table, or a clean-touch claim without a
        decision table.
    SchemaError, InputError
        As :func:`recoverylab.paired.pairs`.
    """
    lf = io.scan(forks)
    names = lf.collect_schema().names()
    for claim in policy.claims:
        if claim.kind != "max_clean_touch":
            _check_columns(claim, names, "forks")
    by_all = sorted({k for c in policy.claims if c.kind != "max_clean_touch" for k in c.by})
    table, _ = prepare(lf, pair_by=policy.pair_by, by=by_all, cohort=policy.cohort)
    arrivals = task_arrivals(table.lf, order).lazy()  # after the contract checks
    per_task: pl.LazyFrame | None = None
    out = []
    for claim in policy.claims:
        if claim.kind == "max_clean_touch":
            frame = _decision_frame(decisions if decisions is not None else policy.decisions, claim)
            _check_columns(claim, frame.collect_schema().names(), "the decision table")
            tasks = _touch_tasks(frame, claim, policy.clean_label)
            keys: tuple[str, ...] = ("condition", *claim.by)
        else:
            if per_task is None:  # paired and counted once, for every claim
                rows = pairs(
                    table.lf,
                    pair_by=policy.pair_by,
                    cohort="full" if policy.cohort == "full" else "factual_success",
                )
                per_task = _paired_tasks(rows, by_all).collect(engine="streaming").lazy()
            keys = (*CELL_KEYS, *claim.by)
            tasks = (
                per_task.filter(_match(claim, CELL_KEYS))
                .group_by([*keys, "task_id"])
                .agg(pl.col(c).sum() for c in ("x", "m", "rescue", "harm"))
            )
        collected = (
            tasks.with_columns(pl.col("task_id").cast(pl.String))
            .join(arrivals, on="task_id", how="left")
            .sort([*keys, "arrival"], nulls_last=True)
            .collect()
        )
        if collected.height == 0:
            raise ParameterError(
                f"claim {claim.name!r}: no cell with data matches its filters ({_describe(claim)})."
            )
        if collected["arrival"].null_count():
            missing = collected.filter(pl.col("arrival").is_null())["task_id"].unique().sort()
            raise ParameterError(
                f"claim {claim.name!r}: the decision table has tasks that forks does not "
                f"(task_id {', '.join(missing.head(5).to_list())})."
            )
        out.append(ClaimCells(claim=claim, keys=keys, tasks=collected))
    return out


def _decision_frame(decisions: object, claim: Claim) -> pl.LazyFrame:
    if decisions is None:
        raise ParameterError(
            f"claim {claim.name!r} is a max_clean_touch claim: it needs the policy's decision "
            "table. Hint: set `decisions` in the policy file, or pass `decisions=` "
            "(`--decisions` on the command line)."
        )
    frame = io.scan(decisions)
    names = frame.collect_schema().names()
    missing = [c for c in ("task_id", "condition", "delay") if c not in names]
    if missing:
        raise ParameterError(f"decisions: column `{missing[0]}` is missing.")
    return frame
