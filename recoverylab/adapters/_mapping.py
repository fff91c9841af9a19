"""Where each of our columns comes from in an inspect log, and how score values become booleans.

The *sources* (string forms, the same in Python and on the command line, or a callable of one
sample's view) are those :func:`recoverylab.adapters.inspect.forks` documents.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from recoverylab._errors import ParameterError
from recoverylab.adapters._inspect_read import Log

__all__ = [
    "MISSING",
    "Source",
    "SourceSpec",
    "header_reads",
    "header_value",
    "parse_source",
    "score_kind",
]

#: A source as the public functions accept it.
SourceSpec = str | Callable[[Mapping[str, Any]], Any]
SOURCE_KINDS = ("task_arg", "eval_metadata", "sample_metadata", "model", "task", "literal")
_FORMS = "task_arg:NAME, eval_metadata:NAME, sample_metadata:NAME, model, task, literal:VALUE"
#: inspect's letter scores (CORRECT, INCORRECT, PARTIAL, NOANSWER) as inspect's value_to_float.
LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Source:
    """A parsed source for one column (``param`` names the parameter, for messages)."""

    param: str
    kind: str
    name: str | None = None
    func: Callable[[Mapping[str, Any]], Any] | None = None
    default: Any = MISSING

    @property
    def per_sample(self) -> bool:
        """Whether the value can differ between the samples of one log."""
        return self.kind in ("sample_metadata", "callable")

    def of_log(self, log: Log) -> Any:
        """Return the value for a whole log (eval-level kinds); raise on a name it lacks."""
        fixed = {"model": log.model, "task": log.task, "literal": self.name}
        if self.kind in fixed:
            return fixed[self.kind]
        table, what = (
            (log.task_args, "task argument")
            if self.kind == "task_arg"
            else (log.metadata, "eval metadata key")
        )
        if self.name not in table:
            have = ", ".join(sorted(map(str, table))) or "none"
            raise ParameterError(
                f"inspect log `{log.location}`: `{self.param}` comes from {self.kind}:{self.name}, "
                f"but the log has no {what} `{self.name}` (it has: {have})."
            )
        return table[self.name]

    def of_sample(self, view: Mapping[str, Any]) -> Any:
        """Return the value for one sample (``view`` as :func:`~.inspect.forks` describes)."""
        if self.kind == "sample_metadata":
            return view["sample_metadata"].get(self.name, self.default)
        assert self.func is not None
        return self.func(view)


def parse_source(param: str, spec: object) -> Source:
    """Parse a source given as a string form or a callable; raise ParameterError otherwise."""
    if callable(spec):
        return Source(param, "callable", func=spec)
    if not isinstance(spec, str):
        raise ParameterError(
            f"parameter `{param}` is a {type(spec).__name__}; give one of {_FORMS}, or a callable."
        )
    kind, _, name = spec.partition(":")
    if kind in ("model", "task") and not name:
        return Source(param, kind)
    if kind in SOURCE_KINDS and kind not in ("model", "task") and name:
        return Source(param, kind, name=name)
    raise ParameterError(
        f"parameter `{param}` is {spec!r}; it must be one of {_FORMS}, or a callable."
    )


def header_reads(sources: Mapping[str, Source]) -> list[tuple[str, str | None]]:
    """Return the log header values the sources read, as (kind, name) (None: all of them).

    ``task`` and ``model`` are always read (the model becomes a column). A callable may read any
    of the header, so it reads every task argument and every eval metadata key.
    """
    reads: dict[tuple[str, str | None], None] = {("task", None): None, ("model", None): None}
    for source in sources.values():
        if source.kind in ("task_arg", "eval_metadata"):
            reads[(source.kind, source.name)] = None
        elif source.kind == "callable":
            reads[("task_arg", None)] = None
            reads[("eval_metadata", None)] = None
    return list(reads)


def header_value(log: Log, kind: str, name: str | None) -> Any:
    """One header value of ``log`` as :func:`header_reads` names it (MISSING when absent)."""
    if kind in ("task", "model"):
        return log.task if kind == "task" else log.model
    table = log.task_args if kind == "task_arg" else log.metadata
    return dict(table) if name is None else table.get(name, MISSING)


def score_kind(value: Any) -> tuple[str, str | None, float | None]:
    """Classify one score value as (kind, letter, number).

    The kind is ``letter``, ``bool``, ``number``, ``missing`` or ``other``.
    """
    if value is None:
        return "missing", None, None
    if isinstance(value, bool):
        return "bool", None, float(value)
    if isinstance(value, (int, float)):
        return ("number", None, float(value)) if math.isfinite(value) else ("other", None, None)
    if isinstance(value, str) and value in LETTERS:
        return "letter", value, LETTERS[value]
    return "other", None, None
