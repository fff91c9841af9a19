"""Tests of recoverylab.paired._bits: the bit-set path gives the join path's partials exactly.

The public behaviour is covered by tests/test_paired.py (summarize takes the bit-set path when
it applies); here the two paths are compared directly, on random tables and on the cases that
must leave the bit-set path, and its fused contract checks are held to validate's messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import engines, paired
from recoverylab._errors import InputError, SchemaError
from recoverylab.paired import _bits, _budget, _pairs, _shards, _summary
from recoverylab.schema import validate
from tests.test_paired import random_forks

CELLS = ["condition", "delay", "method"]


def rows_per_gb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the budget model spill one partition per ``memory`` rows (memory in GB)."""
    monkeypatch.setattr(_budget, "FIXED", 0)
    monkeypatch.setattr(_budget, "STATE_PER_ROW", _budget.GB)


def join_partials(frame: pl.DataFrame, **kwargs: object) -> pl.DataFrame:
    """Partials through the join of _pairs (the reference implementation)."""
    by = kwargs.get("by", ())
    table, by_keys = _pairs.prepare(frame, pair_by=kwargs.get("pair_by", ()), by=by)
    query, fast, _ = _summary.summary_query(table, _pairs.design_grid(table), by_keys, "full")
    cells = [*CELLS, *by_keys]
    return _canonical(_summary._as_partials(query, fast, cells).collect(), cells)


def bit_partials(frame: object, **kwargs: object) -> pl.DataFrame:
    part = _summary.partials(frame, **kwargs).collect()
    cells = [c for c in part.columns if c not in ("d", "n", "count", *_summary.PARTIAL_COUNTS)]
    return _canonical(part, cells)


def _canonical(part: pl.DataFrame, cells: list[str]) -> pl.DataFrame:
    values = ["count", *_summary.PARTIAL_COUNTS]
    return (
        part.group_by([*cells, "d", "n"])
        .agg(pl.col(v).sum() for v in values)
        .sort([*cells, "d", "n"], nulls_last=False)
    )


def uses_bits(frame: object, **kwargs: object) -> bool:
    """Whether summarize's counting took the bit-set path for these arguments."""
    seen: list[str] = []
    _summary.partials(frame, progress=seen.append, **kwargs)
    return "paired through per-task bit sets" in seen


HYPOTHESIS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HYPOTHESIS
@given(
    seed=st.integers(0, 2**32 - 1),
    tasks=st.integers(1, 30),
    exclusions=st.booleans(),
    drop=st.sampled_from([(), ("prefix_hash",), ("end_action",), ("perturb_action", "end_action")]),
)
def test_bit_path_equals_join_path(
    seed: int, tasks: int, exclusions: bool, drop: tuple[str, ...]
) -> None:
    rng = np.random.default_rng(seed)
    frame = random_forks(rng, tasks=tasks, exclusions=exclusions).drop(drop)
    assert uses_bits(frame)
    assert_frame_equal(bit_partials(frame), join_partials(frame))
    models = random_forks(rng, tasks=tasks, models=("m1", "m2"), exclusions=exclusions)
    kwargs = {"pair_by": "model", "by": "model"}
    assert_frame_equal(bit_partials(models, **kwargs), join_partials(models, **kwargs))
    family = frame.with_columns(pl.col("task_id").str.slice(0, 3).alias("family"))
    assert_frame_equal(bit_partials(family, by="family"), join_partials(family, by="family"))


def test_run_ends_null_negative_and_beyond_the_last_delay() -> None:
    frame = pl.DataFrame(
        {
            "task_id": ["t1", "t2", "t2", "t2", "t3", "t3", "t4", "t4", "t4"],
            "condition": ["stale2"] * 9,
            "method": ["none", "none", "refresh", "refresh", "none", "refresh"]
            + ["none"]
            + ["refresh"] * 2,
            "delay": [None, None, 0, 5, None, 0, None, 0, 5],
            "success": [False, True, False, True, False, True, True, True, False],
            # t1 ended before its perturbation; t2 has no end; t3 ends 2 actions after it;
            # t4 long after the last candidate point
            "perturb_action": [3, None, None, None, 4, None, 1, None, None],
            "end_action": [2, 9, None, None, 6, None, 100, None, None],
        }
    )
    assert uses_bits(frame)
    got = bit_partials(frame)
    assert_frame_equal(got, join_partials(frame))
    assert got["carried_forward"].sum() == 3  # t1 at delays 0 and 5, t3 at delay 5
    late = pl.concat(
        [
            frame,
            frame.filter(pl.col("task_id") == "t3", pl.col("method") != "none").with_columns(
                pl.lit(5, dtype=pl.Int64).alias("delay")
            ),
        ]
    )
    with pytest.raises(InputError, match=r"1 recovery row is at or after the end .* t3/stale2"):
        paired.summarize(late, n_resamples=50)


