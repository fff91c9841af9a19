"""Tests of recoverylab.paired._rules: one statement of the pairing rules for both paths.

The join path reads the rules on booleans per row, the bit-set path on 64-bit words per task
(bit k = recovery point k); these tests hold the two readings to each other bit by bit, and the
integer reading of ``after_end`` (the bit layout's tables) to the expression one.
"""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from recoverylab.paired import _rules as rules

WORD = st.integers(0, 2**63 - 1)


@settings(max_examples=50, deadline=None)
@given(words=st.lists(WORD, min_size=5, max_size=5), bit=st.integers(0, 62))
def test_rules_on_words_are_the_rules_on_each_bit(words: list[int], bit: int) -> None:
    names = ["present", "has_none", "ended", "y0", "y1"]
    frame = pl.DataFrame(
        {n: pl.Series([w], dtype=pl.UInt64) for n, w in zip(names, words, strict=True)}
    )
    present, has_none, ended, y0, y1 = (pl.col(n) for n in names)

    def classes(p: pl.Expr, h: pl.Expr, e: pl.Expr, a: pl.Expr, b: pl.Expr) -> list[pl.Expr]:
        state = rules.standing(p, h, e)
        found = {**state, **rules.outcomes(state["pair"], state["carried"], a, b)}
        return [v.alias(k) for k, v in found.items()]

    on_words = frame.select(classes(present, has_none, ended, y0, y1)).row(0, named=True)
    one = pl.lit(1 << bit, dtype=pl.UInt64)
    as_bool = [((pl.col(n) & one) != 0) for n in names]
    on_bits = frame.select(classes(*as_bool)).row(0, named=True)
    for name, word in on_words.items():
        assert bool(word & (1 << bit)) == on_bits[name], name


def test_after_end_reads_integers_and_expressions_alike() -> None:
    frame = pl.DataFrame(
        {"perturb_action": [2, 2, 2, None, 3], "end_action": [5, 4, 3, 4, None]},
        schema={"perturb_action": pl.Int64, "end_action": pl.Int64},
    ).with_columns(delay=pl.lit(2, dtype=pl.Int64))
    got = frame.select(rules.after_end(pl.col("delay"), rules.run_gap()).alias("x"))["x"]
    # perturb_action + delay >= end_action (seed §3.1); no end, no carry-forward
    assert got.to_list() == [False, True, True, None, None]
    assert [rules.after_end(2, gap) for gap in (3, 2, 1)] == [False, True, True]


def test_reason_order() -> None:
    frame = pl.DataFrame(
        {
            "paired": [False, False, True, True, True],
            "ended": [True, False, True, False, False],
            "mismatch": [True, True, True, True, False],
        }
    )
    got = frame.select(rules.reason(pl.col("paired"), pl.col("ended"), pl.col("mismatch")))
    assert got.to_series().to_list() == [
        "unpaired",
        "unpaired",
        "after_end",
        "prefix_mismatch",
        None,
    ]
