"""stats.cluster_bootstrap_ratios: several ratios in many cells from shared cluster draws."""

from __future__ import annotations

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
