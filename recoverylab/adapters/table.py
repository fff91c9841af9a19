"""Any other run log, no code: columns as polars SQL expressions (``recoverylab import table``).

A custom harness writes JSON, JSONL, CSV or parquet run logs whose columns are not ours. Instead of
hand-written glue (where ids, trials and errored runs are easy to get silently wrong), the user
says where each of our columns comes from as a *polars SQL expression* over the log's columns::

    --map success="reward >= 1"
    --map delay="CAST(meta.delay AS BIGINT)"     # a nested JSON field: struct.field
    --map method="COALESCE(meta.arm, 'none')"

Columns whose names already match need no ``--map``; a mapped name that is not a column of the
target is carried as an extra column (e.g. ``--map model=run.model``).

Safety: an expression is parsed by :func:`polars.sql_expr` and nothing else -- no Python is ever
evaluated; anything polars SQL cannot parse is refused. Validation happens before any row is
read in full: the log's schema is resolved lazily and every expression's result type is checked
against the target contract (:data:`recoverylab.schema.SPECS`, or
:data:`~recoverylab.adapters._trials.TRIALS` for ``trials``). A required column with neither a
same-named column nor a map, an expression naming a missing column or struct field, or a result
of the wrong type is one clear error naming it; then the rows are checked by
:func:`recoverylab.schema.validate` (nulls in keys, duplicate keys, empty tables).

Exclusions: ``exclude={"infrastructure": "status = 'sandbox_error'", ...}`` (CLI:
``--exclude REASON=EXPR``, repeatable) sends the rows where the boolean expression is true to
``excluded`` with that reason (the first matching reason wins, in the order given), never counted
as failures.

Task identity: a log whose task ids repeat per dataset (or domain, suite...) declares that scope
as our column ``task_scope`` (``--map task_scope=dataset``, or ``--scope dataset`` on the command
line, or a log column of that name). ``task_id`` is then ``<scope>/<id>`` on every row whose scope
is not null, the raw id kept in ``raw_task_id`` (:mod:`recoverylab.adapters._identity`; always,
not only when ids collide, so two imports join on the same ids). ``key`` columns are pairing keys,
not scopes: a task run by two models is one task. A frame that already holds ``raw_task_id`` and
``task_scope`` (the tau2 adapter's trials) is carried as it is.

Per-run directory trees: ``read(Logs(root, files="{model}/{domain}/{task_id}/result.txt"))``
(CLI ``--files``) reads a
path template relative to each root given: every file under a root that matches it is read, each
``{name}`` segment bound to a text column; a file holding one number is a row with ``value``; a
JSON object keyed by ids is one row per id with ``unnest_keys="task_id"``; a file under a root
that does not match is listed in the read report (``unmatched``). ``explode="resps",
position="epoch"`` then splits a list of repeats into one row per element. The maps and
exclusions apply to the rows so built (:mod:`recoverylab.adapters._templates` has the rules).

Targets: ``forks`` (the ``forks`` table), ``trials`` (one row per task attempt) and ``takeover``
(one log row per attempt: ``attempts``, and ``states`` as the distinct state columns; a state whose
rows disagree is a duplicate-key error). ``excluded`` has ``log`` (the file), ``task_id`` (or
``state_id``; null when unmapped), ``reason`` and ``detail`` (the expression that excluded it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from recoverylab import io
from recoverylab._diagnose import check_text_file
from recoverylab._errors import InputError, ParameterError, SchemaError, SourceError
from recoverylab._formats import compression_of_path, read_decompressed, strip_compression
from recoverylab._json import load
from recoverylab.adapters import _templates
from recoverylab.adapters._identity import RAW, SCOPE, Identity, identity_of, qualify
from recoverylab.adapters._report import Imported, ReadReport
from recoverylab.adapters._trials import TRIALS
from recoverylab.schema import SPECS, TableSpec, canonical_dtype, validate

__all__ = ["EXCLUDED_SCHEMA", "TARGETS", "Logs", "from_frame", "parse_expression", "read"]

#: The tables each ``to=`` target writes.
TARGETS: Mapping[str, tuple[str, ...]] = {
    "forks": ("forks",),
    "takeover": ("states", "attempts"),
    "trials": ("trials",),
}
#: Columns of the ``excluded`` table of a mapped import.
EXCLUDED_SCHEMA: Mapping[str, pl.DataType] = {
    "log": pl.String(),
    "task_id": pl.String(),
    "reason": pl.String(),
    "detail": pl.String(),
}
#: Suffixes read from a directory.
_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")
_LOG = _templates.LOG
_SQL_TYPES = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR"}
_REASON = "__reason"


def _contract(name: str) -> TableSpec:
    return TRIALS if name == "trials" else SPECS[name]


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def parse_expression(name: str, text: str, what: str = "map") -> pl.Expr:
    """Parse one polars SQL expression; anything polars SQL cannot parse is refused.

    Raises
    ------
    ParameterError
        An empty or unparsable expression (the message quotes it and says why).
    """
    if not isinstance(text, str) or not text.strip():
        raise ParameterError(
            f"table: {what} `{name}` has an empty expression; give a polars SQL "
            "expression such as `reward >= 1`."
        )
    try:
        return pl.sql_expr(text)
    except pl.exceptions.PolarsError as exc:
        raise ParameterError(
            f"table: {what} `{name}={text}` is not a polars SQL expression ({_first_line(exc)})."
        ) from None


def _evaluation_problem(exc: pl.exceptions.PolarsError) -> str:
    if isinstance(exc, pl.exceptions.StructFieldNotFoundError):
        return f"the log has no struct field `{_first_line(exc)}`"
    if isinstance(exc, pl.exceptions.ColumnNotFoundError):
        return _first_line(exc).replace('"', "`").replace(f", `{_LOG}`", "")
    return _first_line(exc)


def _result_type(lazy: pl.LazyFrame, name: str, expr: pl.Expr, origin: str) -> pl.DataType:
    """Return the type ``expr`` yields on the log (schema only, no rows read)."""
    try:
        return lazy.select(expr.alias(name)).collect_schema()[name]
    except pl.exceptions.PolarsError as exc:
        raise SchemaError(
            f"table: {origin} cannot be evaluated on the logs: {_evaluation_problem(exc)}."
        ) from None


def _origin(name: str, mapping: Mapping[str, str]) -> str:
    return f"map `{name}={mapping[name]}`" if name in mapping else f"column `{name}`"


def _target_columns(
    contracts: Sequence[TableSpec], names: set[str], mapping: Mapping[str, str], to: str
) -> list[str]:
    """Contract columns to build (required, and optional ones present); refuse missing ones."""
    missing = [
        column.name
        for contract in contracts
        for column in contract.columns
        if column.required and column.name not in names
    ]
    if missing:
        missing = list(dict.fromkeys(missing))
        maps = " ".join(f"--map {m}=EXPR" for m in missing)
        raise SchemaError(
            f"table: `{to}` needs {', '.join(f'`{m}`' for m in missing)}, which the logs do not "
            f"have and no map gives (log columns: {', '.join(sorted(names - set(mapping)))}). "
            f"Hint: add {maps}."
        )
    wanted = [c.name for contract in contracts for c in contract.columns if c.name in names]
    identity = [c for c in (RAW, SCOPE) if c in names]  # carried to every table (tau2's trials)
    return list(dict.fromkeys([*wanted, *mapping, *identity]))


def _typed_projection(
    lazy: pl.LazyFrame,
    columns: list[str],
    contracts: Sequence[TableSpec],
    exprs: Mapping[str, pl.Expr],
    mapping: Mapping[str, str],
) -> list[pl.Expr]:
    """One expression per output column, cast to its contract type; wrong types refused."""
    specs = {c.name: c for contract in contracts for c in contract.columns}
    projection = []
    for name in columns:
        expr = exprs.get(name, pl.col(name))
        found = _result_type(lazy, name, expr, _origin(name, mapping))
        column = specs.get(name)
        if column is None or column.dtype is None:
            projection.append(expr.alias(name))
            continue
        target = canonical_dtype(found, column)
        if target is None:
            sql_type = _SQL_TYPES.get(column.kind, "VARCHAR")
            hint = (
                "compare it, e.g. `reward >= 1`"
                if column.kind == "bool"
                else f"cast it, e.g. `CAST(... AS {sql_type})`"
            )
            raise SchemaError(
                f"table: {_origin(name, mapping)} yields {found}; `{name}` must be "
                f"{column.kind}. Hint: {hint}."
            )
        projection.append(expr.cast(target).alias(name))
    return projection


def _exclusion_reason(lazy: pl.LazyFrame, exclude: Mapping[str, str]) -> tuple[pl.Expr, pl.Expr]:
    """Return each row's exclusion ``reason`` and ``detail`` (null: kept); first match wins."""
    reason: pl.Expr = pl.lit(None, pl.String)
    detail: pl.Expr = pl.lit(None, pl.String)
    for label, text in reversed(list(exclude.items())):
        if not str(label).strip():
            raise ParameterError("table: an exclusion has an empty reason; use REASON=EXPR.")
        expr = parse_expression(label, text, "exclusion")
        found = _result_type(lazy, "__x", expr, f"exclusion `{label}={text}`")
        if found not in (pl.Boolean, pl.Null):
            raise SchemaError(
                f"table: exclusion `{label}={text}` yields {found}; it must be a boolean "
                "condition (e.g. `status = 'error'`)."
            )
        hit = expr.fill_null(False)
        reason = pl.when(hit).then(pl.lit(str(label))).otherwise(reason)
        detail = pl.when(hit).then(pl.lit(text)).otherwise(detail)
    return reason, detail


