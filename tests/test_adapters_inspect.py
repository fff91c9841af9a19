"""recoverylab.adapters.inspect on genuine inspect_ai logs made offline with the mock model.

The logs (recoverylab.synth.inspect_logs) run 2 conditions x (a no-recovery arm + recovery at
delays 1 and 3) x 6 samples x 2 epochs through inspect_ai itself; sample 2 errors in every arm of
`stale`. The adapter's forks must reproduce inspect's own per-arm accuracies, and the paired effect
must equal inspect's accuracy difference.
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

pytest.importorskip("inspect_ai")

import recoverylab as rl
from recoverylab._errors import ParameterError, SourceError
from recoverylab.adapters import inspect as ri
from recoverylab.adapters import looks_like_inspect_log
from recoverylab.synth import inspect_logs

# inspect_ai leaves anyio memory streams for the garbage collector while it runs an eval (its
# own ResourceWarning, not ours); the fixtures collect them at once, under this filter.
pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

SAMPLES, EPOCHS, DELAYS = 6, 2, (1, 3)
ERRORS = {"stale": [2]}
MAPPING = {
    "condition": "task_arg:condition",
    "method": "task_arg:method",
    "delay": "task_arg:delay",
    "epochs": "forks",
}
MARKER = {
    "recovery_marker": "store:recovery_applied",
    "perturb_action": "sample_metadata:perturb_action",
}


_INSPECT_ENV = ("INSPECT_TELEMETRY", "INSPECT_API_KEY_OVERRIDE", "INSPECT_LOG_DIR")


@contextmanager
def no_network(log_dir: Path | None = None) -> Iterator[None]:
    """Refuse every connection off this machine; no inspect telemetry hook; logs under tmp.

    Loopback stays open (a Spark gateway or a notebook kernel in the same session uses it); the
    patch lasts only as long as the block, so it never leaks into other test modules.
    """
    saved = {k: os.environ.get(k) for k in _INSPECT_ENV}
    for key in _INSPECT_ENV:
        os.environ.pop(key, None)
    if log_dir is not None:
        os.environ["INSPECT_LOG_DIR"] = str(log_dir)
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in _LOOPBACK:
            raise OSError(f"network access during tests: {address}")
        real_connect(self, address)

    socket.socket.connect = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value


_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


@pytest.fixture(autouse=True)
def offline() -> Iterator[None]:
    """Every test of this module reads logs with the network cut."""
    with no_network():
        yield


def _write(root: Path, log_format: str) -> Path:
    out = root / log_format
    with no_network(root / "default-logs"):
        inspect_logs.write_inspect_logs(
            out,
            samples=SAMPLES,
            epochs=EPOCHS,
            delays=DELAYS,
            errors=ERRORS,
            log_format=log_format,
        )
        gc.collect()
    return out


@pytest.fixture(scope="session")
def eval_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("inspect"), "eval")


@pytest.fixture(scope="session")
def json_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("inspect"), "json")


def inspect_accuracy(logs: Path) -> pl.DataFrame:
    """inspect's own accuracy per arm, from the log headers (its metric, not ours)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    rows = []
    for info in list_eval_logs(str(logs)):
        header = read_eval_log(info.name, header_only=True)
        args = header.eval.task_args
        assert header.results is not None
        rows.append(
            {
                "condition": args["condition"],
                "method": args["method"],
                "delay": args["delay"],
                "accuracy": header.results.scores[0].metrics["accuracy"].value,
            }
        )
    return pl.DataFrame(rows, schema_overrides={"delay": pl.Int64})


@pytest.mark.parametrize("which", ["eval", "json"])
def test_forks_reproduce_inspects_accuracy_per_arm(
    which: str, request: pytest.FixtureRequest
) -> None:
    logs = request.getfixturevalue(f"{which}_logs")
    result = ri.forks(logs, **MAPPING)
    ours = result.forks.group_by("condition", "method", "delay").agg(
        pl.col("success").mean().alias("ours"), pl.len().alias("rows")
    )
    joined = inspect_accuracy(logs).join(
        ours, on=["condition", "method", "delay"], how="left", nulls_equal=True
    )
    assert joined.height == 6
    assert joined["ours"].null_count() == 0
    assert (joined["ours"] - joined["accuracy"]).abs().max() < 1e-12
    # n per arm: samples x epochs, less the errored sample's epochs in `stale`
    expected = {"clean": SAMPLES * EPOCHS, "stale": (SAMPLES - 1) * EPOCHS}
    assert dict(zip(joined["condition"], joined["rows"], strict=True)) == expected
    assert result.forks.schema["delay"] == pl.Int64
    assert result.forks.schema["task_id"] == pl.String
    assert result.pair_by == ("epoch",)


