"""pass^k, flip rate and ICC of repeats (takeover/_reliability.py) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import stats, synth, takeover
from recoverylab._errors import InputError, ParameterError, SchemaError
from recoverylab.engines import ShardedEngine


def all_subsets(outcomes: list[bool], k: int, rule) -> float:
    """Average ``rule`` over every k-subset of the repeats (the definition of both estimators)."""
    subsets = list(itertools.combinations(outcomes, k))
    return sum(rule(s) for s in subsets) / len(subsets)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=9), st.integers(1, 9))
def test_pass_hat_k_and_pass_at_k_equal_enumeration_of_trial_subsets(outcomes, k):
    frame = pl.DataFrame({"n": [len(outcomes)], "c": [sum(outcomes)]})
    hat, at = frame.select(
        takeover.pass_hat_k_expr("n", "c", k).alias("hat"),
        takeover.pass_at_k_expr("n", "c", k).alias("at"),
    ).row(0)
    if len(outcomes) < k:
        assert hat is None
        assert at is None
        return
    assert hat == pytest.approx(all_subsets(outcomes, k, all), abs=1e-12)
    assert at == pytest.approx(all_subsets(outcomes, k, any), abs=1e-12)


def tiny_tables() -> tuple[pl.DataFrame, pl.DataFrame]:
    states = pl.DataFrame(
        {
            "state_id": ["s1", "s2", "s3", "s4"],
            "workflow_id": ["w1", "w1", "w2", "w3"],
            "root_cause_id": ["r1", "r1", "r2", "r3"],
            "depth": [0, 1, 0, 0],
            "replay_ok": [True] * 4,
            "expected_ok": [True] * 4,
        }
    )
    passed = {"s1": [1, 1, 1], "s2": [1, 0, 0], "s3": [0, 0, 0], "s4": [1, 1, 0]}
    rows = [
        {"state_id": s, "agent": "a", "repeat": r, "passed": bool(v)}
        for s, values in passed.items()
        for r, v in enumerate(values)
    ]
    attempts = pl.DataFrame(rows).with_columns(
        pl.col("passed").alias("aware"),
        pl.col("passed").alias("root_cause_fixed"),
        pl.col("passed").alias("derived_fixed"),
    )
    return states, attempts


def test_reliability_by_hand():
    states, attempts = tiny_tables()
    out = takeover.reliability(states, attempts, by=["agent"], k=2, n_resamples=200)
    row = out.row(0, named=True)
    # pass^2 per state: s1 C(3,2)/C(3,2) = 1, s2 0, s3 0, s4 C(2,2)/C(3,2) = 1/3.
    assert row["pass_hat_k"] == pytest.approx((1 + 0 + 0 + 1 / 3) / 4)
    # s2 and s4 have repeats that disagree.
    assert row["flip_rate"] == pytest.approx(0.5)
    groups = [np.array(v, dtype=float) for v in ([1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0])]
    rows = np.array(
        [[g.sum() ** 2 / len(g), g.sum(), (g**2).sum(), len(g), len(g) ** 2, 1] for g in groups]
    )
    assert row["repeat_icc"] == pytest.approx(float(stats.icc_oneway(rows.sum(axis=0))))
    assert row["pass_hat_k_ci_low"] <= row["pass_hat_k"] <= row["pass_hat_k_ci_high"]


def test_reliability_refuses_fewer_repeats_than_k():
    states, attempts = tiny_tables()
    with pytest.raises(ParameterError, match="repeats"):
        takeover.reliability(states, attempts, by=["agent"], k=4)


def test_reliability_eager_and_lazy_agree_and_summary_gains_columns():
    tables = synth.generate("takeover", 25, seed=4)
    s, a = tables["states"], tables["attempts"]
    eager = takeover.reliability(s, a, n_resamples=300)
    lazy = takeover.reliability(pl.LazyFrame(s), pl.LazyFrame(a), n_resamples=300)
    # Float partial sums may add in another order: equal up to rounding.
    assert_frame_equal(eager, lazy, rel_tol=1e-9)
    assert (eager["pass_hat_k"] <= 1).all()
    summary = takeover.summarize(s, a, n_resamples=300, reliability=True)
    appended = [*takeover.RELIABILITY_COLUMNS, *takeover.RELIABILITY_METHOD_COLUMNS]
    assert summary.columns[-len(appended) :] == appended
    # the summary's rates and the reliability's each name their own method and test
    assert {"ci_method", "test"} <= set(summary.columns)
    assert set(summary["reliability_test"]) <= {"exact-binomial", "none"}
    # pass^k never exceeds pass@1, which never exceeds pass@k.
    assert (summary["pass_hat_k"] <= summary["pass_at_1"] + 1e-12).all()
    assert (summary["pass_at_1"] <= summary["pass_at_k"] + 1e-12).all()
    plain = takeover.summarize(s, a, n_resamples=300)
    assert summary.select(plain.columns).equals(plain)
    sharded = takeover.summarize(s, a, n_resamples=300, reliability=True, engine=ShardedEngine(3))
    assert_frame_equal(sharded, summary, rel_tol=1e-9)


def test_any_repeated_trials_table_gives_the_same_numbers():
    from tests.conftest import SAMPLES

    states = pl.read_parquet(SAMPLES / "takeover" / "states.parquet")
    attempts = pl.read_parquet(SAMPLES / "takeover" / "attempts.parquet")
    expected = takeover.reliability(states, attempts, n_resamples=200)
    scored = states.filter("replay_ok", "expected_ok").select("state_id", "workflow_id", "depth")
    trials = attempts.join(scored, on="state_id").select(
        "state_id", "agent", "depth", "workflow_id", "passed"
    )
    got = takeover.repeats_reliability(
        trials.lazy(),
        unit=["state_id", "agent"],
        cluster="workflow_id",
        by=["agent", "depth"],
        n_resamples=200,
    )
    assert_frame_equal(
        got.rename({"units": "attempted_states"}), expected, check_exact=False, rel_tol=1e-12
    )


@pytest.mark.parametrize(
    ("trials", "options", "error", "match"),
    [
        (pl.DataFrame({"t": ["a", "a"], "passed": [True, False]}), {"k": 3}, ParameterError,
         "fewer than k = 3 trials"),
        (pl.DataFrame({"t": ["a", "a"], "passed": [1, 0]}), {"k": 2}, SchemaError, "boolean"),
        (pl.DataFrame({"t": ["a", "a"], "passed": [True, None]}), {"k": 2}, SchemaError, "nulls"),
        (pl.DataFrame({"t": ["a", "a"], "c": ["x", "y"], "passed": [True, True]}),
         {"k": 2, "cluster": "c"}, InputError, "more than one cluster"),
        (pl.DataFrame({"t": ["a"], "passed": [True]}), {"k": 1, "cluster": "zz"},
         ParameterError, "`zz`"),
    ],
)  # fmt: skip
def test_repeats_reliability_errors(trials, options, error, match):
    options = {"unit": ["t"], "cluster": "t", **options}
    with pytest.raises(error, match=match):
        takeover.repeats_reliability(trials, **options)
