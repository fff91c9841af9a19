"""Staged, all-or-nothing writes (recoverylab._outputs): commit, abort, rollback, stale cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from recoverylab import OutputError
from recoverylab._outputs import (
    OutputSet,
    _temp_prefix,
    atomic_dir,
    atomic_file,
    remove_stale_temporaries,
    scratch_dir,
)
from recoverylab.io import write_parquet, write_table


def _dead_pid() -> int:
    """A pid that surely belongs to no running process (a child that has exited)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    return int(child.stdout)


def _stale_name(target: Path, pid: int, suffix: str = ".tmp") -> Path:
    prefix = _temp_prefix(target).rsplit("-", 1)[0]  # ".NAME.<host>"
    return target.parent / f"{prefix}-{pid}.abc123{suffix}"


def test_outputs_are_committed_together(tmp_path: Path) -> None:
    with OutputSet() as outputs:
        outputs.stage_file(tmp_path / "a.txt").write_text("a")
        outputs.stage_file(tmp_path / "sub" / "b.txt").write_text("b")
        assert not (tmp_path / "a.txt").exists()  # nothing visible before the commit
    assert (tmp_path / "a.txt").read_text() == "a"
    assert (tmp_path / "sub" / "b.txt").read_text() == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "sub"]


def test_a_failure_leaves_no_output_and_keeps_previous_versions(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old")

    def failing_job() -> None:
        with OutputSet() as outputs:
            outputs.stage_file(tmp_path / "a.txt").write_text("new")
            outputs.stage_file(tmp_path / "b.txt").write_text("b")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_job()
    assert (tmp_path / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_a_failed_rename_rolls_back_the_renamed_outputs(tmp_path, monkeypatch) -> None:
    (tmp_path / "a.txt").write_text("old a")
    real_replace = os.replace
    calls = []

    def failing_replace(src, dst):
        calls.append(dst)
        if Path(dst).name == "b.txt":
            raise PermissionError(13, "Permission denied")
        return real_replace(src, dst)

    outputs = OutputSet()
    outputs.stage_file(tmp_path / "a.txt").write_text("new a")
    outputs.stage_file(tmp_path / "b.txt").write_text("new b")
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OutputError, match=r"cannot write `.*b\.txt` \(Permission denied\)"):
        outputs.commit()
    monkeypatch.undo()
    assert (tmp_path / "a.txt").read_text() == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_a_directory_in_the_way_is_our_error(tmp_path: Path) -> None:
    (tmp_path / "out.parquet").mkdir()
    with pytest.raises(OutputError, match=r"cannot write `.*out\.parquet`: it is a directory"):
        write_parquet(pl.DataFrame({"a": [1]}), tmp_path / "out.parquet")


def test_the_same_target_twice_is_refused(tmp_path: Path) -> None:
    outputs = OutputSet()
    outputs.stage_file(tmp_path / "a.txt")
    with pytest.raises(OutputError, match="named as two outputs"):
        outputs.stage_file(tmp_path / "." / "a.txt")
    outputs.abort()
    assert list(tmp_path.iterdir()) == []


def test_stale_temporaries_of_dead_processes_are_removed_by_the_next_write(tmp_path) -> None:
    target = tmp_path / "out.parquet"
    dead = _stale_name(target, _dead_pid())
    dead.write_bytes(b"partial")
    dead_dir = _stale_name(target, _dead_pid(), ".old")
    dead_dir.mkdir()
    alive = _stale_name(target, os.getppid())  # the pytest runner's parent runs
    alive.write_bytes(b"in progress")
    other = tmp_path / ".other.parquet.ffffff-1.x.tmp"  # another target's: not ours to touch
    other.write_bytes(b"x")
    write_parquet(pl.DataFrame({"a": [1]}), target)
    assert not dead.exists()
    assert not dead_dir.exists()
    assert alive.exists()
    assert other.exists()
    assert pl.read_parquet(target)["a"].to_list() == [1]


def test_remove_stale_temporaries_reports_what_it_removed(tmp_path: Path) -> None:
    target = tmp_path / "x.csv"
    dead = _stale_name(target, _dead_pid())
    dead.write_text("x")
    assert remove_stale_temporaries(target) == [dead]
    assert remove_stale_temporaries(target) == []


def test_atomic_dir_replaces_a_dataset_whole(tmp_path: Path) -> None:
    target = tmp_path / "forks"
    target.mkdir()
    for i in range(3):
        (target / f"part-{i}.parquet").write_bytes(b"old")
    with atomic_dir(target) as staging:
        (staging / "part-0.parquet").write_bytes(b"new")
        assert sorted(p.name for p in target.iterdir()) == [f"part-{i}.parquet" for i in range(3)]
    assert sorted(p.name for p in target.iterdir()) == ["part-0.parquet"]  # no old part mixes in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forks"]


def test_a_tree_replaces_only_its_own_entries(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "keep").mkdir(parents=True)
    (out / "keep" / "mine.txt").write_text("user file")
    (out / "paired").mkdir()
    (out / "paired" / "stale.parquet").write_text("old")
    with OutputSet() as outputs:
        staging = outputs.stage_tree(out)
        (staging / "paired").mkdir()
        (staging / "paired" / "summary.parquet").write_text("new")
        (staging / "report.html").write_text("<html>")
    assert (out / "keep" / "mine.txt").read_text() == "user file"
    assert sorted(p.name for p in (out / "paired").iterdir()) == ["summary.parquet"]
    assert (out / "report.html").read_text() == "<html>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_writes_inside_an_active_set_wait_for_its_commit(tmp_path: Path) -> None:
    outputs = OutputSet()
    with outputs.activate():
        write_parquet(pl.DataFrame({"a": [1]}), tmp_path / "a.parquet")
        with atomic_file(tmp_path / "b.bin") as handle:
            handle.write(b"b")
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == []
    outputs.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.bin"]


def test_a_failed_write_inside_an_active_set_is_discarded(tmp_path: Path) -> None:
    outputs = OutputSet()
    with outputs.activate():

        def failing_writer() -> None:
            with atomic_file(tmp_path / "half.bin") as handle:
                handle.write(b"half")
                raise RuntimeError("writer failed")

        with pytest.raises(RuntimeError, match="writer failed"):
            failing_writer()
        write_parquet(pl.DataFrame({"a": [1]}), tmp_path / "whole.parquet")
    outputs.commit()  # a caller that caught the error goes on: the half file is never committed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["whole.parquet"]


def test_the_guard_refuses_before_anything_is_staged(tmp_path: Path) -> None:
    def guard(target: Path) -> None:
        if target.name == "input.parquet":
            raise OutputError("that is an input")

    outputs = OutputSet(guard=guard)
    with pytest.raises(OutputError, match="that is an input"):
        outputs.stage_file(tmp_path / "input.parquet")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("suffix", "reader"),
    [
        (".parquet", pl.read_parquet),
        (".arrow", pl.read_ipc),
        (".csv", pl.read_csv),
        (".ndjson", pl.read_ndjson),
        (".json", pl.read_json),
    ],
)
def test_write_table_writes_what_the_suffix_names(tmp_path: Path, suffix, reader) -> None:
    frame = pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    for data in (frame, frame.lazy()):
        path = write_table(data, tmp_path / f"out{suffix}")
        assert reader(path).equals(frame)


def test_write_table_refuses_an_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"output `.*out\.txt` has the suffix '\.txt'"):
        write_table(pl.DataFrame({"a": [1]}), tmp_path / "out.txt")
    assert list(tmp_path.iterdir()) == []


def test_scratch_dirs_are_removed_and_stale_ones_cleaned(tmp_path: Path) -> None:
    near = tmp_path / "episodes.parquet"
    stale = _stale_name(tmp_path / "recoverylab-scratch", _dead_pid())
    stale.mkdir()
    with scratch_dir(near) as scratch:
        (scratch / "x").write_text("x")
        assert not stale.exists()
    assert list(tmp_path.iterdir()) == []
