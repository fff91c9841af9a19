"""Declarative table contracts (ARCHITECTURE §3) and their validation.

Every input table is described once by a :class:`TableSpec` (columns, primary key, row rules),
declared in :mod:`recoverylab._contracts` and re-exported here. :func:`validate` checks the data
with polars queries: one aggregation for all counts, a second small query only when something is
wrong, to name up to five offending keys. A required column that some input files lack is named
with the file (the reader records which columns each file holds).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

import polars as pl
from polars._typing import PolarsDataType

from recoverylab._contracts import (  # the label sets stay importable from here, as before
    MAX_SAFE_INTEGER,
    REGIMES,  # noqa: F401
    RELATIONS,  # noqa: F401
    SPECS,
    VERSION_CLAIMS,  # noqa: F401
    Column,
    Rule,
    TableSpec,
)
from recoverylab._diagnose import file_columns, files_of, reads_inputs
from recoverylab._errors import (
    ParameterError,
    RecoveryLabError,
    SchemaError,
    SourceError,
    format_keys,
)
from recoverylab.io import scan

__all__ = [
    "SPECS",
    "Column",
    "RecoveryLabError",
    "Rule",
    "SchemaError",
    "TableSpec",
    "canonical_dtype",
    "column_names",
    "shard_scope",
    "spec",
    "validate",
]

#: The column in which the adapters record the scope of each task id (its domain, dataset...):
#: a table that carries it must give each ``task_id`` one scope (ARCHITECTURE §8).
TASK_SCOPE = "task_scope"

#: True inside :func:`shard_scope`: the table being validated is one shard of a larger table.
_SHARD: ContextVar[bool] = ContextVar("recoverylab_shard_scope", default=False)


@contextmanager
def shard_scope() -> Iterator[None]:
    """Validate tables as shards of larger tables: an empty shard is not an error.

    A distributed run validates each partition's part of a table; a partition may hold no rows
    of one table (a case with no episodes there), while "the table is empty" is a property of
    the whole table, which the caller checks from the total row count. Every other check is
    unchanged. The setting is a context variable, so other threads are not affected.

    Examples
    --------
    >>> import polars as pl
    >>> empty = pl.DataFrame(schema={"workflow_id": pl.String, "mutation_id": pl.String,
    ...                              "executed": pl.Boolean, "caught": pl.Boolean})
    >>> with shard_scope():
    ...     validate(empty, "mutations").collect().height
    0
    """
    token = _SHARD.set(True)
    try:
        yield
    finally:
        _SHARD.reset(token)


def column_names(name: str, value: object) -> tuple[str, ...]:
    """Normalise a column-list parameter (``by``, ``pair_by``...): the one place that does.

    ``None`` is no column, a string is one column, a sequence of strings is several.

    Raises
    ------
    ParameterError
        For anything else, or a column named twice.

    Examples
    --------
    >>> column_names("by", "model"), column_names("by", None), column_names("by", ["a", "b"])
    (('model',), (), ('a', 'b'))
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise ParameterError(
            f"parameter `{name}` is {value!r}; it must be a column name or a list of them."
        )
    if len(set(value)) != len(value):
        raise ParameterError(f"parameter `{name}` names a column twice: {list(value)}.")
    return tuple(value)


def spec(table: str | TableSpec) -> TableSpec:
    """Return the contract of ``table`` (a name of :data:`SPECS` or a spec itself)."""
    if isinstance(table, TableSpec):
        return table
    if table not in SPECS:
        raise SchemaError(f"unknown table {table!r}; known tables: {', '.join(SPECS)}.")
    return SPECS[table]


def canonical_dtype(found: PolarsDataType, column: Column) -> pl.DataType | None:
    """Return the type ``found`` is safely cast to for ``column``, or ``None`` if it is wrong.

    Safe casts widen without losing information: any integer to Int64, Float32 and integers to
    Float64, large/view strings, categoricals and enums to String, and an all-null column to
    anything. Integer identifiers become strings.
    """
    target = column.dtype
    if target is None or found in (target, pl.Null):
        return target
    base = found.base_type()
    integer = base.is_integer()
    widened = (
        (target == pl.Int64 and integer)
        or (target == pl.Float64 and (integer or base == pl.Float32))
        or (target == pl.String and base in (pl.Categorical, pl.Enum))
        or (target == pl.String and column.identifier and integer)
    )
    return target if widened else None


