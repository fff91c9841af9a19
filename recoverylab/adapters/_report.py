"""What every adapter returns besides its tables: the excluded units and a read report (§8).

An import is trusted only when the user can see what it read and what it left out. Every adapter
(inspect, harbor, tau2, table) therefore returns an :class:`Imported`: the tables it built, one
``excluded`` table (a unit per row, with a ``reason`` and a ``detail``), and a :class:`ReadReport`
that counts the files read, the logs used, the logs superseded (each with the log that replaced
it), the units per exclusion reason and the rows per table. The command line prints
:meth:`ReadReport.render` on stderr (``--quiet`` silences it) and writes
:meth:`ReadReport.to_json` with ``--report-out``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Imported", "ReadReport", "Superseded", "exclusion_counts"]

#: Superseded logs listed one per line on stderr; the rest are counted (the JSON lists all).
SHOWN_SUPERSEDED = 10


@dataclass(frozen=True)
class Superseded:
    """One log left out because a later log of the same run replaced it."""

    log: str
    by: str
    reason: str = "retry"


@dataclass(frozen=True)
class ReadReport:
    """What one import read, used, superseded and excluded, and the rows it produced.

    Attributes
    ----------
    format
        The adapter (``inspect``, ``harbor``, ``tau2``, ``table``).
    files_read
        Every file the adapter opened, in sorted order.
    used
        The logs (or trials, result files) whose units reached the tables, sorted.
    superseded
        The logs replaced by a later one of the same run, each with the one that replaced it.
    unit
        What one excluded row is (``samples``, ``trials``, ``simulations``, ``rows``).
    excluded
        Units per exclusion reason.
    rows
        Rows per output table (``excluded`` included).
    hint
        What to do next with the tables, if anything (e.g. ``pair by epoch``).
    """

    format: str
    files_read: tuple[str, ...] = ()
    used: tuple[str, ...] = ()
    superseded: tuple[Superseded, ...] = ()
    unit: str = "samples"
    excluded: Mapping[str, int] = field(default_factory=dict)
    rows: Mapping[str, int] = field(default_factory=dict)
    hint: str = ""

    def with_tables(self, tables: Mapping[str, pl.DataFrame], excluded: pl.DataFrame) -> ReadReport:
        """Return a copy whose ``rows`` and ``excluded`` counts are those of the given tables."""
        rows = {name: frame.height for name, frame in tables.items()}
        rows["excluded"] = excluded.height
        return replace(self, rows=rows, excluded=exclusion_counts(excluded))

    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain JSON-ready values (reasons sorted)."""
        return {
            "format": self.format,
            "files_read": list(self.files_read),
            "used": list(self.used),
            "superseded": [{"log": s.log, "by": s.by, "reason": s.reason} for s in self.superseded],
            "unit": self.unit,
            "excluded": dict(sorted(self.excluded.items())),
            "rows": dict(self.rows),
            "hint": self.hint,
        }

    def to_json(self) -> str:
        """Return the report as indented JSON text ending in a line break (byte-stable)."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def render(self) -> str:
        """Return a short block for stderr.

        For example::

            import inspect: 12 files read, 10 logs used, 2 superseded
              superseded logs/a.eval by logs/b.eval (retry)
              forks: 480 rows; excluded: 7 (error 4, limit 3) (pair by epoch)
        """
        head = (
            f"import {self.format}: {_count(len(self.files_read), 'file')} read, "
            f"{_count(len(self.used), 'log')} used, {len(self.superseded)} superseded"
        )
        lines = [head]
        shown = self.superseded[:SHOWN_SUPERSEDED]
        lines += [f"  superseded {s.log} by {s.by} ({s.reason})" for s in shown]
        if len(self.superseded) > len(shown):  # a resumed job may supersede thousands of trials
            more = len(self.superseded) - len(shown)
            lines.append(f"  ... and {more:,} more superseded (every one in --report-out)")
        made = "; ".join(f"{t}: {n:,} rows" for t, n in self.rows.items() if t != "excluded")
        total = sum(self.excluded.values())
        reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(self.excluded.items()))
        excluded = f"excluded: {total:,}" + (f" ({reasons})" if reasons else "")
        hint = f" ({self.hint})" if self.hint else ""
        lines.append("  " + "; ".join(filter(None, (made, excluded))) + hint)
        return "\n".join(lines)


@dataclass(frozen=True)
class Imported:
    """What an adapter returns: its tables by name, the ``excluded`` units and the read report."""

    tables: Mapping[str, pl.DataFrame]
    excluded: pl.DataFrame
    report: ReadReport

    def outputs(self) -> dict[str, pl.DataFrame]:
        """Every table to write, ``excluded`` last (the files of ``recoverylab import``)."""
        return {**self.tables, "excluded": self.excluded}


def exclusion_counts(excluded: pl.DataFrame) -> dict[str, int]:
    """Units per ``reason`` of an excluded table, sorted by reason."""
    if excluded.height == 0:
        return {}
    counts = excluded.group_by("reason").len().sort("reason")
    return dict(zip(counts["reason"].cast(str).to_list(), counts["len"].to_list(), strict=True))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
