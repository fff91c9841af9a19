"""The memory budget of the per-task pass: how many hash partitions it spills (issue 28 item 1).

The per-task group-by of :mod:`._bits` holds state that grows with the rows of its pass when
rows are scattered (polars' streaming group-by keeps per-morsel tables with nearly one entry per
row when a morsel's rows belong to distinct tasks: about 62 bytes per row measured at 52M rows,
string ids, ``benchmarks/PROFILE.md`` §1b). When the estimated state of one pass exceeds the
budget, the rows are radix-partitioned instead, the way DuckDB's and polars' out-of-core
operators spill:

1. one streaming pass over the input computes each row's narrow lookup indices
   (:func:`._bits.row_indices`) and writes them to ``parts`` Arrow IPC files, one per hash
   partition of the task ids, in a private scratch directory;
2. each partition file is grouped per task on its own (:func:`._bits.group_words`): a task's
   rows are all in one file, so the words are those of one pass over the whole input.

The input is read once whatever its size; the memory of step 2 is that of 1/``parts`` of the
rows. The spill costs a write and a read of the narrow indices (local disk, uncompressed).
"""

from __future__ import annotations

import math
import os

from recoverylab._errors import ParameterError

__all__ = ["budget_bytes", "default_budget", "partitions"]

GB = 10**9
#: The default budget is a quarter of the machine's memory, at most this.
DEFAULT_CAP = 4 * GB
#: Group-by state per input row of a pass, worst case (rows scattered, string task ids):
#: 62 bytes measured at 52M rows (benchmarks/PROFILE.md §1b), rounded up.
STATE_PER_ROW = 64
#: What the process holds beside the group-by state: interpreter, imports, decode buffers,
#: the survey (0.25-0.4 GB measured at 52M rows).
FIXED = 400_000_000
#: Planned state above which scattered rows are spilled anyway: at 52M rows (1.04M tasks,
#: hand-run 2026-12-04, loaded machine, CPU seconds) rows shuffled within files took 25.5 s /
#: 2.90 GB in one pass and 23.3 s / 0.90 GB in 4 spilled partitions; grouped rows 8.1 s /
#: 0.94 GB in one pass and 13.9 s / 0.85 GB spilled; scattered across 4 files 26.4 s /
#: 3.52 GB in one pass, 27.1 s / 1.46 GB in 4 partitions (benchmarks/RESULTS.md). 0.8 GB is
#: 12.5M rows; at 5M scattered rows one pass costs less than the spill pass alone.
SPILL_ABOVE = 800_000_000
#: Rows per partition when scattered rows are spilled (at most ``CHOSEN_MAX`` partitions by this
#: rule): the group-by of a partition with few tasks costs less per row (its tables stay small).
#: 52M rows scattered across 4 files (hand-run 2026-12-04, load 5-7, CPU of all partitions'
#: group-bys, peak of the process): 5 partitions 9.95 s / 1.34 GB, 10: 7.41 s / 0.69 GB, 20:
#: 5.66 s / 0.67 GB, 40: 5.07 s / 0.78 GB; shuffled within files 7.10 s (5) against 4.50 s
#: (20). The spill itself cost 7.6-8.5 s whatever the count.
SPILL_PART_ROWS = 2_000_000
#: At most this many partitions by the ``SPILL_PART_ROWS`` rule: every partition file being
#: written holds buffers (the spill pass peaked at 0.62 GB with 5 partitions, 0.93 with 100).
CHOSEN_MAX = 32
#: Rows per distinct task among the first rows below which rows count as scattered (grouped
#: forks have ~50; shuffled within 10 files ~2; scattered across files ~1).
SCATTERED_BELOW = 4.0
#: The first rows that tell whether rows are scattered.
HINT_ROWS = 200_000
#: At most this many partitions (spill files), however small the budget.
MAX_PARTS = 256
#: The least default budget, on a machine reporting very little memory.
_LEAST = 256_000_000


def default_budget() -> int:
    """Bytes: a quarter of the machine's physical memory, capped at ``DEFAULT_CAP``."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not a POSIX system
        return DEFAULT_CAP
    return min(DEFAULT_CAP, max(physical // 4, _LEAST))


def budget_bytes(memory: float | None) -> int:
    """Bytes of a ``memory`` budget in GB (10^9 bytes); ``None``: :func:`default_budget`.

    Raises
    ------
    ParameterError
        For a budget that is not a positive finite number.
    """
    if memory is None:
        return default_budget()
    if isinstance(memory, bool) or not isinstance(memory, (int, float)):
        raise ParameterError(
            f"memory must be a number of GB (e.g. 2), not {type(memory).__name__}."
        )
    if not math.isfinite(memory) or memory <= 0:
        raise ParameterError(f"memory must be a positive number of GB, got {memory}.")
    return max(1, int(memory * GB))


def partitions(rows: int, budget: int, rows_per_task: float | None = None) -> int:
    """Hash partitions of the tasks so that one partition's group-by state fits ``budget``.

    ``rows_per_task``: rows per distinct task among the first rows, when known. Below
    ``SCATTERED_BELOW`` (rows not grouped by task) and above ``SPILL_ABOVE`` bytes of state,
    the input is spilled in partitions of ``SPILL_PART_ROWS`` rows even when one pass would
    fit the budget: there the spilled groups cost less CPU than one pass and hold far less
    memory. Only the cost depends on the hint; the budget is met whatever the row order.
    """
    state = rows * STATE_PER_ROW
    needed = min(MAX_PARTS, max(1, -(-state // max(budget - FIXED, 1))))
    if rows_per_task is not None and rows_per_task < SCATTERED_BELOW and state > SPILL_ABOVE:
        return max(needed, min(CHOSEN_MAX, -(-rows // SPILL_PART_ROWS)))
    return needed


def worth_a_look(rows: int) -> bool:
    """Whether :func:`partitions` could use a row-order hint (the rows' state is large)."""
    return rows * STATE_PER_ROW > SPILL_ABOVE
