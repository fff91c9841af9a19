"""One number format and one set of labels for every place a result is read.

The command line (:mod:`recoverylab.cli._table`), the notebook HTML repr and the HTML report
(:mod:`recoverylab.report`) all show results through these expressions, so a number reads the
same everywhere: rates in percentage points to one decimal, p-values to two significant digits
(``< 0.001`` below), other decimals to one decimal (ICCs and factors two), an overall row's
null key as ``all``; an estimate and its interval always in one unit. Each helper returns a
polars expression of strings (no loop over rows).

Which columns are a result's answer is declared once, in :data:`FACES` (one :class:`Face` per
printed result: its estimates, counts, p-values and other main columns); every other column is
secondary, and :func:`shown_columns` marks each shown column main or secondary so a fitter can
drop the secondary ones first and never the answer (issue 38).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

__all__ = [
    "ALL",
    "FACES",
    "GROUP_KEYS",
    "MISSING",
    "NOT_RATE_PREFIXES",
    "P_FLOOR",
    "RATE_PREFIXES",
    "RATE_SUFFIXES",
    "Face",
    "Shown",
    "count_text",
    "decimal_text",
    "interval_of",
    "is_note",
    "is_p_value",
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
    if name == "p_adjusted":
        return "p adj."
    words = name.replace("_", " ")
    return f"{words} pp" if is_rate(name) else words


@dataclass(frozen=True)
class Shown:
    """One shown column: its header, its cells as text, whether it is a row key or a main column.

    ``rank`` orders the main columns when the terminal cannot hold them all: the estimates
    first (0), then the p-value (1), the denominators (2), the other main columns (3); a
    secondary column has rank 9 (:data:`SAID`, 10, when the method line already names its one
    value) and ``main`` false.
    """

    header: str
    cells: pl.Expr
    key: bool = False
    main: bool = True
    rank: int = 0


@dataclass(frozen=True)
class Face:
    """What a result shows first: its answer columns (ARCHITECTURE §6).

    Every column not named here (and not a row key or a p-value) is secondary: the terminal
    drops secondary columns first and never drops a main one. A column named here but absent
    from a frame is ignored, so one face serves a result with and without its optional columns.

    Attributes
    ----------
    estimates
        The answer columns, each shown with its interval when the frame has one.
    counts
        Denominators and counts shown beside the estimates (``n``, ``rescue``, ``harm``).
    main
        Other main columns (a second rate, a verdict).
    keys
        The row keys, when the dtype does not tell them (default: text columns and
        :data:`KEY_INTEGERS`).
    rates
        Further columns holding fractions (shown in percentage points like every rate).
    p
        The p-value columns that are main (the gate decides on ``p_adjusted`` alone).
    interval
        The name of the interval in headers: ``CI``, or ``bounds`` where they are not a
        confidence interval at the shown level (the gate's family-adjusted one-sided bounds).
    """

    estimates: tuple[str, ...]
    counts: tuple[str, ...] = ("n",)
    main: tuple[str, ...] = ()
    keys: tuple[str, ...] | None = None
    rates: tuple[str, ...] = ()
    p: tuple[str, ...] = ("p_value", "p_adjusted")
    interval: str = "CI"


#: A judged result's fractions besides its interval: shown in pp like the estimate (its
#: standard error too: one unit for an estimate and its error).
_JUDGED_RATES = ("judge_estimate", "gold_estimate", "labelled_share", "std_error")

#: The face of every result the command line prints, by result name (one place for all).
FACES: dict[str, Face] = {
    "paired.summary": Face(
        estimates=("effect", "break_even"), counts=("n", "n_tasks", "rescue", "harm")
    ),
    "paired.contrast": Face(estimates=("difference",), counts=("n_tasks",)),
    "paired.judged": Face(
        estimates=("estimate",),
        counts=("n", "n_labelled"),
        main=("judge_estimate", "gold_estimate", "labelled_share"),
        rates=_JUDGED_RATES,
    ),
    "judge.agreement": Face(estimates=("estimate",), counts=("n", "n_clusters")),
    "goal.judged": Face(
        estimates=("estimate",),
        counts=("n", "n_labelled"),
        main=("judge_estimate", "gold_estimate", "labelled_share"),
        rates=_JUDGED_RATES,
    ),
    "takeover.judged": Face(
        estimates=("estimate",),
        counts=("n", "n_labelled"),
        main=("judge_estimate", "gold_estimate", "labelled_share"),
        rates=_JUDGED_RATES,
    ),
    "paired.policy": Face(
        estimates=("gain",),
        counts=("n", "rescue", "harm"),
        main=("intervention_rate", "clean_touch_rate"),
    ),
    "paired.overlap": Face(estimates=("rescue_both",), counts=("n_both", "rescue_a", "rescue_b")),
    "paired.exclusions": Face(estimates=(), counts=()),
    "paired.plan": Face(
        estimates=("tasks_needed", "mde", "planned_power"),
        counts=("n_tasks",),
        main=("effect", "icc", "design_effect"),
        rates=("p10", "p01", "discordance", "mde", "alpha", "power", "planned_power"),
    ),
    "paired.monitor": Face(estimates=("effect",), counts=("n_tasks", "n")),
    "gate.claims": Face(
        estimates=("estimate",),
        counts=("n_tasks",),
        main=("verdict", "more_tasks"),
        keys=("claim", "cell"),
        rates=("threshold",),
        p=("p_adjusted",),
        interval="bounds",
    ),
    "router.evaluation": Face(
        estimates=("gain",),
        counts=("n", "rescue", "harm"),
        main=("intervention_rate", "clean_touch_rate"),
    ),
    "router.uplift": Face(estimates=("estimate",), counts=("tasks",)),
    "router.toc": Face(estimates=("toc", "qini"), counts=(), keys=("policy", "q"), rates=("q",)),
    "goal.summary": Face(
        estimates=("ts",),
        counts=("n", "n_clusters"),
        main=("gp_rate", "compliance_rate", "violation_rate"),
    ),
    "goal.drop": Face(estimates=("drop",), counts=("goals",), main=("ts_without", "ts_with")),
    "takeover.eligibility": Face(
        estimates=(), counts=("states", "eligible_states", "rejected_states")
    ),
    "takeover.summary": Face(
        estimates=("ear", "pass_at_1", "pass_at_k"), counts=("eligible_states", "attempts")
    ),
    "takeover.funnel": Face(
        estimates=(
            "aware_rate",
            "fixed_rate",
            "derived_rate",
            "pass_rate",
            "fixed_given_aware_rate",
            "derived_given_fixed_rate",
            "pass_given_derived_rate",
        ),
        counts=("attempts",),
    ),
    "takeover.reliability": Face(
        estimates=("pass_hat_k", "flip_rate"), counts=("attempted_states",)
    ),
    "takeover.awareness": Face(
        estimates=("difference", "aware_pass_rate", "unaware_pass_rate"),
        counts=("aware_attempts", "unaware_attempts"),
    ),
    "takeover.comparison": Face(
        estimates=("difference",),
        counts=("common_states",),
        main=("pass_at_k_a", "pass_at_k_b"),
    ),
    "takeover.latency": Face(
        estimates=("final_step_rate", "median_latency"),
        counts=("annotated", "surfaced"),
        main=("surfaced_rate",),
    ),
    "takeover.verifier_gate": Face(
        estimates=("catch_rate",), counts=("executed", "caught"), main=("passes_gate",)
    ),
    "takeover.leakage": Face(estimates=(), counts=("n_splits", "states")),
}


#: Text or flag columns that describe a row's statistics, not which row it is.
STATISTIC_NOTES = (
    "ci_method",
    "p_method",
    "test",
    "sparse",
    "interpretation",
    "alternative",
    "power_method",
    "gold_drawn_by",
    "assumption",
)


def is_note(name: str) -> bool:
    """Whether a column holds words about a row's statistics (its interval method, its test)."""
    return name in STATISTIC_NOTES or name.endswith(("_ci_method", "_test", "_p_method"))


def _is_key(name: str, dtype: pl.DataType, face: Face | None) -> bool:
    if face is not None and face.keys is not None:
        return name in face.keys
    if is_note(name):
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


#: Columns that own the frame's unnamed ``ci_low`` / ``ci_high`` (in order of preference).
_SHARED_INTERVAL_OWNERS = ("effect", "difference", "gain", "ts", "drop", "estimate")


def interval_of(columns: list[str] | tuple[str, ...], name: str) -> tuple[str, str] | None:
    """Return the ``(low, high)`` columns of ``name``'s interval among ``columns``, if any.

    ``X_ci_low`` / ``X_ci_high`` belong to ``X``; the unnamed ``ci_low`` / ``ci_high`` belong to
    the first of :data:`_SHARED_INTERVAL_OWNERS` present.

    Examples
    --------
    >>> interval_of(["effect", "ci_low", "ci_high"], "effect")
    ('ci_low', 'ci_high')
    >>> interval_of(["ear", "ear_ci_low", "ear_ci_high"], "ear")
    ('ear_ci_low', 'ear_ci_high')
    """
    for low, high in ((f"{name}_ci_low", f"{name}_ci_high"), ("ci_low", "ci_high")):
        if low in columns and high in columns:
            owners = [c for c in _SHARED_INTERVAL_OWNERS if c in columns]
            if low == "ci_low" and owners[:1] != [name]:
                continue
            return low, high
    return None


def _in_pp(name: str, face: Face | None, columns: list[str]) -> bool:
    """Whether a float column is shown in percentage points.

    A rate by name (:func:`is_rate`), a rate the face declares, or the owner of an interval
    whose bounds are rates: one unit for an estimate and its bounds, never a fraction beside pp.
    """
    if (face is not None and name in face.rates) or is_rate(name):
        return True
    bounds = interval_of(columns, name)
    return bounds is not None and all(is_rate(b) for b in bounds)


#: Decimals of numbers shown as they are (not in pp): ICCs and factors need two.
_DECIMALS = {
    "icc": 2,
    "repeat_icc": 2,
    "design_effect": 2,
    "e_value": 2,
    "pairs_per_task": 2,
    "lam": 2,  # PPI++'s power-tuning weight in [0, 1]
}


def _number_text(name: str, column: str, pp: bool, signed: bool) -> pl.Expr:
    if pp:
        return pp_text(column, signed=signed)
    digits = next((d for prefix, d in _DECIMALS.items() if name.startswith(prefix)), 1)
    return decimal_text(column, digits, signed=signed)


def _estimate_column(
    frame: pl.DataFrame, name: str, face: Face | None
) -> tuple[Shown, tuple[str, ...]]:
    """Show a number with its interval in one unit; return the column and the names it used."""
    columns = frame.columns
    pp = _in_pp(name, face, columns)
    signed = name in ("effect", "difference", "gain", "drop") or name.startswith("effect_")
    text = _number_text(name, name, pp, signed)
    header = f"{name.replace('_', ' ')} pp" if pp else name.replace("_", " ")
    interval = interval_of(columns, name)
    if interval is None:
        return Shown(header, text.fill_null(MISSING)), (name,)
    low, high = (_number_text(name, c, pp, False) for c in interval)
    bracket = pl.concat_str(pl.lit(" ["), low, pl.lit(", "), high, pl.lit("]")).fill_null("")
    cells = pl.concat_str(text.fill_null(MISSING), bracket)
    word = face.interval if face is not None else "CI"
    return Shown(f"{header} [{word}]", cells), (name, *interval)


def is_p_value(name: str) -> bool:
    """Whether a result column holds p-values (``p_value``, ``p_sign_flip``, ``judge_balance_p``).

    Examples
    --------
    >>> is_p_value("p_value"), is_p_value("p_sign_flip"), is_p_value("p_fail"), is_p_value("p10")
    (True, True, False, False)
    >>> is_p_value("judge_balance_p")
    True
    """
    return name in ("p_value", "p_adjusted") or (
        (name.startswith("p_") or name.endswith("_p")) and not is_rate(name)
    )


def _value_column(name: str, dtype: pl.DataType) -> Shown:
    if is_p_value(name) and dtype.is_numeric():
        return Shown(label(name), p_text(name).fill_null(MISSING))
    if dtype.is_float():
        return Shown(label(name), _number_text(name, name, False, False).fill_null(MISSING))
    return Shown(label(name), pl.col(name).cast(pl.String).fill_null(MISSING))


def _is_denominator(name: str) -> bool:
    return (
        name in ("n", "attempts", "eligible_states", "annotated", "surfaced", "goals", "executed")
        or name.startswith("n_")
        or name.endswith("_attempts")
        or name == "common_states"
    )


def _inferred_face(frame: pl.DataFrame) -> Face:
    """Return the face of an undeclared frame: its rates are its estimates, n its counts."""
    schema = frame.schema
    rates = tuple(n for n, d in schema.items() if d.is_float() and is_rate(n) and "_ci_" not in n)
    rates = tuple(n for n in rates if n not in ("ci_low", "ci_high"))
    counts = tuple(n for n in schema if _is_denominator(n))
    if not rates:  # counts only: every column is an answer
        return Face(estimates=(), counts=tuple(schema), main=())
    return Face(estimates=rates, counts=counts, main=("sparse",))


def _rank(name: str, face: Face) -> int | None:
    """Fitting priority of a main column (lower first), or None for a secondary column."""
    if name in face.estimates:
        return 0
    if name in face.p:
        return 1
    if name in face.counts:
        return 2
    if name in face.main:
        return 3
    return None


def shown_columns(
    frame: pl.DataFrame, *, wide: bool, face: Face | str | None = None
) -> list[Shown]:
    """Return the shown columns of ``frame``: every column with ``wide``, else the main ones.

    The main columns are the row keys and what the result's :class:`Face` declares (its
    estimates with their intervals, p, its counts); a frame no face describes shows its keys,
    denominators, rates (with their intervals) and p. Rates read in percentage points, an
    interval in its estimate's unit. With ``wide`` every column is returned, each marked main
    or secondary (``Shown.main``), so a fitter can drop the secondary ones first.
    """
    if isinstance(face, str):
        face = FACES[face]
    declared = face
    face = face if face is not None else _inferred_face(frame)
    schema = frame.schema
    columns = frame.columns
    owned = {b for name in columns for b in (interval_of(columns, name) or ())}
    shown: list[Shown] = []
    used: set[str] = set()
    for name, dtype in schema.items():
        if name in used or name in owned:
            continue  # a bound is shown inside its estimate's cell
        used.add(name)
        if _is_key(name, dtype, declared):
            if dtype.is_float():  # a number that names a row (the TOC's q): in its unit
                column, _ = _estimate_column(frame, name, declared)
                shown.append(Shown(column.header, column.cells, key=True, rank=0))
            else:
                shown.append(Shown(label(name), key_text(name, dtype), key=True, rank=0))
            continue
        rank = _rank(name, face)
        if dtype.is_float() and not is_p_value(name):
            column, names = _estimate_column(frame, name, declared)
            used.update(names)
        else:
            column = _value_column(name, dtype)
        main = rank is not None
        if not main and not wide:
            continue
        if rank is None:  # secondary; words the method line says whole come last of all
            said = is_note(name) and dtype == pl.String and frame[name].n_unique() == 1
            rank = SAID if said else 9
        shown.append(Shown(column.header, column.cells, main=main, rank=rank))
    return shown


#: Rank of a secondary column whose one value the line above the table already names (a
#: ``ci_method`` every row shares): the terminal prints it only with ``--wide``.
SAID = 10
