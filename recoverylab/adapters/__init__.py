"""Real log formats in: adapters turn them into recoverylab's tables (ARCHITECTURE §8).

Layout: one public module per log format (``inspect``, ``harbor``, ``tau2``, ``osworld``,
``swebench``, ``table``; private helpers ``_<format>_*``; path templates for per-run directory
trees in ``_templates``), the shared ``_report`` (:class:`Imported`, :class:`ReadReport`) and
``_trials`` (the ``trials`` contract). May import the core (schema, io, _errors); knows no
protocol and no engine, and the core imports no adapter.

An adapter reads a log format through the format's own library, lets the caller say where each of
our columns comes from, and reports what it could not use (errored samples, missing scores,
unmapped labels) in an ``excluded`` table, never counting it as a failure. Adapters produce tables
and know no protocol.

- :mod:`recoverylab.adapters.inspect`: inspect_ai evaluation logs (extra ``[inspect]``):
  :func:`~recoverylab.adapters.inspect.forks` and :func:`~recoverylab.adapters.inspect.takeover`,
  each returning an :class:`Imported` (that also unpacks, and indexes, like the tuple of its
  tables and ``excluded``).
- :mod:`recoverylab.adapters.harbor`: Harbor (Terminal-Bench) job directories read from each
  trial's ``result.json`` by the field names of Harbor's own models, without Harbor; which trials
  count follows Harbor's own error policy (``reward_valid``): :func:`~.harbor.trials`,
  :func:`~.harbor.forks`, :func:`~.harbor.takeover`.
- :mod:`recoverylab.adapters.tau2`: tau2-bench results (one JSON, or ``results.json`` +
  ``simulations/``) read by its data model's field names, without tau2-bench:
  :func:`~recoverylab.adapters.tau2.read` gives ``trials`` (one row per task trial; tau2's
  non-evaluable terminations excluded by reason) or ``forks``.
- :mod:`recoverylab.adapters.osworld`: OSWorld results directories
  (``ACTION_SPACE/OBSERVATION/MODEL/DOMAIN/EXAMPLE_ID/result.txt``; no ``result.txt``:
  ``unfinished``, excluded): :func:`~recoverylab.adapters.osworld.read` gives ``trials`` or
  ``forks``; example ids per domain.
- :mod:`recoverylab.adapters.swebench`: SWE-bench evaluation trees
  (``logs/run_evaluation/RUN/MODEL/INSTANCE/report.json`` and the run summaries, by the
  harness's field names): :func:`~recoverylab.adapters.swebench.read` gives ``trials`` or
  ``forks``; the harness's infrastructure failures and errors excluded by reason; instance ids
  per dataset.
- :mod:`recoverylab.adapters.table`: any JSON/JSONL/CSV/parquet run log, each column given as a
  polars SQL expression (``mapping={"success": "reward >= 1"}``), checked against the target
  contract before any row is read: :func:`~recoverylab.adapters.table.read` gives ``forks``,
  ``takeover`` (``states``, ``attempts``) or ``trials``.
- :class:`Imported` and :class:`ReadReport`: what every adapter returns (tables, ``excluded``,
  and a report of the files read, logs used and superseded, units excluded by reason, rows).
- :func:`keep_raw_ids`: every adapter qualifies a task id by the scope the harness gives it
  (tau2's domain, Harbor's dataset, inspect's dataset, a declared ``task_scope``):
  ``airline/0``, the raw id in ``raw_task_id``. This puts the raw ids back, or refuses in one
  line when one id occurs under two scopes (:mod:`recoverylab.adapters._identity`).
- :func:`looks_like_inspect_log`: recognise an inspect log without importing inspect_ai (the
  core's own detection, :mod:`recoverylab._formats`, re-exported here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recoverylab.adapters._detect import inspect_log_hint, looks_like_inspect_log
from recoverylab.adapters._report import Imported, ReadReport, Superseded

if TYPE_CHECKING:  # loads polars: imported on first use (see __getattr__), so commands start fast
    from recoverylab.adapters._identity import keep_raw_ids

__all__ = [
    "Imported",
    "ReadReport",
    "Superseded",
    "inspect_log_hint",
    "keep_raw_ids",
    "looks_like_inspect_log",
]


def __getattr__(name: str) -> Any:
    if name == "keep_raw_ids":
        from recoverylab.adapters._identity import keep_raw_ids

        globals()[name] = keep_raw_ids  # later lookups are plain attribute reads
        return keep_raw_ids
    raise AttributeError(f"module 'recoverylab.adapters' has no attribute {name!r}")
