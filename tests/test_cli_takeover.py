"""Tests of ``recoverylab takeover`` and its demo (recoverylab.cli._takeover)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from recoverylab import takeover
from recoverylab.cli import _takeover
from tests.conftest import SAMPLES

TAKEOVER = SAMPLES / "takeover"
STATES = TAKEOVER / "states.parquet"
ATTEMPTS = TAKEOVER / "attempts.parquet"
FAILURES = TAKEOVER / "failures.parquet"
MUTATIONS = TAKEOVER / "mutations.parquet"


def full_args(out_dir: Path, *extra: object) -> list[object]:
    return [
        "takeover",
        "--states",
        STATES,
        "--attempts",
        ATTEMPTS,
        "--failures",
        FAILURES,
        "--mutations",
        MUTATIONS,
        "--compare",
        "agent_a,agent_b",
        "--resamples",
        200,
        "--out-dir",
        out_dir,
        *extra,
    ]


def test_writes_one_parquet_per_table(cli: Callable, tmp_path: Path) -> None:
    result = cli(*full_args(tmp_path, "--seed", 5))
    assert result.code == 0, result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{name}.parquet" for name in _takeover.TABLES
    )
    summary = pl.read_parquet(tmp_path / "summary.parquet")
    expected = takeover.summarize(STATES, ATTEMPTS, n_resamples=200, seed=5)
    assert summary.equals(expected)
    latency = pl.read_parquet(tmp_path / "latency.parquet")
    assert latency.select("annotated", "surfaced", "at_final_step").row(0) == (619, 602, 361)
    comparison = pl.read_parquet(tmp_path / "comparison.parquet")
    assert comparison["depth"].to_list() == [0, 5, 10, 15, 20, 25]
    assert set(comparison["a"]) == {"agent_a"}
    eligibility = pl.read_parquet(tmp_path / "eligibility.parquet")
    assert eligibility.height == 6
    assert pl.read_parquet(tmp_path / "leakage.parquet").height == 0
    assert pl.read_parquet(tmp_path / "verifier_gate.parquet").height == 100
    awareness = pl.read_parquet(tmp_path / "awareness.parquet")
    assert set(awareness["interpretation"]) == {"association, not an effect"}
    assert "summarising by agent, depth (bootstrap intervals)" in result.err
    assert f"wrote {tmp_path / 'summary.parquet'} (36 rows)" in result.err


def test_options_reach_the_summary(cli: Callable, tmp_path: Path) -> None:
    result = cli(
        "takeover",
        "--states",
        STATES,
        "--attempts",
        ATTEMPTS,
        "--by",
        "agent,depth",
        "--common-sample",
        "--common-states",
        "--interval",
        "wilson",
        "--k",
        "2",
        "--out-dir",
        tmp_path,
    )
    assert result.code == 0, result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "awareness.parquet",
        "eligibility.parquet",
        "leakage.parquet",
        "reliability.parquet",
        "summary.parquet",
    ]
    summary = pl.read_parquet(tmp_path / "summary.parquet")
    expected = takeover.summarize(
        STATES, ATTEMPTS, k=2, common_sample=True, common_states=True, interval="wilson"
    )
    assert summary.equals(expected)
    assert set(summary["k"]) == {2}
    assert (
        summary.group_by("depth")
        .agg(pl.col("attempted_states").n_unique())["attempted_states"]
        .max()
        == 1
    )


def test_prints_tables_without_out_dir(cli: Callable) -> None:
    result = cli(
        "takeover",
        "--states",
        STATES,
        "--attempts",
        ATTEMPTS,
        "--failures",
        FAILURES,
        "--by",
        "agent",
        "--interval",
        "wilson",
        "--quiet",
    )
    assert result.code == 0, result.err
    for name in ("eligibility", "summary", "funnel", "awareness", "latency"):
        assert f"== {name}" in result.out
    assert result.out.startswith("== eligibility\n")
    assert "secondary columns not shown; --wide shows every column" in result.out
    assert "pass at k pp [CI]" in result.out  # rates shown in percentage points
    assert result.err == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--compare", "agent_a"],
            "recoverylab takeover: error: `--compare` is 'agent_a'; give exactly two agents, "
            "e.g. --compare agent_a,agent_b.",
        ),
        (
            ["--compare", "agent_a,agent_z"],
            "recoverylab takeover: error: parameter `b` is 'agent_z', which is not an agent in "
            "`attempts` (agents: agent_a, agent_b, agent_c, agent_d, agent_e and 1 more).",
        ),
        (
            ["--k", "4"],
            "recoverylab takeover: error: parameter `k` is 4 but ",
        ),
        (
            ["--by", "depth"],
            "recoverylab takeover: error: parameter `by` is ['depth']; it must include `agent`",
        ),
    ],
)
def test_bad_parameters_exit_2_with_one_line(
    cli: Callable, tmp_path: Path, extra: list[str], message: str
) -> None:
    result = cli(
        "takeover",
        "--states",
        STATES,
        "--attempts",
        ATTEMPTS,
        "--interval",
        "wilson",
        "--out-dir",
        tmp_path / "out",
        "--quiet",
        *extra,
    )
    assert result.code == 2
    assert result.err.startswith(message)
    assert result.err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # nothing is written when a table fails


def test_bad_input_exits_2_and_writes_nothing(cli: Callable, tmp_path: Path) -> None:
    attempts = pl.read_parquet(ATTEMPTS)
    broken = pl.concat([attempts, attempts.head(1)])
    broken.write_parquet(tmp_path / "attempts.parquet")
    result = cli(
        "takeover",
        "--states",
        STATES,
        "--attempts",
        tmp_path / "attempts.parquet",
        "--out-dir",
        tmp_path / "out",
        "--quiet",
    )
    assert result.code == 2
    assert result.err.startswith(
        "recoverylab takeover: error: attempts: 1 key appears more than once (state_id/agent/"
        "repeat w000000-r0-d00/agent_a/0); each (state_id, agent, repeat) must be unique."
    )
    assert not (tmp_path / "out").exists()


def test_refuses_to_overwrite_an_input(cli: Callable, tmp_path: Path) -> None:
    states = tmp_path / "summary.parquet"
    pl.read_parquet(STATES).write_parquet(states)
    before = states.read_bytes()
    result = cli("takeover", "--states", states, "--attempts", ATTEMPTS, "--out-dir", tmp_path)
    assert result.code == 2
    assert "which is also an input; choose another path" in result.err
    assert states.read_bytes() == before


def test_missing_file_is_one_line(cli: Callable, tmp_path: Path) -> None:
    result = cli("takeover", "--states", tmp_path / "nope.parquet", "--attempts", ATTEMPTS)
    assert result.code == 2
    assert (
        result.err
        == f"recoverylab takeover: error: `{tmp_path / 'nope.parquet'}` does not exist.\n"
    )


def test_listed_in_help(cli: Callable) -> None:
    result = cli("--help")
    assert "takeover" in result.out
    sub = cli("takeover", "--help")
    assert sub.code == 0
    assert "--common-sample" in sub.out


def test_demo_writes_every_table(tmp_path: Path) -> None:
    messages: list[str] = []
    written = _takeover.demo(tmp_path, messages.append)
    names = sorted(p.name for p in written)
    assert names == sorted(
        [f"{name}.parquet" for name in _takeover.TABLES]
        + ["summary_common_sample.parquet", "summary_by_agent.parquet"]
        + ["judged.parquet", "judged_agreement.parquet", "judged_pass_k.parquet"]
    )
    assert all(p.parent == tmp_path / "takeover" and p.exists() for p in written)
    common = pl.read_parquet(tmp_path / "takeover" / "summary_common_sample.parquet")
    assert (
        common.group_by("agent").agg(pl.col("root_causes").n_unique())["root_causes"] == 1
    ).all()
    latency = pl.read_parquet(tmp_path / "takeover" / "latency.parquet")
    assert latency.select("surfaced", "annotated").row(0) == (602, 619)
    assert all(m.startswith("takeover: ") for m in messages)
