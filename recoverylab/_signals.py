"""Stopping a run on a signal without leaving anything half-written (ARCHITECTURE §1.7).

Batch schedulers and Kubernetes stop a job with SIGTERM, a closed terminal sends SIGHUP, a closed
pipe downstream sends SIGPIPE and Ctrl-C sends SIGINT. While :func:`stopping_on_signals` is active
(the command line's ``main`` enters it first), each of these raises :class:`Stopped` in the main
thread, so the running command unwinds like any failure: its output set
(:class:`~recoverylab._outputs.OutputSet`) removes every staged temporary and leaves every target
at its previous version.

An exception raised at an arbitrary point could still land between creating a temporary and
recording it, or between two renames of a commit. The output code therefore marks those few
filesystem steps with :func:`held`: a signal that arrives inside waits for the block to end (or
for :func:`raise_if_stopped`, where a commit still can put everything back). And third-party code
may swallow the exception (numpy's lazy imports do, when the signal lands inside one), so a
received signal is remembered: :func:`raise_if_stopped` raises it again before anything is
staged or committed, and a stopped run never commits. Where Python itself cannot raise it (inside
a callback that native code made, e.g. polars hashing a data type) it would print "Exception
ignored in ..." on stderr; such an unraisable :class:`Stopped` is dropped instead (it is
remembered). After the command's outputs are committed,
:func:`finish` makes later signals no-ops: the work is done and stays done.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import FrameType

__all__ = ["STOP_SIGNALS", "Stopped", "finish", "held", "raise_if_stopped", "stopping_on_signals"]

#: The signals that stop a run (those this platform has), in the order they are installed.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE")
    if hasattr(signal, name)
)


class Stopped(KeyboardInterrupt):
    """The run was stopped by a signal (a ``KeyboardInterrupt``, so ``except Exception`` passes it).

    Parameters
    ----------
    signum
        The signal number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        """The signal's name, e.g. ``"SIGTERM"``."""
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """The shell's status for a process ended by this signal: 128 + its number."""
        return 128 + self.signum


@dataclass
class _State:
    depth: int = 0  # > 0: inside a held block, signals wait
    received: int | None = None  # the first stop signal of the run
    pending: bool = False  # it arrived in a held block and was not raised yet
    finished: bool = False  # the outputs are committed: later signals change nothing

    def load(self, other: _State) -> None:
        """Take every field of ``other`` (a fresh state for a run, or the saved one after it)."""
        self.depth, self.received = other.depth, other.received
        self.pending, self.finished = other.pending, other.finished


_STATE = _State()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _STATE.finished:
        return
    if _STATE.received is None:
        _STATE.received = signum
    if _STATE.depth:
        _STATE.pending = True
        return
    raise Stopped(signum)


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Turn SIGINT, SIGTERM, SIGHUP and SIGPIPE into :class:`Stopped` while the block runs.

    The previous handlers are put back at the end (the block may run in-process, e.g. in tests).
    Outside the main thread, where Python cannot install handlers, the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = replace(_STATE)
    _STATE.load(_State())
    previous = {}
    unraisable = sys.unraisablehook
    sys.unraisablehook = _quiet_about_stops(unraisable)
    try:
        with held():  # a signal that arrives while the handlers go in waits for all of them
            for signum in STOP_SIGNALS:
                previous[signum] = signal.signal(signum, _on_signal)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = unraisable
        _STATE.load(saved)


def _quiet_about_stops(
    previous: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], object]:
    """Wrap ``previous`` so a :class:`Stopped` Python could not raise is not printed.

    The signal is remembered in the run's state, so :func:`raise_if_stopped` still stops the run.
    """

    def hook(unraisable: sys.UnraisableHookArgs) -> object:
        if isinstance(unraisable.exc_value, Stopped):
            return None
        return previous(unraisable)

    return hook


@contextmanager
def held() -> Iterator[None]:
    """Let a stop signal that arrives in the block wait for its end, then stop.

    For the few steps that must not be cut in two: creating a temporary and recording it, moving
    outputs into place, removing temporaries.
    """
    _STATE.depth += 1
    try:
        yield
    finally:
        _STATE.depth -= 1
        if not _STATE.depth and _STATE.pending:
            _STATE.pending = False
            raise Stopped(_STATE.received or signal.SIGTERM)


def raise_if_stopped() -> None:
    """Raise :class:`Stopped` if a stop signal was received in this run (even if raised before).

    Called before anything is staged and at the last moment of a commit at which every output
    can still be put back, so a signal whose exception something swallowed still stops the run.
    """
    if _STATE.received is not None and not _STATE.finished:
        _STATE.pending = False
        raise Stopped(_STATE.received)


def finish() -> None:
    """Mark the run's outputs as committed: a stop signal from now on is ignored."""
    _STATE.finished = True
    _STATE.pending = False
