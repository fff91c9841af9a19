"""Mutation fuzzer for the Harbor adapter (issue 39, point 5; see ``tests/fuzz_support.py``).

Genuine-shaped Harbor jobs (:func:`recoverylab.synth.harbor_jobs.write_harbor_jobs`, every field
as Harbor's models name it) are mutated one or two trials at a time: fields deleted, types
swapped, NaN, infinities, huge and deeply nested values inserted, encodings changed, files
truncated, compressed, removed, trial directories and whole jobs copied. Each mutation states
what it does to the import (a count moved by a reason, or one error line naming the file), and
the run must agree.
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

from recoverylab import SourceError
from recoverylab._json import load
from recoverylab.adapters import harbor
from recoverylab.synth.harbor_jobs import write_harbor_jobs
from tests import fuzz_support as fz

#: TrialResult fields without a default (a file without one is an error naming it).
REQUIRED = ("task_name", "trial_name", "trial_uri", "task_id", "task_checksum", "config")
#: Fields the adapter does not need: deleting one changes nothing.
OPTIONAL = (
    "id",
    "agent_result",
    "step_results",
    "exception_info",
    "started_at",
    "finished_at",
    "environment_setup",
    "agent_setup",
    "agent_execution",
    "verifier",
    "reward_valid",
    "schema_version",
)
KEY_FIELDS = ("task_name", "trial_name", "trial_uri", "task_checksum", "source")
NOT_TEXT = (5, -1.5, True, {"id": "m001"}, ["fix-git"])
EXCEPTION = {
    "exception_type": "AgentTimeoutError",
    "exception_message": "timed out",
    "exception_traceback": "Traceback",
    "occurred_at": "2026-11-30T08:00:50Z",
}


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fz.Outcome]:
    """Two tasks x four arms, one attempt, every trial scored: eight trials in one job."""
    root = tmp_path_factory.mktemp("harbor") / "jobs"
    write_harbor_jobs(root, tasks=2, attempts=1, failures=False)
    base = fz.run_python(lambda: harbor.trials(root), "trials")
    assert base.error is None
    assert (base.rows, base.excluded) == (8, {})
    return root, base


def _trial_results(root: Path) -> list[Path]:
    """The trials' result files (a trial directory lies in a job directory with a config)."""
    return [
        p
        for p in sorted(root.rglob("result.json"), key=str)
        if (p.parent.parent / "config.json").is_file()
    ]


def _mutate_job_config(data: st.DataObject, file: Path) -> fz.Expect:
    """The job's ``config.json`` (``JobConfig``), read for ``n_attempts``: broken, re-encoded."""
    value = json.loads(file.read_text("utf-8"))
    kind = data.draw(st.sampled_from(["truncate", "deep", "array", *fz.ENCODINGS]))
    if kind == "truncate":
        text = file.read_bytes()
        fz.write(file, text[: data.draw(st.integers(0, len(text) - 2))])
    elif kind == "deep":
        value["metadata"] = fz.DEEP
        fz.write(file, fz.dump(value, 100_000))
    elif kind == "array":
        fz.write(file, b"[" + fz.dump(value) + b"]")
    else:  # the one JSON reader decodes UTF-16/32 and drops a UTF-8 byte-order mark
        fz.write(file, fz.dump(value, 0, kind))
        return fz.error(file) if kind == "latin-1" else fz.SAME
    return fz.error(file)


def _lacks_id(file: Path) -> bool:
    """Whether a (readable) result file has no ``id`` field."""
    try:
        value = load(file)
    except SourceError:
        return False  # the file is refused anyway
    return isinstance(value, dict) and "id" not in value


