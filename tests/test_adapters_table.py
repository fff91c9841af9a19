"""recoverylab.adapters.table (``import table``): custom run logs through polars SQL expressions.

The logs come from recoverylab.synth.custom_logs: the same seeded runs written in four shapes
(nested JSON lines, flat CSV, parquet with a struct column, JSON arrays over several files). Each
shape read with its own mapping must give the reference forks and exclusions exactly. Every
validation path (missing field, wrong type, unparsable expression, null key, duplicate key,
unmapped columns, a non-boolean exclusion, unreadable files) is one clear error, and on the
command line one line, exit 2, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from recoverylab._errors import InputError, ParameterError, SchemaError, SourceError
from recoverylab.adapters import table
from recoverylab.synth.custom_logs import SHAPES, reference, write_custom_logs

FORK_KEY = ["task_id", "condition", "method", "delay"]


def _reference_forks(seed: int, tasks: int = 12) -> pl.DataFrame:
    ref = reference(tasks, seed).filter(~pl.col("infra")).drop("infra")
    return ref.sort(FORK_KEY, nulls_last=False)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_gives_the_reference(tmp_path: Path, shape: str, seed: int) -> None:
    paths = write_custom_logs(tmp_path, shape, seed=seed)
    out = table.read(
        paths, to="forks", mapping=SHAPES[shape]["mapping"], exclude=SHAPES[shape]["exclude"]
    )
    assert out.tables["forks"].equals(_reference_forks(seed))
    lost = reference(12, seed).filter(pl.col("infra"))
    assert out.excluded.height == lost.height
    assert sorted(out.excluded["task_id"].to_list()) == sorted(lost["task_id"].to_list())
    assert set(out.excluded["reason"]) <= {"infrastructure"}
    assert out.report.rows == {"forks": out.tables["forks"].height, "excluded": lost.height}
    assert out.report.files_read == tuple(str(p) for p in paths)
    # a directory of the logs reads the same
    assert (
        table.read(
            tmp_path, to="forks", mapping=SHAPES[shape]["mapping"], exclude=SHAPES[shape]["exclude"]
        )
        .tables["forks"]
        .equals(out.tables["forks"])
    )


def test_shapes_agree_with_each_other_through_paired(tmp_path: Path) -> None:
    import recoverylab as rl

    cells = []
    for shape in SHAPES:
        forks = table.read(
            write_custom_logs(tmp_path / shape, shape, seed=3),
            mapping=SHAPES[shape]["mapping"],
            exclude=SHAPES[shape]["exclude"],
        )
        summary = rl.paired.summarize(forks.tables["forks"], n_resamples=50)
        cells.append(summary.select("condition", "delay", "method", "n", "rescue", "harm"))
    assert all(c.equals(cells[0]) for c in cells[1:])


def test_trials_target(tmp_path: Path) -> None:
    log = tmp_path / "trials.jsonl"
    rows = [
        {"t": {"id": f"{i % 3:02d}"}, "try": i // 3, "r": float(i % 2), "model": "m"}
        for i in range(9)
    ]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    mapping = {"task_id": "t.id", "attempt": '"try"', "success": "r >= 1", "reward": "r"}
    out = table.read(log, to="trials", mapping=mapping, key=["model"])
    trials = out.tables["trials"]
    assert trials.columns == ["task_id", "attempt", "success", "reward", "model"]
    assert trials.height == 9
    assert trials["task_id"].to_list()[:3] == ["00", "00", "00"]
    assert trials["success"].sum() == sum(i % 2 for i in range(9))


def test_takeover_target(tmp_path: Path) -> None:
    log = tmp_path / "attempts.csv"
    pl.DataFrame(
        {
            "state": ["s1", "s1", "s2", "s2"],
            "wf": ["w1", "w1", "w1", "w1"],
            "rc": ["r1", "r1", "r1", "r1"],
            "depth": [1, 1, 2, 2],
            "agent": ["a", "a", "a", "a"],
            "repeat": [0, 1, 0, 1],
            "flags": ["yyyn", "nnnn", "yyyy", "ynnn"],
        }
    ).write_csv(log)
    bits = {
        f: f"SUBSTR(flags, {i + 1}, 1) = 'y'"
        for i, f in enumerate(("aware", "root_cause_fixed", "derived_fixed", "passed"))
    }
    mapping = {
        "state_id": "state",
        "workflow_id": "wf",
        "root_cause_id": "rc",
        "replay_ok": "TRUE",
        "expected_ok": "TRUE",
        **bits,
    }
    out = table.read(log, to="takeover", mapping=mapping)
    assert out.tables["states"].height == 2
    assert out.tables["attempts"]["passed"].to_list() == [False, False, True, False]
    assert "depth" not in out.tables["attempts"].columns
    # a state whose rows disagree is a duplicate state
    with pytest.raises(SchemaError, match="states"):
        table.read(log, to="takeover", mapping={**mapping, "replay_ok": '"repeat" = 0'})


def _jsonl(tmp_path: Path) -> Path:
    return write_custom_logs(tmp_path, "jsonl_nested", seed=0)[0]


NESTED = SHAPES["jsonl_nested"]["mapping"]
EXCLUDE = SHAPES["jsonl_nested"]["exclude"]


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        ({"delay": "CAST(run.nosuch AS BIGINT)"}, SchemaError, "no struct field `nosuch`"),
        ({"success": "rewardd >= 1"}, SchemaError, "unable to find column `rewardd`"),
        ({"success": "reward"}, SchemaError, "yields Float64; `success` must be bool"),
        ({"delay": "run.delay"}, SchemaError, "yields String; `delay` must be int"),
        ({"success": "__import__('os')"}, ParameterError, "not a polars SQL expression"),
        ({"success": "reward >= 1; DROP TABLE x"}, ParameterError, "not a polars SQL"),
        ({"success": "SELECT 1"}, ParameterError, "not a polars SQL"),
        ({"success": "  "}, ParameterError, "empty expression"),
        ({"task_id": "NULL"}, SchemaError, "null"),
        ({"method": "'none'", "delay": "NULL"}, SchemaError, "more than once"),
        ({"delay": "CAST(run.cond AS BIGINT)"}, InputError, "mapping the logs failed"),
    ],
)
def test_bad_maps_are_one_clear_error(
    tmp_path: Path, change: dict[str, str], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as err:
        table.read(_jsonl(tmp_path), to="forks", mapping={**NESTED, **change}, exclude=EXCLUDE)
    assert words in str(err.value)
    assert "\n" not in str(err.value)


def test_unmapped_required_columns_are_listed(tmp_path: Path) -> None:
    with pytest.raises(SchemaError) as err:
        table.read(_jsonl(tmp_path), to="forks", mapping={"task_id": "run.task"})
    message = str(err.value)
    for name in ("condition", "method", "delay", "success"):
        assert f"--map {name}=EXPR" in message
    assert "log columns: reward, run, status" in message


def test_exclusions(tmp_path: Path) -> None:
    path = _jsonl(tmp_path)
    with pytest.raises(SchemaError, match="must be a boolean"):
        table.read(path, mapping=NESTED, exclude={"infra": "status"})
    with pytest.raises(ParameterError, match="empty reason"):
        table.read(path, mapping=NESTED, exclude={" ": "status = 'x'"})
    # without the exclusion, the lost runs have null success: a clear null error, not failures
    with pytest.raises(SchemaError, match="null"):
        table.read(path, mapping=NESTED)
    # first matching reason wins
    out = table.read(
        path,
        mapping=NESTED,
        exclude={"late": "run.delay = '2'", "infrastructure": "status = 'sandbox_error'"},
    )
    assert set(out.excluded["reason"]) == {"late", "infrastructure"}
    assert out.tables["forks"].filter(pl.col("delay") == 2).height == 0


def test_bad_sources(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        table.read(tmp_path / "absent.jsonl", mapping=NESTED)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(SourceError, match="empty"):
        table.read(empty, mapping=NESTED)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(SourceError, match=r"broken\.parquet"):
        table.read(broken, mapping=NESTED)
    bad_array = tmp_path / "bad.json"
    bad_array.write_text('[{"a": 1}, oops]')
    with pytest.raises(SourceError, match=r"bad\.json"):
        table.read(bad_array, mapping=NESTED)
    (tmp_path / "nothing").mkdir()
    with pytest.raises(SourceError, match="holds no"):
        table.read(tmp_path / "nothing")
    with pytest.raises(ParameterError, match="'states'"):
        table.read(_jsonl(tmp_path), to="states", mapping=NESTED)
    with pytest.raises(ParameterError, match="key column `seed`"):
        table.read(
            _jsonl(tmp_path),
            mapping=NESTED,
            exclude=SHAPES["jsonl_nested"]["exclude"],
            key=["seed"],
        )


def _map_args(mapping: dict[str, str]) -> list[str]:
    return [arg for name, expr in mapping.items() for arg in ("--map", f"{name}={expr}")]


def test_cli_custom_jsonl_to_forks_with_two_maps(cli: Any, tmp_path: Path) -> None:
    """Acceptance: a custom JSONL log to forks with two --map expressions, then paired."""
    log = tmp_path / "runs.jsonl"
    ref = reference(12, 4)
    rows = ref.select(
        "task_id",
        "condition",
        "method",
        pl.struct(pl.col("delay").cast(pl.String).alias("delay")).alias("meta"),
        pl.when(pl.col("success")).then(1.0).otherwise(0.0).alias("reward"),
        "infra",
    )
    rows.write_ndjson(log)
    result = cli(
        "import", "table", log, "--to", "forks",
        "--map", "success=reward >= 1", "--map", "delay=CAST(meta.delay AS BIGINT)",
        "--exclude", "infrastructure=infra",
        "--out", tmp_path / "tables", "--report-out", tmp_path / "report.json",
    )  # fmt: skip
    assert result.code == 0, result.err
    forks = pl.read_parquet(tmp_path / "tables" / "forks.parquet")
    assert forks.select([*FORK_KEY, "success"]).equals(_reference_forks(4))
    excluded = pl.read_parquet(tmp_path / "tables" / "excluded.parquet")
    assert excluded.height == ref["infra"].sum()
    assert json.loads((tmp_path / "report.json").read_text())["excluded"] == {
        "infrastructure": excluded.height
    }
    paired = cli("paired", tmp_path / "tables" / "forks.parquet", "--resamples", "50")
    assert paired.code == 0, paired.err


@pytest.mark.parametrize(
    ("maps", "words"),
    [
        (["success=reward >= 1", "delay=CAST(meta.nosuch AS BIGINT)"], "no struct field"),
        (["success=reward", "delay=CAST(meta.delay AS BIGINT)"], "yields Float64"),
        (["success=reward >= 1", "delay=meta.delay"], "yields String"),
        (["success=reward >= 1", "delay=CAST(nometa.delay AS BIGINT)"], "nometa"),
        (["success"], "not NAME=EXPR"),
        (["1x=reward", "delay=1"], "not NAME=EXPR"),
        (["success=reward >= 1", "success=TRUE"], "twice"),
        (["success=import os", "delay=1"], "cannot be evaluated"),
    ],
)
def test_cli_bad_map_is_one_line_exit_2_nothing_written(
    cli: Any, tmp_path: Path, maps: list[str], words: str
) -> None:
    log = tmp_path / "runs.jsonl"
    log.write_text(
        json.dumps(
            {
                "task_id": "t1",
                "condition": "c",
                "method": "none",
                "meta": {"delay": "1"},
                "reward": 1.0,
            }
        )
        + "\n"
    )
    args = [a for m in maps for a in ("--map", m)]
    result = cli("import", "table", log, *args, "--out", tmp_path / "out")
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("recoverylab import: error:")
    assert words in lines[0]
    assert not (tmp_path / "out").exists()


def test_csv_ids_feeding_text_columns_stay_text(tmp_path: Path) -> None:
    """`007` read from a CSV column mapped to task_id stays `007` (never the integer 7)."""
    log = tmp_path / "runs.csv"
    log.write_text("task,cond,arm,wait,score\n007,c,none,,1\n007,c,retry,1,0\n010,c,none,,0\n")
    mapping = {
        "task_id": "task",
        "condition": "cond",
        "method": "arm",
        "delay": "wait",
        "success": "score >= 1",
    }
    forks = table.read(log, mapping=mapping).tables["forks"]
    assert forks["task_id"].to_list() == ["007", "007", "010"]
    composite = table.read(log, mapping={**mapping, "task_id": "CONCAT(cond, '-', task)"})
    assert composite.tables["forks"]["task_id"].to_list() == ["c-007", "c-007", "c-010"]
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("task,cond\n007,c,extra\n")
    with pytest.raises(SourceError, match=r"ragged\.csv"):
        table.read(ragged, mapping=mapping)


def test_a_chosen_word_is_not_taken_for_an_input_path(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--to forks --out forks` a second time: the word `forks` is not the existing `forks/`."""
    monkeypatch.chdir(tmp_path)
    reference(12, 4).write_ndjson("runs.jsonl")
    args = ("import", "table", "runs.jsonl", "--to", "forks", "--out", "forks")
    first = cli(*args, "--exclude", "infrastructure=infra")
    assert first.code == 0, first.err
    again = cli(*args, "--exclude", "infrastructure=infra")
    assert again.code == 0, again.err
    assert pl.read_parquet("forks/forks.parquet").height > 0
    # a real input inside the output directory is still refused
    refused = cli("import", "table", "forks/forks.parquet", "--to", "forks", "--out", "forks")
    assert refused.code == 2
    assert "inside the input directory" in refused.err or "also an input" in refused.err
