"""``recoverylab plan``: plan a paired recovery study (minimum detectable effect, tasks needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from recoverylab.cli import _engine as spark_cli
from recoverylab.cli._common import (
    Progress,
    add_printing,
    add_statistics,
    emit,
    source,
    split_list,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plan`` subcommand."""
    parser = subparsers.add_parser(
        "plan",
        help="plan a paired study: tasks needed and minimum detectable effect",
        description="From assumed rescue/harm rates (--p10, --p01) or a pilot forks table: the "
        "tasks a paired study needs to detect the effect p10 - p01 with the exact sign-flip "
        "test, and with --tasks the minimum detectable effect at that size. Several pairs per "
        "task (--pairs-per-task) add the design effect 1 + (m - 1) * icc.",
    )
    parser.add_argument("pilot", nargs="*", help="optional pilot forks table (paths or globs)")
    parser.add_argument("--p10", type=float, help="assumed rescue rate of a pair")
    parser.add_argument("--p01", type=float, help="assumed harm rate of a pair")
    parser.add_argument("--tasks", type=int, help="planned tasks: report the MDE at this size")
    parser.add_argument("--pairs-per-task", type=float, help="pairs per task m (default 1)")
    parser.add_argument("--icc", type=float, help="intra-class correlation of pairs in a task")
    parser.add_argument("--alpha", type=float, default=0.05, help="test level (default 0.05)")
    parser.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    parser.add_argument(
        "--alternative",
        choices=("two-sided", "greater", "less"),
        default="two-sided",
        help="sidedness of the test (default two-sided)",
    )
    parser.add_argument(
        "--by",
        type=split_list,
        default=("condition", "delay", "method"),
        help="pilot cells, comma separated (default condition,delay,method)",
    )
    parser.add_argument(
        "--simulate",
        type=int,
        metavar="N",
        help="with several pairs per task, size the study by simulating the exact test N times",
    )
    add_statistics(parser, resamples=2000)
    spark_cli.add_engine(parser)
    parser.add_argument("--out", type=Path, help="write the plan to this parquet file")
    add_printing(parser)
    parser.set_defaults(func=run_plan)


def run_plan(args: argparse.Namespace) -> None:
    """Print (or write) the study plan."""
    from recoverylab import paired  # imported when the command runs, not at --help

    progress = Progress("plan", quiet=args.quiet)
    engine = spark_cli.engine_from(args)
    pilot: object = None
    if args.pilot:  # Spark reads the paths itself
        pilot = source(args.pilot, engine)
        progress("estimating p10, p01 and the ICC from the pilot")
    if args.simulate:
        progress(f"sizing by {args.simulate} simulated studies per step (exact sign-flip test)")
    plan = paired.plan_study(
        pilot,
        p10=args.p10,
        p01=args.p01,
        n_tasks=args.tasks,
        pairs_per_task=args.pairs_per_task,
        icc=args.icc,
        alpha=args.alpha,
        power=args.power,
        alternative=args.alternative,
        by=args.by,
        confidence=args.confidence,
        n_resamples=args.resamples,
        seed=args.seed,
        n_sims=args.simulate,
        engine=engine,
    )
    emit(plan, args.out, args, title="paired study plan", face="paired.plan")
