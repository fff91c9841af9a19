"""One number format and one set of labels for every place a result is read.

The command line (:mod:`recoverylab.cli._table`), the notebook HTML repr and the HTML report
(:mod:`recoverylab.report`) all show results through these expressions, so a number reads the
same everywhere: rates in percentage points to one decimal, p-values to two significant digits
(``< 0.001`` below), other decimals to one decimal, an overall row's null key as ``all``.
Each helper returns a polars expression of strings (no loop over rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

__all__ = [
    "ALL",
    "GROUP_KEYS",
    "MISSING",
    "NOT_RATE_PREFIXES",
    "P_FLOOR",
    "RATE_PREFIXES",
    "RATE_SUFFIXES",
    "Shown",
    "count_text",
    "decimal_text",
    "is_rate",
    "key_text",
    "label",
    "p_str",
    "p_text",
    "pp_text",
    "shown_columns",
]

#: Label of an overall row (a null grouping key, e.g. the policy's all-conditions row).
ALL = "all"
#: Shown for a missing value.
MISSING = "—"
#: Smallest p-value written as a number; smaller ones read ``< 0.001``.
P_FLOOR = 0.001
#: Grouping columns whose null marks an overall row (shown as :data:`ALL`).
GROUP_KEYS = ("condition", "regime", "model", "agent", "depth", "category", "family", "split")
#: Integer columns that are row keys, not counts.
KEY_INTEGERS = ("delay", "depth", "k", "repeat", "seed")
#: Result columns that hold fractions shown in percentage points.
RATE_SUFFIXES = ("rate", "effect", "ci_low", "ci_high", "difference", "gain", "ts", "ear", "drop")
RATE_PREFIXES = (
    "pass_at",
    "pass_hat",
    "effect_",
    "margin",
    "ts_",
    "break_even",
    "p_fail",
    "rescue_given",
    "harm_given",
)
#: Result columns that are not fractions although their names end like one (ICCs, factors).
NOT_RATE_PREFIXES = ("icc", "repeat_icc", "design_effect")


def is_rate(name: str) -> bool:
    """Whether a result column holds a fraction to be shown in percentage points.

    Examples
    --------
    >>> is_rate("recovery_rate"), is_rate("pass_at_k_ci_low"), is_rate("n"), is_rate("attempts")
    (True, True, False, False)
    """
    if name.startswith(NOT_RATE_PREFIXES):
        return False
    # whole words only: `attempts` ends in "ts" but is a count
    words = tuple(f"_{suffix}" for suffix in RATE_SUFFIXES)
    return name in RATE_SUFFIXES or name.endswith(words) or name.startswith(RATE_PREFIXES)


def _positive_zero(expr: pl.Expr) -> pl.Expr:
    # -0.0 rounds and prints as "-0.0"; a reader sees a sign that is not there
    return pl.when(expr == 0).then(pl.lit(0.0)).otherwise(expr)


def decimal_text(
    column: str | pl.Expr, digits: int = 1, *, scale: float = 1.0, signed: bool = False
) -> pl.Expr:
    """Show a number rounded to ``digits`` decimals as text (``+`` on positives when ``signed``).

    The result keeps the column's name; a null stays null.
    """
    expr = pl.col(column) if isinstance(column, str) else column
    value = _positive_zero((expr.cast(pl.Float64) * scale).round(digits))
    if digits == 0:
        shown = value.cast(pl.Int64).cast(pl.String)
    else:
        # fixed decimals: 15.0 stays "15.0", never "15"; the format is the same in every cell
        whole = value.abs().floor()
        frac = ((value.abs() - whole) * 10**digits).round(0).cast(pl.Int64)
        sign = pl.when(value < 0).then(pl.lit("-")).otherwise(pl.lit(""))
        shown = pl.concat_str(
            sign,
            whole.cast(pl.Int64).cast(pl.String),
            pl.lit("."),
            frac.cast(pl.String).str.pad_start(digits, "0"),
        )
    if signed:
        shown = pl.when(value > 0).then(pl.concat_str(pl.lit("+"), shown)).otherwise(shown)
    return shown.alias(column) if isinstance(column, str) else shown


def pp_text(column: str | pl.Expr, *, signed: bool = False) -> pl.Expr:
    """Show a fraction in percentage points, one decimal (``0.1534`` -> ``15.3``)."""
    return decimal_text(column, 1, scale=100.0, signed=signed)


def p_text(column: str | pl.Expr) -> pl.Expr:
    """Show a p-value to two significant digits; below 0.001 ``< 0.001``.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({"p": [0.2891, 0.125, 0.049, 1.0, 0.0004, None]})
    >>> frame.select(p_text("p"))["p"].to_list()
    ['0.29', '0.13', '0.049', '1.0', '< 0.001', None]
    """
    value = (pl.col(column) if isinstance(column, str) else column).cast(pl.Float64)
    # two significant digits, rounding half up (0.125 -> 0.13), as readers round
    exponent = value.log10().floor()
    scale = pl.lit(10.0).pow(pl.lit(1.0) - exponent)
    rounded = (value * scale + 0.5).floor() / scale
    shown = rounded.round(6).cast(pl.String)
    text = pl.when(value < P_FLOOR).then(pl.lit(f"< {P_FLOOR:g}")).otherwise(shown)
    return text.alias(column) if isinstance(column, str) else text


def count_text(n: int, noun: str = "row") -> str:
    """Show a count with its noun, singular or plural: ``1 row``, ``1,054 rows``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def p_str(value: float) -> str:
    """Show one p-value as :func:`p_text` shows a column of them (``0.125`` -> ``"0.13"``).

    Examples
    --------
    >>> p_str(0.1875000000000001), p_str(0.049), p_str(0.0002), p_str(1.0)
    ('0.19', '0.049', '< 0.001', '1.0')
    """
    if math.isnan(value):
        return "nan"
    if value < P_FLOOR:
        return f"< {P_FLOOR:g}"
    scale = 10.0 ** (1 - math.floor(math.log10(value)))
    return str(round(math.floor(value * scale + 0.5) / scale, 6))


