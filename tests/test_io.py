"""Scanning every source form lazily, clear errors for bad files, atomic writes."""

from __future__ import annotations

import itertools
import os
import stat
import time

import hypothesis.strategies as st
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings

from recoverylab import ParameterError, SourceError, scan, write_parquet

DF = pl.DataFrame(
    {
        "task_id": ["t1", "t2", "t3", "t4"],
        "delay": [None, 0, 1, 2],
        "success": [True, False, None, True],
    }
)


def same_rows(lazy: pl.LazyFrame, expected: pl.DataFrame = DF) -> bool:
    got = lazy.collect().select(expected.columns).sort("task_id")
    return got.equals(expected.sort("task_id"))


@pytest.mark.parametrize(
    ("suffix", "writer"),
    [
        (".parquet", lambda df, p: df.write_parquet(p)),
        (".pq", lambda df, p: df.write_parquet(p)),
        (".arrow", lambda df, p: df.write_ipc(p)),
        (".feather", lambda df, p: df.write_ipc(p)),
        (".csv", lambda df, p: df.write_csv(p)),
        (".ndjson", lambda df, p: df.write_ndjson(p)),
        (".jsonl", lambda df, p: df.write_ndjson(p)),
    ],
)
def test_scan_each_file_format(tmp_path, suffix, writer) -> None:
    path = tmp_path / f"forks{suffix}"
    writer(DF, path)
    lazy = scan(path)
    assert isinstance(lazy, pl.LazyFrame)
    assert same_rows(lazy)
    assert same_rows(scan(str(path)))


def test_scan_tsv(tmp_path) -> None:
    path = tmp_path / "forks.tsv"
    DF.write_csv(path, separator="\t")
    assert same_rows(scan(path))


def test_scan_glob_list_and_directory(tmp_path) -> None:
    for i in range(4):
        DF[i : i + 1].write_parquet(tmp_path / f"part-{i}.parquet")
    assert same_rows(scan(str(tmp_path / "*.parquet")))
    assert same_rows(scan([tmp_path / "part-0.parquet", str(tmp_path / "part-[123].parquet")]))
    assert same_rows(scan(tmp_path))


def test_scan_hive_partitioned_dataset(tmp_path) -> None:
    DF.with_columns(condition=pl.Series(["clean", "clean", "stale", "stale"])).write_parquet(
        tmp_path, partition_by="condition"
    )
    out = scan(tmp_path).collect().sort("task_id")
    assert out["condition"].to_list() == ["clean", "clean", "stale", "stale"]
    assert out["task_id"].to_list() == ["t1", "t2", "t3", "t4"]


def test_files_with_different_integer_widths_are_aligned(tmp_path) -> None:
    DF[:2].write_parquet(tmp_path / "a.parquet")
    DF[2:].with_columns(pl.col("delay").cast(pl.Int32)).write_parquet(tmp_path / "b.parquet")
    out = scan(str(tmp_path / "*.parquet")).collect()
    assert out.schema["delay"] == pl.Int64
    assert out.height == 4


def test_files_of_different_formats_combine(tmp_path) -> None:
    DF[:2].write_parquet(tmp_path / "a.parquet")
    DF[2:].write_ipc(tmp_path / "b.arrow")
    assert same_rows(scan([tmp_path / "a.parquet", tmp_path / "b.arrow"]))


def test_in_memory_sources() -> None:
    assert same_rows(scan(DF))
    assert same_rows(scan(DF.lazy()))
    table = DF.to_arrow()
    assert same_rows(scan(table))
    assert same_rows(scan(ds.dataset(table)))
    batch = pa.RecordBatch.from_pandas(DF.to_pandas())
    assert same_rows(scan(batch))
    pandas_frame = pd.DataFrame(
        {"task_id": ["t1", "t2"], "delay": [np.nan, 0.0], "success": [True, False]}
    )
    assert scan(pandas_frame).collect().height == 2


def test_scan_does_not_read_data(tmp_path) -> None:
    path = tmp_path / "x.parquet"
    DF.write_parquet(path)
    lazy = scan(path)
    path.unlink()  # nothing was read yet beyond the footer, so scanning succeeded
    with pytest.raises((pl.exceptions.PolarsError, OSError)):
        lazy.collect()