def from_frame(
    frame: pl.LazyFrame,
    *,
    to: str,
    mapping: Mapping[str, str] | None = None,
    exclude: Mapping[str, str] | None = None,
    key: Sequence[str] = (),
    log: str | None = None,
) -> tuple[dict[str, pl.DataFrame], pl.DataFrame]:
    """Map a frame of log rows to the ``to`` tables and the ``excluded`` rows.

    Parameters
    ----------
    frame
        The log rows (lazy; only its schema is read before every check has passed).
    to
        ``"forks"``, ``"takeover"`` or ``"trials"``.
    mapping
        Our column -> polars SQL expression over the log's columns.
    exclude
        Reason -> boolean polars SQL expression; matching rows go to ``excluded``.
    key
        Extra key columns (e.g. ``model``, ``attempt``): part of the duplicate check.
    log
        A column of ``frame`` naming the file each row came from (for ``excluded``).

    Returns
    -------
    tuple
        The tables by name (sorted by their keys) and the ``excluded`` rows.
    """
    if to not in TARGETS:
        raise ParameterError(f"table: `to` is {to!r}; it must be one of {', '.join(TARGETS)}.")
    mapping = dict(mapping or {})
    exprs = {name: parse_expression(name, text) for name, text in mapping.items()}
    contracts = [_contract(t) for t in TARGETS[to]]
    try:
        schema = frame.collect_schema()
    except pl.exceptions.PolarsError as exc:
        raise SourceError(f"table: the logs cannot be read ({_first_line(exc)}).") from None
    names = (set(schema.names()) - {log}) | set(mapping)
    columns = _target_columns(contracts, names, mapping, to)
    columns = list(dict.fromkeys([*columns, *(k for k in key if k in names)]))
    absent = [k for k in key if k not in names]
    if absent:
        raise ParameterError(f"table: key column `{absent[0]}` is not in the logs or the map.")
    projection = _typed_projection(frame, columns, contracts, exprs, mapping)
    reason, detail = _exclusion_reason(frame, exclude or {})
    source = pl.col(log) if log else pl.lit(None, pl.String)
    try:
        rows = frame.select(
            *projection, reason.alias(_REASON), detail.alias("detail"), source.alias(_LOG)
        ).collect()
    except pl.exceptions.PolarsError as exc:
        raise InputError(
            f"{_only_log(frame, log)}table: mapping the logs failed: {_first_line(exc)}."
        ) from None
    rows, _ = _qualified(rows, columns)
    kept_rows = rows.filter(pl.col(_REASON).is_null())
    kept = kept_rows.drop(_REASON, "detail", _LOG)
    columns = list(dict.fromkeys([*columns, *(c for c in (RAW, SCOPE) if c in rows.columns)]))
    tables = {}
    for contract in contracts:
        present = [c for c in columns if c in kept.columns]
        try:
            tables[contract.name] = _table(kept, contract, present, key, to)
        except SchemaError as exc:
            raise _naming_the_log(exc, kept_rows, contract, present, key, to) from None
    return tables, _excluded(rows)


