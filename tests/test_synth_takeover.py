"""Tests of the synthetic takeover generator (recoverylab.synth._takeover) and its samples."""

from __future__ import annotations

import importlib.util

import numpy as np
import polars as pl
import pytest

from recoverylab import synth, takeover
from recoverylab._errors import ParameterError
from recoverylab.schema import validate
from recoverylab.synth import _takeover as gen
from tests.conftest import SAMPLES, assert_same_as_stored

TAKEOVER = SAMPLES / "takeover"
TABLES = ("states", "attempts", "failures", "mutations")


@pytest.fixture(scope="module")
def hundred() -> dict[str, pl.DataFrame]:
    return synth.generate("takeover", 100, seed=20261020)


@pytest.fixture(scope="module")
def large() -> dict[str, pl.DataFrame]:
    return synth.generate("takeover", 300, seed=4)


def test_registered_with_its_tables() -> None:
    generator = synth.get("takeover")
    assert generator.tables == TABLES
    assert "unit = workflow" in generator.description


def test_every_table_meets_its_contract(hundred: dict[str, pl.DataFrame]) -> None:
    for name in TABLES:
        assert validate(hundred[name], name).collect().height == hundred[name].height


def test_annotation_quotas_are_exact(hundred: dict[str, pl.DataFrame]) -> None:
    failures = hundred["failures"]
    surfaced = failures.filter(pl.col("surfaced_step").is_not_null())
    assert failures.height == 619
    assert surfaced.height == 602
    assert surfaced.filter(pl.col("surfaced_step") == pl.col("final_step")).height == 361
    latency = surfaced.select(pl.col("surfaced_step") - pl.col("root_cause_step")).to_series()
    assert latency.median() == 17.0
    assert latency.min() >= 1


@pytest.mark.parametrize("units", [1, 2, 7, 33])
def test_quotas_hold_for_any_block_size(units: int) -> None:
    failures = synth.generate("takeover", units, seed=units)["failures"]
    n = round(gen.ROOT_CAUSES_PER_WORKFLOW * units)
    assert failures.height == n
    surfaced = failures.filter(pl.col("surfaced_step").is_not_null())
    assert surfaced.height == round(gen.SURFACED_SHARE * n)
    at_final = surfaced.filter(pl.col("surfaced_step") == pl.col("final_step")).height
    assert at_final == round(gen.FINAL_STEP_SHARE * surfaced.height)
    if surfaced.height:
        latency = surfaced.select(pl.col("surfaced_step") - pl.col("root_cause_step"))
        assert latency.to_series().median() == gen.MEDIAN_LATENCY


def test_states_exist_only_where_the_trajectory_went(hundred: dict[str, pl.DataFrame]) -> None:
    states = hundred["states"].join(hundred["failures"], on="root_cause_id")
    assert states.height == hundred["states"].height
    assert (states["depth"] < states["final_step"] - states["root_cause_step"]).all()
    assert set(states["depth"].unique()) == set(gen.DEPTHS)
    per_depth = states.group_by("depth").len().sort("depth")["len"].to_list()
    assert per_depth == sorted(per_depth, reverse=True)
    assert len(set(per_depth)) == len(per_depth)  # strictly fewer at each deeper depth
    assert (
        hundred["states"]
        .group_by("root_cause_id")
        .agg(pl.col("workflow_id").n_unique())["workflow_id"]
        == 1
    ).all()


def test_attempts_cover_eligible_states_only(hundred: dict[str, pl.DataFrame]) -> None:
    states, attempts = hundred["states"], hundred["attempts"]
    rejected = states.filter(~(pl.col("replay_ok") & pl.col("expected_ok")))
    assert rejected.height > 0
    assert attempts.join(rejected, on="state_id", how="semi").height == 0
    units = attempts.group_by("state_id", "agent").agg(
        pl.len(), pl.col("repeat").min().alias("lo"), pl.col("repeat").max().alias("hi")
    )
    assert (units["len"] == 3).all()
    assert ((units["lo"] == 0) & (units["hi"] == 2)).all()
    eligible = states.height - rejected.height
    assert units.height < eligible * 6  # a few units never ran
    assert units.height > eligible * 6 * 0.97
    assert sorted(attempts["agent"].unique()) == list(gen.agent_names(6))


def test_funnel_layers_are_nested(hundred: dict[str, pl.DataFrame]) -> None:
    attempts = hundred["attempts"]
    assert attempts.filter(pl.col("derived_fixed") & ~pl.col("root_cause_fixed")).height == 0
    passed_without_repair = attempts.filter(pl.col("passed") & ~pl.col("derived_fixed"))
    assert 0 < passed_without_repair.height < attempts.filter(pl.col("passed")).height * 0.2


