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

from collections.abc import Callable, Sequence

import numpy as np
import polars as pl

from recoverylab._lanes import LANE_BITS, plan_lanes

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
    derived: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    derived_from: Sequence[str] = (),
) -> pl.DataFrame | None:
    """Return ``frame.group_by(keys)`` sums and distinct counts, or None where not dense/exact.

    Parameters
    ----------
    frame
        The rows: ``keys`` unsigned integer codes without nulls; ``sums`` integer-valued
        columns without nulls (read without a copy from one chunk);
        ``distinct`` integer codes (null: not counted); ``carry`` columns that are functions of
        the keys (a group's names), taken from any of its rows.
    keys
        The group's codes: groups are their distinct combinations.
    sums, distinct, carry
        Output columns: per group the Int64 sum of each ``sums`` column, the Int64 number of
        distinct non-null values of each ``distinct`` column, and the ``carry`` values.
    derived, derived_from
        More sums, of columns that are functions of a few columns with few distinct values
        (non-negative integers): ``derived`` maps the distinct rows of the ``derived_from``
        columns to integer columns (a row each, nulls for 0), computed once per distinct row;
        each group's sums are its counts of each distinct row times those values (exact).

    Returns
    -------
    polars.DataFrame or None
        One row per group present, in no particular order: ``carry``, ``sums``, ``distinct``
        and the columns of ``derived``.
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
    rows = np.bincount(slot, minlength=n_slots)
    present = np.flatnonzero(rows)
    summed = _packed_sums(
        slot, n_slots, [frame.get_column(c).to_numpy() for c in sums], int(rows.max())
    )
    if summed is None:
        return None
    # a row of each group (the last one written): any row names it
    example = np.empty(n_slots, dtype=np.int64)
    example[slot] = np.arange(n, dtype=np.int64)
    columns = [pl.Series(c, v[present]) for c, v in zip(sums, summed, strict=True)]
    for c in distinct:
        counts = _distinct_counts(slot, frame.get_column(c), n_slots)
        if counts is None:
            return None
        columns.append(pl.Series(c, counts[present]))
    if derived is not None:
        more = _derived_sums(slot, n_slots, frame.select(derived_from), derived)
        if more is None:
            return None
        columns += [pl.Series(c, v[present]) for c, v in more.items()]
    if not carry:
        return pl.DataFrame(columns)
    names = frame.select(carry)[example[present]]
    return pl.concat([names, pl.DataFrame(columns)], how="horizontal")


def _packed_sums(
    slot: np.ndarray, n_slots: int, values: list[np.ndarray], most: int
) -> list[np.ndarray] | None:
    """Return the Int64 sums of each column per slot, or None when they could reach 2**53.

    A slot holds at most ``most`` rows, so a column of non-negative integers up to m sums to
    less than 2**b with b the bits of ``most`` x m: columns side by side in fields of b bits,
    as one float64 column below 2**53, sum to the fields of their sums exactly (every partial
    sum is an integer float64 holds), several columns to one ``bincount``. A column with
    negative values takes a float64 column of its own (exact while n x its largest
    magnitude stays below 2**53).
    """
    zero = np.zeros(n_slots, dtype=np.int64)
    out: list[np.ndarray] = [zero] * len(values)
    packable: list[int] = []  # the columns with a non-zero value
    widths: list[int] = []  # their fields' bits; 0: a lane of its own (negative values)
    for j, v in enumerate(values):
        low, high = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
        if low < 0:
            if max(-low, high) * v.size >= _EXACT:
                return None
            packable.append(j)
            widths.append(0)
        elif high > 0:
            bits = (most * int(high)).bit_length()
            if bits > LANE_BITS:
                return None
            packable.append(j)
            widths.append(bits)
    lane_of, shift_of, n_lanes = plan_lanes(widths)
    lanes: list[list[tuple[int, int, int]]] = [[] for _ in range(n_lanes)]
    for at, j in enumerate(packable):  # per lane: (column, shift, bits)
        lanes[lane_of[at]].append((j, int(shift_of[at]), widths[at]))
    packed = np.empty(slot.size, dtype=np.float64)
    term = np.empty(slot.size, dtype=np.float64) if any(len(f) > 1 for f in lanes) else packed
    for fields in lanes:
        for at, (j, shift, _) in enumerate(fields):
            # disjoint bits: the sum is exact
            np.multiply(values[j], 2.0**shift, out=term if at else packed)
            if at:
                packed += term
        whole = np.bincount(slot, weights=packed, minlength=n_slots).astype(np.int64)
        if len(fields) == 1 and not fields[0][2]:  # a column with negative values
            out[fields[0][0]] = whole
            continue
        for j, shift, bits in fields:
            out[j] = (whole >> shift) & ((1 << bits) - 1)
    return out


def _derived_sums(
    slot: np.ndarray,
    n_slots: int,
    inputs: pl.DataFrame,
    derived: Callable[[pl.DataFrame], pl.DataFrame],
) -> dict[str, np.ndarray] | None:
    """Return the per-slot sums of ``derived`` of each row's ``inputs`` (Int64), or None.

    Rows are counted per (slot, distinct input row) in a dense table; ``derived`` is computed
    once per distinct input row; the sums are the counts times those values, in integers.
    None when the inputs or the table would not be small (:func:`_dense_slots`).
    """
    limit = _SLOTS_PER_ROW * slot.size + _SLACK
    found = _dense_slots([inputs.get_column(c).to_numpy() for c in inputs.columns], limit)
    if found is None or n_slots * found[1] > limit:
        return None
    code, n_codes = found
    example = np.full(n_codes, -1, dtype=np.int64)
    example[code] = np.arange(code.size, dtype=np.int64)
    seen = np.flatnonzero(example >= 0)
    values = derived(inputs[example[seen]])
    pairs = slot * n_codes
    pairs += code
    counts = np.bincount(pairs, minlength=n_slots * n_codes)
    table = counts.reshape(n_slots, n_codes)[:, seen]
    return {c: table @ values.get_column(c).fill_null(0).to_numpy() for c in values.columns}


def _dense_slots(codes: list[np.ndarray], limit: int) -> tuple[np.ndarray, int] | None:
    """Return each row's slot in the dense table of the codes' present values, and its size.

    Each key is first ranked among its present values (a mark and a cumulative sum: no sort),
    then the ranks are combined in mixed radix. None when a code or the table exceeds ``limit``.
    The slots are intp, which ``bincount`` reads without a copy.
    """
    n = codes[0].size if codes else 0
    dtype = np.intp
    slot = np.zeros(n, dtype=dtype)
    size = 1
    for code in codes:
        top = int(code.max(initial=0)) + 1
        if top > limit or (code.size and int(code.min()) < 0):
            return None
        rank = np.zeros(top, dtype=dtype)
        rank[code] = 1
        np.cumsum(rank, out=rank)
        rank -= 1
        width = int(rank[-1]) + 1 if top else 1
        size *= width
        if size > limit:
            return None
        slot *= width
        slot += rank[code]
    return slot, size


def _distinct_counts(slot: np.ndarray, values: pl.Series, n_slots: int) -> np.ndarray | None:
    """Return the number of distinct non-null ``values`` per slot (Int64), or None on overflow."""
    code = values.drop_nulls().to_numpy()
    width = int(code.max(initial=0)) + 1
    if code.size and (int(code.min()) < 0 or n_slots * width >= 2**62):
        return None
    pairs = slot[values.is_not_null().to_numpy()]
    pairs *= width
    pairs += code
    distinct = pl.Series(pairs).unique().to_numpy()
    return np.bincount(distinct // width, minlength=n_slots).astype(np.int64)
