"""``recoverylab import FORMAT LOGS...``: real harness logs in, our tables out (ARCHITECTURE §8).

Each format is one module ``recoverylab.cli._import_<format>`` exposing ``HELP`` (one line),
``DESCRIPTION``, ``TARGETS`` (the ``--to`` choices, the first being the default),
``add_arguments(parser)`` and ``convert(args) -> adapters.Imported``. This module adds the options
every format shares (``LOGS...``, ``--to``, ``--out DIR``, ``--report-out FILE``), writes the tables
and ``excluded.parquet`` as one staged set, and prints the read report on stderr. ``--raw-ids``
(every format) keeps the harness's task ids as written instead of qualifying them by their scope
(:func:`recoverylab.adapters.keep_raw_ids`: refused in one line when an id has two scopes).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

from recoverylab._errors import ParameterError

#: The formats ``recoverylab import`` knows, in the order ``--help`` lists them.
FORMATS = ("inspect", "harbor", "tau2", "osworld", "swebench", "table")


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"recoverylab.cli._import_{name}")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``import`` subcommand with one sub-subcommand per log format."""
    parser = subparsers.add_parser(
        "import",
        help="read real harness logs (" + ", ".join(FORMATS) + ") into our tables",
        description="Read real harness logs into forks, takeover or trials tables, plus "
        "excluded.parquet (units that could not be used, by reason, never counted as failures), "
        "into --out DIR; a read report goes to stderr (--quiet silences it) and to --report-out.",
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    formats.required = True
    for name in FORMATS:
        module = _module(name)
        sub = formats.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        sub.add_argument("logs", nargs="+", help="log files, directories or globs")
        sub.add_argument("--to", choices=module.TARGETS, default=module.TARGETS[0])
        sub.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
        sub.add_argument("--report-out", type=Path, help="write the read report here (JSON)")
        sub.add_argument(
            "--raw-ids",
            action="store_true",
            help="keep the harness's task ids as written instead of <scope>/<id> (refused when "
            "one id occurs under two scopes, e.g. tau2 task 0 in two domains)",
        )
        module.add_arguments(sub)
        sub.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Convert the logs and write the tables, ``excluded.parquet`` and the report."""
    from recoverylab._outputs import atomic_file
    from recoverylab.adapters import keep_raw_ids
    from recoverylab.cli._common import announce_written, emit_many, guard_output

    guard_out(args.out, args.logs)
    result = _module(args.format).convert(args)
    if args.raw_ids:
        result = keep_raw_ids(result)
    emit_many(result.outputs(), args.out, args)
    if args.report_out is not None:
        guard_output(args.report_out, args)
        with atomic_file(args.report_out) as handle:
            handle.write(result.report.to_json().encode("utf-8"))
        announce_written(f"wrote {args.report_out}")
    if not getattr(args, "quiet", False):
        print(result.report.render(), file=sys.stderr)


def guard_out(out: Path, logs: list[str]) -> None:
    """Refuse an output directory that is, or lies inside, an input directory."""
    target = out.resolve()
    for entry in logs:
        source = Path(entry)
        if source.is_dir() and (target == source.resolve() or source.resolve() in target.parents):
            raise ParameterError(
                f"`--out` is `{out}`, inside the input directory `{entry}`; choose a directory "
                "outside the logs."
            )
