"""What an analyst would write without recoverylab: the CIR cell counts in DuckDB and pandas.

Both implement the pairing of ARCHITECTURE §3.1 for the benchmark's forks (shared ``none`` rows,
no ``pair_by``): every recovery row joins its episode's ``none`` row; a row without one is
``unpaired``, a row at or after the end of the no-recovery run is an input error
(``after_end``), a row whose ``prefix_hash`` differs is ``prefix_mismatch``; a task that ended
before a point of the design grid (the distinct condition/method/delay of the recovery rows) is
carried forward with y1 = y0. Rows are counted per (condition, delay, method).

Two variants each:

* ``counts``: the cell counts. With unique branch keys a task has at most one pair per cell, so
  these counts are also the per-task type histogram: the same information as recoverylab's
  partials.
* ``per_task``: the per-task partials written out literally -- group by (cell, task), then count
  the distinct (d = sum of y1 - y0, n = pairs) types -- for an analyst who does not rely on the
  keys being unique. The intermediate has one row per (cell, task): 48M rows at 1M tasks.

No validation is done here (recoverylab also checks nulls, rules and duplicate keys).
"""

from __future__ import annotations

from pathlib import Path

COUNT_COLUMNS = (
    "n",
    "rescue",
    "harm",
    "kept",
    "unchanged",
    "carried_forward",
    "unpaired",
    "prefix_mismatch",
    "after_end",
)
CELLS = ("condition", "delay", "method")
NEEDED = (
    "task_id",
    "condition",
    "method",
    "delay",
    "success",
    "prefix_hash",
    "perturb_action",
    "end_action",
)

# One CTE chain: the recovery rows' pairs and exclusions, plus the carried-forward points.
# `NOT MATERIALIZED` keeps DuckDB from buffering the scan that two CTEs read (50M rows).
_BRANCHES = """
WITH f AS NOT MATERIALIZED (
    SELECT task_id, condition, method, delay, success, prefix_hash, perturb_action, end_action
    FROM read_parquet({files})
),
none AS (
    SELECT task_id, condition, success AS y0, prefix_hash AS h0,
           perturb_action AS pa, end_action AS ea
    FROM f WHERE method = 'none' AND delay IS NULL
),
rec AS (
    SELECT task_id, condition, method, delay, success AS y1, prefix_hash AS h1
    FROM f WHERE method <> 'none'
),
grid AS (SELECT DISTINCT condition, method, delay FROM rec),
branches AS (
    SELECT r.task_id, r.condition, r.delay, r.method, n.y0, r.y1, FALSE AS carried,
           CASE WHEN n.task_id IS NULL THEN 'unpaired'
                WHEN n.pa + r.delay >= n.ea THEN 'after_end'
                WHEN r.h1 <> n.h0 THEN 'prefix_mismatch' END AS reason
    FROM rec r LEFT JOIN none n ON r.task_id = n.task_id AND r.condition = n.condition
    UNION ALL
    SELECT n.task_id, g.condition, g.delay, g.method, n.y0, n.y0 AS y1, TRUE AS carried,
           NULL AS reason
    FROM (SELECT * FROM none WHERE pa + (SELECT max(delay) FROM grid) >= ea) n
    JOIN grid g ON n.condition = g.condition
    WHERE n.pa + g.delay >= n.ea
)
"""

DUCKDB_COUNTS = (
    _BRANCHES
    + """
SELECT condition, delay, method,
    count(*) FILTER (WHERE reason IS NULL) AS n,
    count(*) FILTER (WHERE reason IS NULL AND NOT y0 AND y1) AS rescue,
    count(*) FILTER (WHERE reason IS NULL AND y0 AND NOT y1) AS harm,
    count(*) FILTER (WHERE reason IS NULL AND y0 AND y1) AS kept,
    count(*) FILTER (WHERE reason IS NULL AND NOT y0 AND NOT y1) AS unchanged,
    count(*) FILTER (WHERE reason IS NULL AND carried) AS carried_forward,
    count(*) FILTER (WHERE reason = 'unpaired') AS unpaired,
    count(*) FILTER (WHERE reason = 'prefix_mismatch') AS prefix_mismatch,
    count(*) FILTER (WHERE reason = 'after_end') AS after_end
FROM branches
GROUP BY condition, delay, method
"""
)

DUCKDB_PER_TASK = (
    _BRANCHES
    + """,
per_task AS (
    SELECT condition, delay, method, task_id,
           sum(CASE WHEN reason IS NULL THEN y1::INT - y0::INT ELSE 0 END) AS d,
           count(*) FILTER (WHERE reason IS NULL) AS n
    FROM branches
    GROUP BY condition, delay, method, task_id
)
SELECT condition, delay, method, d, n, count(*) AS count
FROM per_task WHERE n > 0
GROUP BY condition, delay, method, d, n
"""
)


