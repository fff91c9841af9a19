"""Keeping native engine panics off stderr, so a failed command still prints one line.

polars can panic on a damaged input (or when a stop signal lands inside a Python callback it
makes) instead of raising. Python then gets an exception that the command turns into one line,
but Rust's panic hook has already written a report to file descriptor 2. While a command runs,
:func:`native_stderr_filtered` captures that descriptor and replays it at the end through
:func:`without_panics`, which drops every panic report and keeps every other line.

A panic report, as Rust's default hook writes it (every version since 1.0, every
``RUST_BACKTRACE`` setting):

- an optional blank line, then the header ``thread 'NAME' panicked at ...`` (newer versions add
  the thread id, ``thread 'NAME' (ID) panicked at FILE:LINE:COL:``, and put the message on the
  next lines; older ones put it in the header);
- the message, one or more lines;
- with ``RUST_BACKTRACE`` unset or ``0``: ``note: run with `RUST_BACKTRACE=1` ...`` after the
  process's first panic, nothing after later ones;
- with ``1``: ``stack backtrace:``, indented frame lines, ``note: Some details are omitted ...``;
- with ``full``: ``stack backtrace:`` and indented frame lines, no note.

A report without a closing note (a later panic with backtraces off) has no end marker, so the
lines after it up to the next note, backtrace or panic are taken as its message and dropped:
a stray native line is lost rather than a panic's text printed.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["native_stderr_filtered", "without_panics"]

_PANIC = " panicked at "
_BACKTRACE = "stack backtrace:"


@contextmanager
def native_stderr_filtered() -> Iterator[None]:
    """Capture file descriptor 2 while the block runs; replay it at the end without panics.

    Python's own ``sys.stderr`` (progress, warnings, the command's error line) is pointed at a
    copy of the real descriptor, so it still goes straight to the terminal, in order.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    replaced = None
    try:
        if sys.stderr.fileno() == 2:
            replaced = sys.stderr
            sys.stderr = open(os.dup(saved), "w", buffering=1)  # noqa: SIM115 - closed below
    except (OSError, ValueError, AttributeError):
        replaced = None
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if replaced is not None:
                sys.stderr.close()
                sys.stderr = replaced
            capture.seek(0)
            kept = without_panics(capture.read().decode("utf-8", "replace"))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


def without_panics(text: str) -> str:
    """Return ``text`` without its Rust panic reports (their form: the module's docstring)."""
    kept: list[str] = []
    state = "text"  # or "message" (after a header) or "frames" (after "stack backtrace:")
    for line in text.splitlines(keepends=True):
        if _PANIC in line:
            if kept and not kept[-1].strip():
                kept.pop()  # the hook's blank line before the header
            state = "message"
        elif state == "frames" and line[:1].isspace():
            pass  # a frame: "  12: symbol" or "             at file:line:col"
        elif state != "text" and line.startswith("note:"):
            state = "text"  # the report's last line
        elif state == "message" and line.rstrip("\r\n") == _BACKTRACE:
            state = "frames"
        elif state == "frames":
            state = "text"  # a full backtrace ends without a note
            kept.append(line)
        elif state == "text":
            kept.append(line)
    return "".join(kept)
