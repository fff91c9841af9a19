"""Mutation fuzzer for the OSWorld adapter (issue 39, point 5; see ``tests/fuzz_support.py``).

A genuine-shaped OSWorld results tree (:func:`recoverylab.synth.osworld_runs.write_osworld_runs`)
is mutated one or two finished examples at a time: ``result.txt`` deleted, holding text, another
number, bytes that are not text, compressed; ``traj.jsonl`` cut, nested too deep, deleted or
compressed; example directories deleted, emptied, copied, or given stray files. Each mutation
states its effect on the import (a count moved, or one line naming the file) and the run must
agree.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given

from recoverylab.adapters import osworld
from recoverylab.synth.osworld_runs import write_osworld_runs
from tests import fuzz_support as fz

TEXTS = ("None", "", "abc", "1.0 2.0", "nan", "inf", "True")
NUMBERS = ("0.5", "1", " 1.0 \n", "1e0", "-0.0", "0")


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fz.Outcome]:
    """One model, two domains, four examples each (a few unfinished, as drawn)."""
    root = tmp_path_factory.mktemp("osworld") / "results"
    write_osworld_runs(root, models=("m",), domains=("chrome", "os"), examples=4, seed=3)
    base = fz.run_python(lambda: osworld.read(root), "trials")
    assert base.error is None
    assert base.rows + sum(base.excluded.values()) == 8
    assert base.rows >= 4
    return root, base


def _mutate_example(data: st.DataObject, example: Path, unique: int) -> fz.Expect:
    """Change one finished example; return what the change does to the import."""
    result, traj = example / "result.txt", example / "traj.jsonl"
    kind = data.draw(
        st.sampled_from(
            [
                "delete_result",
                "text_result",
                "number_result",
                "bad_bytes_result",
                "compress_result",
                "cut_traj",
                "deep_traj",
                "delete_traj",
                "compress_traj",
                "delete_example",
                "empty_example",
                "stray_file",
                "copy_example",
            ]
        ),
        label=f"mutation of {example.name}",
    )
    if kind == "delete_result":
        result.unlink()
        return fz.excluded("unfinished")
    if kind == "text_result":
        fz.write(result, data.draw(st.sampled_from(TEXTS)).encode())
        return fz.error(result)
    if kind == "number_result":
        fz.write(result, data.draw(st.sampled_from(NUMBERS)).encode())
        return fz.SAME
    if kind == "bad_bytes_result":
        fz.write(result, b"\xc3\x28 1.0")
        return fz.error(result)
    if kind == "compress_result":
        fz.compress(result, data.draw(st.sampled_from(fz.CODECS)))
        return fz.SAME
    if kind == "cut_traj":
        lines = traj.read_text().splitlines()
        fz.write(traj, ("\n".join([lines[0][:-1], *lines[1:]]) + "\n").encode())
        return fz.error(traj)
    if kind == "deep_traj":
        line = fz.dump(
            {"step_num": 99, "action": fz.DEEP}, depth=data.draw(st.sampled_from([101, 100_000]))
        )
        fz.write(traj, traj.read_bytes() + line + b"\n")
        return fz.error(traj)
    if kind == "delete_traj":
        traj.unlink()
        return fz.SAME
    if kind == "compress_traj":
        fz.compress(traj, data.draw(st.sampled_from(fz.CODECS)))
        return fz.SAME
    if kind == "delete_example":
        shutil.rmtree(example)
        return fz.Expect("delta", rows=-1)
    if kind == "empty_example":
        for file in example.iterdir():
            file.unlink()
        return fz.excluded("unfinished")
    if kind == "stray_file":
        (example / "notes.md").write_text("looked fine\n")
        return fz.SAME
    shutil.copytree(example, example.with_name(f"copy-{unique}-{example.name}"))
    return fz.Expect("delta", rows=1)


def _case(data: st.DataObject, root: Path) -> fz.Expect:
    finished = sorted(p.parent for p in root.rglob("result.txt"))
    chosen = data.draw(st.lists(st.sampled_from(finished), min_size=1, max_size=2, unique=True))
    expect = fz.SAME
    for unique, example in enumerate(chosen):
        expect = expect + _mutate_example(data, example, unique)
    if data.draw(st.booleans(), label="a stray file beside the domains"):
        (root / "pyautogui" / "README.md").write_text("notes\n")
    return expect


@fz.MUTATIONS
@given(data=st.data())
def test_every_mutation_of_an_osworld_tree_is_counted_excluded_or_one_line(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject
) -> None:
    source, base = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "results")
        expect = _case(data, root)
        got = fz.run_python(lambda: osworld.read(root), "trials")
        fz.check(base, expect, got, "osworld")


@fz.COMMAND_LINE
@given(data=st.data())
def test_the_command_line_gives_exit_0_or_one_line_and_exit_2(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    source, _ = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "results")
        expect = _case(data, root)
        out = Path(folder) / "out"
        code, err = fz.run_cli(["import", "osworld", str(root), "--out", str(out)], capsys)
        fz.check_cli(expect, code, err, out, "trials")


def test_the_genuine_tree_has_finished_and_unfinished_examples(genuine) -> None:
    _, base = genuine
    assert json.dumps(base.excluded) == json.dumps({"unfinished": 8 - base.rows})