def test_missing_path_and_empty_glob(tmp_path) -> None:
    with pytest.raises(SourceError, match=r"^`.*nope\.parquet` does not exist\.$"):
        scan(tmp_path / "nope.parquet")
    with pytest.raises(SourceError, match=r"^no file matches `.*\*\.parquet`\.$"):
        scan(str(tmp_path / "*.parquet"))


def test_empty_file(tmp_path) -> None:
    path = tmp_path / "forks.parquet"
    path.touch()
    with pytest.raises(
        SourceError, match=r"forks\.parquet` is empty \(0 bytes\); it holds no table"
    ):
        scan(path)


def test_empty_directory(tmp_path) -> None:
    with pytest.raises(SourceError, match=r"is a directory with no data files"):
        scan(tmp_path)


def test_corrupt_parquet(tmp_path) -> None:
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"this is not parquet at all")
    with pytest.raises(
        SourceError, match=r"garbage\.parquet` is not a readable parquet file \(its header or"
    ):
        scan(garbage)
    good = tmp_path / "good.parquet"
    DF.write_parquet(good)
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good.read_bytes()[:-20] + b"PAR1")
    with pytest.raises(SourceError, match=r"truncated\.parquet` is not a readable parquet file"):
        scan(truncated)


def test_corrupt_file_inside_a_directory(tmp_path) -> None:
    DF.write_parquet(tmp_path / "a.parquet")
    (tmp_path / "b.parquet").write_bytes(b"PAR1 broken PAR1")
    with pytest.raises(SourceError, match=r"b\.parquet` is not a readable parquet file"):
        scan(tmp_path)


def test_corrupt_ipc(tmp_path) -> None:
    path = tmp_path / "forks.arrow"
    path.write_bytes(b"ARROW1 nothing useful")
    with pytest.raises(SourceError, match=r"forks\.arrow` is not a readable Arrow IPC file"):
        scan(path)


def test_unknown_suffix_and_explicit_format(tmp_path) -> None:
    path = tmp_path / "forks.data"
    DF.write_parquet(path)
    with pytest.raises(SourceError, match=r"unknown suffix '\.data'.*Hint: name the format"):
        scan(path)
    assert same_rows(scan(path, format="parquet"))
    with pytest.raises(ParameterError, match=r"parameter `format` is 'xls'"):
        scan(path, format="xls")


def test_unreadable_object() -> None:
    with pytest.raises(SourceError, match=r"cannot read a table from a int"):
        scan(42)


def test_write_parquet_eager_and_lazy(tmp_path) -> None:
    write_parquet(DF, tmp_path / "sub" / "a.parquet")
    write_parquet(DF.lazy(), tmp_path / "b.parquet")
    assert pl.read_parquet(tmp_path / "sub" / "a.parquet").equals(DF)
    assert pl.read_parquet(tmp_path / "b.parquet").equals(DF)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.parquet", "sub"]


def test_failed_write_leaves_nothing_and_keeps_existing_file(tmp_path) -> None:
    failing = pl.LazyFrame({"a": ["x"]}).select(pl.col("a").cast(pl.Int64))
    target = tmp_path / "out.parquet"
    with pytest.raises(pl.exceptions.PolarsError):
        write_parquet(failing, target)
    assert list(tmp_path.iterdir()) == []
    DF.write_parquet(target)
    before = target.read_bytes()
    with pytest.raises(pl.exceptions.PolarsError):
        write_parquet(failing, target)
    assert target.read_bytes() == before
    assert list(tmp_path.iterdir()) == [target]


def test_failed_streaming_writes_never_leave_a_temporary_file_behind(tmp_path) -> None:
    # polars' streaming sink used to open its output path after the failed query had raised, so
    # the cleaned-up temporary file reappeared in about a third of these runs.
    failing = pl.LazyFrame({"a": ["x"]}).select(pl.col("a").cast(pl.Int64))
    for attempt in range(60):
        with pytest.raises(pl.exceptions.PolarsError):
            write_parquet(failing, tmp_path / f"out{attempt}.parquet")
    time.sleep(0.2)
    assert list(tmp_path.iterdir()) == []


