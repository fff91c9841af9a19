"""Resampled column sums for several blocks or cluster sets drawn from one stream.

The engine of :func:`~recoverylab.stats.cluster_bootstrap_ratios`: blocks on the same clusters
share one draw of cluster indices (:func:`_shared_resample_sums`), and large cluster sets are
coupled to one resample of every cluster of the call (:func:`_coupled_resample_sums`), each set
corrected to an exact resample of its own clusters. Separate from the interval code because it
is about drawing fast and exactly, not about which interval is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from recoverylab.stats import _limits
from recoverylab.stats._corrections import _Corrections
from recoverylab.stats._exact_product import Block, _ExactProduct, _width
from recoverylab.stats._streams import _merge_types

#: Resamples of one batch of the coupled draws (fewer when N is large: MAX_BATCH_ELEMENTS).
_BATCH_ROWS = 256
#: Drawing a multinomial over T cluster types costs about this many times more per type than
#: drawing one uniform cluster index and counting it (numpy's binomial against an integer).
_TYPE_DRAW_COST = 25


def _coupled_resample_sums(
    sets: list[tuple[np.ndarray, Block]],
    n_universe: int,
    n_resamples: int,
    gen: np.random.Generator,
) -> list[np.ndarray]:
    """Column sums of each set's rows over ``n_resamples`` resamples, all drawn from one stream.

    ``sets``: per set, the positions of its K_s clusters among the ``n_universe`` of the call
    and a (K_s, C) block of their values (or its parts side by side, uncopied). Each resample
    is one stream of ``n_universe`` uniform draws over all clusters (counted once, one matrix
    product for every set). Draws landing in a set are uniform over it wherever they fall, so
    the set keeps the first K_s of them and tops up from its own clusters when fewer landed:
    exactly a resample of its own clusters.
    Only the corrections (about the sd of a Binomial(N, K_s/N) per resample) are set by set
    (:class:`_Corrections`); they are added to the product's raw sums, integers for integer
    columns (and multiples of 1/L), so those stay exact; the product computes each distinct
    column once (:class:`_ExactProduct`). The cost is resamples x N x distinct columns (plus
    the corrections): a dense product, which beat block-sparse ones while most sets hold most
    clusters (the takeover design: 94 % of (cell, workflow) pairs are non-empty).
    """
    edges = np.cumsum([0, *(_width(block) for _, block in sets)])
    product, raw = _coupled_raw_sums(sets, n_universe, n_resamples, gen)
    out = product.finish(raw)
    return [out[edges[i] : edges[i + 1]].T for i in range(len(sets))]


def _coupled_raw_sums(
    sets: list[tuple[np.ndarray, Block]],
    n_universe: int,
    n_resamples: int,
    gen: np.random.Generator,
) -> tuple[_ExactProduct, np.ndarray]:
    """Draw as :func:`_coupled_resample_sums` does; keep the product's corrected raw sums.

    Returns the product and its raw sums (one row per raw column, resamples along the row);
    ``product.rows(raw, columns)`` gives any design columns' sums from them. Integer raw sums
    are kept in float32 (exact below 2**24): a third of the memory of every scaled column.
    """
    product = _ExactProduct(sets, n_universe)
    correctable = [product.correctable(i) for i in range(len(sets))]
    corrections = _Corrections(
        [(where, values) for (where, _), (_, values) in zip(sets, correctable, strict=True)],
        n_universe,
    )
    n_raw = product.n_single + product.double.shape[1]
    kept = np.empty(
        (n_raw, n_resamples), dtype=np.float64 if n_raw > product.n_single else np.float32
    )
    batch = max(1, min(_BATCH_ROWS, _limits.MAX_BATCH_ELEMENTS // n_universe))
    # one buffer for every batch's counts: a fresh array per batch is mapped and zeroed again
    # by the kernel (huge pages), measured 0.2 s of system time at N = 12,500
    counts = np.empty((batch, n_universe), dtype=product.counts_dtype)
    with _one_blas_thread():
        for start in range(0, n_resamples, batch):
            size = min(batch, n_resamples - start)
            draws = gen.integers(0, n_universe, size=(size, n_universe), dtype=np.int32)
            raw = product.raw(_row_counts(draws, counts[:size]))
            landed = np.rint(raw[product.landed].T).astype(np.int64)
            for i, rows, sums in corrections.sums(draws, landed, gen):
                for columns, part in correctable[i][0]:
                    raw[columns, rows] += sums[:, part].T
            kept[:, start : start + size] = raw
    return product, kept


#: Rows of draws counted by one ``bincount``: its (rows x N) counters (8 bytes each) should
#: stay in the cache, even an L2 shared with a busy sibling thread (at N = 12,500, five rows
#: at a time cost twice the CPU of one row at a time on a loaded machine).
_COUNT_ELEMENTS = 1 << 14


def _row_counts(draws: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Return how often each cluster was drawn in each row of ``draws``, as floats (exact).

    The same counts as one ``bincount`` over the whole batch with row offsets, a few rows at a
    time (or one, without offsets) so that the counters stay in the cache (measured: 3-4x less
    CPU at N = 12,500; the row offsets added in int32 another 15 %).
    A count is at most N: float32 holds it exactly below 2**24 clusters, float64 above;
    ``out``, when given, is the (rows, N) float array filled (float64 for the packed lanes).
    """
    size, n_universe = draws.shape
    exact32 = n_universe < 2**24
    if out is not None and (exact32 or out.dtype == np.float64):
        counts = out
    else:
        counts = np.empty((size, n_universe), dtype=np.float32 if exact32 else np.float64)
    step = max(1, _COUNT_ELEMENTS // n_universe)
    if step == 1:
        for row in range(size):
            counts[row] = np.bincount(draws[row], minlength=n_universe)
        return counts
    # offsets in the draws' own type where they fit (int32: the sum is not widened to int64)
    fits = step * n_universe <= np.iinfo(draws.dtype).max
    offsets = (np.arange(step, dtype=draws.dtype if fits else np.int64) * n_universe)[:, None]
    for start in range(0, size, step):
        rows = draws[start : start + step]
        picks = (rows + offsets[: rows.shape[0]]).reshape(-1)
        drawn = np.bincount(picks, minlength=rows.size)
        counts[start : start + rows.shape[0]] = drawn.reshape(rows.shape)
    return counts


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run the block's matrix products on one BLAS thread.

    The products are many and mid-sized: on a shared machine BLAS threads wait on each other
    (measured: 5-6x the CPU of one thread, same wall time, at a load of 10 on 2 cores).
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _shared_resample_sums(
    blocks: list[np.ndarray], n_resamples: int, gen: np.random.Generator
) -> list[np.ndarray]:
    """Column sums of each block over ``n_resamples`` resamples of the (shared) rows.

    Every block holds one row per cluster, the same clusters in the same order. A block with
    few types (equal rows, ARCHITECTURE §4) draws a multinomial over them (one binomial per type
    and resample); the others share one draw of K uniform cluster indices per resample, counted
    per cluster, times each block. Both are exact; the products stay small (per block, in small
    batches), where BLAS threads would only wait on a busy machine.
    """
    n_rows = blocks[0].shape[0]
    outs = [np.empty((n_resamples, b.shape[1]), dtype=np.float64) for b in blocks]
    shared = []
    for block, out in zip(blocks, outs, strict=True):
        types, counts = _merge_types(block, np.ones(n_rows, dtype=np.int64))
        if types.shape[0] * _TYPE_DRAW_COST < n_rows:
            batch = max(1, _limits.MAX_BATCH_ELEMENTS // types.shape[0])
            for start in range(0, n_resamples, batch):
                size = min(batch, n_resamples - start)
                draws = gen.multinomial(n_rows, counts / n_rows, size=size)
                out[start : start + size] = draws.astype(np.float64) @ types
        else:
            shared.append((block, out))
    batch = max(1, min(32, _limits.MAX_BATCH_ELEMENTS // n_rows))
    for start in range(0, n_resamples if shared else 0, batch):
        size = min(batch, n_resamples - start)
        offsets = (np.arange(size, dtype=np.int64) * n_rows)[:, np.newaxis]
        picks = (gen.integers(0, n_rows, size=(size, n_rows)) + offsets).reshape(-1)
        drawn = np.bincount(picks, minlength=size * n_rows).reshape(size, n_rows)
        drawn_f = drawn.astype(np.float64)
        for block, out in shared:
            out[start : start + size] = drawn_f @ block
    return outs
