"""Tests of recoverylab.takeover._packed_units: the per-unit pass on one integer key per attempt.

The integer path (exact ``Enum`` row of the state x 2**32 + the agent's ``Categorical`` code,
counts packed in a word, repeats as bits) must give what the text group-by gives: the same units,
the same summaries, the same errors in the same order. The generators draw names that break
naive keys (a concatenation ``ab`` + ``c`` = ``a`` + ``bc``, NUL bytes, combining marks, the
empty string, agents named like states), and corrupt the attempts in every way the checks know.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import engines, takeover
from recoverylab._errors import InputError, ParameterError, SchemaError
from recoverylab.takeover import _inputs, _packed_units, _stages

#: Names that collide under careless keys: concatenations, NUL, normalisation, case, emptiness.
NAMES = ("a", "b", "ab", "c", "bc", "abc", "", "a\x00", "\x00a", "é", "e\u0301", "ß", "SS", "🙂")

#: Corruptions of the attempts (``none`` thrice: most draws are valid tables).
KINDS = (
    *("none", "none", "none", "long", "duplicate", "gap", "shift", "beyond", "negative"),
    *("null_agent", "null_state", "null_flag", "unknown", "empty"),
)

SETTINGS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    """States and attempts over colliding names, with at most one corruption (named)."""
    state_ids = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    states = pl.DataFrame(
        {
            "state_id": state_ids,
            "workflow_id": [draw(st.sampled_from(("w", "w\x00", "é"))) for _ in state_ids],
            "depth": [draw(st.integers(0, 2)) for _ in state_ids],
            "replay_ok": [draw(st.booleans()) or draw(st.booleans()) for _ in state_ids],
            "expected_ok": [draw(st.booleans()) or draw(st.booleans()) for _ in state_ids],
        }
    ).with_columns(
        ("r" + pl.col("workflow_id") + pl.col("depth").cast(pl.String)).alias("root_cause_id")
    )
    agents = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    rows = []
    for state in state_ids:
        for agent in agents:
            if draw(st.booleans()) or not rows:
                for repeat in range(draw(st.integers(1, 3))):
                    flags = draw(st.lists(st.booleans(), min_size=4, max_size=4))
                    rows.append((state, agent, repeat, *flags))
    attempts = pl.DataFrame(
        rows, schema=["state_id", "agent", "repeat", *takeover.FLAGS], orient="row"
    ).with_columns(pl.col("repeat").cast(pl.Int64))
    kind = draw(st.sampled_from(KINDS))
    return states, corrupt(attempts, kind, draw(st.integers(0, 10**6))), kind


def corrupt(attempts: pl.DataFrame, kind: str, seed: int) -> pl.DataFrame:
    """Break ``attempts`` in one way (``none``: leave it; ``long``: a valid 70-repeat unit)."""
    at = pl.int_range(pl.len()) == seed % attempts.height
    first = attempts.row(seed % attempts.height, named=True)
    if kind == "long":  # repeats 0..69: beyond one 64-bit word, the text path's job
        unit = attempts.filter(at).select("state_id", "agent", *takeover.FLAGS)
        extra = unit.join(pl.DataFrame({"repeat": range(70)}), how="cross")
        same = (pl.col("state_id") == first["state_id"]) & (pl.col("agent") == first["agent"])
        return pl.concat([attempts.filter(~same), extra.select(attempts.columns)])
    if kind == "duplicate":
        return pl.concat([attempts, attempts.filter(at)])
    if kind in ("gap", "shift", "beyond", "negative"):
        value = {"gap": pl.col("repeat") + 5, "shift": pl.col("repeat") + 1}.get(
            kind, pl.lit(64 if kind == "beyond" else -1)
        )
        return attempts.with_columns(
            pl.when(at).then(value).otherwise(pl.col("repeat")).alias("repeat")
        )
    if kind.startswith("null_"):
        column = {"null_agent": "agent", "null_state": "state_id", "null_flag": "passed"}[kind]
        return attempts.with_columns(pl.when(at).then(None).otherwise(pl.col(column)).alias(column))
    if kind == "unknown":
        return attempts.with_columns(
            pl.when(at).then(pl.lit("zz")).otherwise(pl.col("state_id")).alias("state_id")
        )
    if kind == "empty":
        return attempts.head(0)
    return attempts


@contextmanager
def text_path() -> Iterator[None]:
    """Send every per-unit pass to the text group-by."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_inputs, "packed_per_unit", lambda *args, **kwargs: None)
        yield


