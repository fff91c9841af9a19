"""``recoverylab synth TABLE --tasks N --seed S --out DIR``: synthetic run logs."""

from __future__ import annotations

import argparse
from pathlib import Path

from recoverylab._errors import ParameterError
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
    judged = parser.add_argument_group(
        "judged columns (forks only)",
        "a `judge` verdict with known error and a `gold` label on a random share of tasks",
    )
    for flag, what in (
        ("--judge-sensitivity", "P(verdict true | success)"),
        ("--judge-specificity", "P(verdict false | failure)"),
    ):
        judged.add_argument(
            flag,
            default=None,
            metavar="RATE",
            help=f"{what}: one value, or per condition as clean=0.9,stale1=0.8,*=0.85",
        )
    judged.add_argument(
        "--gold-share",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of tasks whose rows carry a gold label (the true outcome)",
    )
    parser.set_defaults(func=run)


def _judge_rate(flag: str, text: str) -> float | dict[str, float]:
    """Parse ``0.9`` or ``clean=0.9,*=0.8`` (one clear error otherwise)."""
    try:
        if "=" not in text:
            return float(text)
        pairs = (item.split("=", 1) for item in text.split(",") if item.strip())
        return {label.strip(): float(value) for label, value in pairs}
    except ValueError:
        raise ParameterError(
            f"{flag} is {text!r}; give a rate (0.9) or rates per condition (clean=0.9,*=0.8)."
        ) from None


def _judged_options(args: argparse.Namespace) -> dict[str, object]:
    """Return the generator options of the judged flags given (none: the default rows)."""
    options: dict[str, object] = {}
    for flag in ("judge_sensitivity", "judge_specificity"):
        text = getattr(args, flag)
        if text is not None:
            options[flag] = _judge_rate("--" + flag.replace("_", "-"), text)
    if args.gold_share is not None:
        options["gold_share"] = args.gold_share
    if options and args.table != "forks":
        raise ParameterError(
            f"--judge-sensitivity, --judge-specificity and --gold-share apply to the "
            f"forks table only, not {args.table!r}."
        )
    return options


def run(args: argparse.Namespace) -> None:
    """Write the generator's tables (or a harness's directory tree)."""
    options = _judged_options(args)
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
        **options,
    )
    for table, paths in written.items():
        print(f"{table}: {len(paths)} file(s) in {args.out / table}")
