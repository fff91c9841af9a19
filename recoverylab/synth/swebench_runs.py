"""SWE-bench evaluation trees as the harness writes them, with known outcomes (for tests, docs).

:func:`write_swebench_runs` lays out what ``swebench.harness.run_evaluation`` (5.x) leaves in the
directory it ran in, by the field names of its writers (``reporting.make_run_report``,
``grading.get_eval_report``, ``run_evaluation.write_run_metadata``): per run and model,
``logs/run_evaluation/{run_id}/{model}/{instance_id}/`` with ``run_instance.log``,
``test_output.txt``, ``patch.diff`` and ``report.json`` (an object keyed by the instance id), the
run's ``run.json`` (dataset, split) and the summary ``{model}.{run_id}.json`` (schema_version 2).
``{model}`` is ``model_name_or_path`` with ``/`` as ``__``.

The draws hold every case the reader must tell apart: resolved and unresolved instances,
ambiguous failures (kept as outcomes), infrastructure failures with and without a report,
errors (a run without ``report.json``, an empty ``report.json``), empty patches, instances
without a prediction (incomplete), two models, several runs, and a *rerun into the same tree*:
the first run's errors graded again under the same run id, which rewrites their reports and the
summary (the tree is written in that order, so the files are those a rerun leaves).
:func:`plan_swebench_runs` returns the drawn truth, one row per (model, run, instance).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

__all__ = ["CATEGORIES", "plan_swebench_runs", "write_swebench_runs"]

#: Final categories of one (model, run, instance), with how often each is drawn.
CATEGORIES = {
    "resolved": 8,
    "unresolved": 6,
    "ambiguous": 1,
    "infra": 1,
    "infra_error": 1,
    "error_missing": 1,
    "error_empty": 1,
    "empty_patch": 1,
    "incomplete": 1,
}
_REPOS = ("astropy__astropy", "django__django", "sympy__sympy", "pytest-dev__pytest")
_SUMMARY_LIST = {
    "resolved": "resolved_ids",
    "unresolved": "unresolved_ids",
    "ambiguous": "unresolved_ids",
    "infra": "unresolved_ids",
    "infra_error": "error_ids",
    "error_missing": "error_ids",
    "error_empty": "error_ids",
    "empty_patch": "empty_patch_ids",
    "incomplete": "incomplete_ids",
}
_REASON = "docker: no space left on device"


def _instance_ids(n: int) -> list[str]:
    return [f"{_REPOS[i % len(_REPOS)]}-{11000 + 37 * i}" for i in range(n)]


def plan_swebench_runs(
    *,
    models: Sequence[str] = ("org/agent-a", "agent-b"),
    runs: Sequence[str] = ("run-1", "run-2"),
    instances: int = 8,
    datasets: Sequence[str] = ("princeton-nlp/SWE-bench_Verified",),
    rerun: bool = True,
    seed: int = 0,
) -> pl.DataFrame:
    """Draw the truth: one row per (model, run_id, instance_id) with its final ``category``.

    ``datasets`` are assigned to the runs in turn (two datasets: the same instance ids graded
    against two datasets, two tasks each). With ``rerun``, ``rerun_of_error`` marks the first
    run's instances that were errors before the rerun graded them (their category is final).
    """
    rng = np.random.default_rng(seed)
    names = list(CATEGORIES)
    weights = np.array(list(CATEGORIES.values()), dtype=float)
    rows = []
    for model in models:
        strength = 0.35 + 0.3 * (model == models[-1])
        for index, run_id in enumerate(runs):
            for instance_id in _instance_ids(instances):
                category = str(rng.choice(names, p=weights / weights.sum()))
                if category in ("resolved", "unresolved"):
                    category = "resolved" if rng.random() < strength + 0.2 else "unresolved"
                rerun_of_error = bool(
                    rerun
                    and index == 0
                    and category in ("resolved", "unresolved")
                    and rng.random() < 0.25
                )
                rows.append(
                    {
                        "model": model,
                        "run_id": run_id,
                        "instance_id": instance_id,
                        "dataset": datasets[index % len(datasets)],
                        "category": category,
                        "rerun_of_error": rerun_of_error,
                    }
                )
    return pl.DataFrame(rows)


def _tests_status(resolved: bool) -> dict[str, dict[str, list[str]]]:
    failure = [] if resolved else ["tests/test_core.py::test_fix"]
    success = ["tests/test_core.py::test_fix"] if resolved else []
    return {
        "FAIL_TO_PASS": {"success": success, "failure": failure},
        "PASS_TO_PASS": {"success": ["tests/test_core.py::test_old"], "failure": []},
        "FAIL_TO_FAIL": {"success": [], "failure": []},
        "PASS_TO_FAIL": {"success": [], "failure": []},
    }


def _write_instance(folder: Path, instance_id: str, category: str) -> None:
    """One graded instance's directory as ``run_instance`` leaves it."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "run_instance.log").open("a", encoding="utf-8") as log:
        log.write(f"Intermediate patch for {instance_id} written to patch.diff\n")
    (folder / "patch.diff").write_text("diff --git a/x.py b/x.py\n", encoding="utf-8")
    if category in ("error_missing", "infra_error"):
        return  # the container failed before grading: no report
    (folder / "test_output.txt").write_text(">>>>> Applied Patch\n", encoding="utf-8")
    if category == "error_empty":
        (folder / "report.json").write_text("", encoding="utf-8")
        return
    resolved = category == "resolved"
    entry: dict[str, object] = {
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": category != "infra",
        "resolved": resolved,
        "infra_failure": category == "infra",
    }
    if category == "infra":
        entry["infra_failure_reason"] = _REASON
    else:
        entry["tests_status"] = _tests_status(resolved)
    text = json.dumps({instance_id: entry}, indent=4)
    (folder / "report.json").write_text(text, encoding="utf-8")


