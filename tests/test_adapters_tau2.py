"""recoverylab.adapters.tau2 on generated tau2-bench results (recoverylab.synth.tau2_results).

The files follow tau2-bench's data model field for field (Results / SimulationRun / RewardInfo /
Info, both the json and the dir layout). Every test compares with a reference computed here from
the same JSON by plain Python: the rows tau2-bench keeps, and its pass^k as its metrics code
computes it (agent_metrics.get_metrics_df + pass_hat_k, re-implemented below).
"""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from recoverylab import takeover
from recoverylab._errors import InputError, ParameterError, SourceError
from recoverylab.adapters import tau2
from recoverylab.synth.tau2_results import TERMINATION_REASONS, write_tau2_results

NON_EVALUABLE = {"infrastructure_error", "context_window_exceeded"}


def _documents(paths: list[Path]) -> list[dict[str, Any]]:
    """Each results document with its simulations, whatever the layout (read with json)."""
    out = []
    for path in paths:
        if path.is_dir():
            meta = json.loads((path / "results.json").read_text())
            sims = [json.loads(f.read_text()) for f in sorted((path / "simulations").iterdir())]
            out.append({**meta, "simulations": sims})
        else:
            out.append(json.loads(path.read_text()))
    return out


def _is_successful(reward: float) -> bool:
    return (1 - 1e-6) <= reward <= (1 + 1e-6)  # tau2's agent_metrics.is_successful


def _after_resume(document: dict[str, Any]) -> list[dict[str, Any]]:
    """tau2's checkpoint resume: an infrastructure error is replaced by its trial's retry."""
    sims = document["simulations"]
    retried = {
        (s["task_id"], s["trial"])
        for s in sims
        if s["termination_reason"] != "infrastructure_error"
    }
    kept, seen = [], set()
    for s in sims:
        key = (s["task_id"], s["trial"])
        if s["termination_reason"] == "infrastructure_error" and (key in retried or key in seen):
            continue
        seen.add(key)
        kept.append(s)
    return kept


