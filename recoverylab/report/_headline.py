"""The report's headline: what helped where, what harmed, each policy's net effect, the verdict.

Also, where those results are given, what access barriers cost (goal) and which takeover agents
notice inherited errors and pass most and least.

Every number in the headline is a value of a result frame, shown through the formatter of the
tables (:mod:`recoverylab._display`: percentage points to one decimal, p to two significant
digits), in an element that names where it comes from: ``data-source`` (the key of the section
whose table shows that result), ``data-column`` and ``data-row-<key>`` (the row's keys). Nothing
is recomputed: which cells are named is a filter and a sort of the result (significant: the
row's own p-value below 1 − confidence), and the sentences are polars string expressions.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import polars as pl

from recoverylab._display import ALL, decimal_text, p_text
from recoverylab._errors import ParameterError
from recoverylab.report._common import as_frame, keys_before
from recoverylab.report._html import Provenance, Section
from recoverylab.report._registry import SUMMARY
from recoverylab.report._tables import _escape

if TYPE_CHECKING:
    from recoverylab.paired import GateResult

__all__ = ["headline_section"]

#: The most cells named as helping (or harming) in the headline; the tables have every cell.
SHOWN_CELLS = 3

_Keys = list[tuple[str, pl.Expr]]


def _key_text(column: str) -> pl.Expr:
    return pl.col(column).cast(pl.String).fill_null(ALL)


def _span(text: pl.Expr, source: str, column: str, keys: _Keys) -> pl.Expr:
    """Wrap a shown value in an element naming its result, column and row."""
    rows = [
        pl.concat_str(pl.lit(f' data-row-{html.escape(k)}="'), _escape(value), pl.lit('"'))
        for k, value in keys
    ]
    return pl.concat_str(
        pl.lit(f'<span class="value" data-source="{html.escape(source)}" '),
        pl.lit(f'data-column="{html.escape(column)}"'),
        *rows,
        pl.lit(">"),
        text,
        pl.lit("</span>"),
    )


def _pp(column: str, source: str, keys: _Keys, *, signed: bool = False) -> pl.Expr:
    return _span(decimal_text(column, 1, scale=100, signed=signed), source, column, keys)


def _count(column: str, source: str, keys: _Keys) -> pl.Expr:
    return _span(decimal_text(column, 0), source, column, keys)


def _p(column: str, source: str, keys: _Keys) -> pl.Expr:
    """``p = 0.012`` or ``p < 0.001``, as the tables write p."""
    shown = p_text(column)
    sign = pl.when(shown.str.starts_with("<")).then(pl.lit("p ")).otherwise(pl.lit("p = "))
    return pl.concat_str(sign, _span(_escape(shown), source, column, keys))


def _interval(source: str, keys: _Keys, *, prefix: str = "") -> pl.Expr:
    """`` [low, high]`` of the columns ``<prefix>ci_low`` and ``<prefix>ci_high``, in pp."""
    return pl.concat_str(
        pl.lit(" ["),
        _pp(f"{prefix}ci_low", source, keys),
        pl.lit(", "),
        _pp(f"{prefix}ci_high", source, keys),
        pl.lit("]"),
    )


def _where(keys: list[str]) -> pl.Expr:
    """Return a cell's keys in words: ``refresh under stale2, delay 1 (cohort full)``."""
    words: list[pl.Expr] = []
    if "method" in keys:
        words.append(_escape(_key_text("method")))
    if "condition" in keys:
        words.append(pl.concat_str(pl.lit(" under "), _escape(_key_text("condition"))))
    if "delay" in keys:
        words.append(pl.concat_str(pl.lit(", delay "), _escape(_key_text("delay"))))
    others = [k for k in keys if k not in ("method", "condition", "delay")]
    if others:
        named = [pl.concat_str(pl.lit(f"{k} "), _escape(_key_text(k))) for k in others]
        words.append(pl.concat_str(pl.lit(" ("), pl.concat_str(named, separator=", "), pl.lit(")")))
    return pl.concat_str(words) if words else pl.lit(ALL)


