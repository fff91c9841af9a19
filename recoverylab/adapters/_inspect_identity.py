"""Which inspect logs are runs of the same eval, and which one of them is used (ARCHITECTURE §8).

Two logs are runs of one eval -- so that the latest complete one supersedes the others -- only
when inspect's own record says so *and* they agree on every header value the mapping reads:

* inspect's record: ``eval_retry`` (and an eval set's retries) keep the log's ``task_id`` and
  write a new ``eval_id`` and ``run_id``; every task x model of one ``eval()`` call gets its own
  ``task_id``. So logs of one eval share ``task_id`` and ``model``; a log without a ``task_id``
  (written before inspect recorded one) is an eval of its own.
* the mapping: the task, the model, and every task argument and eval metadata key a source
  reads (a callable source may read any of them, so all are compared). Task metadata
  (``Task(metadata=...)``) is written by inspect into the eval metadata and compared there.

Logs with one ``task_id`` that differ in a value the mapping reads would be merged into one arm
while holding two: that is an :class:`~recoverylab._errors.InputError` naming both files and the
field, never a silent supersede. A dedup rule is a data-loss rule, so every log it leaves out is
returned, with the log that replaced it, for the excluded table and the read report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import polars as pl

from recoverylab._errors import InputError
from recoverylab.adapters._inspect_read import Log
from recoverylab.adapters._mapping import MISSING, Source, header_reads, header_value
from recoverylab.adapters._report import Superseded

__all__ = ["latest_runs"]

_WHAT = {
    "task": "task name",
    "model": "model",
    "task_arg": "task argument",
    "eval_metadata": "eval metadata",
}
_WHOLE = {"task_arg": "task arguments", "eval_metadata": "eval metadata"}


def latest_runs(
    read: list[Log], sources: Mapping[str, Source], excluded_schema: Mapping[str, Any]
) -> tuple[list[Log], list[Superseded], pl.DataFrame]:
    """Keep the latest complete log of each eval; return it, what it superseded, and the rows.

    Returns the logs to use, one :class:`Superseded` per log left out (reason ``retry`` when the
    left-out log did not finish, ``duplicate`` when it did), and those logs as ``excluded`` rows
    with reason ``superseded_log``.

    Raises
    ------
    InputError
        Two logs of one eval (same ``task_id`` and model) differ in a header value the mapping
        reads.
    """
    groups: dict[tuple[str, ...], list[Log]] = {}
    for log in read:
        key = (log.task_id, log.model) if log.task_id else ("", log.location, str(id(log)))
        groups.setdefault(key, []).append(log)
    reads = header_reads(sources)
    used: list[Log] = []
    superseded: list[Superseded] = []
    for group in groups.values():
        ranked = sorted(group, key=lambda g: (g.status == "success", g.created, g.location))
        keep = ranked[-1]
        for other in ranked[:-1]:
            _check_same_arm(keep, other, reads)
            reason = "duplicate" if other.status == "success" else "retry"
            superseded.append(Superseded(other.location, keep.location, reason))
        used.append(keep)
    superseded.sort(key=lambda s: (s.log, s.by))
    given = {
        "log": [s.log for s in superseded],
        "reason": ["superseded_log"] * len(superseded),
        "detail": [f"{s.reason}: superseded by {s.by}" for s in superseded],
    }
    rows = pl.DataFrame(  # a whole log: no task, epoch or scope of its own
        {name: given.get(name, [None] * len(superseded)) for name in excluded_schema},
        schema=dict(excluded_schema),
    )
    return used, superseded, rows


def _check_same_arm(keep: Log, other: Log, reads: list[tuple[str, str | None]]) -> None:
    """Raise InputError when two logs of one eval differ in a header value the mapping reads."""
    for kind, name in reads:
        a, b = header_value(keep, kind, name), header_value(other, kind, name)
        if _canonical(a) == _canonical(b):
            continue
        field = f"{_WHAT[kind]} `{name}`" if name else _WHOLE.get(kind, _WHAT[kind])
        raise InputError(
            f"inspect logs `{other.location}` and `{keep.location}` are runs of the same eval "
            f"(inspect task_id {keep.task_id}), so one would supersede the other, but they differ "
            f"in {field} ({_shown(b)} vs {_shown(a)}), which the mapping reads. Hint: a retry "
            "keeps every value of the eval; if these are two arms, they were not written by "
            "one eval (an edited or copied log?): remove the one that does not belong."
        )


def _canonical(value: Any) -> str:
    return "<absent>" if value is MISSING else json.dumps(value, sort_keys=True, default=str)


def _shown(value: Any) -> str:
    return "absent" if value is MISSING else repr(value)