def _only_log(frame: pl.LazyFrame, log: str | None) -> str:
    """Return ``"`LOG`: "`` for the one log a frame's rows come from ("" for several, or none).

    With one log the failing rows are its own; with several, the column types are the logs'
    common supertype, so no single log can be blamed from the mapped frame.
    """
    if log is None:
        return ""
    try:
        logs = frame.select(pl.col(log).unique()).collect()[log].drop_nulls()
    except pl.exceptions.PolarsError:
        return ""
    return f"`{logs[0]}`: " if logs.len() == 1 else ""


def _naming_the_log(
    exc: SchemaError,
    kept_rows: pl.DataFrame,
    contract: TableSpec,
    columns: list[str],
    key: Sequence[str],
    to: str,
) -> SchemaError:
    """Return ``exc`` naming the log whose rows break the contract (the error path only).

    The contract checks run on the mapped rows of every log at once; the first log whose rows
    fail them on their own is the one named. Rows that fail only together (one key in two
    logs) name the logs they came from.
    """
    logs = sorted({str(v) for v in kept_rows[_LOG].drop_nulls()})
    if not logs:
        return exc
    for log in logs:
        rows = kept_rows.filter(pl.col(_LOG) == log).drop(_REASON, "detail", _LOG)
        try:
            _table(rows, contract, columns, key, to)
        except SchemaError as alone:
            return SchemaError(f"`{log}`: {alone}")
    names = [c for c in dict.fromkeys([*contract.key, *key]) if c in kept_rows.columns]
    if names:  # a key in two logs: the logs holding the repeated keys
        repeated = kept_rows.filter(pl.struct(names).is_duplicated())[_LOG].drop_nulls()
        logs = sorted({str(v) for v in repeated}) or logs
    shown = ", ".join(f"`{log}`" for log in logs[:3]) + (", ..." if len(logs) > 3 else "")
    return SchemaError(f"{exc} The rows come from {shown}.")