def _effect_lines(frame: pl.DataFrame, alpha: float) -> list[str]:
    """Return the paired cells that helped most and those that harmed (significant at alpha)."""
    source = "paired-effect"
    names = keys_before(frame, "n")
    keys: _Keys = [(k, _key_text(k)) for k in names]
    significant = pl.col("p_value") < alpha
    sentence = pl.concat_str(
        _where(names),
        pl.lit(": "),
        _pp("effect", source, keys, signed=True),
        pl.lit(" pp"),
        _interval(source, keys),
        pl.lit(", "),
        _p("p_value", source, keys),
        pl.lit(", n = "),
        _count("n", source, keys),
        pl.lit(" pairs"),
    )
    lines = []
    for word, sign, descending in (("Helped most", 1, True), ("Harmed", -1, False)):
        cells = frame.filter(significant & (pl.col("effect") * sign > 0))
        chosen = cells.sort("effect", descending=descending).head(SHOWN_CELLS)
        listed = chosen.select(sentence.str.join("; ")).item() if chosen.height else ""
        more = f" (and {cells.height - chosen.height} more)" if cells.height > chosen.height else ""
        if listed:
            lines.append(f"<strong>{word}:</strong> {listed}{more}.")
        else:
            direction = "positive" if sign > 0 else "negative"
            lines.append(f"<strong>{word}:</strong> no cell's effect is significantly {direction}.")
    # the interval excludes zero exactly when p < alpha only where it inverts p's test
    inverts = "ci_inverts_test" in frame.columns and bool(frame["ci_inverts_test"].all())
    agreement = " (its interval excludes zero)" if inverts else ""
    lines.append(
        f"Significant means the cell's own p-value is below {alpha:g}{agreement}, not adjusted "
        f"across the {frame.height} cells of the effects table."
    )
    return lines


def _clean_rows(frame: pl.DataFrame, groups: list[str]) -> pl.DataFrame:
    """Each group's clean row: the condition row that carries a clean-touch rate."""
    return frame.filter(
        pl.col("condition").is_not_null() & pl.col("clean_touch_rate").is_not_null()
    ).select(
        *groups,
        pl.col("condition").alias("clean_condition"),
        pl.col("gain").alias("clean_gain"),
        pl.col("p_value").alias("clean_p"),
        pl.col("n").alias("clean_n"),
    )


def _policy_lines(frame: pl.DataFrame, source: str, alpha: float) -> list[str]:
    """Per policy (against never recovering): its net gain, its effect on clean runs, touches."""
    if "reference" in frame.columns:
        frame = frame.filter((pl.col("reference") == "never") & (pl.col("policy") != "never"))
    groups = [k for k in keys_before(frame, "n") if k != "condition"]
    clean = _clean_rows(frame, groups)
    overall = frame.filter(pl.col("condition").is_null())
    if groups:
        joined = overall.join(clean, on=groups, how="left", nulls_equal=True)
    elif clean.height == 1:
        joined = overall.join(clean, how="cross")
    else:  # no clean episodes: the sentence says nothing about them
        joined = overall.with_columns(
            pl.lit(None, dtype).alias(name) for name, dtype in clean.schema.items()
        )
    row: _Keys = [(k, _key_text(k)) for k in groups] + [("condition", pl.lit(ALL))]
    at_clean: _Keys = [(k, _key_text(k)) for k in groups]
    at_clean.append(("condition", pl.col("clean_condition")))
    harms = (pl.col("clean_p") < alpha) & (pl.col("clean_gain") < 0)
    gains = (pl.col("clean_p") < alpha) & (pl.col("clean_gain") > 0)
    clean_effect = pl.concat_str(
        _span(decimal_text("clean_gain", 1, scale=100, signed=True), source, "gain", at_clean),
        pl.lit(" pp, "),
        pl.when(pl.col("clean_p") < 0.001).then(pl.lit("p ")).otherwise(pl.lit("p = ")),
        _span(_escape(p_text("clean_p")), source, "p_value", at_clean),
    )
    clean_words = (
        pl.when(harms)
        .then(pl.concat_str(pl.lit("it <strong>harms</strong> clean runs ("), clean_effect))
        .when(gains)
        .then(pl.concat_str(pl.lit("it gains on clean runs ("), clean_effect))
        .otherwise(
            pl.concat_str(pl.lit("its effect on clean runs is not significant ("), clean_effect)
        )
    )
    clean_part = pl.concat_str(
        pl.lit("; "),
        clean_words,
        pl.lit(") while touching "),
        _span(decimal_text("clean_touch_rate", 1, scale=100), source, "clean_touch_rate", row),
        pl.lit(" % of the "),
        _span(decimal_text("clean_n", 0), source, "n", at_clean),
        pl.lit(" clean episodes"),
    ).fill_null("")
    name = (
        pl.concat_str(pl.lit("<strong>"), _escape(pl.col("policy")), pl.lit("</strong>"))
        if "policy" in groups
        else pl.lit("<strong>The policy</strong>")
    )
    others = [k for k in groups if k not in ("policy", "reference")]
    if others:
        named = [pl.concat_str(pl.lit(f"{k} "), _escape(_key_text(k))) for k in others]
        name = pl.concat_str(name, pl.lit(" ("), pl.concat_str(named, separator=", "), pl.lit(")"))
    sentence = pl.concat_str(
        name,
        pl.lit(": net gain over never recovering "),
        _pp("gain", source, row, signed=True),
        pl.lit(" pp"),
        _interval(source, row),
        pl.lit(", "),
        _p("p_value", source, row),
        pl.lit(", over "),
        _count("n", source, row),
        pl.lit(" episodes"),
        clean_part,
        pl.lit("."),
    )
    return joined.sort("gain", descending=True).select(sentence).to_series().to_list()


