"""``recoverylab synth TABLE --tasks N --seed S --out DIR``: synthetic run logs."""

from __future__ import annotations

import argparse
from pathlib import Path

from recoverylab.cli._common import Progress


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``synth`` subcommand."""
    parser = subparsers.add_parser(
        "synth",
        help="write synthetic run logs with known ground truth",
        description="Write synthetic tables as parquet files under DIR/<table>/, in chunks.",
    )
    parser.add_argument("table", help="generator name (forks, decision_points, goal, takeover)")
    parser.add_argument("--tasks", type=int, default=1000, help="cluster units (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    parser.add_argument(
        "--chunk-tasks", type=int, default=100_000, help="units per output file (default 100000)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Write the generator's tables."""
    from recoverylab import synth  # imported when the command runs, not at --help

    written = synth.write(
        args.table,
        args.out,
        args.tasks,
        seed=args.seed,
        chunk_units=args.chunk_tasks,
        progress=Progress("synth", quiet=args.quiet),
    )
    for table, paths in written.items():
        print(f"{table}: {len(paths)} file(s) in {args.out / table}")
