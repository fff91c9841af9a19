"""Shared pieces of the adapter mutation fuzzers (issue 39, point 5).

A fuzz case copies a genuine-shaped input (made by the synth generators), applies one or two
drawn mutations to its units, runs the adapter, and compares the outcome with an expectation the
mutation itself states (:class:`Expect`), computed from the mutation, never from the run:

- ``delta``: the import succeeds and every unit is counted or excluded by reason, with the rows
  and the excluded counts of the unmutated input moved by exactly the stated amounts (and the
  read report agreeing with ``excluded``);
- ``error``: the import fails with our error, one line naming the mutated file;
- ``either``: one of the two (a mutation whose outcome the format leaves open, such as a NaN
  token where the harness itself may or may not parse one), but never anything else.

Any other exception (a traceback) fails the case.
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from hypothesis import HealthCheck, event, settings

from recoverylab import RecoveryLabError
from recoverylab.cli import main

__all__ = [
    "CODECS",
    "COMMAND_LINE",
    "MUTATIONS",
    "Expect",
    "Outcome",
    "check",
    "check_cli",
    "compress",
    "dump",
    "run_cli",
    "run_python",
]

CODECS = ("gz", "zst", "bz2")
#: Text encodings a mutation may save a JSON file in; ``latin-1`` breaks UTF-8 (non-ASCII text).
ENCODINGS = ("utf-8-sig", "utf-16", "utf-32", "latin-1")


#: Every adapter fuzzer's two runs: 500 mutations through the Python API (fixtures are the
#: genuine files, copied per case), and 25 through the command line.
MUTATIONS = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
COMMAND_LINE = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@dataclass(frozen=True)
class Expect:
    """What one mutation does to the import: a count delta, an error naming a file, or either."""

    kind: str  # "delta", "error" or "either"
    rows: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    files: tuple[Path, ...] = ()  # an error must name one of them

    def __add__(self, other: Expect) -> Expect:
        """Two mutations of different units: errors win, deltas add up."""
        if self.kind == "error" and other.kind == "error":
            return Expect("error", files=self.files + other.files)
        if self.kind == "error" or other.kind == "error":  # the other may fail first if "either"
            failing, rest = (self, other) if self.kind == "error" else (other, self)
            extra = rest.files if rest.kind == "either" else ()
            return Expect("error", files=failing.files + extra)
        merged = Counter(self.excluded)
        merged.update(other.excluded)
        kind = "either" if "either" in (self.kind, other.kind) else "delta"
        return Expect(kind, self.rows + other.rows, dict(merged), self.files + other.files)


SAME = Expect("delta")


def error(file: Path) -> Expect:
    """The mutation must end in one error line naming ``file``."""
    return Expect("error", files=(file,))


def excluded(reason: str, rows: int = -1, n: int = 1) -> Expect:
    """The mutated unit leaves the table (``rows``) and is excluded ``n`` times as ``reason``."""
    return Expect("delta", rows, {reason: n})


@dataclass(frozen=True)
class Outcome:
    """What a run gave: the table's rows and excluded counts by reason, or an error line."""

    rows: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    error: str | None = None


def run_python(call: Callable[[], Any], table: str) -> Outcome:
    """Run an adapter call; our errors become an Outcome, anything else propagates."""
    try:
        got = call()
    except RecoveryLabError as exc:
        return Outcome(error=str(exc))
    reasons = Counter(got.excluded["reason"].to_list())
    assert dict(reasons) == {k: v for k, v in got.report.excluded.items() if v}, (
        "the read report and excluded disagree",
        dict(reasons),
        got.report.excluded,
    )
    return Outcome(got.tables[table].height, dict(reasons))


def run_cli(argv: list[str], capsys: Any) -> tuple[int, str]:
    """Run ``recoverylab ARGV`` in-process; return the exit code and stderr."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # pragma: no cover - argparse usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def check_cli(expect: Expect, code: int, err: str, out: Path, table: str) -> None:
    """Assert an ``import`` run on the command line ended as ``expect`` allows.

    Exit 2 with one line on stderr and nothing written, or exit 0 with ``table`` in ``out``.
    """
    assert code in (0, 2), err
    if code == 2:
        assert expect.kind in ("error", "either"), err
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("recoverylab import: error: "), err
        assert not out.exists()
    else:
        assert expect.kind in ("delta", "either"), err
        assert (out / f"{table}.parquet").is_file()


def check(base: Outcome, expect: Expect, got: Outcome, where: str) -> None:
    """Assert ``got`` is what ``expect`` says the mutation does to ``base``."""
    event("error" if got.error is not None else f"counted, moved by {expect.excluded or 'none'}")
    if got.error is not None:
        assert expect.kind in ("error", "either"), (where, "unexpected error", got.error)
        assert "\n" not in got.error, (where, got.error)
        if expect.files:  # a relative path: the file in any copied job
            named = [f for f in expect.files if f"{f}`" in got.error]
            assert named, (where, "error does not name", expect.files, got)
        return
    assert expect.kind in ("delta", "either"), (where, "expected an error", expect, got)
    wanted = Counter(base.excluded)
    wanted.update(expect.excluded)
    assert got.rows == base.rows + expect.rows, (where, expect, got, base)
    assert got.excluded == {k: v for k, v in wanted.items() if v}, (where, expect, got, base)


def compress(path: Path, codec: str) -> Path:
    """Replace ``path`` by its compressed copy ``path.CODEC``; return the new path."""
    data = path.read_bytes()
    if codec == "gz":
        packed = gzip.compress(data, mtime=0)
    elif codec == "bz2":
        packed = bz2.compress(data)
    else:
        import zstandard

        packed = zstandard.ZstdCompressor().compress(data)
    target = path.with_name(f"{path.name}.{codec}")
    write(target, packed)
    path.unlink()
    return target


#: A string a mutation puts where a deep value goes; :func:`dump` replaces it by the brackets.
DEEP = "__deep_value__"


def dump(value: Any, depth: int = 0, encoding: str = "utf-8") -> bytes:
    """Dump a JSON value, its :data:`DEEP` string replaced by ``depth`` nested arrays.

    The brackets are written as text: ``json.dumps`` itself recurses, and cannot write the
    100,000 levels a hostile file holds.
    """
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    text = text.replace(json.dumps(DEEP), "[" * depth + "0" + "]" * depth)
    if encoding == "latin-1":
        text = text.replace("{", '{"note_\u00e9": 1, ', 1)
    return text.encode(encoding)


def copy_tree(source: Path, target: Path) -> Path:
    """Give a case its own copy of a generated input, files hard-linked (no bytes copied).

    Mutations change a file only through :func:`write` (or :func:`compress`), which unlink it
    first, so the generated input is never touched.
    """
    shutil.copytree(source, target, symlinks=True, copy_function=os.link)
    return target


def write(path: Path, data: bytes) -> None:
    """Replace a (maybe hard-linked) file's bytes without touching the other links."""
    path.unlink(missing_ok=True)
    path.write_bytes(data)


def frame_counts(frame: pl.DataFrame) -> dict[str, int]:
    """Excluded counts by reason of an ``excluded`` frame."""
    return dict(Counter(frame["reason"].to_list()))