@pytest.mark.parametrize(
    ("rows", "kwargs"),
    [
        # a delay-specific none row needs the join (its precedence over the shared row)
        (
            [
                ("t1", "c", "none", None, True),
                ("t1", "c", "none", 0, False),
                ("t1", "c", "refresh", 0, True),
            ],
            {},
        ),
        # a factual cohort filter is applied on branch rows
        (
            [("t1", "c", "none", None, True), ("t1", "c", "refresh", 0, True)],
            {"cohort": "factual_success"},
        ),
    ],
)
def test_cases_that_take_the_join_path(rows: list[tuple], kwargs: dict) -> None:
    frame = pl.DataFrame(
        rows,
        schema=["task_id", "condition", "method", "delay", "success"],
        orient="row",
    ).with_columns(pl.lit(True).alias("factual_success"))
    assert not uses_bits(frame, **kwargs)


def test_pair_by_outside_by_takes_the_per_task_join() -> None:
    frame = random_forks(np.random.default_rng(3), tasks=5, models=("m1", "m2"))
    assert not uses_bits(frame, pair_by="model")


def test_by_value_varying_within_a_task_takes_the_join_path() -> None:
    frame = random_forks(np.random.default_rng(4), tasks=6, exclusions=False)
    varying = frame.with_columns(
        pl.when(pl.col("method") == "none").then(pl.lit("a")).otherwise(pl.lit("b")).alias("tag")
    )
    assert not uses_bits(varying, by="tag")
    got = bit_partials(varying, by="tag")
    assert_frame_equal(got, join_partials(varying, by="tag"))
    # a pair takes the recovery row's value; a carried-forward pair the none row's
    from_none = got.filter(pl.col("tag") == "a", pl.col("n") > 0)
    assert from_none.height > 0
    assert from_none["count"].sum() == from_none["carried_forward"].sum()


def test_more_points_than_the_words_hold_take_the_join_path() -> None:
    delays = range(_bits.MAX_WORDS * 63)
    rows = [("t1", "c", "none", None, False)] + [("t1", "c", "refresh", d, True) for d in delays]
    frame = pl.DataFrame(
        rows, schema=["task_id", "condition", "method", "delay", "success"], orient="row"
    )
    assert not uses_bits(frame)
    assert paired.summarize(frame, n_resamples=50)["rescue"].sum() == len(delays)


def test_two_words_of_points() -> None:
    rng = np.random.default_rng(5)
    frame = random_forks(
        rng,
        tasks=8,
        conditions=("c1", "c2", "c3"),
        methods=("m1", "m2", "m3", "m4"),
        delays=tuple(range(8)),
    )
    assert frame.select("condition", "method", "delay").n_unique() > 63
    assert uses_bits(frame)
    assert_frame_equal(bit_partials(frame), join_partials(frame))


def _validate_message(frame: pl.DataFrame, key: tuple[str, ...] = ()) -> str:
    with pytest.raises(SchemaError) as info:
        validate(frame, "forks", key=key)
    return str(info.value)


@pytest.mark.parametrize(
    "broken",
    [
        # duplicate branch keys (found by the bit count of a task)
        lambda f: pl.concat([f, f.head(3)]),
        # a null success, a null task id, a null condition
        lambda f: f.with_columns(
            pl.when(pl.int_range(pl.len()) == 4)
            .then(None)
            .otherwise(pl.col("success"))
            .alias("success")
        ),
        lambda f: f.with_columns(
            pl.when(pl.int_range(pl.len()) == 2)
            .then(None)
            .otherwise(pl.col("task_id"))
            .alias("task_id")
        ),
        lambda f: f.with_columns(
            pl.when(pl.int_range(pl.len()) == 2)
            .then(None)
            .otherwise(pl.col("condition"))
            .alias("condition")
        ),
        # recovery rows without a delay; a negative delay
        lambda f: f.with_columns(
            pl.when(pl.col("method") != "none").then(None).otherwise(pl.col("delay")).alias("delay")
        ),
        lambda f: f.with_columns(pl.col("delay") - 5),
        # empty table
        lambda f: f.clear(),
    ],
)
def test_fused_checks_raise_validates_messages(broken: object) -> None:
    frame = broken(random_forks(np.random.default_rng(6), tasks=6, exclusions=False))
    expected = _validate_message(frame)
    with pytest.raises(SchemaError) as info:
        _summary.partials(frame)
    assert str(info.value) == expected