def _qualified(rows: pl.DataFrame, columns: list[str]) -> tuple[pl.DataFrame, Identity | None]:
    """Qualify ``task_id`` by a declared ``task_scope`` (not yet qualified: no ``raw_task_id``)."""
    if SCOPE not in columns or RAW in columns or "task_id" not in rows.columns:
        return rows, None
    rows = rows.with_columns(pl.col(SCOPE).cast(pl.String), pl.col("task_id").cast(pl.String))
    return qualify(rows, "scope", "table")


def _table(
    kept: pl.DataFrame, contract: TableSpec, columns: list[str], key: Sequence[str], to: str
) -> pl.DataFrame:
    """One target table: its columns (``states``: distinct rows), validated, sorted by key."""
    if to == "takeover" and contract.name == "states":
        table = kept.select([c.name for c in contract.columns if c.name in kept.columns]).unique()
        extra_key: Sequence[str] = ()
    else:
        states_only = {c.name for c in SPECS["states"].columns} - {"state_id"}
        skip = states_only if to == "takeover" else set()
        table = kept.select([c for c in columns if c not in skip])
        extra_key = [k for k in key if k in table.columns]
    checked = validate(table, contract, key=extra_key).collect()
    order = [*contract.key, *(k for k in extra_key if k not in contract.key)]
    return checked.sort(order, nulls_last=False)


def _excluded(rows: pl.DataFrame) -> pl.DataFrame:
    out = rows.filter(pl.col(_REASON).is_not_null())
    task = next((c for c in ("task_id", "state_id") if c in out.columns), None)
    task_expr = pl.col(task).cast(pl.String) if task else pl.lit(None, pl.String)
    return out.select(
        pl.col(_LOG).alias("log"),
        task_expr.alias("task_id"),
        pl.col(_REASON).alias("reason"),
        pl.col("detail"),
        *(c for c in (RAW, SCOPE) if c in out.columns),
    ).sort("log", "task_id", "reason", nulls_last=False)


