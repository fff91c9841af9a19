"""stats.cluster_bootstrap_ratios: several ratios in many cells from shared cluster draws."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoverylab import stats
from recoverylab._errors import ParameterError


def _frame(seed: int = 0, workflows: int = 40) -> pl.DataFrame:
    gen = np.random.default_rng(seed)
    rows = []
    for agent in ("a", "b"):
        for depth in (0, 1):
            # depth 1 of agent b has fewer workflows: a set of its own
            count = workflows - 7 if (agent, depth) == ("b", 1) else workflows
            for w in range(count):
                den = int(gen.integers(1, 6))
                num = int(gen.binomial(den, 0.3 + 0.2 * depth))
                rows.append((agent, depth, f"w{w:03d}", num, den, int(gen.integers(0, num + 1))))
    return pl.DataFrame(rows, schema=["agent", "depth", "wf", "num", "den", "sub"], orient="row")


RATIOS = [("rate", "num", "den"), ("sub_rate", "sub", "num")]


def test_estimates_counts_and_schema_by_hand():
    frame = pl.DataFrame(
        {
            "cell": ["x", "x", "x", "y"],
            "wf": ["p", "q", "r", "p"],
            "k": [1, 0, 2, 0],
            "n": [1, 1, 2, 0],
        }
    )
    out = stats.cluster_bootstrap_ratios(
        frame, cells=["cell"], cluster="wf", ratios=[("r", "k", "n")], n_resamples=500
    )
    # cell y has no denominator: no row, never an invented 0 or 1
    assert out.to_dict(as_series=False)["cell"] == ["x"]
    assert out["estimate"].item() == 0.75
    assert out["n_clusters"].item() == 3
    assert out.columns == ["cell", "ratio", "estimate", "ci_low", "ci_high", "n_clusters"]
    assert 0.0 <= out["ci_low"].item() <= 0.75 <= out["ci_high"].item() <= 1.0


@pytest.mark.parametrize("rows", [2, 60])  # uniform indices; multinomial over 2 types
def test_resampled_sums_have_the_multinomial_distribution(rows):
    # K rows, half 1 and half 0: the resampled sum is Binomial(K, 1/2).
    values = np.repeat([[1.0], [0.0]], rows // 2, axis=0)
    sums = stats._shared_resample_sums([values], 40_000, np.random.default_rng(1))[0][:, 0]
    assert sums.min() >= 0
    assert sums.max() <= rows
    assert np.all(sums == np.round(sums))
    assert sums.mean() == pytest.approx(rows / 2, abs=4 * np.sqrt(rows / 4 / 40_000))
    assert sums.var() == pytest.approx(rows / 4, rel=0.03)
    if rows == 2:
        freq = np.bincount(sums.astype(int), minlength=3) / sums.size
        np.testing.assert_allclose(freq, [0.25, 0.5, 0.25], atol=0.01)


def test_intervals_agree_with_cluster_bootstrap():
    frame = _frame(workflows=60)
    ours = stats.cluster_bootstrap_ratios(
        frame, cells=["agent", "depth"], cluster="wf", ratios=RATIOS, n_resamples=20_000, seed=3
    )
    for name, num, den in RATIOS:
        ref = stats.cluster_bootstrap(
            frame.filter(pl.col(den).sum().over("agent", "depth") > 0),
            cells=["agent", "depth"],
            values=[num, den],
            n_resamples=20_000,
            seed=4,
        )
        mine = ours.filter(pl.col("ratio") == name).sort("agent", "depth")
        np.testing.assert_allclose(mine["estimate"], ref["estimate"], rtol=1e-12)
        assert mine["n_clusters"].to_list() == ref["n_clusters"].to_list()
        # same distribution, different random streams: Monte Carlo error only
        np.testing.assert_allclose(mine["ci_low"], ref["ci_low"], atol=0.02)
        np.testing.assert_allclose(mine["ci_high"], ref["ci_high"], atol=0.02)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_row_order_does_not_change_the_result(order_seed):
    frame = _frame(workflows=12)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=order_seed)
    options = {"cells": ["agent", "depth"], "cluster": "wf", "ratios": RATIOS, "n_resamples": 300}
    first = stats.cluster_bootstrap_ratios(frame, **options)
    assert first.equals(stats.cluster_bootstrap_ratios(shuffled, **options))


def test_one_cell_without_cell_columns_and_empty_input():
    frame = _frame().filter(pl.col("agent") == "a", pl.col("depth") == 0)
    out = stats.cluster_bootstrap_ratios(
        frame, cells=[], cluster="wf", ratios=RATIOS, n_resamples=200
    )
    assert out["ratio"].to_list() == ["rate", "sub_rate"]
    empty = stats.cluster_bootstrap_ratios(
        frame.head(0), cells=["agent"], cluster="wf", ratios=RATIOS, n_resamples=200
    )
    assert empty.height == 0
    assert empty.schema["agent"] == pl.String


def test_bad_input_is_our_error():
    frame = _frame()
    with pytest.raises(ParameterError, match=r"columns \['nope'\]"):
        stats.cluster_bootstrap_ratios(
            frame, cells=["agent"], cluster="wf", ratios=[("r", "nope", "den")]
        )
    with pytest.raises(ParameterError, match="twice within a cell"):
        stats.cluster_bootstrap_ratios(frame, cells=["agent"], cluster="wf", ratios=RATIOS)
    with pytest.raises(ParameterError, match="n_resamples"):
        stats.cluster_bootstrap_ratios(
            frame, cells=["agent", "depth"], cluster="wf", ratios=RATIOS, n_resamples=0
        )


def _multinomial_pmf(counts: tuple[int, ...]) -> float:
    k = len(counts)
    return math.factorial(k) / math.prod(math.factorial(c) for c in counts) / k**k


@pytest.mark.parametrize(
    ("n_universe", "where"),
    [(3, [0, 1, 2]), (5, [1, 3, 4]), (9, [2, 7, 8]), (4, [0, 1, 3])],
)
def test_coupled_sets_get_exactly_multinomial_counts(n_universe, where):
    # An identity block makes the resampled sums the counts of each cluster of the set: every
    # resample draws exactly K_s of them, and the count vectors follow Multinomial(K_s, 1/K_s)
    # whatever share of all clusters the set holds (surplus dropped, shortfall drawn).
    where_a = np.array(where)
    k = where_a.size
    other = np.array([0, 1]) if n_universe > 3 else np.array([0, 1, 2])
    sets = [(where_a, np.eye(k)), (other, np.eye(other.size))]
    n = 60_000
    sums = stats._coupled_resample_sums(sets, n_universe, n, np.random.default_rng(5))
    for (members, _), counts in zip(sets, sums, strict=True):
        assert np.all(counts == np.round(counts))
        assert np.all(counts >= 0)
        assert np.all(counts.sum(axis=1) == members.size)
        patterns, freq = np.unique(counts.astype(int), axis=0, return_counts=True)
        expected = np.array([_multinomial_pmf(tuple(p)) for p in patterns])
        assert expected.sum() == pytest.approx(1.0)  # every possible pattern was drawn
        assert np.all(np.abs(freq / n - expected) <= 5 * np.sqrt(expected / n) + 1e-3)


def test_coupled_sums_of_values_are_exact():
    # Sums of integer and fractional values equal the counts of each cluster times its values.
    gen = np.random.default_rng(2)
    where = np.array([0, 2, 3, 5, 6, 7, 9])
    values = np.column_stack([gen.integers(0, 9, where.size), gen.random(where.size) / 3])
    block = np.hstack([np.eye(where.size), values])
    sums = stats._coupled_resample_sums([(where, block)], 11, 500, np.random.default_rng(3))[0]
    counts = sums[:, : where.size]
    np.testing.assert_array_equal(sums[:, where.size], counts @ values[:, 0])
    np.testing.assert_allclose(sums[:, where.size + 1], counts @ values[:, 1], rtol=1e-12)


def _loop_reference(frame, cell, num, den, n_resamples, seed, confidence=0.95):
    """Resample one cell's workflows with replacement in a plain loop; percentile interval."""
    part = frame.filter(pl.col("agent") == cell[0], pl.col("depth") == cell[1])
    x, y = part[num].to_numpy().astype(float), part[den].to_numpy().astype(float)
    gen = np.random.default_rng(seed)
    ratios = []
    for _ in range(n_resamples):
        pick = gen.integers(0, x.size, x.size)
        if y[pick].sum() > 0:
            ratios.append(x[pick].sum() / y[pick].sum())
    return np.quantile(ratios, [(1 - confidence) / 2, (1 + confidence) / 2])