def test_written_file_has_the_usual_permissions_not_the_private_temporary_ones(tmp_path) -> None:
    umask = os.umask(0o022)
    try:
        written = write_parquet(DF, tmp_path / "out.parquet")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(written.stat().st_mode) == 0o644


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(min_value=1, max_value=40),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=5),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_file_split_and_row_order_do_not_matter(tmp_path_factory, n, cuts, seed) -> None:
    rng = np.random.default_rng(seed)
    df = pl.DataFrame(
        {
            "task_id": [f"t{i}" for i in range(n)],
            "delay": rng.integers(0, 5, n),
            "success": rng.random(n) < 0.5,
        }
    )
    shuffled = df[rng.permutation(n)]
    bounds = sorted({0, n, *(c % (n + 1) for c in cuts)})
    folder = tmp_path_factory.mktemp("split")
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        if hi > lo:
            shuffled[lo:hi].write_parquet(folder / f"part-{i}.parquet")
    assert scan(folder).collect().sort("task_id").equals(df.sort("task_id"))


def test_empty_list_of_paths_is_named_as_such() -> None:
    with pytest.raises(SourceError, match=r"empty list of paths"):
        scan([])


# --- compressed text, nested keys, hostile JSON (issue 39) ---------------------------------

FORKS = pl.DataFrame(
    {
        "task_id": ["007", "007", "t2", "t2"],
        "condition": ["clean"] * 4,
        "method": ["none", "refresh"] * 2,
        "delay": [None, 1, None, 1],
        "success": [False, True, True, True],
    }
)


def _compress(data: bytes, codec: str) -> bytes:
    import bz2
    import gzip

    import zstandard

    if codec == "gz":
        return gzip.compress(data)
    if codec == "bz2":
        return bz2.compress(data)
    return zstandard.ZstdCompressor().compress(data)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fmt=st.sampled_from(["csv", "tsv", "ndjson", "jsonl", "json"]),
    codec=st.sampled_from(["gz", "zst", "bz2"]),
    rows=st.integers(1, 4),
    members=st.integers(1, 3),
)
def test_a_compressed_text_file_reads_like_the_plain_file(tmp_path, fmt, codec, rows, members):
    """Every text format under every codec, in one or several concatenated streams."""
    frame = FORKS.head(rows)
    folder = tmp_path / f"{fmt}-{codec}-{rows}-{members}"
    folder.mkdir()
    plain = folder / f"forks.{fmt}"
    if fmt in ("csv", "tsv"):
        frame.write_csv(plain, separator="\t" if fmt == "tsv" else ",")
    else:
        frame.write_ndjson(plain)
    data = plain.read_bytes()
    cut = [data] if members == 1 or fmt in ("csv", "tsv") else data.splitlines(keepends=True)
    packed = folder / f"forks.{fmt}.{codec}"
    packed.write_bytes(b"".join(_compress(part, codec) for part in cut))
    assert scan(packed).collect().equals(scan(plain).collect())
    assert scan(packed).collect()["task_id"][0] == "007"  # text keys stay text


@pytest.mark.parametrize("codec", ["gz", "zst", "bz2"])
def test_a_cut_or_mislabelled_compressed_file_is_one_line_naming_it(tmp_path, codec):
    data = FORKS.write_csv().encode()
    cut = tmp_path / f"forks.csv.{codec}"
    cut.write_bytes(_compress(data, codec)[:-6])
    with pytest.raises(SourceError) as caught:
        scan(cut).collect()
    name = {"gz": "gzip", "zst": "zstd", "bz2": "bz2"}[codec]
    assert str(caught.value).startswith(f"`{cut}` is not a readable {name} file (")
    assert str(caught.value).endswith("; it may be cut off or damaged.")
    plain = tmp_path / f"plain.csv.{codec}"
    plain.write_bytes(data)  # named compressed, holds plain text: never a CSV diagnosis
    with pytest.raises(SourceError, match=rf"^`{plain}` is not a readable {name} file \("):
        scan(plain)
    empty = tmp_path / f"empty.ndjson.{codec}"
    empty.write_bytes(_compress(b"", codec))
    with pytest.raises(SourceError, match=rf"^`{empty}` is empty once decompressed; it holds"):
        scan(empty)