def _files(logs: object) -> list[Path]:
    """Every log file: files and globs as given, directories searched for known suffixes."""
    entries = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs)  # type: ignore[call-overload]
    if not entries:
        raise SourceError("table: no logs given; give files, directories or globs.")
    files: list[Path] = []
    for entry in entries:
        path = Path(entry)
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if strip_compression(p).suffix.lower() in _SUFFIXES
            )
            if not found:
                raise SourceError(f"`{path}` holds no {', '.join(_SUFFIXES)} file.")
            files.extend(found)
        else:
            files.extend(io.expand_paths([entry]))
    return list(dict.fromkeys(files))


def _scan_log(path: Path, text: frozenset[str]) -> pl.LazyFrame:
    """Return one log file as a frame (JSON array, CSV keeping `text` columns text, io.scan).

    Compressed files (``.json.gz``, ``.csv.zst``...) read like plain ones; JSON goes through the
    one JSON reader (:mod:`recoverylab._json`) and the same row checks as NDJSON (a nested value
    where text belongs is an error naming the item).
    """
    suffix = strip_compression(path).suffix.lower()
    compressed = path.is_file() and compression_of_path(path) is not None
    if suffix == ".json":
        if compressed:
            head = read_decompressed(path)[:4096]
        else:
            with path.open("rb") as handle:
                head = handle.read(4096)
        if head.removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"["):
            return _json_array(path)
        return io.scan(path, format="ndjson")
    if suffix in (".csv", ".tsv") and path.is_file() and path.stat().st_size > 0:
        separator = "\t" if suffix == ".tsv" else ","
        data = read_decompressed(path) if compressed else None
        check_text_file(path, "csv", separator, data)
        overrides = {name: pl.String() for name in sorted(text | _contract_text())}
        try:
            frame = pl.scan_csv(
                path if data is None else data,
                separator=separator,
                infer_schema_length=None,
                schema_overrides=overrides,
            )
            frame.collect_schema()
        except pl.exceptions.PolarsError as exc:
            raise SourceError(f"`{path}` cannot be read as csv ({_first_line(exc)}).") from None
        return frame
    return io.scan(path)


def _json_array(path: Path) -> pl.LazyFrame:
    """Read a JSON array of row objects: checked by the NDJSON rules, item N as line N."""
    rows = load(path)
    if not isinstance(rows, list):  # a document that opens with "[" is an array or not JSON
        raise SourceError(f"`{path}` is not a JSON array of objects.")  # pragma: no cover
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise SourceError(f"`{path}` item {number} of the JSON array is not an object (a row).")
    return _templates.rows_frame(path, rows, "a JSON array")


def _contract_text() -> set[str]:
    return {c.name for t in (*SPECS.values(), TRIALS) for c in t.columns if c.kind == "str"}


def _text_sources(to: str, mapping: Mapping[str, str]) -> frozenset[str]:
    """Log columns that feed our text columns: read from CSV as text, so ``007`` stays ``007``."""
    if to not in TARGETS:
        return frozenset()
    kinds = {c.name: c.kind for t in TARGETS[to] for c in _contract(t).columns}
    roots: set[str] = set()
    for name, text in mapping.items():
        if kinds.get(name, "str") == "str":
            roots.update(parse_expression(name, text).meta.root_names())
    return frozenset(roots)


@dataclass(frozen=True)
class Logs:
    """Logs to :func:`read` with a shape beyond "a table per file".

    Attributes
    ----------
    paths
        Files, directories or globs (as :func:`read` takes them); with ``files``, the
        directories (roots) the template is relative to.
    files
        A path template (``{model}/{domain}/{task_id}/result.txt``; CLI ``--files``): the files
        under each root that match it are read, each ``{name}`` segment bound to a text column;
        a file holding one number is a row with ``value``; files that do not match are listed in
        the read report (``unmatched``). Rules: :mod:`recoverylab.adapters._templates`.
    unnest_keys
        With ``files``: each matched JSON file is an object keyed by ids, one row per key (the
        key in this column; ``--unnest-keys``).
    explode, position
        A list column split into one row per element, and the column for its index from 0
        (``--explode resps --position epoch``: lm-evaluation-harness's repeated responses).
    context
        With ``files``: ``FILE_TEMPLATE:KEY.PATH`` (``--context``), e.g.
        ``{model}/results_*.json:configs.{task}.metadata``: the value each file's context file
        holds there joins its rows as the column ``context`` (``--map method=context.arm``).

    Examples
    --------
    >>> Logs("results/", files="{model}/{domain}/{task_id}/result.txt").files
    '{model}/{domain}/{task_id}/result.txt'
    """

    paths: object
    files: str | None = None
    unnest_keys: str | None = None
    explode: str | None = None
    position: str | None = None
    context: str | None = None

    def roots(self) -> list[str | os.PathLike[str]]:
        """Return the root directories as a list (a single path becomes a list of one)."""
        paths = self.paths
        if isinstance(paths, (str, os.PathLike)):
            return [paths]
        return list(paths)  # type: ignore[call-overload]