def _file_list(files: list[Path]) -> str:
    return "[" + ", ".join(f"'{f}'" for f in files) + "]"


def duckdb_query(files: list[Path], per_task: bool = False) -> object:
    """Run the DuckDB counts (or per-task types) query; return a polars DataFrame."""
    import duckdb

    sql = (DUCKDB_PER_TASK if per_task else DUCKDB_COUNTS).format(files=_file_list(files))
    with duckdb.connect() as con:
        return con.sql(sql).pl()


def duckdb_scan(files: list[Path]) -> object:
    """The DuckDB bare scan: the needed columns with a trivial aggregation."""
    import duckdb

    touch = ", ".join(
        f"sum(length({c}))"
        if c in ("task_id", "condition", "method", "prefix_hash")
        else f"sum({c}::BIGINT)"
        for c in NEEDED
    )
    with duckdb.connect() as con:
        return con.sql(f"SELECT count(*), {touch} FROM read_parquet({_file_list(files)})").pl()


def _pandas_branches(files: list[Path]) -> object:
    """Pair the forks in pandas: one row per recovery point with y0, y1, carried, reason."""
    import numpy as np
    import pandas as pd

    df = pd.read_parquet(files, columns=list(NEEDED))
    is_none = (df["method"] == "none") & df["delay"].isna()
    none = df.loc[is_none, ["task_id", "condition", "success", "prefix_hash"]].rename(
        columns={"success": "y0", "prefix_hash": "h0"}
    )
    none["gap"] = (df.loc[is_none, "end_action"] - df.loc[is_none, "perturb_action"]).to_numpy()
    rec = df.loc[
        df["method"] != "none",
        ["task_id", "condition", "method", "delay", "success", "prefix_hash"],
    ].rename(columns={"success": "y1", "prefix_hash": "h1"})
    del df
    pairs = rec.merge(none, on=["task_id", "condition"], how="left", indicator=True)
    del rec
    unpaired = (pairs["_merge"] == "left_only").to_numpy()
    after_end = (pairs["delay"] >= pairs["gap"]).fillna(False).to_numpy(dtype=bool)
    mismatch = (pairs["h1"] != pairs["h0"]).to_numpy(dtype=bool) & pairs["h0"].notna().to_numpy()
    mismatch &= pairs["h1"].notna().to_numpy()
    pairs["reason"] = np.select(
        [unpaired, after_end, mismatch], ["unpaired", "after_end", "prefix_mismatch"], None
    )
    pairs["carried"] = False
    grid = pairs[["condition", "method", "delay"]].drop_duplicates()
    # only runs that ended before the latest point can carry anything forward
    carried = none[none["gap"] <= grid["delay"].max()].merge(grid, on="condition")
    carried = carried[carried["delay"] >= carried["gap"]]
    carried = carried.assign(y1=carried["y0"], carried=True, reason=None)
    columns = ["task_id", "condition", "delay", "method", "y0", "y1", "carried", "reason"]
    return pd.concat([pairs[columns], carried[columns]], ignore_index=True)


def pandas_counts(files: list[Path], per_task: bool = False) -> object:
    """Cell counts (or per-task types) in idiomatic pandas; return a polars DataFrame."""
    import pandas as pd
    import polars as pl

    b = _pandas_branches(files)
    valid = b["reason"].isna()
    y0 = b["y0"].fillna(False).astype(bool)
    y1 = b["y1"].astype(bool)
    if per_task:
        b = b.assign(d=(y1.astype(int) - y0.astype(int)).where(valid, 0), n=valid.astype(int))
        tasks = b.groupby(["condition", "delay", "method", "task_id"], as_index=False)[
            ["d", "n"]
        ].sum()
        types = (
            tasks[tasks["n"] > 0]
            .groupby(["condition", "delay", "method", "d", "n"], as_index=False)
            .size()
            .rename(columns={"size": "count"})
        )
        return pl.from_pandas(types)
    flags = pd.DataFrame(
        {
            "condition": b["condition"],
            "delay": b["delay"],
            "method": b["method"],
            "n": valid,
            "rescue": valid & ~y0 & y1,
            "harm": valid & y0 & ~y1,
            "kept": valid & y0 & y1,
            "unchanged": valid & ~y0 & ~y1,
            "carried_forward": valid & b["carried"].astype(bool),
            "unpaired": b["reason"] == "unpaired",
            "prefix_mismatch": b["reason"] == "prefix_mismatch",
            "after_end": b["reason"] == "after_end",
        }
    )
    counts = flags.groupby(["condition", "delay", "method"], as_index=False).sum()
    return pl.from_pandas(counts)
