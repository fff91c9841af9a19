"""Every adapter has one shape (ARCHITECTURE §8, issue 25 item 7).

Each format's reader returns :class:`recoverylab.adapters.Imported`: its tables, one ``excluded``
table with a ``reason`` per unit, and a read report whose counts are those of the tables. Every
``trials`` table meets the shared contract (:data:`recoverylab.adapters._trials.TRIALS`), so
``takeover.repeats_reliability`` reads any of them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import recoverylab as rl
from recoverylab.adapters import Imported, harbor, table, tau2
from recoverylab.adapters._trials import TRIALS
from recoverylab.synth.custom_logs import reference
from recoverylab.synth.harbor_jobs import write_harbor_jobs
from recoverylab.synth.tau2_results import write_tau2_results

DTYPES = {"str": pl.String, "int": pl.Int64, "bool": pl.Boolean, "float": pl.Float64}


def _harbor(root: Path) -> Imported:
    write_harbor_jobs(root / "jobs", seed=3)
    return harbor.trials(root / "jobs")


def _tau2(root: Path) -> Imported:
    write_tau2_results(root / "tau2", resumed=True)
    return tau2.read(root / "tau2", to="trials")


def _table(root: Path) -> Imported:
    runs = reference(8, 2).with_columns(pl.col("task_id").cum_count().over("task_id").alias("seed"))
    runs.write_ndjson(root / "runs.jsonl")
    return table.read(
        root / "runs.jsonl",
        to="trials",
        mapping={"attempt": "seed", "reward": "CAST(success AS DOUBLE)"},
        exclude={"infrastructure": "infra"},
        key=["condition", "method", "delay"],
    )


READERS: dict[str, Callable[[Path], Imported]] = {
    "harbor": _harbor,
    "tau2": _tau2,
    "table": _table,
}
#: The columns that tell one adapter's runs apart besides (task_id, attempt).
EXPERIMENT = {
    "harbor": ("agent", "model"),
    "tau2": tau2.EXPERIMENT,
    "table": ("condition", "method", "delay"),
}


@pytest.mark.parametrize("name", list(READERS))
def test_every_adapter_returns_tables_excluded_and_a_report_that_counts_them(
    name: str, tmp_path: Path
) -> None:
    imported = READERS[name](tmp_path)
    assert isinstance(imported, Imported)
    assert {"reason", "detail"} <= set(imported.excluded.columns)
    assert imported.excluded["reason"].null_count() == 0
    report = imported.report
    assert report.format == name
    assert dict(report.rows) == {n: f.height for n, f in imported.outputs().items()}
    reasons = imported.excluded.group_by("reason").len()
    assert dict(report.excluded) == dict(zip(reasons["reason"], reasons["len"], strict=True))
    assert report.files_read, "a report names the files it read"


@pytest.mark.parametrize("name", list(READERS))
def test_every_trials_table_meets_the_shared_contract(name: str, tmp_path: Path) -> None:
    trials = READERS[name](tmp_path).tables["trials"]
    for column in TRIALS.columns:
        if column.required or column.name in trials.columns:
            assert trials.schema[column.name] == DTYPES[column.kind], column.name
    required = [c.name for c in TRIALS.columns if not c.nullable]
    assert trials.select(pl.col(required).null_count()).sum_horizontal().item() == 0
    experiment = list(EXPERIMENT[name])
    assert trials.select("task_id", "attempt", *experiment).is_unique().all()
    passes = rl.takeover.repeats_reliability(
        trials,
        unit=[*experiment, "task_id"],
        cluster="task_id",
        outcome="success",
        k=1,
        n_resamples=50,
    )
    # pass^1 over the units is the mean success of their attempts, unit by unit
    per_unit = trials.group_by([*experiment, "task_id"]).agg(pl.col("success").mean())
    assert passes["units"].item() == per_unit.height
    assert passes["pass_hat_k"].item() == pytest.approx(per_unit["success"].mean())


def test_the_report_lists_a_few_superseded_logs_and_counts_the_rest() -> None:
    from recoverylab.adapters import ReadReport, Superseded

    many = tuple(Superseded(f"trial-{i}/result.json", f"retry-{i}/result.json") for i in range(25))
    used = tuple(s.by for s in many)
    read = (*used, *(s.log for s in many))
    report = ReadReport(format="harbor", files_read=read, used=used, superseded=many, unit="trials")
    lines = report.render().splitlines()
    assert lines[0] == (
        "import harbor: 50 files read (25 used, 25 superseded, 0 with no unit in the tables)"
    )
    assert [line for line in lines if line.startswith("  superseded ")] == [
        f"  superseded trial-{i}/result.json by retry-{i}/result.json (retry)" for i in range(10)
    ]
    assert "  ... and 15 more superseded (every one in --report-out)" in lines
    assert len(report.to_dict()["superseded"]) == 25
