"""``recoverylab gate | monitor``: ship or hold, and anytime-valid monitoring (ARCHITECTURE §9).

``gate`` exits 0 when every claim passes, 1 when a claim fails, 3 when a claim is inconclusive
(2 stays "bad input"), so a CI job can gate a release on it; ``--format markdown`` fits a CI job
summary (``>> $GITHUB_STEP_SUMMARY``). ``monitor`` prints each cell's confidence sequence after
its latest task; with ``--policy`` it also decides the claims sequentially and exits as ``gate``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from recoverylab.cli._common import (
    Progress,
    add_grouping,
    add_printing,
    emit,
    guard_output,
    printing,
    read,
    split_list,
    write_output,
)

if TYPE_CHECKING:
    from recoverylab.paired import GateResult

#: What each kind of claim asserts about its estimate (the threshold follows).
_ASSERTS = {
    "superiority": "effect >=",
    "non_inferiority": "effect >=",
    "max_harm_rate": "harm rate <=",
    "max_clean_touch": "clean-touch rate <=",
}
#: The family adjustments, by name, as a reader knows them.
_ADJUSTMENTS = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no"}
#: Power at which ``tasks_needed`` sizes a fixed-n study (``paired`` gate, power 0.8).
GATE_POWER = 0.8


def _add_sequential_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--order",
        help="column that orders tasks by arrival, e.g. a finish time (default: file, then "
        "row order; a task arrives with its last row)",
    )
    parser.add_argument(
        "--max-pairs",
        type=float,
        default=None,
        help="known bound on a task's pairs in a cell (default: the most seen)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``gate`` and ``monitor`` subcommands."""
    parser = subparsers.add_parser(
        "gate",
        help="ship or hold: judge a policy's claims on the forks (exit 0 pass, 1 fail, 3 "
        "inconclusive)",
        description="Judge every claim of a TOML policy (superiority, non_inferiority, "
        "max_harm_rate, max_clean_touch) on the cells it names, by one-sided test-compatible "
        "intervals adjusted as one family. Exit status: 0 every claim passes, 1 a claim fails, "
        "3 a claim is inconclusive, 2 bad input.",
    )
    parser.add_argument("policy", type=Path, help="policy file (TOML)")
    parser.add_argument("forks", nargs="+", help="forks table (paths, globs or directories)")
    parser.add_argument(
        "--decisions",
        nargs="+",
        help="decision table of max_clean_touch claims (default: the policy's `decisions`)",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="decide with anytime-valid confidence sequences (safe to re-run after every batch)",
    )
    _add_sequential_options(parser)
    parser.add_argument("--out", type=Path, help="write the verdict rows to this file")
    parser.add_argument(
        "--format",
        choices=("text", "markdown", "json", "csv"),
        default="text",
        help="printed form: text (default), markdown (a CI job summary), json or csv",
    )
    parser.add_argument(
        "--wide", action="store_true", help="print every column (default: the main columns)"
    )
    parser.set_defaults(func=run_gate)

    parser = subparsers.add_parser(
        "monitor",
        help="confidence sequences of each cell's effect over tasks in arrival order",
        description="Follow each cell's recovery effect over its tasks in arrival order with an "
        "anytime-valid confidence sequence (valid when looked at after every task and stopped "
        "at any time). With --policy, also decide the policy's claims sequentially and exit "
        "as `gate` does (0 pass, 1 fail, 3 inconclusive).",
    )
    parser.add_argument("forks", nargs="+", help="forks table (paths, globs or directories)")
    add_grouping(parser)
    parser.add_argument(
        "--pair-by", type=split_list, default=(), help="extra keys a pair shares (e.g. seed)"
    )
    parser.add_argument("--cohort", choices=("full", "factual_success"), default="full")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="sequence confidence (default 0.95)"
    )
    _add_sequential_options(parser)
    parser.add_argument("--policy", type=Path, help="also decide this policy's claims")
    parser.add_argument("--decisions", nargs="+", help="decision table of max_clean_touch claims")
    parser.add_argument(
        "--out", type=Path, help="write every cell's whole sequence (one row per task) here"
    )
    add_printing(parser)
    parser.set_defaults(func=run_monitor)


def explanation(result: GateResult) -> list[str]:
    """Return the lines above the gate's tables: the verdict, the bounds' level, "more tasks".

    The gate's bounds are one-sided and each sits at its row's family-adjusted level (see
    :func:`recoverylab.paired.gate`), so they differ from the two-sided intervals of
    ``recoverylab paired`` for the same cell; the lines say so, and what "more tasks" assumes.
    """
    adjust = _ADJUSTMENTS.get(result.adjust, result.adjust)
    levels = sorted(set(result.claims["confidence"].to_list()))
    alpha = ", ".join(f"{100 * (1 - c):g}%" for c in levels)
    mode = "confidence sequences (anytime-valid)" if result.sequential else "fixed-n tests"
    family = "unadjusted" if result.adjust == "none" else f"adjusted as one family ({adjust})"
    if result.adjust == "none":
        where = f"at the one-sided level alpha = {alpha}"
    else:
        where = (
            f"each at its row's {adjust}-adjusted one-sided level (alpha x p / p adjusted, "
            f"alpha = {alpha})"
        )
    sequences = " of the confidence sequence" if result.sequential else ""
    return [
        f"gate: {result.verdict} (exit {result.exit_status}); claims decided by one-sided "
        f"{mode}{_procedures(result)}, p-values {family}.",
        f"bounds{sequences}: {where}; not the two-sided {100 * levels[0]:g}% intervals "
        "`recoverylab paired` prints for the same cell, hence the difference.",
        "more tasks: tasks beyond those seen that a fixed-n study would need to decide the "
        f"claim with {100 * GATE_POWER:g}% power at the row's adjusted level, if the estimate's "
        "distance to the threshold stayed as observed (effects: the paired planner at the "
        "observed share of discordant pairs and pairs per task, pairs of a task uncorrelated; "
        "rates: a normal approximation times the observed design effect).",
    ]