def _evaluated(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The simulations tau2 scores: after resume, minus the non-evaluable terminations."""
    return [s for s in _after_resume(document) if s["termination_reason"] not in NON_EVALUABLE]


def reference_rows(paths: list[Path]) -> set[tuple[Any, ...]]:
    rows = set()
    for doc in _documents(paths):
        info = doc["info"]
        for s in _evaluated(doc):
            reward = s["reward_info"]["reward"]
            rows.add(
                (
                    info["environment_info"]["domain_name"],
                    info["agent_info"]["llm"],
                    # task identity: tau2 numbers tasks per domain, so the id is domain/id
                    f"{info['environment_info']['domain_name']}/{s['task_id']}",
                    s["trial"],
                    reward,
                    _is_successful(reward),
                    s["termination_reason"],
                )
            )
    return rows


def tau2_pass_hat_ks(document: dict[str, Any]) -> dict[int, float]:
    """tau2-bench's pass^k of one results file (agent_metrics.get_metrics_df + pass_hat_k)."""
    by_task: dict[str, list[bool]] = defaultdict(list)
    for s in _evaluated(document):
        by_task[s["task_id"]].append(_is_successful(s["reward_info"]["reward"]))
    max_k = min(document["info"]["num_trials"], *(len(v) for v in by_task.values()))
    return {
        k: sum(math.comb(sum(v), k) / math.comb(len(v), k) for v in by_task.values()) / len(by_task)
        for k in range(1, max_k + 1)
    }


def _row_set(trials: pl.DataFrame) -> set[tuple[Any, ...]]:
    cols = ["domain", "agent_model", "task_id", "attempt", "reward", "success"]
    return set(trials.select(*cols, "termination_reason").rows())


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("layout", ["json", "dir"])
@pytest.mark.parametrize("resumed", [False, True])
def test_rows_match_tau2s_own_selection(
    tmp_path: Path, seed: int, layout: str, resumed: bool
) -> None:
    paths = write_tau2_results(tmp_path, seed=seed, layout=layout, resumed=resumed)
    out = tau2.read(paths)
    trials = out.tables["trials"]
    assert _row_set(trials) == reference_rows(paths)
    assert trials.height == len(reference_rows(paths))
    assert list(trials.columns) == list(tau2.TRIALS_SCHEMA)
    assert dict(trials.schema) == dict(tau2.TRIALS_SCHEMA)
    # every non-evaluable run is excluded by its own reason, and nothing else is
    expected: dict[str, int] = defaultdict(int)
    for doc in _documents(paths):
        for s in _after_resume(doc):
            if s["termination_reason"] in NON_EVALUABLE:
                expected[s["termination_reason"]] += 1
    assert dict(out.report.excluded) == dict(expected)
    assert out.report.rows == {"trials": trials.height, "excluded": out.excluded.height}
    assert set(out.excluded["reason"].unique()) <= NON_EVALUABLE
    if resumed:
        assert out.report.superseded
        assert {s.reason.split(",")[0] for s in out.report.superseded} == {"retry"}


def test_every_termination_reason_occurs(tmp_path: Path) -> None:
    paths = write_tau2_results(tmp_path, seed=0, tasks=10)
    reasons = {s["termination_reason"] for d in _documents(paths) for s in d["simulations"]}
    assert reasons == set(TERMINATION_REASONS)
    rewards = {s["reward_info"]["reward"] for d in _documents(paths) for s in d["simulations"]}
    assert 0.5 in rewards  # partial rewards: kept as reward, not a success
    out = tau2.read(paths).tables["trials"]
    assert (
        out.filter(pl.col("reward") == 0.5)["success"].to_list()
        == [False] * out.filter(pl.col("reward") == 0.5).height
    )


@pytest.mark.parametrize(("seed", "layout"), [(0, "json"), (3, "dir"), (5, "json")])
def test_pass_hat_k_equals_tau2s_formula(tmp_path: Path, seed: int, layout: str) -> None:
    paths = write_tau2_results(tmp_path, seed=seed, layout=layout, resumed=True, tasks=8)
    trials = tau2.read(paths).tables["trials"]
    unit = [*tau2.EXPERIMENT, "task_id"]
    checked = 0
    for path, doc in zip(paths, _documents(paths), strict=True):
        expected = tau2_pass_hat_ks(doc)
        info = doc["info"]
        run = trials.filter(
            (pl.col("domain") == info["environment_info"]["domain_name"])
            & (pl.col("agent_model") == info["agent_info"]["llm"])
        )
        for k, value in expected.items():
            got = takeover.repeats_reliability(
                run, unit=unit, cluster="task_id", outcome="success", k=k, n_resamples=20
            )
            assert got["pass_hat_k"].item() == pytest.approx(value, abs=1e-12), (path, k)
            checked += 1
    assert checked >= 12


def test_pass_hat_k_by_cell_in_one_call(tmp_path: Path) -> None:
    paths = write_tau2_results(tmp_path, seed=4, trials=5)
    trials = tau2.read(paths).tables["trials"]
    k = 2
    got = takeover.repeats_reliability(
        trials,
        unit=[*tau2.EXPERIMENT, "task_id"],
        cluster="task_id",
        outcome="success",
        by=["domain", "agent_model"],
        k=k,
        n_resamples=20,
    )
    for doc in _documents(paths):
        info = doc["info"]
        cell = got.filter(
            (pl.col("domain") == info["environment_info"]["domain_name"])
            & (pl.col("agent_model") == info["agent_info"]["llm"])
        )
        assert cell["pass_hat_k"].item() == pytest.approx(tau2_pass_hat_ks(doc)[k], abs=1e-12)


def test_layouts_give_identical_tables(tmp_path: Path) -> None:
    as_json = tau2.read(write_tau2_results(tmp_path / "j", seed=7, resumed=True))
    as_dir = tau2.read(write_tau2_results(tmp_path / "d", seed=7, layout="dir", resumed=True))
    assert as_json.tables["trials"].equals(as_dir.tables["trials"])
    assert as_json.excluded.drop("log").equals(as_dir.excluded.drop("log"))
    # a folder of runs, a run directory and its results.json name the same runs
    one = write_tau2_results(tmp_path / "one", seed=7, layout="dir", domains=("retail",))[0]
    by_dir = tau2.read(one).tables["trials"]
    assert by_dir.equals(tau2.read(one / "results.json").tables["trials"])
    assert by_dir.equals(
        tau2.read(tmp_path / "one").tables["trials"].filter(pl.col("agent_model") == "gpt-4.1")
    )


def test_resumed_run_with_its_checkpoint(tmp_path: Path) -> None:
    paths = write_tau2_results(tmp_path, seed=2, resumed=True)
    checkpoints = sorted((tmp_path / "checkpoints").glob("*.json"))
    alone = tau2.read(paths)
    both = tau2.read([*paths, *checkpoints])
    assert both.tables["trials"].equals(alone.tables["trials"])
    assert both.excluded.height == alone.excluded.height
    kinds = {s.reason.split(",")[0] for s in both.report.superseded}
    assert kinds == {"duplicate", "retry"}
    assert "retry" in both.report.render()
    assert "duplicate" in both.report.render()


def _sims(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_conflicting_duplicate_is_an_error_naming_files_and_key(tmp_path: Path) -> None:
    path = write_tau2_results(tmp_path, seed=1, domains=("airline",), agents=(("a", "m"),))[0]
    doc = _sims(path)
    sim = next(s for s in doc["simulations"] if s["termination_reason"] == "agent_stop")
    other = {
        **sim,
        "id": "rerun-1",
        "reward_info": {**sim["reward_info"], "reward": 1.0 - sim["reward_info"]["reward"]},
    }
    copy = tmp_path / "rerun.json"
    copy.write_text(json.dumps({**doc, "simulations": [other]}))
    with pytest.raises(InputError) as err:
        tau2.read([path, copy])
    message = str(err.value)
    assert str(path) in message
    assert str(copy) in message
    assert f"task `{sim['task_id']}` trial {sim['trial']}" in message
    assert "\n" not in message


def _broken(tmp_path: Path, edit: Any) -> Path:
    path = write_tau2_results(tmp_path, seed=0, domains=("retail",), agents=(("a", "m"),))[0]
    doc = _sims(path)
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "error", "words"),
    [
        (lambda d: d["info"].pop("environment_info"), InputError, "info.environment_info"),
        (lambda d: d.pop("simulations"), InputError, "no `simulations`"),
        (lambda d: d["simulations"][0].pop("trial"), InputError, "no `trial`"),
        (lambda d: d["simulations"][0].update(trial="1"), InputError, "must be an int"),
        (lambda d: d["simulations"][0].update(task_id=None), InputError, "no `task_id`"),
        (
            lambda d: d["simulations"][0].update(termination_reason="crashed"),
            InputError,
            "'crashed'",
        ),
        (lambda d: d.update(simulations={}), InputError, "not a list"),
    ],
)
def test_bad_results_are_one_clear_error(
    tmp_path: Path, edit: Any, error: type[Exception], words: str
) -> None:
    path = _broken(tmp_path, edit)
    with pytest.raises(error) as err:
        tau2.read(path)
    assert words in str(err.value)
    assert str(path) in str(err.value)


