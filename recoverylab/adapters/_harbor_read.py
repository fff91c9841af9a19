"""Find the trials of Harbor job directories and read their ``result.json`` files in one scan.

Harbor writes a job as ``JOBS_DIR/JOB_NAME/`` holding the job's ``config.json`` (``JobConfig``),
``result.json`` (``JobResult``, without its trial results) and one directory per trial, named
``TASK__`` and 7 random characters (``TrialConfig.generate_trial_name``), holding the trial's
``config.json`` (``TrialConfig``), ``result.json`` (``TrialResult``) and the ``agent/``,
``verifier/``, ``artifacts/``, ``steps/`` and ``user-agent/`` output directories
(``harbor/models/trial/paths.py``). A trial directory without ``result.json`` is a trial that never
finished (Harbor writes the file once, when the trial ends, and deletes such directories when it
resumes the job).

Reading: the files are read as bytes, their line breaks (never inside a JSON string) turned into
spaces, and the whole set parsed by polars' JSON reader in one call with an explicit schema holding
only the fields of ``TrialResult`` the adapter uses; a dict whose keys are the user's (rewards,
agent kwargs, metadata) is kept as its JSON text and read with JSON paths later. A file that does
not parse is found and named by parsing the files one at a time, only when the scan failed, with
the one JSON reader (:mod:`recoverylab._json`: depth, encoding and syntax failures are one line
naming the file). A file with a byte-order mark is re-encoded as plain UTF-8 first. A trial
directory archived with its ``result.json`` compressed (``result.json.gz``, ``.zst``, ``.bz2``)
is read like one holding ``result.json``.

A result that parses but that Harbor's own models reject (an ``exception_info`` without one of
``ExceptionInfo``'s required fields ``exception_type``, ``exception_message``,
``exception_traceback``, ``occurred_at``; an ``agent_info.model_info`` without ``name`` or
``provider``) is a trial Harbor itself skips when it loads the job: its row carries the reason in
``invalid_result`` and the adapter excludes it by that reason rather than count its outcome.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import polars as pl

from recoverylab._errors import InputError, ParameterError, SourceError
from recoverylab._formats import COMPRESSIONS, read_decompressed
from recoverylab._json import MAX_DEPTH, decode, load_object

__all__ = ["HarborRead", "read_jobs"]

#: A trial's result file: as Harbor writes it, then compressed by an archiver.
_RESULT_NAMES = ("result.json", *(f"result.json{suffix}" for suffix in COMPRESSIONS))
#: Output directories inside a trial directory, and a regrade job's cache of the trials it
#: regrades (``.sources/``): never searched for trials.
_TRIAL_OUTPUTS = frozenset({"agent", "verifier", "artifacts", "steps", "user-agent", ".sources"})
_POLICY = pl.Struct({"has_valid_reward": pl.Boolean})
#: ``ExceptionInfo``'s fields without a default: a record lacking one fails Harbor's model.
_EXCEPTION_REQUIRED = ("exception_type", "exception_message", "exception_traceback", "occurred_at")
_EXCEPTION = pl.Struct(
    {**dict.fromkeys(_EXCEPTION_REQUIRED, pl.String), "policy_override": _POLICY}
)
_TIMING = pl.Struct({"started_at": pl.String, "finished_at": pl.String})
#: The fields of ``TrialResult`` read, by Harbor's names (``harbor/models/trial/result.py``).
_BASE: dict[str, Any] = {
    "id": pl.String,
    "task_name": pl.String,
    "trial_name": pl.String,
    "trial_uri": pl.String,
    "task_id": pl.String,
    "task_checksum": pl.String,
    "source": pl.String,
    "agent_info": pl.Struct(
        {
            "name": pl.String,
            "version": pl.String,
            "model_info": pl.Struct({"name": pl.String, "provider": pl.String}),
        }
    ),
    "verifier_result": pl.Struct({"rewards": pl.String}),
    "exception_info": _EXCEPTION,
    "step_results": pl.List(pl.Struct({"exception_info": _EXCEPTION})),
    "started_at": pl.String,
    "finished_at": pl.String,
    "agent_execution": _TIMING,
}
#: Fields ``TrialResult`` requires (no default): a file without one is not a result. (``id`` has
#: a default, a fresh uuid; a file without one is identified by its path.)
REQUIRED = (
    "task_name",
    "trial_name",
    "trial_uri",
    "task_id",
    "task_checksum",
    "config",
    "agent_info.name",
    "agent_info.version",
)


@dataclass(frozen=True)
class HarborRead:
    """The trials found under the given paths, one row per ``result.json``.

    ``trials`` has ``file`` and ``job_dir`` (paths as strings), the fields of ``_BASE`` flattened
    (``agent_info.name`` -> ``agent``, ...), and one String column per requested leaf, named by
    its dotted path (``config.agent``). ``jobs`` maps a job directory to its parsed
    ``config.json`` (``JobConfig``), when it has one. ``unfinished`` lists trial directories
    without ``result.json``; ``files_read`` every file opened.
    """

    trials: pl.DataFrame
    jobs: dict[str, dict[str, Any]]
    unfinished: tuple[str, ...]
    files_read: tuple[str, ...]


def read_jobs(
    paths: Sequence[str | os.PathLike[str]], leaves: Iterable[tuple[str, str]]
) -> HarborRead:
    """Find every trial under ``paths`` and read its ``result.json`` (see the module docstring).

    ``leaves`` are (top-level field, field) pairs of ``TrialResult`` read as JSON text, e.g.
    ``("config", "agent")``.
    """
    found = _Found()
    for path in _expand(paths):
        if os.path.isdir(path):
            found.visit(os.path.normpath(path))
        elif os.path.basename(path) in _RESULT_NAMES:
            trial = os.path.dirname(os.path.normpath(path)) or "."
            found.texts[trial] = (path, _read(path))
        else:
            raise ParameterError(
                f"import harbor: `{path}` is a file but not a trial's result.json; give job "
                "directories (or trial directories, or their result.json files)."
            )
    trial_dirs = sorted(found.texts)
    if not trial_dirs:
        named = ", ".join(f"`{os.fspath(p)}`" for p in _expand(paths))
        raise SourceError(f"import harbor: no trial result.json found under {named}.")
    for d in trial_dirs:  # a trial given alone still belongs to its job, if it has one
        parent = os.path.dirname(d)
        if parent not in found.jobs and os.path.isfile(os.path.join(parent, "config.json")):
            found.jobs.add(parent)
    jobs = {d: _job_config(d) for d in sorted(found.jobs - set(trial_dirs))}
    files = [found.texts[d][0] for d in trial_dirs]
    leaves = sorted(
        {("config", "agent"), ("config", "job_id"), ("config", "source_trial"), *leaves}
    )
    frame = _parse(files, [found.texts[d][1] for d in trial_dirs], leaves)
    parents = [os.path.dirname(d) for d in trial_dirs]
    frame = frame.with_columns(
        pl.Series("file", files, dtype=pl.String),
        pl.Series("job_dir", [p if p in jobs else None for p in parents], dtype=pl.String),
    ).with_columns(pl.coalesce("id", "file").alias("id"))
    read = [*files, *(os.path.join(d, "config.json") for d, c in jobs.items() if c)]
    unfinished = tuple(sorted(found.unfinished - found.jobs))
    return HarborRead(frame, jobs, unfinished, tuple(sorted(read)))


def _expand(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[str] = []
    for entry in paths:
        text = os.fspath(entry)
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        if not matches or not all(os.path.exists(m) for m in matches):
            raise SourceError(f"import harbor: `{text}` does not exist.")
        found += matches
    if not found:
        raise ParameterError("import harbor: no job directory given.")
    return found


class _Found:
    """Trials (directory -> result.json bytes), jobs and unfinished trials found so far.

    A directory holding ``config.json`` or ``result.json`` is a job when some subdirectory
    (outside a trial's output directories) is a trial, and a trial otherwise. A job's
    subdirectories are read as trials straight away (one ``open`` each, in parallel threads),
    without listing them: Harbor puts nothing else there.
    """

    def __init__(self) -> None:
        self.texts: dict[str, tuple[str, bytes]] = {}  # directory -> (result file, its bytes)
        self.jobs: set[str] = set()
        self.unfinished: set[str] = set()

    def visit(self, directory: str) -> bool:
        """Search ``directory``; return whether it held any trial, job or unfinished trial."""
        files, subdirs = _listing(directory)
        marked = "config.json" in files or any(name in files for name in _RESULT_NAMES)
        below = [
            os.path.join(directory, s)
            for s in sorted(subdirs)
            if not (marked and s in _TRIAL_OUTPUTS)
        ]
        if not marked:
            visited = [self.visit(d) for d in below]  # every one, no short cut
            return any(visited)
        held = False
        for d, text in zip(below, _read_many(below), strict=True):
            if text is not None:
                self.texts[d] = text
            elif os.path.isfile(os.path.join(d, "config.json")):
                self.unfinished.add(d)
            elif not self.visit(d):
                continue
            held = True
        if held:
            self.jobs.add(directory)
        elif any(name in files for name in _RESULT_NAMES):
            name = next(name for name in _RESULT_NAMES if name in files)
            self.texts[directory] = (
                os.path.join(directory, name),
                _read(os.path.join(directory, name)),
            )
        else:
            self.unfinished.add(directory)
        return True


def _listing(directory: str) -> tuple[set[str], list[str]]:
    files: set[str] = set()
    subdirs: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir():
                subdirs.append(entry.name)
            else:
                files.add(entry.name)
    return files, subdirs


def _read_many(directories: list[str]) -> list[tuple[str, bytes] | None]:
    """Read ``result.json`` in each directory (None where there is none), in parallel threads."""
    if len(directories) < 64:
        return [_maybe(d) for d in directories]
    size = -(-len(directories) // 32)
    chunks = [directories[i : i + size] for i in range(0, len(directories), size)]
    with ThreadPoolExecutor(max_workers=min(8, 4 * (os.cpu_count() or 1))) as pool:
        parts = list(pool.map(lambda chunk: [_maybe(d) for d in chunk], chunks))
    return [text for part in parts for text in part]


def _maybe(directory: str) -> tuple[str, bytes] | None:
    """Return a trial directory's result file and bytes (decompressed), or None without one."""
    for name in _RESULT_NAMES:  # the compressed names are looked for only without result.json
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise SourceError(f"harbor result `{path}` cannot be read ({exc.strerror}).") from None
        return path, data if name == "result.json" else _decompressed(path)
    return None


def _decompressed(path: str) -> bytes:
    try:
        return read_decompressed(Path(path))
    except SourceError as exc:
        raise InputError(f"harbor result {exc}") from None


def _job_config(job_dir: str) -> dict[str, Any]:
    path = os.path.join(job_dir, "config.json")
    if not os.path.isfile(path):
        return {}
    try:
        return load_object(Path(path), what="JobConfig")
    except SourceError as exc:
        raise InputError(f"harbor job config {exc}") from None


def _schema(leaves: Sequence[tuple[str, str]]) -> dict[str, Any]:
    schema = dict(_BASE)
    tops: dict[str, dict[str, Any]] = {}
    for top, name in leaves:
        tops.setdefault(top, {})[name] = pl.String
    for top, fields in tops.items():
        if top in schema:
            raise ParameterError(
                f"import harbor: field `{top}` cannot be read as a mapping source."
            )
        schema[top] = pl.Struct(fields)
    schema.setdefault("config", pl.Struct({"agent": pl.String}))
    return schema


def _parse(files: list[str], texts: list[bytes], leaves: Sequence[tuple[str, str]]) -> pl.DataFrame:
    """Parse every result file in one polars scan; name the first broken file on failure."""
    schema = _schema(leaves)
    for file, text in zip(files, texts, strict=True):
        if not text.strip():
            raise InputError(f"harbor result `{file}` is empty; it is not a TrialResult.")
    if not files:
        frame = pl.DataFrame(schema=schema)
    else:
        texts = [_utf8(file, text) for file, text in zip(files, texts, strict=True)]
        for file, text in zip(files, texts, strict=True):
            if text.count(b"[") + text.count(b"{") > MAX_DEPTH:  # maybe too deep: look
                _load(file, text)
        # one object per line: a raw line break can only be whitespace between JSON tokens
        blob = b"\x00".join(texts).replace(b"\r", b" ").replace(b"\n", b" ").replace(b"\x00", b"\n")
        try:
            frame = pl.read_ndjson(blob, schema=schema)
        except pl.exceptions.PolarsError:
            frame = _parse_read_fields(files, texts, schema)
        if frame.height != len(files):
            _name_broken(files, texts, schema)
    return _check_types(_flatten(frame, leaves), files, texts)


#: Text fields of TrialResult read as keys or labels (flattened names -> Harbor's names).
_TEXT_FIELDS = {
    "task_name": "task_name",
    "trial_name": "trial_name",
    "trial_uri": "trial_uri",
    "task_checksum": "task_checksum",
    "source": "source",
    "agent": "agent_info.name",
    "agent_version": "agent_info.version",
    "model": "agent_info.model_info.name",
}
#: What polars' reader makes of a JSON number, boolean, object or array read as a string.
_NOT_TEXT = r"^\s*[\[{]|^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$|^(true|false)$"


def _check_types(frame: pl.DataFrame, files: list[str], texts: list[bytes]) -> pl.DataFrame:
    """Check the types the one-scan read cannot see, on the few files that look wrong.

    Read with a String schema, a JSON object, array, number or boolean becomes its JSON text.
    Rows where a text field looks like one, or whose rewards hold a string, object or array,
    are parsed again in Python to see the real type: an object or array where a key or label
    belongs (``task_name``...) and any non-string there is an error naming the file and the
    field, as is a reward that is text, an object or an array; an ``exception_info`` field that
    is not text marks the trial ``invalid_result`` (Harbor skips it).
    """
    exception_fields = [
        pl.col("exceptions")
        .list.eval(pl.element().struct.field(name).str.contains(_NOT_TEXT))
        .list.any()
        for name in _EXCEPTION_REQUIRED
    ]
    suspect = pl.any_horizontal(
        *(pl.col(c).str.contains(_NOT_TEXT) for c in _TEXT_FIELDS),
        *exception_fields,
        pl.col("rewards").str.contains(r':\s*["\[{]'),
    ).fill_null(False)
    rows = frame.with_row_index("_row").filter(suspect)["_row"].to_list()
    if not rows:
        return frame
    reasons = frame["invalid_result"].to_list()
    for row in rows:
        value = _load(files[row], _utf8(files[row], texts[row]))
        reasons[row] = reasons[row] or _model_problem(files[row], value)
    return frame.with_columns(pl.Series("invalid_result", reasons, dtype=pl.String))


def _model_problem(file: str, value: dict[str, Any]) -> str | None:
    """Raise on a non-text key field; return why Harbor's models reject the result, or None."""
    for dotted in _TEXT_FIELDS.values():
        found: Any = value
        for part in dotted.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if found is not None and not isinstance(found, str):
            kind = "a JSON object or array" if isinstance(found, (dict, list)) else repr(found)
            raise InputError(
                f"harbor result `{file}`: `{dotted}` is {kind[:60]} where a key or label "
                "belongs; TrialResult holds text there."
            )
    steps: list[Any] = value.get("step_results") or []
    if not isinstance(steps, list):
        steps = []
    infos = [
        value.get("exception_info"),
        *(s.get("exception_info") for s in steps if isinstance(s, dict)),
    ]
    for info in infos:
        if isinstance(info, dict):
            for name in _EXCEPTION_REQUIRED:
                if not isinstance(info.get(name), str):
                    return (
                        f"an `exception_info` has `{name}` {info.get(name)!r:.40}; Harbor's "
                        "ExceptionInfo holds text"
                    )
    verifier = value.get("verifier_result")
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    for key, reward in (rewards or {}).items() if isinstance(rewards, dict) else ():
        if isinstance(reward, (str, dict, list)):  # null: no reward; a bool: a number
            raise InputError(
                f"harbor result `{file}`: reward `{key}` is {reward!r:.40}, one of the values "
                "that are not numbers; VerifierResult.rewards holds numbers."
            )
    return None


def _load(file: str, text: bytes) -> dict[str, Any]:
    """Parse one result with the one JSON reader; its failures name the file."""
    try:
        return load_object(Path(file), text, what="TrialResult")
    except SourceError as exc:
        raise InputError(f"harbor result {exc}") from None


def _utf8(file: str, text: bytes) -> bytes:
    """Return a result's bytes as plain UTF-8 (a byte-order mark, UTF-16 or UTF-32 re-encoded)."""
    if text[:1] in (b"{", b" ", b"\n", b"\t", b"\r"):  # the common case: no mark to look at
        return text
    try:
        return decode(text, file).encode()
    except SourceError as exc:
        raise InputError(f"harbor result {exc}") from None


def _read(file: str) -> bytes:
    if file.endswith(tuple(COMPRESSIONS)):
        return _decompressed(file)
    try:
        with open(file, "rb") as handle:
            text = handle.read()
    except OSError as exc:
        raise SourceError(f"harbor result `{file}` cannot be read ({exc.strerror}).") from None
    return text


def _read_fields(file: str, text: bytes, schema: dict[str, Any]) -> bytes:
    """One result as one JSON line holding only the fields read (parsed by the one reader)."""
    value = _load(file, text)
    return json.dumps({k: v for k, v in value.items() if k in schema}).encode()


def _parse_read_fields(
    files: list[str], texts: list[bytes], schema: dict[str, Any]
) -> pl.DataFrame:
    """Parse again from the fields read only, after the one scan failed (the error path).

    polars refuses values Python's JSON reads and Harbor's models accept (an integer beyond 64
    bits, a NaN) even in a field the adapter never reads; a result is refused only for what
    it holds in the fields read.
    """
    lines = [_read_fields(file, text, schema) for file, text in zip(files, texts, strict=True)]
    try:
        return pl.read_ndjson(b"\n".join(lines), schema=schema)
    except pl.exceptions.PolarsError:
        _name_broken(files, texts, schema)


def _name_broken(files: list[str], texts: list[bytes], schema: dict[str, Any]) -> NoReturn:
    """Find the file the one-scan read failed on (file by file: the error path only); raise."""
    for file, text in zip(files, texts, strict=True):
        try:
            pl.read_ndjson(_read_fields(file, text, schema), schema=schema)
        except pl.exceptions.PolarsError as exc:  # noqa: PERF203 - the error path only
            problem = str(exc).strip().splitlines()[0]
            raise InputError(
                f"harbor result `{file}` does not have TrialResult's shape ({problem})."
            ) from None
    raise InputError(f"harbor results under `{os.path.dirname(files[0])}` could not be read.")


def _invalid_result(exceptions: pl.Expr) -> pl.Expr:
    """Why Harbor's models reject a parsed result (null when they accept it).

    ``ExceptionInfo`` requires all of :data:`_EXCEPTION_REQUIRED`; ``ModelInfo`` requires
    ``name`` and ``provider`` (``harbor/models/trial/result.py``).
    """
    model = pl.col("agent_info").struct.field("model_info")
    reasons = [
        (
            exceptions.list.eval(pl.element().struct.field(name).is_null()).list.any(),
            f"an `exception_info` lacks `{name}` (required by Harbor's ExceptionInfo)",
        )
        for name in _EXCEPTION_REQUIRED
    ] + [
        (
            model.is_not_null() & model.struct.field(name).is_null(),
            f"`agent_info.model_info` lacks `{name}` (required by Harbor's ModelInfo)",
        )
        for name in ("name", "provider")
    ]
    expr = pl.lit(None, pl.String)
    for condition, reason in reversed(reasons):
        expr = pl.when(condition.fill_null(False)).then(pl.lit(reason)).otherwise(expr)
    return expr


def _flatten(frame: pl.DataFrame, leaves: Sequence[tuple[str, str]]) -> pl.DataFrame:
    info = pl.col("agent_info")
    exceptions = pl.concat_list(
        pl.col("exception_info"),
        pl.col("step_results")
        .fill_null(pl.lit([], dtype=_BASE["step_results"]))
        .list.eval(pl.element().struct.field("exception_info")),
    ).list.drop_nulls()
    return frame.select(
        _invalid_result(exceptions).alias("invalid_result"),
        "id",
        "task_name",
        "trial_uri",
        pl.col("task_id").alias("task_ref"),  # TrialResult.task_id, not our cluster key
        "task_checksum",
        "trial_name",
        "source",
        info.struct.field("name").alias("agent"),
        info.struct.field("version").alias("agent_version"),
        info.struct.field("model_info").struct.field("name").alias("model"),
        pl.col("verifier_result").struct.field("rewards").alias("rewards"),
        exceptions.alias("exceptions"),
        "started_at",
        "finished_at",
        pl.col("agent_execution").struct.field("started_at").alias("agent_started_at"),
        pl.col("agent_execution").struct.field("finished_at").alias("agent_finished_at"),
        pl.when(pl.col("config").is_not_null()).then(pl.lit(True)).alias("config"),
        *(pl.col(top).struct.field(name).alias(f"{top}.{name}") for top, name in leaves),
    )