def test_intervals_agree_with_a_plain_loop_reference():
    # Sets of every kind: all workflows (no correction), most of them (coupled, corrected)
    # and fewer than half (drawn alone).
    frame = _frame(workflows=50)
    frame = frame.filter(
        ~((pl.col("agent") == "a") & (pl.col("depth") == 1) & (pl.col("wf") > "w019"))
    )
    ours = stats.cluster_bootstrap_ratios(
        frame, cells=["agent", "depth"], cluster="wf", ratios=RATIOS, n_resamples=20_000, seed=1
    )
    assert sorted(ours.group_by("agent", "depth").agg(pl.col("n_clusters").first()).rows()) == [
        ("a", 0, 50),
        ("a", 1, 20),
        ("b", 0, 50),
        ("b", 1, 43),
    ]
    for (agent, depth, name), row in ours.rows_by_key(["agent", "depth", "ratio"]).items():
        num, den = next((n, d) for r, n, d in RATIOS if r == name)
        low, high = _loop_reference(frame, (agent, depth), num, den, 20_000, seed=9)
        estimate, ci_low, ci_high, _ = row[0]
        assert ci_low <= estimate <= ci_high
        assert ci_low == pytest.approx(low, abs=0.02)
        assert ci_high == pytest.approx(high, abs=0.02)


