"""Mutation fuzzer for the tau2-bench adapter (issue 39, point 5; see ``tests/fuzz_support.py``).

Genuine-shaped tau2 runs (:func:`recoverylab.synth.tau2_results.write_tau2_results`, one in each
layout: a whole ``Results`` document, and a directory of ``results.json`` plus one file per
``SimulationRun``) are mutated one or two simulations at a time, or as whole files: fields
deleted, types swapped, NaN, infinities, huge and deeply nested values, other encodings,
truncation, compression, removed, copied and duplicated files and simulations. Each mutation
states its effect on the import, and the run must agree.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

from recoverylab.adapters import tau2
from recoverylab.synth.tau2_results import write_tau2_results
from tests import fuzz_support as fz

REQUIRED = ("id", "task_id", "trial", "termination_reason")
OPTIONAL = ("seed", "duration", "agent_cost", "user_cost", "messages", "timestamp", "mode", "info")
NUMBERS = ("seed", "duration", "agent_cost", "user_cost")
BAD = ("x", {"v": 1}, [1], float("nan"), float("inf"), True)


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fz.Outcome]:
    """Two runs of two tasks x two trials: ``airline`` as one document, ``retail`` as a dir."""
    root = tmp_path_factory.mktemp("tau2") / "runs"
    agents = (("llm_agent", "gpt-4.1"),)
    write_tau2_results(root, domains=("airline",), agents=agents, tasks=2, trials=2)
    write_tau2_results(root, domains=("retail",), agents=agents, tasks=2, trials=2, layout="dir")
    base = fz.run_python(lambda: tau2.read(root), "trials")
    assert base.error is None
    assert base.rows + sum(base.excluded.values()) == 8
    return root, base


def _evaluable(sim: dict[str, Any]) -> bool:
    return sim["termination_reason"] not in tau2.NON_EVALUABLE_TERMINATION_REASONS


def _mutate_simulation(
    data: st.DataObject, sim: dict[str, Any], file: Path, unique: int
) -> tuple[fz.Expect | None, int]:
    """Change one simulation in place; return its effect, or None and a depth for fz.DEEP.

    ``unique`` tells the simulations of one case apart (a new task id must not collide).
    """
    kind = data.draw(
        st.sampled_from(
            [
                "delete_required",
                "delete_optional",
                "delete_reward",
                "reward",
                "task_id",
                "trial",
                "number",
                "termination",
                "deep",
                "huge",
            ]
        ),
        label="mutation",
    )
    if kind == "delete_required":
        sim.pop(data.draw(st.sampled_from(REQUIRED)))
        return fz.error(file), 0
    if kind == "delete_optional":
        sim.pop(data.draw(st.sampled_from(OPTIONAL)), None)
        return fz.SAME, 0
    no_reward = fz.excluded("no_reward") if _evaluable(sim) else fz.SAME
    if kind == "delete_reward":
        sim.pop("reward_info")
        return no_reward, 0
    if kind == "reward":
        reward = data.draw(st.sampled_from([0.0, 1.0, 0.5, 0, 1, None, *BAD, 10**30]))
        sim["reward_info"] = {"reward": reward}
        if reward is None:
            return no_reward, 0
        number = isinstance(reward, (int, float)) and not isinstance(reward, bool)
        ok = number and 0 <= reward <= 1  # tau2's reward: a product of checks in [0, 1]
        return (fz.SAME if ok else fz.error(file)), 0
    if kind == "task_id":
        choice = data.draw(st.sampled_from(["text", "int", "object", "array", "float", "bool"]))
        values = {"text": f"t{unique}", "int": 100 + unique, "object": {"id": "m001"}}
        values |= {"array": ["0"], "float": 1.5, "bool": True}
        sim["task_id"] = values[choice]
        return (fz.SAME if choice in ("text", "int") else fz.error(file)), 0
    if kind == "trial":
        sim["trial"] = data.draw(st.sampled_from(["1", 1.5, None, {}, True]))
        return fz.error(file), 0
    if kind == "number":
        sim[data.draw(st.sampled_from(NUMBERS))] = data.draw(st.sampled_from(BAD))
        return fz.error(file), 0
    if kind == "termination":
        sim["termination_reason"] = data.draw(st.sampled_from(["crashed", 5, None, ["agent_stop"]]))
        return fz.error(file), 0
    if kind == "deep":  # in the messages, which the adapter never reads
        depth = data.draw(st.sampled_from([1, 60, 98, 99, 100, 150, 5_000, 100_000]))
        sim["messages"] = fz.DEEP
        return None, depth
    sim["messages"] = [{"role": "user", "content": "x" * data.draw(st.sampled_from([10, 10**6]))}]
    return fz.SAME, 0


def _deep_effect(depth: int, levels_above: int, file: Path) -> fz.Expect:
    return fz.SAME if depth + levels_above <= 100 else fz.error(file)


def _mutate_file(data: st.DataObject, file: Path, value: Any) -> fz.Expect | None:
    """A whole-file mutation (encoding, truncation, compression), or None to edit its units."""
    kind = data.draw(st.sampled_from(["units", "units", "encoding", "truncate", "compress", "cut"]))
    if kind == "units":
        return None
    if kind == "encoding":
        encoding = data.draw(st.sampled_from(fz.ENCODINGS))
        fz.write(file, fz.dump(value, 0, encoding))
        return fz.error(file) if encoding == "latin-1" else fz.SAME
    if kind == "truncate":
        text = file.read_bytes()
        fz.write(file, text[: data.draw(st.integers(0, len(text) - 2))])
        return fz.error(file)
    packed = fz.compress(file, data.draw(st.sampled_from(fz.CODECS)))
    if kind == "cut":
        fz.write(packed, packed.read_bytes()[: data.draw(st.integers(0, 20))])
        return fz.error(packed)
    return fz.SAME


def _mutate_document(data: st.DataObject, file: Path) -> fz.Expect:
    """The json layout: the whole file, or one or two of its simulations."""
    document = json.loads(file.read_text(encoding="utf-8"))
    whole = _mutate_file(data, file, document)
    if whole is not None:
        return whole
    sims = document["simulations"]
    expect, depth = fz.SAME, 0
    chosen = data.draw(st.lists(st.integers(0, len(sims) - 1), min_size=1, max_size=2, unique=True))
    for index in chosen:
        if data.draw(st.booleans(), label="duplicate the simulation"):  # a resumed file's copy
            sims.append(dict(sims[index]))
            continue
        effect, deep = _mutate_simulation(data, sims[index], file, index)
        if effect is None:  # a deep value: root, simulations, the simulation, messages
            depth = max(depth, deep)
            effect = _deep_effect(deep, 3, file)
        expect = expect + effect
    fz.write(file, fz.dump(document, depth))
    return expect


def _mutate_run_directory(data: st.DataObject, run: Path) -> fz.Expect:
    """The dir layout: one simulation file, or the index."""
    files = sorted((run / "simulations").glob("*.json"))
    file = data.draw(st.sampled_from(files))
    kind = data.draw(st.sampled_from(["simulation", "simulation", "remove", "copy", "index"]))
    if kind == "index":  # the run's info: what scopes and labels every simulation
        meta = run / "results.json"
        document = json.loads(meta.read_text("utf-8"))
        info = document["info"]
        change = data.draw(
            st.sampled_from(["agent_info", "domain", "llm", "no_info", "no_user_llm"])
        )
        expect = fz.error(meta)
        if change == "agent_info":
            info["agent_info"] = data.draw(st.sampled_from(["x", 5, []]))
        elif change == "domain":
            info["environment_info"]["domain_name"] = data.draw(st.sampled_from([{}, [1], None]))
        elif change == "llm":
            info["agent_info"]["llm"] = data.draw(st.sampled_from([["gpt"], {"m": 1}, True]))
        elif change == "no_info":
            del document["info"]
        else:  # the user model is unknown: a label left null, the same rows
            del info["user_info"]["llm"]
            expect = fz.SAME
        fz.write(meta, fz.dump(document))
        return expect
    if kind == "remove":  # the index names a file that is gone
        file.unlink()
        return fz.error(run / "results.json")
    if kind == "copy":  # a file the index does not name
        shutil.copy(file, file.with_name("extra.json"))
        return fz.error(run / "results.json")
    sim = json.loads(file.read_text(encoding="utf-8"))
    whole = _mutate_file(data, file, sim)
    if whole is not None:
        return whole
    effect, depth = _mutate_simulation(data, sim, file, 50)
    fz.write(file, fz.dump(sim, depth))
    return _deep_effect(depth, 1, file) if effect is None else effect


def _case(data: st.DataObject, root: Path) -> fz.Expect:
    expect = fz.SAME
    targets = data.draw(st.sets(st.sampled_from(["document", "directory"]), min_size=1))
    if "document" in targets:
        expect = expect + _mutate_document(data, next(root.glob("*airline*.json*")))
    if "directory" in targets:
        expect = expect + _mutate_run_directory(data, next(root.glob("*retail*")))
    if data.draw(st.booleans(), label="copy the document"):  # the same run twice: superseded
        document = next(root.glob("*airline*.json*"))
        shutil.copy(document, root / f"copy-{document.name}")
        if expect.kind == "error":
            expect = fz.Expect("error", files=tuple(Path(f.name) for f in expect.files))
    return expect


@pytest.mark.slow  # 500 cases: 10-60 s on a loaded 2-core machine (CI runs slow tests)
@fz.MUTATIONS
@given(data=st.data())
def test_every_mutation_of_tau2_results_is_counted_excluded_or_one_line(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject
) -> None:
    source, base = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "runs")
        expect = _case(data, root)
        got = fz.run_python(lambda: tau2.read(root), "trials")
        fz.check(base, expect, got, "tau2")


@fz.COMMAND_LINE
@given(data=st.data())
def test_the_command_line_gives_exit_0_or_one_line_and_exit_2(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    source, _ = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "runs")
        expect = _case(data, root)
        out = Path(folder) / "out"
        code, err = fz.run_cli(["import", "tau2", str(root), "--out", str(out)], capsys)
        fz.check_cli(expect, code, err, out, "trials")