def test_missing_reward_is_excluded_not_a_failure(tmp_path: Path) -> None:
    def drop(doc: dict[str, Any]) -> None:
        sim = next(s for s in doc["simulations"] if s["termination_reason"] == "user_stop")
        sim["reward_info"] = None
        drop.sim = sim["id"]  # type: ignore[attr-defined]

    out = tau2.read(_broken(tmp_path, drop))
    assert out.excluded.filter(pl.col("reason") == "no_reward")["detail"].to_list() == [drop.sim]  # type: ignore[attr-defined]
    assert drop.sim not in out.tables["trials"]["simulation_id"].to_list()  # type: ignore[attr-defined]


def test_older_rule_counts_context_overflow_as_outcome(tmp_path: Path) -> None:
    paths = write_tau2_results(tmp_path, seed=0)
    new = tau2.read(paths)
    old = tau2.read(paths, non_evaluable=("infrastructure_error",))
    overflow = old.tables["trials"].filter(
        pl.col("termination_reason") == "context_window_exceeded"
    )
    assert overflow.height == new.report.excluded["context_window_exceeded"] > 0
    assert not overflow["success"].any()
    with pytest.raises(ParameterError, match="'crash'"):
        tau2.read(paths, non_evaluable=("crash",))
    with pytest.raises(ParameterError, match="'takeover'"):
        tau2.read(paths, to="takeover")