def _procedures(result: GateResult) -> str:
    """Name the interval methods and tests the rows record (`` (fay-lumbard; ...)``), if any."""
    from recoverylab.cli._table import _values

    claims = result.claims
    named = [_values(claims, c) for c in ("ci_method", "test") if c in claims.columns]
    named = list(dict.fromkeys(n for n in named if n))  # a test named as its method: once
    return f" ({'; '.join(named)})" if named else ""


def _text(result: GateResult, width: int, *, wide: bool = False) -> str:
    """Render the verdicts: the explanation, then one table per claim that fits ``width``."""
    import polars as pl

    from recoverylab.cli._table import render, wrap_text

    parts = [wrap_text(line, width, indent="  ") for line in explanation(result)]
    claims = result.claims
    for name, kind, threshold in (
        claims.select("claim", "kind", "threshold").unique(maintain_order=True).iter_rows()
    ):
        rows = claims.filter(pl.col("claim") == name)
        more = pl.when(pl.col("verdict") == "INCONCLUSIVE").then(pl.col("more_tasks"))
        redundant = ("claim", "kind", "threshold", "confidence", "condition", "delay", "method")
        shown = rows.drop(redundant).with_columns(more.alias("more_tasks"))
        title = f"{name} ({kind}: {_ASSERTS.get(kind, kind)} {100 * threshold:+.1f} pp)"
        table = render(shown, face="gate.claims", width=width, line="", wide=wide)
        parts.append(wrap_text(title, width, indent="  ") + "\n" + table)
    return "\n\n".join(parts)


def _show(result: GateResult, fmt: str, *, wide: bool = False) -> str:
    if fmt == "markdown":  # the verdict table, then what its bounds and "more tasks" mean
        return result.to_markdown() + "\n" + "\n\n".join(explanation(result)[1:])
    if fmt == "json":
        return result.to_json()
    if fmt == "csv":
        return result.claims.write_csv().rstrip("\n")
    from recoverylab.cli._table import terminal_width

    return _text(result, terminal_width(), wide=wide)


def run_gate(args: argparse.Namespace) -> int:
    """Judge the policy's claims; return the gate's exit status."""
    from recoverylab import paired  # imported when the command runs, not at --help

    progress = Progress("gate", quiet=args.quiet)
    if args.out is not None:
        guard_output(args.out, args)
    policy = paired.read_policy(args.policy)  # a bad policy fails before any data is read
    progress(f"pairing the forks and judging {len(policy.claims)} claims")
    result = paired.gate(
        read(args.forks),
        policy,
        decisions=read(args.decisions) if args.decisions else None,
        sequential=args.sequential,
        order=args.order,
        max_pairs=args.max_pairs,
    )
    if args.out is not None:
        write_output(result.claims, args.out, args)
    else:
        print(_show(result, args.format, wide=args.wide))
    return result.exit_status


def run_monitor(args: argparse.Namespace) -> int:
    """Print each cell's confidence sequence; with a policy, return the gate's exit status."""
    from recoverylab import paired  # imported when the command runs, not at --help

    progress = Progress("monitor", quiet=args.quiet)
    if args.out is not None:
        guard_output(args.out, args)
    policy = None if args.policy is None else paired.read_policy(args.policy)
    progress("pairing the forks and following each cell over its tasks")
    result = paired.monitor(
        read(args.forks),
        by=args.by,
        pair_by=args.pair_by,
        cohort=args.cohort,
        order=args.order,
        confidence=args.confidence,
        max_pairs=args.max_pairs,
        policy=policy,
        decisions=read(args.decisions) if args.decisions else None,
    )
    if args.out is not None:
        write_output(result.sequences, args.out, args)
    fmt = printing(args)[0]
    if fmt == "json" and result.claims is not None:  # one JSON document on stdout
        gate = json.loads(result.claims.to_json())
        print(json.dumps({"cells": result.summary.to_dicts(), "gate": gate}, default=str))
        return result.claims.exit_status
    level = f"{100 * result.confidence:g}%"
    title = f"each cell after its latest task ({level} confidence sequences, anytime-valid)"
    emit(result.summary, None, args, title=title, face="paired.monitor")
    if result.claims is None:
        return 0
    if fmt != "csv":  # csv holds one table: the verdict is the exit status
        print()
        print(_show(result.claims, fmt, wide=printing(args)[1]))
    return result.claims.exit_status
