"""A task is one task across everything an import reads (issue 39 point 1, ARCHITECTURE §8).

Every adapter qualifies a harness's task id by the scope the harness gives it (tau2: domain,
Harbor: dataset ``source``, inspect: dataset name, ``table``: a declared ``task_scope``). The
generators below write genuine-shaped files whose ids collide across scopes, for every adapter,
and compare what the adapter made with :func:`reference_id`, a plain re-implementation of the
rule read straight from the files. The metamorphic check: the tasks of an import of several
scopes are the sum of the tasks of each scope imported alone (the README's tau2-bench example:
18 tasks, not 6). Also here: ``Imported`` indexes like a tuple, and read reports word a retry
inside one file as such and count files so that the counts add up.
"""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recoverylab as rl
from recoverylab._errors import InputError, SchemaError
from recoverylab.adapters import Imported, harbor, keep_raw_ids, table, tau2
from recoverylab.synth.harbor_jobs import write_harbor_datasets
from recoverylab.synth.tau2_results import write_tau2_results

FILES = settings(
    max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
#: tau2 forks: one agent as the no-recovery arm of the other (the README's example).
TAU2_MAP = {
    "method": "CASE WHEN agent_model = 'o4-mini' THEN 'none' ELSE 'gpt-4.1' END",
    "delay": "CASE WHEN agent_model = 'o4-mini' THEN NULL ELSE 0 END",
    "condition": "'clean'",
}
HARBOR_ARMS = {
    "condition": "agent_kwarg:condition",
    "method": "agent_kwarg:method",
    "delay": "agent_kwarg:delay",
}


def reference_id(scope: str | None, raw: str) -> str:
    """The identity rule, written plainly: ``scope/raw`` when the scope is known, else ``raw``."""
    return raw if scope is None else f"{scope}/{raw}"


def identities(frames: Iterable[pl.DataFrame]) -> set[tuple[str, str, str | None]]:
    """The (task_id, raw_task_id, task_scope) triples an import wrote, over all its tables."""
    cols = ["task_id", "raw_task_id", "task_scope"]
    return {row for f in frames if f.height for row in f.select(cols).iter_rows()}


def tasks_per_cell(forks: pl.DataFrame, pair_by: tuple[str, ...]) -> dict[tuple[Any, ...], int]:
    cells = rl.paired.summarize(forks, pair_by=pair_by, n_resamples=20)
    keys = ["condition", "method", "delay"]
    return {row[:3]: row[3] for row in cells.select(*keys, "n_tasks").iter_rows()}


def added(parts: list[dict[tuple[Any, ...], int]]) -> dict[tuple[Any, ...], int]:
    total: dict[tuple[Any, ...], int] = {}
    for part in parts:
        for cell, n in part.items():
            total[cell] = total.get(cell, 0) + n
    return total


# --- tau2-bench: ids per domain ---------------------------------------------------------------


def tau2_reference(paths: list[Path]) -> set[tuple[str, str, str | None]]:
    """Every simulation's (qualified id, raw id, domain), read from the results files."""
    out = set()
    for path in paths:
        document = json.loads(Path(path).read_text())
        domain = document["info"]["environment_info"]["domain_name"]
        for sim in document["simulations"]:
            out.add((reference_id(domain, str(sim["task_id"])), str(sim["task_id"]), domain))
    return out


@FILES
@given(
    domains=st.lists(
        st.sampled_from(["airline", "retail", "telecom", "mock", "a b"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    tasks=st.integers(1, 4),
    seed=st.integers(0, 50),
)
def test_tau2_ids_are_qualified_by_domain_as_the_reference_says(
    tmp_path_factory: pytest.TempPathFactory, domains: list[str], tasks: int, seed: int
) -> None:
    root = tmp_path_factory.mktemp("tau2")
    paths = write_tau2_results(root, domains=domains, tasks=tasks, trials=2, seed=seed)
    got = tau2.read(paths)
    assert identities(got) == tau2_reference(paths)  # trials and excluded alike
    shared = len(domains) > 1
    identity = got.report.identity
    assert identity is not None
    assert identity.scopes == tuple(sorted(domains))
    assert identity.shared == (tasks if shared else 0)
    if shared:
        with pytest.raises(InputError) as err:
            keep_raw_ids(got)
        assert "\n" not in str(err.value)
        assert str(err.value).startswith("tau2: task id `0` occurs under domain ")
    else:
        raw = keep_raw_ids(got)
        assert raw.tables["trials"]["task_id"].to_list() == got[0]["raw_task_id"].to_list()


def test_readme_tau2_example_counts_18_tasks(tmp_path: Path) -> None:
    """The README's example: 3 domains x 6 tasks, paired by domain and attempt: 18 tasks."""
    write_tau2_results(tmp_path / "r", resumed=True)
    forks, _ = tau2.read(tmp_path / "r", to="forks", mapping=TAU2_MAP)
    joint = tasks_per_cell(forks, ("domain", "attempt"))
    assert list(joint.values()) == [18]
    alone = []
    for domain in ("airline", "retail", "telecom"):
        part = tau2.read(
            sorted((tmp_path / "r").glob(f"*_{domain}.json")), to="forks", mapping=TAU2_MAP
        )
        alone.append(tasks_per_cell(part.tables["forks"], ("domain", "attempt")))
    assert joint == added(alone)


def test_readme_tau2_example_on_the_command_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    write_tau2_results(tmp_path / "r", resumed=True)
    maps = [a for name, expr in TAU2_MAP.items() for a in ("--map", f"{name}={expr}")]
    done = cli("import", "tau2", tmp_path / "r", "--to", "forks", *maps, "--out", tmp_path / "f")
    assert done.code == 0, done.err
    assert "  task ids: domain/id, raw id in `raw_task_id` (3 domains: airline, retail, telecom; " \
        "6 ids occur under several, e.g. `0` in airline, retail, telecom)" in done.err  # fmt: skip
    out = tmp_path / "cells.parquet"
    done = cli("paired", tmp_path / "f" / "forks.parquet", "--pair-by", "domain,attempt",
               "--resamples", 20, "--out", out)  # fmt: skip
    assert done.code == 0, done.err
    assert pl.read_parquet(out)["n_tasks"].to_list() == [18]
    done = cli("import", "tau2", tmp_path / "r", "--raw-ids", "--out", tmp_path / "raw")
    assert done.code == 2
    assert done.err.strip() == (
        "recoverylab import: error: tau2: task id `0` occurs under domain airline and domain "
        "retail; raw ids would merge two tasks into one. Hint: keep the qualified ids (without "
        "--raw-ids, keep_raw_ids), e.g. `airline/0`."
    )
    assert not (tmp_path / "raw").exists()


# --- Harbor: task names per dataset (source) ----------------------------------------------------


def harbor_reference(root: Path) -> set[tuple[str, str, str | None]]:
    """Every trial's (qualified id, task name, source), read from its result.json."""
    out = set()
    for path in root.rglob("result.json"):
        document = json.loads(path.read_text())
        if "task_name" in document:  # a TrialResult (a job's result.json has none)
            name, source = document["task_name"], document.get("source")
            out.add((reference_id(source, name), name, source))
    return out


@FILES
@given(
    datasets=st.lists(
        st.sampled_from(["terminal-bench", "recovery-bench", "swe/lite", "näive"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    tasks=st.integers(1, 5),
    seed=st.integers(0, 50),
)
def test_harbor_ids_are_qualified_by_dataset_as_the_reference_says(
    tmp_path_factory: pytest.TempPathFactory, datasets: list[str], tasks: int, seed: int
) -> None:
    root = tmp_path_factory.mktemp("harbor")
    write_harbor_datasets(root, datasets, tasks=tasks, attempts=1, seed=seed)
    got = harbor.trials(root, columns={"condition": "agent_kwarg:condition"})
    with_task = got.excluded.filter(pl.col("task_id").is_not_null())  # unfinished: no task
    assert identities([got[0], with_task]) == harbor_reference(root)
    identity = got.report.identity
    assert identity is not None
    assert identity.scopes == tuple(sorted(datasets))
    assert identity.shared == (tasks if len(datasets) > 1 else 0)


def test_two_harbor_datasets_sharing_task_names_count_every_task(tmp_path: Path) -> None:
    truth = write_harbor_datasets(tmp_path / "both", tasks=5, attempts=2, failures=False)
    joint = harbor.forks(tmp_path / "both", **HARBOR_ARMS)
    assert joint[0]["task_id"].n_unique() == 10
    alone = [
        tasks_per_cell(harbor.forks(tmp_path / "both" / str(i), **HARBOR_ARMS)[0], ("attempt",))
        for i in range(len(truth))
    ]
    assert tasks_per_cell(joint[0], ("attempt",)) == added(alone)
    assert set(added(alone).values()) == {10}


# --- inspect: sample ids per dataset ------------------------------------------------------------


# inspect_ai leaves anyio memory streams for the garbage collector while it runs an eval (its
# own ResourceWarning, not ours): collected at once in the fixture, under these filters.
def inspect_marks(test: Callable[..., None]) -> Callable[..., None]:
    """Mark a test that reads inspect logs with the filters above."""
    test = pytest.mark.filterwarnings("ignore::ResourceWarning")(test)
    return pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")(test)


@pytest.fixture(scope="module")
def inspect_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("inspect_ai")
    from recoverylab.synth.inspect_logs import write_inspect_logs

    root = tmp_path_factory.mktemp("inspect")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        write_inspect_logs(root / "src", samples=3, epochs=1, delays=(1,))
        gc.collect()
    return root / "src"


def inspect_reference(dirs: list[Path]) -> set[tuple[str, str, str | None]]:
    """Every sample's (qualified id, id, dataset name), read with inspect's own reader."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    out = set()
    for directory in dirs:
        for info in list_eval_logs(str(directory)):
            log = read_eval_log(info.name)
            name = log.eval.dataset.name
            out |= {(reference_id(name, str(s.id)), str(s.id), name) for s in log.samples or []}
    return out


INSPECT_ARMS = {"condition": "task_arg:condition", "method": "task_arg:method",
                "delay": "task_arg:delay"}  # fmt: skip


@inspect_marks
@pytest.mark.parametrize("datasets", [("recovery-a",), ("recovery-a", "recovery-b"),
                                      ("x/y", "x", "gsm8k")])  # fmt: skip
def test_inspect_ids_are_qualified_by_dataset_as_the_reference_says(
    inspect_source: Path, tmp_path: Path, datasets: tuple[str, ...]
) -> None:
    from recoverylab.adapters import inspect as ri
    from recoverylab.synth.inspect_logs import relabel_datasets

    dirs = relabel_datasets(inspect_source, tmp_path, datasets)
    got = ri.forks([str(d) for d in dirs], **INSPECT_ARMS)
    assert identities(got) == inspect_reference(dirs)
    alone = [tasks_per_cell(ri.forks(str(d), **INSPECT_ARMS)[0], ()) for d in dirs]
    assert tasks_per_cell(got[0], ()) == added(alone)
    assert set(tasks_per_cell(got[0], ()).values()) == {3 * len(datasets)}


@inspect_marks
def test_inspect_logs_without_a_dataset_name_keep_their_ids(inspect_source: Path) -> None:
    from recoverylab.adapters import inspect as ri

    got = ri.forks(str(inspect_source), **INSPECT_ARMS)
    assert identities(got) == inspect_reference([inspect_source])
    assert got[0]["task_scope"].null_count() == got[0].height
    assert "  task ids: as written (no dataset recorded)" in got.report.render().splitlines()


# --- table: a declared scope ----------------------------------------------------------------------

SCOPES = st.sampled_from([None, "a", "b", "a/b", "c d"])
IDS = st.sampled_from(["1", "2", "b/1", "x"])


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(SCOPES, IDS), min_size=1, max_size=12, unique=True))
def test_table_scope_qualifies_as_the_reference_says_or_names_the_clash(
    rows: list[tuple[str | None, str]],
) -> None:
    frame = pl.DataFrame(
        {
            "ds": [s for s, _ in rows],
            "task": [t for _, t in rows],
            "ok": [i % 2 == 0 for i in range(len(rows))],
            "try": list(range(len(rows))),
        },
        schema={"ds": pl.String, "task": pl.String, "ok": pl.Boolean, "try": pl.Int64},
    )
    mapping = {"task_id": "task", "attempt": '"try"', "success": "ok", "task_scope": "ds"}
    qualified: dict[str, set[tuple[str | None, str]]] = {}
    for scope, raw in rows:
        qualified.setdefault(reference_id(scope, raw), set()).add((scope, raw))
    clash = sorted(k for k, pairs in qualified.items() if len(pairs) > 1)
    if clash:  # two (scope, id) pairs that qualify to one text: refused, naming it
        with pytest.raises(InputError, match=f"both qualify to `{clash[0]}`"):
            table.from_frame(frame.lazy(), to="trials", mapping=mapping)
        return
    tables, _ = table.from_frame(frame.lazy(), to="trials", mapping=mapping)
    want = {(reference_id(s, r), r, s) for s, r in rows}
    assert identities(tables.values()) == want


def test_table_cli_scope_and_raw_ids(cli: Callable[..., Any], tmp_path: Path) -> None:
    runs = pl.DataFrame(
        {
            "task": ["1", "1", "2", "2"] * 2,
            "ds": ["a"] * 4 + ["b"] * 4,
            "arm": ["none", "retry"] * 4,
            "ok": [True, False, False, True, True, True, False, False],
        }
    )
    runs.write_ndjson(tmp_path / "runs.jsonl")
    delay = "delay=CASE WHEN arm = 'none' THEN NULL ELSE 1 END"
    maps = ["--map", "task_id=task", "--map", "method=arm", "--map", "condition='clean'",
            "--map", delay, "--map", "success=ok"]  # fmt: skip
    args = ("import", "table", tmp_path / "runs.jsonl", "--to", "forks", *maps)
    done = cli(*args, "--scope", "ds", "--out", tmp_path / "out")
    assert done.code == 0, done.err
    forks = pl.read_parquet(tmp_path / "out" / "forks.parquet")
    assert sorted(forks["task_id"].unique()) == ["a/1", "a/2", "b/1", "b/2"]
    done = cli(*args, "--scope", "ds", "--raw-ids", "--out", tmp_path / "raw")
    assert done.code == 2
    assert done.err.strip() == (
        "recoverylab import: error: table: task id `1` occurs under scope a and scope b; raw "
        "ids would merge two tasks into one. Hint: keep the qualified ids (without --raw-ids, "
        "keep_raw_ids), e.g. `a/1`."
    )


# --- protocol verbs: one scope per task ----------------------------------------------------------


def merged_forks() -> pl.DataFrame:
    """Two imports' raw ids stacked: task 0 of airline and task 0 of retail as one id."""
    return pl.DataFrame(
        {
            "task_id": ["0", "0", "0", "0", "1", "1"],
            "condition": "clean",
            "method": ["none", "retry"] * 3,
            "delay": [None, 1] * 3,
            "success": [True, False, False, True, True, True],
            "task_scope": ["airline", "airline", "retail", "retail", "airline", "airline"],
            "attempt": [0, 0, 1, 1, 0, 0],
        }
    )


MERGED = (
    "forks: task `0` has 2 scopes in `task_scope` (`airline` and `retail`); a task id must name "
    "one task. Hint: qualify the ids by their scope (e.g. `airline/0`), as `recoverylab import` "
    "does without --raw-ids."
)


def test_every_verb_that_validates_forks_refuses_a_task_under_two_scopes(
    frame_kind: Callable[[pl.DataFrame], object],
) -> None:
    forks = frame_kind(merged_forks())
    with pytest.raises(SchemaError) as err:
        rl.paired.summarize(forks, pair_by=("attempt",))
    assert str(err.value) == MERGED
    with pytest.raises(SchemaError) as err:
        rl.validate(forks, "forks", key=("attempt",), checks="schema")
    assert str(err.value) == MERGED
    one_scope = merged_forks().with_columns(
        pl.concat_str("task_scope", pl.lit("/"), "task_id").alias("task_id")
    )
    cells = rl.paired.summarize(frame_kind(one_scope), pair_by=("attempt",), n_resamples=20)
    cells = cells.collect() if isinstance(cells, pl.LazyFrame) else cells
    assert cells["n_tasks"].to_list() == [3]


def test_paired_command_refuses_a_task_under_two_scopes(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    merged_forks().write_parquet(tmp_path / "forks.parquet")
    done = cli("paired", tmp_path / "forks.parquet", "--pair-by", "attempt")
    assert done.code == 2
    assert done.err.strip().splitlines()[-1] == f"recoverylab paired: error: {MERGED}"


# --- Imported indexes like the tuple it replaced ----------------------------------------------


def test_imported_indexes_unpacks_and_has_a_length_like_a_tuple(tmp_path: Path) -> None:
    write_tau2_results(tmp_path, domains=("retail",), tasks=2, trials=2)
    got = tau2.read(tmp_path)
    assert isinstance(got, Imported)
    trials, excluded = got
    assert got[0] is trials is got.tables["trials"]
    assert got[1] is excluded is got.excluded
    assert got[-1] is got.excluded
    assert len(got) == 2
    assert got[:] == (trials, excluded)
    assert list(got) == [trials, excluded]
    with pytest.raises(IndexError):
        got[2]
    with pytest.raises(TypeError, match="indexes like a tuple"):
        got["trials"]  # type: ignore[call-overload]
    takeover = Imported({"states": trials, "attempts": trials.head(1)}, excluded, got.report)
    _, attempts, left = takeover
    assert (len(takeover), takeover[1] is attempts, takeover[2] is left) == (3, True, True)


@inspect_marks
def test_inspect_results_index_like_their_tuples(inspect_source: Path) -> None:
    from recoverylab.adapters import inspect as ri

    got = ri.forks(str(inspect_source), **INSPECT_ARMS)
    assert (got[0] is got.forks, got[1] is got.excluded, len(got)) == (True, True, 2)


# --- read reports: retries inside a file, counts that add up ----------------------------------


def test_a_retry_inside_one_file_is_worded_as_such(tmp_path: Path) -> None:
    paths = write_tau2_results(tmp_path, resumed=True)
    report = tau2.read(paths).report
    lines = report.render().splitlines()
    assert (
        lines[0] == "import tau2: 6 files read (6 used, 0 superseded, 0 with no unit in the tables)"
    )
    inside = [s for s in report.superseded if s.log == s.by]
    assert inside, "the resumed runs retry infrastructure errors inside their file"
    assert not any(" by " in line and "superseded" in line for line in lines)
    assert lines[1] == (
        f"  {inside[0].log}: retried inside the file ({inside[0].reason}); the later run kept"
    )
    assert report.file_counts()["retried_inside"] == len(inside)


@pytest.mark.parametrize("layout", ["json", "dir"])
def test_file_counts_add_up_for_every_adapter(tmp_path: Path, layout: str) -> None:
    write_tau2_results(tmp_path / "t", resumed=True, layout=layout)
    write_harbor_datasets(tmp_path / "h", tasks=3, attempts=2, resumed=True)
    tau2_import = tau2.read(tmp_path / "t")
    reports = [tau2_import.report, harbor.trials(tmp_path / "h").report]
    for report in reports:
        counts = report.file_counts()
        parts = counts["used"] + counts["superseded"] + counts["no_unit"]
        assert parts == counts["files_read"] == len(report.files_read)
        head = report.render().splitlines()[0]
        assert head == (
            f"import {report.format}: {counts['files_read']:,} files read ({counts['used']:,} "
            f"used, {counts['superseded']:,} superseded, {counts['no_unit']:,} with no unit in "
            "the tables)"
        )
        assert report.to_dict()["file_counts"] == counts
    tau2_counts = reports[0].file_counts()
    if layout == "dir":  # each run's results.json is an index, each simulation its own file:
        # the 6 indexes and the files of excluded simulations have no unit in the tables
        assert tau2_counts["no_unit"] == 6 + tau2_import.excluded.height
    harbor_counts = reports[1].file_counts()
    assert harbor_counts["superseded"] > 0  # the resumed job's snapshot


def test_harbor_takeover_states_are_tasks_of_one_dataset(tmp_path: Path) -> None:
    """States (and the workflows that default to them) are qualified; raw ids map back."""
    write_harbor_datasets(tmp_path / "two", tasks=3, attempts=2, funnel=True, seed=4)
    got = harbor.takeover(tmp_path / "two", reward="reward")
    states = got.tables["states"]
    want = {reference_id(s, r) for _, r, s in harbor_reference(tmp_path / "two")}
    assert set(states["state_id"]) <= want
    assert states["workflow_id"].to_list() == states["state_id"].to_list()
    assert states["root_cause_id"].to_list() == states["state_id"].to_list()
    with pytest.raises(InputError, match="occurs under source recovery-bench and source"):
        keep_raw_ids(got)
    one = harbor.takeover(tmp_path / "two" / "0", reward="reward")
    raw = keep_raw_ids(one)
    states, attempts = raw.tables["states"], raw.tables["attempts"]
    assert states["state_id"].to_list() == one.tables["states"]["raw_task_id"].to_list()
    assert set(attempts["state_id"]) <= set(states["state_id"])
    assert attempts.height == one.tables["attempts"].height
    assert "  task ids: as written (--raw-ids; 1 source: recovery-bench)" in (
        raw.report.render().splitlines()
    )


def test_a_null_task_id_is_named_by_the_null_check_not_as_a_scope_clash() -> None:
    frame = pl.DataFrame(
        {
            "task": [None, None, "1"],
            "ds": ["a", "b", "a"],
            "ok": [True, False, True],
            "n": [0, 1, 2],
        }
    )
    mapping = {"task_id": "task", "attempt": "n", "success": "ok", "task_scope": "ds"}
    with pytest.raises(SchemaError) as err:
        table.from_frame(frame.lazy(), to="trials", mapping=mapping)
    assert str(err.value) == (
        "trials: column `task_id` has 2 nulls (task_id/attempt null/0, null/1); it may not be null."
    )
