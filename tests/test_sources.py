"""One API shape (issue 14): every public verb reads every source ``scan()`` reads.

Each verb runs on the same small synthetic tables handed over as a parquet path, a list of
parquet paths, a polars LazyFrame, a DataFrame, a pyarrow Table and a pyarrow Dataset. The
results must agree with the DataFrame run, and their kind is fixed by the verb, not by the
source: results of aggregating verbs are polars DataFrames, row-level outputs LazyFrames.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.dataset as ds
import pytest
from polars.testing import assert_frame_equal

from recoverylab import goal, paired, synth, takeover

GOAL_TABLES = ("cases", "resources", "episodes", "steps", "citations")
FAST: dict[str, Any] = {"n_resamples": 50, "seed": 3}


@functools.cache
def _tables() -> dict[str, pl.DataFrame]:
    forks = synth.generate("forks", 12, seed=3)["forks"]
    shared_none = forks.filter((pl.col("method") == "none") & pl.col("delay").is_null())
    decisions = shared_none.select("task_id", "condition", pl.lit(1).alias("delay"))
    goal_tables = synth.generate("goal", 4, seed=4)
    scored = goal.score(*(goal_tables[t] for t in GOAL_TABLES)).collect()
    return {
        "forks": forks,
        "decisions": decisions,
        **goal_tables,
        "scored": scored,
        **synth.generate("takeover", 6, seed=2),
    }


Verb = Callable[[Callable[[str], object]], object]

#: Aggregating verbs: each takes a way to hand over a named table and returns a DataFrame.
RESULTS: dict[str, Verb] = {
    "paired.summarize": lambda t: paired.summarize(t("forks"), **FAST),
    "paired.contrast": lambda t: paired.contrast(t("forks"), "stale2", "clean", **FAST),
    "paired.rescue_overlap": lambda t: paired.rescue_overlap(t("forks"), "refresh", "replan_only"),
    "paired.evaluate_policy": lambda t: paired.evaluate_policy(
        t("decisions"), t("forks"), method="refresh", **FAST
    ),
    "paired.break_even": lambda t: paired.break_even(t("forks"), **FAST),
    "goal.summarize": lambda t: goal.summarize(t("scored"), **FAST),
    "goal.barrier_drop": lambda t: goal.barrier_drop(t("scored"), **FAST),
    "takeover.summarize": lambda t: takeover.summarize(t("states"), t("attempts"), k=2, **FAST),
    "takeover.compare_agents": lambda t: takeover.compare_agents(
        t("states"), t("attempts"), "agent_a", "agent_b", k=2, **FAST
    ),
    "takeover.awareness_split": lambda t: takeover.awareness_split(t("states"), t("attempts")),
    "takeover.reliability": lambda t: takeover.reliability(t("states"), t("attempts"), k=2, **FAST),
}

#: Row-level verbs: each returns a LazyFrame.
ROWS: dict[str, Verb] = {
    "paired.pairs": lambda t: paired.pairs(t("forks")),
    "paired.exclusions": lambda t: paired.exclusions(t("forks")),
    "goal.score": lambda t: goal.score(*(t(name) for name in GOAL_TABLES)),
    "takeover.score": lambda t: takeover.score(t("states"), t("attempts"), k=2),
    "takeover.eligibility": lambda t: takeover.eligibility(t("states")),
    "takeover.latency": lambda t: takeover.latency(t("failures")),
    "takeover.leakage": lambda t: takeover.leakage(t("states")),
    "takeover.verifier_gate": lambda t: takeover.verifier_gate(t("mutations")),
}


def _source(kind: str, frame: pl.DataFrame, folder: Path) -> object:
    """``frame`` handed over as ``kind``; files are written under ``folder``."""
    if kind == "DataFrame":
        return frame
    if kind == "LazyFrame":
        return frame.lazy()
    if kind == "pyarrow.Table":
        return frame.to_arrow()
    if kind == "pyarrow.Dataset":
        return ds.dataset(frame.to_arrow())
    folder.mkdir(parents=True, exist_ok=True)
    half = frame.height // 2
    paths = [folder / "0.parquet", folder / "1.parquet"]
    frame.slice(0, half).write_parquet(paths[0])
    frame.slice(half).write_parquet(paths[1])
    if kind == "list of paths":
        return [str(p) for p in paths]
    return str(folder)  # a directory path


SOURCES = ("path", "list of paths", "LazyFrame", "DataFrame", "pyarrow.Table", "pyarrow.Dataset")


def _given(kind: str, tmp_path: Path) -> Callable[[str], object]:
    return lambda name: _source(kind, _tables()[name], tmp_path / name)


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(pl.all().exclude(pl.List, pl.Struct, pl.Array), nulls_last=True)


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("verb", RESULTS)
def test_aggregating_verbs_read_every_source_and_return_a_dataframe(
    verb: str, kind: str, tmp_path: Path
) -> None:
    got = RESULTS[verb](_given(kind, tmp_path))
    assert isinstance(got, pl.DataFrame)
    assert got.height > 0
    assert_frame_equal(got, RESULTS[verb](_given("DataFrame", tmp_path)))


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("verb", ROWS)
def test_row_level_verbs_read_every_source_and_return_a_lazyframe(
    verb: str, kind: str, tmp_path: Path
) -> None:
    got = ROWS[verb](_given(kind, tmp_path))
    assert isinstance(got, pl.LazyFrame)
    expected = ROWS[verb](_given("LazyFrame", tmp_path))
    assert isinstance(expected, pl.LazyFrame)
    assert_frame_equal(_sorted(got.collect()), _sorted(expected.collect()))
