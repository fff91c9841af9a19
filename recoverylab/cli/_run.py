"""Running a parsed command: its outputs staged and committed together, bad input in one line.

:func:`recoverylab.cli.main` builds the parser and parses the arguments with the standard library
only; this module, and with it polars and the readers, is imported once a command is about to run.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

from recoverylab._diagnose import engine_errors
from recoverylab._errors import RecoveryLabError
from recoverylab._formats import FORMATS
from recoverylab._resolve import ignored
from recoverylab._signals import raise_if_stopped
from recoverylab.cli._common import Inputs, command_outputs, configure_printing
from recoverylab.cli._native_stderr import native_stderr_filtered
from recoverylab.io import translate_read_errors

__all__ = ["EXIT_BAD_INPUT", "run"]

EXIT_BAD_INPUT = 2


def _expected() -> tuple[type[BaseException], ...]:
    """Errors that mean "bad input or option": one line on stderr and exit 2, no traceback.

    Resolved when an exception is being handled, so pyarrow is not imported to build it; Spark's
    own errors (an input it cannot analyse, say a missing column) count once pyspark is loaded.
    """
    spark = sys.modules.get("pyspark.errors")
    extra = (spark.PySparkException,) if spark is not None else ()
    return (*engine_errors(), *extra, RecoveryLabError, OSError)


def run(args: argparse.Namespace) -> int:
    """Run the parsed command ``args``; return its exit status (2: bad input, in one line).

    Every output is staged and committed at the end, or none; an engine error is explained by
    finding the input file (and line) that caused it.
    """
    configure_printing()
    try:
        with ExitStack() as stack:
            if not args.debug:
                stack.enter_context(native_stderr_filtered())
            stack.enter_context(command_outputs(args))
            stack.enter_context(translate_read_errors(_input_files(args)))
            status = args.func(args)
    except BrokenPipeError:
        raise  # stdout closed downstream: the run stops quietly (see main)
    except _expected() as exc:
        # a stop signal raised inside an engine call may come back as the engine's own error
        # (polars turns it into a PanicException or a failed query): the run was stopped
        raise_if_stopped()
        if args.debug:
            raise
        print(f"recoverylab {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BaseException:
        raise_if_stopped()  # whatever a stop signal left behind, the run was stopped
        raise
    # a command may return its own status (gate: 1 a claim fails, 3 inconclusive)
    return status if isinstance(status, int) else 0


def _input_files(args: argparse.Namespace) -> list[Path]:
    """Return the input files of a command, to find the broken one when the engine fails.

    Inside directories, the entries the source resolver skips (hidden, ``_SUCCESS``, ``.crc``:
    :func:`recoverylab._resolve.ignored`) are skipped here too: they are never read.
    """
    inputs = Inputs.of(args)
    files = set(inputs.files)
    for directory in inputs.directories:
        files.update(
            p
            for p in directory.rglob("*")
            if p.is_file() and not any(ignored(part) for part in p.relative_to(directory).parts)
        )
    return sorted(p for p in files if p.suffix.lower() in FORMATS)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, RecoveryLabError) and exc.filename:
        return f"cannot use `{exc.filename}`: {exc.strerror or exc} ({type(exc).__name__})"
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if isinstance(exc, RecoveryLabError):
        return " ".join(lines)
    return f"{lines[0]} ({type(exc).__name__})"
