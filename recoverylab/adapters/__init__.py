"""Real log formats in: adapters turn them into recoverylab's tables (ARCHITECTURE §8).

An adapter reads a log format through the format's own library, lets the caller say where each of
our columns comes from, and reports what it could not use (errored samples, missing scores,
unmapped labels) in an ``excluded`` table, never counting it as a failure. Adapters produce tables
and know no protocol.

- :mod:`recoverylab.adapters.inspect`: inspect_ai evaluation logs (extra ``[inspect]``):
  :func:`~recoverylab.adapters.inspect.forks` and :func:`~recoverylab.adapters.inspect.takeover`,
  each returning an :class:`Imported` (that also unpacks as the tables and ``excluded``).
- :class:`Imported` and :class:`ReadReport`: what every adapter returns (tables, ``excluded``,
  and a report of the files read, logs used and superseded, units excluded by reason, rows).
- :func:`looks_like_inspect_log`: recognise an inspect log without importing inspect_ai (used by
  :mod:`recoverylab.io` to point at ``recoverylab import inspect``).
"""

from __future__ import annotations

from recoverylab.adapters._detect import inspect_log_hint, looks_like_inspect_log
from recoverylab.adapters._report import Imported, ReadReport, Superseded

__all__ = ["Imported", "ReadReport", "Superseded", "inspect_log_hint", "looks_like_inspect_log"]
