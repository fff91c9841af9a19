"""Native panic reports never reach stderr: a failed command prints one line (ARCHITECTURE §1.7).

The filter is checked three ways: on the report a stopped run printed in CI (Rust's blank line
before the header had slipped through), on generated streams of every report form Rust writes
(each ``RUST_BACKTRACE`` setting, old and new headers, several panics, native lines between
them) against the lines that were not part of a report, and end to end on a real polars panic
under each ``RUST_BACKTRACE`` setting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoverylab.cli._native_stderr import without_panics
from tests.conftest import REPO, SAMPLES

# the report of the failing CI run: a SIGTERM landed inside a callback polars makes while
# scanning, with RUST_BACKTRACE=1 (frames shortened)
CI_REPORT = (
    "\n"
    "thread '<unnamed>' (24053) panicked at crates/polars-python/src/conversion/mod.rs:1512:22:\n"
    "called `Result::unwrap()` on an `Err` value: PyErr { type: <class "
    "'recoverylab._signals.Stopped'>, value: Stopped(15), traceback: None }\n"
    "stack backtrace:\n"
    "   0: __rustc::rust_begin_unwind\n"
    "   1: core::panicking::panic_fmt\n"
    "  13: cfunction_vectorcall_FASTCALL_KEYWORDS\n"
    "             at /tmp/python-build/Python-3.11.7/Objects/methodobject.c:443:24\n"
    "  41: _start\n"
    "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n"
)


def test_the_report_of_the_ci_run_is_dropped_whole() -> None:
    assert without_panics(CI_REPORT) == ""
    assert without_panics("kept\n" + CI_REPORT + "also kept\n") == "kept\nalso kept\n"


def test_a_later_panic_with_backtraces_off_swallows_its_message_up_to_the_next_report() -> None:
    """It has no closing line: what follows it is its message until a note, backtrace or panic."""
    later = "\nthread 'a' (7) panicked at x.rs:1:2:\nfirst line\nsecond line\n"
    first = "thread 'b' panicked at y.rs:3:4:\nboom\nnote: run with `RUST_BACKTRACE=1` ...\n"
    assert without_panics("before\n" + later + first + "after\n") == "before\nafter\n"
    assert without_panics("before\n" + later) == "before\n"


# --- generated report streams -------------------------------------------------------------------

_WORDS = st.text(st.characters(categories=("L", "N", "P", "Zs")), min_size=1, max_size=30)
# a native line that is not part of a report: not blank, not indented (a frame's form), no header
_NATIVE = _WORDS.map(str.strip).filter(lambda w: w != "" and " panicked at " not in w)
# a message line may be anything but a report's own markers
_MESSAGE = _WORDS.filter(
    lambda w: " panicked at " not in w and not w.startswith("note:") and w != "stack backtrace:"
)
_BACKTRACE_MODES = ("off-first", "off-later", "short", "full")


@dataclass(frozen=True)
class Panic:
    """One panic report, in one of the forms Rust's default hook writes."""

    header: str  # "new" (thread id, message below), "plain" (message below), "old" (in the header)
    blank_before: bool
    message: tuple[str, ...]
    backtrace: str
    frames: int

    def render(self) -> str:
        thread = "thread 'polars-3' (4242)" if self.header == "new" else "thread '<unnamed>'"
        if self.header == "old":
            lines = [f"{thread} panicked at '{self.message[0]}', src/lib.rs:10:5"]
        else:
            lines = [f"{thread} panicked at crates/x/src/lib.rs:10:5:", *self.message]
        if self.backtrace == "off-first":
            lines.append("note: run with `RUST_BACKTRACE=1` environment variable to display ...")
        elif self.backtrace in ("short", "full"):
            lines.append("stack backtrace:")
            for i in range(self.frames):
                if self.backtrace == "short":
                    lines += [f"  {i}: polars::frame_{i}", f"             at src/f{i}.rs:{i}:1"]
                else:
                    lines += [f"  {i:2}:     0x7f3a{i:08x} - polars::frame_{i}",
                              f"                               at src/f{i}.rs:{i}:1"]  # fmt: skip
            if self.backtrace == "short":
                lines.append("note: Some details are omitted, run with `RUST_BACKTRACE=full` ...")
        return ("\n" if self.blank_before else "") + "".join(line + "\n" for line in lines)


_PANICS = st.builds(
    Panic,
    header=st.sampled_from(("new", "plain", "old")),
    blank_before=st.booleans(),
    message=st.lists(_MESSAGE, min_size=1, max_size=3).map(tuple),
    backtrace=st.sampled_from(_BACKTRACE_MODES),
    frames=st.integers(0, 4),
)


@st.composite
def _streams(draw: st.DrawFn) -> tuple[str, str]:
    """A stream of native lines and panic reports, and the native lines alone (the answer)."""
    parts = draw(st.lists(st.one_of(_NATIVE, _PANICS), max_size=12))
    stream, expected = [], []
    unended = False  # after a report without a closing line, lines are read as its message
    for part in parts:
        if isinstance(part, Panic):
            stream.append(part.render())
            unended = part.backtrace == "off-later"
        elif not unended:
            stream.append(part + "\n")
            expected.append(part + "\n")
    return "".join(stream), "".join(expected)


@given(_streams())
def test_every_report_form_is_dropped_and_every_other_line_kept(case: tuple[str, str]) -> None:
    stream, expected = case
    assert without_panics(stream) == expected
    assert without_panics(expected) == expected  # nothing else is ever taken for a report


# --- a real polars panic, end to end ------------------------------------------------------------

# polars calls back into Python for its default scan options; a callback that raises makes it
# panic. The callback first writes a native line, which must still reach stderr.
_PANICKING_RUN = """
import os, sys
from polars.io.scan_options import cast_options

def boom():
    os.write(2, b"a native line\\n")
    raise ValueError("boom")

cast_options.ScanCastOptions._default = staticmethod(boom)
from recoverylab.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("backtrace", ["0", "1", "full"])
def test_a_real_panic_leaves_the_native_lines_and_one_error_line(backtrace: str) -> None:
    cast_options = pytest.importorskip("polars.io.scan_options.cast_options")
    if not hasattr(cast_options.ScanCastOptions, "_default"):
        pytest.skip("this polars takes its scan options without calling back into Python")
    forks = SAMPLES / "paired" / "main_forks.parquet"
    done = subprocess.run(
        [sys.executable, "-c", _PANICKING_RUN, "paired", str(forks)],
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": backtrace},
        check=False,
    )
    assert done.returncode == 2, done.stderr.decode()[-2000:]
    *native, error = done.stderr.decode().splitlines(keepends=True)
    assert native, done.stderr.decode()[-2000:]
    assert set(native) == {"a native line\n"}, done.stderr.decode()[-2000:]
    assert error.startswith("recoverylab paired: error: ")
    assert error.endswith("\n")
