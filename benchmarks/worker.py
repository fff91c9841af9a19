"""One benchmark workload in its own process: ``python benchmarks/worker.py WORKLOAD ...``.

:mod:`run` starts one process per measurement so that each engine starts cold and its peak
RSS is its own. The worker times only the workload itself (imports and process start-up are
excluded), writes what the workload produced to ``--out`` (parquet, for the correctness
comparison) and prints one JSON line: ``{"seconds": ..., "rows_out": ..., ...}``.

Workloads on the forks files (``--data`` is the folder of parquet parts):

* ``floor`` (a): polars scan of the columns the pairing needs, trivial aggregation.
* ``floor_duckdb``: the same scan in DuckDB, for reference.
* ``recoverylab`` (b): ``paired._summary.partials`` collected -- counts and per-task types.
* ``recoverylab_stats`` (c): ``paired.summarize`` with exact p-values and its default, exact
  intervals (Fay–Lumbard or the cluster meld: no resampling).
* ``duckdb`` / ``duckdb_per_task`` (d): :mod:`baselines` in DuckDB.
* ``pandas`` / ``pandas_per_task`` (e): :mod:`baselines` in pandas.

Other workloads: ``stats_scale`` (bootstrap and exact sign-flip at a million clusters, and the
scipy references), ``goal`` and ``takeover`` with their ``_duckdb``, ``_pandas`` and ``_floor``
equivalents, ``router`` (``--data`` is their generated folder); see :mod:`extras`.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

N_RESAMPLES = 10_000
#: ``--memory``: the budget (GB) of ``recoverylab_stats``' per-task pass; None: the default.
MEMORY: list[float | None] = [None]


def _clock() -> tuple[float, float]:
    """Wall and CPU (user + system, all threads) seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), usage.ru_utime + usage.ru_stime


def _since(start: tuple[float, float]) -> dict:
    wall, cpu = _clock()
    return {"seconds": wall - start[0], "cpu_seconds": cpu - start[1]}


def _files(data: Path, first: int = 0) -> list[Path]:
    """The parquet parts of ``data``; only the first ``first`` of them when it is set."""
    files = sorted(data.glob("*.parquet"))
    return files[:first] if first else files


def _counts_from_partials(part: object) -> object:
    """Cell counts and per-task types (n > 0) of recoverylab partials."""
    import polars as pl
    from baselines import CELLS, COUNT_COLUMNS

    counts = part.group_by(CELLS).agg(
        (pl.col("n") * pl.col("count")).sum().alias("n"),
        *(pl.col(c).sum() for c in COUNT_COLUMNS if c != "n"),
    )
    types = part.filter(pl.col("n") > 0).group_by(*CELLS, "d", "n").agg(pl.col("count").sum())
    return counts, types


def floor(files: list[Path]) -> dict:
    import polars as pl
    from baselines import NEEDED

    lazy = pl.scan_parquet(files)
    schema = lazy.collect_schema()

    def touch(name: str) -> pl.Expr:
        if schema[name] == pl.String:
            return pl.col(name).str.len_bytes().sum()
        return pl.col(name).cast(pl.Int64).sum()

    start = _clock()
    out = lazy.select(pl.len(), *(touch(c).alias(c) for c in NEEDED)).collect(engine="streaming")
    return {**_since(start), "rows_in": int(out["len"].item())}


def floor_duckdb(files: list[Path]) -> dict:
    from baselines import duckdb_scan

    start = _clock()
    out = duckdb_scan(files)
    return {**_since(start), "rows_in": int(out.item(0, 0))}


def recoverylab_partials(files: list[Path], out: Path) -> dict:
    import polars as pl

    from recoverylab.paired import _summary

    start = _clock()
    part = _summary.partials(pl.scan_parquet(files)).collect(engine="streaming")
    timing = _since(start)
    counts, types = _counts_from_partials(part)
    _write(counts, types, out)
    return {**timing, "rows_out": part.height, "cells": counts.height}


