"""The source resolver's rules (recoverylab.io's tables), one regression test per input bullet.

Issue 26 measured each of these on a hostile corpus: a hive directory contradicting its files'
column, an optional column present in some files only, a glob matching only an empty directory,
a symbolic link loop, a parquet footer that under-counts its rows, and Spark-style directories.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recoverylab as rl
from recoverylab import synth
from recoverylab.cli._validate import real_rows

FAST = ("--resamples", "50", "--quiet")


@functools.cache
def _forks() -> pl.DataFrame:
    return synth.generate("forks", 40, seed=5)["forks"]


def _one_line_error(result: object, command: str) -> str:
    assert result.code == 2, result  # type: ignore[attr-defined]
    assert result.out == ""  # type: ignore[attr-defined]
    lines = result.err.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"recoverylab {command}: error: ")
    return lines[0]


# --- hive values and file columns ------------------------------------------------------------


def _swapped_hive(root: Path) -> Path:
    """Rows of `clean` and `stale2` written under each other's `condition=` directory."""
    forks = _forks().filter(pl.col("condition").is_in(["clean", "stale2"]))
    for label, other in (("clean", "stale2"), ("stale2", "clean")):
        folder = root / "runs" / f"condition={label}"
        folder.mkdir(parents=True)
        forks.filter(pl.col("condition") == other).write_parquet(folder / "part-0.parquet")
    return root / "runs"


def test_a_hive_value_contradicting_the_file_column_is_an_error_naming_both(tmp_path) -> None:
    runs = _swapped_hive(tmp_path)
    with pytest.raises(rl.SourceError) as raised:
        rl.scan(runs)
    message = str(raised.value)
    assert "condition=clean/part-0.parquet` has column `condition` = 'stale2'" in message
    assert "says 'clean'" in message


@pytest.mark.parametrize("command", ["paired", "validate"])
def test_the_command_line_refuses_the_swapped_labels_in_one_line(cli, tmp_path, command) -> None:
    runs = _swapped_hive(tmp_path)
    args = ("validate", "forks", runs) if command == "validate" else ("paired", runs, *FAST)
    line = _one_line_error(cli(*args), command)
    assert "has column `condition`" in line
    assert "condition=clean" in line


def test_hive_values_equal_to_the_file_column_are_read_once(tmp_path) -> None:
    forks = _forks()
    for label in ("clean", "stale2"):
        folder = tmp_path / f"condition={label}"
        folder.mkdir()
        forks.filter(pl.col("condition") == label).write_parquet(folder / "part-0.parquet")
    got = rl.scan(tmp_path).collect()
    expected = forks.filter(pl.col("condition").is_in(["clean", "stale2"]))
    assert got.columns == expected.columns
    assert got.sort(got.columns).equals(expected.sort(expected.columns))


def test_hive_values_are_typed_by_the_contract_and_the_values(tmp_path) -> None:
    frame = pl.DataFrame({"success": [True, False]})
    for task, seed in (("007", "1"), ("010", "2")):
        folder = tmp_path / f"task_id={task}" / f"seed={seed}"
        folder.mkdir(parents=True)
        frame.write_parquet(folder / "part.parquet")
    (tmp_path / "task_id=011" / "seed=__HIVE_DEFAULT_PARTITION__").mkdir(parents=True)
    frame.write_parquet(tmp_path / "task_id=011" / "seed=__HIVE_DEFAULT_PARTITION__" / "p.parquet")
    got = rl.scan(tmp_path).collect()
    assert got.schema["task_id"] == pl.String  # a contract text column stays text: 007
    assert got.schema["seed"] == pl.Int64
    assert sorted(got["task_id"].unique()) == ["007", "010", "011"]
    assert got.filter(pl.col("task_id") == "011")["seed"].is_null().all()


# --- schemas unify whatever the naming and the order ----------------------------------------


def _split_optional(folder: Path, first_lacks: bool) -> pl.DataFrame:
    """Write forks in two files, one without the optional `prefix_hash` column."""
    forks = _forks()
    folder.mkdir()
    half = forks.height // 2
    head, tail = forks.head(half), forks.slice(half)
    if first_lacks:
        head = head.drop("prefix_hash")
    else:
        tail = tail.drop("prefix_hash")
    head.write_parquet(folder / "a.parquet")
    tail.write_parquet(folder / "b.parquet")
    return forks.with_columns(
        pl.when(pl.int_range(pl.len()) < half if first_lacks else pl.int_range(pl.len()) >= half)
        .then(None)
        .otherwise(pl.col("prefix_hash"))
        .alias("prefix_hash")
    )


