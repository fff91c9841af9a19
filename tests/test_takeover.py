"""Tests of recoverylab.takeover (CUA-Recovery protocol, ARCHITECTURE §3.4).

The hand example (``states_df`` / ``attempts_df``) has three workflows, four root causes and six
states; agent ``a`` attempts s1, s2, s3, s6 and the rejected s4, agent ``b`` attempts s1, s2, s3.
Every expected number below is worked out by hand in the comments.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from scipy import stats as scipy_stats

from recoverylab import engines, stats, synth, takeover
from recoverylab._errors import InputError, ParameterError, SchemaError
from tests.conftest import SAMPLES

TAKEOVER = SAMPLES / "takeover"

# --------------------------------------------------------------------------------------------
# Hand example
# --------------------------------------------------------------------------------------------

STATES = {
    "state_id": ["s1", "s2", "s3", "s4", "s5", "s6"],
    "workflow_id": ["w1", "w1", "w2", "w2", "w2", "w3"],
    "root_cause_id": ["r1", "r1", "r2", "r2", "r3", "r4"],
    "depth": [0, 5, 0, 5, 0, 5],
    "replay_ok": [True, True, True, False, True, True],
    "expected_ok": [True, True, True, True, False, True],
}

# (state, agent) -> outcomes of repeats 0, 1, 2 as aware/fixed/derived/passed letters.
OUTCOMES = {
    ("s1", "a"): ("TTTT", "TTFF", "FFFF"),
    ("s3", "a"): ("FTTT", "FFFF", "FFFF"),
    ("s2", "a"): ("TFFF", "TTTF", "TTTT"),
    ("s6", "a"): ("FFFF", "FFFF", "FFFF"),
    ("s4", "a"): ("TTTT", "TTTT", "TTTT"),  # rejected state: counted, never scored
    ("s1", "b"): ("FFFF", "FFFF", "FFFF"),
    ("s2", "b"): ("TTTT", "TTTT", "TTTT"),
    ("s3", "b"): ("FFFF", "TFFF", "FFFF"),
}


def attempts_rows(outcomes: dict[tuple[str, str], tuple[str, ...]]) -> pl.DataFrame:
    rows = []
    for (state, agent), codes in outcomes.items():
        for repeat, code in enumerate(codes):
            flags = [letter == "T" for letter in code]
            rows.append(
                {
                    "state_id": state,
                    "agent": agent,
                    "repeat": repeat,
                    **dict(zip(takeover.FLAGS, flags, strict=True)),
                }
            )
    return pl.DataFrame(rows)


@pytest.fixture
def states_df() -> pl.DataFrame:
    return pl.DataFrame(STATES)


@pytest.fixture
def attempts_df() -> pl.DataFrame:
    return attempts_rows(OUTCOMES)


def row(frame: pl.DataFrame, **keys: object) -> dict[str, object]:
    hit = frame.filter(*(pl.col(k) == v for k, v in keys.items()))
    assert hit.height == 1, hit
    return hit.row(0, named=True)


@pytest.fixture(scope="module")
def sample() -> dict[str, pl.DataFrame]:
    return {
        name: pl.read_parquet(TAKEOVER / f"{name}.parquet")
        for name in ("states", "attempts", "failures", "mutations")
    }


# --------------------------------------------------------------------------------------------
# pass@k
# --------------------------------------------------------------------------------------------


def pass_at_k_values(n: list[int], c: list[int], k: int) -> list[float | None]:
    frame = pl.DataFrame({"n": n, "c": c})
    return frame.select(takeover.pass_at_k_expr("n", "c", k)).to_series().to_list()


def test_pass_at_k_equals_the_closed_form() -> None:
    cases = [(n, c, k) for n in range(1, 11) for c in range(n + 1) for k in range(1, n + 1)]
    for k in range(1, 11):
        subset = [(n, c) for n, c, kk in cases if kk == k]
        got = pass_at_k_values([n for n, _ in subset], [c for _, c in subset], k)
        for (n, c), value in zip(subset, got, strict=True):
            expected = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
            assert value == pytest.approx(float(expected), abs=1e-12), (n, c, k)


def test_pass_at_k_is_any_of_k_when_n_equals_k() -> None:
    for k in range(1, 8):
        got = pass_at_k_values([k] * (k + 1), list(range(k + 1)), k)
        assert got == [0.0] + [1.0] * k  # exactly, not approximately


def test_pass_at_k_matches_brute_force_over_all_k_subsets() -> None:
    rng = np.random.default_rng(7)
    for n in range(1, 8):
        for k in range(1, n + 1):
            for _ in range(5):
                outcomes = rng.random(n) < 0.4
                subsets = list(itertools.combinations(range(n), k))
                brute = sum(outcomes[list(s)].any() for s in subsets) / len(subsets)
                got = pass_at_k_values([n], [int(outcomes.sum())], k)[0]
                assert got == pytest.approx(brute, abs=1e-12), (n, k, outcomes)


def test_pass_at_k_is_null_when_there_are_fewer_than_k_repeats() -> None:
    assert pass_at_k_values([2, 3], [1, 1], 3) == [None, 1.0]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 25), data=st.data())
def test_pass_at_k_is_a_probability_monotone_in_k_and_c(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    frame = pl.DataFrame({"n": [n, n], "c": [c, min(c + 1, n)]})
    values = frame.select(
        takeover.pass_at_k_expr("n", "c", k).alias(str(k)) for k in range(1, n + 1)
    ).to_numpy()  # rows: c, c + 1; columns: k = 1..n
    assert ((values >= 0.0) & (values <= 1.0)).all()
    assert (values[0] <= values[1] + 1e-15).all()  # more passes, higher pass@k
    assert (np.diff(values[0]) >= -1e-15).all()  # larger k, higher pass@k


def test_summarize_pass_at_k_with_more_repeats_than_k_is_the_unbiased_estimator() -> None:
    states = pl.DataFrame({**{k: v[:2] for k, v in STATES.items()}})
    passes = {"s1": [True, False, False, False, True], "s2": [False] * 4 + [True]}
    attempts = pl.DataFrame(
        [
            {
                "state_id": s,
                "agent": "a",
                "repeat": r,
                "aware": False,
                "root_cause_fixed": p,
                "derived_fixed": p,
                "passed": p,
            }
            for s, flags in passes.items()
            for r, p in enumerate(flags)
        ]
    )
    out = takeover.summarize(states, attempts, by=("agent",), k=3, interval="wilson")
    # s1: n=5, c=2 -> 1 - C(3,3)/C(5,3) = 0.9; s2: n=5, c=1 -> 1 - C(4,3)/C(5,3) = 0.6
    assert out["pass_at_k"][0] == pytest.approx((0.9 + 0.6) / 2)
    assert out["pass_at_1"][0] == pytest.approx((2 / 5 + 1 / 5) / 2)
    brute = np.mean(
        [
            np.mean([any(f[i] for i in s) for s in itertools.combinations(range(5), 3)])
            for f in passes.values()
        ]
    )
    assert out["pass_at_k"][0] == pytest.approx(brute)


def test_k_larger_than_the_repeats_is_an_error_naming_the_units(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    with pytest.raises(ParameterError) as info:
        takeover.summarize(states_df, attempts_df, k=4)
    assert str(info.value) == (
        "parameter `k` is 4 but 7 (state_id, agent) units on eligible states have fewer "
        "repeats (state_id/agent s1/a, s1/b, s2/a, s2/b, s3/a and 2 more; fewest: 3); pass@k "
        "needs at least k repeats of every scored unit. Hint: lower `k` to 3 or drop those units."
    )


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_k_must_be_a_positive_integer(
    k: object, states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    with pytest.raises(ParameterError, match=r"^parameter `k` is .*; it must be a positive"):
        takeover.summarize(states_df, attempts_df, k=k)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# summarize: hand example
# --------------------------------------------------------------------------------------------


def test_summarize_hand_example(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame, frame_kind: Callable
) -> None:
    out = takeover.summarize(frame_kind(states_df), frame_kind(attempts_df), interval="wilson", k=3)
    assert isinstance(out, pl.DataFrame)
    assert out.select("agent", "depth").rows() == [("a", 0), ("a", 5), ("b", 0), ("b", 5)]

    a0 = row(out, agent="a", depth=0)
    # depth 0: s1, s3 eligible, s5 rejected (missing expected values)
    assert (a0["eligible_states"], a0["rejected_states"]) == (2, 1)
    assert (a0["rejected_replay_mismatch"], a0["rejected_missing_expected"]) == (0, 1)
    assert (a0["attempted_states"], a0["attempts"], a0["workflows"], a0["root_causes"]) == (
        2,
        6,
        2,
        2,
    )
    assert a0["excluded_attempts"] == 0
    assert a0["ear"] == pytest.approx(2 / 6)
    assert a0["aware_rate"] == a0["ear"]
    assert a0["pass_at_1"] == pytest.approx(1 / 3)
    assert a0["pass_at_k"] == 1.0  # both states passed at least once in 3
    assert (a0["n_aware"], a0["n_fixed"], a0["n_derived"], a0["n_passed"]) == (2, 3, 2, 2)
    assert a0["fixed_rate"] == pytest.approx(3 / 6)
    assert a0["derived_rate"] == pytest.approx(2 / 6)
    assert a0["pass_rate"] == pytest.approx(2 / 6)
    # funnel: aware (2) -> aware & fixed (2) -> & derived (1) -> & passed (1)
    assert (a0["aware_fixed"], a0["aware_fixed_derived"], a0["aware_fixed_derived_passed"]) == (
        2,
        1,
        1,
    )
    assert a0["fixed_given_aware_rate"] == 1.0
    assert a0["derived_given_fixed_rate"] == 0.5
    assert a0["pass_given_derived_rate"] == 1.0

    a5 = row(out, agent="a", depth=5)
    # depth 5: s2, s6 eligible, s4 rejected (replay mismatch) and its 3 attempts excluded
    assert (a5["eligible_states"], a5["rejected_states"], a5["rejected_replay_mismatch"]) == (
        2,
        1,
        1,
    )
    assert (a5["attempted_states"], a5["attempts"], a5["excluded_attempts"]) == (2, 6, 3)
    assert a5["workflows"] == 2  # w1 and w3; w2 had only the rejected state
    assert a5["ear"] == pytest.approx(3 / 6)
    assert a5["pass_at_1"] == pytest.approx((1 / 3 + 0) / 2)
    assert a5["pass_at_k"] == pytest.approx(0.5)
    assert a5["fixed_given_aware_rate"] == pytest.approx(2 / 3)
    assert a5["derived_given_fixed_rate"] == 1.0
    assert a5["pass_given_derived_rate"] == pytest.approx(1 / 2)

    b0 = row(out, agent="b", depth=0)
    assert b0["ear"] == pytest.approx(1 / 6)
    assert b0["pass_at_k"] == 0.0
    assert b0["fixed_given_aware_rate"] == 0.0
    # nobody reached "aware and fixed": the next layers have no denominator -> null, not 0
    assert b0["aware_fixed"] == 0
    assert b0["derived_given_fixed_rate"] is None
    assert b0["pass_given_derived_rate"] is None
    assert b0["derived_given_fixed_rate_ci_low"] is None

    b5 = row(out, agent="b", depth=5)
    assert (b5["attempted_states"], b5["eligible_states"]) == (1, 2)  # b never tried s6
    assert b5["pass_at_k"] == 1.0


def test_summarize_wilson_intervals_match_stats(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    out = takeover.summarize(states_df, attempts_df, interval="wilson", confidence=0.9)
    a0 = row(out, agent="a", depth=0)
    ear = stats.wilson_interval(2, 6, 0.9)
    assert (a0["ear_ci_low"], a0["ear_ci_high"]) == pytest.approx((ear.low, ear.high))
    assert (a0["aware_rate_ci_low"], a0["aware_rate_ci_high"]) == pytest.approx((ear.low, ear.high))
    cond = stats.wilson_interval(1, 2, 0.9)
    assert (a0["derived_given_fixed_rate_ci_low"], a0["derived_given_fixed_rate_ci_high"]) == (
        pytest.approx((cond.low, cond.high))
    )


def test_summarize_auto_is_korn_graubard_over_workflows(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    out = takeover.summarize(states_df, attempts_df, n_resamples=500, seed=11)
    a0 = row(out, agent="a", depth=0)
    # two workflows: auto never bootstraps; EAR of (a, 0) is w1 2 of 3 aware, w2 0 of 3
    assert (a0["ci_method"], a0["test"]) == ("korn-graubard", "exact-binomial")
    expected = stats.rate_interval([2, 0], [3, 3])
    assert (a0["ear_ci_low"], a0["ear_ci_high"]) == pytest.approx(
        (expected.low, expected.high), rel=1e-12
    )
    assert a0["ear_ci_high"] > a0["ear_ci_low"]


def test_summarize_auto_bootstraps_only_well_populated_rows() -> None:
    tables = synth.generate("takeover", 400, seed=2)
    out = takeover.summarize(tables["states"], tables["attempts"], n_resamples=300)
    methods = dict(out.group_by("ci_method").len().rows())
    assert set(methods) <= {"korn-graubard", "percentile"}
    assert methods.get("percentile", 0) > 0  # 400 workflows: some rows are well populated
    assert methods.get("korn-graubard", 0) > 0  # the deep, thin rows are not
    tests = dict(out.select("ci_method", "test").unique().rows())
    assert tests == {m: stats.RATE_TESTS[m] for m in methods}
    for name, _, _ in takeover.RATES:
        held = out.filter(pl.col(name).is_not_null()).select(
            (pl.col(f"{name}_ci_low") <= pl.col(name) + 1e-12)
            & (pl.col(name) <= pl.col(f"{name}_ci_high") + 1e-12)
        )
        assert held.to_series().all(), name


def test_summarize_bootstrap_resamples_workflows_per_cell_and_rate(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    out = takeover.summarize(
        states_df, attempts_df, n_resamples=500, seed=11, ci_method="percentile"
    )
    a0 = row(out, agent="a", depth=0)
    assert (a0["ci_method"], a0["test"]) == ("percentile", "none")
    # EAR of (a, 0): workflow w1 has 2 aware of 3 attempts, w2 has 0 of 3.
    expected = stats.bootstrap_types(
        [[0, 3], [2, 3]], [1, 1], n_resamples=500, rng=stats.cell_rng(11, ("a", 0, "ear"))
    )
    assert (a0["ear_ci_low"], a0["ear_ci_high"]) == (expected.ci_low, expected.ci_high)
    for column in out.columns:
        if column.endswith("_ci_low"):
            rate = column.removesuffix("_ci_low")
            ok = out.filter(pl.col(rate).is_not_null()).select(
                (pl.col(column) <= pl.col(rate) + 1e-12)
                & (pl.col(rate) <= pl.col(f"{rate}_ci_high") + 1e-12)
            )
            assert ok.to_series().all(), column
    again = takeover.summarize(
        states_df, attempts_df, n_resamples=500, seed=11, ci_method="percentile"
    )
    assert out.equals(again)


def test_summarize_bca_intervals(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    out = takeover.summarize(states_df, attempts_df, n_resamples=300, ci_method="bca")
    assert out["ear_ci_low"].null_count() == 0


def test_common_states_keeps_states_every_agent_attempted(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    out = takeover.summarize(states_df, attempts_df, common_states=True, interval="wilson")
    a5 = row(out, agent="a", depth=5)
    # s6 was attempted by a only
    assert (a5["attempted_states"], a5["excluded_not_common_state"]) == (1, 1)
    assert a5["pass_at_k"] == 1.0
    assert a5["eligible_states"] == 2  # the slice's own count is unchanged
    assert out.group_by("depth").agg(pl.col("attempted_states").n_unique())[
        "attempted_states"
    ].to_list() == [1, 1]


def test_common_sample_keeps_root_causes_scored_at_every_depth(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    out = takeover.summarize(states_df, attempts_df, common_sample=True, interval="wilson")
    # per agent only r1 (s1 at depth 0, s2 at depth 5) is scored at both depths
    assert out.select("agent", "depth", "attempted_states", "root_causes").rows() == [
        ("a", 0, 1, 1),
        ("a", 5, 1, 1),
        ("b", 0, 1, 1),
        ("b", 5, 1, 1),
    ]
    assert row(out, agent="a", depth=0)["excluded_not_common_sample"] == 1  # s3 (r2)
    assert row(out, agent="a", depth=5)["excluded_not_common_sample"] == 1  # s6 (r4)
    units = takeover.score(states_df, attempts_df, common_sample=True).collect()
    kept = units.filter(pl.col("excluded").is_null())
    assert sorted(kept["state_id"].unique().to_list()) == ["s1", "s2"]
    assert set(units["excluded"].drop_nulls().to_list()) == {
        "replay_mismatch",
        "not_common_sample",
    }


def test_score_is_lazy_for_every_input(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    lazy = takeover.score(states_df.lazy(), attempts_df.lazy())
    assert isinstance(lazy, pl.LazyFrame)
    from_frames = takeover.score(states_df, attempts_df)
    assert isinstance(from_frames, pl.LazyFrame)
    eager = from_frames.collect()
    key = ["state_id", "agent"]
    assert lazy.collect().sort(key).equals(eager.sort(key))
    s4 = eager.filter(pl.col("state_id") == "s4")
    assert s4["excluded"].to_list() == ["replay_mismatch"]


def test_attempt_level_keys_split_units(states_df: pl.DataFrame) -> None:
    base = attempts_rows({("s1", "a"): ("TTTT", "FFFF", "FFFF")})
    attempts = pl.concat(
        [
            base.with_columns(pl.lit(50).alias("budget")),
            base.with_columns(pl.lit(100).alias("budget"), pl.lit(False).alias("passed")),
        ]
    )
    out = takeover.summarize(
        states_df, attempts, by=("agent", "budget", "depth"), interval="wilson"
    )
    assert out.select("budget", "pass_at_k").rows() == [(50, 1.0), (100, 0.0)]
    with pytest.raises(SchemaError, match="each \\(state_id, agent, repeat\\) must be unique"):
        takeover.summarize(states_df, attempts, interval="wilson")


def test_grouping_by_a_state_column_and_without_depth(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    states = states_df.with_columns(
        pl.Series("source_agent", ["a", "a", "b", "b", "b", "a"], dtype=pl.Categorical)
    )
    out = takeover.summarize(states, attempts_df, by=("agent", "source_agent"), interval="wilson")
    assert out.select("agent", pl.col("source_agent").cast(pl.String)).rows() == [
        ("a", "a"),
        ("a", "b"),
        ("b", "a"),
        ("b", "b"),
    ]
    aa = row(out, agent="a", source_agent="a")
    # states of source a: s1, s2, s6 eligible; a attempted all three
    assert (aa["eligible_states"], aa["attempted_states"]) == (3, 3)
    ab = row(out, agent="a", source_agent="b")
    # s3 eligible, s4 replay mismatch, s5 missing expected
    assert (ab["eligible_states"], ab["rejected_states"], ab["excluded_attempts"]) == (1, 2, 3)


def test_grouping_by_the_cluster_itself(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    out = takeover.summarize(states_df, attempts_df, by=("agent", "workflow_id"), n_resamples=50)
    assert out.select("agent", "workflow_id", "attempted_states", "workflows").rows() == [
        ("a", "w1", 2, 1),
        ("a", "w2", 1, 1),
        ("a", "w3", 1, 1),
        ("b", "w1", 2, 1),
        ("b", "w2", 1, 1),
    ]
    compared = takeover.compare_agents(
        states_df, attempts_df, "a", "b", by=("workflow_id",), n_resamples=50
    )
    assert compared.select("workflow_id", "common_states", "only_a_states").rows() == [
        ("w1", 2, 0),
        ("w2", 1, 0),
        ("w3", 0, 1),
    ]


# --------------------------------------------------------------------------------------------
# Acceptance on the shipped sample
# --------------------------------------------------------------------------------------------


def test_every_depth_row_shows_its_own_denominator(sample: dict[str, pl.DataFrame]) -> None:
    out = takeover.summarize(sample["states"], sample["attempts"], interval="wilson")
    slices = takeover.eligibility(sample["states"]).collect()
    joined = out.join(slices, on="depth", suffix="_slice")
    assert (joined["eligible_states"] == joined["eligible_states_slice"]).all()
    assert (joined["rejected_states"] == joined["rejected_states_slice"]).all()
    units = takeover.score(sample["states"], sample["attempts"]).collect()
    counts = (
        units.filter(pl.col("excluded").is_null())
        .group_by("agent", "depth")
        .agg(pl.len().alias("n"), pl.col("repeats").sum().alias("attempts"))
    )
    check = out.join(counts, on=["agent", "depth"])
    assert check.height == out.height == 36
    assert (check["attempted_states"] == check["n"]).all()
    assert (check["attempts"] == check["attempts_right"]).all()
    # deeper depths have fewer eligible states, so the denominators differ by depth
    eligible = slices.sort("depth")["eligible_states"].to_list()
    assert eligible == sorted(eligible, reverse=True)
    assert len(set(eligible)) == 6


def test_common_sample_yields_the_same_root_causes_at_every_depth(
    sample: dict[str, pl.DataFrame],
) -> None:
    units = takeover.score(sample["states"], sample["attempts"], common_sample=True).collect()
    kept = units.filter(pl.col("excluded").is_null())
    per_depth = kept.group_by("agent", "depth").agg(pl.col("root_cause_id").unique().sort())
    for agent, group in per_depth.group_by("agent"):
        sets = {tuple(x) for x in group["root_cause_id"].to_list()}
        assert group.height == 6, agent
        assert len(sets) == 1, agent
    out = takeover.summarize(
        sample["states"], sample["attempts"], common_sample=True, interval="wilson"
    )
    spread = out.group_by("agent").agg(
        pl.col("root_causes").n_unique().alias("distinct"), pl.col("root_causes").first()
    )
    assert (spread["distinct"] == 1).all()
    full = takeover.summarize(sample["states"], sample["attempts"], interval="wilson")
    both = out.join(full, on=["agent", "depth"], suffix="_full")
    assert (
        both["attempted_states"] + both["excluded_not_common_sample"]
        == both["attempted_states_full"]
    ).all()
    assert full.group_by("agent").agg(pl.col("root_causes").n_unique())["root_causes"].min() > 1


def test_common_states_gives_every_agent_the_same_states(
    sample: dict[str, pl.DataFrame],
) -> None:
    out = takeover.summarize(
        sample["states"], sample["attempts"], common_states=True, interval="wilson"
    )
    per_depth = out.group_by("depth").agg(pl.col("attempted_states").n_unique())
    assert (per_depth["attempted_states"] == 1).all()
    assert out["excluded_not_common_state"].sum() > 0
    units = takeover.score(sample["states"], sample["attempts"], common_states=True).collect()
    kept = units.filter(pl.col("excluded").is_null())
    assert (kept.group_by("state_id").agg(pl.len())["len"] == 6).all()


def test_latency_reports_602_and_619_as_separate_denominators(
    sample: dict[str, pl.DataFrame],
) -> None:
    out = takeover.latency(sample["failures"]).collect()
    got = out.row(0, named=True)
    assert (got["annotated"], got["surfaced"], got["never_surfaced"]) == (619, 602, 17)
    assert got["at_final_step"] == 361
    assert got["final_step_rate"] == pytest.approx(361 / 602)  # 60.0 % of the surfaced
    assert round(got["final_step_rate"] * 100, 1) == 60.0
    assert got["final_step_annotated_rate"] == pytest.approx(361 / 619)
    assert got["surfaced_rate"] == pytest.approx(602 / 619)
    assert got["median_latency"] == 17.0
    # every failure is its own cluster: the rates' interval is exactly Clopper–Pearson
    ci = scipy_stats.binomtest(361, 602).proportion_ci(0.95, method="exact")
    assert (got["final_step_rate_ci_low"], got["final_step_rate_ci_high"]) == pytest.approx(
        (ci.low, ci.high), rel=1e-9
    )
    assert (got["ci_method"], got["test"]) == ("korn-graubard", "exact-binomial")


def test_awareness_split_on_sample_is_labelled_an_association(
    sample: dict[str, pl.DataFrame],
) -> None:
    out = takeover.awareness_split(sample["states"], sample["attempts"])
    assert set(out["interpretation"]) == {takeover.INTERPRETATION}
    assert takeover.INTERPRETATION == "association, not an effect"
    macro = out.filter(pl.col("scope") == "macro")
    agents = out.filter(pl.col("scope") == "agent")
    assert macro.height == 1
    assert agents.height == 6
    assert macro["aware_pass_rate"][0] == pytest.approx(agents["aware_pass_rate"].mean())
    assert macro["unaware_pass_rate"][0] == pytest.approx(agents["unaware_pass_rate"].mean())


# --------------------------------------------------------------------------------------------
# compare_agents
# --------------------------------------------------------------------------------------------


def test_compare_agents_hand_example(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame, frame_kind: Callable
) -> None:
    out = takeover.compare_agents(
        frame_kind(states_df), frame_kind(attempts_df), "a", "b", n_resamples=400, seed=3
    )
    got = out.row(0, named=True)
    # common states s1, s2, s3: a passes all (pass@3 = 1), b only s2
    assert (got["common_states"], got["workflows"], got["root_causes"]) == (3, 2, 2)
    assert (got["only_a_states"], got["only_b_states"]) == (1, 0)  # s6
    assert got["pass_at_k_a"] == 1.0
    assert got["pass_at_k_b"] == pytest.approx(1 / 3)
    assert got["difference"] == pytest.approx(2 / 3)
    assert (got["a_better_states"], got["b_better_states"]) == (2, 0)
    # per-workflow summed differences: w1 (1+1)-(0+1) = 1, w2 1-0 = 1
    test = stats.sign_flip_test([1, 1])
    assert (got["p_value"], got["p_method"]) == (test.p_value, test.method)
    assert got["p_value"] == 0.5
    boot = stats.bootstrap_types(
        [[2, 2, 1, 2], [1, 1, 0, 1]],
        [1, 1],
        stats.ratio_difference,
        n_resamples=400,
        rng=stats.cell_rng(3, (0,)),
    )
    assert (got["ci_low"], got["ci_high"]) == (boot.ci_low, boot.ci_high)
    assert (got["a"], got["b"], got["k"]) == ("a", "b", 3)


def test_compare_agents_by_depth(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    out = takeover.compare_agents(states_df, attempts_df, "a", "b", by=("depth",))
    assert out.select(
        "depth", "common_states", "only_a_states", "difference", "p_value"
    ).rows() == [
        (0, 2, 0, 1.0, 0.5),
        (5, 1, 1, 0.0, 1.0),
    ]


def test_compare_agents_on_sample_is_paired(sample: dict[str, pl.DataFrame]) -> None:
    out = takeover.compare_agents(
        sample["states"], sample["attempts"], "agent_a", "agent_b", by=("depth",), n_resamples=200
    )
    summary = takeover.summarize(
        sample["states"], sample["attempts"], common_states=True, interval="wilson"
    )
    assert out.height == 6
    assert (
        out["common_states"] >= summary.filter(pl.col("agent") == "agent_a")["attempted_states"]
    ).all()
    assert (out["p_method"] == "exact-convolution").all()
    assert ((out["ci_low"] <= out["difference"]) & (out["difference"] <= out["ci_high"])).all()


def test_compare_agents_alternative_and_adjust():
    from recoverylab import stats, synth, takeover

    tables = synth.generate("takeover", 40, seed=2)
    two = takeover.compare_agents(
        tables["states"], tables["attempts"], "agent_a", "agent_b", n_resamples=300
    )
    less = takeover.compare_agents(
        tables["states"],
        tables["attempts"],
        "agent_a",
        "agent_b",
        by=("depth",),
        n_resamples=300,
        alternative="less",
        adjust="holm",
    )
    assert two["p_value"].item() <= 1.0
    assert (less["ci_low"] == -1.0).all()
    assert less["p_adjusted"].to_list() == pytest.approx(
        stats.adjust_p_values(less["p_value"].to_numpy(), "holm").tolist()
    )
    with pytest.raises(ParameterError, match=r"parameter `alternative` is 'both'"):
        takeover.compare_agents(
            tables["states"], tables["attempts"], "agent_a", "agent_b", alternative="both"
        )


@pytest.mark.parametrize(
    ("a", "b", "by", "message"),
    [
        ("a", "a", (), "parameters `a` and `b` are both 'a'; compare two agents."),
        (
            "a",
            "z",
            (),
            "parameter `b` is 'z', which is not an agent in `attempts` (agents: a, b).",
        ),
        (
            "a",
            "b",
            ("agent",),
            "parameter `by` contains `agent`; compare_agents compares two agents within each "
            "cell, so `agent` cannot be a cell key.",
        ),
    ],
)
def test_compare_agents_errors(
    states_df: pl.DataFrame,
    attempts_df: pl.DataFrame,
    a: str,
    b: str,
    by: tuple[str, ...],
    message: str,
) -> None:
    with pytest.raises(ParameterError) as info:
        takeover.compare_agents(states_df, attempts_df, a, b, by=by)
    assert str(info.value) == message


def test_compare_agents_with_common_sample(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    out = takeover.compare_agents(
        states_df, attempts_df, "a", "b", by=("depth",), common_sample=True
    )
    # paired states: s1, s3 (depth 0), s2 (depth 5); only r1 is paired at both depths
    assert out.select("depth", "common_states", "excluded_not_common_sample").rows() == [
        (0, 1, 1),
        (5, 1, 0),
    ]


# --------------------------------------------------------------------------------------------
# awareness_split
# --------------------------------------------------------------------------------------------


def test_awareness_split_hand_example(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame, frame_kind: Callable
) -> None:
    result = takeover.awareness_split(frame_kind(states_df), frame_kind(attempts_df))
    out = result.collect() if isinstance(result, pl.LazyFrame) else result
    assert out["scope"].to_list() == ["agent", "agent", "macro"]
    a = row(out, scope="agent", agent="a")
    # a: 12 scored attempts, 5 aware (2 passed), 7 unaware (1 passed)
    assert (a["aware_attempts"], a["aware_passed"], a["unaware_attempts"]) == (5, 2, 7)
    assert a["aware_pass_rate"] == pytest.approx(2 / 5)
    assert a["unaware_pass_rate"] == pytest.approx(1 / 7)
    b = row(out, scope="agent", agent="b")
    assert b["aware_pass_rate"] == pytest.approx(3 / 4)
    assert b["unaware_pass_rate"] == 0.0
    macro = out.filter(pl.col("scope") == "macro").row(0, named=True)
    assert macro["agent"] is None
    assert macro["agents"] == 2
    assert macro["aware_pass_rate"] == pytest.approx((2 / 5 + 3 / 4) / 2)
    assert macro["unaware_pass_rate"] == pytest.approx((1 / 7 + 0) / 2)
    assert macro["difference"] == pytest.approx(((2 / 5 - 1 / 7) + 3 / 4) / 2)
    assert macro["aware_pass_rate_ci_low"] is None
    assert set(out["interpretation"]) == {"association, not an effect"}


def test_awareness_split_macro_skips_agents_without_both_kinds(states_df: pl.DataFrame) -> None:
    attempts = attempts_rows(
        {("s1", "a"): ("TFFT", "FFFF", "FFFF"), ("s1", "b"): ("TFFT", "TFFF", "TFFF")}
    )
    out = takeover.awareness_split(states_df, attempts, by=("agent", "depth"))
    b = row(out, scope="agent", agent="b")
    assert b["unaware_attempts"] == 0
    assert b["unaware_pass_rate"] is None  # no data -> null, never 0
    macro = out.filter(pl.col("scope") == "macro").row(0, named=True)
    assert (macro["agents"], macro["aware_pass_rate"]) == (1, 1.0)
    assert macro["depth"] == 0


# --------------------------------------------------------------------------------------------
# latency, leakage, verifier_gate
# --------------------------------------------------------------------------------------------

FAILURES = {
    "root_cause_id": ["r1", "r2", "r3", "r4"],
    "root_cause_step": [2, 5, 1, 3],
    "surfaced_step": [10, None, 4, 30],
    "final_step": [10, 30, 9, 30],
    "source_agent": ["a", "a", "b", "b"],
}


def test_latency_hand_example(frame_kind: Callable) -> None:
    result = takeover.latency(frame_kind(pl.DataFrame(FAILURES))).collect()
    out = result.collect() if isinstance(result, pl.LazyFrame) else result
    got = out.row(0, named=True)
    # latencies of the surfaced: 8, 3, 27 -> median 8; at final step: r1 and r4
    assert (got["annotated"], got["surfaced"], got["never_surfaced"]) == (4, 3, 1)
    assert got["median_latency"] == 8.0
    assert got["mean_latency"] == pytest.approx(38 / 3)
    assert got["at_final_step"] == 2
    assert got["final_step_rate"] == pytest.approx(2 / 3)
    assert got["final_step_annotated_rate"] == pytest.approx(2 / 4)
    by = takeover.latency(pl.DataFrame(FAILURES), by=("source_agent",)).collect()
    assert by.select("source_agent", "annotated", "surfaced", "median_latency").rows() == [
        ("a", 2, 1, 8.0),
        ("b", 2, 2, 15.0),
    ]


def test_latency_with_nothing_surfaced_has_null_latency() -> None:
    failures = pl.DataFrame(
        {
            "root_cause_id": ["r1"],
            "root_cause_step": [1],
            "surfaced_step": pl.Series([None], dtype=pl.Int64),
            "final_step": [5],
        }
    )
    got = takeover.latency(failures).collect().row(0, named=True)
    assert (got["surfaced"], got["median_latency"], got["final_step_rate"]) == (0, None, None)
    assert got["final_step_annotated_rate"] == 0.0


def test_latency_errors() -> None:
    with pytest.raises(ParameterError, match="parameter `by` names `model`, which is not a column"):
        takeover.latency(pl.DataFrame(FAILURES), by=("model",))
    bad = pl.DataFrame(FAILURES).with_columns(pl.lit(0).alias("root_cause_step"))
    bad = bad.with_columns(pl.Series("surfaced_step", [10, None, 4, 31]))
    with pytest.raises(SchemaError, match="is after `final_step` on 1 row"):
        takeover.latency(bad)


def test_leakage_finds_workflows_and_root_causes_in_two_splits(frame_kind: Callable) -> None:
    states = pl.DataFrame(STATES).with_columns(
        pl.Series("split", ["train", "test", "test", "test", None, "test"])
    )
    result = takeover.leakage(frame_kind(states)).collect()
    out = result.collect() if isinstance(result, pl.LazyFrame) else result
    assert out.rows() == [
        ("workflow_id", "w1", 2, ["test", "train"], 2),
        ("workflow_id", "w2", 2, [None, "test"], 3),
        ("root_cause_id", "r1", 2, ["test", "train"], 2),
    ]


def test_leakage_empty_and_missing_split(states_df: pl.DataFrame) -> None:
    clean = takeover.leakage(states_df.with_columns(pl.lit("test").alias("split"))).collect()
    assert clean.height == 0
    assert clean.columns == ["kind", "id", "n_splits", "splits", "states"]
    with pytest.raises(ParameterError) as info:
        takeover.leakage(states_df)
    assert str(info.value).startswith(
        "states: no column `split` (parameter `split`); leakage needs the split of every state"
    )


def test_leakage_planted_in_synthetic_data() -> None:
    tables = synth.generate("takeover", 60, seed=5, splits=("train", "test"), leak_rate=0.2)
    out = takeover.leakage(tables["states"]).collect()
    planted = (
        tables["states"].filter(pl.col("planted_leak"))["workflow_id"].unique().sort().to_list()
    )
    assert planted
    assert out.filter(pl.col("kind") == "workflow_id")["id"].to_list() == planted


MUTATIONS = {
    "workflow_id": ["w1", "w1", "w1", "w1", "w2", "w2", "w3", "w3"],
    "mutation_id": ["m1", "m2", "m3", "m4", "m1", "m2", "m1", "m2"],
    "executed": [True, True, True, False, True, True, False, False],
    "caught": [True, False, False, False, True, True, False, False],
}


def test_verifier_gate(frame_kind: Callable) -> None:
    result = takeover.verifier_gate(frame_kind(pl.DataFrame(MUTATIONS))).collect()
    out = result.collect() if isinstance(result, pl.LazyFrame) else result
    assert out.rows() == [
        ("w1", 4, 3, 1, pytest.approx(1 / 3), False, "low_catch_rate"),
        ("w2", 2, 2, 2, 1.0, True, None),
        ("w3", 2, 0, 0, None, False, "no_executed_mutations"),
    ]
    lenient = takeover.verifier_gate(pl.DataFrame(MUTATIONS), min_catch=1 / 3).collect()
    assert lenient["passes_gate"].to_list() == [True, True, False]


def test_verifier_gate_at_exactly_half() -> None:
    mutations = pl.DataFrame(
        {
            "workflow_id": ["w1"] * 10,
            "mutation_id": [f"m{i}" for i in range(10)],
            "executed": [True] * 10,
            "caught": [True] * 5 + [False] * 5,
        }
    )
    assert takeover.verifier_gate(mutations).collect()["passes_gate"].to_list() == [True]


def test_verifier_gate_errors() -> None:
    bad = pl.DataFrame(MUTATIONS).with_columns(pl.lit(True).alias("caught"))
    with pytest.raises(InputError) as info:
        takeover.verifier_gate(bad)
    assert str(info.value) == (
        "mutations: column `caught` is true on 3 rows whose `executed` is false "
        "(workflow_id/mutation_id w1/m4, w3/m1, w3/m2); only an executed mutation can be caught."
    )
    for value in (-0.1, 1.5, "half", True):
        with pytest.raises(ParameterError, match="parameter `min_catch` is"):
            takeover.verifier_gate(pl.DataFrame(MUTATIONS), min_catch=value)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def test_attempts_of_unknown_states(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    extra = attempts_rows({("s9", "a"): ("FFFF", "FFFF"), ("s8", "b"): ("FFFF",)})
    with pytest.raises(InputError) as info:
        takeover.summarize(states_df, pl.concat([attempts_df, extra]))
    assert str(info.value) == (
        "attempts: 3 rows refer to 2 states that are not in `states` (state_id s8, s9); every "
        "attempt must take over a known state. Hint: pass the states table the attempts were "
        "run on."
    )


def test_duplicate_state_agent_repeat(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    doubled = pl.concat([attempts_df, attempts_df.filter(pl.col("state_id") == "s1")])
    with pytest.raises(SchemaError) as info:
        takeover.summarize(states_df, doubled)
    assert str(info.value) == (
        "attempts: 6 keys appear more than once (state_id/agent/repeat s1/a/0, s1/a/1, s1/a/2, "
        "s1/b/0, s1/b/1 and 1 more); each (state_id, agent, repeat) must be unique."
    )


def test_duplicates_split_across_check_shards_are_still_found(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    # The checks stage splits the rows by position (one row per shard here), so no shard sees a
    # duplicate; the units pass of the partials stage (rows by workflow) must still find it.
    doubled = pl.concat([attempts_df, attempts_df.filter(pl.col("state_id") == "s1")])
    engine = engines.ShardedEngine(k=doubled.height)
    with pytest.raises(SchemaError) as info:
        takeover.summarize(states_df, doubled, interval="wilson", engine=engine)
    assert str(info.value) == (
        "attempts: 6 keys appear more than once (state_id/agent/repeat s1/a/0, s1/a/1, s1/a/2, "
        "s1/b/0, s1/b/1 and 1 more); each (state_id, agent, repeat) must be unique."
    )


def test_repeat_gaps(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    gappy = attempts_df.filter(~((pl.col("state_id") == "s2") & (pl.col("repeat") == 1)))
    with pytest.raises(InputError) as info:
        takeover.summarize(states_df, gappy, k=2)
    assert str(info.value) == (
        "attempts: column `repeat` has gaps in 2 (state_id, agent) units (state_id/agent s2/a, "
        "s2/b); the repeats of every unit must run 0, 1, ... without gaps (the first repeat in "
        "the table is 0). Hint: a missing repeat is usually a crashed run; rerun it or drop the "
        "unit."
    )
    late_start = attempts_df.filter(~((pl.col("state_id") == "s3") & (pl.col("repeat") == 0)))
    with pytest.raises(InputError, match=r"gaps in 2 \(state_id, agent\) units \(.* s3/a, s3/b\)"):
        takeover.summarize(states_df, late_start, k=2)


def test_root_cause_with_inconsistent_workflow(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    states = states_df.with_columns(
        pl.when(pl.col("state_id") == "s2")
        .then(pl.lit("w9"))
        .otherwise("workflow_id")
        .alias("workflow_id")
    )
    with pytest.raises(InputError) as info:
        takeover.summarize(states, attempts_df)
    assert str(info.value) == (
        "states: 1 root cause appears under more than one workflow (root_cause_id r1); all "
        "states of one root cause must share one `workflow_id`."
    )


@pytest.mark.parametrize(
    ("by", "message"),
    [
        (
            ("depth",),
            "parameter `by` is ['depth']; it must include `agent`, because pass@k and the "
            "funnel are scored per (state, agent).",
        ),
        (
            ("agent", "repeat"),
            "parameter `by` contains `repeat`; grouping by state_id, repeat, aware, "
            "root_cause_fixed, derived_fixed, passed is not allowed. Hint: use "
            "awareness_split() to split by awareness.",
        ),
        (("agent", "agent"), "parameter `by` names a column twice: ['agent', 'agent']."),
        (
            ("agent", "model"),
            "parameter `by` names `model`, which is a column of neither `states` nor `attempts` "
            "(states: state_id, workflow_id, root_cause_id, depth, replay_ok, expected_ok; "
            "attempts: state_id, agent, repeat, aware, root_cause_fixed, derived_fixed, passed).",
        ),
    ],
)
def test_bad_by(
    by: tuple[str, ...], message: str, states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    with pytest.raises(ParameterError) as info:
        takeover.summarize(states_df, attempts_df, by=by)
    assert str(info.value) == message


def test_by_column_in_both_tables(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    with pytest.raises(ParameterError) as info:
        takeover.summarize(
            states_df.with_columns(pl.lit("x").alias("split")),
            attempts_df.with_columns(pl.lit("x").alias("split")),
            by=("agent", "split"),
        )
    assert str(info.value) == (
        "parameter `by` names `split`, which is a column of both `states` and `attempts`; a "
        "grouping column must come from one table. Hint: drop or rename it in one of them."
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"interval": "normal"}, "parameter `interval` is 'normal'; it must be one of"),
        (
            {"confidence": 1.0},
            "parameter `confidence` is 1.0; it must be a number strictly between 0 and 1, "
            "e.g. 0.95.",
        ),
        ({"n_resamples": 0}, "parameter `n_resamples` is 0; it must be an integer >= 1."),
        ({"seed": -1}, "parameter `seed` is -1; it must be a non-negative integer."),
    ],
)
def test_bad_statistics_settings(
    options: dict[str, object], message: str, states_df: pl.DataFrame, attempts_df: pl.DataFrame
) -> None:
    with pytest.raises(ParameterError) as info:
        takeover.summarize(states_df, attempts_df, **options)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)


def test_missing_contract_column(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    with pytest.raises(SchemaError, match=r"^attempts: missing required column `passed`"):
        takeover.summarize(states_df, attempts_df.drop("passed"))


def test_eligibility_checks_by(states_df: pl.DataFrame) -> None:
    with pytest.raises(ParameterError, match="names `agent`, which is not a column of `states`"):
        takeover.eligibility(states_df, by=("agent",))
    total = takeover.eligibility(states_df, by=()).collect()
    assert total.select("states", "eligible_states", "rejected_states").row(0) == (6, 4, 2)
    assert isinstance(takeover.eligibility(states_df.lazy()), pl.LazyFrame)


# --------------------------------------------------------------------------------------------
# Invariants
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small() -> dict[str, pl.DataFrame]:
    return synth.generate("takeover", 12, seed=21)


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
def test_results_do_not_depend_on_row_order(small: dict[str, pl.DataFrame], seed: int) -> None:
    states, attempts = small["states"], small["attempts"]
    shuffled_states = states.sample(fraction=1.0, shuffle=True, seed=seed)
    shuffled_attempts = attempts.sample(fraction=1.0, shuffle=True, seed=seed + 1)
    options = {"n_resamples": 100, "common_sample": True}
    assert_frame_equal(
        takeover.summarize(states, attempts, **options),
        takeover.summarize(shuffled_states, shuffled_attempts, **options),
        check_exact=True,
    )
    compared = [
        takeover.compare_agents(s, a, "agent_a", "agent_c", by=("depth",), n_resamples=100)
        for s, a in ((states, attempts), (shuffled_states, shuffled_attempts))
    ]
    assert_frame_equal(*compared, check_exact=True)
    assert_frame_equal(
        takeover.awareness_split(states, attempts),
        takeover.awareness_split(shuffled_states, shuffled_attempts),
        check_exact=True,
    )


def test_extra_columns_and_categorical_keys_do_not_change_results(
    small: dict[str, pl.DataFrame],
) -> None:
    states, attempts = small["states"], small["attempts"]
    base = takeover.summarize(states, attempts, interval="wilson")
    noisy = takeover.summarize(
        states.with_columns(pl.lit("noise").alias("comment")),
        attempts.with_columns(pl.col("agent").cast(pl.Categorical), pl.lit(1.0).alias("x")),
        interval="wilson",
    )
    assert noisy.equals(base)
    by_source = takeover.summarize(
        states.with_columns(pl.col("source_agent").cast(pl.Categorical)),
        attempts,
        by=("agent", "source_agent"),
        interval="wilson",
    )
    plain = takeover.summarize(states, attempts, by=("agent", "source_agent"), interval="wilson")
    assert by_source.with_columns(pl.col("source_agent").cast(pl.String)).equals(plain)


def test_inputs_are_not_mutated(states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    before = (states_df.clone(), attempts_df.clone())
    takeover.summarize(states_df, attempts_df, n_resamples=50, common_sample=True)
    takeover.compare_agents(states_df, attempts_df, "a", "b", n_resamples=50)
    assert states_df.equals(before[0])
    assert attempts_df.equals(before[1])


def test_reads_files(tmp_path: object, states_df: pl.DataFrame, attempts_df: pl.DataFrame) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    states_df.write_csv(folder / "states.csv")
    attempts_df.write_parquet(folder / "attempts.parquet")
    out = takeover.summarize(folder / "states.csv", folder / "attempts.parquet", interval="wilson")
    assert out.height == 4
    assert isinstance(
        takeover.score(folder / "states.csv", folder / "attempts.parquet"), pl.LazyFrame
    )


def test_off_funnel_attempts_are_counted_not_dropped(states_df, attempts_df) -> None:
    # agent a, s3 repeat 0 is FTTT: root cause fixed, derived fixed and passed without awareness,
    # so it is off the funnel at all three layers; agent b's attempts all follow the funnel.
    summary = takeover.summarize(states_df, attempts_df, by=("agent",), n_resamples=50)
    a, b = row(summary, agent="a"), row(summary, agent="b")
    assert (a["off_funnel_fixed"], a["off_funnel_derived"], a["off_funnel_passed"]) == (1, 1, 1)
    assert (b["off_funnel_fixed"], b["off_funnel_derived"], b["off_funnel_passed"]) == (0, 0, 0)
    for cell in (a, b):
        assert cell["n_fixed"] == cell["aware_fixed"] + cell["off_funnel_fixed"]
        assert cell["n_derived"] == cell["aware_fixed_derived"] + cell["off_funnel_derived"]
        assert cell["n_passed"] == cell["aware_fixed_derived_passed"] + cell["off_funnel_passed"]


def test_off_funnel_identities_hold_on_the_sample() -> None:
    states = pl.read_parquet(TAKEOVER / "states.parquet")
    attempts = pl.read_parquet(TAKEOVER / "attempts.parquet").with_columns(
        # contradicting annotations: fixed without aware, passed without derived
        pl.when(pl.int_range(pl.len()) % 7 == 0).then(True).otherwise("root_cause_fixed")
        .alias("root_cause_fixed"),
        pl.when(pl.int_range(pl.len()) % 5 == 0).then(True).otherwise("passed").alias("passed"),
    )  # fmt: skip
    summary = takeover.summarize(states, attempts, n_resamples=20)
    assert summary["off_funnel_fixed"].sum() > 0
    assert summary["off_funnel_passed"].sum() > 0
    assert (summary["n_fixed"] == summary["aware_fixed"] + summary["off_funnel_fixed"]).all()
    assert (
        summary["n_derived"] == summary["aware_fixed_derived"] + summary["off_funnel_derived"]
    ).all()
    assert (
        summary["n_passed"] == summary["aware_fixed_derived_passed"] + summary["off_funnel_passed"]
    ).all()


def test_compare_agents_n_permutations_is_a_deprecated_alias() -> None:
    tables = synth.generate("takeover", 20, seed=1)
    args = (tables["states"], tables["attempts"], "agent_a", "agent_b")
    with pytest.warns(DeprecationWarning, match=r"parameter `n_permutations` is deprecated"):
        old = takeover.compare_agents(*args, n_resamples=200, n_permutations=100_000)
    assert old.equals(takeover.compare_agents(*args, n_resamples=200))
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_flips'"):
        takeover.compare_agents(*args, n_flips=10)


def _error(call: Callable[[], object]) -> tuple[type, str]:
    try:
        call()
    except (InputError, ParameterError, SchemaError) as error:
        return type(error), str(error)
    return type(None), ""


@pytest.mark.parametrize("seed", range(12))
def test_row_checks_in_the_units_pass_match_the_checks_stage(
    states_df: pl.DataFrame, attempts_df: pl.DataFrame, seed: int
) -> None:
    # On the whole tables the checks stage is skipped and the units pass counts the rows that
    # break a data check; the error (and which error comes first) must be the checks stage's.
    rng = np.random.default_rng(seed)
    attempts = attempts_df.with_columns(pl.lit(7, pl.Int64).alias("steps"))
    index = pl.int_range(pl.len()) == int(rng.integers(attempts.height))
    corruptions = {
        "null": rng.choice(["state_id", "agent", "repeat", *takeover.FLAGS]),
        "beyond": rng.choice(["repeat", "steps"]),
    }
    kind = ["null", "beyond", "empty", "none"][seed % 4]
    if kind == "null":
        column = str(corruptions["null"])
        attempts = attempts.with_columns(
            pl.when(index).then(None).otherwise(pl.col(column)).alias(column)
        )
    elif kind == "beyond":
        column = str(corruptions["beyond"])
        attempts = attempts.with_columns(
            pl.when(index).then(2**60).otherwise(pl.col(column)).alias(column)
        )
    elif kind == "empty":
        attempts = attempts.head(0)
    states = states_df
    if seed % 3 == 0:  # a root cause under two workflows as well: the row error comes first
        states = states.with_columns(
            pl.when(pl.col("state_id") == "s2")
            .then(pl.lit("w9"))
            .otherwise(pl.col("workflow_id"))
            .alias("workflow_id")
        )
    flags = {"common_states": bool(seed % 2), "common_sample": seed % 5 == 0}
    expected = _error(
        lambda: takeover.summarize(
            states, attempts, interval="wilson", engine=engines.ShardedEngine(k=2), **flags
        )
    )
    got = _error(lambda: takeover.summarize(states, attempts, interval="wilson", **flags))
    assert got == expected
    assert (got[0] is type(None)) == (kind == "none" and seed % 3 != 0)


@pytest.mark.parametrize("seed", range(3))
def test_partials_keyed_by_one_integer_equal_the_keyed_by_columns(seed: int) -> None:
    # With the agent as the only attempt-level key the units and the bootstrap's partials group
    # by one integer per (state, agent) and (state cell, agent); another attempt-level key (a
    # constant budget here) takes the paths keyed by the columns. Both must give the same
    # cells, with null and workflow keys too, for both intervals.
    tables = synth.generate("takeover", 12, seed=seed)
    states = tables["states"].with_columns(
        pl.when(pl.col("depth") > 0).then(pl.col("workflow_id")).alias("maybe"),
    )
    attempts = tables["attempts"].with_columns(pl.lit(1, pl.Int64).alias("budget_x"))
    for by, interval in itertools.product(
        (["agent", "depth"], ["agent", "maybe", "workflow_id"], ["agent"]), ("wilson", "bootstrap")
    ):
        options = {
            "interval": interval,
            "n_resamples": 30,
            "common_states": seed == 1,
            "common_sample": seed == 2,
        }
        one = takeover.summarize(states, attempts, by=by, **options)
        keyed = takeover.summarize(states, attempts, by=[*by, "budget_x"], **options)
        assert_frame_equal(one, keyed.drop("budget_x"))
