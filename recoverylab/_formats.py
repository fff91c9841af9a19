"""The file formats recoverylab reads, by suffix, and run logs it recognises as not being tables.

This is core knowledge shared by the readers (:mod:`recoverylab.io`), the error diagnosis
(:mod:`recoverylab._diagnose`) and the adapters: a table reader given an inspect_ai evaluation log
points at ``recoverylab import inspect`` instead of failing on its bytes. Recognising a log needs
only its first bytes (or a zip directory), never inspect_ai itself.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

from recoverylab._errors import ParameterError, SourceError

__all__ = ["FORMATS", "format_of_path", "inspect_log_hint", "looks_like_inspect_log"]

#: File suffix -> format name.
FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "ipc",
    ".ipc": "ipc",
    ".feather": "ipc",
    ".csv": "csv",
    ".tsv": "csv",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".json": "ndjson",
}

# An inspect .json log opens with its version and status before the eval spec.
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')
_EVAL_MEMBERS = ("header.json", "_journal/start.json")


def format_of_path(path: Path, format: str | None = None) -> str:
    """Return the format of ``path``: ``format`` if given (checked), else its suffix's.

    Raises
    ------
    ParameterError
        An unknown ``format``.
    SourceError
        An inspect_ai log (with a hint to import it), or an unknown suffix (with a hint to name
        the format).

    Examples
    --------
    >>> format_of_path(Path("runs/forks.csv.gz"))
    'csv'
    """
    if format is not None:
        if format not in set(FORMATS.values()):
            allowed = ", ".join(sorted(set(FORMATS.values())))
            raise ParameterError(f"parameter `format` is {format!r}; it must be one of {allowed}.")
        return format
    if looks_like_inspect_log(path):  # an evaluation log is not a table (issue 15)
        raise SourceError(inspect_log_hint(path))
    suffix = path.suffix.lower()
    if suffix == ".gz" and len(path.suffixes) > 1:
        suffix = path.suffixes[-2].lower()
    try:
        return FORMATS[suffix]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise SourceError(
            f"`{path}` has an unknown suffix {path.suffix!r}; recoverylab reads {known}. "
            "Hint: name the format to read it anyway (`format=` in Python, `--input-format` on "
            "the command line)."
        ) from None


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