class _CoupledSetReference:
    """One set corrected on its own (as first written): the reference of the corrections."""

    def __init__(self, where: np.ndarray, block: np.ndarray, n_universe: int) -> None:
        self.k = where.size
        self.block = block
        self.position = np.full(n_universe, -1, dtype=np.int64)
        self.position[where] = np.arange(self.k)
        self.inside = self.position >= 0

    def correction(
        self, draws: np.ndarray, landed: np.ndarray, gen: np.random.Generator
    ) -> np.ndarray:
        """Return the change of the row sums that makes each row exactly K_s draws of the set.

        ``draws``: (B, N) uniform draws; ``landed``: how many per row fell in the set. A row
        with too many drops its last surplus draws in the set; one with too few draws more.
        """
        surplus = landed - self.k
        rows, picks, signs = [], [], []
        short = np.flatnonzero(surplus < 0)
        if short.size:
            need = -surplus[short]
            rows.append(np.repeat(short, need))
            picks.append(gen.integers(0, self.k, size=int(need.sum())))
            signs.append(np.ones(int(need.sum())))
        over = np.flatnonzero(surplus > 0)
        if over.size:
            row, cluster = self._last_landed(draws, over, surplus[over])
            rows.append(over[row])
            picks.append(self.position[cluster])
            signs.append(-np.ones(row.size))
        correction = np.zeros((draws.shape[0], self.block.shape[1]), dtype=np.float64)
        if not rows:
            return correction
        row_of = np.concatenate(rows)
        order = np.argsort(row_of, kind="stable")
        row_of = row_of[order]
        values = self.block[np.concatenate(picks)[order]] * np.concatenate(signs)[order, None]
        starts = np.flatnonzero(np.concatenate([[True], row_of[1:] != row_of[:-1]]))
        correction[row_of[starts]] = np.add.reduceat(values, starts, axis=0)
        return correction

    def _last_landed(
        self, draws: np.ndarray, over: np.ndarray, surplus: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(row of ``over``, cluster) of each row's last ``surplus`` draws in the set.

        Only a tail of each row is searched, widened until every row has enough of them.
        """
        n_universe = draws.shape[1]
        most = int(surplus.max())
        width = min(n_universe, math.ceil((most + 4 * math.sqrt(most) + 16) * n_universe / self.k))
        while True:
            tail = draws[over, n_universe - width :]
            hit = self.inside[tail]
            if width == n_universe or (hit.sum(axis=1) >= surplus).all():
                break
            width = min(n_universe, 2 * width)
        # hits at or after each position
        later = np.cumsum(hit[:, ::-1], axis=1, dtype=np.int32)[:, ::-1]
        row, column = np.nonzero(hit & (later <= surplus[:, np.newaxis]))
        return row, tail[row, column]


def _dense_coupled_reference(sets, n_universe, n_resamples, gen):
    """The coupled sums as first written: whole-batch offset bincount, one float64 product."""
    widths = [block.shape[1] for _, block in sets]
    edges = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    design = np.zeros((n_universe, int(edges[-1]) + len(sets)))
    for i, (where, block) in enumerate(sets):
        design[where, edges[i] : edges[i + 1]] = block
        design[where, edges[-1] + i] = 1.0
    coupled = [_CoupledSetReference(where, block, n_universe) for where, block in sets]
    outs = [np.empty((n_resamples, w)) for w in widths]
    batch = max(1, min(256, stats._limits.MAX_BATCH_ELEMENTS // n_universe))
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        draws = gen.integers(0, n_universe, size=(size, n_universe), dtype=np.int32)
        offsets = (np.arange(size, dtype=np.int64) * n_universe)[:, np.newaxis]
        counts = np.bincount((draws + offsets).reshape(-1), minlength=size * n_universe)
        sums = counts.reshape(size, n_universe).astype(np.float64) @ design
        for i, (one, out) in enumerate(zip(coupled, outs, strict=True)):
            out[start : start + size] = sums[:, edges[i] : edges[i + 1]]
            if one.k < n_universe:
                landed = np.rint(sums[:, edges[-1] + i]).astype(np.int64)
                out[start : start + size] += one.correction(draws, landed, gen)
    return outs


@pytest.mark.parametrize("seed", range(6))
def test_coupled_sums_equal_the_dense_reference_draw_for_draw(seed):
    # Random sets (some holding every cluster, some half, some empty in places), integer and
    # fractional columns, batches that do not divide the resamples: the counting and products
    # of _coupled_resample_sums use the same stream as the dense reference, so integer sums
    # are equal bit for bit and fractional ones up to the summation order of the product.
    gen = np.random.default_rng(seed)
    n_universe = int(gen.integers(3, 3_000))
    sets = []
    for _ in range(int(gen.integers(1, 5))):
        size = int(gen.integers((n_universe + 1) // 2, n_universe + 1))
        where = np.sort(gen.choice(n_universe, size=size, replace=False))
        counts = gen.integers(0, 7, size=(size, int(gen.integers(1, 5))))
        counts[gen.random(size) < 0.3] = 0  # workflows with nothing in the cell
        sets.append((where, np.hstack([counts, gen.random((size, 1)) * 5])))
    n = int(gen.integers(1, 700))
    got = stats._coupled_resample_sums(sets, n_universe, n, np.random.default_rng(seed + 10))
    want = _dense_coupled_reference(sets, n_universe, n, np.random.default_rng(seed + 10))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a[:, :-1], b[:, :-1])
        np.testing.assert_allclose(a[:, -1], b[:, -1], rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("elements", [1, 5_000, 1 << 14, 1 << 16])  # one row, a few, many
def test_cached_row_counts_match_one_bincount(elements, monkeypatch):
    from recoverylab.stats import _shared_draws

    monkeypatch.setattr(_shared_draws, "_COUNT_ELEMENTS", elements)
    draws = np.random.default_rng(0).integers(0, 5_000, size=(37, 5_000), dtype=np.int32)
    offsets = (np.arange(37, dtype=np.int64) * 5_000)[:, np.newaxis]
    want = np.bincount((draws + offsets).reshape(-1), minlength=37 * 5_000).reshape(37, 5_000)
    np.testing.assert_array_equal(_shared_draws._row_counts(draws), want)
    into = np.full((37, 5_000), np.nan)
    assert _shared_draws._row_counts(draws, into) is into
    np.testing.assert_array_equal(into, want)


def _product_design(gen):
    """Columns of every kind the exact product tells apart, in random order."""
    n = int(gen.integers(5, 400))
    ints = gen.integers(0, 9, size=(n, 3)).astype(float)
    ints[gen.random(n) < 0.3, 0] = 0.0
    repeats = int(gen.integers(2, 6))
    columns = [
        ints,
        ints[:, :1] * repeats,  # proportional to an integer column (attempts = 3 x states)
        ints[:, 1:2] / repeats,  # a multiple of 1/repeats, proportional too (pass@1)
        gen.integers(0, 7, size=(n, 1)) / 3.0,  # multiples of 1/3, on their own
        gen.random((n, 1)) * 5,  # no small denominator: float64
        np.zeros((n, 1)),  # all zero
        -ints[:, 2:3],  # negative multiple
        np.full((n, 1), 2.0**23),  # integral but too large for float32 sums
    ]
    design = np.hstack(columns)
    return design[:, gen.permutation(design.shape[1])]


@pytest.mark.parametrize("seed", range(8))
def test_exact_product_equals_a_float64_product(seed):
    # Integer columns (also when computed from a proportional one) are bit for bit those of a
    # float64 product; multiples of 1/L and plain floats agree up to the summation order.
    from recoverylab.stats import _shared_draws

    gen = np.random.default_rng(seed)
    design = _product_design(gen)
    counts = gen.multinomial(design.shape[0], np.ones(design.shape[0]) / design.shape[0], 50)
    counts = counts.astype(np.float32)
    rows = np.arange(design.shape[0])
    got = _shared_draws._ExactProduct([(rows, design)], design.shape[0])(counts)[:, :-1]
    want = counts.astype(np.float64) @ design
    integral = (design == np.round(design)).all(axis=0)
    np.testing.assert_array_equal(got[:, integral], want[:, integral])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_exact_product_shares_proportional_columns_and_keeps_floats_double():
    from recoverylab.stats import _shared_draws

    gen = np.random.default_rng(4)
    states = gen.integers(1, 5, size=(200, 1)).astype(float)
    passes = gen.integers(0, 4, size=(200, 1)).astype(float)
    other = gen.random((200, 1))
    design = np.hstack([states, 3 * states, passes, passes / 3, passes / 7 + 1e-9, other])
    product = _shared_draws._ExactProduct([(np.arange(200), design)], 200)
    assert product.single.shape[1] == 3  # states, passes (the rest: multiples) and landed draws
    assert product.double.shape[1] == 2  # not a multiple of 1/L within rounding; random
    assert product.single.dtype == np.float32


@pytest.mark.parametrize("seed", range(6))
def test_corrections_of_all_sets_equal_each_set_corrected_alone(seed):
    # Sets from half to all of the clusters, rows short and over-full, fractional values: the
    # corrections found for all sets at once draw the same stream and sum in the same order as
    # correcting each set on its own, so they are equal bit for bit.
    from recoverylab.stats import _shared_draws

    gen = np.random.default_rng(seed)
    n_universe = int(gen.integers(2, 2_000))
    sets = []
    for _ in range(int(gen.integers(1, 6))):
        size = int(gen.integers((n_universe + 1) // 2, n_universe + 1))
        where = np.sort(gen.choice(n_universe, size=size, replace=False))
        sets.append((where, gen.random((size, int(gen.integers(1, 4)))) * 7))
    rows = int(gen.integers(1, 300))
    draws = gen.integers(0, n_universe, size=(rows, n_universe), dtype=np.int32)
    inside = np.zeros((len(sets), n_universe))
    for i, (where, _) in enumerate(sets):
        inside[i, where] = 1.0
    counts = np.stack([np.bincount(r, minlength=n_universe) for r in draws])
    landed = (counts @ inside.T).astype(np.int64)
    got = _shared_draws._Corrections(sets, n_universe)(draws, landed, np.random.default_rng(seed))
    reference, want = np.random.default_rng(seed), []
    for i, (where, block) in enumerate(sets):
        one = _CoupledSetReference(where, block, n_universe)
        want.append(one.correction(draws, landed[:, i], reference))
    np.testing.assert_array_equal(got, np.hstack(want))


def test_exact_product_of_a_negative_multiple_sums_to_positive_zero():
    # b = -a is computed from a's sum; where no draw hits a nonzero value the sum is +0.0, as
    # a product gives it, never -0.0.
    from recoverylab.stats import _shared_draws

    design = np.array([[0.0, -0.0], [0.0, -0.0], [2.0, -2.0]])
    counts = np.array([[2, 1, 0], [0, 0, 3]], dtype=np.float32)
    got = _shared_draws._ExactProduct([(np.arange(3), design)], 3)(counts)[:, :2]
    assert got.tolist() == [[0.0, 0.0], [6.0, -6.0]]
    assert not np.signbit(got[0]).any()


@pytest.mark.parametrize("seed", range(6))
def test_packed_lanes_equal_float32_columns(seed):
    # Integer columns of every size (fields of 1 to 24 bits, a negative one alone in its lane)
    # packed side by side in float64 lanes give the sums of a float32 product exactly.
    from recoverylab.stats import _exact_product

    gen = np.random.default_rng(seed)
    n = int(gen.integers(2, 3_000))
    largest = gen.choice([1, 3, 20, 255, 2**24 // n - 1], size=int(gen.integers(1, 40)))
    single = np.column_stack([gen.integers(0, m + 1, n) for m in largest]).astype(np.float32)
    if gen.random() < 0.5:
        single[:, 0] = -single[:, 0]
    columns = [(np.arange(n), single[:, j].astype(np.float64)) for j in range(single.shape[1])]
    lanes = _exact_product._Lanes.plan(columns, n)
    if lanes is None:  # too few fields per lane to pay: one lane per column
        lanes = _exact_product._Lanes(columns, n, *_plan_all(single, n))
    assert lanes.packed.shape[1] <= single.shape[1]
    counts = gen.multinomial(n, np.ones(n) / n, size=int(gen.integers(1, 60)))
    # the largest sums a resample can reach: every draw on the largest value of a column
    counts[0] = 0
    counts[0, np.abs(single).argmax(axis=0)[0]] = n
    want = counts.astype(np.float64) @ single.astype(np.float64)
    np.testing.assert_array_equal(lanes.sums(counts.astype(np.float64)).T, want)


def _plan_all(single, n_draws):
    """One lane per column (the plan's shifts and bits for fields that stand alone)."""
    width = single.shape[1]
    bits = np.array([int(n_draws * int(m)).bit_length() for m in np.abs(single).max(axis=0)])
    bits[single.min(axis=0) < 0] = 0
    return np.arange(width), np.zeros(width, dtype=np.int64), bits


def test_exact_product_packs_lanes_when_they_pay():
    from recoverylab.stats import _exact_product

    gen = np.random.default_rng(7)
    design = gen.integers(0, 9, size=(500, 24)).astype(float)
    product = _exact_product._ExactProduct([(np.arange(500), design)], 500)
    assert product._lanes is not None  # 25 columns of 12-13 bits: four per lane
    assert product._lanes.packed.shape[1] == 7
    assert product.counts_dtype == np.float64
    counts = gen.multinomial(500, np.ones(500) / 500, size=30)
    got = product(counts.astype(np.float64))
    np.testing.assert_array_equal(got[:, :-1], counts @ design)
    np.testing.assert_array_equal(got[:, -1], 500.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_percentile_rows_equal_the_interval_row_by_row(seed):
    from recoverylab.stats import _bootstrap, _bootstrap_ratios

    gen = np.random.default_rng(seed)
    dist = gen.normal(size=(int(gen.integers(1, 6)), int(gen.integers(1, 300))))
    dist[gen.random(dist.shape) < gen.choice([0.0, 0.05, 1.0])] = np.nan
    dist[gen.random(dist.shape) < 0.05] = np.inf
    confidence = float(gen.uniform(0.5, 0.999))
    with np.errstate(invalid="ignore"):  # inf - inf between two infinite order statistics
        got = _bootstrap_ratios._percentile_rows(dist, confidence)
        want = [_bootstrap._percentile_interval(row, confidence) for row in dist]
    np.testing.assert_array_equal(got, np.array(want))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_cell_and_position_order_equals_a_sort(seed, repeat):
    # The counting sort over a small cells x clusters table and the sort of large ones give
    # the rows in (cell, position) order, and both find a pair listed twice.
    from recoverylab.stats import _bootstrap_ratios

    gen = np.random.default_rng(seed)
    n_cells, n_universe = int(gen.integers(1, 30)), int(gen.integers(1, 3_000))
    slots = gen.choice(n_cells * n_universe, size=int(gen.integers(1, n_cells * n_universe + 1)))
    slots = np.unique(slots)
    if repeat:
        slots = np.concatenate([slots, slots[gen.integers(0, slots.size, 1)]])
    slots = gen.permutation(slots)
    cell, at = np.divmod(slots, n_universe)
    got = _bootstrap_ratios._by_cell_and_position(cell, at, n_cells, n_universe)
    if repeat:
        assert got is None
    else:
        np.testing.assert_array_equal(got, np.argsort(slots, kind="stable"))


@pytest.mark.parametrize("seed", range(4))
def test_integer_sets_equal_the_dense_reference_bit_for_bit(seed):
    # Sets of integer columns only (corrections gathered and summed in float32, products in
    # packed lanes or float32) and multiples of 1/3: the dense float64 reference draw for draw.
    gen = np.random.default_rng(100 + seed)
    n_universe = int(gen.integers(50, 3_000))
    sets = []
    for _ in range(int(gen.integers(1, 5))):
        size = int(gen.integers((n_universe + 1) // 2, n_universe + 1))
        where = np.sort(gen.choice(n_universe, size=size, replace=False))
        counts = gen.integers(0, 30, size=(size, int(gen.integers(1, 12))))
        counts[gen.random(size) < 0.3] = 0
        sets.append((where, np.hstack([counts, 3 * counts[:, :1], counts[:, -1:] / 3])))
    n = int(gen.integers(1, 600))
    got = stats._coupled_resample_sums(sets, n_universe, n, np.random.default_rng(seed))
    want = _dense_coupled_reference(sets, n_universe, n, np.random.default_rng(seed))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a[:, :-1], b[:, :-1])
        # thirds: the exact sum divided once against a float64 sum of rounded thirds
        np.testing.assert_allclose(a[:, -1], b[:, -1], rtol=1e-15)
        np.testing.assert_array_equal(a[:, -1], np.round(a[:, -1] * 3) / 3)


@pytest.mark.parametrize("seed", range(4))
def test_rows_of_any_columns_equal_the_whole_design(seed):
    # Reading some columns (exact, scaled, float64, all-zero, landed; any order, repeated)
    # gives the bits of the whole design's sums.
    from recoverylab.stats import _exact_product

    gen = np.random.default_rng(seed)
    design = _product_design(gen)
    rows = np.arange(design.shape[0])
    product = _exact_product._ExactProduct([(rows, design)], design.shape[0])
    counts = gen.multinomial(design.shape[0], np.ones(design.shape[0]) / design.shape[0], 20)
    raw = product.raw(counts.astype(product.counts_dtype))
    whole = product.finish(raw)
    pick = gen.integers(0, product.width, size=int(gen.integers(1, 2 * product.width)))
    got = product.rows(raw, pick)
    np.testing.assert_array_equal(got, whole[pick])
    assert (np.signbit(got) == np.signbit(whole[pick])).all()


@pytest.mark.parametrize("seed", range(3))
def test_blocks_in_parts_equal_the_whole_block(seed):
    # A set's block given as its cells' parts side by side (not copied together) gives the
    # same sums, bit for bit, as the block itself.
    gen = np.random.default_rng(seed)
    n_universe = int(gen.integers(20, 800))
    sets, parted = [], []
    for _ in range(int(gen.integers(1, 4))):
        where = np.sort(
            gen.choice(
                n_universe, size=int(gen.integers(n_universe // 2, n_universe + 1)), replace=False
            )
        )
        parts = [
            np.column_stack(
                [gen.integers(0, 9, where.size), gen.random(where.size), np.zeros(where.size)]
            )
            for _ in range(int(gen.integers(1, 4)))
        ]
        sets.append((where, np.hstack(parts)))
        parted.append((where, parts))
    whole = stats._coupled_resample_sums(sets, n_universe, 300, np.random.default_rng(seed))
    split = stats._coupled_resample_sums(parted, n_universe, 300, np.random.default_rng(seed))
    for a, b in zip(whole, split, strict=True):
        np.testing.assert_array_equal(a, b)


def test_corrections_search_further_back_when_the_tail_is_too_short():
    # Rows whose last draws mostly miss the set: the first tail searched holds fewer draws in
    # the set than the surplus, so the search widens; the reference searches on its own.
    from recoverylab.stats import _shared_draws

    gen = np.random.default_rng(0)
    n, rows = 1_000, 9
    where = np.arange(0, n, 2)  # the even clusters
    block = gen.integers(0, 9, size=(where.size, 3)).astype(float)
    in_set = 650  # surplus 150: the first tail holds 34 of them
    draws = np.hstack(
        [
            2 * gen.integers(0, n // 2, size=(rows, in_set)),  # even: in the set
            2 * gen.integers(0, n // 2, size=(rows, n - in_set)) + 1,  # odd: not in it
        ]
    ).astype(np.int32)
    landed = np.full((rows, 1), in_set, dtype=np.int64)
    got = _shared_draws._Corrections([(where, block)], n)(draws, landed, np.random.default_rng(1))
    want = _CoupledSetReference(where, block, n).correction(
        draws, landed[:, 0], np.random.default_rng(1)
    )
    np.testing.assert_array_equal(got, want)
    assert np.all(got == -block[draws[:, in_set - (in_set - where.size) : in_set] // 2].sum(axis=1))
