"""The error hierarchy of recoverylab.

Every error the library raises on purpose derives from :class:`RecoveryLabError`, so a caller (and
the command line) can tell "the input or a parameter is wrong" from a bug. Messages are one
sentence with evidence: the table, the column or parameter in backticks, what was found, what is
allowed, up to five offending keys, and a ``Hint:`` where the fix is obvious.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Sequence

MAX_KEYS_SHOWN = 5


class RecoveryLabError(Exception):
    """Base class of every error recoverylab raises deliberately."""


class SchemaError(RecoveryLabError, ValueError):
    """A table does not satisfy its contract (columns, types, nulls, labels, keys)."""


class InputError(RecoveryLabError, ValueError):
    """Tables that are valid one by one but inconsistent with each other or with the protocol."""


class ParameterError(RecoveryLabError, ValueError):
    """A function or command-line parameter has a value that is not allowed."""


class SourceError(RecoveryLabError, OSError):
    """A file or dataset cannot be read: missing, empty, corrupt or of an unknown format."""


class OutputError(RecoveryLabError, OSError):
    """An output cannot be written: its directory is not writable, a directory is in the way..."""


class EngineError(RecoveryLabError, RuntimeError):
    """The query engine failed on input that no file check explains (the engine's message kept)."""


class NotFittedError(RecoveryLabError, RuntimeError):
    """An estimator was used before ``fit``."""


class MissingDependencyError(RecoveryLabError, ImportError):
    """An optional feature was used without its extra installed."""


class RecoveryLabWarning(UserWarning):
    """A result was computed, but on input that probably does not mean what was intended."""


def format_keys(keys: Iterable[object], total: int | None = None) -> str:
    """Render up to five offending keys for an error message, e.g. ``t001, t017 and 3 more``.

    Tuple keys are joined with ``/``; ``total`` (how many keys offend in all, when more were found
    than are passed) adds the "and N more" tail.
    """
    shown = [
        "/".join(map(_show, key)) if isinstance(key, tuple) else _show(key)
        for key in itertools.islice(keys, MAX_KEYS_SHOWN)
    ]
    text = ", ".join(shown)
    if total is not None and total > len(shown):
        text += f" and {total - len(shown)} more"
    return text


def _show(value: object) -> str:
    return "null" if value is None else str(value)


def require_one_of(name: str, value: object, allowed: Sequence[object]) -> None:
    """Raise :class:`ParameterError` unless ``value`` is one of ``allowed``.

    Examples
    --------
    >>> require_one_of("cohort", "full", ("full", "factual_success"))
    """
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ParameterError(f"parameter `{name}` is {value!r}; it must be one of {choices}.")


def renamed(function: str, given: dict[str, object], names: dict[str, str]) -> dict[str, object]:
    """Return the ``**deprecated`` keywords ``given`` to ``function`` under their new ``names``.

    Warns a DeprecationWarning for every old name used (aliases are kept one release), and raises
    TypeError (as Python would) for a keyword that is neither.

    Examples
    --------
    >>> renamed("summarize", {}, {"method": "ci_method"})
    {}
    """
    unknown = [k for k in given if k not in names]
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
    for old in given:
        warnings.warn(
            f"{function}: parameter `{old}` is now `{names[old]}`; the old name will be removed "
            "in the next release.",
            DeprecationWarning,
            stacklevel=3,
        )
    return {names[old]: value for old, value in given.items()}
