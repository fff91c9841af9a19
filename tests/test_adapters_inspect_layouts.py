"""Layout does not matter: the same runs in every inspect layout give the same tables (§8).

One simulated experiment (recoverylab.synth.inspect_logs.Experiment: 2 conditions x (none +
retry at delay 1), 2 models, 2 epochs, 4 samples; sample 2 errors in `stale`, sample 3 hits a
message limit everywhere, two scorers) is written by inspect_ai itself in every layout of
``LAYOUTS`` (plus dict-valued scores). Each layout, read with its own mapping, must give the forks
and takeover tables of an independent reference computed from the experiment's ground truth, so
all layouts agree with one another. The identity rule (a retry is superseded and reported; logs
that differ in a mapped value never are) and the command-line acceptance run on the same logs.
"""

from __future__ import annotations

import gc
import json
import shutil
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("inspect_ai")

from recoverylab._errors import InputError, ParameterError
from recoverylab.adapters import Imported
from recoverylab.adapters import inspect as ri
from recoverylab.synth import inspect_logs as il
from tests.test_adapters_inspect import no_network

pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

EXPERIMENT = il.Experiment(
    samples=4,
    epochs=2,
    models=("scripted/model", "scripted/other"),
    errors={"stale": (2,)},
    limits=(3,),
    scores="two",
)
LAYOUTS = (*il.LAYOUTS, "dict_scores")