def read(
    logs: object,
    *,
    to: str = "forks",
    mapping: Mapping[str, str] | None = None,
    exclude: Mapping[str, str] | None = None,
    key: Sequence[str] = (),
) -> Imported:
    """Read JSON/JSONL/CSV/parquet run logs into our tables through polars SQL expressions.

    Parameters
    ----------
    logs
        A file, directory or glob, or a list of them. ``.json`` is a JSON array or JSON lines.
        Or :class:`Logs`: a per-run directory tree read by a path template, and/or a list of
        repeats split into rows.
    to, mapping, exclude, key
        As in :func:`from_frame`.

    Returns
    -------
    Imported
        The tables, ``excluded`` (log, task_id, reason, detail) and the read report.

    Raises
    ------
    SchemaError
        A required column with neither a column nor a map, a map naming a missing field or
        yielding the wrong type, a null key, a duplicate key (one line, nothing returned).
    ParameterError
        An expression polars SQL cannot parse, an unknown target.
    SourceError
        A log that cannot be read.

    Examples
    --------
    >>> import polars as pl, tempfile, pathlib
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "runs.jsonl"
    >>> pl.DataFrame({"task": ["a", "b"], "reward": [1.0, 0.0], "try": [0, 0]}).write_ndjson(log)
    >>> out = read(log, to="trials", mapping={"task_id": "task", "attempt": 'CAST("try" AS BIGINT)',
    ...                                        "success": "reward >= 1"})
    >>> out.tables["trials"]["success"].to_list()
    [True, False]
    """
    text = _text_sources(to, mapping or {})
    spec = logs if isinstance(logs, Logs) else Logs(logs)
    unmatched: tuple[Path, ...] = ()
    contexts: tuple[Path, ...] = ()
    if spec.files is not None:
        frame, read_files, unmatched, contexts = _templates.read_tree(
            spec.roots(),
            spec.files,
            unnest_keys=spec.unnest_keys,
            context=spec.context,
            scan_table=lambda p: _scan_log(p, text),
        )
        paths = list(read_files)
    else:
        if spec.unnest_keys is not None or spec.context is not None:
            raise ParameterError(
                "table: `unnest_keys` and `context` apply to a path template (`files`)."
            )
        paths = _files(spec.paths)
        frames = [_scan_log(p, text).with_columns(pl.lit(str(p)).alias(_LOG)) for p in paths]
        try:
            frame = pl.concat(frames, how="diagonal_relaxed")
        except pl.exceptions.PolarsError as exc:
            raise SourceError(
                f"table: the logs do not share a schema ({_first_line(exc)})."
            ) from None
    if spec.explode is not None:
        frame = _templates.explode(frame, spec.explode, spec.position)
    elif spec.position is not None:
        raise ParameterError("table: `position` numbers the elements of an `explode` column.")
    tables, excluded = from_frame(frame, to=to, mapping=mapping, exclude=exclude, key=key, log=_LOG)
    used = tuple(str(p) for p in paths)
    report: ReadReport = ReadReport(
        format="table",
        files_read=(*used, *(str(p) for p in contexts)),
        used=used,
        unit="rows",
        hint=f"pair by {', '.join(key)}" if key and to == "forks" else "",
    ).with_identity(identity_of([*tables.values(), excluded], "scope"))
    report = report.with_unmatched(tuple(str(p) for p in unmatched))
    report = report.with_tables(tables, excluded)
    return Imported(tables, excluded, report)