def test_compressed_file_errors_keep_their_line_numbers(tmp_path):
    ragged = tmp_path / "forks.csv.gz"
    ragged.write_bytes(_compress(b"task_id,success\nt1,true\nt2,true,extra\n", "gz"))
    with pytest.raises(SourceError, match=r"`.*forks.csv.gz` line 3: a row has 3 fields where"):
        scan(ragged)


def test_a_gzip_stream_without_the_suffix_is_read_as_what_it_holds(tmp_path):
    hidden = tmp_path / "forks.csv"
    hidden.write_bytes(_compress(FORKS.write_csv().encode(), "gz"))
    assert scan(hidden).collect().equals(FORKS.with_columns(pl.col("delay")))


def test_parquet_is_never_wrapped(tmp_path):
    packed = tmp_path / "forks.parquet.gz"
    packed.write_bytes(_compress(b"PAR1", "gz"))
    with pytest.raises(SourceError, match=r"is a gzip-compressed parquet file; recoverylab reads"):
        scan(packed)


def test_compressed_files_in_a_hive_dataset_keep_their_directory_values(tmp_path):
    for cond in ("clean", "stale"):
        folder = tmp_path / f"condition={cond}"
        folder.mkdir()
        data = FORKS.drop("condition").write_ndjson().encode()
        (folder / "part.ndjson.zst").write_bytes(_compress(data, "zst"))
    got = scan(tmp_path).collect()
    assert sorted(got["condition"].unique()) == ["clean", "stale"]
    assert got.height == 2 * FORKS.height


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            ['{"task_id": "t1", "success": true}', '{"task_id": {"id": "m001"}, "success": true}'],
            "line 2: column `task_id` holds a JSON object or array where a key or label (text) "
            "belongs",
        ),
        (
            ['{"task_id": ["t1"], "success": true}'],
            "line 1: column `task_id` holds a JSON object or array where a key or label",
        ),
        (
            ['{"task_id": "t1", "seed": 1}', '{"task_id": "t2", "seed": {"v": 1}}'],
            "line 2: column `seed` holds a JSON object or array where line 1 holds a scalar",
        ),
        (
            ['{"task_id": "t1", "x": ' + "[" * 5000 + "]" * 5000 + "}"],
            "line 1: JSON values nested more than 100 levels deep",
        ),
        (
            ['{"task_id": "t1", "x": ' + "[" * 101 + "]" * 101 + "}"],
            "line 1: JSON values nested more than 100 levels deep",
        ),
    ],
)
def test_a_nested_key_or_deep_ndjson_line_names_file_column_and_line(tmp_path, rows, message):
    path = tmp_path / "forks.ndjson.gz"
    path.write_bytes(_compress(("\n".join(rows) + "\n").encode(), "gz"))
    with pytest.raises(SourceError) as caught:
        scan(path)
    assert str(caught.value).startswith(f"`{path}` {message}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"task_id": "t1", "reward": NaN}\n', "line 1: `NaN` is not a JSON number"),
        (b'{"task_id": "t1", "n": 100000000000000000000000}\n', "line 1: column `n` holds the "),
        ('{"task_id": "t1"}\n'.encode("utf-16"), "is UTF-16 text; recoverylab reads text tables"),
        (
            b'{"task_id": "t1", "run": {"task": "a"}}\n{"task_id": "t2", "run": {"task": {}}}\n',
            "line 2: column `run.task` holds a JSON object or array where line 1 holds a scalar",
        ),
    ],
)
def test_ndjson_values_polars_cannot_read_are_named_with_their_line(tmp_path, data, message):
    path = tmp_path / "runs.ndjson"
    path.write_bytes(data)
    with pytest.raises(SourceError) as caught:
        scan(path)
    assert str(caught.value).startswith(f"`{path}` {message}")


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_row(tmp_path):
    for suffix, text in (("ndjson", FORKS.write_ndjson()), ("csv", FORKS.write_csv())):
        path = tmp_path / f"forks.{suffix}"
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert scan(path).collect().equals(FORKS), suffix
