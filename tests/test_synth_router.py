"""The synthetic CIR router generator ``decision_points``: layout, planted signal, samples."""

from __future__ import annotations

import importlib.util

import polars as pl
import pytest

from recoverylab import paired, synth
from recoverylab.schema import validate
from recoverylab.synth import _router as synth_router
from tests.conftest import SAMPLES, assert_same_as_stored

KEYS = ["task_id", "condition"]


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    return synth.generate("decision_points", 3000, seed=7)


def outcomes(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return paired.pairs(tables["forks"]).collect()


def test_tables_pass_their_contracts(tables):
    assert set(tables) == {"decision_points", "forks"}
    validate(tables["decision_points"], "decision_points").collect()
    validate(tables["forks"], "forks").collect()


def test_layout_and_task_ids():
    small = synth.generate("decision_points", 3, seed=0, prefix="x-")
    forks = small["forks"]
    assert sorted(forks["task_id"].unique()) == ["x-000000", "x-000001", "x-000002"]
    none = forks.filter(method="none")
    assert none.height == 3 * 4  # one shared none row per task and condition
    assert none["delay"].null_count() == none.height
    assert sorted(none["condition"].unique()) == sorted(synth_router.CONDITIONS)
    refresh = forks.filter(method="refresh")
    assert set(refresh["delay"].unique()) <= set(synth_router.DELAYS)
    points = small["decision_points"]
    assert points.columns == ["task_id", "condition", "delay", *synth_router.FEATURES]
    assert points.schema["repetition"] == pl.Int64
    assert points.schema["progress"] == pl.Float64


def test_features_only_no_labels_in_decision_points(tables):
    leaked = {"success", "y0", "y1", "obs_error", "method"} & set(tables["decision_points"].columns)
    assert not leaked


def test_every_point_has_its_refresh_row_and_ended_tasks_have_none(tables):
    points = tables["decision_points"].select(*KEYS, "delay")
    refresh = tables["forks"].filter(method="refresh").select(*KEYS, "delay")
    assert points.sort(points.columns).equals(refresh.sort(refresh.columns))
    none = tables["forks"].filter(method="none")
    ended = none.filter(pl.col("perturb_action") + 4 >= pl.col("end_action"))
    assert ended.height > 0  # some tasks end before the last candidate delay
    pairs = outcomes(tables)
    carried = pairs.filter("carried_forward")
    assert carried.height > 0
    assert carried.select((pl.col("y0") == pl.col("y1")).all()).item()
    assert carried.join(points, on=[*KEYS, "delay"], how="semi").height == 0


def test_planted_refresh_effects(tables):
    cells = (
        outcomes(tables)
        .filter(pl.col("delay") == 1)
        .group_by("condition")
        .agg(
            rescue=(pl.col("outcome") == "rescue").mean(),
            harm=(pl.col("outcome") == "harm").mean(),
        )
        .sort("condition")
    )
    effect = dict(zip(cells["condition"], (cells["rescue"] - cells["harm"]).to_list(), strict=True))
    assert effect["stale2"] > 0.15  # refresh rescues two-step-stale episodes
    assert effect["stale1"] > 0.05
    assert effect["clean"] < -0.03  # and harms clean ones
    assert effect["missing"] < -0.05  # anomalous-looking, but refresh does not help


def test_rescue_decays_with_delay(tables):
    rescue = (
        outcomes(tables)
        .filter(condition="stale2")
        .group_by("delay")
        .agg((pl.col("outcome") == "rescue").mean())
        .sort("delay")["outcome"]
        .to_list()
    )
    assert rescue[0] > rescue[1] > rescue[2]


def test_stale_observations_are_detectable_from_features(tables):
    means = (
        tables["decision_points"].group_by("condition").agg(pl.col("repetition", "noops").mean())
    )
    by = {row["condition"]: row for row in means.iter_rows(named=True)}
    assert by["stale2"]["repetition"] > 2 * by["clean"]["repetition"]
    assert by["missing"]["noops"] > 4 * by["clean"]["noops"]


def test_potential_outcomes_are_coherent_across_delays(tables):
    # One draw drives all delays: rescued at a later delay implies rescued at an earlier one.
    refresh = tables["forks"].filter(method="refresh", condition="stale2")
    wide = refresh.pivot(on="delay", index="task_id", values="success").drop_nulls()
    assert (
        wide.filter(pl.col("4") & ~pl.col("1")).height
        <= wide.filter(pl.col("1") & ~pl.col("4")).height
    )
    none = tables["forks"].filter(method="none", condition="stale2").select("task_id", "success")
    failing = wide.join(none, on="task_id").filter(~pl.col("success"))
    assert failing.filter(pl.col("4") & ~pl.col("1")).height == 0


def test_same_seed_same_rows_and_prefix_only_renames():
    a = synth.generate("decision_points", 50, seed=3)
    b = synth.generate("decision_points", 50, seed=3)
    c = synth.generate("decision_points", 50, seed=3, prefix="other-")
    for table in a:
        assert a[table].equals(b[table])
        renamed = c[table].with_columns(pl.col("task_id").str.replace("other-", "t"))
        assert renamed.equals(a[table])


def test_different_seeds_differ():
    a = synth.generate("decision_points", 50, seed=3)["forks"]
    b = synth.generate("decision_points", 50, seed=4)["forks"]
    assert not a.equals(b)


def test_write_streams_both_tables(tmp_path):
    written = synth.write("decision_points", tmp_path, 20, seed=1)
    assert set(written) == {"decision_points", "forks"}
    back = pl.read_parquet(tmp_path / "forks" / "*.parquet")
    assert back.equals(synth.generate("decision_points", 20, seed=1)["forks"])


def _sample_script():
    path = SAMPLES / "router" / "make_samples.py"
    spec = importlib.util.spec_from_file_location("router_make_samples", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_samples_are_regenerated_by_their_script():
    script = _sample_script()
    for name, (tasks, seed, prefix) in script.SAMPLES.items():
        expected = synth.generate("decision_points", tasks, seed=seed, prefix=prefix)
        for table, frame in expected.items():
            shipped = pl.read_parquet(SAMPLES / "router" / name / f"{table}.parquet")
            assert_same_as_stored(shipped, frame, (name, table))


def test_sample_train_and_test_tasks_are_disjoint():
    train = pl.read_parquet(SAMPLES / "router" / "train" / "forks.parquet")
    test = pl.read_parquet(SAMPLES / "router" / "test" / "forks.parquet")
    assert train.join(test, on="task_id", how="semi").height == 0
    assert (SAMPLES / "router" / "README.md").is_file()