def _summary(rows: pl.DataFrame, instances: int) -> dict[str, object]:
    """Return the run summary ``make_run_report`` writes for one (model, run) (version 2)."""
    lists: dict[str, list[str]] = {
        k: [] for k in ("resolved_ids", "unresolved_ids", "error_ids", "empty_patch_ids")
    }
    lists["incomplete_ids"] = []
    infra, ambiguous, reasons = [], [], {}
    for instance_id, category in rows.select("instance_id", "category").iter_rows():
        lists[_SUMMARY_LIST[category]].append(instance_id)
        if category in ("infra", "infra_error"):
            infra.append(instance_id)
            reasons[instance_id] = _REASON
        if category == "ambiguous":
            ambiguous.append(instance_id)
            reasons[instance_id] = "test output truncated"
    submitted = sorted(set(rows["instance_id"]) - set(lists["incomplete_ids"]))
    completed = sorted(lists["resolved_ids"] + lists["unresolved_ids"])
    return {
        "total_instances": instances,
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(lists["resolved_ids"]),
        "unresolved_instances": len(lists["unresolved_ids"]),
        "infra_failure_instances": len(infra),
        "ambiguous_failure_instances": len(ambiguous),
        "empty_patch_instances": len(lists["empty_patch_ids"]),
        "error_instances": len(lists["error_ids"]),
        "completed_ids": completed,
        "incomplete_ids": sorted(lists["incomplete_ids"]),
        "empty_patch_ids": sorted(lists["empty_patch_ids"]),
        "submitted_ids": submitted,
        "resolved_ids": sorted(lists["resolved_ids"]),
        "unresolved_ids": sorted(lists["unresolved_ids"]),
        "infra_failure_ids": sorted(infra),
        "ambiguous_failure_ids": sorted(ambiguous),
        "failure_reasons": dict(sorted(reasons.items())),
        "error_ids": sorted(lists["error_ids"]),
        "schema_version": 2,
    }


def _write_run(
    root: Path, model: str, run_id: str, rows: pl.DataFrame, instances: int, graded: pl.Series
) -> None:
    """Write the ``graded`` instances of one (model, run) and the run's summary (all rows)."""
    folder = root / "logs" / "run_evaluation" / run_id / model.replace("/", "__")
    for instance_id, category in rows.filter(graded).select("instance_id", "category").iter_rows():
        if category not in ("empty_patch", "incomplete"):
            _write_instance(folder / instance_id, instance_id, category)
    name = f"{model.replace('/', '__')}.{run_id}.json"
    (root / name).write_text(json.dumps(_summary(rows, instances), indent=4) + "\n")


def write_swebench_runs(
    out: str | Path,
    *,
    models: Sequence[str] = ("org/agent-a", "agent-b"),
    runs: Sequence[str] = ("run-1", "run-2"),
    instances: int = 8,
    datasets: Sequence[str] = ("princeton-nlp/SWE-bench_Verified",),
    rerun: bool = True,
    seed: int = 0,
) -> Path:
    """Write the drawn runs under ``out`` as the harness leaves them; return ``out``.

    Parameters are those of :func:`plan_swebench_runs` (the same draws).

    Examples
    --------
    >>> import tempfile
    >>> root = write_swebench_runs(tempfile.mkdtemp(), instances=3)
    >>> sorted(p.name for p in root.glob("*.json"))[:2]
    ['agent-b.run-1.json', 'agent-b.run-2.json']
    """
    root = Path(out)
    plan = plan_swebench_runs(
        models=models, runs=runs, instances=instances, datasets=datasets, rerun=rerun, seed=seed
    )
    for (run_id,), by_run in plan.group_by(["run_id"], maintain_order=True):
        dataset = by_run["dataset"][0]
        meta = root / "logs" / "run_evaluation" / str(run_id) / "run.json"
        meta.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "dataset": dataset,
            "split": "test",
            "task_repo": None,
            "created_at": "2026-01-05T10:00:00+00:00",
        }
        meta.write_text(json.dumps(body, indent=2) + "\n")
    for (model, run_id), rows in plan.group_by(["model", "run_id"], maintain_order=True):
        first = rows.with_columns(
            pl.when(pl.col("rerun_of_error"))
            .then(pl.lit("error_missing"))
            .otherwise(pl.col("category"))
            .alias("category")
        )
        everything = pl.Series([True] * rows.height)
        _write_run(root, str(model), str(run_id), first, instances, everything)  # first pass
        if rows["rerun_of_error"].any():  # the rerun grades the errors again, same tree
            _write_run(root, str(model), str(run_id), rows, instances, rows["rerun_of_error"])
    return root
