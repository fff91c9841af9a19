"""Tests of recoverylab.takeover._dense_sums and the bootstrap partials it serves.

``dense_group_sums`` must give what a polars group-by gives (sums, distinct non-null counts,
the names carried), or None where its table would be large or its sums inexact; the partials of
``summarize``'s bootstrap summed in the dense table must equal those of the group-by, on tables
with empty cells, workflows without attempts in a cell, rejected states and both restrictions.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import engines, synth, takeover
from recoverylab.takeover import _dense_sums, _stages, _summary
from recoverylab.takeover._dense_sums import dense_group_sums

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def frames(draw: st.DrawFn) -> pl.DataFrame:
    """Rows with two key codes (gaps, repeats), integer and integral float sums, nullable codes."""
    n = draw(st.integers(1, 60))
    top = draw(st.sampled_from((1, 3, 50, 10**4)))
    ints = st.integers(0, top)
    frame = pl.DataFrame(
        {
            "a": draw(st.lists(ints, min_size=n, max_size=n)),
            "b": draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)),
            "x": draw(st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n)),
            "y": draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
            "root": draw(st.lists(st.none() | st.integers(0, 6), min_size=n, max_size=n)),
        },
        schema={"a": pl.UInt32, "b": pl.UInt32, "x": pl.Int64, "y": pl.Int64, "root": pl.UInt32},
    )
    # names that are functions of the keys, with nulls and text
    return frame.with_columns(
        pl.when(pl.col("a") % 3 > 0).then(pl.col("a").cast(pl.String) + "w").alias("name"),
        (pl.col("b") * 2).alias("twice"),
        pl.col("y").cast(pl.Float64).alias("yf"),
    )


def derived(y: pl.Expr, b: pl.Expr) -> pl.Expr:
    """A function of two few-valued columns (null for y = 2: counted as 0)."""
    return pl.when(y != 2).then(y * y * 1_000 + b * 7 + 2**31).cast(pl.Int64).alias("f")


def reference(frame: pl.DataFrame) -> pl.DataFrame:
    distinct = pl.col("root").drop_nulls().n_unique().cast(pl.Int64)
    return frame.group_by("a", "b").agg(
        derived(pl.col("y"), pl.col("b").cast(pl.Int64)).fill_null(0).sum(),
        pl.col("name").first(),
        pl.col("twice").first(),
        pl.col("x").sum(),
        pl.col("y").sum(),
        pl.col("yf").sum().cast(pl.Int64),
        distinct.alias("root"),
    )


@SETTINGS
@given(frames())
def test_dense_sums_equal_a_group_by(frame: pl.DataFrame) -> None:
    got = dense_group_sums(
        frame,
        ["a", "b"],
        sums=["x", "y", "yf"],
        distinct=["root"],
        carry=["name", "twice"],
        derived=lambda rows: rows.select(derived(pl.col("y"), pl.col("b"))),
        derived_from=["y", "b"],
    )
    assert got is not None
    want = reference(frame).drop("a", "b")
    order = ["name", "twice", "x", "y", "yf", "root", "f"]
    assert_frame_equal(got.sort(order), want.select(order).sort(order))


def test_dense_sums_refuse_what_they_cannot_do_exactly() -> None:
    frame = pl.DataFrame(
        {"a": [0, 1, 1], "x": [1, 2, 3], "root": [0, None, 2]},
        schema={"a": pl.UInt32, "x": pl.Int64, "root": pl.UInt32},
    )
    ok = dense_group_sums(frame, ["a"], sums=["x"], distinct=["root"], carry=["a"])
    assert ok is not None
    assert sorted(ok.rows()) == [(0, 1, 1), (1, 5, 1)]
    assert dense_group_sums(frame.head(0), ["a"], sums=["x"]) is None  # no rows
    nulls = frame.with_columns(pl.lit(None, pl.UInt32).alias("a"))
    assert dense_group_sums(nulls, ["a"], sums=["x"]) is None  # a null key
    large = frame.with_columns(pl.lit(2**40, pl.UInt64).alias("a"))
    assert dense_group_sums(large, ["a"], sums=["x"]) is None  # a code beyond a small table
    wide = pl.DataFrame({"a": list(range(300)), "b": list(range(300)), "x": [1] * 300})
    assert dense_group_sums(wide, ["a", "b"], sums=["x"]) is None  # 90,000 slots for 300 rows
    huge = frame.with_columns(pl.lit(2**52, pl.Int64).alias("x"))
    assert dense_group_sums(huge, ["a"], sums=["x"]) is None  # sums could pass 2**53
    far = frame.with_columns(pl.lit(2**61, pl.UInt64).alias("root"))  # pairs past 2**62
    assert dense_group_sums(far, ["a"], sums=["x"], distinct=["root"]) is None


@pytest.mark.parametrize("seed", range(6))
def test_bootstrap_partials_dense_equal_the_group_by(seed: int, monkeypatch) -> None:
    # holes: units dropped (workflows without attempts in a cell, cells without any), rejected
    # states, null and text depths; both restrictions on some seeds
    rng = np.random.default_rng(seed)
    tables = synth.generate("takeover", 10 + 4 * seed, seed=seed)
    states = tables["states"].with_columns(
        pl.Series("replay_ok", rng.random(tables["states"].height) > 0.15),
        # a text state key with nulls (in ``by`` on odd seeds)
        pl.when(pl.col("depth") > seed % 3)
        .then(pl.col("workflow_id").str.slice(0, 3))
        .alias("tag"),
    )
    units = tables["attempts"].select("state_id", "agent").unique()
    kept = units.filter(pl.Series(rng.random(units.height) > 0.3))
    attempts = tables["attempts"].join(kept, on=["state_id", "agent"], how="semi")
    flags = {"common_states": seed in (1, 4), "common_sample": seed in (2, 4)}
    k = 1 + seed % 3  # pass@k parts per distinct (repeats, passes), for k = 1, 2, 3
    if k < 3:  # units of 2 and 3 repeats (a third lose their last): pass@1 in halves and thirds
        short = kept.filter(pl.Series(rng.random(kept.height) < 0.3)).with_columns(
            pl.lit(2, pl.Int64).alias("repeat")
        )
        attempts = attempts.join(short, on=["state_id", "agent", "repeat"], how="anti")
        assert set(attempts.group_by("state_id", "agent").len()["len"]) == {2, 3}
    by = ("agent", "depth", "tag") if seed % 2 else ("agent", "depth")

    def partials() -> pl.DataFrame:
        frames = {"states": states.lazy(), "attempts": attempts.lazy()}
        state = None
        frame, inputs = _stages.scored_shard(frames, state, by=by, k=k, codes=True, **flags)
        out = _summary._partials(frame, list(inputs.by), inputs.unit_keys, k)
        return out.collect() if isinstance(out, pl.LazyFrame) else out

    used: list[bool] = []
    real = _dense_sums.dense_group_sums

    def spy(*args: object, **kwargs: object) -> pl.DataFrame | None:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        used.append(out is not None)
        return out

    monkeypatch.setattr(_summary, "dense_group_sums", spy)
    dense = partials()
    assert used == [True]
    monkeypatch.setattr(_summary, "_dense_partials", lambda *_: None)
    grouped = partials()
    keys = _stages.cluster_keys(by)
    assert dense.height > 0
    assert_frame_equal(dense.sort(keys, nulls_last=False), grouped.sort(keys, nulls_last=False))
    if seed < 2:  # and the summaries, on the whole tables and on shards
        whole = takeover.summarize(states, attempts, k=k, n_resamples=50, **flags)
        monkeypatch.undo()
        assert_frame_equal(
            takeover.summarize(states, attempts, k=k, n_resamples=50, **flags), whole
        )
        sharded = takeover.summarize(
            states, attempts, k=k, n_resamples=50, engine=engines.ShardedEngine(k=3), **flags
        )
        assert_frame_equal(sharded, whole)


def test_dense_partials_used_on_the_default_path(monkeypatch) -> None:
    # the dense sums answer for summarize's bootstrap (a test of the path, not of the numbers)
    calls = []
    real = _dense_sums.dense_group_sums

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(_summary, "dense_group_sums", spy)
    tables = synth.generate("takeover", 8, seed=3)
    takeover.summarize(tables["states"], tables["attempts"], n_resamples=20)
    assert calls == [True]