def outcome(call: Callable[[], pl.DataFrame]) -> tuple[type, str] | pl.DataFrame:
    """The result, or the error type and message."""
    try:
        return call()
    except (InputError, ParameterError, SchemaError) as error:
        return type(error), str(error)


def same(got: object, expected: object) -> None:
    if isinstance(expected, pl.DataFrame):
        assert isinstance(got, pl.DataFrame), got
        assert_frame_equal(got, expected)
    else:
        assert got == expected


@SETTINGS
@given(drawn=tables(), k=st.integers(1, 2))
def test_summaries_and_errors_equal_the_text_group_by(
    drawn: tuple[pl.DataFrame, pl.DataFrame, str], k: int
) -> None:
    states, attempts, _ = drawn
    calls: list[Callable[[], pl.DataFrame]] = [
        lambda: takeover.summarize(states, attempts, k=k, interval="wilson"),
        lambda: takeover.summarize(states, attempts, k=k, n_resamples=20, common_states=True),
        lambda: takeover.score(states, attempts, k=k).collect().sort("state_id", "agent"),
    ]
    packed = [outcome(call) for call in calls]
    with text_path():
        text = [outcome(call) for call in calls]
    for got, expected in zip(packed, text, strict=True):
        same(got, expected)
    # score() always reads every consistency check; summarize() first asks whether any fails
    if not isinstance(packed[0], pl.DataFrame) or not isinstance(packed[2], pl.DataFrame):
        assert packed[0] == packed[2]


@SETTINGS
@given(drawn=tables())
def test_units_equal_the_text_group_by_or_the_pass_declines(
    drawn: tuple[pl.DataFrame, pl.DataFrame, str],
) -> None:
    states, attempts, kind = drawn
    inputs = _inputs.load(states, attempts, ("agent", "depth"), checks="schema")
    table = _inputs._state_table(inputs).collect()
    checks = _inputs.data_checks(_inputs.spec("attempts"), inputs.attempts.collect_schema())
    odd = pl.any_horizontal(*checks.values())
    packed = _packed_units.packed_per_unit(
        inputs.attempts, table, counts=_inputs.unit_flags(), odd=odd
    )
    valid = kind in ("none", "duplicate", "gap", "shift")
    assert (packed is not None) == valid
    if packed is None:
        return
    unit = ["state_id", "agent"]
    got = _packed_units.decoded(_inputs._packed_view(*packed, table, row_checks=True)).collect()
    text = _inputs._per_unit(inputs, _inputs._state_table(inputs), checks).collect()
    got, text = got.sort(unit).drop(_inputs.CODES[3]), text.sort(unit).drop(_inputs.CODES[3])
    repeated = pl.col(_inputs._DISTINCT) < pl.col("repeats")
    # distinct repeats: only "fewer than the rows" is read (then the key check re-reads exactly)
    assert got.select(repeated).equals(text.select(repeated))
    copies = attempts.group_by("state_id", "agent", "repeat").len()["len"].max()
    assert (copies > 1) == bool(text.select(repeated.any()).item())  # type: ignore[operator]
    assert_frame_equal(got.filter(~repeated), text.filter(~repeated))