def label(name: str) -> str:
    """Return the header of a result column: words, not identifiers, with ``pp`` on rates.

    Examples
    --------
    >>> label("recovery_rate"), label("p_value"), label("n")
    ('recovery rate pp', 'p', 'n')
    """
    if name == "p_value":
        return "p"
    words = name.replace("_", " ")
    return f"{words} pp" if is_rate(name) else words


@dataclass(frozen=True)
class Shown:
    """One shown column: its header, its cells as a text expression, whether it is a row key."""

    header: str
    cells: pl.Expr
    key: bool = False


#: Text or flag columns that describe a row's statistics, not which row it is.
STATISTIC_NOTES = ("ci_method", "p_method", "sparse", "interpretation")


def _is_key(name: str, dtype: pl.DataType) -> bool:
    if name in STATISTIC_NOTES:
        return False
    return name in KEY_INTEGERS if dtype.is_integer() else not dtype.is_numeric()


def key_text(name: str, dtype: pl.DataType) -> pl.Expr:
    """Show a key (or any non-number) as text: lists joined, a null group key as ``all``."""
    column = pl.col(name)
    if isinstance(dtype, pl.List):
        text = column.cast(pl.List(pl.String)).list.join(", ")
    else:
        text = column.cast(pl.String)
    return text.fill_null(ALL if name in GROUP_KEYS else MISSING)


def _interval(frame: pl.DataFrame, name: str) -> tuple[str, str] | None:
    """Return the ``(low, high)`` columns of ``name``'s interval, if the frame has them."""
    for low, high in ((f"{name}_ci_low", f"{name}_ci_high"), ("ci_low", "ci_high")):
        if low in frame.columns and high in frame.columns:
            # the unnamed interval belongs to the frame's first owner column present
            owners = [c for c in _SHARED_INTERVAL_OWNERS if c in frame.columns]
            if low == "ci_low" and owners[:1] != [name]:
                continue
            return low, high
    return None


#: Columns that own the frame's unnamed ``ci_low`` / ``ci_high`` (in order of preference).
_SHARED_INTERVAL_OWNERS = ("effect", "difference", "gain", "ts", "drop")


def _rate_column(frame: pl.DataFrame, name: str) -> tuple[Shown, tuple[str, ...]]:
    """Show a rate in pp with its interval; return the column and the names it used."""
    signed = name in ("effect", "difference", "gain", "drop") or name.startswith("effect_")
    text = pp_text(name, signed=signed)
    interval = _interval(frame, name)
    if interval is None:
        return Shown(label(name), text.fill_null(MISSING)), (name,)
    low, high = (pp_text(c) for c in interval)
    bracket = pl.concat_str(pl.lit(" ["), low, pl.lit(", "), high, pl.lit("]")).fill_null("")
    cells = pl.concat_str(text.fill_null(MISSING), bracket)
    return Shown(f"{label(name)} [CI]", cells), (name, *interval)


def _value_column(name: str, dtype: pl.DataType) -> Shown:
    if name == "p_value":
        return Shown(label(name), p_text(name).fill_null(MISSING))
    if dtype.is_float():
        return Shown(label(name), decimal_text(name, 1).fill_null(MISSING))
    return Shown(label(name), pl.col(name).cast(pl.String).fill_null(MISSING))


def _is_denominator(name: str) -> bool:
    return (
        name in ("n", "attempts", "eligible_states", "annotated", "surfaced", "goals", "executed")
        or name.startswith("n_")
        or name.endswith("_attempts")
        or name == "common_states"
    )


def shown_columns(frame: pl.DataFrame, *, wide: bool) -> list[Shown]:
    """Return the shown columns of ``frame``: every column with ``wide``, else the main ones.

    The main columns are the row keys, the denominators, the rates (in pp, with their
    intervals) and the p-value. A table with no rate (counts only) shows every column.
    """
    schema = frame.schema
    narrow = not wide and any(dtype.is_float() and is_rate(name) for name, dtype in schema.items())
    shown: list[Shown] = []
    used: set[str] = set()
    for name, dtype in schema.items():
        if name in used:
            continue
        if _is_key(name, dtype):
            shown.append(Shown(label(name), key_text(name, dtype), key=True))
        elif dtype.is_float() and is_rate(name):
            if narrow and "_ci_" not in name and name.endswith(("_low", "_high")):
                continue  # an interval bound shown inside its rate's cell
            column, names = _rate_column(frame, name)
            shown.append(column)
            used.update(names)
        elif not narrow or name in ("p_value", "sparse") or _is_denominator(name):
            shown.append(_value_column(name, dtype))
        used.add(name)
    return shown