def test_eval_and_json_logs_give_the_same_forks(eval_logs: Path, json_logs: Path) -> None:
    a = ri.forks(eval_logs, **MAPPING).forks
    b = ri.forks(json_logs, **MAPPING).forks
    assert a.equals(b)


def test_rows_are_the_scripted_outcomes(eval_logs: Path) -> None:
    table = ri.forks(eval_logs, **MAPPING).forks
    expected = [
        inspect_logs.outcome(int(t), c, m, d, e)
        for t, c, m, d, e in table.select("task_id", "condition", "method", "delay", "epoch").rows()
    ]
    assert table["success"].to_list() == expected


@pytest.mark.parametrize("marker", [False, True])
def test_paired_effect_is_inspects_accuracy_difference(eval_logs: Path, marker: bool) -> None:
    """Acceptance: per condition x delay, effect = accuracy(recovery) - accuracy(none)."""
    result = ri.forks(eval_logs, **MAPPING, **(MARKER if marker else {}))
    cells = rl.paired.summarize(result.forks, pair_by=result.pair_by, n_resamples=200)
    cells = cells.collect() if isinstance(cells, pl.LazyFrame) else cells
    acc = inspect_accuracy(eval_logs)
    none = acc.filter(pl.col("method") == "none").select("condition", base="accuracy")
    expected = acc.filter(pl.col("method") != "none").join(none, on="condition")
    joined = expected.join(cells, on=["condition", "method", "delay"])
    assert joined.height == 4
    diff = joined["accuracy"] - joined["base"]
    assert (joined["effect"] - diff).abs().max() < 1e-12
    tasks = {"clean": SAMPLES, "stale": SAMPLES - 1}
    for row in joined.iter_rows(named=True):
        assert row["n"] == tasks[row["condition"]] * EPOCHS
        assert row["n_tasks"] == tasks[row["condition"]]
        assert row["unpaired"] == 0
    if marker:  # recoveries that never fired are carried forward, not dropped
        fired = sum(inspect_logs.fires(s, d) for s in range(1, SAMPLES + 1) for d in DELAYS)
        assert (
            int(joined["carried_forward"].sum())
            == (2 * len(DELAYS) * SAMPLES - 2 * fired) * EPOCHS
            - sum(not inspect_logs.fires(2, d) for d in DELAYS) * EPOCHS
        )


def test_errored_samples_are_excluded_by_reason(eval_logs: Path) -> None:
    result = ri.forks(eval_logs, **MAPPING)
    errors = result.excluded.filter(pl.col("reason") == "error")
    # sample 2 of `stale`, in 3 arms x 2 epochs
    assert errors.height == 3 * EPOCHS
    assert set(errors["task_id"]) == {"2"}
    assert errors["detail"].str.contains("scripted failure").all()
    stale_2 = result.forks.filter((pl.col("condition") == "stale") & (pl.col("task_id") == "2"))
    assert stale_2.height == 0  # never counted as failures
    assert result.excluded.columns == list(ri.EXCLUDED_SCHEMA)


def test_recovery_that_never_fired_is_carried_forward(eval_logs: Path) -> None:
    result = ri.forks(eval_logs, **MAPPING, **MARKER)
    skipped = result.excluded.filter(pl.col("reason") == "recovery_not_applied")
    not_fired = sum(not inspect_logs.fires(s, d) for s in range(1, SAMPLES + 1) for d in DELAYS)
    not_fired_stale = not_fired - sum(not inspect_logs.fires(2, d) for d in DELAYS)
    assert skipped.height == (not_fired + not_fired_stale) * EPOCHS
    none = result.forks.filter(pl.col("method") == "none")
    assert none["end_action"].to_list() == [inspect_logs.turns(int(t)) for t in none["task_id"]]
    recovery = result.forks.filter(pl.col("method") != "none")
    assert recovery["end_action"].null_count() == recovery.height


def test_an_info_event_marks_the_recovery_too(eval_logs: Path) -> None:
    by_store = ri.forks(eval_logs, **MAPPING, **MARKER)
    by_event = ri.forks(eval_logs, **{**MAPPING, **MARKER, "recovery_marker": "event:recovery"})
    assert by_event.forks.equals(by_store.forks)
    assert by_event.excluded.equals(by_store.excluded)