@reads_inputs
def validate(
    frame: pl.LazyFrame | pl.DataFrame | object,
    table: str | TableSpec,
    *,
    key: Sequence[str] = (),
    checks: Literal["full", "schema"] = "full",
    integer_ids: bool = False,
) -> pl.LazyFrame:
    """Check a table against its contract and return it lazily with canonical column types.

    Parameters
    ----------
    frame
        The table: a polars LazyFrame/DataFrame, or any source :func:`recoverylab.io.scan` reads.
    table
        The contract: a name of :data:`SPECS` (``"forks"``, ``"cases"``, ...) or a TableSpec.
    key
        Extra key columns appended to the contract's primary key (``pair_by`` keys such as
        ``model`` or ``seed``): they must be present and take part in the duplicate check.
    checks
        ``"full"`` runs the data checks (nulls, labels, row rules, duplicate keys, empty table) as
        one polars aggregation; ``"schema"`` only checks columns and types (for trusted inputs).
    integer_ids
        Leave integer identifier columns integer (Int64) instead of casting them to String:
        for a caller that only groups by them and casts its small per-cluster result (casting
        every row before a group-by costs time and memory).

    Returns
    -------
    pl.LazyFrame
        The same rows and columns; contract columns cast to their canonical types
        (e.g. Int32 -> Int64, Categorical -> String). Extra columns are carried unchanged.

    Raises
    ------
    SchemaError
        On a missing column, a wrong type, a null where none is allowed, an unknown label, a
        broken row rule, a duplicate key or an empty table; or, in a table that carries
        ``task_scope``, a ``task_id`` under two scopes (in either mode of ``checks``: two tasks
        merged into one cluster are wrong whatever else is trusted). The message is one line.

    Examples
    --------
    >>> import polars as pl
    >>> lf = validate(pl.DataFrame({"workflow_id": ["w1"], "mutation_id": ["m1"],
    ...                             "executed": [True], "caught": [False]}), "mutations")
    >>> lf.collect().height
    1
    """
    contract = spec(table)
    lazy = scan(frame)
    full_key = (*contract.key, *(k for k in key if k not in contract.key))
    lazy = _check_schema(lazy, contract, full_key, integer_ids)
    _check_task_scopes(lazy, contract)
    if checks == "full":
        _check_data(lazy, contract, full_key)
    elif checks != "schema":
        raise SchemaError(f"parameter `checks` is {checks!r}; it must be 'full' or 'schema'.")
    return lazy


def _check_schema(
    lazy: pl.LazyFrame, contract: TableSpec, key: Sequence[str], integer_ids: bool = False
) -> pl.LazyFrame:
    found = lazy.collect_schema()
    missing = [c for c in contract.required if c not in found]
    missing += [k for k in key if k not in found and k not in contract]
    if missing:
        noun = "column" if len(missing) == 1 else "columns"
        names = ", ".join(f"`{m}`" for m in missing)
        have = ", ".join(found.names()) or "none"
        raise SchemaError(
            f"{contract.name}: missing required {noun} {names}; found columns: {have}."
        )
    _check_files_hold(lazy, contract, key)
    _check_flat_keys(lazy, found, contract, key)
    casts = []
    for column in contract.columns:
        if column.name not in found or column.dtype is None:
            continue
        dtype = found[column.name]
        target = canonical_dtype(dtype, column)
        if integer_ids and column.identifier and target == pl.String and dtype.is_integer():
            target = pl.Int64()
        if target is None:
            raise SchemaError(
                f"{contract.name}: column `{column.name}` has type {dtype}; it must be "
                f"{column.dtype}{_cast_hint(dtype, column)}"
            )
        if target != dtype:
            casts.append(pl.col(column.name).cast(target))
    return lazy.with_columns(casts) if casts else lazy


def _check_flat_keys(
    lazy: pl.LazyFrame, found: pl.Schema, contract: TableSpec, key: Sequence[str]
) -> None:
    """Refuse a nested (struct or list) column where a key or label belongs (issue 39).

    A key column (the contract's, or an extra ``pair_by`` key) or a text label column holding
    objects or arrays cannot identify anything; it names the first input file whose own
    columns hold it nested (text files are refused earlier, at the line, by the reader).
    """
    labels = [c.name for c in contract.columns if c.kind == "str"]
    for name in dict.fromkeys([*key, *labels]):
        if name not in found or not found[name].is_nested():
            continue
        where = ""
        for path, fmt in files_of(lazy):
            if fmt == "parquet" and pl.read_parquet_schema(path).get(name, pl.Null).is_nested():
                where = f" (in `{path}`)"
                break
        raise SchemaError(
            f"{contract.name}: column `{name}` holds nested values ({found[name]}){where} where "
            "a key or label belongs; it must hold one text or number per row. Hint: move the "
            "nested value to a column of its own, or flatten it."
        )


