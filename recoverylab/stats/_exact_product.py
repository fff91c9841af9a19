"""Resampled column sums as one product of draw counts, exact wherever the columns allow it.

The product of :func:`~recoverylab.stats._shared_draws._coupled_resample_sums`: per resample,
the counts of each cluster times every set's values. Separate from the drawing because it is
about arithmetic only: which columns sum exactly in float32 (integers and multiples of 1/L),
which are one product column scaled (proportional columns), which share the bits of one float64
column (:class:`_Lanes`), and how a set's *raw* sums (before scaling) are corrected exactly
(:meth:`_ExactProduct.correctable`).
"""

from __future__ import annotations

import functools

import numpy as np

from recoverylab._lanes import plan_lanes

#: A set's values: one (K, C) array, or several side by side (the cells of a set, uncopied).
Block = np.ndarray | list[np.ndarray]
#: Kinds of a design column: all zero, an exact (scaled) raw column, a float64 raw column.
_ZERO, _EXACT, _INEXACT = 0, 1, 2
#: Largest scale tried to make a fractional column integral (pass@1 over 3 repeats: 3).
_MAX_SCALE = 64
#: A value is a multiple of 1/L when value * L is within this relative distance of an integer:
#: the rounding of a float sum of a few such multiples, far below any interval's precision.
_SCALE_TOLERANCE = 2.0**-44
#: Rows of a column tried against every scale before the whole column is checked.
_SCALE_SAMPLE = 64


