"""Pairs within one shard of a plan: the design grid stage, then the pairing query (§7).

A shard holds whole tasks, but its carried-forward pairs need the candidate recovery points of
the whole table: :func:`design_stage` reads them over every shard first (no shuffle needed), and
:func:`shard_pairs` pairs a shard's branches against that grid (the plans of ``break_even`` and
``pilot_rates``). :func:`pairs_plan` is the public plan of :func:`~recoverylab.paired.pairs`,
whose two stages other protocols reuse (:func:`recoverylab.router.uplift`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import plan
from recoverylab._errors import require_one_of
from recoverylab.paired._pairs import (
    COHORTS,
    Cohort,
    Design,
    check_by_columns,
    design_of,
    design_points,
    pair_rows,
    prepare,
)

__all__ = ["design_stage", "forks_input", "pairs_plan", "shard_pairs"]


def forks_input(forks: object) -> plan.Input:
    """Return the forks as a plan input, clustered by task (every pairing join is within a task)."""
    return plan.Input("forks", forks, key="task_id", contract="forks")


def _design_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    cohort: str,
    check_keys: Callable[[tuple[str, ...]], None] | None,
) -> dict[str, pl.LazyFrame]:
    table, by_keys = prepare(
        frames["forks"], pair_by=pair_by, by=by, cohort=cohort, checks="schema"
    )
    if check_keys is not None:
        check_keys(by_keys)
    return {"points": design_points(table)}


def _design_combine(parts: dict[str, pl.DataFrame], state: Any) -> Design:
    return design_of(parts["points"])


def design_stage(
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None = (),
    cohort: str = "full",
    check_keys: Callable[[tuple[str, ...]], None] | None = None,
) -> plan.Stage:
    """Return the stage that reads the design grid of the whole table (its state: a Design).

    It reads only ``forks`` (a plan may have other inputs). ``check_keys`` (module-level, so
    that it pickles to Spark) checks the resolved ``by`` keys against the verb's own rules.
    """
    partial = functools.partial(
        _design_partial, pair_by=pair_by, by=by, cohort=cohort, check_keys=check_keys
    )
    return plan.Stage(
        "reading the design grid", partial, _design_combine, clustered=False, reads=("forks",)
    )


def shard_pairs(
    forks: pl.LazyFrame,
    design: Design,
    *,
    pair_by: str | Sequence[str],
    cohort: str = "full",
    carry: Sequence[str] = (),
) -> pl.LazyFrame:
    """Return the pairs of one shard, paired against the whole table's ``design``.

    Columns: task_id, condition, *pair_by*, method, delay, ``y0``, ``y1``, ``outcome``, and
    the ``carry`` columns. Validates the shard (the contract's per-task rules) first.

    Raises
    ------
    ParameterError
        For a ``carry`` column that is not in the table.
    SchemaError, InputError
        As :func:`~recoverylab.paired.pairs`.
    """
    table, _ = prepare(forks, pair_by=pair_by, cohort=cohort)
    check_by_columns(carry, sorted(table.columns))
    return pair_rows(table, design, cohort, carry=carry)


def _pairs_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    pair_by: str | Sequence[str] | None,
    cohort: str,
) -> dict[str, pl.LazyFrame]:
    table, _ = prepare(frames["forks"], pair_by=pair_by, cohort=cohort)
    return {"pairs": pair_rows(table, design, cohort)}


def pairs_plan(
    forks: object, *, pair_by: str | Sequence[str] | None = (), cohort: Cohort = "full"
) -> plan.Plan:
    """Return the plan of :func:`~recoverylab.paired.pairs` (ARCHITECTURE §7).

    Forks are clustered by task (input ``"forks"``). Two stages: the design grid of the whole
    table (reading only ``forks``, with no shuffle; its state is the grid), then each shard's
    pairs against that grid (one part, ``"pairs"``), so a shard's carried-forward pairs are
    those of the whole table. ``engines.rows(engine, pairs_plan(forks))`` gives the rows of
    ``pairs(forks)`` on any engine (in another order); ``engines.run`` collects them. A verb that
    needs the pairs inside its own plan reuses the first stage as it is, and calls the second
    stage's ``partial`` on its shard in its own per-task stage (state: the grid), as
    :func:`recoverylab.router.uplift` does.

    Parameters
    ----------
    forks
        The ``forks`` table (any source :func:`recoverylab.io.scan` reads).
    pair_by, cohort
        As in :func:`~recoverylab.paired.pairs`.

    Returns
    -------
    recoverylab.plan.Plan
        Its finish returns the pairs as a DataFrame.

    Examples
    --------
    >>> import polars as pl
    >>> from recoverylab import engines, paired, plan
    >>> forks = pl.DataFrame({"task_id": ["t1", "t1"], "condition": ["stale2"] * 2,
    ...                       "method": ["none", "refresh"], "delay": [None, 0],
    ...                       "success": [False, True]})
    >>> plan.run(engines.ShardedEngine(k=2), paired.pairs_plan(forks))["outcome"].to_list()
    ['rescue']
    """
    return plan.Plan(
        inputs=(forks_input(forks),),
        check=functools.partial(require_one_of, "cohort", cohort, COHORTS),
        stages=(
            design_stage(pair_by=pair_by, cohort=cohort),
            plan.Stage(
                "pairing per task",
                functools.partial(_pairs_partial, pair_by=pair_by, cohort=cohort),
            ),
        ),
        finish=operator.itemgetter("pairs"),
    )
