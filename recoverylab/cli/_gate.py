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
    import polars as pl

    from recoverylab.paired import GateResult

#: Columns of the gate's text view, with their headers.
_TEXT_COLUMNS = {
    "claim": "claim",
    "cell": "cell",
    "n_tasks": "tasks",
    "estimate": "estimate pp",
    "bound": "bounds pp",
    "threshold": "threshold pp",
    "p_adjusted": "p adj.",
    "verdict": "verdict",
    "more": "more tasks",
}


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


def _text(result: GateResult) -> str:
    """Render the verdicts as a plain table that reads in a terminal or a log."""
    import polars as pl

    rows = result.claims.select(
        "claim",
        "cell",
        pl.col("n_tasks").cast(pl.String),
        (100 * pl.col("estimate")).round(1).cast(pl.String).alias("estimate"),
        pl.format(
            "[{}, {}]",
            (100 * pl.col("ci_low")).round(1),
            (100 * pl.col("ci_high")).round(1),
        ).alias("bound"),
        (100 * pl.col("threshold")).round(1).cast(pl.String).alias("threshold"),
        pl.col("p_adjusted").map_batches(_p_text, return_dtype=pl.String).alias("p_adjusted"),
        "verdict",
        pl.when(pl.col("verdict") == "INCONCLUSIVE")
        .then(pl.col("more_tasks").cast(pl.String).fill_null("?"))
        .otherwise(pl.lit(""))
        .alias("more"),
    ).rename(_TEXT_COLUMNS)
    widths = [max(len(name), *(len(v) for v in rows[name].to_list())) for name in rows.columns]
    numeric = {"tasks", "estimate pp", "threshold pp", "p adj.", "more tasks"}

    def line(values: list[str]) -> str:
        cells = [
            v.rjust(w) if name in numeric else v.ljust(w)
            for name, v, w in zip(rows.columns, values, widths, strict=True)
        ]
        return "  ".join(cells).rstrip()

    mode = "confidence sequences" if result.sequential else "fixed-n tests"
    head = (
        f"gate: {result.verdict} (exit {result.exit_status}); one-sided {mode}, "
        f"family adjusted: {result.adjust}"
    )
    body = [line(list(rows.columns)), line(["-" * w for w in widths])]
    body.extend(line([str(v) for v in row]) for row in rows.rows())
    return "\n".join([head, *body])


def _p_text(series: pl.Series) -> pl.Series:
    import polars as pl

    from recoverylab._display import p_str

    return pl.Series([p_str(v) for v in series.to_list()], dtype=pl.String)


def _show(result: GateResult, fmt: str) -> str:
    if fmt == "markdown":
        return result.to_markdown()
    if fmt == "json":
        return result.to_json()
    if fmt == "csv":
        return result.claims.write_csv().rstrip("\n")
    return _text(result)


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
        print(_show(result, args.format))
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
    emit(result.summary, None, args, title=title)
    if result.claims is None:
        return 0
    if fmt != "csv":  # csv holds one table: the verdict is the exit status
        print()
        print(_show(result.claims, fmt))
    return result.claims.exit_status