@pytest.fixture(autouse=True)
def offline() -> Any:
    with no_network():
        yield


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Every layout of the experiment, written once per module (json and split_dirs rewritten
    by inspect's own writer from the models_in_one_call logs: the same genuine logs, faster)."""
    root = tmp_path_factory.mktemp("layouts")
    made: dict[str, list[Path]] = {}
    with no_network(root / "default-logs"), pytest.MonkeyPatch.context() as patch:
        # inspect looks up which installed distribution ships each task's module, scanning every
        # installed file per task (~1 s each when the module is outside the installed tree, as
        # in a worktree); the answer cannot change while the logs are written, so cache it.
        import inspect_ai._util.package as package

        if hasattr(package, "packages_distributions"):
            patch.setattr(package, "packages_distributions", cache(package.packages_distributions))
        for layout in il.LAYOUTS:
            if layout not in ("json", "split_dirs"):
                made[layout] = il.write_layout(root / layout, layout, EXPERIMENT)
        for layout in ("json", "split_dirs"):
            made[layout] = il.restyle(made["models_in_one_call"][0], root / layout, layout)
        dict_scores = il.Experiment(**{**EXPERIMENT.__dict__, "scores": "dict"})
        made["dict_scores"] = il.write_layout(root / "dict", "models_in_one_call", dict_scores)
        gc.collect()
    return made


def mapping(layout: str) -> dict[str, Any]:
    """The forks mapping of one layout (its sources, and the score to read)."""
    score = {"score_key": "success"} if layout == "dict_scores" else {"scorer": "recovered"}
    return {**il.layout_mapping(layout if layout != "dict_scores" else "task_args"), **score}


def read(layout: str, layouts: Mapping[str, list[Path]], **kw: Any) -> ri.InspectForks:
    return ri.forks([str(d) for d in layouts[layout]], **{**mapping(layout), **kw})


def reference() -> tuple[pl.DataFrame, dict[str, int]]:
    """The forks table and exclusion counts the experiment must give, from its ground truth."""
    rows, excluded = [], {"error": 0, "limit": 0}
    for (condition, method, delay), model, sample, epoch in _runs():
        if sample in EXPERIMENT.errors.get(condition, ()):
            excluded["error"] += 1
        elif sample in EXPERIMENT.limits:
            excluded["limit"] += 1
        else:
            ok = il.outcome(sample, condition, method, delay, epoch, model=model)
            # no dataset name in these logs: the id is not qualified, its scope is null
            rows.append(
                (str(sample), condition, method, delay, ok, model, epoch, str(sample), None)
            )
    schema = {
        "task_id": pl.String,
        "condition": pl.String,
        "method": pl.String,
        "delay": pl.Int64,
        "success": pl.Boolean,
        "model": pl.String,
        "epoch": pl.Int64,
        "raw_task_id": pl.String,
        "task_scope": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row"), excluded


def _runs() -> list[tuple[il.Arm, str, int, int]]:
    return [
        (arm, model, sample, epoch)
        for arm in EXPERIMENT.arms
        for model in EXPERIMENT.models
        for sample in range(1, EXPERIMENT.samples + 1)
        for epoch in range(1, EXPERIMENT.epochs + 1)
    ]


def ordered(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(sorted(frame.columns)).sort(sorted(frame.columns), nulls_last=True)


@pytest.mark.parametrize("epochs", ["forks", "independent"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_gives_the_reference_forks(
    layout: str, epochs: str, layouts: dict[str, list[Path]]
) -> None:
    result = read(layout, layouts, epochs=epochs)
    expected, excluded = reference()
    assert ordered(result.forks).equals(ordered(expected))
    counts = dict(result.report.excluded)
    superseded = counts.pop("superseded_log", 0)
    assert counts == excluded  # errored and limit-hit samples: excluded by reason, not failures
    assert superseded == len(result.report.superseded) == (layout == "retry")
    assert result.pair_by == ("model", "epoch")
    assert result.report.rows == {"forks": expected.height, "excluded": sum(excluded.values())
                                  + superseded}  # fmt: skip


def _arm_of(layout: str) -> Callable[[Mapping[str, Any]], str]:
    """A callable source giving a sample's arm as text, read where the layout keeps it."""
    sources = il.layout_mapping(layout)

    def value(spec: Any, view: Mapping[str, Any]) -> Any:
        if callable(spec):
            return spec(view)
        kind, _, name = spec.partition(":")
        return view["task_args" if kind == "task_arg" else "eval_metadata"][name]

    return lambda view: "/".join(
        str(value(sources[k], view)) for k in ("condition", "method", "delay")
    )


@pytest.mark.parametrize("layout", [x for x in il.LAYOUTS if x != "task_args"])
def test_every_layout_gives_the_same_takeover_tables(
    layout: str, layouts: dict[str, list[Path]]
) -> None:
    scores = dict.fromkeys(("aware", "root_cause_fixed", "derived_fixed", "passed"), "recovered")

    def take(name: str) -> ri.InspectTakeover:
        dirs = [str(d) for d in layouts[name]]
        return ri.takeover(dirs, state=_arm_of(name), scores=scores, depth="literal:1")

    base, other = take("task_args"), take(layout)
    assert ordered(other.states).equals(ordered(base.states))
    assert ordered(other.attempts).equals(ordered(base.attempts))
    states, attempts, excluded = other  # still unpacks as before
    assert states.equals(other.states)
    assert excluded.equals(other.excluded)
    expected, _ = reference()
    assert attempts.height == expected.height
    assert attempts["passed"].sum() == expected["success"].sum()
    assert isinstance(other, Imported)
    assert other.report.rows["attempts"] == attempts.height


def test_the_old_identity_bug_arms_in_metadata_are_not_superseded(
    layouts: dict[str, list[Path]],
) -> None:
    """Arms told apart only by eval metadata share task name, task args and model: all used."""
    for layout in ("eval_metadata", "task_metadata"):
        result = read(layout, layouts, epochs="forks")
        report = result.report
        assert report.superseded == ()
        assert len(report.used) == len(report.files_read) == len(EXPERIMENT.arms) * 2


def test_a_true_retry_is_superseded_and_named(layouts: dict[str, list[Path]]) -> None:
    from inspect_ai.log import read_eval_log

    result = read("retry", layouts, epochs="forks")
    (superseded,) = result.report.superseded
    assert superseded.reason == "retry"
    assert superseded.by in result.report.used
    old, new = (read_eval_log(p, header_only=True) for p in (superseded.log, superseded.by))
    assert old.status == "error"
    assert new.status == "success"
    assert old.eval.task_id == new.eval.task_id
    assert old.eval.eval_id != new.eval.eval_id
    row = result.excluded.filter(pl.col("reason") == "superseded_log")
    assert row["log"].to_list() == [superseded.log]
    assert row["detail"].to_list() == [f"retry: superseded by {superseded.by}"]
    assert f"superseded {superseded.log} by {superseded.by} (retry)" in result.report.render()


def _copy_with(source: Path, target: Path, edit: Callable[[Any], None]) -> Path:
    """Write a copy of one log (inspect's writer) after editing its header."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(source))
    edit(log)
    write_eval_log(log, str(target))
    return target


@pytest.fixture
def metadata_logs(layouts: dict[str, list[Path]], tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the eval_metadata logs, and the first log (the `none` arm of `clean`)."""
    logs = tmp_path / "logs"
    shutil.copytree(layouts["eval_metadata"][0], logs)
    first = min(
        logs.glob("*.eval"),
        key=lambda p: (_header(p).eval.metadata["method"] != "none", p.name),
    )
    return logs, first


def _header(path: Path) -> Any:
    from inspect_ai.log import read_eval_log

    return read_eval_log(str(path), header_only=True)


def test_logs_of_one_eval_that_differ_in_a_mapped_value_are_an_error(
    metadata_logs: tuple[Path, Path],
) -> None:
    logs, first = metadata_logs

    def other_method(log: Any) -> None:  # same task_id and model, another arm
        log.eval.metadata["method"] = "other"
        log.eval.created = "2099-01-01T00:00:00+00:00"

    copy = _copy_with(first, logs / "zz-copy.eval", other_method)
    with pytest.raises(InputError) as info:
        read("eval_metadata", {"eval_metadata": [logs]}, epochs="forks")
    message = str(info.value)
    assert f"`{first}`" in message
    assert f"`{copy}`" in message
    assert "eval metadata `method` ('none' vs 'other')" in message


def test_a_copy_differing_only_in_an_unread_value_is_a_duplicate(
    metadata_logs: tuple[Path, Path], layouts: dict[str, list[Path]]
) -> None:
    logs, first = metadata_logs
    copy = _copy_with(first, logs / "zz-copy.eval", lambda log: log.eval.metadata.update(note=1))
    result = read("eval_metadata", {"eval_metadata": [logs]}, epochs="forks")
    assert [(s.log, s.reason) for s in result.report.superseded] in (
        [(str(first), "duplicate")],
        [(str(copy), "duplicate")],
    )
    assert result.forks.equals(read("eval_metadata", layouts, epochs="forks").forks)


def test_another_eval_mapping_to_the_same_arm_is_an_error_naming_the_logs(
    metadata_logs: tuple[Path, Path],
) -> None:
    logs, first = metadata_logs

    def rerun(log: Any) -> None:  # run again by hand: a new task_id, not a retry
        log.eval.task_id = "another-eval"

    copy = _copy_with(first, logs / "zz-rerun.eval", rerun)
    with pytest.raises(InputError, match="appear in more than one log") as info:
        read("eval_metadata", {"eval_metadata": [logs]}, epochs="forks")
    assert str(copy) in str(info.value)
    assert str(first) in str(info.value)


def test_several_scorers_need_a_choice(layouts: dict[str, list[Path]]) -> None:
    with pytest.raises(ParameterError, match=r"2 scorers \(recovered, turns\); choose one"):
        ri.forks(layouts["task_args"], **il.layout_mapping("task_args"), epochs="forks")


def test_dict_valued_scores_need_a_key(layouts: dict[str, list[Path]]) -> None:
    sources = il.layout_mapping("task_args")
    with pytest.raises(
        ParameterError, match=r"score `recovered` holds several values \(success, turns\)"
    ):
        ri.forks(layouts["dict_scores"], **sources, epochs="forks")
    with pytest.raises(ParameterError, match=r"`score_key` is 'nope'.*\(it has: success, turns\)"):
        ri.forks(layouts["dict_scores"], **sources, score_key="nope", epochs="forks")
    with pytest.raises(ParameterError, match=r"its values are not dicts"):
        ri.forks(layouts["task_args"], **sources, scorer="recovered", score_key="x")


# --- command line ----------------------------------------------------------------------------

CLI_METADATA = (
    "--condition", "eval_metadata:condition", "--method", "eval_metadata:method",
    "--delay", "eval_metadata:delay", "--scorer", "recovered", "--epochs", "forks",
)  # fmt: skip


def by_hand(logs: Path) -> pl.DataFrame:
    """Per cell (condition, delay, method): n, rescue, harm, counted from the samples read with
    inspect_ai.log.read_eval_log (an independent reference), pairing by model and epoch."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    outcomes: dict[tuple[Any, ...], bool] = {}
    for info in list_eval_logs(str(logs)):
        log = read_eval_log(info.name)
        arm = log.eval.metadata
        for s in log.samples or []:
            if s.error is None and s.limit is None:
                key = (arm["condition"], arm["method"], arm["delay"], log.eval.model, s.epoch)
                outcomes[(*key, s.id)] = s.scores["recovered"].value == "C"
    cells: dict[tuple[Any, ...], list[int]] = {}
    for (condition, method, delay, model, epoch, sample), ok in outcomes.items():
        if method == "none":
            continue
        base = outcomes[(condition, "none", None, model, epoch, sample)]
        cell = cells.setdefault((condition, delay, method), [0, 0, 0])
        cell[0] += 1
        cell[1] += ok and not base
        cell[2] += base and not ok
    return pl.DataFrame(
        [(*k, *v) for k, v in cells.items()],
        schema=["condition", "delay", "method", "n", "rescue", "harm"],
        orient="row",
    )


def test_cli_metadata_arms_import_then_paired_matches_counting_by_hand(
    layouts: dict[str, list[Path]], cli: Callable, tmp_path: Path
) -> None:
    """Acceptance: import inspect + paired --pair-by epoch,model = counting with read_eval_log."""
    logs = layouts["eval_metadata"][0]
    out = tmp_path / "tables"
    done = cli("import", "inspect", logs, *CLI_METADATA, "--out", out)
    assert done.code == 0, done.err
    assert "import inspect: 8 files read (8 used, 0 superseded, 0 with no unit in the tables)" in (
        done.err
    )
    cells_path = tmp_path / "cells.parquet"
    done = cli("paired", out / "forks.parquet", "--pair-by", "epoch,model", "--resamples", 100,
               "--out", cells_path)  # fmt: skip
    assert done.code == 0, done.err
    counts = {"n": pl.Int64, "rescue": pl.Int64, "harm": pl.Int64}
    cells = pl.read_parquet(cells_path)
    ours = cells.select("condition", "delay", "method", *counts).cast(counts)
    expected = by_hand(logs).cast({"delay": pl.Int64, **counts})
    assert ordered(ours).equals(ordered(expected))
    assert expected.height == 2  # conditions (one method, one delay)
    assert (cells["unpaired"] == 0).all()
    # n: (samples - errored - limit-hit) x models x epochs per condition
    assert sorted(expected["n"]) == [(4 - 2) * 2 * 2, (4 - 1) * 2 * 2]


def test_cli_report_names_the_retry_and_report_out_writes_it(
    layouts: dict[str, list[Path]], cli: Callable, tmp_path: Path
) -> None:
    report_path = tmp_path / "report.json"
    args = [*CLI_METADATA]
    args[1:6:2] = ["task_arg:condition", "task_arg:method", "task_arg:delay"]
    done = cli("import", "inspect", layouts["retry"][0], *args, "--out", tmp_path / "t",
               "--report-out", report_path)  # fmt: skip
    assert done.code == 0, done.err
    report = json.loads(report_path.read_text())
    (superseded,) = report["superseded"]
    assert superseded["reason"] == "retry"
    assert f"superseded {superseded['log']} by {superseded['by']} (retry)" in done.err
    assert report["excluded"] == {"error": 8, "limit": 16, "superseded_log": 1}
    assert report["rows"]["forks"] == pl.read_parquet(tmp_path / "t" / "forks.parquet").height
    assert len(report["files_read"]) == 9
    assert len(report["used"]) == 8
    quiet = cli("--quiet", "import", "inspect", layouts["retry"][0], *args, "--out",
                tmp_path / "q")  # fmt: skip
    assert quiet.code == 0
    assert "import inspect" not in quiet.err


def test_cli_a_mapped_value_differing_within_one_eval_is_one_line_and_writes_nothing(
    metadata_logs: tuple[Path, Path], cli: Callable, tmp_path: Path
) -> None:
    logs, first = metadata_logs
    _copy_with(first, logs / "zz-copy.eval", lambda log: log.eval.metadata.update(delay=7))
    report_path = tmp_path / "report.json"
    done = cli("import", "inspect", logs, *CLI_METADATA, "--out", tmp_path / "t",
               "--report-out", report_path)  # fmt: skip
    assert done.code == 2
    assert len(done.err.strip().splitlines()) == 1
    assert "eval metadata `delay`" in done.err
    assert "zz-copy.eval" in done.err
    assert not (tmp_path / "t").exists()
    assert not report_path.exists()


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_mix_of_files_formats_and_order_gives_the_same_forks(
    layouts: dict[str, list[Path]], data: st.DataObject
) -> None:
    """Each eval as .eval or .json (or both: a duplicate, superseded), in any order."""
    evals = sorted(layouts["models_in_one_call"][0].glob("*.eval"))
    jsons = {p.stem: p for p in layouts["json"][0].glob("*.json")}
    choice = data.draw(st.lists(st.sampled_from(["eval", "json", "both"]), min_size=len(evals),
                                max_size=len(evals)))  # fmt: skip
    files = []
    for path, pick in zip(evals, choice, strict=True):
        files += [str(path)] if pick in ("eval", "both") else []
        files += [str(jsons[path.stem])] if pick in ("json", "both") else []
    files = data.draw(st.permutations(files))
    result = ri.forks(files, **mapping("models_in_one_call"), epochs="forks")
    expected, _ = reference()
    assert ordered(result.forks).equals(ordered(expected))
    assert len(result.report.superseded) == choice.count("both")
    assert all(s.reason == "duplicate" for s in result.report.superseded)
