"""What every subcommand shares: reading inputs, writing outputs, printing, progress, errors.

Building the parser imports this module, so its top level stays on the standard library and
recoverylab's light modules: polars, the readers (:mod:`recoverylab.io`) and the table renderer
(:mod:`recoverylab.cli._table`) are imported inside the functions that read, write or print, when
a command runs (``recoverylab --help`` and argument errors never load them).
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recoverylab._errors import OutputError, ParameterError
from recoverylab._outputs import OutputSet, atomic_file, target_problem
from recoverylab._signals import raise_if_stopped

if TYPE_CHECKING:
    import polars as pl

#: Values of ``--format``: how a result is printed when it is not written.
PRINT_FORMATS = ("text", "csv", "json", "markdown")


def samples_dir() -> Path:
    """Return the shipped ``data_samples/`` directory (in a checkout, or in the cwd)."""
    for candidate in (Path(__file__).resolve().parents[2] / "data_samples", Path("data_samples")):
        if candidate.is_dir():
            return candidate
    raise ParameterError(
        "cannot find `data_samples/`; run the command from a recoverylab checkout."
    )


def split_list(text: str | None) -> tuple[str, ...]:
    """Parse a comma-separated command-line list (``"model,seed"``) into a tuple."""
    if not text:
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_statistics(parser: argparse.ArgumentParser, *, resamples: int = 10_000) -> None:
    """Add ``--seed``, ``--resamples`` and ``--confidence``."""
    parser.add_argument("--seed", type=int, default=0, help="resampling seed (default 0)")
    parser.add_argument(
        "--resamples",
        type=int,
        default=resamples,
        help=f"resamples of each bootstrap interval (default {resamples}); exact intervals, "
        "such as the default paired ones, draw none",
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="interval confidence (default 0.95)"
    )


def add_printing(parser: argparse.ArgumentParser) -> None:
    """Add ``--wide`` and ``--format`` (how a result is printed when it is not written)."""
    parser.add_argument(
        "--wide", action="store_true", help="print every column (default: the main columns)"
    )
    parser.add_argument(
        "--format",
        choices=PRINT_FORMATS,
        default="text",
        help="printed form: text (default, fits the terminal), csv, json or markdown",
    )


def printing(args: argparse.Namespace) -> tuple[str, bool]:
    """``(format, wide)`` of a parsed command (text and narrow when the command has no flags)."""
    return getattr(args, "format", "text"), bool(getattr(args, "wide", False))


def headline(fmt: str) -> bool:
    """Whether titles and notes go to stdout (text and markdown) or nowhere (csv, json)."""
    return fmt in ("text", "markdown")


def add_grouping(parser: argparse.ArgumentParser, *, by_help: str = "") -> None:
    """Add ``--by`` (extra grouping keys, comma separated)."""
    parser.add_argument(
        "--by",
        type=split_list,
        default=None,
        help=by_help or "extra grouping columns, comma separated (e.g. model,split)",
    )


#: ``--input-format`` of the running command (None: from each file's suffix).
_INPUT_FORMAT: ContextVar[str | None] = ContextVar("recoverylab_input_format", default=None)
#: ``--verify-inputs`` of the running command.
_VERIFY: ContextVar[bool] = ContextVar("recoverylab_verify_inputs", default=False)
#: The output set of the running command.
_OUTPUTS: ContextVar[OutputSet | None] = ContextVar("recoverylab_command_outputs", default=None)
#: Messages about written files, printed once the command's outputs are committed.
_WRITTEN: ContextVar[list[str] | None] = ContextVar("recoverylab_written", default=None)


def read(paths: Sequence[str] | str) -> pl.LazyFrame:
    """Scan one or more paths/globs given on the command line (``--input-format`` applies)."""
    from recoverylab.io import scan

    return scan(
        list(paths) if not isinstance(paths, str) else paths,
        format=_INPUT_FORMAT.get(),
        verify=_VERIFY.get(),
    )


def source(paths: Sequence[str] | str, engine: object) -> object:
    """Return a command's input paths as polars reads them, or as given for Spark to read."""
    return read(paths) if engine == "polars" else paths


def is_output_option(dest: str) -> bool:
    """Whether a parsed option names an output (``--out``, ``--out-dir``, ``--*-out``)."""
    return dest in ("out", "out_dir") or dest.endswith("_out")


@dataclass(frozen=True)
class RefusedTarget:
    """An output argument refused as it was parsed; the command stops with ``message`` at once."""

    message: str


def _output_type(option: str, *, directory: bool | None) -> Callable[[str], Path | RefusedTarget]:
    def convert(text: str) -> Path | RefusedTarget:
        problem = target_problem(text, directory=directory, what=f"`{option}`")
        return Path(text) if problem is None else RefusedTarget(problem)

    return convert


