"""``recoverylab validate TABLE PATH...``: check a table against its contract."""

from __future__ import annotations

import argparse

import polars as pl

from recoverylab._display import count_text
from recoverylab.cli._common import read, split_list
from recoverylab.schema import SPECS, validate


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` subcommand."""
    parser = subparsers.add_parser(
        "validate",
        help="check a table against its contract",
        description="Check a table (parquet, Arrow IPC, CSV, NDJSON; paths or globs) against "
        "its contract. Prints `ok: N rows`, or one line naming the problem (exit 2).",
    )
    parser.add_argument("table", choices=sorted(SPECS), help="which contract to check")
    parser.add_argument("paths", nargs="+", help="files, directories or globs")
    parser.add_argument(
        "--key",
        type=split_list,
        default=(),
        help="extra key columns (pair_by), comma separated",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Validate and print the row count."""
    rows = validate(read(args.paths), args.table, key=args.key).select(pl.len()).collect().item()
    print(f"ok: {count_text(rows)}")
