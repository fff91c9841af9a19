"""Broken inputs: one clear error naming the file or column, or the clean input's exact result.

Issue 13. Regressions for the defects found (an overflowing delay, ragged CSV rows, ids that lose
their leading zeros, damaged parquet pages, malformed NDJSON, unclosed quotes, a dataset whose
files disagree on the schema), and a generated suite: valid tables of every kind are corrupted by
a seeded generator and every case must end either with exit status 2 and one stderr line that
names the file, the table or a column, or with a result identical to the clean input's - never a
different result without an error. The same inputs through the Python API raise a
RecoveryLabError naming the file.

Flipped bits inside parquet data pages are undetectable unless the writer stored page checksums;
those cases use files written with checksums and ``--verify-inputs`` (see io.scan ``verify``).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import recoverylab as rl
from recoverylab.schema import SPECS
from tests.conftest import SAMPLES

# --- the valid inputs ---------------------------------------------------------------------------


def _forks() -> dict[str, pl.DataFrame]:
    forks = pl.read_parquet(SAMPLES / "paired" / "main_forks.parquet")
    tasks = forks["task_id"].unique().sort().head(40)
    return {"forks": forks.filter(pl.col("task_id").is_in(tasks.implode()))}


def _goal() -> dict[str, pl.DataFrame]:
    folder = SAMPLES / "goal" / "diagnostic"
    return {t: pl.read_csv(folder / f"{t}.csv") for t in GOAL_TABLES}


def _takeover() -> dict[str, pl.DataFrame]:
    folder = SAMPLES / "takeover"
    states = pl.read_parquet(folder / "states.parquet")
    workflows = states["workflow_id"].unique().sort().head(12)
    states = states.filter(pl.col("workflow_id").is_in(workflows.implode()))
    attempts = pl.read_parquet(folder / "attempts.parquet").join(
        states.select("state_id"), on="state_id", how="semi"
    )
    return {"states": states, "attempts": attempts}


def _points() -> dict[str, pl.DataFrame]:
    points = pl.read_parquet(SAMPLES / "router" / "test" / "decision_points.parquet")
    return {"decision_points": points.head(300)}


GOAL_TABLES = ("cases", "resources", "episodes", "steps", "citations")


@dataclass(frozen=True)
class Kind:
    """A family of tables and the command that reads them (its result must not silently move)."""

    make: Callable[[], dict[str, pl.DataFrame]]
    command: Callable[[dict[str, Path], Path], list[object]]
    result: str  # the file under the output directory that holds the result


KINDS = {
    "forks": Kind(
        _forks,
        lambda p, out: ["paired", p["forks"], "--resamples", 50, "--out", out / "r.parquet"],
        "r.parquet",
    ),
    "goal": Kind(
        _goal,
        lambda p, out: [
            "goal",
            *(x for t in GOAL_TABLES for x in (f"--{t}", p[t])),
            "--resamples",
            50,
            "--out",
            out / "r.parquet",
        ],
        "r.parquet",
    ),
    "takeover": Kind(
        _takeover,
        lambda p, out: [
            "takeover",
            "--states",
            p["states"],
            "--attempts",
            p["attempts"],
            "--resamples",
            50,
            "--out-dir",
            out,
        ],
        "summary.parquet",
    ),
    "decision_points": Kind(
        _points,
        lambda p, out: ["validate", "decision_points", p["decision_points"]],
        "",
    ),
}

SUFFIX = {"parquet": ".parquet", "ipc": ".arrow", "csv": ".csv", "ndjson": ".ndjson"}


def _write(frame: pl.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        pq.write_table(frame.to_arrow(), path, write_page_checksum=True)
    elif fmt == "ipc":
        frame.write_ipc(path)
    elif fmt == "csv":
        frame.write_csv(path)
    else:
        frame.write_ndjson(path)


def _run(cli, kind: Kind, paths: dict[str, Path], out: Path, *extra: object):
    out.mkdir(parents=True, exist_ok=True)
    result = cli("--quiet", *extra, *kind.command(paths, out))
    if result.code != 0 or not kind.result:
        return result, result.out
    return result, pl.read_parquet(out / kind.result)


# --- corruptions --------------------------------------------------------------------------------


def _contract_columns(table: str, frame: pl.DataFrame, kind: str) -> list[str]:
    contract = SPECS[table]
    return [c.name for c in contract.columns if c.name in frame.columns and c.kind == kind]


def _frame_corruption(
    name: str, table: str, frame: pl.DataFrame, rng: random.Random
) -> pl.DataFrame:
    """Return ``frame`` with one corruption (one that applies, see :func:`_applies`)."""
    contract = SPECS[table]
    row = rng.randrange(frame.height)
    index = pl.int_range(pl.len()) == row
    if name == "null":
        columns = [c.name for c in contract.columns if not c.nullable and c.name in frame.columns]
        column = rng.choice(columns)
        return frame.with_columns(pl.when(index).then(None).otherwise(pl.col(column)).alias(column))
    if name == "duplicate_key":
        return pl.concat([frame, frame.slice(row, 1)])
    if name == "unknown_label":
        labelled = [c.name for c in contract.columns if c.labels and c.name in frame.columns]
        column = rng.choice(labelled)
        return frame.with_columns(
            pl.when(index).then(pl.lit("bogus_label")).otherwise(pl.col(column)).alias(column)
        )
    if name == "missing_column":
        return frame.drop(rng.choice([c for c in contract.required if c in frame.columns]))
    if name == "empty":
        return frame.head(0)
    if name == "int_limit":
        column = rng.choice(_contract_columns(table, frame, "int"))
        value = rng.choice([2**63 - 1, -(2**63), 2**53 + 1, 2**62])
        return frame.with_columns(
            pl.when(index).then(pl.lit(value, pl.Int64)).otherwise(pl.col(column)).alias(column)
        )
    if name == "type_change":
        columns = _contract_columns(table, frame, "int") + _contract_columns(table, frame, "bool")
        column = rng.choice(columns)
        text = pl.col(column).cast(pl.String)
        return frame.with_columns(pl.when(index).then(pl.lit("oops")).otherwise(text).alias(column))
    raise AssertionError(name)


def _file_corruption(name: str, path: Path, fmt: str, rng: random.Random) -> None:
    """Corrupt the written file in place (a corruption that applies, see :func:`_applies`)."""
    data = path.read_bytes()
    if name == "truncate":
        path.write_bytes(data[: rng.randrange(1, len(data) - 1)])
        return
    if name == "flip":
        footer = int.from_bytes(data[-8:-4], "little")
        body = bytearray(data)
        position = rng.randrange(4, len(data) - 8 - footer)
        body[position] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(body))
        return
    lines = data.decode().split("\n")
    line = rng.randrange(1, len(lines) - 1)
    if name == "ragged_more":
        lines[line] += ",extra"
    elif name == "ragged_fewer":
        lines[line] = lines[line].rsplit(",", 1)[0]
    elif name == "unbalanced_quote":
        fields = lines[line].split(",")
        position = rng.randrange(len(fields))
        fields[position] = '"' + fields[position]
        lines[line] = ",".join(fields)
    elif name == "bad_json":
        lines[line] = lines[line][: len(lines[line]) // 2]
    else:
        raise AssertionError(name)
    path.write_text("\n".join(lines))


FRAME_CORRUPTIONS = (
    "null", "duplicate_key", "unknown_label", "missing_column", "empty", "int_limit", "type_change",
)  # fmt: skip
FILE_CORRUPTIONS = (
    "truncate", "flip", "ragged_more", "ragged_fewer", "unbalanced_quote", "bad_json",
)  # fmt: skip
FORMATS = ("parquet", "ipc", "csv", "ndjson")


def _applies(corruption: str, fmt: str, table: str, columns: list[str]) -> bool:
    """Whether a corruption means anything for this table in this format."""
    contract = SPECS[table]
    present = [c for c in contract.columns if c.name in columns]
    return {
        "flip": fmt == "parquet",
        "ragged_more": fmt == "csv",
        "ragged_fewer": fmt == "csv",
        "unbalanced_quote": fmt == "csv",
        "bad_json": fmt == "ndjson",
        "unknown_label": any(c.labels for c in present),
        "int_limit": any(c.kind == "int" for c in present),
        "type_change": any(c.kind in ("int", "bool") for c in present),
        "empty": not contract.allow_empty,  # an empty citations table is valid input
    }.get(corruption, True)


def _cases(count: int, seed: int) -> list[tuple[str, str, str, str, int]]:
    """``count`` (kind, format, corruption, table, seed) cases, each one that applies."""
    rng = random.Random(seed)
    columns = {
        table: frame.columns for kind in KINDS.values() for table, frame in kind.make().items()
    }
    corruptions = [*FRAME_CORRUPTIONS, *FILE_CORRUPTIONS, "schema_split"]
    tables = {name: sorted(kind.make()) for name, kind in KINDS.items()}
    cases: list[tuple[str, str, str, str, int]] = []
    while len(cases) < count:
        kind, fmt, corruption = (
            rng.choice(list(KINDS)),
            rng.choice(FORMATS),
            rng.choice(corruptions),
        )
        table = rng.choice(tables[kind])
        if _applies(corruption, fmt, table, columns[table]):
            cases.append((kind, fmt, corruption, table, rng.randrange(10**6)))
    return cases


CASES = _cases(130, seed=13)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Callable[[str, str], object]:
    """The clean result of each kind read in each format (computed once)."""
    cache: dict[tuple[str, str], object] = {}
    from recoverylab.cli import main

    def get(kind_name: str, fmt: str) -> object:
        if (kind_name, fmt) not in cache:
            root = tmp_path_factory.mktemp(f"clean-{kind_name}-{fmt}")
            kind = KINDS[kind_name]
            paths = {}
            for table, frame in kind.make().items():
                paths[table] = root / f"{table}{SUFFIX[fmt]}"
                _write(frame, paths[table], fmt)
            out = root / "out"
            out.mkdir()
            assert main(["--quiet", *map(str, kind.command(paths, out))]) == 0
            cache[(kind_name, fmt)] = pl.read_parquet(out / kind.result) if kind.result else None
        return cache[(kind_name, fmt)]

    return get


@pytest.mark.parametrize(("kind_name", "fmt", "corruption", "target", "seed"), CASES)
def test_a_broken_input_gives_an_error_or_the_clean_result(
    cli, clean, tmp_path, kind_name, fmt, corruption, target, seed
) -> None:
    rng = random.Random(seed)
    kind = KINDS[kind_name]
    tables = kind.make()
    paths: dict[str, Path] = {}
    for table, valid in tables.items():
        frame = valid
        paths[table] = tmp_path / f"{table}{SUFFIX[fmt]}"
        if table == target and corruption in FRAME_CORRUPTIONS:
            frame = _frame_corruption(corruption, table, valid, rng)
        if table == target and corruption == "schema_split":
            paths[table] = _split_with_another_schema(frame, tmp_path / table, fmt, rng)
            continue
        _write(frame, paths[table], fmt)
    if corruption in FILE_CORRUPTIONS:
        _file_corruption(corruption, paths[target], fmt, rng)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    extra = ("--verify-inputs",) if corruption == "flip" else ()
    result, got = _run(cli, kind, paths, tmp_path / "out", *extra)
    assert {p: p.read_bytes() for p in before} == before  # an input is never touched
    if result.code == 0:
        expected = clean(kind_name, fmt)
        if expected is None:
            assert got == f"ok: {tables[target].height} rows\n" or target != "decision_points"
        else:
            assert got.equals(expected), "a different result without an error"
        return
    assert result.code == 2, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    names_file = any(p.name in lines[0] for p in paths.values()) or str(tmp_path) in lines[0]
    names_column = "column `" in lines[0] or "columns `" in lines[0]
    names_table = lines[0].split(": error: ", 1)[1].startswith(f"{target}: ")
    assert names_file or names_column or names_table, lines[0]


def _split_with_another_schema(
    frame: pl.DataFrame, folder: Path, fmt: str, rng: random.Random
) -> Path:
    """Write ``frame`` as a two-file dataset whose second file lacks or retypes a column."""
    folder.mkdir()
    half = max(1, frame.height // 2)
    first, second = frame.head(half), frame.slice(half)
    column = rng.choice(first.columns)
    if rng.random() < 0.5:
        second = second.drop(column)
    else:
        second = second.with_columns(pl.col(column).cast(pl.String))
    _write(first, folder / f"part-0{SUFFIX[fmt]}", fmt)
    _write(second, folder / f"part-1{SUFFIX[fmt]}", fmt)
    return folder


def test_the_generated_suite_is_large_enough() -> None:
    kinds = {case[0] for case in CASES}
    corruptions = {case[2] for case in CASES}
    assert len({case[3] for case in CASES}) == 9  # every table of every kind
    assert len(CASES) >= 100
    assert kinds == set(KINDS)
    assert corruptions == {*FRAME_CORRUPTIONS, *FILE_CORRUPTIONS, "schema_split"}


# --- regressions of the defects found -----------------------------------------------------------


def test_an_overflowing_delay_is_an_error_not_a_cell(cli, tmp_path) -> None:
    forks = _forks()["forks"]
    bad = forks.with_columns(
        pl.when(pl.int_range(pl.len()) == 1)
        .then(pl.lit(2**63 - 5, pl.Int64))
        .otherwise(pl.col("delay"))
        .alias("delay")
    )
    path = tmp_path / "forks.parquet"
    bad.write_parquet(path)
    result = cli("paired", path, "--quiet")
    assert result.code == 2
    assert "forks: column `delay` has 1 value beyond ±(2^53 - 1)" in result.err
    with pytest.raises(rl.SchemaError, match="beyond"):
        rl.paired.summarize(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda line: line + ",EXTRA", "line 3: a row has 11 fields where the header has 10"),
        (lambda line: line.rsplit(",", 1)[0], "line 3: a row has 9 fields where the header has 10"),
        (lambda line: '"' + line, "line 3: the row cannot be parsed as CSV"),
    ],
)
def test_ragged_and_unclosed_csv_rows_name_the_line(cli, tmp_path, edit, message) -> None:
    path = tmp_path / "forks.csv"
    _forks()["forks"].write_csv(path)
    lines = path.read_text().split("\n")
    lines[2] = edit(lines[2])
    path.write_text("\n".join(lines))
    for command in (("validate", "forks", path), ("paired", path)):
        result = cli(*command, "--quiet")
        assert result.code == 2
        assert f"`{path}` {message}" in result.err
    with pytest.raises(rl.SourceError, match=message):
        rl.paired.summarize(path)


def test_csv_ids_keep_their_leading_zeros(cli, tmp_path) -> None:
    forks = _forks()["forks"].with_columns(
        pl.col("task_id").rank("dense").cast(pl.Int64).cast(pl.String).str.zfill(3)
    )
    forks.write_csv(tmp_path / "forks.csv")
    forks.write_parquet(tmp_path / "forks.parquet")
    scanned = rl.scan(tmp_path / "forks.csv").collect()
    assert scanned["task_id"].dtype == pl.String
    assert scanned["task_id"].to_list()[:1] == ["001"]
    assert (
        rl.validate(tmp_path / "forks.csv", "forks")
        .collect()
        .equals(rl.validate(tmp_path / "forks.parquet", "forks").collect())
    )
    from_csv = rl.paired.pairs(tmp_path / "forks.csv").collect()
    from_parquet = rl.paired.pairs(tmp_path / "forks.parquet").collect()
    assert from_csv.sort(from_csv.columns).equals(from_parquet.sort(from_parquet.columns))


def test_goal_ids_with_leading_zeros_give_the_parquet_result(cli, tmp_path) -> None:
    tables = _goal()
    renumber = {"d1": "001", "d2": "002", "d3": "003", "d4": "004"}
    results = []
    for fmt in ("csv", "parquet"):
        folder = tmp_path / fmt
        folder.mkdir()
        paths = {}
        for name, table in tables.items():
            frame = table
            if "case_id" in frame.columns:
                frame = frame.with_columns(pl.col("case_id").replace(renumber))
            paths[name] = folder / f"{name}{SUFFIX[fmt]}"
            frame.write_csv(paths[name]) if fmt == "csv" else frame.write_parquet(paths[name])
        scored = rl.goal.score(*(paths[t] for t in GOAL_TABLES)).collect().sort("episode_id")
        results.append(scored)
        assert sorted(scored["case_id"].unique()) == sorted(renumber.values())
    assert results[0].equals(results[1])


def test_a_damaged_parquet_page_names_the_file(cli, tmp_path) -> None:
    path = tmp_path / "forks.parquet"
    _forks()["forks"].write_parquet(path)
    data = bytearray(path.read_bytes())
    for offset in (40, 41, 45, 60, 61):
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    result = cli("paired", path, "--quiet")
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert f"`{path}` is a damaged parquet file" in result.err
    with pytest.raises(rl.SourceError, match="is a damaged parquet file"):
        rl.paired.summarize(path)
    with pytest.raises(rl.SourceError, match="is a damaged parquet file"):
        rl.paired.summarize(rl.scan(path))


def test_a_malformed_ndjson_line_names_file_and_line(cli, tmp_path) -> None:
    path = tmp_path / "forks.ndjson"
    _forks()["forks"].write_ndjson(path)
    lines = path.read_text().split("\n")
    lines[4] = lines[4].replace(":", "", 1)
    path.write_text("\n".join(lines))
    result = cli("paired", path, "--quiet")
    assert result.code == 2
    assert f"`{path}` line 5: not valid JSON" in result.err
    with pytest.raises(rl.SourceError, match="line 5: not valid JSON"):
        rl.paired.summarize(path)


def test_a_ragged_csv_in_goal_names_the_file(cli, tmp_path) -> None:
    folder = tmp_path / "goal"
    shutil.copytree(SAMPLES / "goal" / "diagnostic", folder)
    steps = folder / "steps.csv"
    lines = steps.read_text().split("\n")
    lines[2] += ",x"
    steps.write_text("\n".join(lines))
    args = [x for t in GOAL_TABLES for x in (f"--{t}", folder / f"{t}.csv")]
    result = cli("goal", *args, "--quiet")
    assert result.code == 2
    assert f"`{steps}` line 3: a row has 5 fields where the header has 4" in result.err
    assert "truncate_ragged_lines" not in result.err


def test_a_dataset_file_without_a_column_names_the_file(cli, tmp_path) -> None:
    forks = _forks()["forks"]
    folder = tmp_path / "runs"
    folder.mkdir()
    forks.head(100).write_parquet(folder / "part-0.parquet")
    forks.slice(100).drop("success").write_parquet(folder / "part-1.parquet")
    result = cli("paired", folder, "--quiet")
    assert result.code == 2
    assert "part-1.parquet` lacks column `success`" in result.err
    assert "missing_columns" not in result.err
    with pytest.raises(rl.SourceError, match="lacks column `success`"):
        rl.paired.summarize(folder)


def test_a_text_file_cut_at_its_end_is_an_error(tmp_path) -> None:
    path = tmp_path / "forks.csv"
    _forks()["forks"].write_csv(path)
    path.write_bytes(path.read_bytes()[:-7])  # the last row loses its end, keeps its fields
    with pytest.raises(rl.SourceError, match="ends inside a row"):
        rl.scan(path)


def test_flipped_bits_are_found_with_page_checksums(tmp_path) -> None:
    frame = _forks()["forks"]
    path = tmp_path / "forks.parquet"
    pq.write_table(frame.to_arrow(), path, write_page_checksum=True)
    data = path.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    body_end = len(data) - 8 - footer
    rng = random.Random(0)
    outcomes = []
    for _ in range(40):
        flipped = bytearray(data)
        flipped[rng.randrange(4, body_end)] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(flipped))
        try:
            got = rl.scan(path, verify=True).collect()
        except rl.SourceError as exc:
            outcomes.append("error naming the file" if str(path) in str(exc) else str(exc))
        else:
            outcomes.append("same" if got.equals(frame) else "different")
    assert set(outcomes) <= {"error naming the file", "same"}, outcomes
    assert "error naming the file" in outcomes


def _broken_forks(kind: str, root: Path) -> Path:
    forks = _forks()["forks"]
    if kind == "damaged_page":
        path = root / "forks.parquet"
        forks.write_parquet(path)
        data = bytearray(path.read_bytes())
        for offset in (40, 41, 45, 60, 61):
            data[offset] ^= 0xFF
        path.write_bytes(bytes(data))
        return path
    if kind == "schema_mismatch":
        root.joinpath("runs").mkdir()
        forks.head(50).write_parquet(root / "runs" / "a.parquet")
        forks.slice(50).drop("method").write_parquet(root / "runs" / "b.parquet")
        return root / "runs"
    path = root / ("forks.ndjson" if kind == "bad_json" else "forks.csv")
    (forks.write_ndjson if kind == "bad_json" else forks.write_csv)(path)
    lines = path.read_text().split("\n")
    lines[3] = {"ragged": lines[3] + ",x", "quote": '"' + lines[3], "bad_json": lines[3][:9]}[kind]
    path.write_text("\n".join(lines))
    return path


@pytest.mark.parametrize("kind", ["damaged_page", "schema_mismatch", "ragged", "quote", "bad_json"])
@pytest.mark.parametrize(
    "verb",
    [
        lambda f: rl.validate(f, "forks"),
        lambda f: rl.paired.summarize(f, n_resamples=20),
        lambda f: rl.paired.contrast(f, "stale2", "clean", n_resamples=20),
        lambda f: rl.paired.pairs(f).collect(),
        lambda f: rl.paired.exclusions(f).collect(),
    ],
    ids=["validate", "summarize", "contrast", "pairs", "exclusions"],
)
def test_the_python_api_raises_our_error_naming_the_file(tmp_path, kind, verb) -> None:
    path = _broken_forks(kind, tmp_path)
    for source in (path, str(path)):
        with pytest.raises(rl.RecoveryLabError) as info:
            verb(source)
        assert isinstance(info.value, rl.SourceError)
        assert path.name in str(info.value) or "b.parquet" in str(info.value)


# --- a nested value where a key or label belongs (issue 39) ---------------------------------


@pytest.mark.parametrize("where", ["frame", "parquet"])
@pytest.mark.parametrize(
    ("column", "value"), [("task_id", {"id": "m001"}), ("condition", ["clean"])]
)
def test_a_nested_key_or_label_column_is_refused_naming_it(tmp_path, where, column, value):
    row = {"task_id": "t1", "condition": "clean", "method": "none", "delay": None, "success": True}
    frame = pl.DataFrame([{**row, column: value}])
    source: object = frame
    if where == "parquet":
        source = tmp_path / "forks.parquet"
        frame.write_parquet(source)
    with pytest.raises(rl.SchemaError) as caught:
        rl.validate(source, "forks")
    text = str(caught.value)
    assert text.startswith(f"forks: column `{column}` holds nested values (")
    assert (f"(in `{source}`)" in text) == (where == "parquet")
    assert text.endswith("Hint: move the nested value to a column of its own, or flatten it.")


def test_a_nested_pair_by_key_is_refused():
    frame = pl.DataFrame(
        {
            "task_id": ["t1"],
            "condition": ["clean"],
            "method": ["none"],
            "delay": [None],
            "success": [True],
            "seed": [[1, 2]],
        }
    )
    with pytest.raises(rl.SchemaError, match=r"^forks: column `seed` holds nested values \(List"):
        rl.validate(frame, "forks", key=["seed"])


# --- hostile adapter inputs: one line naming the file, or excluded by reason (issue 39) ---------

_DEEP = "[" * 100_000 + "]" * 100_000


def _harbor_job(tmp_path: Path) -> list[Path]:
    from recoverylab.synth.harbor_jobs import write_harbor_jobs

    truth = write_harbor_jobs(tmp_path / "jobs", tasks=2, attempts=1, failures=False)
    return [Path(t.file) for t in truth]


def _tau2_run(tmp_path: Path) -> Path:
    from recoverylab.synth.tau2_results import write_tau2_results

    (path,) = write_tau2_results(
        tmp_path / "runs", domains=("retail",), agents=(("llm_agent", "gpt-4.1"),), tasks=2
    )
    return path


@pytest.mark.parametrize("adapter", ["harbor", "tau2", "table"])
def test_a_result_nested_100000_deep_is_one_line_naming_it(tmp_path, cli, adapter):
    """A RecursionError traceback (exit 1) before issue 39."""
    if adapter == "harbor":
        bad = _harbor_job(tmp_path)[0]
        argv = ["import", "harbor", tmp_path / "jobs", "--to", "trials"]
    elif adapter == "tau2":
        bad = _tau2_run(tmp_path)
        argv = ["import", "tau2", bad]
    else:
        bad = tmp_path / "runs.json"
        argv = ["import", "table", bad, "--to", "trials", "--map", "task_id=id"]
        argv += ["--map", "success=ok", "--map", "attempt=0"]
    bad.write_text('{"id": "a", "x": ' + _DEEP + "}")
    done = cli(*argv, "--out", tmp_path / "out")
    assert done.code == 2, done.err
    assert len(done.err.strip().splitlines()) == 1, done.err
    assert f"`{bad}`" in done.err
    assert "nested more than 100 levels deep" in done.err


def test_a_harbor_result_harbor_would_skip_is_excluded_as_invalid_result(tmp_path, cli):
    """An exception_info without exception_type: Harbor's ExceptionInfo model rejects it."""
    import json

    files = _harbor_job(tmp_path)
    value = json.loads(files[0].read_text())
    value["exception_info"] = {
        "exception_message": "lost",
        "exception_traceback": "",
        "occurred_at": "2026-11-30T08:00:00Z",
    }
    files[0].write_text(json.dumps(value))
    out = tmp_path / "out"
    done = cli("import", "harbor", tmp_path / "jobs", "--to", "trials", "--out", out)
    assert done.code == 0, done.err
    assert "invalid_result" in done.err  # the read report
    excluded = pl.read_parquet(out / "excluded.parquet")
    row = excluded.filter(pl.col("reason") == "invalid_result").to_dicts()
    assert [r["log"] for r in row] == [str(files[0])]
    assert row[0]["detail"].startswith("an `exception_info` lacks `exception_type`")
    assert pl.read_parquet(out / "trials.parquet").height == len(files) - 1


