"""The memory budget of paired's per-task pass: one read of the input, results unchanged."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.io.plugins import register_io_source
from polars.testing import assert_frame_equal

from recoverylab import paired
from recoverylab._errors import ParameterError, SchemaError
from recoverylab.engines import ShardedEngine
from recoverylab.paired import _bits, _budget
from tests.test_paired import random_forks
from tests.test_paired_bits import rows_per_gb

STATS: dict[str, Any] = {"n_resamples": 200, "ci_method": "percentile"}


@pytest.mark.parametrize("memory", [0, -1.5, math.nan, math.inf, "2", True])
def test_a_bad_budget_is_a_parameter_error_before_any_read(memory: object) -> None:
    frame = random_forks(np.random.default_rng(1), tasks=3)
    with pytest.raises(ParameterError, match="memory must be"):
        paired.summarize(frame, memory=memory)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="memory must be"):
        paired.summarize(pl.scan_parquet("/nonexistent/forks.parquet"), memory=memory)  # type: ignore[arg-type]


def test_default_budget_is_a_quarter_of_memory_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert 0 < _budget.default_budget() <= _budget.DEFAULT_CAP
    for pages, expected in ((2_000_000, 2_000_000 * 4096 // 4), (10**8, _budget.DEFAULT_CAP)):
        sizes = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": pages}
        monkeypatch.setattr(os, "sysconf", sizes.__getitem__)
        assert _budget.default_budget() == expected
    assert _budget.budget_bytes(None) == _budget.DEFAULT_CAP
    assert _budget.budget_bytes(2) == 2 * _budget.GB


def test_partitions_grow_with_the_rows_and_shrink_with_the_budget() -> None:
    gb = _budget.GB
    assert _budget.partitions(0, gb) == 1
    assert _budget.partitions(5_000_000, 4 * gb) == 1
    counts = [_budget.partitions(rows, 2 * gb) for rows in (10**6, 10**7, 10**8, 10**9)]
    assert counts == sorted(counts)
    assert counts[-1] > 1
    budgets = [_budget.partitions(10**8, b * gb // 4) for b in (1, 2, 4, 8, 16)]
    assert budgets == sorted(budgets, reverse=True)
    assert budgets[0] > budgets[-1]
    assert _budget.partitions(10**12, 1) == _budget.MAX_PARTS
    # the planned state of a partition fits the room the budget leaves
    for rows, budget in ((10**8, 2 * gb), (52 * 10**6, gb)):
        parts = _budget.partitions(rows, budget)
        assert rows / parts * _budget.STATE_PER_ROW <= budget - _budget.FIXED


def counting_source(frame: pl.DataFrame, calls: list[tuple]) -> pl.LazyFrame:
    """``frame`` as a scan that records every read: (columns, row limit)."""

    def read(
        with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: Any
    ) -> Iterator[pl.DataFrame]:
        columns = frame.columns if with_columns is None else with_columns
        calls.append((tuple(columns), n_rows))
        rows = frame.select(columns)
        if predicate is not None:
            rows = rows.filter(predicate)
        yield rows if n_rows is None else rows.head(n_rows)

    return register_io_source(read, schema=frame.schema)


def test_the_input_is_read_once_whatever_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = random_forks(np.random.default_rng(5), tasks=40, exclusions=False)
    frame = frame.sample(fraction=1.0, shuffle=True, seed=2)
    spilled: list[int] = []
    original = _bits.group_words

    def counted(*args: Any, **kwargs: Any) -> pl.LazyFrame:
        spilled.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_bits, "group_words", counted)
    rows_per_gb(monkeypatch)
    results, wide = [], []
    for memory in (10**6, 10):  # one pass; a partition per 10 rows (spilled)
        calls: list[tuple] = []
        spilled.clear()
        results.append(paired.summarize(counting_source(frame, calls), memory=memory, **STATS))
        # a full read of the task ids, outcomes and run columns: the per-task pass
        wide.append([c for c in calls if {"task_id", "success"} <= set(c[0]) and c[1] is None])
        # one group-by over the input, or one per partition file of the spill
        assert (len(spilled) == 1) if memory > frame.height else (len(spilled) > 1)
    assert len(wide[0]) == len(wide[1]) == 1  # read once, spilled or not
    assert_frame_equal(results[0], results[1])
    assert_frame_equal(results[0], paired.summarize(frame, **STATS))


@pytest.mark.parametrize("memory", [1, 7, 40])
def test_spilled_summaries_equal_one_pass_on_every_engine(
    memory: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(memory)
    frame = random_forks(rng, tasks=30, models=("m1", "m2")).sample(
        fraction=1.0, shuffle=True, seed=memory
    )
    options: dict[str, Any] = {"pair_by": "model", "by": "model", **STATS}
    expected = paired.summarize(frame, **options)
    rows_per_gb(monkeypatch)
    assert _budget.partitions(frame.height, _budget.budget_bytes(memory)) > 1
    assert_frame_equal(paired.summarize(frame, memory=memory, **options), expected)
    sharded = paired.summarize(frame, engine=ShardedEngine(3), memory=memory, **options)
    assert_frame_equal(sharded, expected)


def test_the_spill_leaves_no_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frame = random_forks(np.random.default_rng(9), tasks=20)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rows_per_gb(monkeypatch)
    expected = paired.summarize(frame, **STATS)
    assert_frame_equal(paired.summarize(frame, memory=5, **STATS), expected)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    messages = []
    for memory in (None, 5):  # an empty table: validate's error, spilled or not
        with pytest.raises(SchemaError) as info:
            paired.summarize(frame.clear(), memory=memory, **STATS)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_cli_memory_option(cli: Callable, tmp_path: Path) -> None:
    forks = tmp_path / "forks.parquet"
    random_forks(np.random.default_rng(4), tasks=12).write_parquet(forks)
    outs = [tmp_path / "default.parquet", tmp_path / "budget.parquet"]
    assert cli("paired", forks, "--out", outs[0]).code == 0
    assert cli("paired", forks, "--memory", "0.5", "--out", outs[1]).code == 0
    assert_frame_equal(pl.read_parquet(outs[0]), pl.read_parquet(outs[1]))
    for bad in ("0", "-2", "nan"):
        out = tmp_path / f"bad{bad}.parquet"
        result = cli("paired", forks, "--memory", bad, "--out", out)
        assert result.code == 2
        assert result.err.strip().splitlines() == [
            f"recoverylab paired: error: memory must be a positive number of GB, got {float(bad)}."
        ]
        assert not out.exists()


def test_scattered_rows_spill_when_one_pass_is_large(monkeypatch: pytest.MonkeyPatch) -> None:
    gb = _budget.GB
    rows = 52 * 10**6
    assert _budget.partitions(rows, 4 * gb) == 1  # fits: one pass, whatever the order
    assert _budget.partitions(rows, 4 * gb, rows_per_task=50.0) == 1  # grouped: one pass
    assert _budget.partitions(rows, 4 * gb, rows_per_task=1.1) == 26  # scattered: 2M-row parts
    assert _budget.partitions(rows, 2 * gb, rows_per_task=1.1) == 26  # ... even when forced
    assert _budget.partitions(rows, 2 * gb, rows_per_task=50.0) == 3  # grouped: the budget's
    assert _budget.partitions(10**9, 4 * gb, rows_per_task=1.1) == _budget.CHOSEN_MAX
    assert _budget.partitions(10**10, 4 * gb, rows_per_task=1.1) == 178  # the budget's
    assert _budget.partitions(rows, gb // 4, rows_per_task=1.1) == _budget.partitions(rows, gb // 4)
    assert _budget.partitions(10**6, 4 * gb, rows_per_task=1.0) == 1  # small: one pass
    # end to end: the hint is read from the first rows, and only the cost depends on it
    frame = random_forks(np.random.default_rng(11), tasks=30, exclusions=False).sort("task_id")
    scattered = frame.sample(fraction=1.0, shuffle=True, seed=4)
    monkeypatch.setattr(_budget, "SPILL_ABOVE", 64 * 40)  # 40 rows of planned state
    monkeypatch.setattr(_budget, "SPILL_PART_ROWS", 40)
    monkeypatch.setattr(_budget, "HINT_ROWS", 12)  # the order of the first 12 rows
    grouped_words: list[int] = []
    original = _bits.group_words

    def counted(*args: Any, **kwargs: Any) -> pl.LazyFrame:
        grouped_words.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_bits, "group_words", counted)
    expected = paired.summarize(frame, **STATS)
    assert len(grouped_words) == 1  # grouped rows: one pass
    grouped_words.clear()
    assert_frame_equal(paired.summarize(scattered, **STATS), expected)
    assert len(grouped_words) > 1  # scattered rows: spilled in partitions
