"""SWE-bench evaluation trees (``import swebench``): generated trees against the drawn truth.

The trees are written by :mod:`recoverylab.synth.swebench_runs`, which mirrors the harness's
writers (report.json keyed by instance id, run.json, run summaries of schema_version 2, a rerun
into the same tree). The reference is a plain reading of the drawn categories: which count as
outcomes (and which outcome) and which are excluded, by which reason.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from recoverylab._errors import InputError, ParameterError
from recoverylab.adapters import keep_raw_ids, swebench
from recoverylab.cli import main
from recoverylab.synth.swebench_runs import plan_swebench_runs, write_swebench_runs

OUTCOME = {"resolved": True, "unresolved": False, "ambiguous": False, "empty_patch": False}
REASON = {
    "infra": "infra_failure",
    "infra_error": "infra_failure",
    "error_missing": "error",
    "error_empty": "error",
    "incomplete": "incomplete",
}


def reference(plan: pl.DataFrame, empty_patch: str = "failure") -> tuple[set, set]:
    """Outcomes and exclusions as the module docstring states them, from the drawn truth."""
    kept, dropped = set(), set()
    for row in plan.iter_rows(named=True):
        task = f"{row['dataset']}/{row['instance_id']}"
        model = row["model"].replace("/", "__")
        category = row["category"]
        if category == "empty_patch" and empty_patch == "exclude":
            dropped.add((task, model, row["run_id"], "empty_patch"))
        elif category in OUTCOME:
            kept.add((task, model, row["run_id"], OUTCOME[category]))
        else:
            dropped.add((task, model, row["run_id"], REASON[category]))
    return kept, dropped


def observed(out) -> tuple[set, set]:
    trials = out.tables["trials"].select("task_id", "model", "run_id", "success")
    excluded = out.excluded.select("task_id", "model", "run_id", "reason")
    return set(trials.iter_rows()), set(excluded.iter_rows())


@pytest.mark.parametrize(
    ("seed", "options"),
    [
        (0, {}),
        (1, {"instances": 12}),
        (2, {"runs": ("a", "b", "c")}),
        (3, {"models": ("gold",), "rerun": False}),
        (4, {"datasets": ("princeton-nlp/SWE-bench_Verified", "princeton-nlp/SWE-bench_Lite")}),
        (5, {"instances": 20}),
    ],
)
@pytest.mark.parametrize("empty_patch", ["failure", "exclude"])
def test_generated_trees_read_as_the_drawn_truth(
    seed: int, options: dict, empty_patch: str, tmp_path: Path
) -> None:
    plan = plan_swebench_runs(seed=seed, **options)
    root = write_swebench_runs(tmp_path, seed=seed, **options)
    out = swebench.read(root, empty_patch=empty_patch)
    assert observed(out) == reference(plan, empty_patch)
    trials = out.tables["trials"]
    assert trials["raw_task_id"].is_in(plan["instance_id"].to_list()).all()
    # the runs of one model are its attempts, numbered in run-id order
    runs = sorted(plan["run_id"].unique().to_list())
    assert (
        trials["attempt"] == trials["run_id"].replace_strict(runs, list(range(len(runs))))
    ).all()
    counts = out.report.excluded
    assert sum(counts.values()) == out.excluded.height


def test_the_generator_writes_a_rerun_into_the_same_tree() -> None:
    plan = plan_swebench_runs(seed=0, instances=12)
    assert plan["rerun_of_error"].sum() > 0
    assert set(plan["category"]) == set(OUTCOME) | set(REASON)


def test_report_and_summary_must_agree(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    plan = plan_swebench_runs(seed=0)
    root = write_swebench_runs(tmp_path / "runs", seed=0)
    row = plan.filter(pl.col("category") == "resolved").row(0, named=True)
    model = row["model"].replace("/", "__")
    report = (
        root / "logs/run_evaluation" / row["run_id"] / model / row["instance_id"] / "report.json"
    )
    body = json.loads(report.read_text())
    body[row["instance_id"]]["resolved"] = False
    report.write_text(json.dumps(body))
    summary = root / f"{model}.{row['run_id']}.json"
    with pytest.raises(InputError) as caught:
        swebench.read(root)
    message = str(caught.value)
    assert f"`{summary}` lists {row['instance_id']} in `resolved_ids`" in message
    assert f"`{report}` says resolved false" in message
    code = main(["import", "swebench", str(root), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert str(report) in err


def test_a_report_keying_one_instance_twice_is_one_line(tmp_path: Path, capsys) -> None:
    plan = plan_swebench_runs(seed=0)
    root = write_swebench_runs(tmp_path / "runs", seed=0)
    row = plan.filter(pl.col("category") == "resolved").row(0, named=True)
    model = row["model"].replace("/", "__")
    report = (
        root / "logs/run_evaluation" / row["run_id"] / model / row["instance_id"] / "report.json"
    )
    entry = json.dumps({"resolved": True, "patch_exists": True})
    report.write_text(f'{{"{row["instance_id"]}": {entry}, "{row["instance_id"]}": {entry}}}')
    code = main(["import", "swebench", str(root), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"recoverylab import: error: `{report}` writes the instance_id `{row['instance_id']}` "
        "twice; a keyed object names each id once (a JSON reader would silently keep the last)."
    ]


def test_instance_ids_are_per_dataset_and_raw_ids_are_refused_when_shared(tmp_path: Path) -> None:
    datasets = ("princeton-nlp/SWE-bench_Verified", "princeton-nlp/SWE-bench_Lite")
    root = write_swebench_runs(tmp_path, seed=4, datasets=datasets, instances=6)
    out = swebench.read(root)
    scopes = set(out.tables["trials"]["task_scope"]) | set(out.excluded["task_scope"])
    assert scopes == set(datasets)
    tasks = set(out.tables["trials"]["task_id"]) | set(out.excluded["task_id"])
    assert len(tasks) == 2 * 6  # the 6 ids graded against two datasets: 12 tasks
    assert "2 datasets" in out.report.render()
    with pytest.raises(InputError, match="occurs under dataset princeton-nlp/SWE-bench_Lite"):
        keep_raw_ids(out)
    one = swebench.read(write_swebench_runs(tmp_path / "one", seed=4, instances=6))
    assert keep_raw_ids(one).tables["trials"]["task_id"].str.contains("/").sum() == 0


def test_files_beside_the_tree_are_listed_and_summaries_are_optional(tmp_path: Path) -> None:
    root = write_swebench_runs(tmp_path, seed=0)
    (root / "logs" / "build_images" / "env").mkdir(parents=True)
    (root / "logs" / "build_images" / "env" / "build_image.log").write_text("ok\n")
    (root / "predictions.jsonl").write_text("{}\n")
    out = swebench.read(root)
    assert sorted(out.report.unmatched) == sorted(
        [str(root / "logs/build_images/env/build_image.log"), str(root / "predictions.jsonl")]
    )
    for summary in root.glob("*.json"):
        summary.unlink()
    bare = swebench.read(root)  # without summaries: what the reports say (no empty patches)
    plan = plan_swebench_runs(seed=0)
    graded = plan.filter(pl.col("category").is_in(["resolved", "unresolved", "ambiguous"]))
    assert bare.tables["trials"].height == graded.height
    assert set(bare.excluded["reason"]) == {"error", "infra_failure"}


def test_parameters_are_checked(tmp_path: Path) -> None:
    root = write_swebench_runs(tmp_path, seed=0, instances=2)
    with pytest.raises(ParameterError, match="`empty_patch` is 'drop'"):
        swebench.read(root, empty_patch="drop")
    with pytest.raises(ParameterError, match="apply to `to='forks'` only"):
        swebench.read(root, mapping={"method": "'x'"})
    shutil.rmtree(root / "logs")
    for summary in root.glob("*.json"):
        summary.unlink()
    (root / "x.txt").write_text("1")
    with pytest.raises(Exception, match="no SWE-bench evaluation under"):
        swebench.read(root)
