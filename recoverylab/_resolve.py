"""Which files a path, a glob, a directory or a list of them names, and their hive values.

The first half of the source resolver whose rules :mod:`recoverylab.io` documents as a table:
this module decides *what is read and what is ignored*; :func:`recoverylab.io.scan` reads it.
Nothing here opens a file's contents, so :mod:`recoverylab._diagnose` uses the same listing to
find the file behind an engine error that :func:`~recoverylab.io.scan` would have read.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from recoverylab._errors import SourceError
from recoverylab._formats import format_of_path

__all__ = ["HIVE_NULL", "InputFile", "ignored", "resolve_paths", "tree_files"]

#: The directory value Spark and Hive write for a null partition key.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class InputFile:
    """One file to read: its path, its format, and the ``key=value`` directories above it.

    ``hive`` holds (key, value) pairs from the outermost directory in; a value is ``None`` for
    :data:`HIVE_NULL`. It is empty for files not read as part of a hive dataset.
    """

    path: Path
    format: str
    hive: tuple[tuple[str, str | None], ...] = ()


def ignored(name: str) -> bool:
    """Return whether a directory entry is bookkeeping rather than data.

    Hidden names (``.part-0.parquet.crc``, ``.DS_Store``), names starting with ``_`` (Spark's
    ``_SUCCESS``, ``_temporary/``, ``_committed_*``; Hive's ``_metadata``) and checksum files
    (``*.crc``) are skipped inside directories and glob matches. A file named explicitly is read.

    Examples
    --------
    >>> [ignored(n) for n in ("_SUCCESS", ".x.crc", "part-0.crc", "part-0.parquet")]
    [True, True, True, False]
    """
    return name.startswith((".", "_")) or name.lower().endswith(".crc")


def resolve_paths(
    sources: Sequence[str], *, format: str | None = None, hive: bool | None = None
) -> list[InputFile]:
    """Return the files ``sources`` name, in order: each source in turn, its files sorted.

    Parameters
    ----------
    sources
        Paths of files or directories, and glob patterns (``**`` recurses).
    format
        Read every file as this format; by default each file's suffix names it.
    hive
        Take ``key=value`` directory names as columns: ``None`` (default) for directories only,
        ``True`` also below a glob's fixed leading directories, ``False`` never.

    Raises
    ------
    SourceError
        A path that does not exist, a glob that matches no file, a directory without data files,
        a symbolic link that cannot be followed or leads back to a directory above it, an entry
        that is not a regular file, or a file whose format cannot be told.
    """
    files: list[InputFile] = []
    for text in sources:
        if glob.has_magic(text):
            files.extend(_glob_files(text, format, hive is True))
        elif Path(text).is_dir():
            found = list(_directory_files(Path(text), format, hive is not False))
            if not found:
                raise SourceError(f"`{text}` is a directory with no data files.")
            files.extend(found)
        elif Path(text).exists():
            files.append(InputFile(Path(text), format_of_path(Path(text), format)))
        elif Path(text).is_symlink():
            raise SourceError(_link_problem(Path(text)))
        else:
            raise SourceError(f"`{text}` does not exist.")
    return files


def tree_files(directory: Path) -> list[Path]:
    """Return every regular file below ``directory``, whatever its format, sorted by path.

    The listing :func:`resolve_paths` reads a directory by (bookkeeping names skipped, links
    followed, loops and special files refused), without asking each file for a table format:
    a per-run directory tree (``result.txt``, ``report.json``, a recording) holds files that are
    not tables, and a path template (:mod:`recoverylab.adapters._templates`) decides which count.

    Raises
    ------
    SourceError
        As for a directory in :func:`resolve_paths`.
    """
    return list(_walk(directory, frozenset({os.path.realpath(directory)})))


def _glob_files(pattern: str, format: str | None, hive: bool) -> Iterator[InputFile]:
    root = _fixed_root(pattern)
    matches = sorted(glob.glob(pattern, recursive=True))
    files = [
        Path(m)
        for m in matches
        if not Path(m).is_dir() and not any(ignored(part) for part in _below(Path(m), root).parts)
    ]
    if not files:
        directories = [m for m in matches if Path(m).is_dir()]
        if directories:
            shown = ", ".join(f"`{d}`" for d in directories[:3])
            raise SourceError(
                f"no file matches `{pattern}`; it matches only the director"
                f"{'y' if len(directories) == 1 else 'ies'} {shown}. Hint: name a directory "
                "itself to read the data files inside it."
            )
        raise SourceError(f"no file matches `{pattern}`.")
    for path in files:
        keys = _hive_pairs(_below(path, root).parent) if hive else ()
        yield InputFile(path, format_of_path(path, format), keys)


def _fixed_root(pattern: str) -> Path:
    """Return the leading directories of a glob pattern that hold no wildcard."""
    parts: list[str] = []
    for part in Path(pattern).parts[:-1]:
        if glob.has_magic(part):
            break
        parts.append(part)
    return Path(*parts) if parts else Path()


def _below(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:
        return Path(path.name)


def _directory_files(directory: Path, format: str | None, hive: bool) -> Iterator[InputFile]:
    for path in _walk(directory, frozenset({os.path.realpath(directory)})):
        keys = _hive_pairs(path.relative_to(directory).parent) if hive else ()
        yield InputFile(path, format_of_path(path, format), keys)


def _walk(directory: Path, above: frozenset[str]) -> Iterator[Path]:
    """Yield the regular files below ``directory``, sorted by name, bookkeeping skipped.

    Symbolic links are followed; one that leads back to a directory being walked (``above``)
    would repeat forever, so it is an error naming the link, as is a link that cannot be followed.
    """
    try:
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as exc:
        raise SourceError(f"`{directory}` cannot be listed ({exc.strerror or exc}).") from None
    for entry in entries:
        if ignored(entry.name):
            continue
        path = Path(entry.path)
        try:
            mode = os.stat(path).st_mode  # follows links: a loop raises ELOOP here
        except OSError:
            raise SourceError(_link_problem(path)) from None
        if stat.S_ISDIR(mode):
            real = os.path.realpath(path)
            if real in above:
                raise SourceError(
                    f"`{path}` is a symbolic link back to `{real}`, a directory it lies in, so "
                    "the directory never ends. Hint: remove the link or read a directory "
                    "without it."
                )
            yield from _walk(path, above | {real})
        elif stat.S_ISREG(mode):
            yield path
        else:
            raise SourceError(
                f"`{path}` is not a regular file (a device, FIFO or socket); a table directory "
                "may hold only data files. Hint: move it out or name the files to read."
            )


def _link_problem(path: Path) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
    else:  # pragma: no cover - the caller saw it fail
        reason = "it cannot be followed"
    if path.is_symlink():
        return (
            f"`{path}` is a symbolic link that cannot be followed ({reason}). Hint: remove the "
            "link or point it at a data file."
        )
    return f"`{path}` cannot be read ({reason})."


def _hive_pairs(relative_directory: Path) -> tuple[tuple[str, str | None], ...]:
    pairs: list[tuple[str, str | None]] = []
    for part in relative_directory.parts:
        key, sep, value = part.partition("=")
        if not sep or not key:
            continue
        if any(key == k for k, _ in pairs):
            raise SourceError(
                f"`{relative_directory}` names the partition key `{key}` twice; a hive path "
                "gives each key one value."
            )
        decoded = unquote(value)
        pairs.append((unquote(key), None if decoded == HIVE_NULL else decoded))
    return tuple(pairs)