def test_agent_codes_group_exactly_like_the_names() -> None:
    # Agents whose names differ only after a NUL, by normalisation or by case stay apart, and
    # the partials keyed by (state cell, agent code) decode to the names.
    states = pl.DataFrame(
        {
            "state_id": ["s", "s\x00"],
            "workflow_id": ["w", "w"],
            "root_cause_id": ["r", "r"],
            "depth": [0, 0],
            "replay_ok": [True, True],
            "expected_ok": [True, True],
        }
    )
    agents = ["a", "a\x00", "é", "e\u0301", "SS", "ß"]
    attempts = pl.DataFrame(
        {
            "state_id": [s for s in ("s", "s\x00") for _ in agents],
            "agent": agents * 2,
            "repeat": [0] * 12,
            **{flag: [i % 2 == 0 for i in range(12)] for flag in takeover.FLAGS},
        }
    )
    for interval in ("wilson", "bootstrap"):
        out = takeover.summarize(states, attempts, k=1, interval=interval, n_resamples=20)
        passed = {agent: 2 * (i % 2 == 0) for i, agent in enumerate(agents)}
        assert out["agent"].to_list() == sorted(agents)
        assert out["attempted_states"].to_list() == [2] * 6
        assert out["n_passed"].to_list() == [passed[agent] for agent in sorted(agents)]


def test_codes_outside_the_namespace_stay_categorical() -> None:
    frame = pl.LazyFrame({"user": ["x"], "ours": ["y"]}).with_columns(
        pl.col("user").cast(pl.Categorical)
    )
    ours = frame.with_columns(pl.lit(_packed_units.coded(pl.Series(["y"]))).alias("ours"))
    schema = _packed_units.decoded(ours).collect_schema()
    assert schema["user"] == pl.Categorical()
    assert schema["ours"] == pl.String


@SETTINGS
@given(values=st.lists(st.floats(0.0, 1.0), max_size=200))
def test_fixed_point_parts_add_up_to_the_stable_sum(values: list[float]) -> None:
    frame = pl.DataFrame({"x": values}, schema={"x": pl.Float64})
    high, low = _stages.fixed_point_parts(pl.col("x"))
    parts = frame.select(high.alias("high"), low.alias("low"))
    assert parts.select((pl.col("low") < 2**30).all()).item() in (True, None)
    whole = frame.select(_stages.to_fixed_point(pl.col("x"))).to_series()
    split = parts.select(
        pl.col("high").cast(pl.Int128) * pl.lit(2**30, pl.Int128) + pl.col("low")
    ).to_series()
    assert whole.to_list() == split.to_list()
    summed = frame.select(_stages.from_fixed_point_parts(high.sum(), low.sum())).item()
    assert summed == frame.select(_stages.stable_sum(pl.col("x"))).item()


@pytest.mark.parametrize("interval", ["wilson", "bootstrap"])
def test_cell_partials_and_shards_give_the_same_cells(interval: str) -> None:
    # Without the bootstrap, partials are per cell and per shard: distinct workflows and root
    # causes add up over shards, and the pass@ sums are exact, so every split agrees, and the
    # counts equal those the bootstrap's per-workflow partials give.
    tables_ = takeover_tables()
    options = {"k": 2, "n_resamples": 30, "interval": interval}
    whole = takeover.summarize(*tables_, **options)
    for k in (2, 5):
        sharded = takeover.summarize(*tables_, engine=engines.ShardedEngine(k=k), **options)
        assert_frame_equal(sharded, whole)
    other = takeover.summarize(*tables_, **{**options, "interval": "bootstrap"})
    # the counts and estimates agree; the intervals and their method and test columns differ
    counts = [c for c in whole.columns if "_ci_" not in c and c not in ("ci_method", "test")]
    assert_frame_equal(whole.select(counts), other.select(counts))


def takeover_tables() -> tuple[pl.DataFrame, pl.DataFrame]:
    from recoverylab import synth

    tables_ = synth.generate("takeover", 15, seed=4)
    return tables_["states"], tables_["attempts"]
