"""Sums and distinct counts per group of integer codes, as dense numpy sums: no hash group-by.

The bootstrap of :func:`~recoverylab.takeover.summarize` resamples workflows, so it needs each
(workflow, cell) partial of the scored units: at 5M attempts, 1.7M units in 420k groups, where
a polars group-by spends ~0.4 s of CPU hashing and merging per-thread tables, and naming the
groups back (joins of their codes) ~0.2 s more. The units already carry small integer codes of
their group (the state's cell and the agent), so each group is one slot of a dense table: its
sums are ``np.bincount`` with weights (exact while every sum stays below 2**53, checked), its
distinct counts those of the distinct (slot, value) pairs. :func:`dense_group_sums` returns the
same rows as the group-by, or None where the table would not be small or the sums not exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

#: A dense table may have this many slots per row (plus :data:`_SLACK`): the sums cost about
#: the slots plus the rows, so it never costs much more than the rows alone.
_SLOTS_PER_ROW = 4
_SLACK = 1 << 16
#: float64 adds integers exactly while every partial sum stays below this.
_EXACT = 2.0**53


def dense_group_sums(
    frame: pl.DataFrame,
    keys: Sequence[str],
    *,
    sums: Sequence[str],
    distinct: Sequence[str] = (),
    carry: Sequence[str] = (),
) -> pl.DataFrame | None:
    """Return ``frame.group_by(keys)`` sums and distinct counts, or None where not dense/exact.

    Parameters
    ----------
    frame
        The rows: ``keys`` unsigned integer codes without nulls; ``sums`` integer-valued
        columns without nulls (Float64 ones are read without a copy);
        ``distinct`` integer codes (null: not counted); ``carry`` columns that are functions of
        the keys (a group's names), taken from any of its rows.
    keys
        The group's codes: groups are their distinct combinations.
    sums, distinct, carry
        Output columns: per group the Int64 sum of each ``sums`` column, the Int64 number of
        distinct non-null values of each ``distinct`` column, and the ``carry`` values.

    Returns
    -------
    polars.DataFrame or None
        One row per group present, in no particular order: ``carry``, ``sums``, ``distinct``.
        None when a code, the groups or the pairs of a distinct count would need a table of
        more than about four slots per row, or a sum could reach 2**53 (the caller's group-by
        then gives the answer).
    """
    n = frame.height
    if not n or any(frame.get_column(k).has_nulls() for k in keys):
        return None
    slots = _dense_slots(
        [frame.get_column(k).to_numpy() for k in keys], _SLOTS_PER_ROW * n + _SLACK
    )
    if slots is None:
        return None
    slot, n_slots = slots
    values = {c: frame.get_column(c).to_numpy() for c in sums}
    largest = {c: float(np.abs(v).max()) for c, v in values.items()}
    if any(m * n >= _EXACT for m in largest.values()):
        return None
    rows = np.bincount(slot, minlength=n_slots)
    present = np.flatnonzero(rows)
    # a row of each group (the last one written): any row names it
    example = np.empty(n_slots, dtype=np.int64)
    example[slot] = np.arange(n, dtype=np.int64)
    columns = [
        pl.Series(
            c, _sums(slot, v, n_slots)[present] if largest[c] else np.zeros(present.size)
        ).cast(pl.Int64)
        for c, v in values.items()
    ]
    for c in distinct:
        counts = _distinct_counts(slot, frame.get_column(c), n_slots)
        if counts is None:
            return None
        columns.append(pl.Series(c, counts[present]))
    if not carry:
        return pl.DataFrame(columns)
    names = frame.select(carry)[example[present]]
    return pl.concat([names, pl.DataFrame(columns)], how="horizontal")


def _sums(slot: np.ndarray, values: np.ndarray, n_slots: int) -> np.ndarray:
    """Return the float64 sums of ``values`` per slot (exact: the caller checked the bound)."""
    return np.bincount(slot, weights=values, minlength=n_slots)


def _dense_slots(codes: list[np.ndarray], limit: int) -> tuple[np.ndarray, int] | None:
    """Return each row's slot in the dense table of the codes' present values, and its size.

    Each key is first ranked among its present values (a mark and a cumulative sum: no sort),
    then the ranks are combined in mixed radix. None when a code or the table exceeds ``limit``.
    """
    slot = np.zeros(codes[0].size if codes else 0, dtype=np.int64)
    size = 1
    for code in codes:
        top = int(code.max(initial=0)) + 1
        if top > limit:
            return None
        seen = np.zeros(top, dtype=np.int64)
        seen[code] = 1
        rank = np.cumsum(seen) - 1
        width = int(rank[-1]) + 1 if top else 1
        size *= width
        if size > limit:
            return None
        slot = slot * width + rank[code]
    return slot, size


def _distinct_counts(slot: np.ndarray, values: pl.Series, n_slots: int) -> np.ndarray | None:
    """Return the number of distinct non-null ``values`` per slot (Int64), or None on overflow."""
    known = values.is_not_null().to_numpy()
    code = values.fill_null(0).to_numpy().astype(np.int64)
    width = int(code.max(initial=0)) + 1
    if code.size and (int(code.min()) < 0 or n_slots * width >= 2**62):
        return None
    pairs = pl.Series(slot[known] * width + code[known]).unique().to_numpy()
    return np.bincount(pairs // width, minlength=n_slots).astype(np.int64)
