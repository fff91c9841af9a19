"""The per-unit pass of takeover on one integer key per attempt, with its counts packed in words.

Grouping millions of attempts by (``state_id``, ``agent``) text is most of the cost of every
takeover verb: polars encodes both strings of every row into one binary key. This module builds
the same per-unit table (:func:`recoverylab.takeover._inputs.checked_units`' one pass) from

* one 64-bit key per attempt: the state's row in `states` (an exact ``Enum`` lookup of
  ``state_id``; null for a state not in `states`) times 2**32 plus the agent's code (a
  ``Categorical`` of its own, exact: its categories are the agents' names);
* two 64-bit words per attempt holding the eight outcome counts in 16-bit fields, so that two sums
  replace eight (a unit without duplicate repeats has at most 64 rows, far below 2**16);
* the sum of ``2**repeat`` per unit: its set bits are the unit's repeats when no repeat is
  repeated, which holds exactly when it has as many set bits as the unit has rows (two equal
  powers of two carry on adding and lose a bit, and no carry can bring it back). The first and
  last repeat are its lowest and highest set bits.

Nothing is hashed without an exact check: the key's parts are exact codes, and the fields and bits
are exact under the conditions :func:`packed_per_unit` verifies. Where they do not hold (a repeat
outside 0..63, a row breaking a data check, an attempt of an unknown state, no attempts) it
returns None and the caller takes the text group-by, which raises the errors in their order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

#: Bits per packed count: a unit without repeated repeats has at most 64 rows.
_FIELD = 16
#: Repeats 0..63 are bits of one 64-bit word.
_WORD_BITS = 64
#: The agent's code takes the low 32 bits of the key.
_AGENT_BITS = 32
#: Namespace of the ``Categorical`` codes this module gives text columns (:func:`decoded`).
_NAMESPACE = "recoverylab.takeover"


def coded(series: pl.Series) -> pl.Series:
    """Return a text column as a ``Categorical`` of its own (gathered as 32-bit codes)."""
    return series.cast(pl.Categorical(pl.Categories.random(namespace=_NAMESPACE)))


def decoded(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Cast the columns :func:`coded` made (and only those) back to String."""
    return frame.with_columns(
        pl.col(name).cast(pl.String)
        for name, dtype in frame.collect_schema().items()
        if isinstance(dtype, pl.Categorical) and dtype.categories.namespace() == _NAMESPACE
    )


def _u64(value: int) -> pl.Expr:
    return pl.lit(value, dtype=pl.UInt64)


def _places(names: Sequence[str]) -> list[tuple[str, str, int]]:
    """Return (name, word column, field) of each count: four 16-bit fields per word."""
    return [(name, f"__w{i // 4}", i % 4) for i, name in enumerate(names)]


def unpacked(names: Sequence[str]) -> list[pl.Expr]:
    """Return the counts ``names`` (Int64) read from the words of :func:`packed_per_unit`."""
    return [
        (pl.col(word) // _u64(1 << (_FIELD * field)) % _u64(1 << _FIELD)).cast(pl.Int64).alias(n)
        for n, word, field in _places(names)
    ]


def packed_per_unit(
    attempts: pl.LazyFrame,
    states: pl.DataFrame,
    *,
    counts: Mapping[str, pl.Expr],
    odd: pl.Expr | None,
) -> tuple[pl.DataFrame, pl.Series] | None:
    """Return the units of ``attempts`` (state row, agent code, counts, repeats) and the agents.

    ``states``: the validated `states` rows with a unique, non-null ``state_id`` (the key's
    state part is a row of it). ``counts``: at most eight per-attempt 0/1 expressions, each
    summed per unit into a 16-bit field (:func:`unpacked` reads them). ``odd``: attempts that
    break a data check (their presence sends the caller to the text group-by, which raises on
    them).

    Returns
    -------
    (units, agents) or None
        ``units``: ``__state`` (UInt32, the row of ``states``), ``__agent`` (UInt32, a row of
        ``agents``), ``repeats`` (Int64, rows), the words ``__w0``, ``__w1`` (UInt64),
        ``first`` and ``last`` (Int64, lowest and highest repeat) and ``distinct`` (UInt32:
        equals ``repeats`` exactly when no repeat appears twice, else smaller). ``agents``: the
        agents' names by code (as :func:`coded`). None when the conditions above fail.
    """
    if len(counts) > 2 * _WORD_BITS // _FIELD:
        return None
    agents = pl.Categories.random(namespace=_NAMESPACE)
    state = pl.col("state_id").cast(pl.Enum(states.get_column("state_id")), strict=False)
    agent = pl.col("agent").cast(pl.Categorical(agents))
    key = state.to_physical().cast(pl.UInt64) * _u64(1 << _AGENT_BITS) + agent.to_physical().cast(
        pl.UInt64
    )
    repeat = pl.col("repeat")
    inside = repeat.is_between(0, _WORD_BITS - 1).fill_null(False)
    outside = ~inside if odd is None else ~inside | odd.fill_null(True)
    words: dict[str, pl.Expr] = {}
    for name, word, field in _places(list(counts)):
        bits = counts[name].cast(pl.UInt64) * _u64(1 << (_FIELD * field))
        words[word] = words[word] + bits if word in words else bits
    grouped = (
        attempts.group_by(key.alias("__key"))
        .agg(
            pl.len().cast(pl.Int64).alias("repeats"),
            *(expr.sum().alias(word) for word, expr in words.items()),
            pl.when(inside).then(_u64(2).pow(repeat)).otherwise(_u64(0)).sum().alias("__bits"),
            outside.sum().alias("__odd"),
        )
        .collect(engine="streaming")
    )
    if not grouped.height or grouped["__key"].has_nulls() or grouped["__odd"].sum():
        return None
    bits = pl.col("__bits")
    units = grouped.select(
        (pl.col("__key") // _u64(1 << _AGENT_BITS)).cast(pl.UInt32).alias("__state"),
        (pl.col("__key") % _u64(1 << _AGENT_BITS)).cast(pl.UInt32).alias("__agent"),
        "repeats",
        *words,
        bits.bitwise_trailing_zeros().cast(pl.Int64).alias("first"),
        (_WORD_BITS - 1 - bits.bitwise_leading_zeros().cast(pl.Int64)).alias("last"),
        bits.bitwise_count_ones().cast(pl.UInt32).alias("distinct"),
    )
    return units, agents.to_series().cast(pl.Categorical(agents))