def _named(keys: list[str]) -> pl.Expr:
    """Return a row's keys as words and a space (``model-c ``), nothing for a keyless row."""
    if not keys:
        return pl.lit("")
    words = pl.concat_str([_escape(_key_text(k)) for k in keys], separator=", ")
    return pl.concat_str(words, pl.lit(" "))


def _extremes(frame: pl.DataFrame, rate: str, words: pl.Expr) -> str:
    """Return the rows with the highest and the lowest ``rate`` in ``words`` (one row: it)."""
    ranked = frame.filter(pl.col(rate).is_not_null()).sort(rate, descending=True)
    if ranked.height == 0:
        return ""
    if ranked.height == 1:
        return ranked.select(words).item()
    ends = pl.concat([ranked.head(1), ranked.tail(1)])
    shown = ends.select(words).to_series().to_list()
    return f"highest {shown[0]}; lowest {shown[1]}"


def _drop_lines(frame: pl.DataFrame) -> list[str]:
    """Return what access barriers cost: the TS drop paired by goal, largest and smallest."""
    source = "goal-drop"
    names = keys_before(frame, "goals")
    keys: _Keys = [(k, _key_text(k)) for k in names]
    words = pl.concat_str(
        _named(names),
        _pp("drop", source, keys, signed=True),
        pl.lit(" pp"),
        _interval(source, keys),
        pl.lit(" over "),
        _count("goals", source, keys),
        pl.lit(" goals"),
    )
    said = _extremes(frame, "drop", words)
    if not said:
        return []
    return [f"<strong>Barriers cost</strong> task success (TS without minus with): {said}."]


def _takeover_lines(frame: pl.DataFrame) -> list[str]:
    """Return each takeover agent's error awareness and pass@k: the highest and the lowest."""
    source = "takeover-funnel"
    names = keys_before(frame, "k")
    keys: _Keys = [(k, _key_text(k)) for k in names]
    k = str(frame["k"].max())

    def words(rate: str, n: str, noun: str) -> pl.Expr:
        interval = (
            _interval(source, keys, prefix=f"{rate}_")
            if f"{rate}_ci_low" in frame.columns and f"{rate}_ci_high" in frame.columns
            else pl.lit("")
        )
        return pl.concat_str(
            _named(names),
            _pp(rate, source, keys),
            pl.lit(" pp"),
            interval,
            pl.lit(" of "),
            _count(n, source, keys),
            pl.lit(f" {noun}"),
        )

    lines = []
    ear = _extremes(frame, "ear", words("ear", "attempts", "attempts"))
    if ear:
        lines.append(f"<strong>EAR</strong> (attempts that noticed the inherited error): {ear}.")
    passed = _extremes(frame, "pass_at_k", words("pass_at_k", "attempted_states", "states"))
    if passed:
        lines.append(f"<strong>pass@{k}</strong> (a state passed in any of {k} tries): {passed}.")
    return lines


