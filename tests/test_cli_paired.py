"""The ``paired``, ``contrast`` and ``policy`` commands reproduce the published CIR numbers."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from recoverylab.cli import _paired

SAMPLES = Path(__file__).resolve().parents[1] / "data_samples" / "paired"
MAIN = SAMPLES / "main_forks.parquet"
MECHANISM = SAMPLES / "mechanism_forks.parquet"
POLICY_FORKS = SAMPLES / "policy_forks.parquet"
DECISIONS = SAMPLES / "policy_decisions.parquet"


def pp(value: float) -> float:
    """A fraction in percentage points, rounded as published."""
    return round(value * 100, 2)


def cell(frame: pl.DataFrame, **key: object) -> dict:
    rows = frame.filter(*(pl.col(k).eq_missing(v) for k, v in key.items())).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def run_to_parquet(cli: Callable, tmp_path: Path, *args: object) -> pl.DataFrame:
    out = tmp_path / f"out{len(list(tmp_path.glob('out*.parquet')))}.parquet"
    result = cli(*args, "--out", out)
    assert result.code == 0, result.err
    assert f"wrote {out}" in result.err
    return pl.read_parquet(out)


def test_main_cohort_full(cli: Callable, tmp_path: Path) -> None:
    got = run_to_parquet(cli, tmp_path, "paired", MAIN, "--ci-method", "percentile")
    assert got.height == 8
    assert (got["n"] == 106).all()
    clean = cell(got, condition="clean", delay=0)
    stale = cell(got, condition="stale2", delay=0)
    assert (clean["rescue"], clean["harm"]) == (2, 6)
    assert (stale["rescue"], stale["harm"]) == (17, 10)
    assert pp(clean["effect"]) == -3.77
    assert pp(stale["effect"]) == 6.60
    # the paper's intervals, reproduced by the default seed
    assert (pp(clean["ci_low"]), pp(clean["ci_high"])) == (-9.43, 0.94)
    assert (pp(stale["ci_low"]), pp(stale["ci_high"])) == (-2.83, 16.04)
    assert cell(got, condition="clean", delay=4)["carried_forward"] == 2
    assert cell(got, condition="stale2", delay=4)["carried_forward"] == 3
    assert (got["unpaired"] == 0).all()
    assert (got["prefix_mismatch"] == 0).all()
    # The default interval (issue 16) never contradicts the sign-flip p-value.
    auto = run_to_parquet(cli, tmp_path, "paired", MAIN, "--alternative", "greater")
    assert set(auto["ci_method"]) == {"fay-lumbard"}
    assert ((auto["ci_low"] > 0) == (auto["p_value"] < 0.05)).all()
    assert (auto["ci_high"] == 1.0).all()


def test_main_cohort_factual_success(cli: Callable, tmp_path: Path) -> None:
    got = run_to_parquet(
        cli, tmp_path, "paired", MAIN, "--cohort", "factual_success", "--ci-method", "percentile"
    )
    assert (got["n"] == 93).all()
    clean0 = cell(got, condition="clean", delay=0)
    stale0 = cell(got, condition="stale2", delay=0)
    assert (clean0["rescue"], clean0["harm"]) == (0, 6)
    assert pp(clean0["effect"]) == -6.45
    assert (pp(clean0["ci_low"]), pp(clean0["ci_high"])) == (-11.83, -2.15)
    assert pp(stale0["effect"]) == 7.53
    assert (pp(stale0["ci_low"]), pp(stale0["ci_high"])) == (-3.23, 18.28)
    stale1 = cell(got, condition="stale2", delay=1)
    clean1 = cell(got, condition="clean", delay=1)
    assert (stale1["rescue"], stale1["harm"]) == (15, 4)
    assert (clean1["rescue"], clean1["harm"]) == (0, 6)
    # on clean the no-recovery run replays the factual success: refresh can only harm
    assert (got.filter(pl.col("condition") == "clean")["base_rate"] == 1.0).all()


def test_main_cohort_contrasts(cli: Callable, tmp_path: Path) -> None:
    full = run_to_parquet(cli, tmp_path, "contrast", MAIN, "--a", "stale2", "--b", "clean")
    assert pp(cell(full, delay=0)["difference"]) == 10.38
    assert (full["n_tasks"] == 106).all()
    factual = run_to_parquet(
        cli,
        tmp_path,
        "contrast",
        MAIN,
        "--a",
        "stale2",
        "--b",
        "clean",
        "--cohort",
        "factual_success",
    )
    assert [pp(v) for v in factual.sort("delay")["difference"]] == [13.98, 18.28, 15.05, 13.98]
    first = cell(factual, delay=0)
    assert (pp(first["ci_low"]), pp(first["ci_high"])) == (2.15, 24.73)
    assert (first["a"], first["b"], first["n_tasks"]) == ("stale2", "clean", 93)


def test_mechanism_cohort(cli: Callable, tmp_path: Path) -> None:
    overlap_out = tmp_path / "overlap.parquet"
    got = run_to_parquet(
        cli,
        tmp_path,
        "paired",
        MECHANISM,
        "--overlap",
        "refresh,content_ablated",
        "--overlap-out",
        overlap_out,
        "--ci-method",
        "percentile",
    )
    assert (got["n"] == 67).all()
    assert (got["prefix_mismatch"] == 7).all()
    stale = {r["method"]: r for r in got.filter(pl.col("condition") == "stale2").to_dicts()}
    assert {m: pp(r["effect"]) for m, r in stale.items()} == {
        "refresh": 13.43,
        "content_ablated": 10.45,
        "replan_only": 1.49,
    }
    assert stale["refresh"]["rescue"] == 10
    assert (pp(stale["refresh"]["ci_low"]), pp(stale["refresh"]["ci_high"])) == (4.48, 22.39)
    clean = {
        r["method"]: pp(r["effect"]) for r in got.filter(pl.col("condition") == "clean").to_dicts()
    }
    assert clean == {"refresh": -8.96, "content_ablated": -5.97, "replan_only": -14.93}
    overlap = cell(pl.read_parquet(overlap_out), condition="stale2", delay=4)
    assert (overlap["rescue_a"], overlap["rescue_b"], overlap["rescue_both"]) == (10, 9, 8)


def test_policy_test_table(cli: Callable, tmp_path: Path) -> None:
    got = run_to_parquet(cli, tmp_path, "policy", "--decisions", DECISIONS, "--forks", POLICY_FORKS)
    overall = cell(got, condition=None)
    assert overall["n"] == 300
    assert (pp(overall["base_rate"]), pp(overall["policy_rate"]), pp(overall["gain"])) == (
        70.33,
        73.33,
        3.00,
    )
    assert (overall["rescue"], overall["harm"], overall["interventions"]) == (11, 2, 49)
    assert round(overall["intervention_rate"] * 100, 1) == 16.3
    assert overall["clean_touch_rate"] == 0.0
    assert overall["ci_method"] == "cluster-melded"  # several episodes per task overall
    # the meld's own bounds and the p-value of the test they invert (one procedure): zero
    # inside, p >= 0.05; the sign-flip test's p = 0.0332 is reported in a column of its own
    assert overall["ci_low"] < 0 < overall["ci_high"]
    assert overall["p_value"] >= 0.05
    assert round(overall["p_sign_flip"], 4) == 0.0332
    expected = {
        "clean": (81.33, 81.33, 0, 0, 0),
        "stale1": (68.00, 69.33, 1, 0, 17),
        "stale2": (60.00, 69.33, 9, 2, 31),
        "missing": (72.00, 73.33, 1, 0, 1),
    }
    for condition, numbers in expected.items():
        row = cell(got, condition=condition)
        assert row["n"] == 75
        assert (
            pp(row["base_rate"]),
            pp(row["policy_rate"]),
            row["rescue"],
            row["harm"],
            row["interventions"],
        ) == numbers
    assert cell(got, condition="clean")["clean_touch_rate"] == 0.0


def test_readable_output_in_percentage_points(cli: Callable) -> None:
    result = cli("paired", MAIN)
    assert result.code == 0
    assert result.out.startswith("rescue and harm by condition, delay, method\n")
    assert "effect pp [CI]" in result.out
    assert "-3.8 [" in result.out
    assert "[paired" in result.err  # progress on stderr
    quiet = cli("--quiet", "contrast", MAIN, "--a", "stale2", "--b", "clean")
    assert quiet.code == 0
    assert quiet.err == ""
    assert "effect of stale2 minus effect of clean" in quiet.out
    assert "difference pp" in quiet.out
    assert "+10.4 [" in quiet.out
    policy = cli("policy", "--decisions", DECISIONS, "--forks", POLICY_FORKS, "--quiet")
    assert "gain pp [CI]" in policy.out
    assert re.search(r"^all +300 +\+3\.0 \[", policy.out, re.M)  # 73.3 - 70.3 pp, all conditions
    wide = cli("policy", "--decisions", DECISIONS, "--forks", POLICY_FORKS, "--quiet", "--wide")
    assert "73.3" in wide.out  # the policy's success rate, a secondary column


def test_pairs_and_exclusions_outputs(cli: Callable, tmp_path: Path) -> None:
    pairs_out = tmp_path / "pairs.parquet"
    excluded_out = tmp_path / "excluded.parquet"
    result = cli(
        "paired",
        MECHANISM,
        "--pairs-out",
        pairs_out,
        "--exclusions-out",
        excluded_out,
        "--out",
        tmp_path / "summary.parquet",
    )
    assert result.code == 0, result.err
    pairs = pl.read_parquet(pairs_out)
    assert pairs.height == 67 * 6
    assert pairs["outcome"].is_in(["rescue", "harm", "kept", "unchanged"]).all()
    excluded = pl.read_parquet(excluded_out)
    assert excluded.height == 7 * 6
    assert excluded["reason"].unique().to_list() == ["prefix_mismatch"]


def test_by_and_pair_by_options(cli: Callable, tmp_path: Path) -> None:
    got = run_to_parquet(cli, tmp_path, "paired", MAIN, "--by", "model", "--pair-by", "model")
    assert got["model"].unique().to_list() == ["Qwen3-14B"]
    assert pp(cell(got, condition="clean", delay=0)["effect"]) == -3.77


def test_errors_are_one_line_with_exit_2(cli: Callable, tmp_path: Path) -> None:
    result = cli("contrast", MAIN, "--a", "stale9", "--b", "clean")
    assert result.code == 2
    assert result.err.strip().splitlines()[-1] == (
        "recoverylab contrast: error: parameter `a` is 'stale9'; forks has no recovery rows "
        "with that condition (conditions: clean, stale2)."
    )
    missing = cli("paired", tmp_path / "nope.parquet")
    assert missing.code == 2
    assert missing.err.strip().endswith("does not exist.")
    bad = cli("paired", MAIN, "--overlap", "refresh")
    assert bad.code == 2
    assert bad.err.strip() == (
        "recoverylab paired: error: `--overlap` is 'refresh'; it must name two methods, e.g. "
        "refresh,content_ablated."
    )
    lonely = cli("paired", MAIN, "--overlap-out", tmp_path / "o.parquet")
    assert lonely.code == 2
    assert "`--overlap-out` needs `--overlap A,B`" in lonely.err
    clobber = cli("paired", MAIN, "--out", MAIN)
    assert clobber.code == 2
    assert "which is also an input" in clobber.err
    cohort = cli("paired", MECHANISM, "--cohort", "everyone")
    assert cohort.code == 2  # argparse choices
    decisions = tmp_path / "decisions.parquet"
    pl.read_parquet(DECISIONS).with_columns(pl.lit(3, dtype=pl.Int64).alias("delay")).write_parquet(
        decisions
    )
    policy = cli("policy", "--decisions", decisions, "--forks", POLICY_FORKS)
    assert policy.code == 2
    assert (
        policy.err.strip()
        .splitlines()[-1]
        .startswith(
            "recoverylab policy: error: decisions: 300 decisions choose a recovery point with no "
            "usable `refresh` pair in forks (task_id/condition/delay p001/clean/3,"
        )
    )
    assert not list(tmp_path.glob("out*.parquet"))


def test_a_bad_late_option_leaves_no_output_behind(cli: Callable, tmp_path: Path) -> None:
    # the unknown overlap method is found after the summary is computed: nothing is written
    outputs = {name: tmp_path / f"{name}.parquet" for name in ("s", "o", "pairs", "excluded")}
    result = cli(
        "paired",
        MAIN,
        "--overlap",
        "refresh,bogus",
        "--out",
        outputs["s"],
        "--overlap-out",
        outputs["o"],
        "--pairs-out",
        outputs["pairs"],
        "--exclusions-out",
        outputs["excluded"],
        "--resamples",
        100,
        "--quiet",
    )
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        "recoverylab paired: error: parameter `b` is 'bogus'; forks has no rows with that "
        "method (methods: refresh)."
    ]
    assert list(tmp_path.iterdir()) == []


def test_demo_writes_every_result(tmp_path: Path) -> None:
    messages: list[str] = []
    written = _paired.demo(tmp_path, messages.append)
    names = sorted(p.name for p in written)
    assert names == sorted(
        [
            "main_full_summary.parquet",
            "main_full_contrast.parquet",
            "main_factual_summary.parquet",
            "main_factual_contrast.parquet",
            "mechanism_summary.parquet",
            "mechanism_exclusions.parquet",
            "mechanism_overlap.parquet",
            "policy_summary.parquet",
            "judged_summary.parquet",
            "judged_agreement.parquet",
        ]
    )
    assert all(p.is_file() and p.parent == tmp_path / "paired" for p in written)
    assert messages
    policy = pl.read_parquet(tmp_path / "paired" / "policy_summary.parquet")
    assert pp(cell(policy, condition=None)["gain"]) == 3.00


def test_shipped_samples_equal_the_regeneration_script(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path in module.build(tmp_path):
        assert_frame_equal(pl.read_parquet(path), pl.read_parquet(SAMPLES / path.name))


@pytest.mark.parametrize("command", ["paired", "contrast", "policy"])
def test_help(cli: Callable, command: str) -> None:
    result = cli(command, "--help")
    assert result.code == 0
    assert "--seed" in result.out
    assert "--resamples" in result.out


def test_validate_checks_a_decision_table(cli, tmp_path) -> None:
    assert cli("validate", "decisions", DECISIONS).out == "ok: 300 rows\n"
    bad = tmp_path / "decisions.parquet"
    pl.read_parquet(DECISIONS).with_columns(pl.lit(-1).alias("delay")).write_parquet(bad)
    result = cli("validate", "decisions", bad)
    assert result.code == 2
    assert "decisions: column `delay` is negative on 300 rows" in result.err
