"""OSWorld result trees (``import osworld``): generated trees against the drawn truth.

The trees are written by :mod:`recoverylab.synth.osworld_runs`, which mirrors OSWorld's
``run_single_example`` (result.txt beside traj.jsonl, screenshots, a recording; unfinished and
crashed examples; a rerun into the same tree; two models; repeats as results directories). The
reference is a plain reading of the drawn truth.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from recoverylab._errors import InputError, ParameterError, SchemaError, SourceError
from recoverylab.adapters import keep_raw_ids, osworld
from recoverylab.cli import main
from recoverylab.synth.osworld_runs import plan_osworld_runs, write_osworld_runs


def reference(plan: pl.DataFrame, success: float = 1.0) -> tuple[set, set]:
    kept, dropped = set(), set()
    for row in plan.iter_rows(named=True):
        key = (f"{row['domain']}/{row['example_id']}", row["model"], row["repeat"])
        if row["unfinished"] is None:
            kept.add((*key, row["score"], row["score"] >= success, row["steps"]))
        else:
            dropped.add((*key, "unfinished"))
    return kept, dropped


@pytest.mark.parametrize(
    ("seed", "options"),
    [
        (0, {}),
        (1, {"repeats": 3}),
        (2, {"models": ("only",), "examples": 10}),
        (3, {"domains": ("chrome", "os"), "repeats": 2}),
    ],
)
@pytest.mark.parametrize("success", [1.0, 0.5])
def test_generated_trees_read_as_the_drawn_truth(
    seed: int, options: dict, success: float, tmp_path: Path
) -> None:
    plan = plan_osworld_runs(seed=seed, **options)
    roots = write_osworld_runs(tmp_path, seed=seed, **options)
    out = osworld.read(roots, success=success)
    trials = out.tables["trials"].select(
        "task_id", "model", "attempt", "reward", "success", "steps"
    )
    excluded = out.excluded.select("task_id", "model", "attempt", "reason")
    assert (set(trials.iter_rows()), set(excluded.iter_rows())) == reference(plan, success)
    assert out.report.excluded == ({"unfinished": excluded.height} if excluded.height else {})
    assert all(p.endswith("args.json") for p in out.report.unmatched)
    assert len(out.report.unmatched) == len(plan["model"].unique()) * len(plan["repeat"].unique())


def test_the_generator_draws_unfinished_crashed_and_rerun_examples() -> None:
    plan = plan_osworld_runs(seed=0, examples=20)
    assert set(plan["unfinished"].drop_nulls()) == {"stopped", "crashed", "cleared"}
    assert plan["rerun"].any()
    assert plan["model"].n_unique() == 2


def test_example_ids_are_per_domain(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_osworld_runs(tmp_path / "results", seed=0, examples=4)
    out = osworld.read(root)
    tasks = set(out.tables["trials"]["task_id"]) | set(out.excluded["task_id"])
    assert len(tasks) == 3 * 4  # 4 ids repeated in 3 domains: 12 tasks
    with pytest.raises(InputError, match="occurs under domain chrome and domain gimp"):
        keep_raw_ids(out)
    code = main(["import", "osworld", str(root), "--raw-ids", "--out", str(tmp_path / "o")])
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_result_holding_text_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_osworld_runs(tmp_path / "results", seed=0, examples=2)
    result = next(iter(sorted(root.rglob("result.txt"))))
    result.write_text("None\n")
    code = main(["import", "osworld", str(root), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        f"recoverylab import: error: `{result}` holds `None`, not one number; a number file "
        "holds one number (e.g. `1.0`)."
    ]


def test_forks_pair_two_models_by_attempt(tmp_path: Path) -> None:
    roots = write_osworld_runs(tmp_path, seed=1, repeats=2)
    out = osworld.read(
        roots,
        to="forks",
        mapping={
            "method": "CASE WHEN model = 'gpt-4o' THEN 'none' ELSE 'agent-s2' END",
            "delay": "CASE WHEN model = 'gpt-4o' THEN NULL ELSE 0 END",
            "condition": "'clean'",
        },
    )
    forks = out.tables["forks"]
    assert set(forks["method"]) == {"none", "agent-s2"}
    assert out.report.hint == "pair by attempt"
    assert forks.filter(pl.col("method") == "none")["delay"].is_null().all()


def test_parameters_and_empty_trees_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="must be 'trials', 'forks' or 'takeover'"):
        osworld.read(tmp_path, to="states")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SourceError, match="no OSWorld example under"):
        osworld.read(tmp_path)


def test_an_example_directory_a_resume_emptied_is_unfinished(tmp_path: Path) -> None:
    root = write_osworld_runs(tmp_path, seed=0, examples=1, domains=("os",), models=("m",))
    (root / "pyautogui/screenshot/m/os/ffff-cleared").mkdir()
    out = osworld.read(root)
    row = out.excluded.filter(pl.col("raw_task_id") == "ffff-cleared").row(0, named=True)
    assert (row["reason"], row["detail"]) == ("unfinished", "empty directory")


def test_takeover_attempts_are_aware_where_the_marker_is(tmp_path: Path) -> None:
    plan = plan_osworld_runs(seed=2, repeats=2)
    roots = write_osworld_runs(tmp_path, seed=2, repeats=2, recovery_marker="RECOVERY:")
    out = osworld.read(
        roots,
        to="takeover",
        marker="RECOVERY:",
        mapping={"root_cause_fixed": "success", "derived_fixed": "success"},
    )
    attempts = out.tables["attempts"]
    finished = plan.filter(pl.col("unfinished").is_null())
    # an example's finished repeats by one agent, numbered 0, 1, ... (no gaps)
    numbered = finished.with_columns(
        (pl.col("repeat").rank("dense").over("domain", "example_id", "model") - 1).alias("n")
    )
    want = {
        (f"{r['domain']}/{r['example_id']}", r["model"], r["n"], r["aware"], r["score"] >= 1)
        for r in numbered.iter_rows(named=True)
    }
    got = set(attempts.select("state_id", "agent", "repeat", "aware", "passed").iter_rows())
    assert got == want
    assert out.tables["states"].height == finished.select("domain", "example_id").n_unique()
    trials = osworld.read(roots, marker="RECOVERY:").tables["trials"]
    aware = trials.filter("aware")
    steps = finished.filter("aware").select(
        (pl.col("domain") + "/" + pl.col("example_id")).alias("task_id"),
        pl.col("model"),
        pl.col("repeat").alias("attempt"),
        "marker_step",
    )
    joined = aware.join(steps, on=["task_id", "model", "attempt"], suffix="_drawn")
    assert joined.height == aware.height
    assert (joined["marker_step"] == joined["marker_step_drawn"]).all()


def test_takeover_needs_a_marker_and_the_repair_layers(tmp_path: Path) -> None:
    root = write_osworld_runs(tmp_path, seed=0, examples=2, recovery_marker="RECOVERY:")
    with pytest.raises(ParameterError, match="needs `marker`"):
        osworld.read(root, to="takeover")
    with pytest.raises(SchemaError, match="`root_cause_fixed`, `derived_fixed`"):
        osworld.read(root, to="takeover", marker="RECOVERY:")


def test_the_preset_agrees_with_import_table_over_the_same_template(tmp_path: Path) -> None:
    """``import osworld`` is a preset over path templates: its outcomes are the generic read's."""
    from recoverylab.adapters import table

    root = write_osworld_runs(tmp_path, seed=5, examples=5)
    logs = table.Logs(root, files=osworld._TEMPLATES["result"])
    generic = table.read(
        logs,
        to="trials",
        mapping={
            "task_id": "example_id",
            "task_scope": "domain",
            "attempt": "0",
            "success": "value >= 1",
            "reward": "value",
        },
        key=("model", "action_space", "observation_type"),
    ).tables["trials"]
    preset = osworld.read(root).tables["trials"]
    columns = ["task_id", "model", "attempt", "success", "reward"]
    assert generic.select(columns).sort(columns).equals(preset.select(columns).sort(columns))
