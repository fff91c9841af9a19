"""The paired sign-flip (permutation) test: exact by convolution or enumeration, else Monte Carlo.

:func:`sign_flip_test` tests per-cluster differences for symmetry about zero; integer
differences are exact on their lattice (a million clusters cost a few thousand points), other
small sets are enumerated, the rest drawn with the +1 correction. :func:`sign_flip_cells` runs
it in every cell of a frame. The p-value method is returned with every p-value.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, format_keys, require_one_of
from recoverylab.stats import _limits
from recoverylab.stats._cells import _cell_types, _column_names
from recoverylab.stats._checks import (
    ALTERNATIVES,
    _check_counts,
    _check_n_resamples,
    _check_seed,
    _numeric_array,
)
from recoverylab.stats._distributions import (
    _binomial_half_pmf,
    _binomial_half_two_sided,
    _fft_convolve,
    _negligible_window,
)
from recoverylab.stats._results import SignFlipResult
from recoverylab.stats._streams import _as_generator, _merge_types, cell_rng

#: Relative tolerance for float ties in sign-flip tests (scipy uses the same 100 eps).
_TIE_RTOL = 100 * float(np.finfo(np.float64).eps)

#: Integers above this are not exactly representable as float64.
_MAX_EXACT_INT = 2.0**53

_SIGN_FLIP_METHODS = ("auto", "exact", "monte-carlo")

_SIGN_FLIP_COLUMNS = ("statistic", "p_value", "p_method")


def sign_flip_cells(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    difference: str,
    count: str | None = None,
    n_resamples: int = 100_000,
    seed: int = 0,
    alternative: str = "two-sided",
) -> pl.DataFrame:
    """Run the paired sign-flip test of per-cluster differences separately in every cell.

    Parameters
    ----------
    partials
        One row per cluster × cell (or per type, when ``count`` names a multiplicity column),
        with the cell key columns and the difference column. Eager or lazy.
    cells
        Key columns of a cell (may be empty); nulls are keys.
    difference
        Column of per-cluster differences (e.g. recovery successes minus no-recovery successes).
    count
        Optional column of positive integer multiplicities.
    n_resamples
        Monte Carlo resamples, where no exact method applies (see :func:`sign_flip_test`).
    seed
        Non-negative integer; combined with each cell key by :func:`cell_rng`.
    alternative
        ``"two-sided"``, ``"greater"`` or ``"less"`` (see :func:`sign_flip_test`).

    Returns
    -------
    polars.DataFrame
        One row per cell, sorted by the cell columns: the cell columns, ``statistic`` (Float64,
        the sum of differences), ``p_value`` (Float64) and ``p_method`` (String:
        ``exact-convolution``, ``exact-enumeration`` or ``monte-carlo``).

    Raises
    ------
    ParameterError
        For a bad parameter or a column name that is not in ``partials``.
    SchemaError
        For a difference column that is not numeric or holds nulls / non-finite numbers, or a bad
        ``count`` column.

    Examples
    --------
    >>> frame = pl.DataFrame({"cell": ["x"] * 6, "d": [1, 1, 1, 1, 1, 0]})
    >>> sign_flip_cells(frame, cells=["cell"], difference="d").row(0)
    ('x', 5.0, 0.0625, 'exact-convolution')
    """
    cells_l = _column_names("cells", cells)
    if not isinstance(difference, str):
        raise ParameterError(
            f"parameter `difference` is {difference!r}; it must be the name of one column."
        )
    n_resamples = _check_n_resamples(n_resamples)
    seed = _check_seed("seed", seed)
    require_one_of("alternative", alternative, ALTERNATIVES)

    keys, groups = _cell_types(
        partials, cells_l, [difference], count, _SIGN_FLIP_COLUMNS, role="difference"
    )
    results = [
        sign_flip_test(
            cell_values[:, 0],
            cell_counts,
            n_resamples=n_resamples,
            rng=cell_rng(seed, key),
            alternative=alternative,
        )
        for key, cell_values, cell_counts in groups
    ]
    return pl.DataFrame(
        [
            *keys.get_columns(),
            pl.Series("statistic", [r.statistic for r in results], dtype=pl.Float64),
            pl.Series("p_value", [r.p_value for r in results], dtype=pl.Float64),
            pl.Series("p_method", [r.method for r in results], dtype=pl.String),
        ]
    )


def sign_flip_test(
    differences: np.ndarray | Sequence[float],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    method: str = "auto",
    n_resamples: int = 100_000,
    rng: np.random.Generator | int | None = None,
    alternative: str = "two-sided",
) -> SignFlipResult:
    """Test whether paired per-cluster differences are symmetric about zero, by flipping signs.

    Paired permutation test: T = Σ dᵢ and, under H0, T* = Σ sᵢ dᵢ with independent random signs;
    two-sided p = P(|T*| ≥ |T|). For floats, |T*| within 100 machine epsilons of |T| ties (like
    scipy), relative to Σ|dᵢ| (the largest |T*|) rather than |T|, so rounding is absorbed even
    when T is near 0 by cancellation. Integers need no tolerance: their lattice is exact.

    How it is computed (``method="auto"``):

    * integer differences: exact, by convolution. By absolute value a with multiplicity mₐ,
      T* = Σₐ a·(2·Binomial(mₐ, ½) − mₐ); the pieces' pmfs on the lattice of the gcd of the
      |values| are convolved (directly when small, by FFT when large). With one distinct
      |value| the binomial tails give it directly (= :func:`mcnemar_exact` on ±1 data).
    * otherwise, with at most 20 nonzero clusters: exact enumeration of all 2ⁿ sign vectors.
    * otherwise Monte Carlo with R resamples and the +1 correction, p = (1 + #{|T*| ≥ |T|}) /
      (1 + R): through ``scipy.stats.permutation_test`` up to 1,000 nonzero clusters, above by
      drawing v·(2·Binomial(m, ½) − m) per distinct value v of multiplicity m (same law).

    ``scipy.stats.permutation_test(alternative="two-sided")`` reports twice the smaller
    one-sided p-value: equal to P(|T*| ≥ |T|) for the symmetric sign-flip null, but under Monte
    Carlo it differs by noise and doubles the +1 correction. Every method here reports
    P(|T*| ≥ |T|) (only the null draws come from scipy).

    Parameters
    ----------
    differences
        Per-cluster differences (one per cluster, or per type with ``counts``); zeros count as
        clusters but do not change T*.
    counts
        Optional positive integer multiplicities, one per entry of ``differences``.
    method
        ``"auto"``, ``"exact"`` (raise when no exact method applies) or ``"monte-carlo"``.
    n_resamples
        Monte Carlo resamples (>= 1); ignored by the exact methods.
    rng
        A numpy Generator, an integer seed, or None for seed 0 (Monte Carlo only).
    alternative
        ``"two-sided"`` (P(|T*| ≥ |T|)), ``"greater"`` (P(T* ≥ T): evidence that the
        differences are positive) or ``"less"`` (P(T* ≤ T)). Every method computes all three.

    Returns
    -------
    SignFlipResult
        The statistic Σ dᵢ, the p-value, the method used, the number of clusters and of
        resamples. With every difference zero, p = 1.

    Raises
    ------
    ParameterError
        For empty or non-finite differences, bad counts, an unknown method, fewer than one
        resample, or ``method="exact"`` when no exact method applies (non-integer differences
        with more than 20 nonzero clusters).

    Examples
    --------
    >>> res = sign_flip_test([1, 1, 1, 1, 1, 0])
    >>> res.statistic, res.p_value, res.method
    (5.0, 0.0625, 'exact-convolution')
    """
    d, c, method, n_resamples, gen = _sign_flip_iv(differences, counts, method, n_resamples, rng)
    require_one_of("alternative", alternative, ALTERNATIVES)
    unique, multiplicity = _merge_types(d[:, np.newaxis], c)
    unique = unique[:, 0]
    n_clusters = int(multiplicity.sum())
    observed = float(multiplicity.astype(np.float64) @ unique)
    nonzero = unique != 0
    v, m = unique[nonzero], multiplicity[nonzero]
    n_nonzero = int(m.sum())

    def result(p_value: float, how: str, resamples: int | None = None) -> SignFlipResult:
        p_value = min(max(p_value, 0.0), 1.0)
        return SignFlipResult(observed, p_value, how, n_clusters, resamples, str(alternative))

    if n_nonzero == 0:
        return result(1.0, "exact-enumeration")
    if alternative != "two-sided" and method != "monte-carlo":
        exact = _sign_flip_one_sided_exact(v, m, observed, alternative)
        if exact is not None:
            return result(*exact)
    if method != "monte-carlo":
        if bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < _MAX_EXACT_INT)):
            p_value = _sign_flip_lattice(v.astype(np.int64), m)
            if p_value is not None:
                return result(p_value, "exact-convolution")
        if n_nonzero <= _limits.MAX_ENUMERATION:
            p_value = _sign_flip_enumerate(np.repeat(v, m), alternative)
            return result(p_value, "exact-enumeration")
        if method == "exact":
            raise ParameterError(
                f"parameter `method` is 'exact' but the differences are not integers (or their "
                f"lattice has more than {_limits.MAX_LATTICE} points) and there are {n_nonzero} "
                "nonzero clusters; exact enumeration is limited to "
                f"{_limits.MAX_ENUMERATION}. Hint: use "
                "method='auto' or 'monte-carlo'."
            )
    elif n_nonzero <= _limits.MAX_ENUMERATION and 2**n_nonzero <= n_resamples:
        # Enumerating every sign vector costs no more than the requested resamples.
        p_value = _sign_flip_enumerate(np.repeat(v, m), alternative)
        return result(p_value, "exact-enumeration")

    tolerance = _TIE_RTOL * float(m.astype(np.float64) @ np.abs(v))
    if n_nonzero <= _limits.SCIPY_MC_MAX_CLUSTERS:
        null = _sign_flip_null_scipy(np.repeat(v, m), n_resamples, gen)
    else:
        null = _sign_flip_null_types(v, m, n_resamples, gen)
    hits = _tail_hits(null, observed, tolerance, alternative)
    return result((1 + hits) / (1 + n_resamples), "monte-carlo", n_resamples)


def _sign_flip_iv(
    differences: object, counts: object, method: object, n_resamples: object, rng: object
) -> tuple[np.ndarray, np.ndarray, str, int, np.random.Generator]:
    """Validate and standardise the inputs of :func:`sign_flip_test`."""
    d = _numeric_array("differences", differences)
    if d.ndim != 1 or d.size == 0:
        raise ParameterError(
            f"parameter `differences` has shape {d.shape}; it must be a non-empty 1-D array with "
            "one difference per cluster."
        )
    d = d.astype(np.float64)
    if not np.isfinite(d).all():
        where = np.flatnonzero(~np.isfinite(d))
        shown = format_keys((f"entry {i}" for i in where), total=where.size)
        raise ParameterError(
            f"parameter `differences` has {where.size} NaN or infinite values ({shown}); "
            "differences must be finite."
        )
    c = (
        np.ones(d.size, dtype=np.int64)
        if counts is None
        else _check_counts(counts, d.size, "entries in `differences`")
    )
    require_one_of("method", method, _SIGN_FLIP_METHODS)
    return d, c, str(method), _check_n_resamples(n_resamples), _as_generator(rng)


def _sign_flip_lattice(v: np.ndarray, m: np.ndarray) -> float | None:
    """Return the exact two-sided p for integer differences, or None if the lattice is too big.

    With |values| a (multiplicity mₐ, gcd g, a' = a / g) and Bₐ ~ Binomial(mₐ, ½) positive
    signs, T*/g = 2U − S, U = Σ a'·Bₐ, S = Σ a'·mₐ; T/g is an integer t on the same lattice, so
    the tail {|2U − S| ≥ |t|} is exact, with no tolerance.
    """
    steps, per_magnitude, gcd = _magnitudes(v, m)
    t = abs(int((v // gcd) @ m))
    if t == 0:
        return 1.0
    if steps.size == 1:
        # One distinct |value|: T*/a = 2B − M, B ~ Binomial(M, ½), a two-sided binomial test
        # (the same function as mcnemar_exact, so the p-values on ±1 data are equal exactly).
        return _binomial_half_two_sided((int(per_magnitude[0]) - t) // 2, int(per_magnitude[0]))
    null = _lattice_pmf(steps, per_magnitude)
    if null is None:
        return None
    support, pmf = null
    return float(pmf[np.abs(support) >= t].sum())


def _lattice_pmf(steps_a: np.ndarray, sizes_a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Return the null pmf of T*/g = Σ a'·(2·Binomial(mₐ, ½) − mₐ) on its integer support.

    None when the lattice would exceed ``_limits.MAX_LATTICE`` points. Mass outside the Hoeffding
    window of :func:`_negligible_window` (below 1e-340) is dropped.
    """
    steps, sizes = steps_a.tolist(), sizes_a.tolist()
    windows = [_negligible_window(size / 2, size, size) for size in sizes]
    points = sum(step * (hi - lo) + 1 for step, (lo, hi) in zip(steps, windows, strict=True))
    if points > _limits.MAX_LATTICE:
        return None
    pieces = []
    for step, size, (lo, hi) in zip(steps, sizes, windows, strict=True):
        pmf = np.zeros(step * (hi - lo) + 1)
        pmf[::step] = _binomial_half_pmf(size, lo, hi)
        pieces.append(_LatticePmf(step * lo, step * size / 2, step**2 * size, pmf))
    total = _convolve_all(pieces)
    span = sum(step * size for step, size in zip(steps, sizes, strict=True))
    doubled = 2 * (total.offset + np.arange(total.pmf.size, dtype=np.int64)) - span
    return doubled, total.pmf


def _magnitudes(v: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Return the distinct |v| over their gcd g, the clusters of each, and g (v integer, ≠ 0)."""
    magnitudes, inverse = np.unique(np.abs(v), return_inverse=True)
    per_magnitude = np.zeros(magnitudes.size, dtype=np.int64)
    np.add.at(per_magnitude, inverse, m)
    gcd = int(np.gcd.reduce(magnitudes))
    return magnitudes // gcd, per_magnitude, gcd


@dataclass(frozen=True)
class _LatticePmf:
    """The pmf of a sum of scaled binomials on the integers offset, offset + 1, ...

    ``scale`` = Σ m·a'² is its Hoeffding scale (each cluster adds a' times a Bernoulli(½)).
    """

    offset: int
    mean: float
    scale: float
    pmf: np.ndarray = field(repr=False, compare=False)


def _convolve_all(pieces: list[_LatticePmf]) -> _LatticePmf:
    """Convolve pmfs, the two shortest first to keep the work balanced, trimming nil tails."""
    heap = [(piece.pmf.size, i, piece) for i, piece in enumerate(pieces)]
    heapq.heapify(heap)
    order = len(heap)
    while len(heap) > 1:
        _, _, left = heapq.heappop(heap)
        _, _, right = heapq.heappop(heap)
        if left.pmf.size * right.pmf.size <= _limits.DIRECT_CONVOLVE_MAX:
            joined = np.convolve(left.pmf, right.pmf)
        else:
            # FFT rounding leaves tiny negative (and positive) noise around zero.
            joined = np.clip(_fft_convolve(left.pmf, right.pmf), 0.0, None)
        offset = left.offset + right.offset
        mean, scale = left.mean + right.mean, left.scale + right.scale
        lo, hi = _negligible_window(mean - offset, scale, joined.size - 1)
        trimmed = _LatticePmf(offset + lo, mean, scale, joined[lo : hi + 1])
        heapq.heappush(heap, (trimmed.pmf.size, order, trimmed))
        order += 1
    return heap[0][2]


def _sign_flip_enumerate(x: np.ndarray, alternative: str = "two-sided") -> float:
    """Return the sign-flip p-value by enumerating sign vectors of the nonzero differences ``x``.

    Flipping every sign maps T* to −T*, so the first sign is fixed at + and the other 2ⁿ⁻¹
    sign vectors are enumerated in chunks of bit rows; each stands for the pair ±T*.
    """
    observed = float(x.sum())
    tolerance = _TIE_RTOL * float(np.abs(x).sum())
    rest = x[1:]
    n_vectors = 1 << rest.size
    shifts = np.arange(rest.size, dtype=np.int64)
    chunk = max(1, _limits.MAX_BATCH_ELEMENTS // max(1, rest.size))
    hits = 0
    for start in range(0, n_vectors, chunk):
        index = np.arange(start, min(n_vectors, start + chunk), dtype=np.int64)
        signs = (((index[:, np.newaxis] >> shifts) & 1) * 2 - 1).astype(np.float64)
        flipped = x[0] + signs @ rest
        if alternative == "two-sided":
            hits += 2 * _tail_hits(flipped, observed, tolerance, alternative)
        else:
            pair = np.concatenate([flipped, -flipped])
            hits += _tail_hits(pair, observed, tolerance, alternative)
    return hits / (2 * n_vectors)


def _tail_hits(null: np.ndarray, observed: float, tolerance: float, alternative: str) -> int:
    """Count null draws at least as extreme as ``observed`` (ties within ``tolerance`` count)."""
    if alternative == "greater":
        return int(np.count_nonzero(null >= observed - tolerance))
    if alternative == "less":
        return int(np.count_nonzero(null <= observed + tolerance))
    return int(np.count_nonzero(np.abs(null) >= abs(observed) - tolerance))


def _sign_flip_one_sided_exact(
    v: np.ndarray, m: np.ndarray, observed: float, alternative: str
) -> tuple[float, str] | None:
    """Return the exact one-sided p and its method, or None when only Monte Carlo applies.

    The null of T* is symmetric, so P(T* ≤ T) = P(T* ≥ −T): both sides reduce to an upper
    tail P(T* ≥ t). For integers it is read off the lattice pmf; otherwise enumerated.
    """
    t = observed if alternative == "greater" else -observed
    if bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < _MAX_EXACT_INT)):
        steps, sizes, gcd = _magnitudes(v.astype(np.int64), m)
        null = _lattice_pmf(steps, sizes)
        if null is not None:
            support, mass = null
            return float(mass[support >= round(t) // gcd].sum()), "exact-convolution"
    if int(m.sum()) <= _limits.MAX_ENUMERATION:
        return _sign_flip_enumerate(np.repeat(v, m), alternative), "exact-enumeration"
    return None


def _sign_flip_null_scipy(x: np.ndarray, n_resamples: int, gen: np.random.Generator) -> np.ndarray:
    """Draw the Monte Carlo null of T* = Σ sᵢ xᵢ with ``scipy.stats.permutation_test``.

    Only the null comes from scipy: the caller's p-value is P(|T*| ≥ |T|) for every method.
    """
    batch = max(1, _limits.MAX_BATCH_ELEMENTS // (2 * x.size))
    from scipy import stats as sps  # a slow import, kept off `import recoverylab`

    res = sps.permutation_test(
        (x,),
        np.sum,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        batch=batch,
        alternative="greater",
        rng=gen,
    )
    return np.asarray(res.null_distribution, dtype=np.float64)


def _sign_flip_null_types(
    v: np.ndarray, m: np.ndarray, n_resamples: int, gen: np.random.Generator
) -> np.ndarray:
    """Draw the Monte Carlo null of T* per distinct value: v·(2·Binomial(m, ½) − m), summed."""
    single = m == 1
    v_single, v_multi, m_multi = v[single], v[~single], m[~single]
    null = np.empty(n_resamples, dtype=np.float64)
    batch = max(1, _limits.MAX_BATCH_ELEMENTS // v.size)
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        part = np.zeros(size)
        if v_single.size:
            # Fair coins for the many types seen once: random bits are far cheaper than binomials.
            bits = gen.integers(0, 2, size=(size, v_single.size), dtype=np.int8)
            part += 2.0 * (bits.astype(np.float64) @ v_single) - v_single.sum()
        if v_multi.size:
            heads = gen.binomial(m_multi, 0.5, size=(size, v_multi.size))
            part += (2 * heads - m_multi).astype(np.float64) @ v_multi
        null[start : start + size] = part
    return null