def test_planted_rates_are_recovered(large: dict[str, pl.DataFrame]) -> None:
    states, attempts = large["states"], large["attempts"]
    per_agent = attempts.group_by("agent").agg(
        pl.col("passed").mean().alias("pass_rate"),
        pl.col("planted_p_pass").mean().alias("planted_pass"),
        pl.col("aware").mean().alias("aware_rate"),
        pl.col("planted_p_aware").mean().alias("planted_aware"),
        pl.len().alias("n"),
    )
    for name in ("pass", "aware"):
        se = np.sqrt(per_agent[f"planted_{name}"] * (1 - per_agent[f"planted_{name}"]))
        se = se / np.sqrt(per_agent["n"].to_numpy() / 3)  # repeats are correlated: be generous
        gap = (per_agent[f"{name}_rate"] - per_agent[f"planted_{name}"]).abs()
        assert (gap < 4 * se).all(), (name, per_agent)
    # E[pass@3] = mean over units of 1 - (1 - p)^3; summarize must recover it
    summary = takeover.summarize(states, attempts, by=("agent",), interval="wilson")
    truth = (
        attempts.group_by("state_id", "agent")
        .agg(pl.col("planted_p_pass").first().alias("p"))
        .group_by("agent")
        .agg((1 - (1 - pl.col("p")) ** 3).mean().alias("expected"), pl.len().alias("units"))
    )
    check = summary.join(truth, on="agent")
    se = np.sqrt(check["expected"] * (1 - check["expected"]) / check["units"])
    assert ((check["pass_at_k"] - check["expected"]).abs() < 4 * se).all(), check


def test_planted_depth_pattern(large: dict[str, pl.DataFrame]) -> None:
    by_depth = (
        large["attempts"]
        .join(large["states"], on="state_id")
        .group_by("depth")
        .agg(pl.col("planted_p_aware").mean(), pl.col("planted_p_pass").mean())
        .sort("depth")
    )
    aware = by_depth["planted_p_aware"].to_list()
    assert aware == sorted(aware)  # symptoms become more visible with depth
    assert by_depth["planted_p_pass"][0] > by_depth["planted_p_pass"][-1]


def test_verifier_catch_rates_follow_the_planted_rate(large: dict[str, pl.DataFrame]) -> None:
    mutations = large["mutations"]
    assert mutations.filter(pl.col("caught") & ~pl.col("executed")).height == 0
    executed = mutations.filter(pl.col("executed"))
    assert executed["caught"].mean() == pytest.approx(
        executed["planted_catch_rate"].mean(), abs=0.03
    )
    gate = takeover.verifier_gate(mutations).collect()
    assert 0 < gate.filter(~pl.col("passes_gate")).height < gate.height * 0.2


def test_ids_follow_the_unit_index() -> None:
    rng = np.random.default_rng(0)
    tables = gen.block(50, 53, rng)
    assert sorted(tables["mutations"]["workflow_id"].unique()) == [
        "w000050",
        "w000051",
        "w000052",
    ]
    assert tables["states"]["state_id"].str.contains(r"^w00005[0-2]-r\d+-d\d\d$").all()


def test_deterministic_for_a_seed() -> None:
    first = synth.generate("takeover", 15, seed=9)
    second = synth.generate("takeover", 15, seed=9)
    other = synth.generate("takeover", 15, seed=10)
    for name in TABLES:
        assert first[name].equals(second[name])
    assert not first["attempts"].equals(other["attempts"])


def test_options_shape_the_tables() -> None:
    tables = synth.generate("takeover", 10, seed=2, agents=2, repeats=5, depths=(0, 10))
    assert sorted(tables["attempts"]["agent"].unique()) == ["agent_a", "agent_b"]
    assert tables["attempts"]["repeat"].max() == 4
    assert set(tables["states"]["depth"].unique()) <= {0, 10}
    out = takeover.summarize(tables["states"], tables["attempts"], k=5, interval="wilson")
    assert set(out["k"]) == {5}
    assert gen.agent_names(28)[:2] == ("agent_01", "agent_02")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"agents": 0}, "parameter `agents` is 0; it must be a positive integer."),
        ({"repeats": 1.5}, "parameter `repeats` is 1.5; it must be a positive integer."),
        ({"depths": ()}, "parameter `depths` is (); it must be non-negative integers."),
        ({"median_latency": 0}, "parameter `median_latency` is 0; it must be an integer >= 1."),
        ({"splits": "test"}, "parameter `splits` is 'test'; it must be a list of labels."),
        ({"leak_rate": 2.0}, "parameter `leak_rate` is 2.0; it must be in [0, 1]."),
    ],
)
def test_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(ParameterError) as info:
        synth.generate("takeover", 3, **options)
    assert str(info.value) == message


def test_shipped_sample_is_what_the_script_regenerates() -> None:
    spec = importlib.util.spec_from_file_location("make_samples", TAKEOVER / "make_samples.py")
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    tables = synth.generate("takeover", script.WORKFLOWS, seed=script.SEED)
    for name, keys in script.KEYS.items():
        shipped = pl.read_parquet(TAKEOVER / f"{name}.parquet")
        assert_same_as_stored(shipped, tables[name].sort(list(keys)), name)


def test_shipped_sample_is_shaped_like_the_test_split() -> None:
    states = pl.read_parquet(TAKEOVER / "states.parquet")
    attempts = pl.read_parquet(TAKEOVER / "attempts.parquet")
    assert states["workflow_id"].n_unique() == 100
    assert 2_150 <= states.height <= 2_350
    assert sorted(states["depth"].unique()) == [0, 5, 10, 15, 20, 25]
    assert attempts["agent"].n_unique() == 6
    assert sorted(attempts["repeat"].unique()) == [0, 1, 2]
    mismatches = states.filter(~pl.col("replay_ok")).height
    assert 0 < mismatches < states.height * 0.02
    assert set(states["split"]) == {"test"}
