"""Reading inspect_ai logs through ``inspect_ai.log``: headers, sample summaries, markers.

Only the log header and the sample summaries (stored apart from the transcripts) are read; full
samples are streamed only for a recovery marker in a sample's store or events. Files are read in
parallel threads.

A log saved compressed (``.eval.gz``, ``.json.zst``, ``.json.bz2``...) is decompressed into a
temporary file that inspect_ai reads, and found in directories like the logs inspect lists (its
own listing knows only ``.eval`` and ``.json``). Whatever inspect_ai's readers raise on a
damaged or hostile file (its JSON parser's errors, a recursion limit, an assertion about the
document's layout) becomes one :class:`SourceError` line naming the file.
"""

from __future__ import annotations

import glob as _glob
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recoverylab._errors import MissingDependencyError, SourceError
from recoverylab._formats import COMPRESSIONS, decompressed_chunks, strip_compression

__all__ = ["Log", "read_logs", "require_inspect"]

#: How inspect names a ``.json`` log (``inspect_ai.log._file.log_file_pattern``).
_LOG_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}[:-]\d{2}[:-]\d{2}")
#: Fields of a full sample never needed for a marker.
_HEAVY = {"messages", "attachments", "output"}


@dataclass(frozen=True)
class Log:
    """One evaluation log: the header fields the adapter uses and its sample summaries.

    ``task_id``, ``eval_id`` and ``run_id`` are inspect's own record of the eval: ``eval_retry``
    (and an eval set's retries) keep ``task_id`` and write a new ``eval_id`` and ``run_id``, and
    every task x model of one ``eval()`` call gets its own ``task_id``.
    """

    location: str
    task: str
    task_args: dict[str, Any]
    model: str
    metadata: dict[str, Any]
    status: str
    created: str
    samples: list[Any]
    markers: dict[tuple[str, int], Any] = field(default_factory=dict)
    task_id: str = ""
    eval_id: str = ""
    run_id: str = ""
    dataset: str | None = None  # the dataset's name: the scope of the sample ids


def require_inspect() -> None:
    """Raise MissingDependencyError naming the extra when inspect_ai is not installed."""
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "reading inspect logs needs inspect_ai. Hint: pip install 'recoverylab[inspect]'."
        ) from exc


def read_logs(
    logs: object, marker: Callable[[Any], Any] | None, *, full: bool, workers: int | None = None
) -> list[Log]:
    """Read every log given as files, directories, globs or ``EvalLog`` objects.

    ``marker`` reads the recovery marker from a full sample (``full=True``) or a summary.
    """
    require_inspect()
    from inspect_ai.log import EvalLog

    items = list(logs) if isinstance(logs, (list, tuple)) else [logs]
    in_memory = [_from_object(i, marker) for i in items if isinstance(i, EvalLog)]
    locations = _locations([i for i in items if not isinstance(i, EvalLog)])
    threads = workers or min(8, os.cpu_count() or 1, len(locations))
    with ThreadPoolExecutor(max_workers=max(threads, 1)) as pool:
        return in_memory + list(pool.map(lambda loc: _read_file(loc, marker, full), locations))


def _locations(items: Sequence[object]) -> list[str]:
    """Expand paths, directories (inspect's own listing) and globs into log locations."""
    from inspect_ai.log import list_eval_logs

    found: list[str] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise SourceError(
                f"cannot read an inspect log from a {type(item).__name__}; give paths, "
                "directories, globs or inspect_ai EvalLog objects."
            )
        text = os.fspath(item)
        if Path(text).is_dir():
            # inspect lists local files as file:// URLs
            listed = [i.name.removeprefix("file://") for i in list_eval_logs(text, recursive=True)]
            listed += [str(p) for p in _compressed_logs(Path(text))]
            if not listed:
                raise SourceError(f"`{text}` is a directory with no inspect logs.")
            found.extend(sorted(listed))
        elif _glob.has_magic(text):
            matches = sorted(m for m in _glob.glob(text, recursive=True) if Path(m).is_file())
            if not matches:
                raise SourceError(f"no file matches `{text}`.")
            found.extend(matches)
        elif Path(text).is_file():
            found.append(text)
        else:
            raise SourceError(f"`{text}` does not exist.")
    return list(dict.fromkeys(found))


def _compressed_logs(directory: Path) -> list[Path]:
    """Return the compressed logs below ``directory``, by the rule inspect lists plain ones.

    inspect lists every ``.eval`` file, and a ``.json`` file whose name starts with a full ISO
    timestamp (its log names); hidden names are skipped.
    """
    found = []
    for path in directory.rglob("*"):
        plain = strip_compression(path)
        if path.suffix.lower() not in COMPRESSIONS or not path.is_file():
            continue
        if any(part.startswith(".") for part in path.relative_to(directory).parts):
            continue
        if plain.suffix.lower() == ".eval" or (
            plain.suffix.lower() == ".json" and _LOG_NAME.match(plain.name)
        ):
            found.append(path)
    return sorted(found)


