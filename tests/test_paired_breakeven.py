"""Break-even failure probability (recoverylab/paired/_breakeven.py) against hand computation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import paired
from recoverylab.engines import ShardedEngine
from tests.conftest import SAMPLES

OUTCOMES = {"rescue": (False, True), "harm": (True, False), "kept": (True, True)}
OUTCOMES["unchanged"] = (False, False)


def forks_from(outcomes: list[str], condition: str = "stale2") -> pl.DataFrame:
    rows = []
    for i, outcome in enumerate(outcomes):
        y0, y1 = OUTCOMES[outcome]
        rows += [
            (f"t{i:03d}", condition, "none", None, y0),
            (f"t{i:03d}", condition, "refresh", 1, y1),
        ]
    return pl.DataFrame(
        rows,
        schema={"task_id": pl.String, "condition": pl.String, "method": pl.String,
                "delay": pl.Int64, "success": pl.Boolean},
        orient="row",
    )  # fmt: skip


def test_break_even_by_hand():
    # 2 rescues, 6 unchanged (8 failing runs), 1 harm, 9 kept (10 succeeding runs).
    forks = forks_from(["rescue"] * 2 + ["unchanged"] * 6 + ["harm"] + ["kept"] * 9)
    row = paired.break_even(forks, n_resamples=500).row(0, named=True)
    assert row["p_fail"] == pytest.approx(8 / 18)
    assert row["rescue_given_fail"] == pytest.approx(2 / 8)
    assert row["harm_given_success"] == pytest.approx(1 / 10)
    assert row["net_effect"] == pytest.approx((2 - 1) / 18)
    assert row["break_even"] == pytest.approx(0.1 / (0.25 + 0.1))
    assert row["break_even_ci_low"] <= row["break_even"] <= row["break_even_ci_high"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(list(OUTCOMES)), min_size=2, max_size=30))
def test_net_effect_is_the_effect_and_p_star_is_where_it_changes_sign(outcomes):
    forks = forks_from(outcomes)
    out = paired.summarize(forks, n_resamples=20, break_even=True).row(0, named=True)
    p, r, d = out["p_fail"], out["rescue_given_fail"], out["harm_given_success"]
    assert out["net_effect"] == pytest.approx(out["effect"])
    if r is not None and d is not None:
        assert p * r - (1 - p) * d == pytest.approx(out["effect"], abs=1e-12)
        if r + d > 0:
            star = out["break_even"]
            assert star == pytest.approx(d / (r + d))
            # Recovering at failure probability p* nets zero; above it, a gain.
            assert star * r - (1 - star) * d == pytest.approx(0, abs=1e-12)
    else:
        assert out["break_even"] is None


def test_summary_columns_are_additive_and_lazy_input_agrees():
    source = SAMPLES / "paired" / "main_forks.parquet"
    plain = paired.summarize(source, n_resamples=200)
    with_be = paired.summarize(pl.scan_parquet(source), n_resamples=200, break_even=True)
    assert with_be.columns[: len(plain.columns)] == plain.columns
    assert with_be.columns[len(plain.columns) :] == list(paired.BREAK_EVEN_COLUMNS)
    assert with_be.select(plain.columns).equals(plain)
    eager = paired.break_even(pl.read_parquet(source), n_resamples=200)
    lazy = paired.break_even(pl.scan_parquet(source), n_resamples=200)
    assert eager.equals(lazy)
    assert np.allclose(with_be["net_effect"], with_be["effect"])


def test_break_even_columns_on_another_engine_equal_polars():
    forks = pl.read_parquet(SAMPLES / "paired" / "main_forks.parquet")
    options = {"break_even": True, "n_resamples": 200}
    sharded = paired.summarize(forks, engine=ShardedEngine(3), **options)
    assert_frame_equal(sharded, paired.summarize(forks, **options))


def test_cli_paired_break_even(cli, tmp_path):
    out = tmp_path / "summary.parquet"
    result = cli("paired", SAMPLES / "paired" / "main_forks.parquet", "--break-even",
                 "--resamples", "100", "--out", out)  # fmt: skip
    assert result.code == 0, result.err
    assert set(paired.BREAK_EVEN_COLUMNS) <= set(pl.read_parquet(out).columns)
