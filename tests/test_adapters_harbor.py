"""recoverylab.adapters.harbor on generated Harbor job directories, against a reference count.

The jobs (recoverylab.synth.harbor_jobs) carry what Harbor writes: TrialResult and TrialConfig
field names, rewards, exceptions whose reward Harbor keeps or voids (some with a per-trial policy
override), trials with no verifier result, a resumed job beside its pre-resume snapshot and a trial
retried in place, under nested directories with odd names. The generator records each trial's
truth (its arm, reward, whether Harbor keeps its reward, whether a later run superseded it); the
reference counts below come from that record alone, never from the adapter's code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from recoverylab._errors import InputError, ParameterError, SourceError
from recoverylab.adapters import harbor
from recoverylab.synth.harbor_jobs import HarborTrial, write_harbor_jobs

KWARGS = {
    "condition": "agent_kwarg:condition",
    "method": "agent_kwarg:method",
    "delay": "agent_kwarg:delay",
}
METADATA = {
    "condition": "agent_metadata:condition",
    "method": "agent_metadata:method",
    "delay": "agent_metadata:delay",
}
CLI_KWARGS = ("--condition", "agent_kwarg:condition", "--method", "agent_kwarg:method",
              "--delay", "agent_kwarg:delay")  # fmt: skip


def copies(truth: list[HarborTrial]) -> int:
    """Superseded entries that are copies of a live trial (same id), not earlier runs."""
    alive = {t.trial_id for t in truth if not t.superseded}
    return sum(t.superseded and t.trial_id in alive for t in truth)


def live(truth: list[HarborTrial]) -> list[HarborTrial]:
    """The trials that count once duplicates are resolved (one per trial id, not superseded)."""
    return [t for t in truth if not t.superseded]


def reference_cells(truth: list[HarborTrial], key: str = "reward") -> dict[tuple, tuple[int, int]]:
    """(condition, method, delay) -> (trials whose reward counts, successes), from the truth."""
    cells: dict[tuple, list[int]] = {}
    for t in live(truth):
        if t.valid:
            value = t.reward if key == "reward" else t.partial
            assert value is not None
            cell = cells.setdefault((t.condition, t.method, t.delay), [0, 0])
            cell[0] += 1
            cell[1] += int(value >= (1.0 if key == "reward" else 0.5))
    return {k: (n, s) for k, (n, s) in cells.items()}


def adapter_cells(table: pl.DataFrame) -> dict[tuple, tuple[int, int]]:
    grouped = table.group_by("condition", "method", "delay").agg(
        n=pl.len(), s=pl.col("success").sum()
    )
    return {(r["condition"], r["method"], r["delay"]): (r["n"], r["s"]) for r in grouped.to_dicts()}


def none_delay(truth: list[HarborTrial]) -> dict[tuple, tuple[int, int]]:
    return {
        (c, m, None if m == "none" else d): v for (c, m, d), v in reference_cells(truth).items()
    }


@pytest.mark.parametrize(
    ("layout", "seed", "resumed", "reward_keys"),
    [
        ("one_job", 0, False, 1),
        ("one_job", 1, True, 1),
        ("one_job", 2, True, 2),
        ("job_per_arm", 3, False, 1),
        ("job_per_arm", 4, True, 2),
        ("metadata", 5, True, 1),
    ],
)
def test_forks_match_the_reference_count(
    tmp_path: Path, layout: str, seed: int, resumed: bool, reward_keys: int
) -> None:
    truth = write_harbor_jobs(
        tmp_path, tasks=7, attempts=3, layout=layout, seed=seed, resumed=resumed,
        reward_keys=reward_keys,
    )  # fmt: skip
    mapping = METADATA if layout == "metadata" else KWARGS
    got = harbor.forks(tmp_path, **mapping, reward="reward")
    forks = got.tables["forks"]
    assert adapter_cells(forks) == none_delay(truth)
    expected_excluded = Counter(t.reason for t in live(truth) if not t.valid)
    if copies(truth):
        expected_excluded["duplicate"] = copies(truth)
    assert got.report.excluded == dict(sorted(expected_excluded.items()))
    assert got.excluded.height == sum(expected_excluded.values())
    assert len(got.report.superseded) == sum(t.superseded for t in truth) - copies(truth)
    ids = {json.loads(Path(f).read_bytes())["id"] for f in got.report.used}
    assert ids == {t.trial_id for t in live(truth) if t.valid}
    # attempts number the trials of each (task, arm) 0, 1, ...: no duplicate branch keys
    keys = ["task_id", "condition", "method", "delay", "attempt"]
    assert forks.select(keys).is_unique().all()
    assert forks["attempt"].max() <= 2
    assert got.report.hint == "pair by attempt"


def test_layouts_give_identical_forks(tmp_path: Path) -> None:
    """Arms in agent kwargs of one job, one job per arm, or reported in agent metadata."""
    tables = []
    for layout, mapping in (("one_job", KWARGS), ("job_per_arm", KWARGS), ("metadata", METADATA)):
        write_harbor_jobs(tmp_path / layout, tasks=6, attempts=2, layout=layout, seed=9)
        tables.append(harbor.forks(tmp_path / layout, **mapping).tables["forks"])
    assert tables[0].height > 0
    assert tables[0].equals(tables[1])
    assert tables[0].equals(tables[2])


def test_trials_table_columns_and_timing(tmp_path: Path) -> None:
    truth = write_harbor_jobs(tmp_path, tasks=5, attempts=2, reward_keys=2, seed=11)
    got = harbor.trials(tmp_path, columns=KWARGS, reward="partial", success=0.5)
    table = got.tables["trials"]
    assert table.columns[:4] == ["task_id", "attempt", "success", "reward"]
    wanted = {"condition", "method", "delay", "agent", "model", "exception_type", "seconds"}
    wanted |= {"agent_seconds", "started_at", "job", "trial_name", "file"}
    assert wanted <= set(table.columns)
    assert table.height == sum(t.valid for t in truth)
    by_file = {t.file: t for t in truth}
    for row in table.select("file", "reward", "success", "exception_type").to_dicts():
        t = by_file[row["file"]]
        assert row["reward"] == pytest.approx(t.partial)
        assert row["success"] == (t.partial >= 0.5)
        assert row["exception_type"] == t.exception_type  # an exception that kept the reward
    assert table["seconds"].to_list() == [70.0] * table.height
    assert table["agent_seconds"].to_list() == [45.0] * table.height
    assert table["started_at"].dtype == pl.Datetime("us", "UTC")


def test_takeover_from_funnel_reward_keys(tmp_path: Path) -> None:
    truth = write_harbor_jobs(tmp_path, tasks=4, attempts=3, funnel=True, seed=12)
    got = harbor.takeover(tmp_path, reward="reward", agent="agent_kwarg:method")
    attempts = got.tables["attempts"]
    assert attempts.height == sum(t.valid for t in truth)
    # task identity: Harbor names tasks per dataset (TrialResult.source), so source/task
    assert set(got.tables["states"]["state_id"]) == {
        f"recovery-bench/{t.task}" for t in truth if t.valid
    }
    assert (attempts["derived_fixed"] & ~attempts["root_cause_fixed"]).sum() == 0
    assert attempts["passed"].sum() == sum(t.reward == 1.0 for t in truth if t.valid)
    runs = attempts.group_by("state_id", "agent").agg(pl.col("repeat").sort(), n=pl.len())
    assert all(
        r == list(range(n)) for r, n in zip(runs["repeat"].to_list(), runs["n"], strict=True)
    )
    assert attempts["repeat"].max() < 3 * 2  # (state, method): 3 attempts x 2 arms at most


# --- Harbor's own model, when it can be imported ------------------------------------------------


def harbor_python() -> str:
    """A Python that can import harbor: this one, or ``RECOVERYLAB_HARBOR_PYTHON``; else skip."""
    if importlib.util.find_spec("harbor") is not None:
        return sys.executable
    python = os.environ.get("RECOVERYLAB_HARBOR_PYTHON")
    if not python:
        pytest.skip(
            "harbor is not importable (it needs Python >= 3.12; this is an older one) and "
            "RECOVERYLAB_HARBOR_PYTHON names no Python that has it"
        )
    return python


#: Validates result files with Harbor's TrialResult: prints `ok` or the first mismatch.
VALIDATE = """
import json, sys
from pathlib import Path
from harbor.models.trial.result import TrialResult
for file, valid, mirror in json.loads(sys.stdin.read()):
    result = TrialResult.model_validate_json(Path(file).read_text(encoding="utf-8"))
    dumped = json.loads(result.model_dump_json())
    if result.reward_valid != valid or set(dumped) != set(json.loads(Path(file).read_text())):
        print("mismatch", file)
        break
    Path(mirror).write_text(result.model_dump_json(indent=4), encoding="utf-8")