def test_sources_that_are_not_results(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"info": \n oops}')
    with pytest.raises(SourceError, match=r"line 2"):
        tau2.read(bad)
    with pytest.raises(SourceError, match="does not exist"):
        tau2.read(tmp_path / "absent.json")
    with pytest.raises(SourceError, match="no results"):
        tau2.read([])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="holds no tau2-bench results"):
        tau2.read(tmp_path / "empty")
    array = tmp_path / "array.json"
    array.write_text("[1, 2]")
    with pytest.raises(InputError, match="not an object"):
        tau2.read(array)


def test_dir_index_must_match_the_files(tmp_path: Path) -> None:
    run = write_tau2_results(
        tmp_path, seed=0, layout="dir", domains=("retail",), agents=(("a", "m"),)
    )[0]
    victim = sorted((run / "simulations").iterdir())[3]
    shutil.move(victim, tmp_path / victim.name)
    with pytest.raises(InputError) as err:
        tau2.read(run)
    assert victim.stem in str(err.value)
    assert "missing files" in str(err.value)


def test_cli_trials_and_forks(cli: Any, tmp_path: Path) -> None:
    paths = write_tau2_results(tmp_path / "results", seed=0, resumed=True)
    result = cli(
        "import",
        "tau2",
        tmp_path / "results",
        "--out",
        tmp_path / "t",
        "--report-out",
        tmp_path / "r.json",
    )
    assert result.code == 0, result.err
    trials = pl.read_parquet(tmp_path / "t" / "trials.parquet")
    assert _row_set(trials) == reference_rows(paths)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["format"] == "tau2"
    assert report["rows"]["trials"] == trials.height
    assert "import tau2:" in result.err
    arm = "CASE WHEN agent_model = 'o4-mini' THEN 'none' ELSE 'gpt' END"
    delay = "CASE WHEN agent_model = 'o4-mini' THEN NULL ELSE 0 END"
    result = cli(
        "import",
        "tau2",
        *paths,
        "--to",
        "forks",
        "--map",
        f"method={arm}",
        "--map",
        "condition='clean'",
        "--map",
        f"delay={delay}",
        "--out",
        tmp_path / "f",
    )
    assert result.code == 0, result.err
    forks = pl.read_parquet(tmp_path / "f" / "forks.parquet")
    assert forks.height == trials.height
    assert set(forks.columns) == {
        "task_id",
        "condition",
        "method",
        "delay",
        "success",
        "domain",
        "attempt",
        "raw_task_id",
        "task_scope",
    }
    paired = cli(
        "paired",
        tmp_path / "f" / "forks.parquet",
        "--pair-by",
        "domain,attempt",
        "--resamples",
        "50",
    )
    assert paired.code == 0, paired.err


def test_cli_bad_input_is_one_line_exit_2_nothing_written(cli: Any, tmp_path: Path) -> None:
    path = _broken(tmp_path, lambda d: d["info"].pop("agent_info"))
    result = cli("import", "tau2", path, "--out", tmp_path / "out")
    assert result.code == 2
    assert result.err.strip().count("\n") == 0
    assert "info.agent_info" in result.err
    assert not (tmp_path / "out").exists()
    result = cli("import", "tau2", path, "--map", "x=1", "--out", tmp_path / "out")
    assert result.code == 2
    assert "--to forks" in result.err
