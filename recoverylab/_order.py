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

import polars as pl

__all__ = ["stable_order"]


def stable_order(frame: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame | pl.LazyFrame:
    """Return ``frame`` sorted by every column, left to right, nulls last (lazy stays lazy).

    Examples
    --------
    >>> import polars as pl
    >>> stable_order(pl.DataFrame({"k": ["b", None, "a"], "n": [2, 3, 1]}))["k"].to_list()
    ['a', 'b', None]
    """
    schema = frame.collect_schema()
    if not schema:
        return frame
    keys = [
        pl.col(name).cast(pl.String) if dtype == pl.Categorical else pl.col(name)
        for name, dtype in schema.items()
    ]
    return frame.sort(keys, nulls_last=True, maintain_order=True)
