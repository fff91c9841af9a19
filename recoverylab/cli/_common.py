"""What every subcommand shares: reading inputs, writing outputs, printing, progress, errors."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl

from recoverylab._errors import ParameterError
from recoverylab.io import expand_paths, scan, write_parquet

#: Result columns shown in percentage points when a table is printed.
RATE_SUFFIXES = ("rate", "effect", "ci_low", "ci_high", "difference", "gain", "ts", "ear")
RATE_PREFIXES = (
    "pass_at",
    "pass_hat",
    "effect_",
    "margin",
    "break_even",
    "p_fail",
    "rescue_given",
    "harm_given",
)
#: Result columns that are not fractions although their names end like one (ICCs, factors).
NOT_RATE_PREFIXES = ("icc", "repeat_icc", "design_effect")


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
        help=f"bootstrap resamples (default {resamples})",
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="interval confidence (default 0.95)"
    )


def add_grouping(parser: argparse.ArgumentParser, *, by_help: str = "") -> None:
    """Add ``--by`` (extra grouping keys, comma separated)."""
    parser.add_argument(
        "--by",
        type=split_list,
        default=None,
        help=by_help or "extra grouping columns, comma separated (e.g. model,split)",
    )


def read(paths: Sequence[str] | str) -> pl.LazyFrame:
    """Scan one or more paths/globs given on the command line."""
    return scan(list(paths) if not isinstance(paths, str) else paths)


def input_paths(args: argparse.Namespace) -> set[Path]:
    """Every existing input file named in the parsed arguments (to refuse overwriting them).

    Output options (``out``, ``out_dir`` and any ``*_out``) are not inputs: re-running a command
    with the same ``--out`` replaces its earlier result.
    """
    found: set[Path] = set()
    for name, value in vars(args).items():
        if name in ("out", "out_dir") or name.endswith("_out"):
            continue
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, (str, Path)) and item and Path(item).exists():
                found.update(p.resolve() for p in expand_paths([item]) if p.is_file())
    return found


def guard_output(target: Path, args: argparse.Namespace) -> None:
    """Refuse to write a result over one of the command's own input files."""
    if target.resolve() in input_paths(args):
        raise ParameterError(
            f"`--out` is `{target}`, which is also an input; choose another path so the input "
            "is not overwritten."
        )


def emit(
    frame: pl.DataFrame,
    out: Path | None,
    args: argparse.Namespace,
    *,
    title: str | None = None,
    percent: bool = True,
) -> None:
    """Write ``frame`` atomically to ``out``, or print it readably (rates in percentage points)."""
    if out is not None:
        guard_output(out, args)
        write_parquet(frame, out)
        print(f"wrote {out} ({frame.height} rows)", file=sys.stderr)
        return
    if title:
        print(title)
    print(readable(frame) if percent else frame)


def emit_many(
    frames: dict[str, pl.DataFrame], out_dir: Path | None, args: argparse.Namespace
) -> None:
    """Write several named result tables into ``out_dir`` (one parquet each) or print them."""
    if out_dir is None:
        for name, frame in frames.items():
            print(f"\n== {name}")
            print(readable(frame))
        return
    for name, frame in frames.items():
        emit(frame, out_dir / f"{name}.parquet", args)


def is_rate(name: str) -> bool:
    """Whether a result column holds a fraction to be shown in percentage points."""
    if name.startswith(NOT_RATE_PREFIXES):
        return False
    return name.endswith(RATE_SUFFIXES) or name.startswith(RATE_PREFIXES)


def readable(frame: pl.DataFrame) -> pl.DataFrame:
    """Return a display copy with rate columns in percentage points, rounded to two decimals."""
    pp = [
        (pl.col(name) * 100).round(2).alias(f"{name}_pp")
        for name, dtype in frame.schema.items()
        if dtype.is_float() and is_rate(name)
    ]
    rounded = [
        pl.col(name).round(4)
        for name, dtype in frame.schema.items()
        if dtype.is_float() and not is_rate(name)
    ]
    shown = frame.with_columns(*pp, *rounded)
    order = [f"{c}_pp" if is_rate(c) and frame.schema[c].is_float() else c for c in frame.columns]
    return shown.select(order)


def configure_printing() -> None:
    """Print whole tables: every row and column, full strings."""
    pl.Config.set_tbl_rows(200)
    pl.Config.set_tbl_cols(-1)
    pl.Config.set_fmt_str_lengths(60)
    pl.Config.set_tbl_width_chars(int(os.environ.get("COLUMNS", "200")))
    pl.Config.set_tbl_hide_dataframe_shape(True)


class Progress:
    """Stage messages with elapsed time on stderr, so long work shows that it moves."""

    def __init__(self, command: str, *, quiet: bool = False) -> None:
        self.command = command
        self.quiet = quiet
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        """Print one stage line, e.g. ``[paired 1.2s] bootstrap over 48 cells``."""
        if not self.quiet:
            elapsed = time.perf_counter() - self.start
            print(f"[{self.command} {elapsed:.1f}s] {message}", file=sys.stderr, flush=True)

    def steps(self, items: Iterable[object], what: str) -> Iterable[object]:
        """Yield ``items`` while reporting ``what i/n``."""
        items = list(items)
        for i, item in enumerate(items, 1):
            self(f"{what} {i}/{len(items)}")
            yield item