def test_retried_log_is_superseded(eval_logs: Path, tmp_path: Path) -> None:
    first = sorted(eval_logs.glob("*.eval"))[0]
    shutil.copytree(eval_logs, tmp_path / "logs")
    shutil.copy(first, tmp_path / "logs" / ("zz-retry-" + first.name))
    result = ri.forks(tmp_path / "logs", **MAPPING)
    superseded = result.excluded.filter(pl.col("reason") == "superseded_log")
    assert superseded.height == 1
    assert result.forks.equals(ri.forks(eval_logs, **MAPPING).forks)


def test_an_epoch_warning_when_epochs_are_not_described(eval_logs: Path) -> None:
    mapping = {k: v for k, v in MAPPING.items() if k != "epochs"}
    with pytest.warns(ri.EpochWarning, match="seeded forks"):
        ri.forks(eval_logs, **mapping)


def test_logs_as_evallog_objects_and_globs(eval_logs: Path) -> None:
    from inspect_ai.log import read_eval_log

    objects = [read_eval_log(str(p)) for p in sorted(eval_logs.glob("*.eval"))]
    a = ri.forks(objects, **MAPPING).forks
    b = ri.forks(str(eval_logs / "*.eval"), **MAPPING).forks
    assert a.equals(b)


def _edited(eval_logs: Path, edit: Callable[[object], None]) -> list[object]:
    from inspect_ai.log import read_eval_log

    logs = [read_eval_log(str(p)) for p in sorted(eval_logs.glob("*.eval"))]
    for log in logs:
        for sample in log.samples or []:
            edit(sample)
    return logs


def test_several_scorers_and_none_chosen(eval_logs: Path) -> None:
    from inspect_ai.scorer import Score

    logs = _edited(eval_logs, lambda s: s.scores.update(other=Score(value=1.0)))  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match=r"2 scorers \(other, recovered\); choose one"):
        ri.forks(logs, **MAPPING)
    picked = ri.forks(logs, **MAPPING, scorer="recovered").forks
    assert picked.equals(ri.forks(eval_logs, **MAPPING).forks)


def test_mixed_score_types(eval_logs: Path) -> None:
    from inspect_ai.scorer import Score

    def edit(sample: object) -> None:
        if sample.id == 3:  # type: ignore[attr-defined]
            sample.scores["recovered"] = Score(value=0.7)  # type: ignore[attr-defined]

    logs = _edited(eval_logs, edit)
    with pytest.raises(ParameterError, match=r"mixed value types \(letter in \d+ samples, number"):
        ri.forks(logs, **MAPPING)
    # a threshold reads both: letters as inspect's values (C=1, I=0), numbers as they are
    table = ri.forks(logs, **MAPPING, success=0.5).forks
    assert table.filter(pl.col("task_id") == "3")["success"].all()


def test_numbers_other_than_0_1_need_a_threshold(eval_logs: Path) -> None:
    from inspect_ai.scorer import Score

    logs = _edited(eval_logs, lambda s: s.scores.update(recovered=Score(value=0.25)))  # type: ignore[attr-defined]
    result = ri.forks(logs, **MAPPING)
    assert result.forks.height == 0
    assert set(result.excluded["reason"]) == {"invalid_score", "error"}


def test_unknown_task_argument(eval_logs: Path) -> None:
    with pytest.raises(
        ParameterError,
        match=r"`condition` comes from task_arg:cond, but the log has no task argument `cond` "
        r"\(it has: condition, delay, failing, method, samples\)\.",
    ):
        ri.forks(eval_logs, **{**MAPPING, "condition": "task_arg:cond"})


def test_bad_source_form() -> None:
    with pytest.raises(ParameterError, match=r"parameter `delay` is 'arg:delay'; it must be one"):
        ri.forks("nowhere", **{**MAPPING, "delay": "arg:delay"})


def test_missing_path() -> None:
    with pytest.raises(SourceError, match=r"`nowhere/x.eval` does not exist"):
        ri.forks("nowhere/x.eval", **MAPPING)


