"""``recoverylab demo --out DIR``: every protocol on the shipped samples, and the report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recoverylab._errors import MissingDependencyError
from recoverylab._outputs import OutputSet
from recoverylab.cli._common import Progress, current_outputs, guard_output
from recoverylab.cli._report import demo_report


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run every protocol on the shipped samples",
        description="Run every protocol on data_samples/ and write its results (parquet) and "
        "report.html into DIR.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("demo_out"),
        metavar="DIR",
        help="output directory (default demo_out)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Call ``demo(out_dir, progress)`` of every subcommand module, then write report.html.

    A part whose optional extra is missing (the router needs scikit-learn, the report altair)
    is skipped with one line on stderr naming the extra; the other parts still run.
    """
    from recoverylab.cli import command_modules

    progress = Progress("demo", quiet=args.quiet)
    guard_output(args.out, args)
    # The parts write into a staging folder and read each other's results there; its entries
    # replace those of --out together at the end (other files in --out are left alone).
    staging = current_outputs().stage_tree(args.out)
    written: list[Path] = []
    with OutputSet.suspended():
        for module in command_modules():
            demo = getattr(module, "demo", None)
            if demo is None:
                continue
            try:
                written.extend(demo(staging, progress))
            except MissingDependencyError as exc:
                name = module.__name__.rsplit("._", 1)[-1]
                print(f"recoverylab demo: {name} skipped: {exc}", file=sys.stderr)
        report = demo_report(staging, progress)  # None when the report extra is not installed
    if report is not None:
        written.append(report)
    for path in written:
        print(args.out / path.relative_to(staging))