#: ``metavar`` -> what an output option writes: a directory, either (by engine), else one file.
_OUTPUT_KINDS: dict[str | None, bool | None] = {"DIR": True, "PATH": None}


def check_output_targets(parser: argparse.ArgumentParser) -> None:
    """Make every output option of ``parser`` (and its subcommands) check its target as parsed.

    A file output given with a trailing slash, a directory where a file goes (or a file where a
    directory goes), a device, a FIFO or a socket is refused with one line before any work (see
    :func:`command_outputs`). Options with ``metavar="DIR"`` are directory outputs, those with
    ``metavar="PATH"`` a file or a directory (``goal --episodes-out``: Spark writes a directory).
    """
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                check_output_targets(sub)
        elif is_output_option(action.dest) and action.type is Path and action.option_strings:
            directory = _OUTPUT_KINDS.get(action.metavar, False)  # type: ignore[arg-type]
            action.type = _output_type(action.option_strings[0], directory=directory)


class Keyword(str):
    """An option value from a fixed set of choices (``--to forks``): a word, never an input path."""

    __slots__ = ()


def mark_keywords(parser: argparse.ArgumentParser) -> None:
    """Parse every option with ``choices`` (here and in subcommands) as a :class:`Keyword`.

    :meth:`Inputs.of` treats any other argument that names an existing path as an input (to
    refuse an output that would overwrite it); a chosen word such as ``--to forks`` is not one,
    even when a directory ``forks/`` exists (it may be the very output directory).
    """
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                mark_keywords(sub)
        elif action.choices is not None and action.type is None:
            action.type = Keyword


@dataclass(frozen=True)
class Inputs:
    """What a command's input arguments resolve to: files, directories and glob patterns."""

    files: frozenset[Path]
    directories: frozenset[Path]
    patterns: tuple[str, ...]

    @classmethod
    def of(cls, args: argparse.Namespace) -> Inputs:
        """Resolve every non-output argument that names an existing path or a glob."""
        files: set[Path] = set()
        directories: set[Path] = set()
        patterns: list[str] = []
        for name, value in vars(args).items():
            if is_output_option(name):
                continue
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if not isinstance(item, (str, Path)) or isinstance(item, Keyword) or not str(item):
                    continue
                text = str(item)
                if glob.has_magic(text):
                    patterns.append(os.path.abspath(text))
                    matches = [Path(m) for m in glob.glob(text, recursive=True)]
                else:
                    matches = [Path(text)] if Path(text).exists() else []
                for match in matches:
                    (directories if match.is_dir() else files).add(match.resolve())
        return cls(frozenset(files), frozenset(directories), tuple(patterns))

    def clash(self, target: Path) -> str | None:
        """Why writing ``target`` would touch an input, or ``None`` when it is safe."""
        resolved = target.resolve()
        if resolved in self.files:
            return "which is also an input"
        for directory in self.directories:
            if resolved == directory or directory in resolved.parents:
                return f"which lies inside the input directory `{directory}`"
        for pattern in self.patterns:
            if fnmatch.fnmatch(os.path.abspath(target), pattern) or fnmatch.fnmatch(
                str(resolved), pattern
            ):
                return f"which matches the input pattern `{pattern}`"
        return None

    def check(self, target: Path) -> None:
        """Raise :class:`ParameterError` when writing ``target`` would touch an input."""
        problem = self.clash(target)
        if problem is not None:
            raise ParameterError(
                f"output `{target}`, {problem}; choose another path so no input is overwritten."
            )


def guard_output(target: Path, args: argparse.Namespace) -> None:
    """Refuse to write a result over an input, inside an input directory or into an input glob."""
    Inputs.of(args).check(target)


@contextmanager
def command_outputs(args: argparse.Namespace) -> Iterator[OutputSet]:
    """Run a command with every output staged and committed together at the end, or none.

    Every atomic write made inside (by the command or the library functions it calls) joins
    one :class:`~recoverylab.io.OutputSet` whose guard refuses outputs that would touch an input.
    An output refused as it was parsed (:func:`check_output_targets`) stops the command before
    any work. A failure or a stop signal (:mod:`recoverylab._signals`) removes every staged
    output; a signal after the commit is ignored. The "wrote ..." messages are printed after the
    commit, unless ``--quiet``.
    """
    refused = [v for v in vars(args).values() if isinstance(v, RefusedTarget)]
    if refused:
        raise OutputError(refused[0].message)
    guard = Inputs.of(args).check
    messages: list[str] = []
    format_token = _INPUT_FORMAT.set(getattr(args, "input_format", None))
    verify_token = _VERIFY.set(bool(getattr(args, "verify_inputs", False)))
    written_token = _WRITTEN.set(messages)
    outputs = OutputSet(guard=guard)
    try:
        try:
            with outputs.activate():
                outputs_token = _OUTPUTS.set(outputs)
                try:
                    yield outputs
                finally:
                    _OUTPUTS.reset(outputs_token)
                sys.stdout.flush()  # a closed pipe downstream stops the run before the commit
        except BaseException:
            outputs.abort()
            raise
        outputs.commit(final=True)  # the last step: a stop signal after it changes nothing
    finally:
        _WRITTEN.reset(written_token)
        _INPUT_FORMAT.reset(format_token)
        _VERIFY.reset(verify_token)
    if not getattr(args, "quiet", False):
        for message in messages:
            print(message, file=sys.stderr)