class _ExactProduct:
    """``counts @ design`` computed exactly and once per distinct column, mostly in float32.

    The design holds each set's block in its rows (the set's clusters) and columns, then one
    column per set that counts the draws landing in it. A column of integers, or of multiples
    of 1/L (L <= 64, within rounding: pass@1 over three repeats), whose resampled sums stay
    below 2**24 sums exactly in float32 as integers, at half the cost of float64. Such columns
    of a set that are rational multiples of another (attempts = 3 x states with three repeats
    per state; a pass@1 sum = passes / 3) are one product column, scaled after. Integer sums
    are bit for bit those of a float64 product; a multiple of 1/L is the exact integer sum
    divided by L once (a float64 product rounds each term: they differ in the last bits only).
    Other columns go through a float64 product. Built from the blocks, never the dense design.
    Where it pays, the float32 columns are packed two or three to a float64 column
    (:class:`_Lanes`): the same integers at about three quarters of the cost.

    Two steps: :meth:`raw` gives the *raw* sums (one per float32 product column: integers, and
    one per float64 column), :meth:`finish` (or :meth:`rows`, for some columns) scales them to
    the design's columns. Between the
    two, a set's raw sums can be corrected (:meth:`correctable`): the correction of an integer
    column is an integer, so the corrected sums stay exact whatever the order of the terms.
    """

    def __init__(self, sets: list[tuple[np.ndarray, Block]], n_draws: int) -> None:
        widths = [_width(block) for _, block in sets]
        self.width = sum(widths) + len(sets)
        single: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, values) per float32 column
        double: list[tuple[np.ndarray, np.ndarray]] = []
        exact: list[tuple[int, int, float, float]] = []  # (column, single column, p, q)
        inexact: list[int] = []
        #: per set: its raw columns (landed draws left out) and their values
        self._own: list[tuple[tuple[np.ndarray, np.ndarray], list[np.ndarray]]] = []
        edge = 0
        for (where, block), width in zip(sets, widths, strict=True):
            bases, scaled, floats = _split_parts(block, n_draws)
            first = len(single)
            single += [(where, values) for values in bases]
            exact += [(edge + c, first + b, p, q) for c, b, p, q in scaled]
            raw_double = len(double) + np.arange(len(floats))
            double += [(where, values) for _, values in floats]
            inexact += [edge + c for c, _ in floats]
            columns = (np.arange(first, len(single)), raw_double)
            self._own.append((columns, [*bases, *(values for _, values in floats)]))
            edge += width
        for i, (where, _) in enumerate(sets):  # the draws that land in each set
            exact.append((sum(widths) + i, len(single), 1.0, 1.0))
            single.append((where, np.ones(where.size)))
        self.n_single = len(single)
        self._single, self._n_draws = single, n_draws
        self.double = _columns(double, n_draws, np.float64)
        self._lanes = _Lanes.plan(single, n_draws)
        #: the draw counts :meth:`raw` wants (float64 when the lanes are packed)
        self.counts_dtype = np.float32 if self._lanes is None else np.float64
        self.exact, self.base, self.numerator, self.denominator = (
            np.array([e[c] for e in exact], dtype=t)
            for c, t in ((0, np.int64), (1, np.int64), (2, np.float64), (3, np.float64))
        )
        self.inexact = np.array(inexact, dtype=np.int64)
        #: raw column of the draws landing in each set
        self.landed = self.base[self.base.size - len(sets) :]
        self._index_columns()

    def _index_columns(self) -> None:
        """Per design column: its kind, its raw column and its scale (for :meth:`rows`)."""
        self._kind = np.full(self.width, _ZERO, dtype=np.int8)
        self._source = np.zeros(self.width, dtype=np.int64)
        self._numerator, self._denominator = np.ones(self.width), np.ones(self.width)
        self._kind[self.exact], self._source[self.exact] = _EXACT, self.base
        self._numerator[self.exact], self._denominator[self.exact] = (
            self.numerator,
            self.denominator,
        )
        self._kind[self.inexact] = _INEXACT
        self._source[self.inexact] = self.n_single + np.arange(self.inexact.size)

    @functools.cached_property
    def single(self) -> np.ndarray:
        """The float32 product columns as one dense (N, columns) array (built when used)."""
        return _columns(self._single, self._n_draws, np.float32)

    def correctable(self, i: int) -> tuple[list[tuple[slice, slice]], np.ndarray]:
        """Set ``i``'s raw columns (landed draws left out) and its values in them, per row.

        A correction of the set's sums adds or removes whole draws: the values of those rows,
        summed, are added to these raw columns before :meth:`finish` (integers for the float32
        columns: exact in any order; the values are float32 when the set has no float64
        column). The columns are two runs, given as (raw columns, columns of the values)
        slices: the set's float32 product columns, then its float64 ones.
        """
        (single, double), values = self._own[i]
        runs = []
        for at, (run, offset) in enumerate(((single, 0), (double, self.n_single))):
            if run.size:
                first = int(run[0]) + offset
                into = slice(at * single.size, at * single.size + run.size)
                runs.append((slice(first, first + run.size), into))
        size = self._single[self.landed[i]][0].size
        # integers alone: float32 sums any N of them exactly (half the bytes gathered)
        dtype = np.float64 if double.size else np.float32
        block = np.array(values, dtype=dtype).T if values else np.zeros((size, 0), dtype=dtype)
        return runs, np.ascontiguousarray(block)

    def raw(self, counts: np.ndarray) -> np.ndarray:
        """Return the raw sums, one row per raw column (float32 product ones, then float64).

        Computed as design.T @ counts.T: one row per column, each row's resamples contiguous
        for the corrections and :meth:`finish` (and BLAS runs it faster than counts @ design).
        """
        n_single = self.n_single
        out = np.empty((n_single + self.double.shape[1], counts.shape[0]), dtype=np.float64)
        if self._lanes is not None:
            out[:n_single] = self._lanes.sums(counts.astype(np.float64, copy=False))
        elif n_single:
            out[:n_single] = self.single.T @ counts.astype(np.float32, copy=False).T
        if self.double.shape[1]:
            out[n_single:] = self.double.T @ counts.astype(np.float64).T
        return out

    def finish(self, raw: np.ndarray) -> np.ndarray:
        """Return the design's column sums (one row per column) from (corrected) raw sums."""
        return self.rows(raw, np.arange(self.width))

    def rows(self, raw: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """Return the sums of the design's ``columns`` (one row each) from the raw sums."""
        source, kind = self._source[columns], self._kind[columns]
        out = np.zeros((columns.size, raw.shape[1]), dtype=np.float64)  # all-zero columns
        exact = np.flatnonzero(kind == _EXACT)
        if exact.size:
            # integers below 2**53 times a small integer, then one correctly rounded division;
            # + 0.0 turns the -0.0 of a negative multiple of 0 into the product's +0.0
            scaled = raw[source[exact]] * self._numerator[columns[exact], np.newaxis]
            scaled /= self._denominator[columns[exact], np.newaxis]
            scaled += 0.0
            out[exact] = scaled
        inexact = np.flatnonzero(kind == _INEXACT)
        if inexact.size:
            out[inexact] = raw[source[inexact]]
        return out

    def __call__(self, counts: np.ndarray) -> np.ndarray:
        """Return ``counts @ design``, one row per row of ``counts``."""
        return self.finish(self.raw(counts)).T


#: CPU of a float64 product column against a float32 one (measured 2.3 with OpenBLAS on
#: AVX-512), counted high so that packed lanes are used only where they clearly pay.
_DOUBLE_COST = 2.5


class _Lanes:
    """Several integer product columns side by side in the bits of one float64 column.

    Column j holds integers 0..m_j, so any resample (``n_draws`` draws) sums it to at most
    n_draws x m_j < 2**b_j. Fields of b_j bits laid side by side (the value times 2**shift)
    stay below 2**53 in one float64 column, where every partial sum is an integer that float64
    holds exactly, in any order: one float64 product column gives two or three float32 ones
    (17-19 bits each at 12,500 clusters), their sums read back with shifts and masks. A column
    with negative values takes a lane of its own. Used only when the lanes cost less than the
    float32 columns (:data:`_DOUBLE_COST`); both give the same integers.
    """

    def __init__(
        self,
        columns: list[tuple[np.ndarray, np.ndarray]],
        n_rows: int,
        lane: np.ndarray,
        shift: np.ndarray,
        bits: np.ndarray,
    ) -> None:
        self.lane, self.shift = lane, shift
        self.mask = np.where(bits > 0, (np.int64(1) << bits) - 1, np.int64(-1))
        packed = np.zeros((int(lane.max()) + 1, n_rows), dtype=np.float64)
        for j, (rows, values) in enumerate(columns):
            packed[lane[j], rows] += values * 2.0 ** int(shift[j])  # disjoint fields: exact
        self.packed = packed.T

    @classmethod
    def plan(cls, columns: list[tuple[np.ndarray, np.ndarray]], n_draws: int) -> _Lanes | None:
        """Fill lanes (:func:`~recoverylab._lanes.plan_lanes`); None when float32 columns cost less.

        ``columns``: per column, its rows among the ``n_draws`` and its values there.
        """
        if not columns:
            return None
        largest = [int(values.max(initial=0)) for _, values in columns]
        alone = [bool(values.min(initial=0) < 0) for _, values in columns]
        # a field must hold n_draws x largest: bit_length bits (0 marks a lane of its own)
        bits = [0 if a else (n_draws * m).bit_length() for m, a in zip(largest, alone, strict=True)]
        lane, shift, n_lanes = plan_lanes(bits)
        if n_lanes * _DOUBLE_COST >= len(columns):
            return None
        return cls(columns, n_draws, lane, shift, np.array(bits, dtype=np.int64))

    def sums(self, counts: np.ndarray) -> np.ndarray:
        """Return each column's sums over the rows of ``counts``, one row per column, exactly."""
        packed = (self.packed.T @ counts.T).astype(np.int64)
        fields = packed[self.lane]
        fields >>= self.shift[:, np.newaxis]
        fields &= self.mask[:, np.newaxis]
        return fields.astype(np.float64)


def _width(block: Block) -> int:
    """Return the number of columns of a block."""
    return sum(b.shape[1] for b in block) if isinstance(block, list) else block.shape[1]


def _split_parts(
    block: Block, n_draws: int
) -> tuple[list[np.ndarray], list[tuple[int, int, float, float]], list[tuple[int, np.ndarray]]]:
    """:func:`_split` of a block given in parts side by side; the floats with their values."""
    bases: list[np.ndarray] = []
    exact: list[tuple[int, int, float, float]] = []
    floats: list[tuple[int, np.ndarray]] = []
    offset = 0
    for part in block if isinstance(block, list) else [block]:
        part_bases, part_exact, part_floats = _split(part, n_draws)
        exact += [(offset + c, len(bases) + b, p, q) for c, b, p, q in part_exact]
        bases += part_bases
        floats += [(offset + c, part[:, c]) for c in part_floats.tolist()]
        offset += part.shape[1]
    return bases, exact, floats


def _split(
    block: np.ndarray, n_draws: int
) -> tuple[list[np.ndarray], list[tuple[int, int, float, float]], np.ndarray]:
    """Split one set's block into float32 product columns, their scaled copies and floats.

    Returns the distinct integer columns (each one product column), per exact column of the
    block ``(column, its product column among them, p, q)`` with column = p / q x product
    column (all-zero columns left out: they sum to 0), and the columns left to float64.
    """
    rows = np.ascontiguousarray(block.T)  # one row per column: no copy of a column-major block
    scale = _integer_scales(rows, n_draws)
    local = np.flatnonzero(scale > 0)
    ints = np.rint(rows[local] * scale[local, np.newaxis])
    base, numerator, denominator = _proportional(ints)
    bases: list[np.ndarray] = []
    at: dict[int, int] = {}
    exact = []
    for j, column in enumerate(local.tolist()):
        if numerator[j] == 0:
            continue  # an all-zero column sums to 0: no product
        if base[j] == j:
            at[j] = len(bases)
            bases.append(ints[j])
        q = float(denominator[j] * scale[column])
        exact.append((column, at[int(base[j])], float(numerator[j]), q))
    return bases, exact, np.flatnonzero(scale == 0)


def _columns(columns: list[tuple[np.ndarray, np.ndarray]], n_rows: int, dtype: type) -> np.ndarray:
    """Stack sparse-by-rows columns into a dense (n_rows, len(columns)) array (column-major)."""
    dense: np.ndarray = np.zeros((len(columns), n_rows), dtype=dtype)
    for j, (rows, values) in enumerate(columns):
        dense[j, rows] = values  # one contiguous row of the transpose: no strided writes
    return dense.T


def _integer_scales(rows: np.ndarray, n_draws: int) -> np.ndarray:
    """Per column (a row of ``rows``), the least L <= 64 making it integral, or 0 for none.

    Integral within rounding; a scaled column must also keep its resampled sums (at most
    ``n_draws`` times its largest magnitude) below 2**24, where float32 counts integers exactly.
    """
    scale = np.zeros(rows.shape[0], dtype=np.float64)
    largest = np.abs(rows).max(axis=1, initial=0.0)  # nan for a column holding one
    finite = np.isfinite(largest)
    scale[finite & (rows == np.rint(rows)).all(axis=1)] = 1.0
    todo = np.flatnonzero(finite & (scale == 0))
    sample = rows[todo, :_SCALE_SAMPLE]
    for j, column in enumerate(todo):
        for factor in range(2, _MAX_SCALE + 1):
            if _multiples(sample[j], factor) and _multiples(rows[column], factor):
                scale[column] = factor
                break
    scale[~finite | (largest * scale * n_draws >= 2.0**24)] = 0.0
    return scale


def _multiples(values: np.ndarray, factor: int) -> bool:
    scaled = values * factor
    whole = np.rint(scaled)
    return bool((np.abs(scaled - whole) <= _SCALE_TOLERANCE * np.maximum(np.abs(whole), 1.0)).all())


def _proportional(ints: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group integer columns (the rows of ``ints``) that are rational multiples of one another.

    Returns, per column, the index of its group's first column b and integers p, q with
    column = p / q x column b exactly (checked by cross-multiplication: every value is below
    2**24, so the products are exact); p = 0 for an all-zero column.
    """
    width = ints.shape[0]
    base = np.arange(width)
    numerator, denominator = np.ones(width), np.ones(width)
    first = (ints != 0).argmax(axis=1)
    pivot = ints[np.arange(width), first]
    numerator[pivot == 0] = 0.0
    seen: dict[bytes, int] = {}
    for j in np.flatnonzero(pivot != 0).tolist():
        # proportional columns have the same zeros and the same values over their pivot
        b = seen.setdefault((ints[j] / pivot[j]).tobytes(), j)
        if b != j and np.array_equal(ints[j] * pivot[b], ints[b] * pivot[j]):
            base[j], numerator[j], denominator[j] = b, pivot[j], pivot[b]
    return base, numerator, denominator
