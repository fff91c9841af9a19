"""The command line ``recoverylab router fit|decide|evaluate`` and the router demo."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from recoverylab.cli._common import Progress
from recoverylab.cli._router import SAMPLE_FEATURES, demo
from recoverylab.router import Router, load_rule
from tests.conftest import SAMPLES

DATA = SAMPLES / "router"
FEATURES = ",".join(SAMPLE_FEATURES)


def train_args() -> list[object]:
    return [
        "--decision-points",
        DATA / "train" / "decision_points.parquet",
        "--forks",
        DATA / "train" / "forks.parquet",
    ]


def held_out_args() -> list[object]:
    return [
        "--decision-points",
        DATA / "test" / "decision_points.parquet",
        "--forks",
        DATA / "test" / "forks.parquet",
    ]


@pytest.fixture(scope="module")
def rule_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rule") / "rule.json"
    points = pl.read_parquet(DATA / "train" / "decision_points.parquet")
    forks = pl.read_parquet(DATA / "train" / "forks.parquet")
    Router().fit(points, forks, list(SAMPLE_FEATURES)).to_json(path)
    return path


def test_fit_writes_the_rule_and_prints_the_report(cli, tmp_path, rule_path):
    out = tmp_path / "rule.json"
    result = cli("router", "fit", *train_args(), "--features", FEATURES, "--out", out)
    assert result.code == 0, result.err
    rule = json.loads(out.read_text())
    assert rule["policy"] == "router"
    assert rule["features"] == list(SAMPLE_FEATURES)
    assert rule == json.loads(rule_path.read_text())  # same as the library, deterministic
    assert "oof_clean_harm_rate" in result.out
    assert "fitting the router" in result.err
    assert f"wrote {out}" in result.err


def test_fit_parameters_reach_the_router(cli, tmp_path):
    out = tmp_path / "rule.json"
    result = cli(
        "router", "fit", *train_args(), "--features", "repetition,noops,progress",
        "--out", out, "--C", "1.0", "--lam", "1", "--eps", "0.05", "--delays", "1,2",
        "--folds", "3", "--seed", "4", "--quiet",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.err == ""  # --quiet: no progress lines and no "wrote" line
    params = json.loads(out.read_text())["params"]
    assert params["C"] == 1.0
    assert params["lam"] == 1.0
    assert params["eps"] == 0.05
    assert params["delays"] == [1, 2]
    assert params["folds"] == 3
    assert params["seed"] == 4


@pytest.mark.parametrize("policy", ["anomaly", "rate_matched"])
def test_fit_baselines(cli, tmp_path, policy):
    out = tmp_path / f"{policy}.json"
    result = cli(
        "router", "fit", *train_args(), "--features", FEATURES, "--out", out, "--policy", policy
    )
    assert result.code == 0, result.err
    loaded = load_rule(out)
    assert loaded.kind == policy
    assert loaded.thresholds_.beta is None


def test_decide_matches_the_library(cli, tmp_path, rule_path):
    out = tmp_path / "decisions.parquet"
    points = DATA / "test" / "decision_points.parquet"
    result = cli("router", "decide", "--rule", rule_path, "--decision-points", points, "--out", out)
    assert result.code == 0, result.err
    expected = load_rule(rule_path).decide(points).collect()
    assert pl.read_parquet(out).equals(expected)


def test_decide_prints_without_out(cli, rule_path):
    points = DATA / "test" / "decision_points.parquet"
    result = cli("router", "decide", "--rule", rule_path, "--decision-points", points)
    assert result.code == 0, result.err
    assert "test-000000" in result.out


def test_evaluate_one_and_two_rules(cli, tmp_path, rule_path):
    out = tmp_path / "evaluation.parquet"
    result = cli(
        "router", "evaluate", "--rule", rule_path, *held_out_args(), "--out", out,
        "--resamples", "500",
    )  # fmt: skip
    assert result.code == 0, result.err
    table = pl.read_parquet(out)
    assert table["policy"].unique().to_list() == ["router"]
    overall = table.filter(pl.col("condition").is_null())
    assert overall["gain"].item() > 0
    assert overall["ci_low"].item() > 0

    anomaly = tmp_path / "anomaly.json"
    cli("router", "fit", *train_args(), "--features", FEATURES, "--out", anomaly,
        "--policy", "anomaly")  # fmt: skip
    both = tmp_path / "both.parquet"
    result = cli(
        "router", "evaluate", "--rule", rule_path, "--rule", anomaly, *held_out_args(),
        "--out", both, "--resamples", "500",
    )  # fmt: skip
    assert result.code == 0, result.err
    table = pl.read_parquet(both)
    margin = table.filter(policy="router", reference="anomaly")
    assert margin.height == 5


def test_evaluate_prints_rates_in_percentage_points(cli, rule_path):
    result = cli("router", "evaluate", "--rule", rule_path, *held_out_args(), "--resamples", "200")
    assert result.code == 0, result.err
    assert "gain pp [CI]" in result.out


def test_evaluate_warns_on_training_tasks(cli, rule_path):
    result = cli(
        "router", "evaluate", "--rule", rule_path, *train_args(), "--resamples", "200", "--quiet"
    )
    assert result.code == 0
    assert result.err.startswith(
        "recoverylab router: warning: compare: 600 of the evaluated tasks were also used to "
        "fit policy 'router'"
    )


def test_evaluate_same_kind_rules_are_named_by_file(cli, tmp_path, rule_path):
    copy = tmp_path / "second.json"
    copy.write_text(rule_path.read_text())
    out = tmp_path / "evaluation.parquet"
    result = cli(
        "router", "evaluate", "--rule", rule_path, "--rule", copy, *held_out_args(),
        "--out", out, "--resamples", "200",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert set(pl.read_parquet(out)["policy"]) == {"rule", "second"}


def test_evaluate_takes_the_engine_options(cli, tmp_path, rule_path):
    # --engine reaches router.compare and router.uplift (Spark itself: tests/test_engines.py)
    result = cli(
        "router", "evaluate", "--rule", rule_path, *held_out_args(), "--spark-master", "local[2]"
    )
    assert "`--spark-master` needs `--engine spark`." in one_line_error(result, "router")
    metrics = tmp_path / "uplift.parquet"
    result = cli(
        "router", "evaluate", "--rule", rule_path, *held_out_args(), "--engine", "polars",
        "--resamples", "200", "--uplift-out", metrics, "--quiet",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert pl.read_parquet(metrics)["metric"].unique().sort().to_list() == [
        "ate", "autoc", "qini", "uplift_at_k"
    ]  # fmt: skip


def one_line_error(result, command: str) -> str:
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"recoverylab {command}: error: ")
    return lines[0]


def test_unknown_feature_is_one_line(cli, tmp_path):
    result = cli(
        "router", "fit", *train_args(), "--features", "repetition,speed", "--out",
        tmp_path / "r.json", "--quiet",
    )  # fmt: skip
    line = one_line_error(result, "router")
    assert "parameter `features` names 1 unknown feature (speed)" in line
    assert not (tmp_path / "r.json").exists()


def test_nan_features_are_one_line(cli, tmp_path, rule_path):
    points = pl.read_parquet(DATA / "test" / "decision_points.parquet").with_columns(
        noops=pl.lit(float("nan"))
    )
    path = tmp_path / "points.parquet"
    points.write_parquet(path)
    result = cli("router", "decide", "--rule", rule_path, "--decision-points", path)
    line = one_line_error(result, "router")
    assert "feature `noops` has 4772 values that are null, NaN or infinite" in line


def test_missing_rule_and_bad_delays(cli, tmp_path):
    points = DATA / "test" / "decision_points.parquet"
    result = cli("router", "decide", "--rule", tmp_path / "none.json", "--decision-points", points)
    assert "cannot read the rule" in one_line_error(result, "router")
    result = cli("router", "fit", *train_args(), "--features", FEATURES, "--out",
                 tmp_path / "r.json", "--delays", "1,x")  # fmt: skip
    assert result.code == 2
    assert "invalid delays '1,x'" in result.err


def test_fit_refuses_to_overwrite_an_input(cli, tmp_path):
    points = tmp_path / "points.parquet"
    pl.read_parquet(DATA / "train" / "decision_points.parquet").write_parquet(points)
    before = points.read_bytes()
    forks = DATA / "train" / "forks.parquet"
    result = cli(
        "router", "fit", "--decision-points", points, "--forks", forks, "--features", FEATURES,
        "--out", points,
    )  # fmt: skip
    assert "which is also an input" in one_line_error(result, "router")
    assert points.read_bytes() == before


def test_router_demo(tmp_path, capsys):
    paths = demo(tmp_path, Progress("demo"))
    assert "[demo" in capsys.readouterr().err
    assert [p.name for p in paths] == [
        "router_rule.json",
        "router_decisions.parquet",
        "router_evaluation.parquet",
        "router_uplift.parquet",
        "router_toc.parquet",
    ]
    assert all(p.is_file() for p in paths)
    lift = pl.read_parquet(paths[3])
    better = lift.filter(policy="router", reference="anomaly", metric="autoc")
    assert better["ci_low"].item() > 0
    table = pl.read_parquet(paths[2])
    assert set(table["policy"]) == {"router", "anomaly", "rate_matched", "never"}
    overall = table.filter(pl.col("condition").is_null(), reference="never")
    gains = dict(zip(overall["policy"], overall["gain"], strict=True))
    assert gains["router"] > gains["anomaly"]
    assert gains["router"] > 0.03
