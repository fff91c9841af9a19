"""The ``trials`` table the adapters write: one row per (task, attempt) of a repeated-trials run.

Benchmarks that run each task several times (tau2-bench's trials, Harbor's attempts, a custom
harness's seeds) report reliability as pass^k. ``trials`` is the table
:func:`recoverylab.takeover.repeats_reliability` reads (``unit=`` the task and what tells runs
apart, ``outcome="success"``).

=================== ======= ==== ==========================================================
column              type    req  meaning
=================== ======= ==== ==========================================================
task_id             str     yes  the task (cluster unit); ids stay text
attempt             int     yes  which repeat of the task (tau2's ``trial``, from 0)
success             bool    yes  the attempt succeeded
reward              float   opt  the raw reward (partial rewards kept; null if none)
=================== ======= ==== ==========================================================

Key: (task_id, attempt) plus the columns that tell runs apart (domain, agent, model, ...). Extra
columns are carried. The tau2 adapter adds ``termination_reason``, ``domain``, ``agent``,
``agent_model``, ``user_model``, ``seed``, ``simulation_id``, ``duration``, ``agent_cost`` and
``user_cost`` (see :mod:`recoverylab.adapters.tau2`).
"""

from __future__ import annotations

from recoverylab.schema import Column, TableSpec

__all__ = ["TRIALS"]

#: The contract of ``trials`` (not a protocol input: it lives with the adapters).
TRIALS = TableSpec(
    name="trials",
    columns=(
        Column("task_id", "str", identifier=True, meaning="the task (cluster unit)"),
        Column("attempt", "int", meaning="which repeat of the task"),
        Column("success", "bool", meaning="the attempt succeeded"),
        Column("reward", "float", required=False, nullable=True, meaning="raw reward"),
    ),
    key=("task_id", "attempt"),
    description="One row per (task, attempt) of a repeated-trials run.",
)
