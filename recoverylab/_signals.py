"""Stopping a run on a signal without leaving anything half-written (ARCHITECTURE §1.7).

Batch schedulers and Kubernetes stop a job with SIGTERM, a closed terminal sends SIGHUP, a closed
pipe downstream sends SIGPIPE and Ctrl-C sends SIGINT. While :func:`stopping_on_signals` is active
(the command line's ``main`` enters it first), each of these raises :class:`Stopped` in the main
thread, so the running command unwinds like any failure: its :class:`~recoverylab._outputs.OutputSet`
removes every staged temporary and leaves every target at its previous version.

An exception raised at an arbitrary point could still land between creating a temporary and
recording it, or between two renames of a commit. The output code therefore marks those few
filesystem steps with :func:`held`: a signal that arrives inside waits for the block to end (or
for :func:`raise_if_stopped`, where a commit still can put everything back). After the command's
outputs are committed, :func:`finish` makes later signals no-ops: the work is done and stays done.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

__all__ = ["STOP_SIGNALS", "Stopped", "finish", "held", "raise_if_stopped", "stopping_on_signals"]

#: The signals that stop a run (those this platform has), in the order they are installed.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE") if hasattr(signal, name)
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
    pending: list[int] = field(default_factory=list)
    finished: bool = False  # the outputs are committed: later signals change nothing


_STATE = _State()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _STATE.finished:
        return
    if _STATE.depth:
        _STATE.pending.append(signum)
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
    global _STATE
    saved, _STATE = _STATE, _State()
    previous = {signum: signal.signal(signum, _on_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _STATE = saved


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
        if not _STATE.depth:
            raise_if_stopped()


def raise_if_stopped() -> None:
    """Raise :class:`Stopped` now if a stop signal arrived inside a held block."""
    if _STATE.pending and not _STATE.finished:
        signum = _STATE.pending[0]
        _STATE.pending.clear()
        raise Stopped(signum)


def finish() -> None:
    """Mark the run's outputs as committed: a stop signal from now on is ignored."""
    _STATE.finished = True
    _STATE.pending.clear()
