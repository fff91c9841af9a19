"""Command-line outputs: inputs are never overwritten, outputs are all-or-nothing, kill -9 safe.

Issue 13, defects 2-4 and 8: an output that is one of the files an input resolves to (through a
directory, a glob, a hive dataset or a symlink) or lies in an input directory is refused; several
outputs are committed together or none is left; a killed run leaves every target absent or at its
previous version and the next run removes its temporaries; ``--quiet`` prints nothing but errors;
an output is written in the format its suffix names.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SAMPLES

FORKS = SAMPLES / "paired" / "main_forks.parquet"
TAKEOVER = SAMPLES / "takeover"


def _dataset(root: Path) -> Path:
    forks = pl.read_parquet(FORKS)
    runs = root / "runs"
    runs.mkdir()
    tasks = forks["task_id"].unique().sort()
    half = tasks[len(tasks) // 2]
    forks.filter(pl.col("task_id") < half).write_parquet(runs / "part-0.parquet")
    forks.filter(pl.col("task_id") >= half).write_parquet(runs / "part-1.parquet")
    return runs


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    ("inputs", "out"),
    [
        (["runs"], "runs/part-0.parquet"),  # a file of an input directory
        (["runs/*.parquet"], "runs/part-0.parquet"),  # a file a glob matches
        (["runs"], "runs/new.parquet"),  # a new file inside an input directory
        (["runs/*.parquet"], "runs/new.parquet"),  # a new file the glob would read next time
        (["link.parquet"], "runs/part-0.parquet"),  # the target of a symlinked input
        (["runs/part-0.parquet", "runs/part-1.parquet"], "./runs/../runs/part-1.parquet"),
    ],
)
def test_an_output_that_is_an_input_is_refused(cli, tmp_path, monkeypatch, inputs, out) -> None:
    monkeypatch.chdir(tmp_path)
    _dataset(tmp_path)
    (tmp_path / "link.parquet").symlink_to(tmp_path / "runs" / "part-0.parquet")
    before = _snapshot(tmp_path)
    result = cli("paired", *inputs, "--out", out, "--resamples", "20")
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert "choose another path so no input is overwritten" in result.err
    assert _snapshot(tmp_path) == before


def test_every_output_option_is_guarded(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _dataset(tmp_path)
    before = _snapshot(tmp_path)
    for option in ("--pairs-out", "--exclusions-out"):
        result = cli("paired", "runs", option, "runs/part-1.parquet", "--resamples", "20")
        assert result.code == 2, option
        assert "is also an input" in result.err or "inside the input directory" in result.err
    hive = tmp_path / "hive"
    (hive / "model=a").mkdir(parents=True)
    pl.read_parquet(FORKS).write_parquet(hive / "model=a" / "part.parquet")
    result = cli("paired", "hive", "--out", "hive/model=a/part.parquet", "--resamples", "20")
    assert result.code == 2
    assert "inside the input directory" in result.err
    assert _snapshot(tmp_path) == {**before, **_snapshot(tmp_path)}  # nothing changed
    states = tmp_path / "states.parquet"
    pl.read_parquet(TAKEOVER / "states.parquet").write_parquet(states)
    result = cli("takeover", "--states", states, "--attempts", TAKEOVER / "attempts.parquet",
                 "--out-dir", tmp_path, "--resamples", "20")  # fmt: skip
    assert result.code == 0, result.err  # out-dir may hold inputs whose names it does not write
    attempts = TAKEOVER / "attempts.parquet"
    result = cli("takeover", "--states", tmp_path / "summary.parquet", "--attempts", attempts,
                 "--out-dir", tmp_path, "--resamples", "20")  # fmt: skip
    assert result.code == 2  # ... but never one it would overwrite


def test_a_failed_later_output_leaves_no_earlier_one(cli, tmp_path) -> None:
    (tmp_path / "B.parquet").mkdir()  # B cannot be written
    result = cli("paired", FORKS, "--pairs-out", tmp_path / "A.parquet",
                 "--exclusions-out", tmp_path / "E.parquet", "--out", tmp_path / "B.parquet",
                 "--resamples", "20", "--quiet")  # fmt: skip
    assert result.code == 2
    assert result.err == (
        f"recoverylab paired: error: cannot write `{tmp_path / 'B.parquet'}`: it is a directory.\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["B.parquet"]


def test_takeover_out_dir_is_all_or_nothing(cli, tmp_path) -> None:
    out = tmp_path / "out"
    (out / "summary.parquet").mkdir(parents=True)
    (out / "keep.txt").write_text("user file")
    result = cli("takeover", "--states", TAKEOVER / "states.parquet", "--attempts",
                 TAKEOVER / "attempts.parquet", "--failures", TAKEOVER / "failures.parquet",
                 "--out-dir", out, "--resamples", "20", "--quiet")  # fmt: skip
    assert result.code == 2
    assert "cannot write" in result.err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt", "summary.parquet"]


def test_goal_episodes_out_waits_for_the_summary(cli, tmp_path) -> None:
    diagnostic = SAMPLES / "goal" / "diagnostic"
    tables = [f"--{t}" for t in ("cases", "resources", "episodes", "steps", "citations")]
    args = [x for t in tables for x in (t, diagnostic / f"{t[2:]}.csv")]
    (tmp_path / "summary.parquet").mkdir()
    result = cli("goal", *args, "--episodes-out", tmp_path / "episodes.parquet",
                 "--out", tmp_path / "summary.parquet", "--resamples", "20")  # fmt: skip
    assert result.code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.parquet"]
    result = cli("goal", *args, "--episodes-out", tmp_path / "episodes.csv",
                 "--out", tmp_path / "s.csv", "--resamples", "20")  # fmt: skip
    assert result.code == 2  # the scored episodes hold a list column
    assert "is CSV, which cannot hold the nested column" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.parquet"]
    result = cli("goal", *args, "--episodes-out", tmp_path / "episodes.ndjson",
                 "--out", tmp_path / "s.csv", "--resamples", "20")  # fmt: skip
    assert result.code == 0, result.err
    assert pl.read_ndjson(tmp_path / "episodes.ndjson").height == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "episodes.ndjson",
        "s.csv",
        "summary.parquet",
    ]


def test_quiet_prints_nothing_but_errors(cli, tmp_path) -> None:
    result = cli("--quiet", "paired", FORKS, "--out", tmp_path / "s.parquet", "--resamples", "20")
    assert (result.code, result.err) == (0, "")
    result = cli("paired", FORKS, "--out", tmp_path / "s.parquet", "--resamples", "20")
    assert f"wrote {tmp_path / 's.parquet'}" in result.err


@pytest.mark.parametrize(
    ("suffix", "reader"),
    [
        (".csv", pl.read_csv),
        (".ndjson", pl.read_ndjson),
        (".arrow", pl.read_ipc),
        (".json", pl.read_json),
        (".parquet", pl.read_parquet),
    ],
)
def test_out_is_written_in_the_format_its_suffix_names(cli, tmp_path, suffix, reader) -> None:
    out = tmp_path / f"cells{suffix}"
    result = cli("paired", FORKS, "--out", out, "--resamples", "20", "--seed", "1")
    assert result.code == 0, result.err
    reference = tmp_path / "reference.parquet"
    assert cli("paired", FORKS, "--out", reference, "--resamples", "20", "--seed", "1").code == 0
    expected = pl.read_parquet(reference)
    got = reader(out)
    assert got.height == expected.height
    assert got["rescue"].to_list() == expected["rescue"].to_list()


def test_an_unknown_output_suffix_is_refused(cli, tmp_path) -> None:
    result = cli("paired", FORKS, "--out", tmp_path / "cells.txt")
    assert result.code == 2
    assert "has the suffix '.txt'; recoverylab writes" in result.err
    assert list(tmp_path.iterdir()) == []


def test_input_format_reads_a_file_without_a_known_suffix(cli, tmp_path) -> None:
    data = tmp_path / "forks.data"
    data.write_bytes(FORKS.read_bytes())
    result = cli("paired", data, "--resamples", "20")
    assert result.code == 2
    assert "`--input-format` on the command line" in result.err
    result = cli("paired", data, "--input-format", "parquet", "--resamples", "20", "--quiet")
    assert result.code == 0, result.err


# --- crashes and concurrency --------------------------------------------------------------------


def _start(*args: object, cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "recoverylab", "--quiet", *map(str, args)],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*") if p.name.endswith((".tmp", ".old"))]


def _kill_when(process: subprocess.Popen[bytes], root: Path, delay: float) -> bool:
    """Kill -9 once a temporary exists under ``root`` (or after ``delay``); True if one did."""
    deadline = time.monotonic() + delay
    seen = False
    while process.poll() is None and time.monotonic() < deadline:
        if _temporaries(root):
            seen = True
            break
        time.sleep(0.002)
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return seen


def test_kill_9_during_synth_leaves_no_incomplete_dataset(tmp_path: Path) -> None:
    previous = tmp_path / "out"
    assert _start("synth", "forks", "--tasks", 300, "--seed", 1, "--out", previous,
                  cwd=tmp_path).wait() == 0  # fmt: skip
    before = _snapshot(previous)
    killed_mid_write = 0
    for delay in (0.5, 1.0, 2.0, 3.0):
        process = _start("synth", "forks", "--tasks", 60_000, "--chunk-tasks", 1_000,
                         "--seed", 2, "--out", previous, cwd=tmp_path)  # fmt: skip
        killed_mid_write += _kill_when(process, previous, delay)
        assert _snapshot(previous) == before  # the previous version, whole
    assert killed_mid_write  # at least one kill hit the write itself
    assert _start("synth", "forks", "--tasks", 300, "--seed", 3, "--out", previous,
                  cwd=tmp_path).wait() == 0  # fmt: skip
    assert not _temporaries(tmp_path)  # the next run removed what the killed ones left
    assert len(list((previous / "forks").glob("part-*.parquet"))) == 1


@pytest.mark.parametrize("previous", [True, False])
def test_kill_9_during_a_multi_output_command(tmp_path: Path, previous: bool) -> None:
    big = tmp_path / "forks.parquet"
    forks = pl.read_parquet(FORKS)
    pl.concat([forks.with_columns(pl.col("task_id") + f"-{i}") for i in range(40)]).write_parquet(
        big
    )
    outs = {name: tmp_path / f"{name}.parquet" for name in ("pairs", "cells")}
    args = ("paired", big, "--pairs-out", outs["pairs"], "--out", outs["cells"],
            "--resamples", "200")  # fmt: skip
    if previous:
        assert _start(*args, cwd=tmp_path).wait() == 0
    before = {name: p.read_bytes() if p.exists() else None for name, p in outs.items()}
    for delay in (0.3, 0.8, 1.5, 2.5):
        _kill_when(_start(*args, cwd=tmp_path), tmp_path, delay)
        after = {name: p.read_bytes() if p.exists() else None for name, p in outs.items()}
        assert after == before
    assert _start(*args, cwd=tmp_path).wait() == 0
    assert not _temporaries(tmp_path)
    assert pl.read_parquet(outs["cells"]).height > 0


def test_two_runs_writing_the_same_outputs_end_with_one_complete_result(tmp_path) -> None:
    out = tmp_path / "out"
    runs = [
        _start(
            "synth",
            "forks",
            "--tasks",
            30_000,
            "--chunk-tasks",
            10_000,
            "--seed",
            seed,
            "--out",
            out,
            cwd=tmp_path,
        )
        for seed in (1, 2)
    ]
    assert [run.wait() for run in runs] == [0, 0]
    parts = sorted((out / "forks").glob("part-*.parquet"))
    dataset = pl.read_parquet(parts)
    seeds = {}
    for seed in (1, 2):
        single = tmp_path / f"single-{seed}"
        assert _start("synth", "forks", "--tasks", 30_000, "--chunk-tasks", 10_000, "--seed", seed,
                      "--out", single, cwd=tmp_path).wait() == 0  # fmt: skip
        seeds[seed] = sorted((single / "forks").glob("part-*.parquet"))
    assert len(parts) == len(seeds[1]) > 1
    assert any(dataset.equals(pl.read_parquet(s)) for s in seeds.values())  # one run's, no mix
    assert not _temporaries(tmp_path)