def _check_task_scopes(lazy: pl.LazyFrame, contract: TableSpec) -> None:
    """Refuse a ``task_id`` recorded under two scopes (two tasks that would be one cluster).

    Only tables that carry :data:`TASK_SCOPE` are checked (the adapters write it beside the
    qualified id); a null scope counts as a scope of its own.
    """
    schema = lazy.collect_schema()
    if TASK_SCOPE not in schema or "task_id" not in schema or "task_id" not in contract:
        return
    scopes = pl.col(TASK_SCOPE).cast(pl.String)
    clash = (
        lazy.filter(pl.col("task_id").is_not_null())  # a null id: the null check names it
        .group_by("task_id")
        .agg(scopes.n_unique().alias("__n"), scopes.unique().sort().head(2).alias("__scopes"))
        .filter(pl.col("__n") > 1)
        .sort("task_id")
        .collect()
    )
    if clash.height:
        task, shown = clash["task_id"][0], clash["__scopes"][0].to_list()
        named = " and ".join("null" if v is None else f"`{v}`" for v in shown)
        more = f" ({clash.height} tasks in all)" if clash.height > 1 else ""
        raise SchemaError(
            f"{contract.name}: task `{task}` has {clash['__n'][0]} scopes in `{TASK_SCOPE}` "
            f"({named}){more}; a task id must name one task. Hint: qualify the ids by their "
            f"scope (e.g. `{shown[0]}/{task}`), as `recoverylab import` does without --raw-ids."
        )


def _check_files_hold(lazy: pl.LazyFrame, contract: TableSpec, key: Sequence[str]) -> None:
    """Name the input file that lacks a required column that other input files hold.

    Files of one source are unified by name, so a file without a column would give its rows
    nulls there: right for an optional column, a silent loss for a required one.
    """
    required = [*contract.required, *(k for k in key if k not in contract.required)]
    for path, columns in file_columns(lazy):
        absent = [c for c in required if c not in columns]
        if absent:
            names = ", ".join(f"`{c}`" for c in absent)
            noun = "column" if len(absent) == 1 else "columns"
            raise SourceError(
                f"{contract.name}: `{path}` lacks {noun} {names} (required), which other input "
                "files hold; every file of the table must hold every required column."
            )


def _cast_hint(found: pl.DataType, column: Column) -> str:
    if column.kind == "bool" and (found == pl.String or found.is_integer()):
        return ". Hint: store true/false values, e.g. `pl.col(...) == 'true'` or `!= 0`."
    if column.kind in ("int", "float") and found == pl.String:
        return ". Hint: the values were read as text; cast them to numbers."
    return "."


def _problem_exprs(contract: TableSpec, schema: pl.Schema) -> dict[str, tuple[pl.Expr, str, str]]:
    """Name -> (row violation expression, what is wrong, what is allowed), duplicates aside."""
    problems: dict[str, tuple[pl.Expr, str, str]] = {}
    for column in contract.columns:
        if column.name not in schema:
            continue
        col = pl.col(column.name)
        if not column.nullable:
            requirement = (
                "it must be true or false" if column.kind == "bool" else "it may not be null"
            )
            problems[f"null:{column.name}"] = (
                col.is_null(),
                f"column `{column.name}` has {{n}} null{{s}}",
                requirement,
            )
        if column.kind == "int":
            # Beyond ±(2^53 - 1) an integer cannot round-trip through float64 (pandas, JSON),
            # and sums such as `perturb_action + delay` could overflow Int64 into a wrong cell.
            problems[f"range:{column.name}"] = (
                (col > MAX_SAFE_INTEGER) | (col < -MAX_SAFE_INTEGER),
                f"column `{column.name}` has {{n}} value{{s}} beyond ±(2^53 - 1)",
                "integers must lie within ±9007199254740991",
            )
        if column.labels is not None:
            problems[f"label:{column.name}"] = (
                col.is_not_null() & ~col.is_in(list(column.labels)),
                f"column `{column.name}` has {{n}} row{{s}} with unknown labels {{labels}}",
                "allowed: " + ", ".join(column.labels),
            )
    for rule in contract.rules:
        if all(name in schema for name in rule.violation.meta.root_names()):
            problems[f"rule:{rule.name}"] = (
                rule.violation.fill_null(False),
                rule.what,
                rule.requirement,
            )
    return problems


def data_checks(contract: TableSpec, schema: pl.Schema) -> dict[str, pl.Expr]:
    """Return the row violation expression of each null, label and rule check, by check name.

    A query that already reads the table can sum them and hand the totals to
    :func:`raise_data_problems` instead of reading it again (duplicates and emptiness aside).
    """
    return {name: expr for name, (expr, _, _) in _problem_exprs(contract, schema).items()}


