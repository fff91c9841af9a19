"""The Spark engine reads every source by the resolver's rules (ARCHITECTURE §1.7, one way in).

Spark's own readers used to take paths directly: CSV schema inference turned the task ids
``007`` and ``7`` into one integer 7 (two tasks silently merged), partition discovery typed
``key=value`` directories its own way and found them below globs the resolver reads without hive
columns, and a ``part-0.crc`` file was read as data. The generator of :mod:`tests.layouts`
writes the same rows in seeded layouts (single files, many files of one or mixed formats named as
a directory, a glob or a list, hive datasets, Spark output directories with their bookkeeping,
dictionary-encoded columns, an optional column absent from some files); every one must reach
Spark holding exactly what :func:`recoverylab.io.scan` reads, or raise the same one-line error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import recoverylab as rl
from recoverylab import EngineError, SourceError, paired, synth
from recoverylab._diagnose import diagnose, engine_errors
from recoverylab.engines import _spark_sources as spark_sources
from recoverylab.engines._spark_sources import as_spark
from tests import layouts

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

SEED = 2812
N_LAYOUTS = 36
#: Ids that text readers inferring types would merge: all distinct as strings.
LOOKALIKE_IDS = ["007", "7", "07", "0", "00", "1e3", "1000", "-0", "+5", "5"]


def lookalike_table() -> pl.DataFrame:
    """A table whose string keys look like numbers, with a hive-able label and a float."""
    n = len(LOOKALIKE_IDS)
    return pl.DataFrame(
        {
            "task_id": LOOKALIKE_IDS * 3,
            "condition": ["clean", "stale1", "stale2"] * n,
            "score": [i / 7 for i in range(3 * n)],
            "seed": [i % 4 for i in range(3 * n)],
        }
    )


def spark_rows(spark: object, source: object) -> pl.DataFrame:
    """What Spark holds for ``source``, as a polars frame."""
    return pl.from_arrow(as_spark(spark, source).toArrow())  # type: ignore[return-value]


def assert_same_table(got: pl.DataFrame, expected: pl.DataFrame, where: str) -> None:
    """Same column names in the same order, same values (Spark has no categoricals)."""
    assert got.columns == expected.columns, where
    expected = expected.with_columns(pl.col(pl.Categorical).cast(pl.String))
    got = got.cast(dict(expected.schema), strict=True)  # type: ignore[arg-type]
    key = expected.columns
    assert_frame_equal(got.sort(key, nulls_last=True), expected.sort(key, nulls_last=True))


def test_every_layout_reaches_spark_as_the_resolver_reads_it(spark, tmp_path) -> None:
    forks = synth.generate("forks", 3, seed=5)["forks"].with_columns(
        pl.when(pl.col("condition") == "clean")
        .then(pl.concat_str(pl.lit("n-"), pl.col("task_id")))
        .alias(layouts.OPTIONAL)
    )
    tables = {
        "forks": (forks, ("condition", "method")),
        "ids": (lookalike_table(), ("condition", "seed")),
    }
    direct = ambiguous = 0
    for index in range(N_LAYOUTS):
        rng = np.random.default_rng([SEED, index])
        name = "ids" if index % 2 else "forks"
        frame, keys = tables[name]
        written = layouts.write(
            frame,
            tmp_path / f"l{index}",
            rng,
            kind=layouts.draw_kind(rng),
            hive_keys=keys,
            text=index % 3 == 0,  # more binary-only layouts: more that Spark reads itself
        )
        where = f"layout {index} ({name}): {written.layout}"
        source = written.args if len(written.args) > 1 else written.args[0]
        if written.ambiguous:
            with pytest.raises(SourceError) as polars_error:
                rl.scan(source)
            with pytest.raises(SourceError) as spark_error:
                as_spark(spark, source)
            assert str(spark_error.value) == str(polars_error.value), where
            ambiguous += 1
            continue
        read = as_spark(spark, source)
        direct += bool(read.inputFiles())  # read by Spark itself (not shipped from the driver)
        got = pl.from_arrow(read.toArrow())
        assert_same_table(got, rl.scan(source).collect(), where)  # type: ignore[arg-type]
    assert 0 < direct < N_LAYOUTS - ambiguous  # both roads are taken


def test_lookalike_ids_stay_distinct_in_csv_and_ndjson(spark, tmp_path) -> None:
    frame = lookalike_table()
    for suffix, write in ((".csv", frame.write_csv), (".ndjson", frame.write_ndjson)):
        path = tmp_path / f"ids{suffix}"
        write(path)
        got = spark_rows(spark, str(path))
        assert got.schema["task_id"] == pl.String
        assert got["task_id"].n_unique() == len(LOOKALIKE_IDS), suffix
        assert_same_table(got, rl.scan(str(path)).collect(), suffix)


def test_hive_values_are_typed_by_the_resolver_not_by_spark(spark, tmp_path) -> None:
    # task_id is contract text (stays a string); seed is inferred (floats, for "1.5")
    for task, seed in (("007", "1"), ("7", "2"), ("07", "1.5")):
        directory = tmp_path / "data" / f"task_id={task}" / f"seed={seed}"
        directory.mkdir(parents=True)
        pl.DataFrame({"x": [1, 2]}).write_parquet(directory / "part-0.parquet")
    source = str(tmp_path / "data")
    expected = rl.scan(source).collect()
    assert expected.schema["task_id"] == pl.String
    assert expected.schema["seed"] == pl.Float64
    got = spark_rows(spark, source)
    assert sorted(got["task_id"].unique()) == ["007", "07", "7"]
    assert_same_table(got, expected, "hive")
    # the files are read by Spark itself, not shipped from the driver
    assert len(as_spark(spark, source).inputFiles()) == 3


def test_a_glob_below_hive_directories_adds_no_partition_column(spark, tmp_path) -> None:
    for value in ("1", "2"):
        directory = tmp_path / f"run={value}"
        directory.mkdir()
        pl.DataFrame({"x": [int(value)]}).write_parquet(directory / "part.parquet")
    source = str(tmp_path / "run=*" / "*.parquet")
    expected = rl.scan(source).collect()
    assert expected.columns == ["x"]
    assert_same_table(spark_rows(spark, source), expected, "glob")


def test_bookkeeping_files_spark_would_read_are_skipped(spark, tmp_path) -> None:
    directory = tmp_path / "out"
    directory.mkdir()
    pl.DataFrame({"x": [1, 2]}).write_parquet(directory / "part-0.parquet")
    (directory / "part-0.crc").write_bytes(b"crc\x00\x01")  # no leading dot: Spark reads it
    assert_same_table(spark_rows(spark, str(directory)), rl.scan(str(directory)).collect(), "crc")


def test_files_of_different_schemas_are_unified_as_the_resolver_does(spark, tmp_path) -> None:
    pl.DataFrame({"x": [1], "y": ["a"]}).write_parquet(tmp_path / "a.parquet")
    pl.DataFrame({"x": pl.Series([2], dtype=pl.Int32)}).write_parquet(tmp_path / "b.parquet")
    expected = rl.scan(str(tmp_path)).collect()
    assert expected.height == 2
    assert expected.columns == ["x", "y"]
    assert_same_table(spark_rows(spark, str(tmp_path)), expected, "unified")


def test_paired_on_spark_keeps_lookalike_tasks_apart(spark, tmp_path) -> None:
    forks = synth.generate("forks", 4, seed=3)["forks"]
    names = dict(zip(sorted(forks["task_id"].unique()), ["007", "7", "07", "0007"], strict=True))
    forks = forks.with_columns(pl.col("task_id").replace_strict(names))
    path = tmp_path / "forks.csv"
    forks.write_csv(path)
    options = {"n_resamples": 50, "seed": 1}
    expected = paired.summarize(str(path), **options)
    got = paired.summarize(str(path), engine=spark, **options)
    assert_frame_equal(got, expected)
    assert expected["n"].max() == 4  # four tasks, not one


def test_a_part_file_rewritten_beside_a_stale_checksum_is_still_read(spark, tmp_path) -> None:
    # Hadoop's local file system verifies `.name.crc`; the resolver skips it as bookkeeping
    directory = tmp_path / "out"
    directory.mkdir()
    part = directory / "part-00000.parquet"
    pl.DataFrame({"x": [1, 2, 3]}).write_parquet(part)
    (directory / ".part-00000.parquet.crc").write_bytes(b"crc\x00\x00\x00\x02\x00" + bytes(8))
    expected = rl.scan(str(directory)).collect()
    read = as_spark(spark, str(directory))
    assert read.inputFiles() == []  # shipped: Spark is not asked to verify the checksum
    assert_same_table(pl.from_arrow(read.toArrow()), expected, "stale checksum")  # type: ignore[arg-type]


def _damaged_parquet(path: Path) -> None:
    """Write forks as parquet whose footer is sound but whose data pages are not."""
    forks = synth.generate("forks", 40, seed=3)["forks"]
    forks.write_parquet(path, compression="uncompressed", statistics=False)
    data = bytearray(path.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 200] = bytes(b ^ 0xFF for b in data[middle : middle + 200])
    path.write_bytes(bytes(data))


def test_a_spark_job_failing_on_a_damaged_file_raises_the_polars_engines_error(
    spark, tmp_path
) -> None:
    path = tmp_path / "forks.parquet"
    _damaged_parquet(path)
    with pytest.raises(SourceError) as on_polars:
        paired.summarize(str(path), n_resamples=20)
    with pytest.raises(SourceError) as on_spark:  # was py4j's Py4JJavaError
        paired.summarize(str(path), n_resamples=20, engine=spark)
    assert str(on_spark.value) == str(on_polars.value)
    assert "is a damaged parquet file" in str(on_spark.value)


def test_a_java_error_is_told_by_its_root_cause() -> None:
    py4j = pytest.importorskip("py4j.protocol")
    assert py4j.Py4JJavaError in engine_errors()
    text = (
        "An error occurred while calling o139.getResult.\n"
        ": org.apache.spark.SparkException: Job aborted\n\tat org.apache.spark.X(X.scala:1)\n"
        "Caused by: org.apache.spark.SparkException: stage failed\n\t... 4 more\n"
        "Caused by: java.io.IOException: disk quota exceeded\n\t... 43 more\n"
    )
    error = diagnose([], RuntimeError(text))
    assert isinstance(error, EngineError)
    cause = "java.io.IOException: disk quota exceeded"
    assert str(error) == f"the query failed: {cause} (RuntimeError)."


def test_beyond_max_directories_the_table_is_shipped_the_same(spark, tmp_path, monkeypatch) -> None:
    for value in ("a", "b", "c"):
        directory = tmp_path / "data" / f"label={value}"
        directory.mkdir(parents=True)
        pl.DataFrame({"x": [1, 2]}).write_parquet(directory / "part-0.parquet")
    source = str(tmp_path / "data")
    expected = rl.scan(source).collect()
    assert len(as_spark(spark, source).inputFiles()) == 3  # read by Spark, one read per directory
    monkeypatch.setattr(spark_sources, "MAX_DIRECTORIES", 2)
    shipped = as_spark(spark, source)
    assert shipped.inputFiles() == []  # from the driver
    assert_same_table(pl.from_arrow(shipped.toArrow()), expected, "shipped")  # type: ignore[arg-type]


# --- paths given by URI (hdfs://, s3a://...: only Spark reaches them; file:// stands in here) ---


def test_a_csv_by_uri_keeps_lookalike_ids_as_text(spark, tmp_path) -> None:
    path = tmp_path / "ids.csv"
    lookalike_table().write_csv(path)
    got = spark_rows(spark, path.as_uri())
    assert got.schema["task_id"] == pl.String
    assert got["task_id"].n_unique() == len(LOOKALIKE_IDS)
    assert got.schema["score"] == pl.Float64  # other columns keep Spark's inferred types
    assert_same_table(got, rl.scan(str(path)).collect(), "csv by uri")


def test_a_hive_directory_by_uri_keeps_a_text_key_as_text(spark, tmp_path) -> None:
    for task in ("007", "7"):
        directory = tmp_path / "data" / f"task_id={task}"
        directory.mkdir(parents=True)
        pl.DataFrame({"x": [1]}).write_parquet(directory / "part-0.parquet")
    got = spark_rows(spark, (tmp_path / "data").as_uri())
    assert sorted(got["task_id"]) == ["007", "7"]
    assert_same_table(got, rl.scan(str(tmp_path / "data")).collect(), "hive by uri")


def test_paired_on_spark_by_uri_equals_polars_on_the_local_path(spark, tmp_path) -> None:
    forks = synth.generate("forks", 4, seed=3)["forks"]
    names = dict(zip(sorted(forks["task_id"].unique()), ["007", "7", "07", "0007"], strict=True))
    path = tmp_path / "forks.csv"
    forks.with_columns(pl.col("task_id").replace_strict(names)).write_csv(path)
    options = {"n_resamples": 50, "seed": 1}
    expected = paired.summarize(str(path), **options)
    assert_frame_equal(paired.summarize(path.as_uri(), engine=spark, **options), expected)


@pytest.mark.parametrize(
    ("names", "found"),
    [(["a.arrow"], "ipc"), (["a.csv", "b.parquet"], "csv, parquet")],
)
def test_uris_spark_cannot_read_as_one_table_are_refused(spark, tmp_path, names, found) -> None:
    uris = [(tmp_path / name).as_uri() for name in names]
    with pytest.raises(SourceError, match=rf"one format at a time \(found: {found}\)"):
        as_spark(spark, uris if len(uris) > 1 else uris[0])


def test_a_missing_uri_is_our_error(spark, tmp_path) -> None:
    with pytest.raises(SourceError, match="Spark cannot read it"):
        as_spark(spark, (tmp_path / "nothing.parquet").as_uri())
