"""The per-unit pass of takeover on one integer key per attempt, with its counts packed in words.

Grouping millions of attempts by (``state_id``, ``agent``) text is most of the cost of every
takeover verb: polars encodes both strings of every row into one binary key. This module builds
the same per-unit table (:func:`recoverylab.takeover._inputs.checked_units`' one pass) from

* one 64-bit key per attempt: the state's row in `states` (an exact ``Enum`` lookup of
  ``state_id``; null for a state not in `states`) times 2**32 plus the agent's code (a
  ``Categorical`` of its own, exact: its categories are the agents' names);
* one 64-bit word per attempt holding the eight outcome counts in 8-bit fields, so that one sum
  replaces eight (a unit without duplicate repeats has at most 64 rows, below 2**8);
* the sum of ``2**repeat`` per unit: its set bits are the unit's repeats when no repeat is
  repeated, which holds exactly when it has as many set bits as the unit has rows (two equal
  powers of two carry on adding and lose a bit, and no carry can bring it back). The first and
  last repeat are its lowest and highest set bits.

Nothing is hashed: the key's parts are exact codes, and the fields and bits are exact under the
conditions :func:`packed_per_unit` verifies. Where they do not hold (a repeat outside 0..63, a
row breaking a data check, an attempt of an unknown state, no attempts) it returns None and the
caller takes the text group-by, which raises the errors in their order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

#: Bits per count in the words of one unit: a unit without repeated repeats has at most 64
#: rows (a unit with repeated repeats is refused before its counts are read).
UNIT_FIELD = 8
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


def _places(names: Sequence[str], width: int) -> list[tuple[str, str, int]]:
    """Return (name, word column, shift) of each count: ``64 // width`` fields per word."""
    per_word = _WORD_BITS // width
    return [(n, f"__w{i // per_word}", width * (i % per_word)) for i, n in enumerate(names)]


def packed_words(counts: Mapping[str, pl.Expr], width: int) -> dict[str, pl.Expr]:
    """Return the 64-bit words (by column name) that hold ``counts`` in ``width``-bit fields.

    A sum of the words is the words of the sums while every summed count stays below
    ``2**width`` (the caller checks a bound); :func:`unpacked` reads them.
    """
    words: dict[str, pl.Expr] = {}
    for name, word, shift in _places(list(counts), width):
        value = counts[name].cast(pl.UInt64) * _u64(1 << shift)
        words[word] = words[word] + value if word in words else value
    return words


def unpacked(names: Sequence[str], width: int) -> list[pl.Expr]:
    """Return the counts ``names`` (Int64) read from the words of :func:`packed_words`."""
    return [
        (pl.col(word) // _u64(1 << shift) % _u64(1 << width)).cast(pl.Int64).alias(n)
        for n, word, shift in _places(names, width)
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
    state part is a row of it). ``counts``: per-attempt 0/1 expressions, each summed per unit
    into an 8-bit field (:func:`unpacked` with :data:`UNIT_FIELD` reads them). ``odd``: attempts
    that break a data check. A first pass counts them and the repeats outside 0..63; if there
    are any (or no attempts), None: the caller takes the text group-by, which raises on them.

    Returns
    -------
    (units, agents) or None
        ``units``: ``__state`` (UInt32, the row of ``states``), ``__agent`` (UInt32, a row of
        ``agents``), ``repeats`` (Int64, rows), the words ``__w0``, ... (UInt64), ``first`` and
        ``last`` (Int64, lowest and highest repeat) and ``distinct`` (UInt32: equals
        ``repeats`` exactly when no repeat appears twice, else smaller). ``agents``: the
        agents' names by code (as :func:`coded`). None when the conditions above fail.
    """
    repeat = pl.col("repeat")
    outside = ~repeat.is_between(0, _WORD_BITS - 1).fill_null(False)
    facts = attempts.select(
        pl.len().alias("rows"),
        (outside if odd is None else outside | odd.fill_null(True)).sum().alias("odd"),
    ).collect(engine="streaming")
    if not facts["rows"].item() or facts["odd"].item():
        return None
    agents = pl.Categories.random(namespace=_NAMESPACE)
    state = pl.col("state_id").cast(pl.Enum(states.get_column("state_id")), strict=False)
    agent = pl.col("agent").cast(pl.Categorical(agents)).to_physical().cast(pl.UInt64)
    key = state.to_physical().cast(pl.UInt64) * _u64(1 << _AGENT_BITS) + agent
    words = packed_words(counts, UNIT_FIELD)
    grouped = (
        attempts.group_by(key.alias("__key"))
        .agg(
            pl.len().cast(pl.Int64).alias("repeats"),
            *(expr.sum().alias(word) for word, expr in words.items()),
            _u64(2).pow(repeat).sum().alias("__bits"),
        )
        .collect(engine="streaming")
    )
    if grouped["__key"].has_nulls():
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
    # one chunk (the streaming group-by gives many): every later query reads it, and a view of
    # it collects to one chunk that numpy reads without a copy
    return units.rechunk(), agents.to_series().cast(pl.Categorical(agents))
