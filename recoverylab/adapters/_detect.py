"""Recognise inspect_ai evaluation logs from their first bytes, without importing inspect_ai."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

__all__ = ["inspect_log_hint", "looks_like_inspect_log"]

# An inspect .json log opens with its version and status before the eval spec.
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')
_EVAL_MEMBERS = ("header.json", "_journal/start.json")


def looks_like_inspect_log(path: str | os.PathLike[str]) -> bool:
    """Return whether ``path`` is an inspect_ai evaluation log (``.eval`` zip or ``.json``).

    Only the zip directory of an ``.eval`` file, or the first bytes of a ``.json`` file, are read;
    any other suffix answers ``False`` at once, so table readers can ask on every file.

    Examples
    --------
    >>> looks_like_inspect_log("runs/forks.parquet")
    False
    """
    candidate = Path(path)
    suffix = candidate.suffix.lower()
    if suffix not in (".eval", ".json") or not candidate.is_file():
        return False
    try:
        if suffix == ".eval":  # not a zip: BadZipFile
            with zipfile.ZipFile(candidate) as archive:
                names = set(archive.namelist())
            return any(name in names for name in _EVAL_MEMBERS)
        with candidate.open("rb") as handle:
            head = handle.read(256)
    except (OSError, zipfile.BadZipFile):
        return False
    return bool(_JSON_HEAD.match(head))


def inspect_log_hint(path: str | os.PathLike[str]) -> str:
    """Return the one-line message for a table reader given an inspect log."""
    return (
        f"`{path}` is an inspect_ai evaluation log, not a table. Hint: convert it first with "
        "`recoverylab import inspect LOGS... --to forks --condition ... --method ... --delay ... "
        "--out DIR` (Python: recoverylab.adapters.inspect.forks), then read DIR."
    )