@pytest.mark.parametrize("first_lacks", [True, False])
def test_an_optional_column_in_some_files_is_accepted_by_directory_and_glob(
    cli, tmp_path, first_lacks
) -> None:
    expected = _split_optional(tmp_path / "runs", first_lacks)
    outputs = []
    for source in (tmp_path / "runs", str(tmp_path / "runs" / "*.parquet")):
        got = rl.scan(source).collect()
        assert got.sort(got.columns).equals(expected.sort(expected.columns))
        result = cli("paired", source, *FAST, "--format", "csv")
        assert result.code == 0, result.err
        outputs.append(result.out)
    assert outputs[0] == outputs[1]


def test_a_required_column_missing_from_one_file_names_that_file(cli, tmp_path) -> None:
    forks = _forks()
    (tmp_path / "runs").mkdir()
    forks.head(30).drop("method").write_parquet(tmp_path / "runs" / "a.parquet")
    forks.slice(30).write_parquet(tmp_path / "runs" / "b.parquet")
    for source in (tmp_path / "runs", tmp_path / "runs" / "*.parquet"):
        line = _one_line_error(cli("validate", "forks", source), "validate")
        assert "a.parquet` lacks column `method` (required)" in line


def test_a_text_column_empty_in_one_file_takes_the_type_of_the_others(tmp_path) -> None:
    forks = _forks()
    none_rows = forks.filter(pl.col("delay").is_null())
    (tmp_path / "many").mkdir()
    none_rows.write_csv(tmp_path / "many" / "a.csv")  # `delay` has no value in this file
    forks.filter(pl.col("delay").is_not_null()).write_csv(tmp_path / "many" / "b.csv")
    forks.write_csv(tmp_path / "one.csv")
    many, one = rl.scan(tmp_path / "many").collect(), rl.scan(tmp_path / "one.csv").collect()
    assert many.schema == one.schema
    assert many.schema["delay"] == pl.Int64
    assert many.sort(many.columns).equals(one.sort(one.columns))


def test_columns_that_cannot_combine_name_both_files(tmp_path) -> None:
    pl.DataFrame({"x": [1]}).write_parquet(tmp_path / "a.parquet")
    pl.DataFrame({"x": [[1, 2]]}).write_parquet(tmp_path / "b.parquet")
    with pytest.raises(rl.SourceError, match=r"b\.parquet` has column `x` as List.*a\.parquet`"):
        rl.scan(tmp_path)


# --- empty matches --------------------------------------------------------------------------


def test_a_glob_matching_only_an_empty_directory_is_one_clear_line(cli, tmp_path) -> None:
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    pattern = str(tmp_path / "runs" / "*")
    with pytest.raises(rl.RecoveryLabError, match=r"no file matches `.*runs/\*`; it matches only"):
        rl.scan(pattern)
    line = _one_line_error(cli("paired", pattern, *FAST), "paired")
    assert f"no file matches `{pattern}`" in line


def test_bookkeeping_files_alone_are_an_empty_directory(tmp_path) -> None:
    (tmp_path / "_SUCCESS").touch()
    (tmp_path / "_temporary" / "0").mkdir(parents=True)
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "_temporary" / "0" / "part-0.parquet")
    with pytest.raises(rl.SourceError, match=r"is a directory with no data files\.$"):
        rl.scan(tmp_path)


# --- directory walking ----------------------------------------------------------------------


