"""The file formats recoverylab reads, by suffix, their compression, and logs that are not tables.

This is core knowledge shared by the readers (:mod:`recoverylab.io`), the error diagnosis
(:mod:`recoverylab._diagnose`) and the adapters: a table reader given an inspect_ai evaluation log
points at ``recoverylab import inspect`` instead of failing on its bytes. Recognising a log needs
only its first bytes (or a zip directory), never inspect_ai itself.

Text files (CSV, NDJSON, JSON) may be compressed (:data:`COMPRESSIONS`): the format is the suffix
before the compression suffix (``forks.csv.gz`` is CSV). :func:`decompressed_chunks` is the one
decoder every reader uses, so a cut or damaged compressed file is one error naming the file
(never a parse error about its bytes); zstandard streams that end inside a frame, which the
library's own stream reader returns short without complaint, are caught here too.
"""

from __future__ import annotations

import bz2
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from recoverylab._errors import ParameterError, SourceError

__all__ = [
    "COMPRESSIONS",
    "FORMATS",
    "compression_of_path",
    "decompressed_chunks",
    "format_of_path",
    "inspect_log_hint",
    "looks_like_inspect_log",
    "read_decompressed",
    "strip_compression",
]

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

#: Compression suffix -> codec. Text formats only: parquet and Arrow IPC compress their own pages.
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".bz2": "bz2"}
#: The first bytes of each codec's stream (a file without a compression suffix is sniffed).
_MAGIC = {"gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd", "bz2": b"BZh"}
_CHUNK = 1 << 20

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
    suffix = strip_compression(path).suffix.lower()
    try:
        found = FORMATS[suffix]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        compressed = ", ".join(sorted(COMPRESSIONS))
        raise SourceError(
            f"`{path}` has an unknown suffix {_shown_suffix(path)!r}; recoverylab reads {known} "
            f"(text formats also compressed: {compressed}). Hint: name the format to read it "
            "anyway (`format=` in Python, `--input-format` on the command line)."
        ) from None
    codec = COMPRESSIONS.get(path.suffix.lower())
    if codec is not None and found in ("parquet", "ipc"):
        raise SourceError(
            f"`{path}` is a {codec}-compressed {found} file; recoverylab reads {found} files "
            f"as written (the format compresses its own pages). Hint: decompress it first."
        )
    return found


def _shown_suffix(path: Path) -> str:
    """Return the suffix a reader sees: ``.txt.gz`` for a compressed file, not just ``.gz``."""
    if path.suffix.lower() in COMPRESSIONS:
        return strip_compression(path).suffix + path.suffix
    return path.suffix


def strip_compression(path: Path) -> Path:
    """Return ``path`` without its compression suffix (``forks.csv.gz`` -> ``forks.csv``).

    Examples
    --------
    >>> strip_compression(Path("a/forks.csv.zst")).name
    'forks.csv'
    """
    return path.with_suffix("") if path.suffix.lower() in COMPRESSIONS else path


def compression_of_path(path: Path) -> str | None:
    """Return the codec a text file is compressed with (``gzip``, ``zstd``, ``bz2``), or None.

    The compression suffix names it; a file without one whose first bytes are a codec's magic
    number (a gzip stream saved as ``forks.csv``) is read as what it holds, since no CSV or JSON
    text starts with those bytes.

    Raises
    ------
    SourceError
        The file cannot be opened.
    """
    codec = COMPRESSIONS.get(path.suffix.lower())
    if codec is not None:
        return codec
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise SourceError(f"`{path}` cannot be read ({exc.strerror or exc}).") from None
    for name, magic in _MAGIC.items():
        if head.startswith(magic) and (name != "bz2" or head[3:4].isdigit()):
            return name
    return None


def _decoder(codec: str) -> Any:
    if codec == "gzip":
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if codec == "bz2":
        return bz2.BZ2Decompressor()
    import zstandard  # a dependency, imported when a .zst file is read

    return zstandard.ZstdDecompressor().decompressobj()


def _decode_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [zlib.error, OSError, EOFError, ValueError]
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency
        return tuple(errors)
    return (*errors, zstandard.ZstdError)


def decompressed_chunks(path: Path, codec: str) -> Iterator[bytes]:
    """Yield the decompressed bytes of ``path`` in blocks, streaming (one block in memory).

    Concatenated streams (``cat a.gz b.gz``, multi-frame zstd) are read one after the other.

    Raises
    ------
    SourceError
        A stream that is damaged, is not of ``codec``, or ends before its end marker (a cut
        file), naming the file.
    """
    try:
        with path.open("rb") as handle:
            decoder, fed = _decoder(codec), False
            while block := handle.read(_CHUNK):
                while block:
                    fed = True
                    out = decoder.decompress(block)
                    if out:
                        yield out
                    block = b""
                    if decoder.eof:
                        rest = decoder.unused_data
                        if rest.strip(b"\0"):  # another stream follows (zero padding ends it)
                            decoder, block = _decoder(codec), rest
                        else:
                            decoder, fed = _decoder(codec), False
            if fed:
                raise EOFError("the data end before the end of the compressed stream")
    except _decode_errors() as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourceError(
            f"`{path}` is not a readable {codec} file ({reason}); it may be cut off or damaged."
        ) from None


def read_decompressed(path: Path) -> bytes:
    """Return a file's bytes, decompressed when it is compressed (see :func:`compression_of_path`).

    Raises
    ------
    SourceError
        The file cannot be read, or its compressed stream is damaged or cut (naming the file).
    """
    codec = compression_of_path(path)
    if codec is None:
        try:
            return path.read_bytes()
        except OSError as exc:
            raise SourceError(f"`{path}` cannot be read ({exc.strerror or exc}).") from None
    return b"".join(decompressed_chunks(path, codec))


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
