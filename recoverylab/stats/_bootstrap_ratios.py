"""Percentile cluster-bootstrap intervals of many ratios in many cells, from shared draws.

The takeover protocol reports several ratios (EAR, pass rates...) per cell, clustered by
workflow: :func:`cluster_bootstrap_ratios` resamples a cell's clusters once for all its ratios,
and cells on the same cluster set share the draw (``_shared_draws``), so the cost grows with the
cluster sets, not with cells × ratios. Each ratio's distribution is that of the cluster bootstrap.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError
from recoverylab.stats._bootstrap import _percentile_interval
from recoverylab.stats._cells import _column_names
from recoverylab.stats._checks import _check_confidence, _check_n_resamples, _check_seed
from recoverylab.stats._exact_product import _ExactProduct
from recoverylab.stats._shared_draws import _coupled_raw_sums, _shared_resample_sums
from recoverylab.stats._streams import cell_rng


def cluster_bootstrap_ratios(
    partials: pl.DataFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    ratios: Sequence[tuple[str, str, str]],
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """Percentile cluster-bootstrap intervals of several ratios in many cells, draws shared.

    The intervals of :func:`cluster_bootstrap` with :func:`ratio` (percentile) for every
    ``(cell, ratio)``: a cell's K clusters are resampled and each ratio is Σ numerator /
    Σ denominator over the resample. The draw is shared: all ratios of a cell, and all cells on
    the same set of clusters, use one resample (one matrix product for every column). Sets
    holding at least half of all the clusters of the call are coupled to one resample of all of
    them (:func:`_coupled_resample_sums`), so uniform draws are made and counted once and only
    a few corrections per resample are set by set. Each ratio's distribution is exactly that of
    :func:`cluster_bootstrap`; only the stream differs: coupled sets share ``cell_rng(seed,
    ())`` (their intervals depend on all the clusters of the call), a smaller set uses
    :func:`cell_rng` with its first cell's key. Row order does not matter.

    Parameters
    ----------
    partials
        One row per (cluster, cell): the ``cells`` columns, ``cluster`` and the numerator and
        denominator columns of ``ratios`` (numeric, no nulls).
    cells
        Key columns of a cell (may be empty).
    cluster
        The cluster key column (unique within a cell).
    ratios
        ``(name, numerator, denominator)`` triples.
    n_resamples, confidence, seed
        As in :func:`cluster_bootstrap`.

    Returns
    -------
    polars.DataFrame
        One row per (cell, ratio) whose denominator sums to more than 0: the cell columns,
        ``ratio`` (the name), ``estimate``, ``ci_low``, ``ci_high`` (Float64; NaN when every
        resample is undefined) and ``n_clusters`` (Int64).

    Raises
    ------
    ParameterError
        For a bad parameter, a missing column or a cluster listed twice in a cell.

    Examples
    --------
    >>> frame = pl.DataFrame({"w": ["a", "b", "c"], "k": [1, 0, 2], "n": [1, 1, 2]})
    >>> out = cluster_bootstrap_ratios(
    ...     frame, cells=[], cluster="w", ratios=[("rate", "k", "n")], n_resamples=200
    ... )
    >>> out["estimate"].to_list()
    [0.75]
    """
    cells_l = _column_names("cells", cells)
    n_resamples = _check_n_resamples(n_resamples)
    confidence = _check_confidence(confidence)
    seed = _check_seed("seed", seed)
    columns = list(dict.fromkeys(c for _, num, den in ratios for c in (num, den)))
    missing = [c for c in [*cells_l, cluster, *columns] if c not in partials.columns]
    if missing:
        raise ParameterError(f"columns {missing} are not in `partials` ({partials.columns}).")
    keys = list(dict.fromkeys([*cells_l, cluster]))  # the cluster may be a cell key itself
    # integers are read as they are (numpy converts them while it orders the rows, exactly as
    # a cast would): a Float64 copy of every column cost as much as ordering them
    frame = partials.select(
        *keys,
        *(
            pl.col(c) if partials.schema[c].is_integer() else pl.col(c).cast(pl.Float64)
            for c in columns
        ),
    )
    groups: dict[bytes, list[tuple[tuple, np.ndarray]]] = {}
    members: dict[bytes, np.ndarray] = {}
    n_universe, by_cell = _cells_by_position(frame, cells_l, cluster, columns)
    for key, at, values in by_cell:
        members.setdefault(at.tobytes(), at)
        groups.setdefault(at.tobytes(), []).append((key, values))
    sums = _ratio_resample_sums(groups, members, n_universe, n_resamples, seed)
    rows = [
        (*key, *row)
        for at_key, cells_of_set in groups.items()
        for (key, values), block in zip(cells_of_set, sums[at_key], strict=True)
        for row in _ratio_rows(values, block, columns, ratios, confidence)
    ]
    schema: dict[str, Any] = {
        **{c: partials.schema[c] for c in cells_l},
        "ratio": pl.String,
        **dict.fromkeys(["estimate", "ci_low", "ci_high"], pl.Float64),
        "n_clusters": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _cells_by_position(
    frame: pl.DataFrame, cells: list[str], cluster: str, columns: list[str]
) -> tuple[int, list[tuple[tuple[Any, ...], np.ndarray, np.ndarray]]]:
    """Return the number of clusters and, per cell in sorted key order, key, positions, values.

    A cluster's position is its rank among all clusters of the call (sorted, nulls first), so
    row order is moot; a cell's rows are ordered by position. Only the cell keys and the
    positions are sorted (a sort of every row by its string keys cost more than the draws), and
    only the key columns are joined to their codes (joining the whole frame copied every column).
    """
    universe = frame.select(cluster).unique().sort(cluster, nulls_last=False)
    at = _codes(frame, [cluster], universe)
    cell = np.zeros(frame.height, dtype=np.int64)
    key_rows: list[tuple[Any, ...]] = [()] if frame.height else []
    if cells:
        keys = frame.select(cells).unique().sort(cells, nulls_last=False)
        cell = _codes(frame, cells, keys)
        key_rows = keys.rows()
    order = _by_cell_and_position(cell, at, len(key_rows), universe.height)
    if order is None:
        raise ParameterError(f"`partials` lists a `{cluster}` twice within a cell.")
    cell, at = cell[order], at[order]
    # column by column, as polars hands a frame to numpy: each cell's column sums (estimates)
    # keep their order, and no copy per cell is needed
    values = np.empty((order.size, len(columns)), dtype=np.float64, order="F")
    for j, column in enumerate(columns):
        values[:, j] = frame.get_column(column).to_numpy()[order]
    edges = np.searchsorted(cell, np.arange(len(key_rows) + 1))
    return universe.height, [
        (key, at[edges[i] : edges[i + 1]], values[edges[i] : edges[i + 1]])
        for i, key in enumerate(key_rows)
    ]


def _by_cell_and_position(
    cell: np.ndarray, at: np.ndarray, n_cells: int, n_universe: int
) -> np.ndarray | None:
    """Return the rows in (cell, position) order, or None when a (cell, position) repeats.

    Every pair is one slot of a cells x clusters table when that table is small (a few times
    the rows): filling it is a counting sort, cheaper than sorting the rows. Else a sort.
    """
    slot = cell * max(n_universe, 1) + at
    if n_cells * n_universe <= 4 * slot.size + 2**16:
        table = np.full(n_cells * n_universe, -1, dtype=np.int64)
        table[slot] = np.arange(slot.size)
        order = table[table >= 0]
        return order if order.size == slot.size else None
    order = np.argsort(slot, kind="stable")
    return None if np.any(slot[order][1:] == slot[order][:-1]) else order


def _codes(frame: pl.DataFrame, on: list[str], keys: pl.DataFrame) -> np.ndarray:
    """Each row's position among the sorted distinct ``keys`` of its ``on`` columns."""
    code = keys.with_row_index("__code")
    joined = frame.select(on).join(code, on=on, how="left", nulls_equal=True, maintain_order="left")
    return joined.get_column("__code").to_numpy().astype(np.int64)