def test_a_symbolic_link_loop_inside_a_directory_is_named(cli, tmp_path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    _forks().write_parquet(runs / "part-0.parquet")
    os.symlink("loop-b", runs / "loop-a")
    os.symlink("loop-a", runs / "loop-b")
    with pytest.raises(rl.SourceError, match=r"runs/loop-a` is a symbolic link that cannot be"):
        rl.scan(runs)
    line = _one_line_error(cli("paired", runs, *FAST), "paired")
    assert "loop-a` is a symbolic link" in line


def test_a_link_back_to_an_enclosing_directory_is_named(tmp_path) -> None:
    (tmp_path / "runs" / "sub").mkdir(parents=True)
    _forks().write_parquet(tmp_path / "runs" / "part-0.parquet")
    os.symlink("..", tmp_path / "runs" / "sub" / "up")
    with pytest.raises(rl.SourceError, match=r"sub/up` is a symbolic link back to"):
        rl.scan(tmp_path / "runs")


def test_links_to_files_and_directories_elsewhere_are_followed(tmp_path) -> None:
    forks = _forks()
    (tmp_path / "elsewhere").mkdir()
    forks.head(10).write_parquet(tmp_path / "elsewhere" / "a.parquet")
    (tmp_path / "runs").mkdir()
    forks.slice(10).write_parquet(tmp_path / "runs" / "b.parquet")
    os.symlink(tmp_path / "elsewhere", tmp_path / "runs" / "linked")
    assert rl.scan(tmp_path / "runs").collect().height == forks.height


def test_a_fifo_inside_a_directory_is_named(tmp_path) -> None:
    _forks().write_parquet(tmp_path / "part-0.parquet")
    os.mkfifo(tmp_path / "part-1.parquet")
    with pytest.raises(rl.SourceError, match=r"part-1\.parquet` is not a regular file"):
        rl.scan(tmp_path)


def test_a_spark_output_directory_reads_its_part_files_only(tmp_path) -> None:
    forks = _forks()
    out = tmp_path / "spark_out"
    (out / "_temporary" / "0" / "task_1").mkdir(parents=True)
    for i, lo in enumerate(range(0, forks.height, 50)):
        name = f"part-{i:05d}-0ab1.snappy.parquet"
        forks.slice(lo, 50).write_parquet(out / name)
        (out / f".{name}.crc").write_bytes(b"crc")
    (out / "_SUCCESS").touch()
    forks.head(5).write_parquet(out / "_temporary" / "0" / "task_1" / "part-99999.parquet")
    got = rl.scan(out).collect()
    assert got.sort(got.columns).equals(forks.sort(forks.columns))


# --- validate counts rows from the data, not the footer -------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _lying_footer(path: Path, rows: int, claimed: int) -> None:
    """Edit the footer's num_rows (thrift compact: field 3, i64, zigzag varint) to ``claimed``.

    Only FileMetaData.num_rows changes; the row group still says (and holds) ``rows``. The two
    varints have the same length, so the footer's length and every offset stay valid.
    """
    data = bytearray(path.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    real, fake = b"\x16" + _varint(2 * rows), b"\x16" + _varint(2 * claimed)
    assert len(real) == len(fake)
    at = data.find(real, footer)
    assert at > 0
    data[at : at + len(real)] = fake
    path.write_bytes(bytes(data))


def test_validate_counts_the_rows_the_data_holds_when_the_footer_lies(cli, tmp_path) -> None:
    forks = _forks().head(1054)
    path = tmp_path / "forks.parquet"
    pq.write_table(forks.to_arrow(), path)
    _lying_footer(path, 1054, 1000)
    meta = pq.read_metadata(path)
    assert (meta.num_rows, meta.row_group(0).num_rows) == (1000, 1054)
    # The mechanism: a bare row count answers from the footer without decoding anything.
    assert pl.scan_parquet(path).select(pl.len()).collect().item() == 1000
    result = cli("validate", "forks", path)
    assert result.code == 0, result.err
    assert result.out.strip() == "ok: 1,054 rows"
    assert real_rows(rl.scan(path)) == 1054


def test_real_rows_counts_nulls_and_empty_tables() -> None:
    assert real_rows(pl.LazyFrame({"a": [None, 1, None]})) == 3
    assert real_rows(pl.LazyFrame(schema={"a": pl.Int64})) == 0
    assert real_rows(rl.scan(pa.table({"a": pa.chunked_array([[1, 2], [3]])}))) == 3


# --- the rest of the table ------------------------------------------------------------------


def test_hive_is_off_when_asked_and_on_for_globs_when_asked(tmp_path) -> None:
    folder = tmp_path / "seed=7"
    folder.mkdir()
    pl.DataFrame({"a": [1, 2]}).write_parquet(folder / "part.parquet")
    assert rl.scan(tmp_path).collect()["seed"].to_list() == [7, 7]
    assert rl.scan(tmp_path, hive=False).collect_schema().names() == ["a"]
    pattern = str(tmp_path / "*" / "*.parquet")
    assert rl.scan(pattern).collect_schema().names() == ["a"]
    assert rl.scan(pattern, hive=True).collect()["seed"].to_list() == [7, 7]


def test_a_file_named_explicitly_is_read_even_when_its_name_is_hidden(tmp_path) -> None:
    path = tmp_path / "_part.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(path)
    assert rl.scan(path).collect().height == 1
    with pytest.raises(rl.SourceError, match="is a directory with no data files"):
        rl.scan(tmp_path)


def test_an_unknown_suffix_inside_a_directory_names_the_file(tmp_path) -> None:
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "a.parquet")
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(rl.SourceError, match=r"notes\.txt` has an unknown suffix"):
        rl.scan(tmp_path)


def test_ndjson_files_with_different_keys_combine(tmp_path) -> None:
    (tmp_path / "a.ndjson").write_text('{"x": 1, "y": null}\n')
    (tmp_path / "b.ndjson").write_text('{"x": 2, "y": "q", "z": true}\n')
    got = rl.scan(tmp_path).collect().sort("x")
    assert got.schema == pl.Schema({"x": pl.Int64, "y": pl.String, "z": pl.Boolean})
    assert got.rows() == [(1, None, None), (2, "q", True)]


@pytest.mark.parametrize("budget", [0, 10**9])
def test_text_read_now_or_scanned_later_gives_the_same_rows(tmp_path, monkeypatch, budget) -> None:
    # Small text files are parsed at scan time, text beyond the budget is scanned lazily: the
    # rows and types must not depend on which.
    monkeypatch.setattr(rl.io, "EAGER_TEXT_BYTES", budget)
    forks = _forks()
    (tmp_path / "many").mkdir()
    for i, lo in enumerate(range(0, forks.height, 200)):
        forks.slice(lo, 200).write_csv(tmp_path / "many" / f"part-{i}.csv")
    forks.filter(pl.col("delay").is_null()).write_csv(tmp_path / "many" / "none-only.csv")
    got = rl.scan(tmp_path / "many").collect()
    expected = pl.concat([forks, forks.filter(pl.col("delay").is_null())])
    assert got.schema == forks.schema
    assert got.sort(got.columns).equals(expected.sort(expected.columns))


def test_a_repeated_csv_header_name_is_refused_not_renamed(tmp_path) -> None:
    (tmp_path / "a.csv").write_text("x,x\n1,2\n")
    with pytest.raises(rl.SourceError, match=r"a\.csv` line 1: the header names the column `x`"):
        rl.scan(tmp_path)


def test_text_that_is_not_utf8_names_its_file_among_many(tmp_path) -> None:
    for i in range(3):
        (tmp_path / f"ok{i}.csv").write_text(f"task_id,x\nt{i},1\n")
    (tmp_path / "latin1.csv").write_bytes("task_id,x\ncafé,1\n".encode("latin-1"))
    with pytest.raises(rl.SourceError, match=r"latin1\.csv` line 2: not UTF-8 text \(byte 0xe9\)"):
        rl.scan(tmp_path)


def test_a_byte_order_mark_in_every_file_is_not_part_of_a_column_name(tmp_path) -> None:
    for i in range(2):
        (tmp_path / f"{i}.csv").write_bytes(
            b"\xef\xbb\xbftask_id,x\r\n00" + str(i).encode() + b",\r\n"
        )
    got = rl.scan(tmp_path).collect()
    assert got.columns == ["task_id", "x"]
    assert got["task_id"].to_list() == ["000", "001"]


def test_carriage_return_line_endings_are_named_not_run_together(tmp_path) -> None:
    (tmp_path / "a.csv").write_bytes(b"task_id,x\nt1,1\n")
    (tmp_path / "b.csv").write_bytes(b"task_id,x\rt2,2\rt3,3\r")
    with pytest.raises(rl.SourceError, match=r"b\.csv` ends its lines with a carriage return"):
        rl.scan(tmp_path)
