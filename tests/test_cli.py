"""The command line: `validate` on every table and failure kind, error handling, `synth`."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

from recoverylab import SPECS
from recoverylab.schema import spec
from tests.test_schema import LABELLED, VALID, WRONG_TYPE, first_non_nullable, frame


def broken_frames(table: str) -> dict[str, pl.DataFrame]:
    """One frame per failure kind that applies to ``table``."""
    column, values, _ = WRONG_TYPE[table]
    n = len(VALID[table][column])
    null_column = first_non_nullable(table).name
    nulls = list(VALID[table][null_column])
    nulls[-1] = None
    cases = {
        "missing column": frame(table).drop(spec(table).required[-1]),
        "wrong dtype": frame(table, **{column: (values * n)[:n]}),
        "null": frame(table, **{null_column: nulls}),
        "duplicate key": pl.concat([frame(table), frame(table).head(1)]),
    }
    if not spec(table).allow_empty:
        cases["empty"] = frame(table).clear()
    for labelled_table, labelled in LABELLED:
        if labelled_table == table:
            cases[f"label {labelled}"] = frame(table, **{labelled: ["bogus"]})
    return cases


@pytest.mark.parametrize("table", sorted(SPECS))
def test_validate_ok(cli, tmp_path, table) -> None:
    path = tmp_path / f"{table}.parquet"
    frame(table).write_parquet(path)
    result = cli("validate", table, path)
    assert result.code == 0
    height = frame(table).height
    assert result.out == f"ok: {height} row{'s' if height != 1 else ''}\n"


@pytest.mark.parametrize("table", sorted(SPECS))
def test_validate_prints_one_line_and_exits_2(cli, tmp_path, table) -> None:
    for kind, broken in broken_frames(table).items():
        path = tmp_path / f"{kind.replace(' ', '_')}.parquet"
        broken.write_parquet(path)
        result = cli("validate", table, path)
        assert result.code == 2, kind
        assert result.out == "", kind
        lines = result.err.splitlines()
        assert len(lines) == 1, (kind, result.err)
        assert lines[0].startswith(f"recoverylab validate: error: {table}: "), lines[0]


@pytest.mark.parametrize("table", sorted(SPECS))
def test_validate_corrupt_parquet(cli, tmp_path, table) -> None:
    path = tmp_path / f"{table}.parquet"
    path.write_bytes(b"PAR1 not really a parquet file PAR1")
    result = cli("validate", table, path)
    assert result.code == 2
    assert result.err.startswith(
        f"recoverylab validate: error: `{path}` is not a readable parquet file ("
    )
    assert result.err.count("\n") == 1


def test_validate_reads_globs_and_csv(cli, tmp_path) -> None:
    frame("forks").write_csv(tmp_path / "a.csv")
    frame("forks").with_columns(condition=pl.lit("clean")).write_csv(tmp_path / "b.csv")
    result = cli("validate", "forks", tmp_path / "*.csv")
    assert (result.code, result.out) == (0, "ok: 4 rows\n")


def test_validate_with_extra_key(cli, tmp_path) -> None:
    path = tmp_path / "f.parquet"
    pl.concat([frame("forks"), frame("forks")]).with_columns(
        seed=pl.Series([0, 0, 1, 1])
    ).write_parquet(path)
    assert cli("validate", "forks", path).code == 2
    assert cli("validate", "forks", path, "--key", "seed").code == 0


def test_debug_shows_the_traceback(cli, tmp_path) -> None:
    from recoverylab import SourceError

    with pytest.raises(SourceError):
        cli("validate", "forks", tmp_path / "missing.parquet", "--debug")


def test_unknown_table_is_a_usage_error(cli) -> None:
    result = cli("validate", "nosuch", "x.parquet")
    assert result.code == 2
    assert "invalid choice: 'nosuch'" in result.err


def test_entry_point_runs_as_a_program(tmp_path) -> None:
    path = tmp_path / "m.parquet"
    frame("mutations").write_parquet(path)
    done = subprocess.run(
        [sys.executable, "-m", "recoverylab", "validate", "mutations", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "ok: 1 row\n")
    bad = subprocess.run(
        [sys.executable, "-m", "recoverylab", "validate", "mutations", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "Traceback" not in bad.stderr


def test_synth_unknown_generator(cli, tmp_path) -> None:
    result = cli("synth", "nosuch", "--out", tmp_path)
    assert result.code == 2
    assert result.err.startswith("recoverylab synth: error: unknown synthetic table 'nosuch'")


def test_rerunning_with_the_same_out_replaces_the_result(cli, tmp_path) -> None:
    from tests.conftest import SAMPLES

    forks = SAMPLES / "paired" / "main_forks.parquet"
    out = tmp_path / "summary.parquet"
    first = cli("paired", forks, "--resamples", 200, "--out", out, "--quiet")
    assert first.code == 0, first.err
    before = pl.read_parquet(out)
    second = cli("paired", forks, "--resamples", 200, "--out", out, "--quiet")
    assert second.code == 0, second.err
    assert pl.read_parquet(out).equals(before)


def test_out_may_not_overwrite_an_input(cli, tmp_path) -> None:
    forks = tmp_path / "forks.parquet"
    frame("forks").write_parquet(forks)
    before = forks.read_bytes()
    result = cli("paired", forks, "--out", forks, "--quiet")
    assert result.code == 2
    assert "which is also an input; choose another path" in result.err
    assert forks.read_bytes() == before