def current_outputs() -> OutputSet:
    """Return the output set of the running command (one is active inside ``main``)."""
    active = _OUTPUTS.get()
    if active is None:
        raise RuntimeError("no command is running; use command_outputs(args)")
    return active


def announce_written(message: str) -> None:
    """Say that an output was written; printed once the command's outputs are committed."""
    pending = _WRITTEN.get()
    if pending is None:
        print(message, file=sys.stderr)
    else:
        pending.append(message)


def write_output(
    frame: pl.DataFrame | pl.LazyFrame,
    out: Path,
    args: argparse.Namespace,
    *,
    rows: int | None = None,
    unique_key: tuple[str, ...] = (),
) -> None:
    """Stage ``frame`` for ``out`` in the format its suffix names (parquet, csv, ...).

    A LazyFrame streams to disk; its row count is shown only when the caller gives ``rows``.
    ``unique_key``: leading columns no two rows share (they alone order the rows).
    """
    import polars as pl

    from recoverylab._display import count_text
    from recoverylab.io import output_format, write_to

    guard_output(out, args)
    fmt = output_format(out)
    with atomic_file(out) as handle:
        write_to(frame, handle, fmt, target=out, unique_key=unique_key)
    if rows is None and isinstance(frame, pl.DataFrame):
        rows = frame.height
    announce_written(f"wrote {out}" + (f" ({count_text(rows)})" if rows is not None else ""))


def emit(
    frame: pl.DataFrame,
    out: Path | None,
    args: argparse.Namespace,
    *,
    title: str | None = None,
    face: str | None = None,
    line: str | None = None,
) -> None:
    """Stage ``frame`` for ``out`` (committed with the command's other outputs), or print it.

    ``face`` names the result's declared main columns (:data:`recoverylab._display.FACES`);
    the interval level and sidedness come from the command's ``--confidence`` and
    ``--alternative`` where it has them; ``line`` replaces the line naming the method.
    """
    if out is not None:
        write_output(frame, out, args)
        return
    from recoverylab.cli._table import render, terminal_width, wrap_text

    fmt, wide = printing(args)
    if title and headline(fmt):
        text = title if fmt == "markdown" else wrap_text(title, terminal_width())
        print(text + ("\n" if fmt == "markdown" else ""))  # markdown: a paragraph
    confidence, alternative = interval_level(args)
    text = render(
        frame, fmt, wide=wide, face=face, line=line, confidence=confidence, alternative=alternative
    )
    print(text)


def interval_level(args: argparse.Namespace) -> tuple[float | None, str | None]:
    """Return the ``confidence`` and ``alternative`` a command asked for (None: it has none)."""
    return getattr(args, "confidence", None), getattr(args, "alternative", None)


def emit_many(
    frames: dict[str, pl.DataFrame],
    out_dir: Path | None,
    args: argparse.Namespace,
    *,
    faces: dict[str, str] | None = None,
) -> None:
    """Stage several named result tables into ``out_dir`` (one parquet each), or print them."""
    if out_dir is None:
        from recoverylab.cli._table import render_many

        fmt, wide = printing(args)
        level = getattr(args, "confidence", None)
        print(render_many(frames, fmt, wide=wide, faces=faces, confidence=level))
        return
    for name, frame in frames.items():
        emit(frame, out_dir / f"{name}.parquet", args)


def configure_printing() -> None:
    """Show frames printed outside the table renderer whole: every row and column, no shape."""
    import polars as pl

    from recoverylab.cli._table import terminal_width

    pl.Config.set_tbl_rows(200)
    pl.Config.set_tbl_cols(-1)
    pl.Config.set_fmt_str_lengths(60)
    pl.Config.set_tbl_width_chars(terminal_width())
    pl.Config.set_tbl_hide_dataframe_shape(True)


class Progress:
    """Stage messages with elapsed time on stderr, so long work shows that it moves."""

    def __init__(self, command: str, *, quiet: bool = False) -> None:
        self.command = command
        self.quiet = quiet
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        """Print one stage line, e.g. ``[paired 1.2s] bootstrap over 48 cells``.

        Each stage is also a checkpoint: a stop signal whose exception third-party code swallowed
        stops the run here rather than at the commit.
        """
        raise_if_stopped()
        if not self.quiet:
            elapsed = time.perf_counter() - self.start
            print(f"[{self.command} {elapsed:.1f}s] {message}", file=sys.stderr, flush=True)
