"""Byte-stable outputs: the same result gives the same file bytes, however it was computed.

Issue 26: two identical runs of ``paired --pairs-out`` wrote the same rows in different orders.
Every writer now sorts rows by all columns, left to right (``recoverylab._order``). Each command
below writes every output it has, and each file must be byte-identical across two runs, across
``POLARS_MAX_THREADS=1`` and the default (a subprocess: polars fixes its pool at import), across
shuffled input rows and across the same rows split into three files. The inputs always sit at the
same paths (a directory per table), so nothing but their layout changes.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoverylab._order import stable_order
from recoverylab.cli import main
from tests.conftest import REPO, SAMPLES

GOAL = SAMPLES / "goal" / "synthetic"
TAKEOVER = SAMPLES / "takeover"
ROUTER = SAMPLES / "router"
FEATURES = "repetition,noops,obs_novelty,consistency"


def _forks() -> pl.DataFrame:
    """Sample forks with some `none` rows dropped, so the exclusions table has rows too."""
    forks = pl.read_parquet(SAMPLES / "paired" / "main_forks.parquet")
    return forks.filter(~((pl.col("method") == "none") & pl.col("task_id").str.ends_with("7")))


#: name -> (input tables, command line with {in}/{out} placeholders).
CASES: dict[str, tuple[dict[str, pl.DataFrame], list[str]]] = {}


def _cases() -> dict[str, tuple[dict[str, pl.DataFrame], list[str]]]:
    if CASES:
        return CASES
    CASES["paired"] = (
        {"forks": _forks()},
        ["paired", "{in}/forks", "--by", "model", "--resamples", "200", "--out",
         "{out}/cells.parquet", "--pairs-out", "{out}/pairs.parquet", "--exclusions-out",
         "{out}/exclusions.csv"],
    )  # fmt: skip
    CASES["overlap"] = (
        {"forks": pl.read_parquet(SAMPLES / "paired" / "mechanism_forks.parquet")},
        ["paired", "{in}/forks", "--resamples", "200", "--out", "{out}/cells.parquet",
         "--overlap", "refresh,replan_only", "--overlap-out", "{out}/overlap.parquet",
         "--pairs-out", "{out}/pairs.arrow"],
    )  # fmt: skip
    CASES["goal"] = (
        {t: pl.read_parquet(GOAL / t) for t in ("cases", "resources", "episodes", "steps",
                                                 "citations")},
        ["goal", "--cases", "{in}/cases", "--resources", "{in}/resources", "--episodes",
         "{in}/episodes", "--steps", "{in}/steps", "--citations", "{in}/citations",
         "--resamples", "200", "--out", "{out}/summary.parquet", "--episodes-out",
         "{out}/episodes.parquet", "--drop-out", "{out}/drop.ndjson"],
    )  # fmt: skip
    CASES["takeover"] = (
        {t: pl.read_parquet(TAKEOVER / f"{t}.parquet") for t in ("states", "attempts",
                                                                 "failures", "mutations")},
        ["takeover", "--states", "{in}/states", "--attempts", "{in}/attempts", "--failures",
         "{in}/failures", "--mutations", "{in}/mutations", "--resamples", "200", "--out-dir",
         "{out}/takeover"],
    )  # fmt: skip
    CASES["router"] = (
        {"points": pl.read_parquet(ROUTER / "test" / "decision_points.parquet"),
         "forks": pl.read_parquet(ROUTER / "test" / "forks.parquet")},
        ["router", "evaluate", "--rule", "{rule}", "--decision-points", "{in}/points",
         "--forks", "{in}/forks", "--out", "{out}/evaluation.parquet", "--uplift-out",
         "{out}/uplift.parquet", "--toc-out", "{out}/toc.parquet", "--resamples", "100"],
    )  # fmt: skip
    return CASES


def _lay_out(tables: dict[str, pl.DataFrame], root: Path, layout: str) -> None:
    """Write each table as ``root/<name>/``: one file, one shuffled file, or three files."""
    for name, frame in tables.items():
        directory = root / name
        for old in directory.glob("*.parquet"):
            old.unlink()
        directory.mkdir(parents=True, exist_ok=True)
        rows = frame.sample(fraction=1.0, shuffle=True, seed=7) if layout != "one" else frame
        parts = 3 if layout == "split" else 1
        size = -(-rows.height // parts)
        for index in range(parts):
            rows.slice(index * size, size).write_parquet(directory / f"part-{index}.parquet")


def _argv(template: list[str], inputs: Path, out: Path, rule: Path) -> list[str]:
    return [a.format(**{"in": inputs, "out": out, "rule": rule}) for a in template]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def rule(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rule") / "rule.json"
    assert main(["--quiet", "router", "fit", "--decision-points",
                 str(ROUTER / "train" / "decision_points.parquet"), "--forks",
                 str(ROUTER / "train" / "forks.parquet"), "--features", FEATURES,
                 "--out", str(path)]) == 0  # fmt: skip
    return path


def test_every_output_is_byte_identical_across_runs_threads_orders_and_splits(
    tmp_path: Path, rule: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = _cases()
    inputs = {name: tmp_path / "in" / name for name in cases}
    outputs: dict[str, dict[str, dict[str, bytes]]] = {name: {} for name in cases}

    def run_in_process(variant: str) -> None:
        for name, (_, template) in cases.items():
            out = tmp_path / variant / name
            assert main(["--quiet", *_argv(template, inputs[name], out, rule)]) == 0, name
            outputs[name][variant] = _files(out)
        capsys.readouterr()

    for name, (tables, _) in cases.items():
        _lay_out(tables, inputs[name], "one")
    run_in_process("first")
    run_in_process("second")
    # the same inputs with polars on one thread, in one subprocess for every command
    script = "import sys; from recoverylab.cli import main\n" + "".join(
        f"assert main({['--quiet', *_argv(t, inputs[n], tmp_path / 'one-thread' / n, rule)]!r})"
        f" == 0, {n!r}\n"
        for n, (_, t) in cases.items()
    )
    env = {**os.environ, "POLARS_MAX_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    for name in cases:
        outputs[name]["one-thread"] = _files(tmp_path / "one-thread" / name)
    for layout in ("shuffled", "split"):
        for name, (tables, _) in cases.items():
            _lay_out(tables, inputs[name], layout)
        run_in_process(layout)

    for name, by_variant in outputs.items():
        reference = by_variant["first"]
        assert len(reference) >= 3, (name, sorted(reference))  # every output was written
        for variant, files in by_variant.items():
            assert sorted(files) == sorted(reference), (name, variant)
            changed = [f for f in reference if files[f] != reference[f]]
            assert not changed, f"{name}: {changed} differ in bytes ({variant} vs first)"
    pairs = pl.read_parquet(tmp_path / "first" / "paired" / "pairs.parquet")
    assert pairs.height > 0
    assert pl.read_csv(tmp_path / "first" / "paired" / "exclusions.csv").height > 0


@pytest.mark.parametrize("lazy", [False, True])
def test_stable_order_sorts_every_column_left_to_right_with_nulls_last(lazy: bool) -> None:
    frame = pl.DataFrame(
        {
            "condition": pl.Series(
                ["stale", None, "clean", "clean", "stale"], dtype=pl.Categorical
            ),
            "delay": [1, 2, None, 1, 1],
            "scores": [[2.0], [1.0], [0.5], [1.0, 2.0], [1.5]],
        }
    )
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=3)
    result = stable_order(shuffled.lazy() if lazy else shuffled)
    result = result.collect() if isinstance(result, pl.LazyFrame) else result
    assert result["condition"].to_list() == ["clean", "clean", "stale", "stale", None]
    assert result["delay"].to_list() == [1, None, 1, 1, 2]
    assert result["scores"].to_list() == [[1.0, 2.0], [0.5], [1.5], [2.0], [1.0]]
    assert stable_order(pl.DataFrame()).collect_schema() == pl.Schema()


#: Writes a lazy table of several row groups, flat or with a list column, from three layouts of
#: its rows, and prints the md5 of each file (run here and with polars on one thread).
_MANY_ROWS_SCRIPT = """
import hashlib, io, sys
import polars as pl
from recoverylab.io import write_to
n = 300_000
frame = pl.DataFrame({"k": [f"e{i:07d}" for i in range(n)], "v": list(range(n))})
if sys.argv[1] == "nested":
    frame = frame.with_columns(pl.col("v").map_elements(
        lambda i: ["r%d" % (i % 7)] * (i % 3), return_dtype=pl.List(pl.String)).alias("l"))
