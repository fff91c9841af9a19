"""``recoverylab import swebench DIR...``: SWE-bench evaluation trees in as trials or forks."""

from __future__ import annotations

import argparse

from recoverylab.adapters import Imported
from recoverylab.cli._import_table import add_map_arguments, keys, pairs

HELP = "SWE-bench evaluation trees (logs/run_evaluation/RUN/MODEL/INSTANCE/report.json + summaries)"
DESCRIPTION = (
    "Read the directories SWE-bench's harness ran in (logs/run_evaluation/RUN_ID/MODEL/"
    "INSTANCE_ID/report.json, run.json, and the run summaries MODEL.RUN_ID.json) into trials: "
    "one row per (instance, run) with success = resolved; the runs of a model are its attempts "
    "(run-id order). Infrastructure failures (infra_failure_ids), errors (a report missing or "
    "empty), and incomplete instances go to excluded.parquet by reason; an empty patch is the "
    "agent's failure (--empty-patch exclude sends it to excluded). A report.json and the "
    "summary that disagree are an error naming both. Instance ids are per dataset: task_id is "
    "DATASET/INSTANCE_ID. --to forks maps the trials with --map COL=EXPR (polars SQL over "
    "model, run_id, dataset...)."
)
TARGETS = ("trials", "forks")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--dataset``, ``--empty-patch``, ``--map`` and ``--key``."""
    parser.add_argument(
        "--dataset",
        metavar="NAME",
        help="the dataset of runs without logs/run_evaluation/RUN_ID/run.json (before 5.x)",
    )
    parser.add_argument(
        "--empty-patch",
        choices=("failure", "exclude"),
        default="failure",
        help="an empty patch is the agent's failure (default) or excluded by reason",
    )
    add_map_arguments(parser)


def convert(args: argparse.Namespace) -> Imported:
    """Read the trees with :func:`recoverylab.adapters.swebench.read`."""
    from recoverylab.adapters import swebench

    return swebench.read(
        args.logs,
        to=args.to,
        dataset=args.dataset,
        empty_patch=args.empty_patch,
        mapping=pairs(args.map, "--map"),
        key=keys(args.key),
    )
