"""``recoverylab import inspect LOGS...``: real evaluation logs in, our tables out (§8)."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import polars as pl

from recoverylab._errors import ParameterError
from recoverylab.cli._common import emit_many

_SOURCE_HELP = (
    "task_arg:NAME, eval_metadata:NAME, sample_metadata:NAME, model, task or literal:VALUE"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``import`` subcommand (one format so far: ``inspect``)."""
    parser = subparsers.add_parser(
        "import",
        help="read real evaluation logs (inspect_ai) into forks or takeover tables",
        description="Read inspect_ai evaluation logs (.eval or .json: files, directories or "
        "globs) through inspect_ai and write our tables plus excluded.parquet (samples that "
        "errored, hit a limit, or have no usable score, by reason) into --out DIR. Needs the "
        "[inspect] extra.",
    )
    parser.add_argument("format", choices=("inspect",), help="log format")
    parser.add_argument("logs", nargs="+", help="log files, directories or globs")
    parser.add_argument("--to", choices=("forks", "takeover"), default="forks")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--condition", help=f"forks: where condition comes from ({_SOURCE_HELP})")
    parser.add_argument("--method", help="forks: where method comes from")
    parser.add_argument("--delay", help="forks: where delay comes from")
    parser.add_argument("--none-label", default="none", help="method of the no-recovery arm")
    parser.add_argument("--scorer", help="score to read (default: the only one)")
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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Convert the logs and write the tables and ``excluded.parquet`` into ``--out``."""
    _guard_out(args.out, args.logs)
    from recoverylab.adapters import inspect as adapter

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
                success=args.success,
                recovery_marker=args.recovery_marker,
                perturb_action=args.perturb_action,
                epochs=args.epochs,
            )
            tables = {"forks": result.forks, "excluded": result.excluded}
            hint = f" (pair by {', '.join(result.pair_by)})" if result.pair_by else ""
        else:
            taken = adapter.takeover(
                args.logs,
                state=args.state,
                agent=args.agent,
                workflow=args.workflow,
                root_cause=args.root_cause,
                depth=args.depth,
            )
            tables = {
                "states": taken.states,
                "attempts": taken.attempts,
                "excluded": taken.excluded,
            }
            hint = ""
    for warning in caught:
        if not args.quiet:
            print(f"warning: {warning.message}", file=sys.stderr)
    emit_many(tables, args.out, args)
    if not args.quiet:
        print(_summary(tables) + hint, file=sys.stderr)


def _summary(tables: dict[str, pl.DataFrame]) -> str:
    """E.g. ``forks: 54 rows; excluded: 18 (error 6, recovery_not_applied 12)``."""
    excluded = tables["excluded"]
    reasons = excluded.group_by("reason").len().sort("reason").rows()
    detail = ", ".join(f"{r} {n}" for r, n in reasons)
    used = "; ".join(f"{k}: {v.height} rows" for k, v in tables.items() if k != "excluded")
    return f"{used}; excluded: {excluded.height}" + (f" ({detail})" if detail else "")


def _guard_out(out: Path, logs: list[str]) -> None:
    """Refuse an output directory that is, or lies inside, an input directory."""
    target = out.resolve()
    for entry in logs:
        source = Path(entry)
        if source.is_dir() and (target == source.resolve() or source.resolve() in target.parents):
            raise ParameterError(
                f"`--out` is `{out}`, inside the input directory `{entry}`; choose a directory "
                "outside the logs."
            )