@pytest.mark.parametrize("codec", ["gz", "zst", "bz2"])
def test_compressed_adapter_logs_read_like_plain_ones(tmp_path, codec):
    """tau2 results, a Harbor trial's result.json and a table log, each compressed."""
    import bz2
    import gzip

    import zstandard

    from recoverylab.adapters import harbor, table, tau2

    pack = {"gz": gzip.compress, "bz2": bz2.compress, "zst": zstandard.ZstdCompressor().compress}

    def compress(path: Path) -> None:
        path.with_name(f"{path.name}.{codec}").write_bytes(pack[codec](path.read_bytes()))
        path.unlink()

    run = _tau2_run(tmp_path)
    plain = tau2.read(run).tables["trials"]
    compress(run)
    assert tau2.read(tmp_path / "runs").tables["trials"].equals(plain)
    files = _harbor_job(tmp_path)
    plain = harbor.trials(tmp_path / "jobs").tables["trials"].drop("file")
    compress(files[0])
    assert harbor.trials(tmp_path / "jobs").tables["trials"].drop("file").equals(plain)
    log = tmp_path / "runs.csv"
    pl.DataFrame({"id": ["007", "008"], "ok": [True, False]}).write_csv(log)
    mapping = {"task_id": "id", "success": "ok", "attempt": "0"}
    plain = table.read(log, to="trials", mapping=mapping).tables["trials"]
    compress(log)
    packed = table.read(tmp_path / f"runs.csv.{codec}", to="trials", mapping=mapping)
    assert packed.tables["trials"].equals(plain)
    assert packed.tables["trials"]["task_id"].to_list() == ["007", "008"]