def test_sample_metadata_and_callable_sources(eval_logs: Path) -> None:
    result = ri.forks(
        eval_logs,
        condition=lambda v: v["task_args"]["condition"].upper(),
        method="task_arg:method",
        delay="task_arg:delay",
        epochs="independent",
    )
    assert set(result.forks["condition"]) == {"CLEAN", "STALE"}
    unmapped = ri.forks(eval_logs, **{**MAPPING, "condition": "sample_metadata:nope"})
    assert unmapped.forks.height == 0
    assert set(unmapped.excluded["reason"]) == {"unmapped", "error"}


def test_looks_like_inspect_log(eval_logs: Path, json_logs: Path, tmp_path: Path) -> None:
    assert all(looks_like_inspect_log(p) for p in eval_logs.glob("*.eval"))
    assert all(looks_like_inspect_log(p) for p in json_logs.glob("*.json"))
    plain = tmp_path / "rows.json"
    plain.write_text('{"task_id": "t1"}\n')
    assert not looks_like_inspect_log(plain)
    assert not looks_like_inspect_log(tmp_path / "missing.eval")


def test_a_table_reader_given_inspect_logs_says_to_import(eval_logs: Path) -> None:
    log = sorted(eval_logs.glob("*.eval"))[0]
    with pytest.raises(
        SourceError,
        match=r"is an inspect_ai evaluation log, not a table\. Hint: "
        r"convert it first with `recoverylab import inspect",
    ):
        rl.io.scan(log)
    with pytest.raises(SourceError, match="recoverylab import inspect"):
        rl.io.scan(eval_logs)


def test_takeover_from_dict_scores(eval_logs: Path) -> None:
    from inspect_ai.scorer import Score

    def edit(sample: object) -> None:
        if not sample.scores:  # type: ignore[attr-defined]
            return  # an errored sample has no score
        ok = sample.scores["recovered"].value == "C"  # type: ignore[attr-defined]
        sample.scores["recovered"] = Score(  # type: ignore[attr-defined]
            value={"aware": True, "root_cause_fixed": ok, "derived_fixed": ok, "passed": ok}
        )
        sample.metadata["depth"] = sample.id % 3  # type: ignore[attr-defined]
        sample.metadata["replay_ok"] = sample.id != 5  # type: ignore[attr-defined]

    logs = _edited(eval_logs, edit)
    arm = lambda v: "/".join(str(v["task_args"][k]) for k in ("condition", "method", "delay"))  # noqa: E731
    result = ri.takeover(logs, state=arm)
    assert result.states.height == SAMPLES * 6 - 3  # (sample, arm); sample 2 errors in 3 arms
    assert result.attempts.height == result.states.height * EPOCHS  # one model
    assert result.attempts["aware"].all()
    replay = dict(zip(result.states["state_id"], result.states["replay_ok"], strict=True))
    assert all(ok == (not key.startswith("5/")) for key, ok in replay.items())
    assert result.states["expected_ok"].all()
    assert rl.schema.validate(result.states, "states").collect().height == result.states.height
    assert rl.schema.validate(result.attempts, "attempts").collect().height > 0


# --- command line: recoverylab import inspect, then recoverylab paired -------------------------

CLI_MAPPING = (
    "--condition",
    "task_arg:condition",
    "--method",
    "task_arg:method",
    "--delay",
    "task_arg:delay",
    "--epochs",
    "forks",
)


@pytest.mark.parametrize("which", ["eval", "json"])
def test_cli_import_then_paired_gives_inspects_accuracy_difference(
    which: str, request: pytest.FixtureRequest, cli: Callable, tmp_path: Path
) -> None:
    """Acceptance: per condition x delay, effect = accuracy difference; n = samples x epochs."""
    logs = request.getfixturevalue(f"{which}_logs")
    out = tmp_path / "tables"
    done = cli("import", "inspect", logs, *CLI_MAPPING, *MARKER_CLI, "--out", out)
    assert done.code == 0, done.err
    assert "excluded: 18 (error 6, recovery_not_applied 12) (pair by epoch)" in done.err
    assert pl.read_parquet(out / "excluded.parquet").filter(pl.col("reason") == "error").height == 6
    cells_path = tmp_path / "cells.parquet"
    done = cli(
        "paired", out / "forks.parquet", "--pair-by", "epoch", "--resamples", 200,
        "--out", cells_path,
    )  # fmt: skip
    assert done.code == 0, done.err
    cells = pl.read_parquet(cells_path)
    acc = inspect_accuracy(logs)
    none = acc.filter(pl.col("method") == "none").select("condition", base="accuracy")
    joined = (
        acc.filter(pl.col("method") != "none")
        .join(none, on="condition")
        .join(cells, on=["condition", "method", "delay"])
    )
    assert joined.height == 4
    assert (joined["effect"] - (joined["accuracy"] - joined["base"])).abs().max() < 1e-12
    tasks = {"clean": SAMPLES, "stale": SAMPLES - 1}
    assert [tasks[c] * EPOCHS for c in joined["condition"]] == joined["n"].to_list()
    assert [tasks[c] for c in joined["condition"]] == joined["n_tasks"].to_list()


