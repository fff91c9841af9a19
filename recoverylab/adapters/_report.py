"""What every adapter returns besides its tables: the excluded units and a read report (§8).

An import is trusted only when the user can see what it read and what it left out. Every adapter
(inspect, harbor, tau2, table) therefore returns an :class:`Imported`: the tables it built, one
``excluded`` table (a unit per row, with a ``reason`` and a ``detail``), and a :class:`ReadReport`
that counts the files read, the logs used, the logs superseded (each with the log that replaced
it), the units per exclusion reason and the rows per table. The command line prints
:meth:`ReadReport.render` on stderr (``--quiet`` silences it) and writes
:meth:`ReadReport.to_json` with ``--report-out``.

The file counts add up: every file read is exactly one of *used* (a unit of it reached a table),
*superseded* (another file replaced it, e.g. a failed log and its ``eval_retry``) or *no unit in
the tables* (read for an index or a configuration, such as the ``results.json`` of a tau2 run
directory or a Harbor job's ``config.json``, or every unit of it excluded, counted by reason).
A retry *inside* one file (tau2 writes a resumed run's retry into the same results file)
supersedes units, not the file: it is listed as such ("retried inside the file"), never as a
file superseded by itself.

:class:`Imported` unpacks and indexes like the tuple the adapters used to return: ``forks,
excluded = result``, ``result[0]``, ``result[-1]`` (``excluded``), ``len(result)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Identity", "Imported", "ReadReport", "Superseded", "exclusion_counts"]

#: Superseded logs listed one per line on stderr; the rest are counted (the JSON lists all).
SHOWN_SUPERSEDED = 10
#: Files matching no path template named on stderr; the rest are counted (the JSON lists all).
SHOWN_UNMATCHED = 3


@dataclass(frozen=True)
class Superseded:
    """One log left out because a later log of the same run replaced it."""

    log: str
    by: str
    reason: str = "retry"


@dataclass(frozen=True)
class Identity:
    """How one import made its task ids: the scope field, the scopes seen, the shared ids.

    ``shared`` counts raw ids seen under more than one scope; ``example`` is one of them with
    its scopes (for the read report).
    """

    scoped_by: str
    scopes: tuple[str, ...] = ()
    shared: int = 0
    example: tuple[str, tuple[str, ...]] | None = None
    raw: bool = False

    def describe(self) -> str:
        """Return one line for the read report: the rule and what it did."""
        if not self.scopes:
            return f"task ids: as written (no {self.scoped_by} recorded)"
        noun = self.scoped_by if len(self.scopes) == 1 else _plural(self.scoped_by)
        shown = ", ".join(self.scopes[:5]) + (", ..." if len(self.scopes) > 5 else "")
        if self.raw:
            return f"task ids: as written (--raw-ids; {len(self.scopes)} {noun}: {shown})"
        head = f"task ids: {self.scoped_by}/id, raw id in `raw_task_id` "
        head += f"({len(self.scopes)} {noun}: {shown}"
        if self.example is not None:
            raw, scopes = self.example
            head += (
                f"; {self.shared:,} id{'s' if self.shared != 1 else ''} occur under several, "
                f"e.g. `{raw}` in {', '.join(scopes)}"
            )
        return head + ")"


def _plural(word: str) -> str:
    return word + ("es" if word.endswith("s") else "s")


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
    unmatched
        Files under a root that no path template matched (``--files``; the OSWorld and SWE-bench
        trees): listed, never silently skipped; not read, so not in ``files_read``. Set with
        :meth:`with_unmatched`.
    identity
        How the task ids were made (:class:`Identity`: the field that scopes them, the scopes
        seen, raw ids shared by several; the rule is :mod:`recoverylab.adapters._identity`);
        None when the format has no scope. Set with :meth:`with_identity`.
    """

    format: str
    files_read: tuple[str, ...] = ()
    used: tuple[str, ...] = ()
    superseded: tuple[Superseded, ...] = ()
    unit: str = "samples"
    excluded: Mapping[str, int] = field(default_factory=dict)
    rows: Mapping[str, int] = field(default_factory=dict)
    hint: str = ""
    identity: Identity | None = field(default=None, init=False, compare=False)
    unmatched: tuple[str, ...] = field(default=(), init=False, compare=False)

    def with_tables(self, tables: Mapping[str, pl.DataFrame], excluded: pl.DataFrame) -> ReadReport:
        """Return a copy whose ``rows`` and ``excluded`` counts are those of the given tables."""
        rows = {name: frame.height for name, frame in tables.items()}
        rows["excluded"] = excluded.height
        out = replace(self, rows=rows, excluded=exclusion_counts(excluded))
        return self._carried(out).with_identity(self.identity)

    def with_identity(self, identity: Identity | None) -> ReadReport:
        """Return a copy that records how the task ids were made (``identity``)."""
        out = self._carried(replace(self))
        object.__setattr__(out, "identity", identity)  # not an __init__ field: see `identity`
        return out

    def with_unmatched(self, unmatched: tuple[str, ...]) -> ReadReport:
        """Return a copy that lists the files under the roots no path template matched."""
        out = self._carried(replace(self))
        object.__setattr__(out, "unmatched", tuple(unmatched))  # not an __init__ field
        return out

    def _carried(self, out: ReadReport) -> ReadReport:
        """Copy the fields ``replace`` leaves behind (not ``__init__`` fields) onto ``out``."""
        for name in ("identity", "unmatched"):
            object.__setattr__(out, name, getattr(self, name))
        return out

    def file_counts(self) -> dict[str, int]:
        """Return the files read split into used, superseded and the rest; the parts add up.

        A file is *used* when it is in ``used`` (a unit of it reached a table); *superseded*
        when another file replaced it (a ``superseded`` entry whose ``by`` is another file) and
        it is not used; the rest (``no_unit``) were read but no unit of theirs is in the tables
        (indexes, configurations, files whose units were all excluded). Retries inside one file
        count in ``retried_inside`` (entries whose ``log`` is their ``by``), not as superseded.
        """
        read = set(self.files_read)
        used = read & set(self.used)
        gone = {s.log for s in self.superseded if s.log != s.by} & (read - used)
        inside = {s.log for s in self.superseded if s.log == s.by}
        return {
            "files_read": len(read),
            "used": len(used),
            "superseded": len(gone),
            "no_unit": len(read) - len(used) - len(gone),
            "retried_inside": len(inside),
        }

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
            "unmatched": list(self.unmatched),
            "file_counts": self.file_counts(),
            "identity": None if self.identity is None else self.identity.describe(),
        }

    def to_json(self) -> str:
        """Return the report as indented JSON text ending in a line break (byte-stable)."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def render(self) -> str:
        """Return a short block for stderr.

        For example::

            import inspect: 12 files read (10 used, 2 superseded, 0 with no unit in the tables)
              superseded logs/a.eval by logs/b.eval (retry)
              forks: 480 rows; excluded: 7 (error 4, limit 3) (pair by epoch)

        A retry inside one file reads ``results.json: retried inside the file (retry, 2
        simulations); the later run kept``. The identity line (``task ids: ...``) says how the
        task ids were made when the format scopes them.
        """
        counts = self.file_counts()
        head = (
            f"import {self.format}: {_count(counts['files_read'], 'file')} read "
            f"({counts['used']:,} used, {counts['superseded']:,} superseded, "
            f"{counts['no_unit']:,} with no unit in the tables)"
        )
        lines = [head]
        shown = self.superseded[:SHOWN_SUPERSEDED]
        lines += [
            f"  {s.log}: retried inside the file ({s.reason}); the later run kept"
            if s.log == s.by
            else f"  superseded {s.log} by {s.by} ({s.reason})"
            for s in shown
        ]
        if len(self.superseded) > len(shown):  # a resumed job may supersede thousands of trials
            more = len(self.superseded) - len(shown)
            lines.append(f"  ... and {more:,} more superseded (every one in --report-out)")
        made = "; ".join(f"{t}: {n:,} rows" for t, n in self.rows.items() if t != "excluded")
        total = sum(self.excluded.values())
        reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(self.excluded.items()))
        excluded = f"excluded: {total:,}" + (f" ({reasons})" if reasons else "")
        hint = f" ({self.hint})" if self.hint else ""
        if self.unmatched:
            lines.append(_unmatched_line(self.unmatched))
        if self.identity is not None:
            lines.append("  " + self.identity.describe())
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

    def _parts(self) -> tuple[pl.DataFrame, ...]:
        """Return the tuple this result stands for: each table in order, then ``excluded``."""
        return (*self.tables.values(), self.excluded)

    def __iter__(self) -> Iterator[pl.DataFrame]:
        """Unpack as the tables then ``excluded`` (``forks, excluded = result``)."""
        return iter(self._parts())

    def __len__(self) -> int:
        """How many frames it unpacks into (the tables and ``excluded``)."""
        return len(self._parts())

    @overload
    def __getitem__(self, index: int) -> pl.DataFrame: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[pl.DataFrame, ...]: ...

    def __getitem__(self, index: int | slice) -> pl.DataFrame | tuple[pl.DataFrame, ...]:
        """Index like the tuple it replaced.

        ``result[0]`` is the first table, ``result[-1]`` ``excluded``; a slice gives a tuple.
        Tables by name are in :attr:`tables`.
        """
        if isinstance(index, bool) or not isinstance(index, (int, slice)):
            raise TypeError(
                f"{type(self).__name__} indexes like a tuple (an int or a slice), not by "
                f"{type(index).__name__}; tables by name are in `.tables`."
            )
        return self._parts()[index]


def exclusion_counts(excluded: pl.DataFrame) -> dict[str, int]:
    """Units per ``reason`` of an excluded table, sorted by reason."""
    if excluded.height == 0:
        return {}
    counts = excluded.group_by("reason").len().sort("reason")
    return dict(zip(counts["reason"].cast(str).to_list(), counts["len"].to_list(), strict=True))


def _unmatched_line(unmatched: tuple[str, ...]) -> str:
    """Return the read report's line for files no path template matched (the first named)."""
    shown = ", ".join(unmatched[:SHOWN_UNMATCHED])
    more = len(unmatched) - SHOWN_UNMATCHED
    verb = "matches" if len(unmatched) == 1 else "match"
    tail = f" ... and {more:,} more" if more > 0 else ""
    head = f"  {_count(len(unmatched), 'file')} under the roots {verb} no template"
    return f"{head}, not read: {shown}{tail}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