def _ratio_rows(
    values: np.ndarray,
    block: Callable[[np.ndarray], np.ndarray],
    columns: list[str],
    ratios: Sequence[tuple[str, str, str]],
    confidence: float,
) -> list[tuple[str, float, float, float, int]]:
    """One cell's (ratio, estimate, ci_low, ci_high, n_clusters) of each defined ratio.

    ``block(columns)``: the cell's resampled sums of those columns, one row per column.
    """
    totals = values.sum(axis=0)
    defined = [
        (name, columns.index(num), columns.index(den))
        for name, num, den in ratios
        if totals[columns.index(den)] > 0
    ]
    if not defined:
        return []
    numerators = block(np.array([a for _, a, _ in defined]))
    denominators = block(np.array([b for _, _, b in defined]))
    with np.errstate(divide="ignore", invalid="ignore"):
        distributions = numerators / denominators
    bounds = _percentile_rows(distributions, confidence)
    return [
        (name, float(totals[a] / totals[b]), float(low), float(high), values.shape[0])
        for (name, a, b), (low, high) in zip(defined, bounds.tolist(), strict=True)
    ]


def _percentile_rows(distributions: np.ndarray, confidence: float) -> np.ndarray:
    """Return each row's percentile interval as :func:`_percentile_interval` does, (R, 2).

    Rows without an undefined (NaN) resample are done in one ``quantile`` call (the same
    order statistics and interpolation as row by row); the others drop their NaNs first.
    """
    out = np.empty((distributions.shape[0], 2), dtype=np.float64)
    undefined = np.isnan(distributions).any(axis=1)
    if not undefined.all():
        levels = [(1 - confidence) / 2, (1 + confidence) / 2]
        out[~undefined] = np.quantile(distributions[~undefined], levels, axis=1).T
    for r in np.flatnonzero(undefined).tolist():
        out[r] = _percentile_interval(distributions[r], confidence)
    return out


