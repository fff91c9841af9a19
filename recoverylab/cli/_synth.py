"""``recoverylab synth TABLE --tasks N --seed S --out DIR``: synthetic run logs."""

from __future__ import annotations

import argparse
from pathlib import Path

from recoverylab.cli._common import Progress

#: Harnesses whose per-run directory trees ``synth`` writes (``recoverylab import NAME`` reads).
TREES = ("osworld", "swebench")


def _write_tree(args: argparse.Namespace) -> None:
    """Write a harness's tree as its own writer lays it out (see the synth module named)."""
    tasks = 6 if args.tasks is None else args.tasks
    root: Path | list[Path]
    if args.table == "swebench":
        from recoverylab.synth.swebench_runs import write_swebench_runs

        root = write_swebench_runs(args.out, instances=tasks, seed=args.seed)
        what = "a SWE-bench evaluation tree (logs/run_evaluation/ and run summaries)"
    else:
        from recoverylab.synth.osworld_runs import write_osworld_runs

        root = write_osworld_runs(
            args.out,
            examples=tasks,
            repeats=args.repeats,
            seed=args.seed,
            recovery_marker="RECOVERY:",
        )
        what = "an OSWorld results tree (recovery marker RECOVERY:)"
    print(f"wrote {what} in {root if isinstance(root, Path) else args.out}")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``synth`` subcommand."""
    parser = subparsers.add_parser(
        "synth",
        help="write synthetic run logs with known ground truth",
        description="Write synthetic tables as parquet files under DIR/<table>/, in chunks.",
    )
    parser.add_argument(
        "table",
        help="generator name (forks, decision_points, goal, takeover), or a harness whose "
        "directory tree to write (" + ", ".join(TREES) + ")",
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=None,
        help="cluster units (default 1000; harness trees: tasks per domain or dataset, default 6)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="osworld: results directories, one per repeat (DIR/repeat-N/ when more than 1)",
    )
    parser.add_argument(
        "--chunk-tasks", type=int, default=100_000, help="units per output file (default 100000)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Write the generator's tables (or a harness's directory tree)."""
    if args.table in TREES:
        _write_tree(args)
        return
    from recoverylab import synth  # imported when the command runs, not at --help

    written = synth.write(
        args.table,
        args.out,
        1000 if args.tasks is None else args.tasks,
        seed=args.seed,
        chunk_units=args.chunk_tasks,
        progress=Progress("synth", quiet=args.quiet),
    )
    for table, paths in written.items():
        print(f"{table}: {len(paths)} file(s) in {args.out / table}")
