"""``recoverylab import osworld RESULTS_DIR...``: OSWorld result trees in as trials or forks."""

from __future__ import annotations

import argparse

from recoverylab.adapters import Imported
from recoverylab.cli._import_table import add_map_arguments, keys, pairs

HELP = "OSWorld results directories (ACTION_SPACE/OBSERVATION/MODEL/DOMAIN/EXAMPLE/result.txt)"
DESCRIPTION = (
    "Read OSWorld --result_dir directories (ACTION_SPACE/OBSERVATION_TYPE/MODEL/DOMAIN/"
    "EXAMPLE_ID/result.txt beside traj.jsonl, as OSWorld's lib_run_single.py writes them) into "
    "trials: one row per example and results directory, reward = the score, success = reward "
    ">= --success (default 1); each directory given is one repeat (attempt 0, 1, ...). An "
    "example without result.txt is unfinished: excluded by reason. Example ids are per domain: "
    "task_id is DOMAIN/EXAMPLE_ID. --to forks maps the trials with --map COL=EXPR (polars SQL "
    "over model, action_space, observation_type, domain, attempt). --to takeover --marker TEXT: "
    "a trajectory step whose response or action holds TEXT makes the attempt aware; states and "
    "attempts are mapped from the trials (state = example, agent = model, repeat = attempt, "
    "passed = success; --map root_cause_fixed=EXPR --map derived_fixed=EXPR are required)."
)
TARGETS = ("trials", "forks", "takeover")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--success``, ``--marker``, ``--map`` and ``--key``."""
    parser.add_argument(
        "--success",
        type=float,
        default=1.0,
        metavar="T",
        help="a score >= T is a success (default 1; OSWorld scores are in [0, 1])",
    )
    parser.add_argument(
        "--marker",
        metavar="TEXT",
        help="recovery marker: a traj.jsonl step whose response or action holds TEXT makes the "
        "attempt aware (columns aware, marker_step; needed by --to takeover)",
    )
    add_map_arguments(parser)


def convert(args: argparse.Namespace) -> Imported:
    """Read the results with :func:`recoverylab.adapters.osworld.read`."""
    from recoverylab.adapters import osworld

    return osworld.read(
        args.logs,
        to=args.to,
        success=args.success,
        mapping=pairs(args.map, "--map"),
        key=keys(args.key),
        marker=args.marker,
    )
