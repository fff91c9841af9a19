"""Task identity across one import: ids qualified by the scope the harness gives them (§8).

A harness's task ids are unique only inside a *scope*: tau2-bench numbers its tasks per domain
(``0``, ``1``, ... in airline, retail and telecom alike), Harbor names tasks per dataset
(``TrialResult.source``), inspect numbers samples per dataset (``eval.dataset.name``). Our cluster
key ``task_id`` must name one task across everything an import reads, so every adapter hands its
rows here with the raw id in ``task_id`` and the scope in ``task_scope`` (null: the harness gives
none), and gets back:

* ``task_id`` = ``<scope>/<raw id>`` whenever the scope is known, the raw id alone otherwise;
* ``raw_task_id``: the id as the harness wrote it; ``task_scope``: the scope (or null).

**Always, not only on collision.** The id is qualified whenever its scope is known, even when the
import holds one scope. The qualified id is then a function of (scope, raw id) alone, whatever
else the import read: ``airline/0`` from an import of airline alone joins ``airline/0`` from an
import of all three domains, and ``retail/0`` from a second import never meets ``airline/0``. A
rule that qualified only on collision would name one task ``0`` in one import and ``airline/0``
in the next (a join that silently finds nothing), and would let two single-domain imports meet
on ``0`` (a join that silently merges two tasks).

**Raw ids on request.** :func:`keep_raw_ids` (``--raw-ids``) puts the harness's ids back in
``task_id`` when no raw id occurs under two scopes, and refuses in one line naming the id and
both scopes otherwise.

Two (scope, raw id) pairs that qualify to the same text (scope ``a`` with id ``b/c`` and scope
``a/b`` with id ``c``) are an error naming both: a qualified id must name one task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

import polars as pl

from recoverylab._errors import InputError
from recoverylab.adapters._report import Identity

if TYPE_CHECKING:
    from recoverylab.adapters._report import Imported

__all__ = [
    "RAW",
    "SCOPE",
    "SEPARATOR",
    "identity_of",
    "keep_raw_ids",
    "qualify",
    "shared_raw_id",
]

#: The column holding the id as the harness wrote it.
RAW = "raw_task_id"
#: The column holding the scope of that id (the domain, dataset, ...; null when none is known).
SCOPE = "task_scope"
#: Between the scope and the raw id in a qualified id.
SEPARATOR = "/"
_NONE = "(no scope)"  # a null scope, in messages


def qualify(frame: pl.DataFrame, scoped_by: str, what: str) -> tuple[pl.DataFrame, Identity]:
    """Qualify the raw ``task_id`` of ``frame`` by its ``task_scope`` (see the module docstring).

    Parameters
    ----------
    frame
        Rows with ``task_id`` (the raw id, text) and ``task_scope`` (text, null when unknown).
    scoped_by
        What the scope is called in this format (``domain``, ``dataset``), for messages.
    what
        The adapter (``tau2``, ``harbor``...), for messages.

    Returns
    -------
    tuple
        The frame with ``task_id`` qualified and ``raw_task_id`` added, and the :class:`Identity`.

    Raises
    ------
    InputError
        Two (scope, raw id) pairs that qualify to one text.
    """
    scope = pl.col(SCOPE)
    qualified = (
        pl.when(scope.is_null())
        .then(pl.col("task_id"))
        .otherwise(scope + SEPARATOR + pl.col("task_id"))
    )
    out = frame.with_columns(pl.col("task_id").alias(RAW), qualified.alias("task_id"))
    pairs = out.select("task_id", RAW, SCOPE).unique()
    named = pairs.filter(pl.col("task_id").is_not_null())  # a null id: the contract's error
    clash = named.filter(pl.len().over("task_id") > 1).sort("task_id", SCOPE, nulls_last=False)
    if clash.height:
        first = clash.filter(pl.col("task_id") == clash["task_id"][0]).head(2)
        (raw_a, raw_b), (scope_a, scope_b) = first[RAW], first[SCOPE]
        raise InputError(
            f"{what}: task id `{raw_a}` of {scoped_by} {scope_a or _NONE} and `{raw_b}` of "
            f"{scoped_by} {scope_b or _NONE} both qualify to `{clash['task_id'][0]}`; a task id "
            f"must name one task. Hint: rename one of them."
        )
    return out, _identity(pairs, scoped_by)


def _identity(pairs: pl.DataFrame, scoped_by: str) -> Identity:
    """Summarise the (task_id, raw id, scope) pairs of one import."""
    scopes = pairs[SCOPE].drop_nulls().unique().sort().to_list()
    per_raw = (
        pairs.group_by(RAW)
        .agg(pl.col(SCOPE).fill_null(_NONE).unique().sort().alias("scopes"))
        .filter(pl.col("scopes").list.len() > 1)
        .sort(RAW)
    )
    example = None
    if per_raw.height:
        example = (per_raw[RAW][0], tuple(per_raw["scopes"][0].to_list()))
    return Identity(scoped_by, tuple(scopes), per_raw.height, example)


def identity_of(frames: Iterable[pl.DataFrame], scoped_by: str) -> Identity | None:
    """Return the :class:`Identity` of tables already qualified (None: none has the columns)."""
    seen = [
        f.select(pl.col("task_id").cast(pl.String), RAW, pl.col(SCOPE).cast(pl.String))
        for f in frames
        if {"task_id", RAW, SCOPE} <= set(f.columns)
    ]
    if not seen:
        return None
    return _identity(pl.concat(seen, how="vertical_relaxed").unique(), scoped_by)


def shared_raw_id(frame: pl.DataFrame) -> tuple[str, str, str] | None:
    """Return the first raw id of ``frame`` seen under two scopes, and two of them (or None)."""
    if RAW not in frame.columns or SCOPE not in frame.columns:
        return None
    per_raw = (
        frame.select(RAW, pl.col(SCOPE).fill_null(_NONE))
        .unique()
        .group_by(RAW)
        .agg(pl.col(SCOPE).sort())
        .filter(pl.col(SCOPE).list.len() > 1)
        .sort(RAW)
    )
    if per_raw.height == 0:
        return None
    scopes = per_raw[SCOPE][0].to_list()
    return per_raw[RAW][0], scopes[0], scopes[1]


def keep_raw_ids(imported: Imported) -> Imported:
    """Return ``imported`` with the harness's raw ids back in ``task_id``, or refuse.

    Raw ids are kept only when no raw id occurs under two scopes in any table of the import
    (``excluded`` included); otherwise the same task id would name two tasks. A takeover
    import's ``state_id`` goes back to the id made from the raw one (``states`` carry it).

    Raises
    ------
    InputError
        One line naming the id and two of its scopes.
    """
    identity = imported.report.identity
    scoped_by = identity.scoped_by if identity is not None else "scope"
    frames = {**imported.tables, "excluded": imported.excluded}
    seen = [f.select(RAW, SCOPE) for f in frames.values() if {RAW, SCOPE} <= set(f.columns)]
    if seen:
        hit = shared_raw_id(pl.concat(seen, how="vertical_relaxed"))
        if hit is not None:
            raw, a, b = hit
            raise InputError(
                f"{imported.report.format}: task id `{raw}` occurs under {scoped_by} {a} and "
                f"{scoped_by} {b}; raw ids would merge two tasks into one. Hint: keep the "
                f"qualified ids (without --raw-ids, keep_raw_ids), e.g. `{a}{SEPARATOR}{raw}`."
            )

    # each id column's qualified -> raw pairs, from the tables that carry the raw id beside it
    # (takeover ``attempts`` name their state by ``state_id`` alone: mapped through ``states``)
    known = {
        column: dict(
            pl.concat([f.select(column, RAW) for f in with_raw], how="vertical_relaxed")
            .unique()
            .iter_rows()
        )
        for column in ("task_id", "state_id")
        if (with_raw := [f for f in frames.values() if {column, RAW} <= set(f.columns)])
    }

    def to_raw(frame: pl.DataFrame) -> pl.DataFrame:
        column = next((c for c in ("task_id", "state_id") if c in frame.columns), None)
        if column is None:
            return frame
        if RAW in frame.columns:
            return frame.with_columns(pl.col(RAW).alias(column))
        if column in known:
            return frame.with_columns(pl.col(column).replace(known[column]))
        return frame

    tables = {name: to_raw(frame) for name, frame in imported.tables.items()}
    report = imported.report.with_identity(
        dataclasses.replace(identity, raw=True) if identity is not None else None
    )
    return dataclasses.replace(
        imported, tables=tables, excluded=to_raw(imported.excluded), report=report
    )