def recoverylab_stats(files: list[Path], out: Path) -> dict:
    import polars as pl
    import scipy.signal
    import scipy.stats  # noqa: F401  (recoverylab imports them on first use: not timed)
    from baselines import CELLS, COUNT_COLUMNS

    from recoverylab import paired

    start = _clock()
    summary = paired.summarize(pl.scan_parquet(files), n_resamples=N_RESAMPLES, memory=MEMORY[0])
    timing = _since(start)
    counts = summary.select(
        *CELLS,
        *(c for c in COUNT_COLUMNS if c != "after_end"),
        pl.lit(0, dtype=pl.Int64).alias("after_end"),  # summarize refuses such rows
    )
    _write(counts, None, out)
    return {
        **timing,
        "rows_out": summary.height,
        "cells": summary.height,
        "ci_width_max": float((summary["ci_high"] - summary["ci_low"]).max()),
    }


def duckdb_counts(files: list[Path], out: Path, per_task: bool = False) -> dict:
    from baselines import duckdb_query

    start = _clock()
    result = duckdb_query(files, per_task=per_task)
    timing = _since(start)
    _write(None if per_task else result, result if per_task else None, out)
    return {**timing, "rows_out": result.height}


def pandas_counts(files: list[Path], out: Path, per_task: bool = False) -> dict:
    from baselines import pandas_counts as run

    start = _clock()
    result = run(files, per_task=per_task)
    timing = _since(start)
    _write(None if per_task else result, result if per_task else None, out)
    return {**timing, "rows_out": result.height}


def _write(counts: object, types: object, out: Path) -> None:
    import polars as pl
    from baselines import CELLS, COUNT_COLUMNS

    if counts is not None:
        counts.select(
            pl.col("condition").cast(pl.String),
            pl.col("delay").cast(pl.Int64),
            pl.col("method").cast(pl.String),
            *(pl.col(c).cast(pl.Int64) for c in COUNT_COLUMNS),
        ).sort(CELLS).write_parquet(out.with_suffix(".counts.parquet"))
    if types is not None:
        types.select(
            pl.col("condition").cast(pl.String),
            pl.col("delay").cast(pl.Int64),
            pl.col("method").cast(pl.String),
            *(pl.col(c).cast(pl.Int64) for c in ("d", "n", "count")),
        ).sort(*CELLS, "d", "n").write_parquet(out.with_suffix(".types.parquet"))


WORKLOADS: dict[str, Callable[[list[Path], Path], dict]] = {
    "floor": lambda files, _: floor(files),
    "floor_duckdb": lambda files, _: floor_duckdb(files),
    "recoverylab": recoverylab_partials,
    "recoverylab_stats": recoverylab_stats,
    "duckdb": duckdb_counts,
    "duckdb_per_task": lambda files, out: duckdb_counts(files, out, per_task=True),
    "pandas": pandas_counts,
    "pandas_per_task": lambda files, out: pandas_counts(files, out, per_task=True),
}


def peak_rss() -> int:
    """The process's own peak resident set (imports, engine and data included), in bytes.

    Linux: ``VmHWM`` of /proc/self/status, which starts afresh with the program.
    ``ru_maxrss`` does not: it keeps the peak of the parent's memory that the process was
    forked from, so a large parent (say one that just wrote the data) would inflate it.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("result"))
    parser.add_argument("--size", type=int, default=0, help="size option of some workloads")
    parser.add_argument("--files", type=int, default=0, help="use only the first N files")
    parser.add_argument("--budget", type=float, default=60.0, help="scipy reference budget (s)")
    parser.add_argument("--memory", type=float, help="recoverylab_stats' budget in GB")
    args = parser.parse_args(argv)
    MEMORY[0] = args.memory
    if args.workload in WORKLOADS:
        result = WORKLOADS[args.workload](_files(args.data, args.files), args.out)
    else:
        import extras

        result = extras.run(args.workload, args.data, args.size, args.budget, args.out)
    result["peak_rss_bytes"] = peak_rss()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
