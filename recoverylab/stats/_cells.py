"""From a frame of per-cluster partials to per-cell type tables (the frame-facing entry).

Every frame-facing statistic (:func:`~recoverylab.stats.cluster_bootstrap`,
:func:`~recoverylab.stats.sign_flip_cells`, :func:`~recoverylab.stats.paired_effect_cells`)
checks the roles and types of its columns here, groups the partials to distinct (cell, values)
types with polars (only the type table is collected) and splits them by cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, SchemaError, format_keys

_N = "__recoverylab_n"

_BAD = "__recoverylab_bad"


def _column_names(name: str, names: object, *, nonempty: bool = False) -> list[str]:
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        raise ParameterError(f"parameter `{name}` is {names!r}; it must be a list of column names.")
    if nonempty and not names:
        raise ParameterError(f"parameter `{name}` is empty; name at least one column.")
    if len(set(names)) != len(names):
        raise ParameterError(f"parameter `{name}` names a column twice: {list(names)}.")
    return list(names)


def _cell_types(
    partials: object,
    cells: list[str],
    values: list[str],
    count: str | None,
    reserved: Sequence[str],
    role: str = "values",
) -> tuple[pl.DataFrame, list[tuple[tuple[Any, ...], np.ndarray, np.ndarray]]]:
    """Group ``partials`` to distinct (cell, values) types and split them by cell.

    Returns the cell keys (one row per cell, sorted, original dtypes) and, per cell, the key tuple,
    the (T, V) float64 value matrix and the (T,) int64 counts. Only the type table is collected.
    """
    frame = _checked_partials(partials, cells, values, count, reserved, role)
    if count is None:
        aggregates = [pl.len().cast(pl.Int64).alias(_N)]
    else:
        weight = pl.col(count)
        aggregates = [
            weight.sum().cast(pl.Int64).alias(_N),
            (weight.is_null() | (weight < 1)).sum().alias(_BAD),
        ]
    # Only the type table is materialised; the streaming engine keeps big inputs out of memory.
    types = frame.group_by([*cells, *values]).agg(aggregates).collect(engine="streaming")
    _check_type_table(types, cells, values, count)
    types = types.sort([*cells, *values], nulls_last=False)
    if types.height == 0:
        return types.select(cells), []
    if cells:
        run = types.select(pl.struct(cells).rle_id()).to_series().to_numpy()
        starts = np.flatnonzero(np.diff(run, prepend=-1))
        keys = types.select(cells)[starts]
        key_rows = keys.rows()
    else:  # a frame without columns has no rows: the one cell's key row cannot be gathered
        starts, keys, key_rows = np.array([0]), pl.DataFrame(), [()]
    matrix = types.select(pl.col(v).cast(pl.Float64) for v in values).to_numpy()
    cuts = starts[1:]
    parts = zip(np.split(matrix, cuts), np.split(types[_N].to_numpy(), cuts), strict=True)
    return keys, [(key, v, c) for key, (v, c) in zip(key_rows, parts, strict=True)]


def _checked_partials(
    partials: object,
    cells: list[str],
    values: list[str],
    count: str | None,
    reserved: Sequence[str],
    role: str,
) -> pl.LazyFrame:
    """Return ``partials`` as a LazyFrame after checking the roles and types of its columns."""
    if isinstance(partials, pl.DataFrame):
        partials = partials.lazy()
    if not isinstance(partials, pl.LazyFrame):
        raise ParameterError(
            f"parameter `partials` is a {type(partials).__name__}; it must be a polars DataFrame "
            "or LazyFrame. Hint: recoverylab.io.scan() reads any table source as a LazyFrame."
        )
    schema = partials.collect_schema()
    named = [("cells", c) for c in cells] + [(role, v) for v in values]
    if count is not None:
        if not isinstance(count, str):
            raise ParameterError(f"parameter `count` is {count!r}; it must be a column name.")
        named.append(("count", count))
    for parameter, column in named:
        if column not in schema:
            available = ", ".join(schema.names())
            raise ParameterError(
                f"partials: parameter `{parameter}` names column `{column}`, which is not in the "
                f"table (columns: {available})."
            )
    used = [column for _, column in named]
    if len(set(used)) != len(used):
        raise ParameterError(
            f"partials: a column is named in more than one of `cells`, `{role}` and `count` "
            f"({', '.join(used)}); each column has one role."
        )
    clash = [c for c in cells if c in reserved]
    if clash:
        raise ParameterError(
            f"partials: cell column `{clash[0]}` has the name of a result column "
            f"({', '.join(reserved)}). Hint: rename it first."
        )
    for column in values:
        dtype = schema[column]
        if not (dtype.is_numeric() or dtype == pl.Boolean):
            raise SchemaError(
                f"partials: column `{column}` has type {dtype}; value columns must be numeric."
            )
    if count is not None and not schema[count].is_integer():
        raise SchemaError(
            f"partials: column `{count}` has type {schema[count]}; a count column must hold "
            "integers."
        )
    return partials


def _check_type_table(
    types: pl.DataFrame, cells: list[str], values: list[str], count: str | None
) -> None:
    """Raise SchemaError, with a few offending cell keys, for missing values or bad counts."""

    def offending(mask: pl.Expr) -> tuple[int, str]:
        hits = types.filter(mask)
        clusters = int(hits[_N].sum())
        if not cells:
            return clusters, "the whole table"
        keys = hits.select(cells).unique().sort(cells, nulls_last=False)
        return clusters, "cell " + format_keys(keys.rows(), total=keys.height)

    for column in values:
        missing = pl.col(column).is_null()
        if types.schema[column].is_float():
            missing = missing | ~pl.col(column).is_finite()
        if types.select(missing.any()).item():
            clusters, where = offending(missing)
            raise SchemaError(
                f"partials: column `{column}` has {clusters} null or non-finite values ({where}); "
                "partial sums must be finite numbers."
            )
    if count is not None and types.select((pl.col(_BAD) > 0).any()).item():
        bad_rows = int(types[_BAD].sum())
        _, where = offending(pl.col(_BAD) > 0)
        raise SchemaError(
            f"partials: column `{count}` has {bad_rows} values that are null or below 1 ({where});"
            " multiplicities must be positive integers."
        )