def raise_data_problems(
    lazy: pl.LazyFrame,
    contract: TableSpec,
    key: Sequence[str],
    totals: Mapping[str, int],
    rows: int,
) -> None:
    """Raise the error :func:`validate` raises, from violation counts per :func:`data_checks` name.

    ``rows`` counts the table's rows; ``key`` is the full key. ``lazy`` is read again only to name
    the offending keys of the first failed check.
    """
    if rows == 0:
        if contract.allow_empty or _SHARD.get():
            return
        raise SchemaError(f"{contract.name}: the table is empty; it needs at least one row.")
    for name, (expr, what, requirement) in _problem_exprs(contract, lazy.collect_schema()).items():
        n = int(totals.get(name, 0))
        if not n:
            continue
        shown_key = [k for k in key if k in lazy.collect_schema()]
        offending = lazy.filter(expr)
        sample = offending.select(shown_key).unique().sort(shown_key, nulls_last=True)
        keys = format_keys(sample.head(5).collect().rows(), n)
        labels = ""
        if name.startswith("label:"):
            column = name.split(":", 1)[1]
            bad = offending.select(pl.col(column).unique().sort()).head(5).collect()
            labels = ", ".join(repr(v) for v in bad[column].to_list())
        text = what.format(n=n, s="" if n == 1 else "s", labels=labels)
        raise SchemaError(f"{contract.name}: {text} ({'/'.join(shown_key)} {keys}); {requirement}.")


def _check_data(lazy: pl.LazyFrame, contract: TableSpec, key: Sequence[str]) -> None:
    checks = data_checks(contract, lazy.collect_schema())
    counts = lazy.select(
        pl.len().alias("__rows"),
        *(expr.sum().alias(name) for name, expr in checks.items()),
    )
    sorted_hashes, repeats = _sorted_hashes(lazy, key)
    totals, repeated = pl.collect_all([counts, repeats], engine="streaming")
    raise_data_problems(
        lazy,
        contract,
        key,
        {name: int(totals[name][0]) for name in checks},
        int(totals["__rows"][0]),
    )
    if repeated["__repeats"][0]:
        _check_duplicates(lazy, contract, key, sorted_hashes)


def check_unique_keys(lazy: pl.LazyFrame, contract: TableSpec, key: Sequence[str]) -> None:
    """Raise :class:`SchemaError` if a key appears twice (for callers of :func:`data_checks`)."""
    sorted_hashes, repeats = _sorted_hashes(lazy, key)
    if repeats.collect(engine="streaming")["__repeats"][0]:
        _check_duplicates(lazy, contract, key, sorted_hashes)


def _sorted_hashes(lazy: pl.LazyFrame, key: Sequence[str]) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Return the sorted 64-bit key hashes and the count of equal neighbours.

    Streams in 0.9 GB where a group-by over the key takes 8 GB (50M forks rows); collisions are
    ruled out by :func:`_check_duplicates`.
    """
    sorted_hashes = lazy.select(pl.struct(list(key)).hash().alias("__hash")).sort("__hash")
    repeats = sorted_hashes.select(
        (pl.col("__hash") == pl.col("__hash").shift(1)).sum().alias("__repeats")
    )
    return sorted_hashes, repeats


def _check_duplicates(
    lazy: pl.LazyFrame, contract: TableSpec, key: Sequence[str], sorted_hashes: pl.LazyFrame
) -> None:
    """Raise on duplicate keys among the rows whose key hash repeats (the exact check)."""
    candidates = sorted_hashes.filter(pl.col("__hash") == pl.col("__hash").shift(1)).unique()
    raise_duplicate_keys(
        lazy.join(candidates, left_on=pl.struct(list(key)).hash(), right_on="__hash", how="semi"),
        contract,
        key,
    )


def raise_duplicate_keys(lazy: pl.LazyFrame, contract: TableSpec, key: Sequence[str]) -> None:
    """Raise :func:`validate`'s error if a key appears twice in ``lazy`` (exact check).

    ``lazy`` may be the whole table or only the rows a cheaper test flagged.
    """
    duplicates = (
        lazy.group_by(list(key))
        .agg(pl.len().alias("__copies"))
        .filter(pl.col("__copies") > 1)
        .select(list(key))
        .sort(list(key), nulls_last=True)
        .collect()
    )
    if duplicates.height:
        keys = format_keys(duplicates.head(5).rows(), duplicates.height)
        noun = "key appears" if duplicates.height == 1 else "keys appear"
        raise SchemaError(
            f"{contract.name}: {duplicates.height} {noun} more than once "
            f"({'/'.join(key)} {keys}); each ({', '.join(key)}) must be unique."
        )