@pytest.mark.parametrize("rows_per_pass", [None, 9])  # 9: a spill of ceil(rows / 9) parts
@pytest.mark.parametrize("ids", ["str", "int"])
@pytest.mark.parametrize(
    "broken",
    [
        # row-level checks: counted by the survey, not per task
        lambda f: f.with_columns(
            pl.when(pl.int_range(pl.len()) == 5)
            .then(-1)
            .otherwise(pl.col("end_action"))
            .alias("end_action")
        ),
        lambda f: f.with_columns(
            pl.when(pl.int_range(pl.len()) == 3)
            .then(-2)
            .otherwise(pl.col("perturb_action"))
            .alias("perturb_action")
        ),
        lambda f: f.with_columns(
            pl.when(pl.int_range(pl.len()) % 7 == 1)
            .then(None)
            .otherwise(pl.col("success"))
            .alias("success")
        ),
        # a delay-specific none row: the join path's survey counts them too
        lambda f: f.with_columns(
            pl.when((pl.col("method") == "none") & ((pl.col("method") == "none").cum_sum() == 1))
            .then(0)
            .otherwise(pl.col("delay"))
            .alias("delay"),
            pl.when(pl.int_range(pl.len()) == 6)
            .then(None)
            .otherwise(pl.col("success"))
            .alias("success"),
        ),
    ],
)
def test_row_level_checks_raise_validates_message_on_every_path(
    broken: object, ids: str, rows_per_pass: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = random_forks(np.random.default_rng(12), tasks=8, exclusions=False)
    frame = broken(frame.sample(fraction=1.0, shuffle=True, seed=3))
    if ids == "int":
        frame = frame.with_columns(pl.col("task_id").str.slice(1).cast(pl.Int64))
    if rows_per_pass is not None:
        rows_per_gb(monkeypatch)
    expected = _validate_message(frame)
    with pytest.raises(SchemaError) as info:
        _summary.partials(frame, memory=rows_per_pass)
    assert str(info.value) == expected


def _set_at(column: str, value: object, every: int, at: int) -> Any:
    """A breakage: ``column`` set to ``value`` on the rows ``at`` modulo ``every``."""
    where = pl.int_range(pl.len()) % every == at
    return lambda f: f.with_columns(
        pl.when(where)
        .then(pl.lit(value, dtype=f.schema[column]))
        .otherwise(pl.col(column))
        .alias(column)
    )


#: Every data check of the contract that a forks row can fail, and a repeated row.
BREAKAGES = {
    "null task": lambda every, at: _set_at("task_id", None, every, at),
    "null condition": lambda every, at: _set_at("condition", None, every, at),
    "null method": lambda every, at: _set_at("method", None, every, at),
    "null success": lambda every, at: _set_at("success", None, every, at),
    "no delay": lambda every, at: _set_at("delay", None, every, at),
    "negative delay": lambda every, at: _set_at("delay", -3, every, at),
    "negative perturb": lambda every, at: _set_at("perturb_action", -1, every, at),
    "negative end": lambda every, at: _set_at("end_action", -2, every, at),
    "repeated rows": lambda every, at: lambda f: pl.concat([f, f.gather_every(every, at)]),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    broken=st.lists(
        st.tuples(st.sampled_from(sorted(BREAKAGES)), st.integers(5, 60), st.integers(0, 4)),
        min_size=1,
        max_size=3,
    ),
    order=st.integers(0, 1000),
    ids=st.sampled_from(["str", "int"]),
    rows_per_pass=st.sampled_from([None, 9]),
)
def test_combined_breakages_raise_validates_first_message(
    broken: list[tuple[str, int, int]], order: int, ids: str, rows_per_pass: int | None
) -> None:
    frame = random_forks(np.random.default_rng(order), tasks=8, exclusions=False)
    frame = frame.sample(fraction=1.0, shuffle=True, seed=order)
    if ids == "int":
        frame = frame.with_columns(pl.col("task_id").str.slice(1).cast(pl.Int64))
    for name, every, at in broken:
        frame = BREAKAGES[name](every, at)(frame)
    try:
        validate(frame, "forks")
    except SchemaError as error:
        expected: str | None = str(error)
    else:
        # a breakage can miss every row it could break (null delays on `none` rows only)
        expected = None
    with pytest.MonkeyPatch.context() as patch:
        if rows_per_pass is not None:
            rows_per_gb(patch)
        if expected is None:
            _summary.partials(frame, memory=rows_per_pass)
            return
        with pytest.raises(SchemaError) as info:
            _summary.partials(frame, memory=rows_per_pass)
    assert str(info.value) == expected


def test_duplicates_within_pair_by_are_found() -> None:
    frame = random_forks(np.random.default_rng(7), tasks=5, models=("m1", "m2"), exclusions=False)
    doubled = pl.concat([frame, frame.filter(pl.col("model") == "m2").head(2)])
    expected = _validate_message(doubled, ("model",))
    with pytest.raises(SchemaError) as info:
        paired.summarize(doubled, pair_by="model", by="model", n_resamples=50)
    assert str(info.value) == expected


def test_partials_of_shards_add_up_to_the_whole(tmp_path: object) -> None:
    frame = random_forks(np.random.default_rng(8), tasks=30)
    tasks = frame["task_id"].unique().sort()
    design = _pairs.design_grid(_pairs.prepare(frame)[0])
    shards = [
        _summary.partials(frame.filter(pl.col("task_id").is_in(part)), design=design).collect()
        for part in (tasks[:10], tasks[10:17], tasks[17:])
    ]
    finished = _summary.finish(pl.concat(shards), n_resamples=200)
    assert_frame_equal(finished, paired.summarize(frame, n_resamples=200))


def test_finish_raises_on_rows_after_the_end() -> None:
    part = pl.DataFrame(
        {"condition": ["c"], "delay": [1], "method": ["m"], "d": [0], "n": [0], "count": [1]}
    ).with_columns(
        *(pl.lit(1 if c == "after_end" else 0).alias(c) for c in _summary.PARTIAL_COUNTS)
    )
    with pytest.raises(InputError, match="1 recovery row is at or after the end"):
        _summary.finish(part, n_resamples=50)


def test_prefix_fingerprint_finds_planted_mismatches_in_complete_tables() -> None:
    from recoverylab import synth

    frame = synth.generate("forks", 60, seed=2, mismatch_rate=0.03)["forks"]
    got = bit_partials(frame)
    assert got["prefix_mismatch"].sum() > 0
    assert_frame_equal(got, join_partials(frame))
    # two recovery rows of one task trade prefixes across conditions: both are mismatches
    first = frame.filter(pl.col("task_id") == frame["task_id"].min(), pl.col("method") != "none")
    a, b = (
        first.filter(pl.col("condition") == "clean").row(0, named=True),
        first.filter(pl.col("condition") == "stale2").row(0, named=True),
    )
    swapped = frame.with_columns(
        pl.when(
            (pl.col("task_id") == a["task_id"])
            & (pl.col("condition") == a["condition"])
            & (pl.col("method") == a["method"])
            & (pl.col("delay") == a["delay"])
        )
        .then(pl.lit(b["prefix_hash"]))
        .when(
            (pl.col("task_id") == b["task_id"])
            & (pl.col("condition") == b["condition"])
            & (pl.col("method") == b["method"])
            & (pl.col("delay") == b["delay"])
        )
        .then(pl.lit(a["prefix_hash"]))
        .otherwise(pl.col("prefix_hash"))
        .alias("prefix_hash")
    )
    got = bit_partials(swapped)
    assert_frame_equal(got, join_partials(swapped))
    assert got["prefix_mismatch"].sum() == bit_partials(frame)["prefix_mismatch"].sum() + 2


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Count the calls of ``module.name`` (of ``survey_query``: those over every row)."""
    original, calls = getattr(module, name), []

    def counted(*args: Any, **kwargs: Any) -> Any:
        head = kwargs.get("head", args[1] if len(args) > 1 else None)
        if name != "survey_query" or head is None:
            calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("rows_per_pass", [None, 40])
def test_valid_forks_are_read_once(
    rows_per_pass: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = random_forks(np.random.default_rng(13), tasks=12, models=("m1", "m2"))
    kwargs = {"pair_by": "model", "by": "model", "n_resamples": 50}
    sharded = paired.summarize(frame, engine=engines.ShardedEngine(k=3), **kwargs)
    if rows_per_pass is not None:
        rows_per_gb(monkeypatch)
    surveys = _count_calls(monkeypatch, _bits, "survey_query")
    grids = _count_calls(monkeypatch, _shards, "design_points")
    passes = _count_calls(monkeypatch, _bits, "row_indices")
    got = paired.summarize(frame, memory=rows_per_pass, **kwargs)
    # the survey and the design grid were read off the task words of the one pass
    assert (surveys, grids, passes) == ([], [], [1])
    assert_frame_equal(got, sharded)


def test_a_layout_guessed_from_too_few_rows_is_redone(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = random_forks(np.random.default_rng(9), tasks=20).sort("condition", "method")
    original = _bits.sample_counts
    calls: list[int] = []

    def first_rows(forks: object, rows: int = 0) -> pl.DataFrame:
        calls.append(rows)
        return original(forks, rows=7)  # sees one condition and method only

    monkeypatch.setattr(_bits, "sample_counts", first_rows)
    surveys = _count_calls(monkeypatch, _bits, "survey_query")
    assert uses_bits(frame)
    assert calls
    assert surveys == [1]  # the words lacked points: the survey read the keys
    assert_frame_equal(bit_partials(frame), join_partials(frame))


def test_a_shard_without_rows_at_a_design_point_still_carries_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frame = pl.DataFrame(
        {
            "task_id": ["t1", "t1", "t1", "t2", "t2", "t2", "t2"],
            "condition": ["c"] * 7,
            "method": ["none", "refresh", "refresh", "none", "refresh", "refresh", "refresh"],
            "delay": [None, 0, 1, None, 0, 1, 2],
            "success": [False, True, False, True, True, True, False],
            "perturb_action": [1, None, None, 1, None, None, None],
            "end_action": [3, None, None, 9, None, None, None],  # t1 ends before delay 2
        }
    )
    design = _pairs.design_grid(_pairs.prepare(frame)[0])
    passes: list[int] = []
    original = _bits.task_words

    def counted(*args: object, **kwargs: object) -> pl.LazyFrame:
        passes.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_bits, "task_words", counted)
    shards = [
        _summary.partials(frame.filter(pl.col("task_id") == t), design=design).collect()
        for t in ("t1", "t2")
    ]
    assert shards[0].filter(pl.col("delay") == 2)["carried_forward"].sum() == 1
    assert len(passes) == 2  # one pass per shard: the guessed layout had the design's points
    finished = _summary.finish(pl.concat(shards), n_resamples=100)
    assert_frame_equal(finished, paired.summarize(frame, n_resamples=100))


def test_null_and_categorical_keys() -> None:
    frame = random_forks(np.random.default_rng(10), tasks=15, models=("m1", "m2"))
    frame = frame.with_columns(
        pl.when(pl.col("model") == "m2").then(None).otherwise(pl.col("model")).alias("model"),
        pl.when(pl.col("task_id") < "t005").then(None).otherwise(pl.lit("x")).alias("family"),
    )
    kwargs = {"pair_by": "model", "by": ["model", "family"]}
    expected = join_partials(frame, **kwargs)
    assert uses_bits(frame, **kwargs)
    assert_frame_equal(bit_partials(frame, **kwargs), expected)
    categorical = frame.with_columns(pl.col("task_id", "model", "family").cast(pl.Categorical))
    assert_frame_equal(bit_partials(categorical, **kwargs), expected)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), rows_per_pass=st.integers(1, 400))
def test_task_words_spilled_in_hash_partitions_equal_one_pass(
    seed: int, rows_per_pass: int
) -> None:
    rng = np.random.default_rng(seed)
    frame = random_forks(rng, tasks=25, models=("m1", "m2"))
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed % 1000)
    kwargs = {"pair_by": "model", "by": "model"}
    expected = bit_partials(shuffled, **kwargs)
    integer = shuffled.with_columns(pl.col("task_id").str.slice(1).cast(pl.Int64))
    parts = -(-shuffled.height // rows_per_pass)
    grouped: list[int] = []
    original = _bits.group_words

    def counted(*args: Any, **kwargs: Any) -> pl.LazyFrame:
        grouped.append(1)
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        rows_per_gb(patch)
        patch.setattr(_bits, "group_words", counted)
        assert _budget.partitions(shuffled.height, _budget.budget_bytes(rows_per_pass)) == min(
            parts, _budget.MAX_PARTS
        )
        assert_frame_equal(bit_partials(shuffled, memory=rows_per_pass, **kwargs), expected)
        # a spill groups each non-empty partition file on its own (one pass: once)
        assert (len(grouped) > 1) if parts > 1 else (len(grouped) == 1)
        assert_frame_equal(bit_partials(integer, memory=rows_per_pass, **kwargs), expected)
        duplicated = shuffled.vstack(shuffled.head(1))
        with pytest.raises(SchemaError, match="more than once"):
            bit_partials(duplicated, memory=rows_per_pass, **kwargs)
