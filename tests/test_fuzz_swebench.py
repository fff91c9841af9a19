"""Mutation fuzzer for the SWE-bench adapter (issue 39, point 5; see ``tests/fuzz_support.py``).

A genuine-shaped SWE-bench evaluation tree (:func:`recoverylab.synth.swebench_runs.
write_swebench_runs`: reports, run.json, the run summary) is mutated one or two graded instances
at a time, or at its summary: reports emptied, cut, deleted, flipped, given a wrong type, a key
written twice, a value nested too deep, an infrastructure flag, compressed; the summary cut,
missing a list, of an unknown schema version, or deleted; stray files beside. Each mutation
states its effect (a count moved, or one line naming the file: a report that no longer agrees
with its summary names the report) and the run must agree.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import polars as pl
import pytest
from hypothesis import given

from recoverylab.adapters import swebench
from recoverylab.synth.swebench_runs import plan_swebench_runs, write_swebench_runs
from tests import fuzz_support as fz

OPTIONS = {"models": ("org/agent",), "runs": ("r1",), "instances": 12, "seed": 127}
GRADED = ("resolved", "unresolved", "ambiguous")


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fz.Outcome, pl.DataFrame]:
    root = tmp_path_factory.mktemp("swebench") / "runs"
    write_swebench_runs(root, **OPTIONS)
    plan = plan_swebench_runs(**OPTIONS)
    assert plan.filter(pl.col("category").is_in(GRADED)).height >= 4
    base = fz.run_python(lambda: swebench.read(root), "trials")
    assert base.error is None
    # every kind of instance the summary alone tells apart is there to be lost with it
    assert base.excluded == {"error": 1, "incomplete": 1, "infra_failure": 2}
    return root, base, plan


def _report(root: Path, instance_id: str) -> Path:
    return root / "logs/run_evaluation/r1/org__agent" / instance_id / "report.json"


def _mutate_report(
    data: st.DataObject, report: Path, instance_id: str, summary_gone: bool
) -> fz.Expect:
    """Change one graded instance's report.json; return what it does to the import.

    With its run summary, a report that no longer holds the graded result the summary lists is
    one line naming the report; without it, the harness's own reading applies (an unreadable
    report is an error, excluded by reason; a flipped result is just a result).
    """
    kind = data.draw(
        st.sampled_from(
            [
                "empty",
                "cut",
                "flip",
                "type_swap",
                "twice",
                "deep",
                "delete",
                "compress",
                "stray_file",
                "no_patch_flag",
                "infra_flag",
            ]
        ),
        label=f"mutation of {instance_id}",
    )
    body = json.loads(report.read_text())
    entry = body[instance_id]
    if kind == "empty":
        fz.write(report, b"")
    elif kind == "cut":
        fz.write(report, report.read_bytes()[: len(report.read_bytes()) // 2])
    elif kind == "flip":
        entry["resolved"] = not entry["resolved"]
        fz.write(report, json.dumps(body).encode())
    elif kind == "type_swap":
        entry["resolved"] = data.draw(st.sampled_from(["yes", 1, None, [True]]))
        fz.write(report, json.dumps(body).encode())
    elif kind == "twice":
        text = json.dumps(entry)
        fz.write(report, f'{{"{instance_id}": {text}, "{instance_id}": {text}}}'.encode())
    elif kind == "deep":
        entry["tests_status"] = fz.DEEP
        depth = data.draw(st.sampled_from([101, 100_000]))
        fz.write(report, fz.dump(body, depth=depth))
    elif kind == "delete":
        report.unlink()
    elif kind == "compress":
        fz.compress(report, data.draw(st.sampled_from(fz.CODECS)))
        return fz.SAME
    elif kind == "stray_file":
        (report.parent / "eval.sh").write_text("#!/bin/bash\n")
        return fz.SAME
    elif kind == "no_patch_flag":  # counted all the same: an empty patch is an agent failure
        entry["patch_exists"] = False
        fz.write(report, json.dumps(body).encode())
        return fz.SAME
    else:
        entry["infra_failure"] = True
        fz.write(report, json.dumps(body).encode())
        return fz.excluded("infra_failure")
    if kind == "twice":
        return fz.error(report)
    if summary_gone:
        return fz.SAME if kind == "flip" else fz.excluded("error")
    return fz.error(report)


def _mutate_summary(data: st.DataObject, summary: Path, plan: pl.DataFrame) -> fz.Expect:
    kind = data.draw(st.sampled_from(["cut", "drop_list", "version", "delete"]), label="summary")
    body = json.loads(summary.read_text())
    if kind == "cut":
        fz.write(summary, summary.read_bytes()[:-5])
    elif kind == "drop_list":
        del body[data.draw(st.sampled_from(swebench.SUMMARY_LISTS))]
        fz.write(summary, json.dumps(body).encode())
    elif kind == "version":
        body["schema_version"] = 3
        fz.write(summary, json.dumps(body).encode())
    else:
        # what only the summary said goes: empty patches (counted failures), incomplete
        # instances, and the infrastructure flag of runs without a report (then plain errors)
        summary.unlink()
        count = plan["category"].value_counts()
        n = dict(zip(count["category"].to_list(), count["count"].to_list(), strict=True))
        moved = {
            "incomplete": -n.get("incomplete", 0),
            "infra_failure": -n.get("infra_error", 0),
            "error": n.get("infra_error", 0),
        }
        return fz.Expect("delta", -n.get("empty_patch", 0), moved)
    return fz.error(summary)


def _case(data: st.DataObject, root: Path, plan: pl.DataFrame) -> fz.Expect:
    graded = plan.filter(pl.col("category").is_in(GRADED)).sort("instance_id")
    rows = data.draw(
        st.lists(st.sampled_from(graded.rows(named=True)), max_size=2, unique_by=str),
        label="instances",
    )
    expect = fz.SAME
    if not rows or data.draw(st.booleans(), label="mutate the summary"):
        expect = _mutate_summary(data, root / "org__agent.r1.json", plan)
    gone = not (root / "org__agent.r1.json").exists()
    for row in rows:
        report = _report(root, row["instance_id"])
        expect = expect + _mutate_report(data, report, row["instance_id"], gone)
    if data.draw(st.booleans(), label="stray files"):
        (root / "predictions.json").write_text("[]")
        (root / "logs" / "build_images").mkdir(parents=True, exist_ok=True)
        (root / "logs" / "build_images" / "build.log").write_text("ok\n")
    return expect


@fz.MUTATIONS
@given(data=st.data())
def test_every_mutation_of_a_swebench_tree_is_counted_excluded_or_one_line(
    genuine: tuple[Path, fz.Outcome, pl.DataFrame], data: st.DataObject
) -> None:
    source, base, plan = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "runs")
        expect = _case(data, root, plan)
        got = fz.run_python(lambda: swebench.read(root), "trials")
        fz.check(base, expect, got, "swebench")


@fz.COMMAND_LINE
@given(data=st.data())
def test_the_command_line_gives_exit_0_or_one_line_and_exit_2(
    genuine: tuple[Path, fz.Outcome, pl.DataFrame],
    data: st.DataObject,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, _, plan = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "runs")
        expect = _case(data, root, plan)
        out = Path(folder) / "out"
        code, err = fz.run_cli(["import", "swebench", str(root), "--out", str(out)], capsys)
        fz.check_cli(expect, code, err, out, "trials")