else:
    print("ok")
"""


def test_generated_results_validate_with_harbors_trial_result(tmp_path: Path) -> None:
    """Every generated result.json is a TrialResult, and Harbor's reward_valid is the truth's.

    The same jobs with every result.json written by Harbor's own ``model_dump_json`` give the
    same tables. Runs in this interpreter when ``harbor`` imports, else under the Python named by
    ``RECOVERYLAB_HARBOR_PYTHON`` (a Python >= 3.12 with harbor installed), else skips.
    """
    ours, dumped = tmp_path / "ours", tmp_path / "dumped"
    truth = write_harbor_jobs(
        ours, tasks=6, attempts=2, resumed=True, reward_keys=2, funnel=True, seed=3
    )
    shutil.copytree(ours, dumped)
    pairs = json.dumps([[t.file, t.valid, t.file.replace(str(ours), str(dumped))] for t in truth])
    command = [harbor_python(), "-c", VALIDATE]
    done = subprocess.run(command, input=pairs, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
    a, b = (harbor.trials(d, columns=KWARGS, reward="reward") for d in (ours, dumped))
    assert a.tables["trials"].drop("file", "job").equals(b.tables["trials"].drop("file", "job"))
    assert a.report.excluded == b.report.excluded
    assert a.report.superseded == tuple(
        replace(
            x, log=x.log.replace(str(dumped), str(ours)), by=x.by.replace(str(dumped), str(ours))
        )
        for x in b.report.superseded
    )


POLICIES = """
import json
from dataclasses import astuple
from harbor.models.trial.error_policy import ERROR_POLICIES, UNKNOWN_ERROR_POLICY
table = {name: list(astuple(policy)) for name, policy in ERROR_POLICIES.items()}
print(json.dumps({"table": table, "unknown": list(astuple(UNKNOWN_ERROR_POLICY))}))
"""


def test_mirrored_error_policy_is_harbors() -> None:
    """Our copy of Harbor's error-policy table equals Harbor's own (when Harbor can be run)."""
    from dataclasses import astuple

    from recoverylab.adapters._harbor_policy import ERROR_POLICIES, UNKNOWN_ERROR_POLICY

    command = [harbor_python(), "-c", POLICIES]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    theirs = json.loads(done.stdout)
    assert theirs["table"] == {n: list(astuple(p)) for n, p in ERROR_POLICIES.items()}
    assert theirs["unknown"] == list(astuple(UNKNOWN_ERROR_POLICY))


# --- failures: Harbor's policy, overrides, steps ------------------------------------------------


def _edit(path: Path, change: Callable[[dict], None]) -> None:
    value = json.loads(path.read_text(encoding="utf-8"))
    change(value)
    path.write_text(json.dumps(value, indent=4), encoding="utf-8")


def _clean_job(tmp_path: Path, **kw: object) -> tuple[list[HarborTrial], Path]:
    truth = write_harbor_jobs(tmp_path / "jobs-root", tasks=3, attempts=2, failures=False, **kw)
    return truth, tmp_path / "jobs-root"


def test_step_exceptions_and_overrides_follow_harbors_policy(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    files = [Path(t.file) for t in truth]
    info = {"exception_type": "SSHAccessError", "exception_message": "lost",
            "exception_traceback": "", "occurred_at": "2026-11-30T08:00:00Z"}  # fmt: skip
    step = {"step_name": "fix", "exception_info": info}
    _edit(files[0], lambda v: v.update(step_results=[step]))
    override = {"exception_type": "SSHAccessError", "exception_message": "x",
                "exception_traceback": "", "occurred_at": "2026-11-30T08:00:00Z",
                "policy_override": {"has_valid_reward": True}}  # fmt: skip
    _edit(files[1], lambda v: v.update(exception_info=override))
    _edit(files[2], lambda v: v.update(verifier_result={"rewards": {}}))
    got = harbor.trials(root, columns=KWARGS)
    assert got.report.excluded == {"SSHAccessError": 1, "no_reward": 1}
    kept = got.tables["trials"].filter(pl.col("file") == str(files[1]))
    assert kept["exception_type"].to_list() == ["SSHAccessError"]


def test_no_trial_with_a_reward_that_counts_is_an_error(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    for t in truth:
        _edit(Path(t.file), lambda v: v.update(verifier_result=None))
    with pytest.raises(InputError, match=r"no trial has a reward that counts \(no_reward 24\)"):
        harbor.trials(root)


def test_unfinished_trial_directory_is_excluded(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    Path(truth[0].file).unlink()
    got = harbor.trials(root, columns=KWARGS)
    assert got.report.excluded == {"unfinished": 1}
    assert got.excluded["log"].to_list() == [str(Path(truth[0].file).parent)]
    assert got.tables["trials"].height == len(truth) - 1


# --- bad input: one clear error naming the file ---------------------------------------------------


def test_missing_field_corrupt_and_empty_files_are_named(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    path = Path(truth[1].file)
    original = path.read_bytes()
    _edit(path, lambda v: v.pop("task_name"))
    with pytest.raises(InputError, match=rf"`{path}` has no `task_name`"):
        harbor.trials(root)
    path.write_text('{"task_name": "x", ', encoding="utf-8")
    with pytest.raises(InputError, match=rf"`{path}` is not valid JSON"):
        harbor.trials(root)
    path.write_bytes(original)
    _edit(Path(truth[0].file), lambda v: v.update(agent_info="terminus"))
    with pytest.raises(InputError, match=rf"`{truth[0].file}` does not have TrialResult's shape"):
        harbor.trials(root)
    _edit(Path(truth[0].file), lambda v: v.update(agent_info={"name": "a", "version": "1"}))
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InputError, match=rf"`{path}` is not a JSON object"):
        harbor.trials(root)
    path.write_text("  \n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"`{path}` is empty"):
        harbor.trials(root)


def test_reward_keys_must_be_chosen_and_known(tmp_path: Path) -> None:
    _, root = _clean_job(tmp_path, reward_keys=2)
    with pytest.raises(ParameterError, match="have keys `reward`, `partial`; choose one"):
        harbor.trials(root)
    with pytest.raises(ParameterError, match="no trial has reward key `score`"):
        harbor.trials(root, reward="score")
    with pytest.raises(ParameterError, match=r"reward `partial` is 0\.\d+ in .* not 0 or 1"):
        harbor.trials(root, reward="partial")
    assert harbor.trials(root, reward="partial", success=0.5).tables["trials"].height > 0


def test_bad_sources_and_missing_values(tmp_path: Path) -> None:
    _, root = _clean_job(tmp_path)
    with pytest.raises(ParameterError, match="must be one of task, agent"):
        harbor.trials(root, columns={"condition": "task_arg:condition"})
    for name in ("file", "_valid", "config.agent", "reward"):
        with pytest.raises(ParameterError, match=f"column `{name}` is a name the adapter uses"):
            harbor.trials(root, columns={name: "task"})
    with pytest.raises(InputError, match="comes from agent_kwarg:arm, but 24 trials have no"):
        harbor.trials(root, columns={"condition": "agent_kwarg:arm"})
    with pytest.raises(InputError, match="`delay` comes from agent_kwarg:condition"):
        harbor.forks(root, condition="literal:c", method="literal:m", delay="agent_kwarg:condition")
    with pytest.raises(SourceError, match="does not exist"):
        harbor.trials(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match=r"no trial result\.json found under"):
        harbor.trials(tmp_path / "empty")
    table = harbor.trials(root, columns={"c": "job_config:n_attempts", "j": "job"}).tables["trials"]
    assert set(table["c"]) == {"2"}
    assert set(table["j"]) == {"2026-11-30__08-00-00"}


def test_conflicting_duplicates_are_errors_naming_both_files(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    source = Path(truth[0].file)
    copy = root / "copy" / source.parent.name / "result.json"
    copy.parent.mkdir(parents=True)
    shutil.copy(source, copy)
    got = harbor.trials(root, columns=KWARGS)  # an identical copy: one trial, reported
    assert got.report.superseded == ()
    assert got.excluded.select("log", "reason", "detail").rows() == [
        (str(source), "duplicate", f"the same trial as {copy}")
    ]
    _edit(copy, lambda v: v["verifier_result"]["rewards"].update(reward=-1.0))
    with pytest.raises(InputError, match=r"are the same trial .* differ in `rewards`") as err:
        harbor.trials(root, columns=KWARGS)
    assert str(copy) in str(err.value)
    assert str(source) in str(err.value)
    # another run of the same planned trial under a new id, neither failed: not a retry
    _edit(copy, lambda v: v.update(id="00000000-0000-0000-0000-000000000001"))
    shutil.move(copy.parent, source.parent.parent / "extra__run")
    with pytest.raises(InputError, match="did not fail, so none replaces another"):
        harbor.trials(root, columns=KWARGS)


# --- command line ---------------------------------------------------------------------------------


def test_cli_import_then_paired(tmp_path: Path, cli: Callable) -> None:
    truth = write_harbor_jobs(tmp_path / "jobs", tasks=6, attempts=2, resumed=True, seed=21)
    out, report = tmp_path / "tables", tmp_path / "report.json"
    done = cli("import", "harbor", tmp_path / "jobs", *CLI_KWARGS, "--out", out,
               "--report-out", report)  # fmt: skip
    assert done.code == 0, done.err
    assert "import harbor:" in done.err
    assert "(pair by attempt)" in done.err
    written = json.loads(report.read_text(encoding="utf-8"))
    assert written["unit"] == "trials"
    assert written["rows"]["forks"] == sum(t.valid for t in live(truth))
    assert len(written["superseded"]) == sum(t.superseded for t in truth) - copies(truth)
    assert written["excluded"]["duplicate"] == copies(truth)
    forks = pl.read_parquet(out / "forks.parquet")
    assert adapter_cells(forks) == none_delay(truth)
    cells = tmp_path / "cells.parquet"
    done = cli("paired", out / "forks.parquet", "--pair-by", "attempt", "--resamples", 50,
               "--out", cells)  # fmt: skip
    assert done.code == 0, done.err
    assert pl.read_parquet(cells).height == 2
    done = cli("--quiet", "import", "harbor", tmp_path / "jobs", "--to", "trials",
               "--out", tmp_path / "t2")  # fmt: skip
    assert done.code == 0
    assert done.err == ""
    assert (tmp_path / "t2" / "trials.parquet").exists()


@pytest.mark.parametrize(
    ("edit", "args", "message"),
    [
        (lambda v: v.pop("trial_name"), (), "has no `trial_name`"),
        (None, ("--reward", "score"), "no trial has reward key `score`"),
        ("corrupt", (), "is not valid JSON"),
        (None, ("--column", "oops"), "write NAME=SOURCE"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, cli: Callable, edit: object, args: tuple[str, ...], message: str
) -> None:
    truth, root = _clean_job(tmp_path)
    if edit == "corrupt":
        Path(truth[0].file).write_text("{", encoding="utf-8")
    elif callable(edit):
        _edit(Path(truth[0].file), edit)
    out = tmp_path / "out"
    done = cli("import", "harbor", root, "--to", "trials", *args, "--out", out,
               "--report-out", tmp_path / "r.json")  # fmt: skip
    assert done.code == 2
    assert message in done.err
    assert len(done.err.strip().splitlines()) == 1
    assert done.err.startswith("recoverylab import: error:")
    assert not out.exists()
    assert not (tmp_path / "r.json").exists()


def test_cli_forks_needs_the_arm_sources(tmp_path: Path, cli: Callable) -> None:
    _, root = _clean_job(tmp_path)
    done = cli("import", "harbor", root, "--out", tmp_path / "o")
    assert done.code == 2
    assert "needs --condition, --method, --delay" in done.err


def test_non_numeric_reward_and_agents_without_a_model(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    for t in truth:  # Harbor's oracle agent: no model_info
        _edit(Path(t.file), lambda v: v["agent_info"].update(model_info=None))
    forks = harbor.forks(root, **KWARGS).tables["forks"]
    assert forks.height == len(truth)
    assert forks["model"].null_count() == forks.height
    _edit(Path(truth[0].file), lambda v: v["verifier_result"]["rewards"].update(reward="yes"))
    with pytest.raises(InputError, match="values that are not numbers"):
        harbor.forks(root, **KWARGS)


@pytest.mark.parametrize("huge", [10**33, -(10**20)])
def test_a_reward_beyond_64_bits_beside_a_bool_names_its_file(tmp_path: Path, huge: int) -> None:
    """A bool reward (a number to Harbor) and one beyond 64 bits in one job: polars cannot
    decode the column together (found by the Harbor fuzzer). Each is read as the number it is,
    so the huge one is refused as not 0 or 1, naming its file, as it is alone."""
    truth, root = _clean_job(tmp_path)
    _edit(Path(truth[0].file), lambda v: v["verifier_result"]["rewards"].update(reward=True))
    _edit(Path(truth[1].file), lambda v: v["verifier_result"]["rewards"].update(reward=huge))
    with pytest.raises(ParameterError, match="not 0 or 1") as caught:
        harbor.forks(root, **KWARGS)
    assert truth[1].file in str(caught.value)
    _edit(Path(truth[1].file), lambda v: v["verifier_result"]["rewards"].update(reward=0))
    forks = harbor.forks(root, **KWARGS).tables["forks"]  # the bool reads as 1
    assert forks.height == len(truth)


def test_timestamps_as_pydantic_writes_them(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    stamps = ["2026-11-30T08:00:00", "2026-11-30T08:00:00.5+02:00", "2026-11-30T08:00:00Z"]
    for t, stamp in zip(truth, stamps, strict=False):
        _edit(Path(t.file), lambda v, s=stamp: v.update(started_at=s, finished_at=None))
    table = harbor.trials(root).tables["trials"]
    got = table.filter(pl.col("file").is_in([t.file for t in truth[:3]])).sort("file")
    want = {t.file: s for t, s in zip(truth, stamps, strict=False)}
    expected = pl.Series([want[f] for f in got["file"]]).str.replace("Z$", "+00:00")
    parsed = [d.isoformat() for d in got["started_at"]]
    assert parsed == [
        {"2026-11-30T08:00:00": "2026-11-30T08:00:00+00:00",
         "2026-11-30T08:00:00.5+02:00": "2026-11-30T06:00:00.500000+00:00",
         "2026-11-30T08:00:00+00:00": "2026-11-30T08:00:00+00:00"}[e] for e in expected
    ]  # fmt: skip
    assert got["seconds"].null_count() == 3


def test_cli_takeover_writes_states_and_attempts(tmp_path: Path, cli: Callable) -> None:
    truth = write_harbor_jobs(tmp_path / "jobs", tasks=3, attempts=2, funnel=True, seed=5)
    out = tmp_path / "out"
    done = cli("import", "harbor", tmp_path / "jobs", "--to", "takeover", "--reward", "reward",
               "--out", out)  # fmt: skip
    assert done.code == 0, done.err
    attempts = pl.read_parquet(out / "attempts.parquet")
    assert attempts.height == sum(t.valid for t in truth)
    assert pl.read_parquet(out / "states.parquet").height == 3
    done = cli(
        "takeover", "--states", out / "states.parquet", "--attempts", out / "attempts.parquet"
    )
    assert done.code == 0, done.err


@pytest.mark.parametrize("by", ["trial_id", "path"])
def test_a_regrade_supersedes_the_trial_it_regrades(tmp_path: Path, by: str) -> None:
    """Harbor's regrade job re-runs the verifier on a source trial: one agent run, graded twice."""
    truth, root = _clean_job(tmp_path)
    source = Path(truth[0].file)
    original = json.loads(source.read_text(encoding="utf-8"))
    regrade_dir = root / "regrades" / "job-regrade" / source.parent.name
    regrade_dir.mkdir(parents=True)
    (regrade_dir / ".sources").mkdir()  # Harbor's cache of the sources: never read as trials
    shutil.copytree(source.parent, regrade_dir / ".sources" / source.parent.name)
    link = {"action": "regrade", "type": "local", "trial_id": None, "path": str(source.parent)}
    if by == "trial_id":
        link |= {"trial_id": original["id"], "path": "/elsewhere/gone"}
    regraded = json.loads(json.dumps(original))
    regraded["id"] = "00000000-0000-0000-0000-0000000000aa"
    regraded["config"] |= {"source_trial": link, "job_id": "00000000-0000-0000-0000-0000000000bb"}
    flipped = 1 - original["verifier_result"]["rewards"]["reward"]
    regraded["verifier_result"] = {"rewards": {"reward": flipped}}
    (regrade_dir / "result.json").write_text(json.dumps(regraded), encoding="utf-8")
    got = harbor.trials(root, columns=KWARGS)
    assert [(s.log, s.by, s.reason) for s in got.report.superseded] == [
        (str(source), str(regrade_dir / "result.json"), "regrade")
    ]
    assert got.excluded.height == 0  # the .sources cache was not read
    table = got.tables["trials"]
    assert table.height == len(truth)
    row = table.filter(pl.col("file") == str(regrade_dir / "result.json"))
    assert row["reward"].to_list() == [regraded["verifier_result"]["rewards"]["reward"]]


def test_attempts_follow_the_start_time_not_its_spelling(tmp_path: Path) -> None:
    truth, root = _clean_job(tmp_path)
    first, second = [t for t in truth if (t.task, t.method, t.delay) == ("fix-git", "refresh", 1)]
    _edit(Path(first.file), lambda v: v.update(started_at="2026-12-01T10:00:00+02:00"))  # 08:00Z
    _edit(Path(second.file), lambda v: v.update(started_at="2026-12-01T09:00:00Z"))
    table = harbor.trials(root, columns=KWARGS).tables["trials"]
    got = dict(table.select("file", "attempt").iter_rows())
    assert (got[first.file], got[second.file]) == (0, 1)