MARKER_CLI = (
    "--recovery-marker",
    "store:recovery_applied",
    "--perturb-action",
    "sample_metadata:perturb_action",
)


def test_cli_protocol_command_on_inspect_logs_says_to_import(
    eval_logs: Path, json_logs: Path, cli: Callable
) -> None:
    for logs in (eval_logs, next(json_logs.glob("*.json"))):
        done = cli("paired", logs)
        assert done.code == 2
        assert "is an inspect_ai evaluation log, not a table" in done.err
        assert "recoverylab import inspect" in done.err
        assert len(done.err.strip().splitlines()) == 1


def test_cli_import_errors_are_one_line(eval_logs: Path, cli: Callable, tmp_path: Path) -> None:
    done = cli("import", "inspect", eval_logs, "--condition", "task_arg:cond", "--method",
               "task_arg:method", "--delay", "task_arg:delay", "--out", tmp_path / "t")  # fmt: skip
    assert done.code == 2
    assert "has no task argument `cond`" in done.err
    assert len(done.err.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()
    done = cli("import", "inspect", eval_logs, "--out", tmp_path / "t")
    assert done.code == 2
    assert "needs --condition, --method, --delay" in done.err
    done = cli("import", "inspect", eval_logs, *CLI_MAPPING, "--out", eval_logs / "inside")
    assert done.code == 2
    assert "inside the input directory" in done.err


def test_string_ids_and_several_models(eval_logs: Path) -> None:
    """Ids of any type become strings; a second model adds a `model` column and pair key."""
    from inspect_ai.log import read_eval_log

    paths = sorted(eval_logs.glob("*.eval"))
    logs = [read_eval_log(str(p)) for p in paths]
    other = [read_eval_log(str(p)) for p in paths]
    for log in other:
        log.eval.model = "mockllm/other"
        for sample in log.samples or []:
            sample.id = f"t{sample.id}"
    result = ri.forks([*logs, *other], **MAPPING)
    assert result.pair_by == ("model", "epoch")
    by_model = result.forks.group_by("model").agg(pl.col("task_id").sort().unique().alias("ids"))
    ids = dict(zip(by_model["model"], by_model["ids"].to_list(), strict=True))
    assert ids["mockllm/model"] == [str(i) for i in range(1, SAMPLES + 1)]
    assert ids["mockllm/other"] == [f"t{i}" for i in range(1, SAMPLES + 1)]


@given(st.lists(st.sampled_from(["C", "I", "N", 0, 1, True, False, 0.0, 1.0]), min_size=1))
def test_default_success_agrees_with_inspects_value_to_float(values: list[object]) -> None:
    """Letters, booleans and 0/1 read as inspect scores them (C=1; I=N=0) -- one type at a time."""
    from inspect_ai.scorer import value_to_float

    from recoverylab.adapters._mapping import score_kind

    kinds = {score_kind(v)[0] for v in values}
    assume(len(kinds) == 1)
    rows = pl.DataFrame(
        {
            "score__kind": [score_kind(v)[0] for v in values],
            "score__letter": [score_kind(v)[1] for v in values],
            "score__num": [score_kind(v)[2] for v in values],
        },
        schema_overrides={"score__letter": pl.String},
    )
    converted = ri._convert(rows, "score", "success", None, "s")
    expected = [value_to_float()(v) == 1.0 for v in values]
    assert converted["success"].to_list() == expected


def test_the_network_is_cut_while_these_tests_run() -> None:
    with pytest.raises(OSError, match="network access during tests"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)


def test_cli_import_takeover_without_outcome_scores_is_one_line(
    eval_logs: Path, cli: Callable, tmp_path: Path
) -> None:
    done = cli("import", "inspect", eval_logs, "--to", "takeover", "--out", tmp_path / "t")
    assert done.code == 2
    assert "no score for aware, root_cause_fixed, derived_fixed, passed (scorers: recovered)" in (
        done.err
    )
    assert len(done.err.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()
