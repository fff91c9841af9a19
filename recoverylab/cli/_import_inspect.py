"""``recoverylab import inspect LOGS...``: inspect_ai evaluation logs (extra ``[inspect]``)."""

from __future__ import annotations

import argparse
import sys
import warnings

from recoverylab._errors import ParameterError
from recoverylab.adapters import Imported

HELP = "inspect_ai evaluation logs (.eval or .json)"
DESCRIPTION = (
    "Read inspect_ai evaluation logs (.eval or .json: files, directories or globs) through "
    "inspect_ai and write our tables plus excluded.parquet (samples that errored, hit a limit, "
    "or have no usable score, by reason) into --out DIR. Sample ids are per dataset: task_id is "
    "DATASET/ID when the log names its dataset (the id as written in raw_task_id). Needs the "
    "[inspect] extra."
)
TARGETS = ("forks", "takeover")
_SOURCE_HELP = (
    "task_arg:NAME, eval_metadata:NAME (task metadata too), sample_metadata:NAME, model, task or "
    "literal:VALUE"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options that say where each of our columns comes from in an inspect log."""
    parser.add_argument("--condition", help=f"forks: where condition comes from ({_SOURCE_HELP})")
    parser.add_argument("--method", help="forks: where method comes from")
    parser.add_argument("--delay", help="forks: where delay comes from")
    parser.add_argument("--none-label", default="none", help="method of the no-recovery arm")
    parser.add_argument("--scorer", help="score to read (default: the only one)")
    parser.add_argument("--score-key", help="key to read of a dict-valued score")
    parser.add_argument(
        "--success", type=float, help="success threshold for numeric or letter scores"
    )
    parser.add_argument(
        "--recovery-marker", help="store:KEY, sample_metadata:KEY or event:NAME (carry-forward)"
    )
    parser.add_argument("--perturb-action", help="where perturb_action comes from")
    parser.add_argument("--epochs", choices=("forks", "independent"), help="what epochs are")
    parser.add_argument("--state", help="takeover: where the state key comes from")
    parser.add_argument("--agent", default="model", help="takeover: where the agent comes from")
    parser.add_argument("--workflow", help="takeover: where workflow_id comes from")
    parser.add_argument("--root-cause", help="takeover: where root_cause_id comes from")
    parser.add_argument(
        "--depth", default="sample_metadata:depth", help="takeover: where depth comes from"
    )


def convert(args: argparse.Namespace) -> Imported:
    """Read the logs with :mod:`recoverylab.adapters.inspect`; print its warnings on stderr.

    The adapter's result is itself an :class:`Imported` carrying its read report (files read,
    logs used and superseded, samples per exclusion reason, rows).
    """
    from recoverylab.adapters import inspect as adapter

    result: Imported
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", adapter.EpochWarning)
        if args.to == "forks":
            missing = [f"--{n}" for n in ("condition", "method", "delay") if not getattr(args, n)]
            if missing:
                raise ParameterError(f"import inspect --to forks needs {', '.join(missing)}.")
            result = adapter.forks(
                args.logs,
                condition=args.condition,
                method=args.method,
                delay=args.delay,
                none_label=args.none_label,
                scorer=args.scorer,
                score_key=args.score_key,
                success=args.success,
                recovery_marker=args.recovery_marker,
                perturb_action=args.perturb_action,
                epochs=args.epochs,
            )
        else:
            result = adapter.takeover(
                args.logs,
                state=args.state,
                agent=args.agent,
                workflow=args.workflow,
                root_cause=args.root_cause,
                depth=args.depth,
            )
    for warning in caught:
        if not args.quiet:
            print(f"warning: {warning.message}", file=sys.stderr)
    return result
