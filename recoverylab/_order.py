"""The one row order of every written table, so outputs are byte-identical (ARCHITECTURE §1.6).

polars does not promise an order for the rows of a join, a group-by or a scan of several files:
the same result computed twice, with another thread count, from shuffled input rows or from the
same rows split into several files comes out in different orders, so its file has different
bytes. Every writer (:func:`recoverylab.io.write_to`, which ``write_parquet``, ``write_table`` and
every command's ``--out`` go through) therefore writes rows sorted by all of the table's columns,
left to right. Result tables put their keys first (``task_id, condition, delay, method`` ...,
then any ``by`` columns), so this is the order of the keys; later columns only order rows whose
keys are equal. Nulls sort last, so an "overall" row (null key) follows the rows it sums.
Categorical columns sort by their text (their codes depend on the order strings were seen);
enums by their declared order. Equal rows are identical, so their order cannot change a byte.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

__all__ = ["stable_order"]


def stable_order(
    frame: pl.DataFrame | pl.LazyFrame, *, unique_key: Sequence[str] = ()
) -> pl.DataFrame | pl.LazyFrame:
    """Return ``frame`` sorted by every column, left to right, nulls last (lazy stays lazy).

    ``unique_key``: leading columns that the caller guarantees no two rows share. The order by
    every column is then their order, and only they are sorted by (a sort by every column
    encodes each row's every value, lists included: twice the time and 0.8 GB more at three
    million scored episodes). Columns that do not lead the table are not trusted: every column
    is sorted by.

    Examples
    --------
    >>> import polars as pl
    >>> stable_order(pl.DataFrame({"k": ["b", None, "a"], "n": [2, 3, 1]}))["k"].to_list()
    ['a', 'b', None]
    """
    schema = frame.collect_schema()
    if not schema:
        return frame
    names = list(schema)
    if unique_key and names[: len(unique_key)] == list(unique_key):
        names = names[: len(unique_key)]
    keys = [
        pl.col(name).cast(pl.String) if schema[name] == pl.Categorical else pl.col(name)
        for name in names
    ]
    return frame.sort(keys, nulls_last=True, maintain_order=True)
