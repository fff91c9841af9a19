"""Run logs of a made-up custom harness, in several shapes, with known forks (tests, README).

:func:`reference` draws a small recovery experiment: tasks x conditions (``clean``, ``stale1``) x
arms (the no-recovery ``none`` arm, and ``retry`` at delays 1 and 2), each branch a success or a
failure, and some branches lost to an infrastructure failure (a sandbox error: no outcome).
:func:`write_custom_logs` writes the same runs the way different harnesses would, each shape with
the ``mapping`` and ``exclude`` expressions that read it back with
:func:`recoverylab.adapters.table.read`:

- ``jsonl_nested``: JSON lines, arms in a nested ``run`` object, the delay as text, a reward;
- ``csv_flat``: CSV whose columns already carry our names (task ids like ``007``) but a score;
- ``parquet_struct``: parquet with a struct column ``meta`` and a boolean ``passed``;
- ``json_array``: JSON array documents split over three files, the outcome as a word.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError

__all__ = ["SHAPES", "reference", "write_custom_logs"]

_ARMS = (("none", None), ("retry", 1), ("retry", 2))
_CONDITIONS = ("clean", "stale1")
#: Every shape: how to read it back (``mapping``, ``exclude``).
SHAPES: dict[str, dict[str, dict[str, str]]] = {
    "jsonl_nested": {
        "mapping": {
            "task_id": "run.task",
            "condition": "run.cond",
            "method": "run.arm",
            "delay": "CAST(run.delay AS BIGINT)",
            "success": "reward >= 1",
        },
        "exclude": {"infrastructure": "status = 'sandbox_error'"},
    },
    "csv_flat": {
        "mapping": {"success": "score >= 1"},
        "exclude": {"infrastructure": "error IS NOT NULL"},
    },
    "parquet_struct": {
        "mapping": {
            "task_id": "task",
            "condition": "meta.condition",
            "method": "meta.method",
            "delay": "meta.delay",
            "success": "passed",
        },
        "exclude": {"infrastructure": "infra_failure"},
    },
    "json_array": {
        "mapping": {
            "task_id": "id",
            "condition": "obs",
            "method": "recovery",
            "delay": "after",
            "success": "outcome = 'pass'",
        },
        "exclude": {"infrastructure": "outcome = 'crashed'"},
    },
}


def reference(tasks: int = 12, seed: int = 0) -> pl.DataFrame:
    """Return every branch: task_id, condition, method, delay, success, ``infra`` (lost).

    ``success`` is null on lost branches; ``forks`` is the rows with ``infra`` false.
    """
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for task in range(tasks):
        for condition in _CONDITIONS:
            for method, delay in _ARMS:
                infra = bool(rng.random() < 0.1)
                success = None if infra else bool(rng.random() < (0.4 if method == "none" else 0.6))
                rows.append(
                    {
                        "task_id": f"{task:03d}",
                        "condition": condition,
                        "method": method,
                        "delay": delay,
                        "success": success,
                        "infra": infra,
                    }
                )
    return pl.DataFrame(
        rows,
        schema={
            "task_id": pl.String,
            "condition": pl.String,
            "method": pl.String,
            "delay": pl.Int64,
            "success": pl.Boolean,
            "infra": pl.Boolean,
        },
    )


def _reward(frame: pl.DataFrame, rng: np.random.Generator) -> pl.Expr:
    """Return a reward: 1 on successes, 0 or a partial 0.5 on failures, null when lost."""
    partial = pl.Series(rng.choice([0.0, 0.5], size=frame.height))
    return (
        pl.when(pl.col("infra"))
        .then(None)
        .when(pl.col("success"))
        .then(1.0)
        .otherwise(pl.lit(partial))
    )


def _jsonl_nested(frame: pl.DataFrame, out: Path, rng: np.random.Generator) -> list[Path]:
    rows = frame.select(
        pl.struct(
            pl.col("task_id").alias("task"),
            pl.col("condition").alias("cond"),
            pl.col("method").alias("arm"),
            pl.col("delay").cast(pl.String).alias("delay"),
        ).alias("run"),
        _reward(frame, rng).alias("reward"),
        pl.when(pl.col("infra"))
        .then(pl.lit("sandbox_error"))
        .otherwise(pl.lit("ok"))
        .alias("status"),
    )
    path = out / "runs.jsonl"
    rows.write_ndjson(path)
    return [path]


def _csv_flat(frame: pl.DataFrame, out: Path, rng: np.random.Generator) -> list[Path]:
    rows = frame.select(
        "task_id",
        "condition",
        "method",
        "delay",
        _reward(frame, rng).alias("score"),
        pl.when(pl.col("infra")).then(pl.lit("sandbox lost")).alias("error"),
    )
    path = out / "runs.csv"
    rows.write_csv(path)
    return [path]


def _parquet_struct(frame: pl.DataFrame, out: Path, rng: np.random.Generator) -> list[Path]:
    rows = frame.select(
        pl.col("task_id").alias("task"),
        pl.struct("condition", "method", pl.col("delay").cast(pl.Int32)).alias("meta"),
        pl.col("success").alias("passed"),
        pl.col("infra").alias("infra_failure"),
    )
    path = out / "runs.parquet"
    rows.sample(fraction=1.0, shuffle=True, seed=int(rng.integers(1 << 31))).write_parquet(path)
    return [path]


def _json_array(frame: pl.DataFrame, out: Path, rng: np.random.Generator) -> list[Path]:
    word = pl.when(pl.col("infra")).then(pl.lit("crashed"))
    rows = frame.select(
        pl.col("task_id").alias("id"),
        pl.col("condition").alias("obs"),
        pl.col("method").alias("recovery"),
        pl.col("delay").alias("after"),
        word.when(pl.col("success"))
        .then(pl.lit("pass"))
        .otherwise(pl.lit("fail"))
        .alias("outcome"),
    ).to_dicts()
    order = rng.permutation(len(rows))
    paths = []
    for part in range(3):
        path = out / f"shard_{part}.json"
        path.write_text(json.dumps([rows[i] for i in order[part::3]], indent=1), encoding="utf-8")
        paths.append(path)
    return paths


_WRITERS = {
    "jsonl_nested": _jsonl_nested,
    "csv_flat": _csv_flat,
    "parquet_struct": _parquet_struct,
    "json_array": _json_array,
}


def write_custom_logs(
    out_dir: str | Path, shape: str = "jsonl_nested", *, tasks: int = 12, seed: int = 0
) -> list[Path]:
    """Write the runs of :func:`reference` in one shape; return the files written.

    Examples
    --------
    >>> import tempfile
    >>> [p.name for p in write_custom_logs(tempfile.mkdtemp(), "csv_flat", tasks=2)]
    ['runs.csv']
    """
    if shape not in _WRITERS:
        raise ParameterError(
            f"parameter `shape` is {shape!r}; it must be one of {', '.join(SHAPES)}."
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, len(shape)])
    return _WRITERS[shape](reference(tasks, seed), out, rng)