#: A set holding at least this share of the clusters of a call is coupled to the resample of
#: them all (:func:`_coupled_resample_sums`); a smaller one draws alone, so that no product
#: runs over many clusters it does not hold.
_COUPLED_SHARE = 0.5


def _ratio_resample_sums(
    groups: dict[bytes, list[tuple[tuple, np.ndarray]]],
    members: dict[bytes, np.ndarray],
    n_universe: int,
    n_resamples: int,
    seed: int,
) -> dict[bytes, list[Callable[[np.ndarray], np.ndarray]]]:
    """Resampled column sums of every cell, keyed by its cluster set (one reader per cell).

    A cell's reader gives the resampled sums of the columns asked for, one row per column.
    Large sets are coupled to one resample of all ``n_universe`` clusters, drawn from
    ``cell_rng(seed, ())`` (their sums scaled from the product's raw sums when read); small
    sets draw alone from ``cell_rng(seed, first cell key)``.
    """
    large = [s for s in groups if members[s].size >= _COUPLED_SHARE * n_universe]
    out: dict[bytes, list[Callable[[np.ndarray], np.ndarray]]] = {}
    if large:
        product, raw = _coupled_raw_sums(
            [(members[s], [v for _, v in groups[s]]) for s in large],
            n_universe,
            n_resamples,
            cell_rng(seed, ()),
        )
        first = 0  # each cell's first column among the product's
        for s in large:
            out[s] = []
            for _, values in groups[s]:
                out[s].append(functools.partial(_read_coupled, product, raw, first))
                first += values.shape[1]
    for s, cells_of_set in groups.items():
        if s not in out:
            blocks = [values for _, values in cells_of_set]
            sums = _shared_resample_sums(blocks, n_resamples, cell_rng(seed, cells_of_set[0][0]))
            out[s] = [functools.partial(_read_block, block) for block in sums]
    return out


def _read_coupled(
    product: _ExactProduct, raw: np.ndarray, first: int, columns: np.ndarray
) -> np.ndarray:
    """Return a coupled cell's sums of ``columns`` (the cell's own numbering), one row each."""
    return product.rows(raw, first + columns)


def _read_block(block: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Return a block's sums of ``columns``, one row each."""
    return block.T[columns]
