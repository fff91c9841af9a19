"""``recoverylab goal``: the diagnostic sample, outputs, the nested form, errors, the demo."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from recoverylab.cli import _goal

SAMPLES = Path(__file__).resolve().parents[1] / "data_samples" / "goal"
DIAGNOSTIC = SAMPLES / "diagnostic"
SYNTHETIC = SAMPLES / "synthetic"
TABLES = ("cases", "resources", "episodes", "steps", "citations")


def table_args(root: Path, suffix: str = ".csv") -> list[object]:
    args: list[object] = []
    for name in TABLES:
        args += [f"--{name}", root / f"{name}{suffix}" if suffix else root / name]
    return args


def test_diagnostic_sample_gives_the_seed_numbers(cli, tmp_path) -> None:
    out = tmp_path / "summary.parquet"
    result = cli("goal", *table_args(DIAGNOSTIC), "--by", "", "--out", out, "--resamples", 500)
    assert result.code == 0, result.err
    row = pl.read_parquet(out).row(0, named=True)
    assert (row["n"], row["ts"], row["violation_rate"], row["mean_steps"]) == (4, 0.5, 0.25, 1.75)
    assert f"wrote {out} (1 row)" in result.err


def test_printed_summary_shows_percentage_points(cli, monkeypatch) -> None:
    result = cli("goal", *table_args(DIAGNOSTIC), "--by", "", "--resamples", 200, "--quiet")
    assert result.code == 0, result.err
    assert result.out.startswith("goal preservation by all episodes")
    assert "ts pp [CI]" in result.out  # rates are printed in percentage points
    assert "50.0 [" in result.out
    assert "mean steps" not in result.out  # the narrow view: keys, n, rates, p
    assert result.err == ""
    monkeypatch.setenv("COLUMNS", "1000")  # every header on one line
    wide = cli("goal", *table_args(DIAGNOSTIC), "--by", "", "--resamples", 200, "--quiet", "--wide")
    assert "mean steps" in wide.out
    assert " 1.8 " in wide.out  # 1.75 mean steps, one decimal as every other decimal


def test_default_grouping_is_regime(cli, tmp_path) -> None:
    out = tmp_path / "summary.parquet"
    result = cli("goal", *table_args(DIAGNOSTIC), "--out", out, "--resamples", 200, "--quiet")
    assert result.code == 0, result.err
    summary = pl.read_parquet(out)
    assert summary["regime"].to_list() == ["recoverable", "unrecoverable"]
    assert summary["n"].to_list() == [3, 1]
    assert summary["ts"].to_list() == [1 / 3, 1.0]


def test_episodes_out_and_progress(cli, tmp_path) -> None:
    episodes = tmp_path / "episodes.parquet"
    out = tmp_path / "summary.parquet"
    result = cli(
        "goal",
        *table_args(DIAGNOSTIC),
        "--episodes-out",
        episodes,
        "--out",
        out,
        "--resamples",
        200,
    )
    assert result.code == 0, result.err
    scored = pl.read_parquet(episodes)
    assert scored["episode_id"].to_list() == ["e1", "e2", "e3", "e4"]
    assert scored["reason"].to_list() == [None, "no_copy_used", None, "policy_violation"]
    assert "contract" in scored.columns  # extra episode columns are carried
    assert f"wrote {episodes} (4 rows)" in result.err
    assert "[goal " in result.err  # progress lines


def test_nested_episodes_without_steps_and_citations(cli, tmp_path) -> None:
    out = tmp_path / "summary.parquet"
    result = cli(
        "goal",
        "--cases",
        DIAGNOSTIC / "cases.csv",
        "--resources",
        DIAGNOSTIC / "resources.csv",
        "--episodes",
        DIAGNOSTIC / "episodes_nested.ndjson",
        "--by",
        "",
        "--out",
        out,
        "--resamples",
        200,
        "--quiet",
    )
    assert result.code == 0, result.err
    row = pl.read_parquet(out).row(0, named=True)
    assert (row["ts"], row["violation_rate"], row["mean_steps"]) == (0.5, 0.25, 1.75)


def test_synthetic_by_model_with_barrier_drop(cli, tmp_path) -> None:
    out, drop = tmp_path / "summary.parquet", tmp_path / "drop.parquet"
    result = cli(
        "goal",
        *table_args(SYNTHETIC, suffix=""),
        "--by",
        "model,regime",
        "--out",
        out,
        "--drop-out",
        drop,
        "--resamples",
        300,
        "--seed",
        5,
        "--quiet",
    )
    assert result.code == 0, result.err
    summary = pl.read_parquet(out)
    assert summary.height == 4 * 3
    assert summary["n"].to_list() == [225] * 12
    assert {"recovered_rate", "honest_report_rate"} <= set(summary.columns)
    dropped = pl.read_parquet(drop)
    assert dropped["model"].to_list() == ["model-a", "model-b", "model-c", "model-d"]
    assert dropped["goals"].to_list() == [225] * 4
    assert (dropped["drop"] > 0.3).all()


def test_steps_without_citations_is_refused(cli) -> None:
    result = cli(
        "goal",
        "--cases",
        DIAGNOSTIC / "cases.csv",
        "--resources",
        DIAGNOSTIC / "resources.csv",
        "--episodes",
        DIAGNOSTIC / "episodes.csv",
        "--steps",
        DIAGNOSTIC / "steps.csv",
    )
    assert result.code == 2
    assert result.err == (
        "recoverylab goal: error: give both --steps and --citations, or neither (episodes in "
        "the nested form).\n"
    )


def test_inconsistent_tables_exit_2_with_one_line(cli, tmp_path) -> None:
    episodes = pl.read_csv(DIAGNOSTIC / "episodes.csv").with_columns(
        pl.when(pl.col("episode_id") == "e3")
        .then(pl.lit("d9"))
        .otherwise("case_id")
        .alias("case_id")
    )
    bad = tmp_path / "episodes.csv"
    episodes.write_csv(bad)
    args = table_args(DIAGNOSTIC)
    args[args.index("--episodes") + 1] = bad
    result = cli("goal", *args, "--quiet")
    assert result.code == 2
    assert result.err == (
        "recoverylab goal: error: episodes: 1 episode of unknown cases (episode_id/case_id "
        "e3/d9); every episode's `case_id` must be a case in `cases`.\n"
    )
    assert result.out == ""


def test_missing_file_exits_2(cli, tmp_path) -> None:
    args = table_args(DIAGNOSTIC)
    args[args.index("--steps") + 1] = tmp_path / "nope.csv"
    result = cli("goal", *args, "--quiet")
    assert result.code == 2
    assert result.err.startswith("recoverylab goal: error: `")
    assert "nope.csv` does not exist." in result.err


def test_output_over_an_input_is_refused(cli, tmp_path) -> None:
    cases = tmp_path / "cases.parquet"
    pl.read_csv(DIAGNOSTIC / "cases.csv").write_parquet(cases)
    before = cases.read_bytes()
    args = table_args(DIAGNOSTIC)
    args[args.index("--cases") + 1] = cases
    result = cli("goal", *args, "--out", cases)
    assert result.code == 2
    assert "is also an input" in result.err
    assert cases.read_bytes() == before


def test_bad_grouping_exits_2(cli) -> None:
    result = cli("goal", *table_args(DIAGNOSTIC), "--by", "split", "--quiet")
    assert result.code == 2
    assert result.err.startswith(
        "recoverylab goal: error: parameter `by` names `split`, which the scored frame does not "
        "have"
    )


def test_bad_grouping_leaves_no_scored_episodes_behind(cli, tmp_path) -> None:
    # the episodes are scored before the summary finds the unknown column: they are not kept
    episodes_out = tmp_path / "sub" / "episodes.parquet"
    result = cli(
        "goal",
        *table_args(DIAGNOSTIC),
        "--by",
        "split",
        "--episodes-out",
        episodes_out,
        "--out",
        tmp_path / "summary.parquet",
        "--quiet",
    )
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.rglob("*")] == ["sub"]


def test_help_lists_the_options(cli) -> None:
    result = cli("goal", "--help")
    assert result.code == 0
    for option in ("--cases", "--steps", "--episodes-out", "--drop-out", "--by", "--cluster"):
        assert option in result.out


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("demo")
    messages: list[str] = []
    return _goal.demo(out, messages.append)


def test_demo_writes_its_outputs(demo_files) -> None:
    names = sorted(p.name for p in demo_files)
    assert names == sorted(
        [
            "diagnostic_episodes.parquet",
            "diagnostic_summary.parquet",
            "synthetic_episodes.parquet",
            "synthetic_summary.parquet",
            "synthetic_by_model.parquet",
            "synthetic_by_category.parquet",
            "synthetic_drop.parquet",
            "judged.parquet",
            "judged_agreement.parquet",
        ]
    )
    assert all(p.is_file() and p.parent.name == "goal" for p in demo_files)
    by_name = {p.name: p for p in demo_files}
    diagnostic = pl.read_parquet(by_name["diagnostic_summary.parquet"]).row(0, named=True)
    assert (diagnostic["ts"], diagnostic["violation_rate"], diagnostic["mean_steps"]) == (
        0.5,
        0.25,
        1.75,
    )
    summary = pl.read_parquet(by_name["synthetic_summary.parquet"])
    assert summary["regime"].to_list() == ["barrier_free", "recoverable", "unrecoverable"]
    assert pl.read_parquet(by_name["synthetic_by_category.parquet"])["category"].n_unique() == 4
    episodes = pl.read_parquet(by_name["synthetic_episodes.parquet"])
    assert episodes.filter(pl.col("success") != pl.col("planted_success")).height == 0