for seed in (0, 1, 2):
    rows = frame.sample(fraction=1.0, shuffle=True, seed=seed)
    rows = pl.concat([rows.slice(0, 1000 * (seed + 1)), rows.slice(1000 * (seed + 1))],
                     rechunk=False)
    out = io.BytesIO()
    write_to(rows.lazy(), out, "parquet")
    print(hashlib.md5(out.getvalue()).hexdigest())
"""


@pytest.mark.parametrize("kind", ["flat", "nested"])
def test_a_streamed_parquet_of_many_row_groups_does_not_follow_the_thread_count(kind) -> None:
    # without fixed row groups (and one chunk for nested columns) the bytes changed with
    # POLARS_MAX_THREADS at a few hundred thousand rows, the contents being equal
    digests = set()
    for threads in ({}, {"POLARS_MAX_THREADS": "1"}):
        env = {**os.environ, "PYTHONPATH": str(REPO), **threads}
        done = subprocess.run(
            [sys.executable, "-c", _MANY_ROWS_SCRIPT, kind],
            env=env,
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        digests |= set(done.stdout.decode().split())
    assert len(digests) == 1, digests


@given(
    ids=st.lists(st.integers(0, 10**6), min_size=0, max_size=60, unique=True),
    seed=st.integers(0, 10_000),
    lazy=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_a_unique_leading_key_alone_gives_the_order_of_every_column(ids, seed, lazy) -> None:
    rng = random.Random(seed)
    frame = pl.DataFrame(
        {
            "episode_id": [f"e{i}" for i in ids],
            "n": [rng.choice([None, 1, 2]) for _ in ids],
            "unsupported": [[rng.choice("xy")] * rng.randrange(3) for _ in ids],
        },
        schema={"episode_id": pl.String, "n": pl.Int64, "unsupported": pl.List(pl.String)},
    )
    source = frame.lazy() if lazy else frame

    def ordered(**key: tuple[str, ...]) -> pl.DataFrame:
        out = stable_order(source, **key)
        return out.collect() if isinstance(out, pl.LazyFrame) else out

    assert ordered(unique_key=("episode_id",)).equals(ordered())
    # a key that does not lead the table is not trusted: every column orders the rows
    by_n = frame.with_columns(pl.col("n").fill_null(0)).select("n", "episode_id", "unsupported")
    trusted = stable_order(by_n, unique_key=("episode_id",))
    assert trusted.equals(stable_order(by_n))
