"""The ``recoverylab`` command line (ARCHITECTURE §5).

Layout: one private module per subcommand (``_paired``, ``_router``, ``_goal``, ``_takeover``,
``_report``, ...) and their shared options (``_common``, ``_engine``, ``_table``). May import any
package's public API and the shared layer, never another package's private module; none imports it.

One entry point with a subcommand per protocol. Each subcommand lives in its own private module
(``_paired``, ``_goal``, ...) that exposes ``register(subparsers)``; a module that can show its
protocol on the shipped samples also exposes ``demo(out_dir, progress)``, which ``recoverylab demo``
calls in turn.

Start-up (issue 28): building the parser, ``--help`` and argument errors import the standard
library only. A subcommand module's top level declares its options, help and choices; polars, the
readers, the protocols and the table renderer are imported inside the functions that run a
command (``recoverylab.cli._run`` once the arguments are parsed). ``tests/test_startup.py`` holds
this in a fresh interpreter for every subcommand's ``--help`` and for argument errors.

Bad input prints one line to stderr and exits with status 2 (``--debug`` shows the traceback);
outputs are written atomically, so a failed command leaves no file behind.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from recoverylab._formats import FORMATS
from recoverylab._signals import Stopped, stopping_on_signals
from recoverylab.cli._common import check_output_targets, mark_keywords

__all__ = ["COMMAND_MODULES", "build_parser", "command_modules", "main"]

#: Subcommand modules, in the order they appear in ``--help`` and run in ``demo``.
COMMAND_MODULES = (
    "_validate",
    "_import",
    "_synth",
    "_goal",
    "_router",
    "_paired",
    "_plan",
    "_gate",
    "_takeover",
    "_report",
    "_demo",
)

INPUT_FORMATS = tuple(sorted(set(FORMATS.values())))


def command_modules() -> list[ModuleType]:
    """Import and return every subcommand module."""
    return [importlib.import_module(f"recoverylab.cli.{name}") for name in COMMAND_MODULES]


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand."""
    from recoverylab import __version__

    parser = argparse.ArgumentParser(
        prog="recoverylab",
        description="Measure how well AI agents and their harnesses recover from errors.",
    )
    parser.add_argument("--version", action="version", version=f"recoverylab {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--quiet", action="store_true", help="print nothing on stderr but errors")
    parser.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default=None,
        help="read every input file as this format (default: from each file's suffix)",
    )
    parser.add_argument(
        "--verify-inputs",
        action="store_true",
        help="decode every input file before the work (checks parquet page checksums)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module in command_modules():
        module.register(subparsers)
    for sub in subparsers.choices.values():  # the flags work after the subcommand too
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
        sub.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS)
        sub.add_argument("--input-format", choices=INPUT_FORMATS, default=argparse.SUPPRESS)
        sub.add_argument("--verify-inputs", action="store_true", default=argparse.SUPPRESS)
    check_output_targets(parser)  # every output option checks its target as it is parsed
    mark_keywords(parser)  # a chosen word (--to forks) is never taken for an input path
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 2 bad input, 128 + n: signal n).

    A command may return its own status (gate: 1 a claim fails, 3 inconclusive).

    SIGINT, SIGTERM, SIGHUP and SIGPIPE stop the run like a failure (nothing is written, every
    staged output is removed): one line on stderr and status 128 + the signal's number; a closed
    pipe on stdout (SIGPIPE) ends the run quietly, as it does for other Unix tools.
    """
    command = None
    try:
        with stopping_on_signals():
            args = build_parser().parse_args(argv)
            command = args.command
            # the work, and with it polars and the readers, is imported once a command runs
            from recoverylab.cli._run import run

            return run(args)
    except (KeyboardInterrupt, BrokenPipeError) as exc:
        return _stopped(command, exc)


def _stopped(command: str | None, exc: BaseException) -> int:
    """Say (in one line) that a signal stopped the run; return the shell's status for it."""
    name = f"recoverylab {command}" if command else "recoverylab"
    signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
    if isinstance(exc, BrokenPipeError) or signum == getattr(signal, "SIGPIPE", None):
        _silence_stdout()
        return 128 + getattr(signal, "SIGPIPE", 13)
    if signum == signal.SIGINT:
        print(f"{name}: interrupted", file=sys.stderr)
    else:
        print(f"{name}: stopped by {signal.Signals(signum).name}", file=sys.stderr)
    return 128 + signum


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit does not fail again on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (e.g. captured in tests)
        pass
