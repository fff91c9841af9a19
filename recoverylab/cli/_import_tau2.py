"""``recoverylab import tau2 RESULTS...``: tau2-bench results (either layout) in as trials."""

from __future__ import annotations

import argparse

from recoverylab._errors import ParameterError
from recoverylab.adapters import Imported
from recoverylab.cli._import_table import add_map_arguments, keys, pairs

HELP = "tau2-bench results (a results JSON, or a results.json + simulations/ directory)"
DESCRIPTION = (
    "Read tau2-bench results files or run directories (or folders of them) into trials: one row "
    "per (task, trial) with reward, success (reward 1), termination reason, domain and "
    "agent/user model. Infrastructure errors and context-window overflows go to "
    "excluded.parquet by reason (tau2-bench's NON_EVALUABLE_TERMINATION_REASONS); a resumed "
    "run's retries replace its infrastructure errors. tau2 numbers tasks per domain: task_id is "
    "DOMAIN/ID (airline/0; the id as written in raw_task_id). --to forks maps the trials to "
    "forks with --map COL=EXPR (polars SQL over the trials columns)."
)
TARGETS = ("trials", "forks")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--map`` and ``--key`` (for ``--to forks``)."""
    add_map_arguments(parser)


def convert(args: argparse.Namespace) -> Imported:
    """Read the results with :func:`recoverylab.adapters.tau2.read`."""
    from recoverylab.adapters import tau2

    mapping = pairs(args.map, "--map")
    if args.to == "trials" and (mapping or args.key):
        raise ParameterError("import tau2: `--map` and `--key` apply to `--to forks` only.")
    return tau2.read(args.logs, to=args.to, mapping=mapping, key=keys(args.key))
