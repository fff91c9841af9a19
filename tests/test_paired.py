"""Tests of recoverylab.paired: pairing, carry-forward, exclusions, cells, contrasts, policies."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import paired, stats, synth
from recoverylab._errors import InputError, ParameterError, SchemaError
from recoverylab.paired import _pairs, _summary

FAST = {"n_resamples": 400}
SCHEMA = {
    "task_id": pl.String,
    "condition": pl.String,
    "method": pl.String,
    "delay": pl.Int64,
    "success": pl.Boolean,
}


def forks_frame(rows: list[tuple], **extra: list) -> pl.DataFrame:
    """(task_id, condition, method, delay, success) rows plus extra columns."""
    frame = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    return frame.with_columns(pl.Series(name, values) for name, values in extra.items())


def by_key(frame: pl.DataFrame, **key: object) -> dict:
    rows = frame.filter(*(pl.col(k) == v for k, v in key.items())).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


# A small hand-made table: stale2, refresh at delays 0, 1, 2, 4 and a shared none row.
#   t1: none fails; rescued at 0, unchanged at 1, a delay-specific none row at 2 that
#       succeeds (kept at 2), rescued at 4
#   t2: none succeeds; harmed at 0; its run ends at action 6 with perturbation at 3, so the
#       points at delays 4 (3 + 4 >= 6) are carried forward; delay 1 branch forked from another
#       state (prefix mismatch); delay 2 branch missing (3 + 2 < 6: not carried)
#   t3: only a delay-specific none row at 2; its recovery at 0 is unpaired
HAND = forks_frame(
    [
        ("t1", "stale2", "none", None, False),
        ("t1", "stale2", "refresh", 0, True),
        ("t1", "stale2", "refresh", 1, False),
        ("t1", "stale2", "none", 2, True),
        ("t1", "stale2", "refresh", 2, True),
        ("t1", "stale2", "refresh", 4, True),
        ("t2", "stale2", "none", None, True),
        ("t2", "stale2", "refresh", 0, False),
        ("t2", "stale2", "refresh", 1, True),
        ("t3", "stale2", "none", 2, False),
        ("t3", "stale2", "refresh", 0, True),
    ],
    prefix_hash=["a", "a", "a", "a", "a", "a", "b", "b", "x", "c", "c"],
    perturb_action=[5] * 6 + [3] * 3 + [1] * 2,
    end_action=[None] * 6 + [6, None, None, None, None],
)


# ------------------------------------------------------------------------------------------
# pairs
# ------------------------------------------------------------------------------------------


def test_pairs_hand_table(frame_kind: Callable) -> None:
    out = paired.pairs(frame_kind(HAND))
    assert isinstance(out, pl.LazyFrame)
    got = out.collect().sort("task_id", "delay")
    # contract columns (prefix_hash, perturb_action, end_action) are not carried
    assert got.columns == [
        "task_id",
        "condition",
        "method",
        "delay",
        "y0",
        "y1",
        "outcome",
        "carried_forward",
    ]
    assert got.select("task_id", "delay", "y0", "y1", "outcome", "carried_forward").rows() == [
        ("t1", 0, False, True, "rescue", False),
        ("t1", 1, False, False, "unchanged", False),
        ("t1", 2, True, True, "kept", False),  # the delay-specific none row wins
        ("t1", 4, False, True, "rescue", False),
        ("t2", 0, True, False, "harm", False),
        ("t2", 4, True, True, "kept", True),  # ended before the point: carried forward
    ]


def test_pairs_columns_and_extras_are_carried() -> None:
    frame = HAND.drop("prefix_hash", "perturb_action", "end_action").with_columns(
        pl.lit("m1").alias("model")
    )
    got = paired.pairs(frame).collect()
    assert got.columns == [
        "task_id",
        "condition",
        "method",
        "delay",
        "y0",
        "y1",
        "outcome",
        "carried_forward",
        "model",
    ]
    # without end_action nothing is carried forward; without prefix hashes nothing mismatches
    assert got.height == 6
    assert not got["carried_forward"].any()


def test_carried_forward_rows_take_extras_from_the_none_row() -> None:
    frame = forks_frame(
        [
            ("a", "stale2", "none", None, False),
            ("a", "stale2", "refresh", 0, False),
            ("a", "stale2", "refresh", 2, True),
            ("b", "stale2", "none", None, True),
            ("b", "stale2", "refresh", 0, True),
        ],
        perturb_action=[1, 1, 1, 4, 4],
        end_action=[20, None, None, 6, None],
        note=["none-a", "rec", "rec", "none-b", "rec-b"],
    )
    got = paired.pairs(frame).collect().sort("task_id", "delay")
    assert got.select("task_id", "delay", "carried_forward", "note").rows() == [
        ("a", 0, False, "rec"),
        ("a", 2, False, "rec"),
        ("b", 0, False, "rec-b"),
        ("b", 2, True, "none-b"),  # 4 + 2 >= 6
    ]


def test_carry_forward_uses_the_delays_of_the_same_condition_and_method() -> None:
    # clean has delays 0 and 4 for refresh, stale2 only 0; replan_only only delay 1.
    frame = forks_frame(
        [
            ("a", "clean", "none", None, True),
            ("a", "clean", "refresh", 0, True),
            ("a", "clean", "refresh", 4, False),
            ("a", "clean", "replan_only", 1, True),
            ("b", "clean", "none", None, False),
            ("b", "clean", "refresh", 0, True),
            ("b", "stale2", "none", None, False),
            ("b", "stale2", "refresh", 0, False),
        ],
        perturb_action=[2] * 8,
        end_action=[30, None, None, None, 4, None, 4, None],
    )
    got = paired.pairs(frame).collect().sort("task_id", "condition", "method", "delay")
    carried = got.filter(pl.col("carried_forward"))
    # b/clean ended at 4 = 2 + 2: refresh at 4 and replan_only at 1? 2 + 1 < 4: not carried.
    assert carried.select("task_id", "condition", "method", "delay", "y1").rows() == [
        ("b", "clean", "refresh", 4, False)
    ]


def test_delay_specific_none_rows_decide_carry_forward_at_their_delay() -> None:
    frame = forks_frame(
        [
            ("a", "stale2", "none", None, True),
            ("a", "stale2", "none", 4, False),
            ("a", "stale2", "refresh", 0, True),
            ("b", "stale2", "none", None, True),
            ("b", "stale2", "refresh", 0, True),
            ("b", "stale2", "refresh", 4, True),
        ],
        perturb_action=[0] * 6,
        # a's shared run lasted, its delay-4 replay ended at action 3 (0 + 4 >= 3)
        end_action=[40, 3, None, 40, None, None],
    )
    got = paired.pairs(frame).collect().sort("task_id", "delay")
    assert got.select("task_id", "delay", "y0", "y1", "carried_forward").rows() == [
        ("a", 0, True, True, False),
        ("a", 4, False, False, True),
        ("b", 0, True, True, False),
        ("b", 4, True, True, False),
    ]


def test_shared_none_row_does_not_carry_where_a_specific_row_exists() -> None:
    frame = forks_frame(
        [
            ("a", "stale2", "none", None, True),  # shared run ended early
            ("a", "stale2", "none", 4, False),  # but the delay-4 replay went on
            ("a", "stale2", "refresh", 4, True),
            ("b", "stale2", "none", None, True),
            ("b", "stale2", "refresh", 4, True),
        ],
        perturb_action=[0] * 5,
        end_action=[2, 50, None, 50, None],
    )
    got = paired.pairs(frame).collect().sort("task_id", "delay")
    assert got.select("task_id", "delay", "outcome", "carried_forward").rows() == [
        ("a", 4, "rescue", False),
        ("b", 4, "kept", False),
    ]


def test_recovery_row_after_the_end_is_an_input_error(frame_kind: Callable) -> None:
    def rows(records: list[tuple], perturb: int) -> pl.DataFrame:
        return forks_frame(records).with_columns(
            pl.lit("z").alias("prefix_hash"),
            pl.lit(perturb, dtype=pl.Int64).alias("perturb_action"),
            pl.lit(None, dtype=pl.Int64).alias("end_action"),
        )

    data = pl.concat(
        [
            HAND,
            rows([("t2", "stale2", "refresh", 4, False)], 3),  # 3 + 4 >= 6: after the end
            rows([("t9", "clean", "none", None, True), ("t9", "clean", "refresh", 4, True)], 0),
            rows([("t9", "stale2", "replan_only", 0, True)], 0),
        ]
    ).with_columns(pl.lit("m").alias("model"))
    message = (
        "forks: 1 recovery row is at or after the end of the no-recovery run "
        "(task_id/condition/{keys}); a task that ended before the "
        "recovery point (perturb_action + delay >= end_action) is carried forward with the "
        "no-recovery outcome and must have no recovery row. Hint: drop these rows, or fix "
        "`end_action` on the `none` row."
    )
    plain = "method/delay t2/stale2/refresh/4"
    for call, keys in (
        (paired.pairs, plain),
        (paired.exclusions, plain),
        (lambda f: paired.summarize(f, **FAST), plain),
        (
            lambda f: paired.summarize(f, pair_by="model", **FAST),
            "model/method/delay t2/stale2/m/refresh/4",
        ),
        (lambda f: paired.contrast(f, "stale2", "clean", **FAST), plain),
        (lambda f: paired.rescue_overlap(f, "refresh", "replan_only"), plain),
    ):
        with pytest.raises(InputError) as info:
            call(frame_kind(data))
        assert str(info.value) == message.format(keys=keys)


def test_many_recovery_rows_after_the_end_show_five_keys() -> None:
    rows = []
    for i in range(7):
        rows += [(f"t{i}", "clean", "none", None, True), (f"t{i}", "clean", "refresh", 2, True)]
    frame = forks_frame(rows, perturb_action=[1] * 14, end_action=[2, None] * 7)
    with pytest.raises(InputError, match=r"^forks: 7 recovery rows are at or after") as info:
        paired.pairs(frame)
    assert "t0/clean/refresh/2, t1/clean/refresh/2, t2/clean/refresh/2, " in str(info.value)
    assert "t4/clean/refresh/2 and 2 more)" in str(info.value)


def test_exclusions_counts_and_keys(frame_kind: Callable) -> None:
    counts = paired.exclusions(frame_kind(HAND)).collect()
    assert counts.rows() == [
        ("stale2", 0, "refresh", "unpaired", 1),
        ("stale2", 1, "refresh", "prefix_mismatch", 1),
    ]
    keys = paired.exclusions(frame_kind(HAND), keys=True).collect()
    assert keys.rows() == [
        ("t2", "stale2", "refresh", 1, "prefix_mismatch"),
        ("t3", "stale2", "refresh", 0, "unpaired"),
    ]


def test_null_prefix_hash_is_not_a_mismatch() -> None:
    frame = forks_frame(
        [("a", "clean", "none", None, True), ("a", "clean", "refresh", 0, True)],
        prefix_hash=["h", None],
    )
    assert paired.pairs(frame).collect().height == 1
    assert paired.exclusions(frame).collect().height == 0


def test_duplicate_branch_keys_are_a_schema_error() -> None:
    frame = HAND.vstack(HAND.slice(1, 1))
    with pytest.raises(SchemaError) as info:
        paired.pairs(frame)
    assert str(info.value) == (
        "forks: 1 key appears more than once (task_id/condition/method/delay "
        "t1/stale2/refresh/0); each (task_id, condition, method, delay) must be unique."
    )


def test_two_shared_none_rows_are_duplicates() -> None:
    frame = forks_frame([("a", "clean", "none", None, True), ("a", "clean", "none", None, False)])
    with pytest.raises(SchemaError, match=r"a/clean/none/null\); each"):
        paired.summarize(frame, **FAST)


def test_null_success_is_a_schema_error() -> None:
    frame = HAND.with_columns(
        pl.when(pl.col("task_id") == "t2").then(None).otherwise(pl.col("success")).alias("success")
    )
    with pytest.raises(SchemaError) as info:
        paired.summarize(frame, **FAST)
    assert str(info.value) == (
        "forks: column `success` has 3 nulls (task_id/condition/method/delay "
        "t2/stale2/none/null, t2/stale2/refresh/0, t2/stale2/refresh/1); it must be true or false."
    )


def test_recovery_row_without_delay_is_a_schema_error() -> None:
    frame = forks_frame([("a", "clean", "none", None, True), ("a", "clean", "refresh", None, True)])
    with pytest.raises(SchemaError, match=r"column `delay` is null on 1 recovery row"):
        paired.pairs(frame)


def test_pair_by_pairs_within_model() -> None:
    frame = forks_frame(
        [
            ("a", "clean", "none", None, True),
            ("a", "clean", "refresh", 0, False),
            ("a", "clean", "none", None, False),
            ("a", "clean", "refresh", 0, True),
            ("a", "clean", "refresh", 0, True),
        ],
        model=["m1", "m1", "m2", "m2", "m3"],
    )
    got = paired.pairs(frame, pair_by="model").collect().sort("model")
    assert got.select("model", "outcome").rows() == [("m1", "harm"), ("m2", "rescue")]
    assert paired.exclusions(frame, pair_by="model", keys=True).collect().rows() == [
        ("a", "clean", "m3", "refresh", 0, "unpaired")
    ]
    # without pair_by the model is an ordinary column: the two `none` rows are duplicates
    with pytest.raises(SchemaError, match="more than once"):
        paired.pairs(frame)


def test_pair_by_keys_may_be_null() -> None:
    frame = forks_frame(
        [("a", "clean", "none", None, True), ("a", "clean", "refresh", 0, False)],
        seed=[None, None],
    )
    assert paired.pairs(frame, pair_by="seed").collect()["outcome"].to_list() == ["harm"]


def test_cohort_factual_success() -> None:
    frame = HAND.with_columns((pl.col("task_id") != "t1").alias("factual_success"))
    got = paired.pairs(frame, cohort="factual_success").collect()
    assert sorted(got["task_id"].unique()) == ["t2"]
    assert got["factual_success"].all()


def test_parameter_errors() -> None:
    with pytest.raises(ParameterError) as info:
        paired.pairs(HAND, cohort="everyone")  # type: ignore[arg-type]
    assert str(info.value) == (
        "parameter `cohort` is 'everyone'; it must be one of 'full', 'factual_success'."
    )
    with pytest.raises(ParameterError) as info:
        paired.summarize(HAND, cohort="factual_success", **FAST)
    assert str(info.value) == (
        "forks: parameter `cohort` is 'factual_success' but the table has no "
        "`factual_success` column. Hint: add it, or use cohort='full'."
    )
    with pytest.raises(ParameterError) as info:
        paired.summarize(HAND, by="model", **FAST)
    assert str(info.value).startswith(
        "forks: parameter `by` names column `model`, which is not in the table (columns: task_id"
    )
    with pytest.raises(ParameterError) as info:
        paired.summarize(HAND, by="delay", **FAST)
    assert str(info.value) == (
        "parameter `by` names `delay`, which is a cell key or a branch-level column; by names "
        "extra grouping columns."
    )
    with pytest.raises(ParameterError) as info:
        paired.pairs(HAND, pair_by=["condition"])
    assert str(info.value) == (
        "parameter `pair_by` names `condition`, which is a contract column of forks; pair_by "
        "names extra keys such as model or seed."
    )
    with pytest.raises(ParameterError, match=r"parameter `pair_by` names a column twice"):
        paired.pairs(HAND, pair_by=["m", "m"])
    with pytest.raises(ParameterError, match=r"parameter `by` is 3; it must be a column name"):
        paired.summarize(HAND, by=3, **FAST)  # type: ignore[arg-type]
    with pytest.raises(ParameterError) as info:
        paired.summarize(HAND.with_columns(pl.lit(1).alias("n")), by="n", **FAST)
    assert str(info.value) == (
        "parameter `by` names `n`, which is also a result column. Hint: rename that column first."
    )
    with pytest.raises(ParameterError, match=r"parameter `ci_method` is 'normal'"):
        paired.summarize(HAND, ci_method="normal")
    with pytest.raises(ParameterError, match=r"confidence"):
        paired.summarize(HAND, confidence=95)
    with pytest.raises(ParameterError, match=r"n_resamples"):
        paired.summarize(HAND, n_resamples=0)


# ------------------------------------------------------------------------------------------
# summarize
# ------------------------------------------------------------------------------------------


def test_summarize_hand_table(frame_kind: Callable) -> None:
    got = paired.summarize(frame_kind(HAND), **FAST)
    assert got.columns == [
        "condition",
        "delay",
        "method",
        "n",
        "n_tasks",
        "rescue",
        "harm",
        "kept",
        "unchanged",
        "carried_forward",
        "base_rate",
        "recovery_rate",
        "effect",
        "ci_low",
        "ci_high",
        "p_value",
        "ci_method",
        "sparse",
        "unpaired",
        "prefix_mismatch",
        "test",
        "ci_inverts_test",
        "p_sign_flip",
    ]
    assert got.select(
        "delay",
        "n",
        "rescue",
        "harm",
        "kept",
        "unchanged",
        "carried_forward",
        "unpaired",
        "prefix_mismatch",
    ).rows() == [
        (0, 2, 1, 1, 0, 0, 0, 1, 0),
        (1, 1, 0, 0, 0, 1, 0, 0, 1),
        (2, 1, 0, 0, 1, 0, 0, 0, 0),
        (4, 2, 1, 0, 1, 0, 1, 0, 0),
    ]
    row = by_key(got, delay=4)
    assert row["base_rate"] == 0.5
    assert row["recovery_rate"] == 1.0
    assert row["effect"] == 0.5
    assert row["n_tasks"] == 2
    assert row["p_value"] == 1.0  # one nonzero task: both signs equally extreme
    # The default interval agrees with p = 1: it contains zero (the percentile bootstrap
    # gave [0, 1] here, ruling out harm while the test found nothing; issue 16).
    assert row["ci_low"] < 0.0 < row["ci_high"]
    assert row["ci_method"] == "fay-lumbard"
    assert row["sparse"] is True
    boot = by_key(paired.summarize(frame_kind(HAND), **FAST, ci_method="percentile"), delay=4)
    assert (boot["ci_low"], boot["ci_high"], boot["ci_method"]) == (0.0, 1.0, "percentile")


def test_cell_with_only_excluded_rows_has_n_zero_and_null_rates() -> None:
    frame = forks_frame(
        [
            ("a", "clean", "none", None, True),
            ("a", "clean", "refresh", 0, True),
            ("a", "clean", "refresh", 1, True),
        ],
        prefix_hash=["h", "h", "other"],
    )
    got = paired.summarize(frame, **FAST)
    row = by_key(got, delay=1)
    assert (row["n"], row["n_tasks"], row["prefix_mismatch"]) == (0, 0, 1)
    for column in ("base_rate", "recovery_rate", "effect", "ci_low", "ci_high", "p_value"):
        assert row[column] is None


def test_fast_and_per_task_paths_agree() -> None:
    # one model per task: pairing by model changes nothing, but forces the per-task pass
    rng = np.random.default_rng(3)
    frame = random_forks(rng, tasks=40).with_columns(
        pl.format("m{}", pl.col("task_id").str.slice(1).cast(pl.Int64) % 3).alias("model")
    )
    plain = paired.summarize(frame, **FAST)
    per_task = paired.summarize(frame, pair_by="model", **FAST)
    assert_frame_equal(plain, per_task)
    table, _ = _pairs.prepare(frame, pair_by=("model",))
    design = _pairs.design_grid(table)
    assert not _summary.summary_query(table, design, (), "full")[1]
    assert _summary.summary_query(table, design, ("model",), "full")[1]


def test_summarize_by_extra_column() -> None:
    frame = HAND.with_columns(
        pl.when(pl.col("task_id") == "t1").then(pl.lit("x")).otherwise(pl.lit("y")).alias("split")
    )
    got = paired.summarize(frame, by="split", **FAST)
    assert got.select("delay", "split", "n").rows() == [
        (0, "x", 1),
        (0, "y", 1),
        (1, "x", 1),
        (1, "y", 0),
        (2, "x", 1),
        (4, "x", 1),
        (4, "y", 1),
    ]


def per_task_differences(frame: pl.DataFrame, **cell: object) -> tuple[np.ndarray, np.ndarray]:
    """Per-task (summed y1 - y0, pairs) of one cell, from pairs() (a plain reference)."""
    got = (
        paired.pairs(frame, pair_by="model")
        .collect()
        .filter(*(pl.col(k) == v for k, v in cell.items()))
        .group_by("task_id")
        .agg(
            (pl.col("y1").cast(pl.Int64) - pl.col("y0").cast(pl.Int64)).sum().alias("d"),
            pl.len().alias("n"),
        )
        .sort("task_id")
    )
    return got["d"].to_numpy(), got["n"].to_numpy()


def brute_force_sign_flip(d: np.ndarray) -> float:
    observed = abs(d.sum())
    hits = [
        abs(sum(s * v for s, v in zip(signs, d, strict=True))) >= observed - 1e-9
        for signs in itertools.product((-1, 1), repeat=d.size)
    ]
    return float(np.mean(hits))


def test_p_value_equals_brute_force_sign_flip() -> None:
    rng = np.random.default_rng(11)
    frame = random_forks(rng, tasks=12, models=("m1", "m2", "m3"))
    got = paired.summarize(frame, pair_by="model", **FAST)
    checked = 0
    for row in got.iter_rows(named=True):
        cell = {k: row[k] for k in ("condition", "delay", "method")}
        d, _ = per_task_differences(frame, **cell)
        if d.size == 0:
            continue
        assert row["p_sign_flip"] == pytest.approx(brute_force_sign_flip(d), abs=1e-12)
        checked += 1
    assert checked >= 8


def test_ci_matches_naive_cluster_resampling() -> None:
    rng = np.random.default_rng(5)
    frame = random_forks(
        rng,
        tasks=60,
        models=("m1", "m2"),
        conditions=("stale2",),
        methods=("refresh",),
        delays=(1,),
    )
    got = paired.summarize(frame, pair_by="model", n_resamples=4000, seed=1)
    row = got.row(0, named=True)
    d, n = per_task_differences(frame, condition="stale2", delay=1, method="refresh")
    draws = np.random.default_rng(99).integers(0, d.size, size=(4000, d.size))
    naive = d[draws].sum(axis=1) / n[draws].sum(axis=1)
    low, high = np.quantile(naive, [0.025, 0.975])
    assert row["effect"] == pytest.approx(d.sum() / n.sum())
    assert row["ci_low"] == pytest.approx(low, abs=0.03)
    assert row["ci_high"] == pytest.approx(high, abs=0.03)


def test_bca_interval_is_available() -> None:
    rng = np.random.default_rng(2)
    frame = random_forks(rng, tasks=40)
    got = paired.summarize(frame, ci_method="bca", **FAST)
    assert got.filter(pl.col("ci_low") > pl.col("effect")).height == 0
    assert got.filter(pl.col("ci_high") < pl.col("effect")).height == 0


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    keep_conditions=st.sets(st.sampled_from(["clean", "stale2"]), min_size=1),
    keep_methods=st.sets(st.sampled_from(["refresh", "replan_only"]), min_size=1),
    pair_by=st.sampled_from([(), ("model",)]),
)
def test_cell_statistics_do_not_depend_on_other_cells(
    seed: int, keep_conditions: set[str], keep_methods: set[str], pair_by: tuple[str, ...]
) -> None:
    frame = random_forks(np.random.default_rng(seed), tasks=15, models=("m1", "m2"))
    if not pair_by:
        frame = frame.filter(pl.col("model") == "m1").drop("model")
    full = paired.summarize(frame, pair_by=pair_by, seed=4, n_resamples=300)
    part = frame.filter(
        pl.col("condition").is_in(sorted(keep_conditions))
        & pl.col("method").is_in(["none", *sorted(keep_methods)])
    )
    alone = paired.summarize(part, pair_by=pair_by, seed=4, n_resamples=300)
    keys = ["condition", "delay", "method"]
    assert_frame_equal(full.join(alone.select(keys), on=keys, how="semi"), alone)


def test_summarize_runs_on_the_streaming_engine_and_never_collects_raw_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(1)
    frame = random_forks(rng, tasks=400, models=("m1", "m2"))
    table, _ = _pairs.prepare(frame, pair_by=("model",))
    design = _pairs.design_grid(table)
    for by, fast in (((), False), (("model",), True)):
        query, is_fast, _ = _summary.summary_query(table, design, by, "full")
        assert is_fast is fast
        plan = query.explain(engine="streaming")
        assert plan.startswith("AGGREGATE")
        assert_frame_equal(
            query.collect(engine="streaming"),
            query.collect(engine="in-memory"),
            check_row_order=False,
        )
        # per-task partials only when a task can have several pairs per cell
        groupings = [line.split(" BY ")[-1] for line in plan.splitlines() if " BY " in line]
        assert any('col("task_id")' in g for g in groupings) is not fast
    collected: list[tuple[int, object]] = []
    original = pl.LazyFrame.collect

    def spy(self: pl.LazyFrame, *args: object, **kwargs: object) -> pl.DataFrame:
        result = original(self, *args, **kwargs)
        collected.append((result.height, kwargs.get("engine")))
        return result

    monkeypatch.setattr(pl.LazyFrame, "collect", spy)
    paired.summarize(frame.lazy(), pair_by="model", **FAST)
    assert collected
    assert max(height for height, _ in collected) < frame.height // 10
    # the pairing aggregation itself ran on the streaming engine
    assert "streaming" in {engine for _, engine in collected}


# ------------------------------------------------------------------------------------------
# Hypothesis invariants
# ------------------------------------------------------------------------------------------


def random_forks(
    rng: np.random.Generator,
    *,
    tasks: int,
    conditions: tuple[str, ...] = ("clean", "stale2"),
    methods: tuple[str, ...] = ("refresh", "replan_only"),
    delays: tuple[int, ...] = (0, 1, 2),
    models: tuple[str, ...] | None = None,
    exclusions: bool = True,
) -> pl.DataFrame:
    """A random valid forks table: some points missing or ended, some exclusions."""
    records = []
    for t in range(tasks):
        task = f"t{t:03d}"
        factual = bool(rng.random() < 0.8)
        for model in models or (None,):
            for condition in conditions:
                y0 = bool(rng.random() < 0.6)
                perturb = int(rng.integers(0, 5))
                end = perturb + int(rng.integers(1, 6))
                has_none = not exclusions or rng.random() > 0.05
                if has_none:
                    records.append(
                        (task, condition, "none", None, y0, "h", perturb, end, factual, model)
                    )
                for method in methods:
                    for delay in delays:
                        if has_none and perturb + delay >= end:
                            continue  # carried forward
                        if rng.random() < 0.1:
                            continue  # not run
                        prefix = "h" if not exclusions or rng.random() > 0.05 else "other"
                        records.append(
                            (
                                task,
                                condition,
                                method,
                                delay,
                                bool(rng.random() < 0.6),
                                prefix,
                                perturb,
                                None,
                                factual,
                                model,
                            )
                        )
    frame = pl.DataFrame(
        records,
        schema={
            **SCHEMA,
            "prefix_hash": pl.String,
            "perturb_action": pl.Int64,
            "end_action": pl.Int64,
            "factual_success": pl.Boolean,
            "model": pl.String,
        },
        orient="row",
    )
    return frame if models else frame.drop("model")


HYPOTHESIS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HYPOTHESIS
@given(seed=st.integers(0, 2**32 - 1), tasks=st.integers(1, 25))
def test_counts_identities(seed: int, tasks: int) -> None:
    frame = random_forks(np.random.default_rng(seed), tasks=tasks)
    got = paired.summarize(frame, n_resamples=50)
    defined = got.filter(pl.col("n") > 0)
    assert (
        defined["rescue"] - defined["harm"] == (defined["n"] * defined["effect"]).round(9)
    ).all()
    assert (
        defined["kept"] + defined["rescue"] == (defined["n"] * defined["recovery_rate"]).round(9)
    ).all()
    assert (
        defined["rescue"] + defined["harm"] + defined["kept"] + defined["unchanged"] == defined["n"]
    ).all()
    assert (defined["ci_low"] <= defined["effect"] + 1e-12).all()
    assert (defined["effect"] <= defined["ci_high"] + 1e-12).all()
    # every recovery row of the table is a pair or an exclusion; carried pairs are extra
    recovery_rows = frame.filter(pl.col("method") != "none").height
    assert recovery_rows == int(
        got["n"].sum()
        - got["carried_forward"].sum()
        + got["unpaired"].sum()
        + got["prefix_mismatch"].sum()
    )


@HYPOTHESIS
@given(seed=st.integers(0, 2**32 - 1), tasks=st.integers(1, 20), data=st.data())
def test_results_do_not_depend_on_row_order_split_extras_or_key_types(
    seed: int, tasks: int, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    rng = np.random.default_rng(seed)
    frame = random_forks(rng, tasks=tasks, models=("m1", "m2"))
    for kwargs in ({}, {"pair_by": "model"}, {"pair_by": "model", "by": "model"}):
        if "pair_by" not in kwargs:
            base_frame = frame.filter(pl.col("model") == "m1").drop("model")
        else:
            base_frame = frame
        expected = paired.summarize(base_frame, n_resamples=100, **kwargs)
        shuffled = base_frame.sample(fraction=1.0, shuffle=True, seed=seed % 1000)
        assert_frame_equal(paired.summarize(shuffled, n_resamples=100, **kwargs), expected)
        extra = base_frame.with_columns(
            pl.Series("noise", rng.random(base_frame.height)), pl.lit("x").alias("tag")
        )
        assert_frame_equal(paired.summarize(extra, n_resamples=100, **kwargs), expected)
        categorical = base_frame.with_columns(
            pl.col("task_id", "condition", "method").cast(pl.Categorical),
            *([pl.col("model").cast(pl.Categorical)] if "model" in base_frame.columns else []),
        )
        assert_frame_equal(paired.summarize(categorical, n_resamples=100, **kwargs), expected)
        # integer task ids are grouped as integers (Forks.int_ids), with the same result
        integer = shuffled.with_columns(pl.col("task_id").str.slice(1).cast(pl.Int32))
        assert_frame_equal(paired.summarize(integer, n_resamples=100, **kwargs), expected)
        cut = data.draw(st.integers(0, base_frame.height), label="cut")
        folder = tmp_path_factory.mktemp("split")
        base_frame.slice(0, cut).write_parquet(folder / "a.parquet")
        base_frame.slice(cut).write_parquet(folder / "b.parquet")
        files = [str(folder / "a.parquet"), str(folder / "b.parquet")]
        assert_frame_equal(paired.summarize(files, n_resamples=100, **kwargs), expected)


def test_integer_task_ids_give_the_errors_of_their_strings() -> None:
    frame = random_forks(np.random.default_rng(5), tasks=12, exclusions=False)
    integer = frame.with_columns(pl.col("task_id").str.slice(1).cast(pl.Int64) * 7)
    as_text = integer.with_columns(pl.col("task_id").cast(pl.String))
    duplicated = [integer.vstack(integer.slice(3, 2)), as_text.vstack(as_text.slice(3, 2))]
    messages = []
    for table in duplicated:
        with pytest.raises(SchemaError) as info:
            paired.summarize(table, n_resamples=50)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "more than once" in messages[0]
    null_success = [
        t.with_columns(pl.lit(None, dtype=pl.Boolean).alias("success")) for t in duplicated
    ]
    messages = []
    for table in null_success:
        with pytest.raises(SchemaError) as info:
            paired.summarize(table, n_resamples=50)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@HYPOTHESIS
@given(seed=st.integers(0, 2**32 - 1), tasks=st.integers(1, 25))
def test_cohort_filter_equals_filtering_by_hand(seed: int, tasks: int) -> None:
    frame = random_forks(np.random.default_rng(seed), tasks=tasks)
    by_hand = frame.filter(pl.col("factual_success"))
    if by_hand.height == 0:
        with pytest.raises(SchemaError, match="empty"):
            paired.summarize(by_hand, n_resamples=50)
        return
    got = paired.summarize(frame, cohort="factual_success", n_resamples=50)
    expected = paired.summarize(by_hand, n_resamples=50)
    # the design grid comes from the whole table: a cell only reachable by carry-forward of
    # factual failures is absent by hand; compare the cells that exist in both
    keys = ["condition", "delay", "method"]
    assert_frame_equal(got.join(expected.select(keys), on=keys, how="semi"), expected)
    assert (
        got.join(expected, on=keys, how="anti")["n"].sum()
        == got.join(expected, on=keys, how="anti")["carried_forward"].sum()
    )


# ------------------------------------------------------------------------------------------
# contrast
# ------------------------------------------------------------------------------------------


CONTRAST = forks_frame(
    [
        # task a: stale rescue, clean harm  -> delta +2
        ("a", "stale2", "none", None, False),
        ("a", "stale2", "refresh", 0, True),
        ("a", "clean", "none", None, True),
        ("a", "clean", "refresh", 0, False),
        # task b: stale kept, clean kept -> 0
        ("b", "stale2", "none", None, True),
        ("b", "stale2", "refresh", 0, True),
        ("b", "clean", "none", None, True),
        ("b", "clean", "refresh", 0, True),
        # task c: only stale, rescue (no clean pair) -> in the bootstrap, not in the sign flip
        ("c", "stale2", "none", None, False),
        ("c", "stale2", "refresh", 0, True),
    ]
)


def test_contrast_hand_table(frame_kind: Callable) -> None:
    got = paired.contrast(frame_kind(CONTRAST), "stale2", "clean", **FAST)
    assert got.columns == [
        "a",
        "b",
        "delay",
        "method",
        "n_tasks",
        "n_a",
        "n_b",
        "effect_a",
        "effect_b",
        "difference",
        "ci_low",
        "ci_high",
        "p_value",
        "ci_method",
        "sparse",
        "test",
        "ci_inverts_test",
    ]
    row = got.row(0, named=True)
    assert (row["a"], row["b"], row["n_tasks"], row["n_a"], row["n_b"]) == (
        "stale2",
        "clean",
        3,
        3,
        2,
    )
    assert row["effect_a"] == pytest.approx(2 / 3)
    assert row["effect_b"] == -0.5
    assert row["difference"] == pytest.approx(2 / 3 + 0.5)
    assert row["p_value"] == 1.0  # one nonzero delta among the two paired tasks


def test_contrast_p_value_equals_brute_force_on_task_deltas() -> None:
    rng = np.random.default_rng(21)
    frame = random_forks(rng, tasks=14, methods=("refresh",), delays=(0,), exclusions=False)
    got = paired.contrast(frame, "stale2", "clean", **FAST)
    pairs = (
        paired.pairs(frame)
        .collect()
        .with_columns((pl.col("y1").cast(pl.Int64) - pl.col("y0").cast(pl.Int64)).alias("d"))
    )
    wide = pairs.pivot("condition", index="task_id", values="d").drop_nulls()
    delta = (wide["stale2"] - wide["clean"]).to_numpy()
    assert got["p_value"].item() == pytest.approx(brute_force_sign_flip(delta), abs=1e-12)


def test_contrast_uses_joint_task_draws() -> None:
    # perfectly correlated conditions: every task has the same effect under both, so the
    # difference is 0 in every joint resample (separate resampling would give a wide interval)
    rows = []
    for i, (y0, y1) in enumerate([(False, True), (True, False), (True, True)] * 5):
        for condition in ("stale2", "clean"):
            rows += [(f"t{i}", condition, "none", None, y0), (f"t{i}", condition, "refresh", 0, y1)]
    got = paired.contrast(forks_frame(rows), "stale2", "clean", **FAST)
    assert got.select("difference", "ci_low", "ci_high", "p_value").row(0) == (0.0, 0.0, 0.0, 1.0)


def test_contrast_errors() -> None:
    with pytest.raises(ParameterError) as info:
        paired.contrast(CONTRAST, "stale9", "clean", **FAST)
    assert str(info.value) == (
        "parameter `a` is 'stale9'; forks has no recovery rows with that condition "
        "(conditions: clean, stale2)."
    )
    with pytest.raises(ParameterError) as info:
        paired.contrast(CONTRAST, "clean", "missing", **FAST)
    assert str(info.value).startswith("parameter `b` is 'missing'")
    with pytest.raises(ParameterError) as info:
        paired.contrast(CONTRAST, "clean", "clean", **FAST)
    assert str(info.value) == "parameters `a` and `b` are both 'clean'; contrast two conditions."
    with pytest.raises(ParameterError, match=r"parameter `a` is 3; it must be a condition label"):
        paired.contrast(CONTRAST, 3, "clean")  # type: ignore[arg-type]


def test_contrast_cells_need_both_conditions() -> None:
    frame = CONTRAST.vstack(forks_frame([("a", "stale2", "refresh", 4, True)]))
    got = paired.contrast(frame, "stale2", "clean", **FAST)
    assert got["delay"].to_list() == [0]


# ------------------------------------------------------------------------------------------
# rescue overlap
# ------------------------------------------------------------------------------------------


def test_rescue_overlap(frame_kind: Callable) -> None:
    frame = forks_frame(
        [
            ("a", "stale2", "none", None, False),
            ("a", "stale2", "refresh", 4, True),
            ("a", "stale2", "content_ablated", 4, True),
            ("b", "stale2", "none", None, False),
            ("b", "stale2", "refresh", 4, True),
            ("b", "stale2", "content_ablated", 4, False),
            ("c", "stale2", "none", None, False),
            ("c", "stale2", "content_ablated", 4, True),
            ("d", "stale2", "none", None, True),
            ("d", "stale2", "refresh", 4, True),
        ]
    )
    got = paired.rescue_overlap(frame_kind(frame), "refresh", "content_ablated")
    assert got.row(0, named=True) == {
        "a": "refresh",
        "b": "content_ablated",
        "condition": "stale2",
        "delay": 4,
        "n_a": 3,
        "n_b": 3,
        "n_both": 2,
        "rescue_a": 2,
        "rescue_b": 2,
        "rescue_both": 1,
    }


def test_rescue_overlap_old_keyword_names_warn() -> None:
    forks = synth.generate("forks", 10, seed=1)["forks"]
    with pytest.warns(DeprecationWarning, match=r"parameter `method_[ab]` is now `[ab]`"):
        old = paired.rescue_overlap(forks, method_a="refresh", method_b="replan_only")
    assert old.equals(paired.rescue_overlap(forks, "refresh", "replan_only"))


def test_rescue_overlap_errors() -> None:
    with pytest.raises(ParameterError) as info:
        paired.rescue_overlap(HAND, "refresh", "none")
    assert str(info.value) == (
        "parameter `b` is 'none'; it must be a recovery method (not 'none')."
    )
    with pytest.raises(ParameterError, match=r"both 'refresh'; compare two methods"):
        paired.rescue_overlap(HAND, "refresh", "refresh")
    with pytest.raises(ParameterError) as info:
        paired.rescue_overlap(HAND, "refresh", "replan_only")
    assert str(info.value) == (
        "parameter `b` is 'replan_only'; forks has no rows with that method (methods: refresh)."
    )


# ------------------------------------------------------------------------------------------
# policy
# ------------------------------------------------------------------------------------------


POLICY_FORKS = forks_frame(
    [
        ("a", "clean", "none", None, True),
        ("a", "clean", "refresh", 1, False),
        ("a", "stale2", "none", None, False),
        ("a", "stale2", "refresh", 1, True),
        ("a", "stale2", "refresh", 2, False),
        ("b", "clean", "none", None, False),
        ("b", "clean", "refresh", 1, False),
        ("b", "stale2", "none", None, True),
        ("b", "stale2", "refresh", 1, False),
        ("b", "stale2", "refresh", 2, True),
    ],
    perturb_action=[0] * 10,
    end_action=[9, None, 9, None, None, 9, None, 9, None, None],
)
POLICY = pl.DataFrame(
    {
        "task_id": ["a", "a", "b", "b"],
        "condition": ["clean", "stale2", "clean", "stale2"],
        "delay": [None, 1, 1, 2],
    },
    schema={"task_id": pl.String, "condition": pl.String, "delay": pl.Int64},
)


def test_evaluate_policy_hand_table(frame_kind: Callable) -> None:
    got = paired.evaluate_policy(frame_kind(POLICY), frame_kind(POLICY_FORKS), **FAST)
    assert got.columns == [
        "condition",
        "n",
        "base_rate",
        "policy_rate",
        "gain",
        "rescue",
        "harm",
        "interventions",
        "intervention_rate",
        "clean_touch_rate",
        "ci_low",
        "ci_high",
        "p_value",
        "ci_method",
        "sparse",
        "test",
        "ci_inverts_test",
        "p_sign_flip",
        *(
            f"{rate}_{end}"
            for rate in ("intervention_rate", "clean_touch_rate")
            for end in ("ci_low", "ci_high", "ci_method", "test")
        ),
    ]
    # the rates' task-clustered intervals hold their rates; no clean episode, no interval
    for rate in ("intervention_rate", "clean_touch_rate"):
        for row in got.iter_rows(named=True):
            if row[rate] is None:
                assert (row[f"{rate}_ci_low"], row[f"{rate}_ci_method"]) == (None, None)
            else:
                assert row[f"{rate}_ci_low"] <= row[rate] <= row[f"{rate}_ci_high"]
                assert row[f"{rate}_ci_high"] > row[f"{rate}_ci_low"]
                assert row[f"{rate}_test"] == "exact-binomial"
    rows = got.select(
        "condition",
        "n",
        "base_rate",
        "policy_rate",
        "gain",
        "rescue",
        "harm",
        "interventions",
        "intervention_rate",
        "clean_touch_rate",
    ).rows()
    assert rows == [
        ("clean", 2, 0.5, 0.5, 0.0, 0, 0, 1, 0.5, 0.5),
        ("stale2", 2, 0.5, 1.0, 0.5, 1, 0, 2, 1.0, None),
        (None, 4, 0.5, 0.75, 0.25, 1, 0, 3, 0.75, 0.5),
    ]
    overall = got.row(2, named=True)
    assert overall["p_value"] == 1.0  # one task with a nonzero gain


def test_policy_point_after_the_end_is_carried_and_not_an_intervention() -> None:
    forks = POLICY_FORKS.with_columns(
        pl.when(
            (pl.col("task_id") == "b")
            & (pl.col("condition") == "clean")
            & (pl.col("method") == "none")
        )
        .then(1)
        .otherwise(pl.col("end_action"))
        .alias("end_action")
    ).filter(
        ~(
            (pl.col("task_id") == "b")
            & (pl.col("condition") == "clean")
            & (pl.col("method") == "refresh")
        )
    )
    # the design grid still has clean/refresh/1 from task a: b's clean point is carried
    got = paired.evaluate_policy(POLICY, forks, **FAST)
    assert (
        by_key(got.filter(pl.col("condition").is_not_null()), condition="clean")["interventions"]
        == 0
    )


def test_policy_errors() -> None:
    bad = POLICY.with_columns(pl.lit(4, dtype=pl.Int64).alias("delay"))
    with pytest.raises(InputError) as info:
        paired.evaluate_policy(bad, POLICY_FORKS, **FAST)
    assert str(info.value) == (
        "decisions: 4 decisions choose a recovery point with no usable `refresh` pair in forks "
        "(task_id/condition/delay a/clean/4, a/stale2/4, b/clean/4, b/stale2/4); a chosen delay "
        "needs a recovery row paired with a `none` row (or a task that ended before it)."
    )
    missing = POLICY.vstack(
        pl.DataFrame(
            {"task_id": ["z"], "condition": ["clean"], "delay": [None]}, schema=POLICY.schema
        )
    )
    with pytest.raises(InputError) as info:
        paired.evaluate_policy(missing, POLICY_FORKS, **FAST)
    assert str(info.value) == (
        "decisions: 1 decision without a recovery point has no shared `none` row in forks "
        "(task_id/condition/delay z/clean/null); the no-recovery outcome of every episode must be "
        "known."
    )
    with pytest.raises(SchemaError) as info:
        paired.evaluate_policy(POLICY.vstack(POLICY.head(1)), POLICY_FORKS, **FAST)
    assert str(info.value) == (
        "decisions: 1 key appears more than once (task_id/condition a/clean); each (task_id, "
        "condition) must be unique."
    )
    with pytest.raises(ParameterError) as info:
        paired.evaluate_policy(POLICY, POLICY_FORKS, method="replan_only", **FAST)
    assert str(info.value) == (
        "parameter `method` is 'replan_only'; forks has no recovery rows with that method "
        "(methods: refresh)."
    )
    two = POLICY_FORKS.vstack(
        forks_frame([("a", "clean", "replan_only", 1, True)]).with_columns(
            pl.lit(0, dtype=pl.Int64).alias("perturb_action"),
            pl.lit(None, dtype=pl.Int64).alias("end_action"),
        )
    )
    with pytest.raises(ParameterError) as info:
        paired.evaluate_policy(POLICY, two, **FAST)
    assert str(info.value) == (
        "parameter `method` is not given and forks has 2 recovery methods (refresh, "
        "replan_only); name the one the policy applies."
    )
    assert paired.evaluate_policy(POLICY, two, method="refresh", **FAST).height == 3


def test_policy_against_a_reference_policy(frame_kind: Callable) -> None:
    always = POLICY.with_columns(pl.lit(1, dtype=pl.Int64).alias("delay"))
    got = paired.evaluate_policy(
        frame_kind(POLICY), frame_kind(POLICY_FORKS), reference=frame_kind(always), **FAST
    )
    rows = got.select(
        "condition", "n", "base_rate", "policy_rate", "gain", "rescue", "harm", "interventions"
    ).rows()
    # policy: a/clean never (T), a/stale2 @1 (T), b/clean @1 (F), b/stale2 @2 (T);
    # reference, always @1: F, T, F, F.
    assert rows == [
        ("clean", 2, 0.0, 0.5, 0.5, 1, 0, 1),
        ("stale2", 2, 0.5, 1.0, 0.5, 1, 0, 2),
        (None, 4, 0.25, 0.75, 0.5, 2, 0, 3),
    ]
    pooled = got.row(2, named=True)
    assert pooled["p_sign_flip"] == 0.5  # two tasks, d = +1 each: 2 of 4 flips
    # the cluster-melded hull's own p-value: never below its sign-flip part's
    assert pooled["test"] == "cluster-melded"
    assert pooled["p_value"] >= 0.5
    itself = paired.evaluate_policy(POLICY, POLICY_FORKS, reference=POLICY, **FAST)
    assert itself["gain"].to_list() == [0.0] * 3
    assert itself["p_value"].to_list() == [1.0] * 3


def test_policy_reference_errors() -> None:
    with pytest.raises(InputError) as info:
        paired.evaluate_policy(POLICY, POLICY_FORKS, reference=POLICY.head(3), **FAST)
    assert str(info.value) == (
        "reference: 1 decision has no reference decision (task_id/condition b/stale2); the "
        "reference decisions must list every episode of `decisions`."
    )
    bad = POLICY.with_columns(pl.lit(4, dtype=pl.Int64).alias("delay"))
    with pytest.raises(InputError) as info:
        paired.evaluate_policy(POLICY, POLICY_FORKS, reference=bad, **FAST)
    assert str(info.value) == (
        "reference: 4 decisions choose a recovery point with no usable `refresh` pair in forks "
        "(task_id/condition/delay a/clean/4, a/stale2/4, b/clean/4, b/stale2/4); a chosen delay "
        "needs a recovery row paired with a `none` row (or a task that ended before it)."
    )
    with pytest.raises(SchemaError, match=r"^decisions: 1 key appears more than once"):
        paired.evaluate_policy(
            POLICY, POLICY_FORKS, reference=POLICY.vstack(POLICY.head(1)), **FAST
        )


def test_policy_by_and_pair_by() -> None:
    forks = pl.concat([POLICY_FORKS.with_columns(pl.lit(m).alias("model")) for m in ("m1", "m2")])
    decisions = pl.concat([POLICY.with_columns(pl.lit(m).alias("model")) for m in ("m1", "m2")])
    got = paired.evaluate_policy(decisions, forks, pair_by="model", by="model", **FAST)
    assert got.select("model", "condition", "n", "gain").rows() == [
        ("m1", "clean", 2, 0.0),
        ("m1", "stale2", 2, 0.5),
        ("m1", None, 4, 0.25),
        ("m2", "clean", 2, 0.0),
        ("m2", "stale2", 2, 0.5),
        ("m2", None, 4, 0.25),
    ]
    pooled = paired.evaluate_policy(decisions, forks, pair_by="model", **FAST)
    assert pooled.select("condition", "n", "gain").rows() == [
        ("clean", 4, 0.0),
        ("stale2", 4, 0.5),
        (None, 8, 0.25),
    ]


def test_policy_without_clean_episodes_has_null_clean_touch_rate() -> None:
    got = paired.evaluate_policy(
        POLICY.filter(pl.col("condition") == "stale2"), POLICY_FORKS, **FAST
    )
    assert got["clean_touch_rate"].to_list() == [None, None]


def test_sample_files_exist() -> None:
    samples = Path(__file__).resolve().parents[1] / "data_samples" / "paired"
    for name in ("main_forks", "mechanism_forks", "policy_forks", "policy_decisions"):
        assert (samples / f"{name}.parquet").is_file()


# ------------------------------------------------------------------------------------------
# issue 16: intervals that agree with the test, one-sided tests, adjusted p-values
# ------------------------------------------------------------------------------------------


def test_default_interval_same_with_extra_one_valued_by_column() -> None:
    forks = synth.generate("forks", 200, seed=3)["forks"]
    plain = paired.summarize(forks, **FAST)
    extra = paired.summarize(forks.with_columns(pl.lit("m1").alias("model")), by="model", **FAST)
    assert plain["ci_low"].to_list() == extra["ci_low"].to_list()
    assert plain["ci_high"].to_list() == extra["ci_high"].to_list()
    assert set(plain["ci_method"]) <= {"fay-lumbard", "cluster-melded"}
    excluded = (plain["ci_low"] > 0) | (plain["ci_high"] < 0)
    assert excluded.to_list() == (plain["p_value"] < 0.05).to_list()


def test_alternative_and_adjust_pass_through() -> None:
    forks = synth.generate("forks", 120, seed=4)["forks"]
    two = paired.summarize(forks, **FAST)
    greater = paired.summarize(forks, **FAST, alternative="greater", adjust="holm")
    # One-sided p: half the two-sided one on the side of the data (symmetric null).
    for p2, p1, effect in zip(two["p_value"], greater["p_value"], two["effect"], strict=True):
        if effect > 0:
            assert p1 == pytest.approx(p2 / 2, rel=1e-9)
    assert (greater["ci_high"] == 1.0).all()
    assert greater["p_adjusted"].to_list() == pytest.approx(
        stats.adjust_p_values(greater["p_value"].to_numpy(), "holm").tolist()
    )
    contrast = paired.contrast(forks, "stale2", "clean", **FAST, adjust="bh")
    assert {"ci_method", "sparse", "p_adjusted"} <= set(contrast.columns)
    with pytest.raises(ParameterError, match=r"parameter `alternative` is 'up'"):
        paired.summarize(forks, alternative="up")
    with pytest.raises(ParameterError, match=r"parameter `adjust` is 'sidak'"):
        paired.contrast(forks, "stale2", "clean", adjust="sidak")