def _mutate(data: st.DataObject, file: Path) -> fz.Expect:
    """Apply one drawn mutation to the trial whose result is ``file``; return its effect."""
    value: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    kind = data.draw(
        st.sampled_from(
            [
                "delete_required",
                "delete_optional",
                "delete_verifier",
                "reward",
                "exception",
                "key_type",
                "huge",
                "deep",
                "nan_unread",
                "encoding",
                "truncate",
                "compress",
                "corrupt_compressed",
                "remove",
                "copy_trial",
            ]
        ),
        label="mutation",
    )
    depth, encoding = 0, "utf-8"
    expect = fz.SAME
    if kind == "delete_required":
        value.pop(data.draw(st.sampled_from(REQUIRED)))
        expect = fz.error(file)
    elif kind == "delete_optional":
        value.pop(data.draw(st.sampled_from(OPTIONAL)), None)
    elif kind == "delete_verifier":
        value.pop("verifier_result")
        expect = fz.excluded("no_reward")
    elif kind == "reward":
        reward = data.draw(
            st.sampled_from(
                [0, 1, 0.0, 1.0, True, False, None, "1", "abc", {}, [], [1], 0.5, -1, 2, 10**30]
            )
        )
        value["verifier_result"] = {"rewards": {"reward": reward}}
        if reward is None:
            expect = fz.excluded("no_reward_key")
        elif not isinstance(reward, (int, float)) or reward not in (0, 1):
            expect = fz.error(file)  # not a number, or not binary: named with the file
    elif kind == "exception":
        info = dict(EXCEPTION)
        shape = data.draw(st.sampled_from(["drop", "type", "whole", "step"]))
        if shape == "drop":  # Harbor's ExceptionInfo rejects it: Harbor skips the trial
            info.pop(data.draw(st.sampled_from(sorted(EXCEPTION))))
            expect = fz.excluded("invalid_result")
        elif shape == "type":
            info[data.draw(st.sampled_from(sorted(EXCEPTION)))] = data.draw(
                st.sampled_from([5, None, {}, []])
            )
            expect = fz.excluded("invalid_result")
        elif shape == "whole":
            info = data.draw(st.sampled_from(["x", 5, [], True]))  # type: ignore[assignment]
            expect = fz.error(file)
        else:
            info.pop("exception_type")
            value["step_results"] = [{"step_name": "fix", "exception_info": info}]
            info = None  # type: ignore[assignment]
            expect = fz.excluded("invalid_result")
        value["exception_info"] = info
    elif kind == "key_type":
        value[data.draw(st.sampled_from(KEY_FIELDS))] = data.draw(st.sampled_from(NOT_TEXT))
        expect = fz.error(file)
    elif kind == "huge":
        size = data.draw(st.sampled_from([10, 10_000, 1_000_000]))
        value.setdefault("agent_result", {})["metadata"] = {"log": "x" * size, "n": 10**40}
    elif kind == "deep":
        depth = data.draw(st.sampled_from([1, 50, 96, 97, 98, 120, 200, 5_000, 100_000]))
        value["agent_result"] = {"metadata": fz.DEEP}  # root, agent_result, then the arrays
        expect = fz.SAME if depth + 2 <= 100 else fz.error(file)
    elif kind == "nan_unread":
        value["agent_result"] = {
            "cost_usd": data.draw(st.sampled_from([float("nan"), float("inf")]))
        }
        expect = fz.Expect("either", files=(file,))  # Harbor's pydantic reads NaN; polars may not
    elif kind == "encoding":
        encoding = data.draw(st.sampled_from(fz.ENCODINGS))
        expect = fz.error(file) if encoding == "latin-1" else fz.SAME
    elif kind == "truncate":
        text = file.read_bytes()
        fz.write(file, text[: data.draw(st.integers(0, len(text) - 2))])
        return fz.error(file)
    elif kind == "compress":
        fz.compress(file, data.draw(st.sampled_from(fz.CODECS)))
        return fz.SAME
    elif kind == "corrupt_compressed":
        packed = fz.compress(file, data.draw(st.sampled_from(fz.CODECS)))
        fz.write(packed, packed.read_bytes()[: data.draw(st.integers(0, 20))])
        return fz.error(packed)
    elif kind == "remove":
        file.unlink()
        return fz.excluded("unfinished")
    else:  # the same trial copied beside itself (a resumed job's leftovers): a duplicate
        shutil.copytree(file.parent, file.parent.with_name(file.parent.name + "-copy"))
        return fz.excluded("duplicate", rows=0)
    fz.write(file, fz.dump(value, depth, encoding))
    return expect


@pytest.mark.slow  # 500 cases: 10-60 s on a loaded 2-core machine (CI runs slow tests)
@fz.MUTATIONS
@given(data=st.data())
def test_every_mutation_of_a_harbor_job_is_counted_excluded_or_one_line(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject
) -> None:
    source, base = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "jobs")
        trials = _trial_results(root)
        chosen = data.draw(st.lists(st.sampled_from(trials), min_size=1, max_size=2, unique=True))
        expect = fz.SAME
        for file in chosen:
            expect = expect + _mutate(data, file)
        if data.draw(st.booleans(), label="copy the whole job"):
            job = next(p.parent for p in root.rglob("config.json") if any(p.parent.glob("*__*")))
            shutil.copytree(job, job.with_name(job.name + "-again"))
            trial_dirs = [d for d in job.iterdir() if d.is_dir()]
            held = sum(any(d.glob("result.json*")) for d in trial_dirs)
            expect = expect + fz.excluded("duplicate", rows=0, n=held)
            anonymous = tuple(f for f in _trial_results(job) if _lacks_id(f))
            if anonymous:  # a copy without Harbor's trial id cannot be told from a rerun: refused
                expect = expect + fz.Expect("error", files=anonymous)
            if expect.kind == "error":  # the broken file is read twice: either may be named
                expect = fz.Expect("error", files=tuple(f.relative_to(job) for f in expect.files))
            if held < len(trial_dirs):  # a copied unfinished trial is unfinished again
                expect = expect + fz.excluded("unfinished", rows=0, n=len(trial_dirs) - held)
        if data.draw(st.integers(0, 5), label="mutate the job's config.json") == 0:
            job_config = next(p for p in root.rglob("config.json") if any(p.parent.glob("*__*")))
            expect = expect + _mutate_job_config(data, job_config)
        got = fz.run_python(lambda: harbor.trials(root), "trials")
        fz.check(base, expect, got, f"harbor {chosen}")


@fz.COMMAND_LINE
@given(data=st.data())
def test_the_command_line_gives_exit_0_or_one_line_and_exit_2(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    source, _ = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "jobs")
        file = data.draw(st.sampled_from(_trial_results(root)))
        expect = _mutate(data, file)
        out = Path(folder) / "out"
        code, err = fz.run_cli(
            ["import", "harbor", str(root), "--to", "trials", "--out", str(out)], capsys
        )
        fz.check_cli(expect, code, err, out, "trials")