def _reader_errors() -> tuple[type[BaseException], ...]:
    """Return what inspect_ai's readers raise on a damaged or hostile file (not on good ones)."""
    errors: list[type[BaseException]] = [OSError, ValueError, KeyError, RuntimeError]
    errors += [zipfile.BadZipFile, AssertionError, TypeError, AttributeError, IndexError]
    errors += [RecursionError, EOFError]
    try:
        from ijson.common import JSONError  # type: ignore[import-untyped]  # inspect's JSON reader
    except ImportError:  # pragma: no cover - installed with inspect_ai
        return tuple(errors)
    return (*errors, JSONError)


#: Nesting beyond this many levels is refused before inspect_ai reads a JSON log: its reader
#: fails at about 200 levels anyway, but on 100,000 it first takes about 10 GB of memory
#: (found by the inspect fuzzer when a CI worker was killed for memory).
MAX_LOG_DEPTH = 1_000

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def _refuse_deep_nesting(path: Path, location: str) -> None:
    """Raise :class:`SourceError` naming ``location`` when its JSON nests too deep.

    Strings are removed first (their brackets are text), then the brackets' running depth is
    counted over the bytes at once.
    """
    data = path.read_bytes()
    if data.count(b"[") + data.count(b"{") <= MAX_LOG_DEPTH:
        return
    brackets = np.frombuffer(_STRING.sub(b"", data), dtype=np.uint8)
    steps = np.select(
        [
            (brackets == ord("[")) | (brackets == ord("{")),
            (brackets == ord("]")) | (brackets == ord("}")),
        ],
        [1, -1],
        0,
    ).astype(np.int32)
    if steps.size and int(np.cumsum(steps).max()) > MAX_LOG_DEPTH:
        raise SourceError(
            f"`{location}` is not a readable inspect log (values nested more than "
            f"{MAX_LOG_DEPTH} levels)."
        )


def _read_file(location: str, marker: Callable[[Any], Any] | None, full: bool) -> Log:
    from inspect_ai.log import read_eval_log, read_eval_log_sample_summaries

    path = Path(location)
    with tempfile.TemporaryDirectory(prefix="recoverylab-") as scratch:
        readable = location
        if path.suffix.lower() in COMPRESSIONS and path.is_file():
            plain = Path(scratch) / strip_compression(path).name
            with plain.open("wb") as out:  # streamed: one block in memory
                for block in decompressed_chunks(path, COMPRESSIONS[path.suffix.lower()]):
                    out.write(block)
            readable = str(plain)
        if readable.lower().endswith(".json"):
            _refuse_deep_nesting(Path(readable), location)
        try:
            header = read_eval_log(readable, header_only=True)
            summaries = read_eval_log_sample_summaries(readable)
            markers = _markers(readable, marker, full, summaries)
        except _reader_errors() as exc:
            lines = str(exc).strip().splitlines()
            first = lines[0] if lines else type(exc).__name__
            raise SourceError(f"`{location}` is not a readable inspect log ({first}).") from exc
    return _log(location, header, summaries, markers)


def _markers(
    location: str, marker: Callable[[Any], Any] | None, full: bool, summaries: Iterable[Any]
) -> dict[tuple[str, int], Any]:
    if marker is None:
        return {}
    if not full:
        return {(str(s.id), s.epoch): marker(s) for s in summaries}
    from inspect_ai.log import read_eval_log_samples

    samples = read_eval_log_samples(location, all_samples_required=False, exclude_fields=_HEAVY)
    return {(str(s.id), s.epoch): marker(s) for s in samples}


def _from_object(log: Any, marker: Callable[[Any], Any] | None) -> Log:
    samples = list(log.samples or [])
    summaries = [s.summary() for s in samples]
    markers = {(str(s.id), s.epoch): marker(s) for s in samples} if marker else {}
    return _log(log.location or f"<EvalLog {log.eval.eval_id}>", log, summaries, markers)


def _log(location: str, header: Any, summaries: list[Any], markers: dict[Any, Any]) -> Log:
    spec = header.eval
    return Log(
        location=location,
        task=spec.task,
        task_args=dict(spec.task_args or {}),
        model=spec.model,
        metadata=dict(spec.metadata or {}),
        status=str(header.status),
        created=str(spec.created),
        samples=summaries,
        markers=markers,
        task_id=spec.task_id or "",
        eval_id=spec.eval_id or "",
        run_id=spec.run_id or "",
        dataset=(spec.dataset.name or None) if spec.dataset is not None else None,
    )