def _gate_lines(gate: GateResult) -> list[str]:
    """Return the gate's verdict and its claims by verdict (from its claims table)."""
    counts = gate.claims.group_by("verdict").len().sort("verdict")
    tally = counts.select(pl.format("{} {}", "len", "verdict").str.join(", ")).item()
    failing = gate.claims.filter(pl.col("verdict") != "PASS")
    named = ""
    if failing.height:
        listed = failing.select(
            pl.concat_str(_escape(pl.col("claim")), pl.lit(" on "), _escape(pl.col("cell")))
            .head(SHOWN_CELLS)
            .str.join("; ")
        ).item()
        more = failing.height - min(failing.height, SHOWN_CELLS)
        named = f"; not passing: {listed}" + (f" (and {more} more)" if more else "")
    return [
        f"<strong>Release gate: {html.escape(gate.verdict)}</strong> (exit status "
        f"{gate.exit_status}; claim rows: {html.escape(tally)}{named})."
    ]


def headline_section(
    *,
    effects: pl.DataFrame | pl.LazyFrame | None = None,
    policy: pl.DataFrame | pl.LazyFrame | None = None,
    router: pl.DataFrame | pl.LazyFrame | None = None,
    gate: GateResult | None = None,
    drop: pl.DataFrame | pl.LazyFrame | None = None,
    takeover: pl.DataFrame | pl.LazyFrame | None = None,
    confidence: float = 0.95,
    provenance: Provenance | None = None,
    key: str = "summary",
    title: str = "What helped, what harmed, and the verdict",
) -> Section:
    """Build the headline that opens a report, read from the same results as its sections.

    Parameters
    ----------
    effects
        :func:`recoverylab.paired.summarize` (extra key columns, e.g. a cohort, allowed): the
        significantly positive cells, largest first, and the significantly negative ones.
    policy
        :func:`recoverylab.paired.evaluate_policy`: its net gain, its effect on clean runs and
        its clean-touch rate.
    router
        :func:`recoverylab.router.compare`: the same for each rule against never recovering,
        largest net gain first.
    gate
        :func:`recoverylab.paired.gate`'s result: the verdict and the claims not passing.
    drop
        :func:`recoverylab.goal.barrier_drop`: what access barriers cost, largest and smallest.
    takeover
        :func:`recoverylab.takeover.summarize` by agent (pooled over depth): the agents with the
        highest and the lowest EAR and pass@k.
    confidence
        Significance is a p-value below ``1 - confidence`` (the level of the intervals).
    provenance
        Where the results come from (default: none stated; each section below has its own).
    key, title
        Anchor and heading of the section (under the report's "Summary" heading).

    Returns
    -------
    Section
        No chart; its "table" is the list of findings. Each number names its source section
        (``data-source``: ``paired-effect``, ``paired-policy``, ``router-policies``,
        ``goal-drop``, ``takeover-funnel``), column and row keys, as the cells of the tables do.

    Raises
    ------
    ParameterError
        When no result is given, or ``confidence`` is not in (0, 1).
    """
    if not 0 < confidence < 1:
        raise ParameterError(f"parameter `confidence` is {confidence!r}; it must be in (0, 1).")
    alpha = round(1 - confidence, 10)
    lines: list[str] = []
    if gate is not None:
        lines += _gate_lines(gate)
    if effects is not None:
        lines += _effect_lines(as_frame(effects, "headline"), alpha)
    if router is not None:
        lines += _policy_lines(as_frame(router, "headline"), "router-policies", alpha)
    if policy is not None:
        lines += _policy_lines(as_frame(policy, "headline"), "paired-policy", alpha)
    if drop is not None:
        lines += _drop_lines(as_frame(drop, "headline"))
    if takeover is not None:
        lines += _takeover_lines(as_frame(takeover, "headline"))
    if not lines:
        raise ParameterError(
            "a headline needs at least one result: effects, policy, router, gate, drop or takeover."
        )
    items = "".join(f"<li>{line}</li>" for line in lines)
    return Section(
        key=key,
        group=SUMMARY,
        title=title,
        reading="The findings below are read from the tables of this report, each number as "
        "its table shows it; the sections that follow have every cell, its interval method "
        "and its provenance.",
        table=f'<ul class="headline">{items}</ul>',
        chart=None,
        provenance=provenance or Provenance(),
    )
