"""Metamorphic layout tests (issue 26): the same rows in any layout give the same output.

The generator in :mod:`tests.layouts` writes the rows of every input table in 200 seeded layouts
(single files, many files of one or mixed formats named as a directory, a glob or a list, hive
datasets by one or two keys, Spark-style output directories, dictionary-encoded columns, an
optional column absent from some files, shuffled rows). Every command (`validate`, `paired`,
`goal`, `takeover`) runs in-process on each layout and must print byte for byte what it prints
for the same tables as one parquet file each; the summary tables are written in a deterministic
order, so stdout is compared as bytes. ``paired --pairs-out`` is a row-level output whose row
order is being made deterministic elsewhere (issue 26, byte-stable writers), so it is compared
with its rows sorted. A genuinely ambiguous layout (a file under a hive directory that
contradicts its own column) must give every command the same one-line error instead. The
in-memory kinds (DataFrame, LazyFrame, chunked and dictionary-encoded Arrow, Arrow dataset,
pandas) go through the Python API and must equal its result on the DataFrame.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import recoverylab as rl
from recoverylab import goal, paired, synth, takeover
from recoverylab.cli import main
from tests import layouts
from tests.conftest import SAMPLES

SEED = 26
N_LAYOUTS = 200
BATCHES = 8
GOAL_TABLES = ("cases", "resources", "episodes", "steps", "citations")
TAKEOVER_TABLES = ("states", "attempts", "failures")
#: Columns a hive layout may partition each table by (no nulls in them).
HIVE_KEYS: dict[str, tuple[str, ...]] = {
    "forks": ("condition", "method"),
    "cases": ("regime",),
    "resources": ("relation",),
    "episodes": ("model",),
    "states": ("depth",),
    "attempts": ("agent", "repeat"),
}
FAST = ("--resamples", "20", "--seed", "3", "--quiet", "--format", "csv")


@functools.cache
def tables() -> dict[str, pl.DataFrame]:
    """The reference rows: small synthetic tables, forks with an optional `note` column."""
    forks = synth.generate("forks", 6, seed=1)["forks"]
    forks = forks.with_columns(
        pl.when(pl.col("condition").is_in(["clean", "stale1"]))
        .then(pl.concat_str(pl.lit("n-"), pl.col("task_id")))
        .alias(layouts.OPTIONAL)
    )
    take = synth.generate("takeover", 2, seed=1)
    attempts = take["attempts"].filter(
        pl.col("repeat") < 2, pl.col("agent").is_in(["agent_a", "agent_b"])
    )
    return {
        "forks": forks,
        **synth.generate("goal", 4, seed=1),
        "states": take["states"],
        "attempts": attempts,
        "failures": take["failures"],
    }


def commands(args: dict[str, list[str]]) -> dict[str, list[str]]:
    """Every command's arguments, given the arguments naming each table."""
    goal_args = [x for t in GOAL_TABLES for x in (f"--{t}", *args[t])]
    takeover_args = [x for t in TAKEOVER_TABLES for x in (f"--{t}", *args[t])]
    return {
        "validate": ["validate", "forks", *args["forks"]],
        "paired": ["paired", *args["forks"], *FAST],
        "goal": ["goal", *goal_args, *FAST],
        "takeover": ["takeover", *takeover_args, "--k", "2", *FAST],
    }


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``recoverylab ARGV`` in-process; return its exit code, stdout and stderr."""
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The tables written as one parquet file each; each command's output on them."""
    folder = tmp_path_factory.mktemp("reference")
    args = {}
    for name, frame in tables().items():
        frame.write_parquet(folder / f"{name}.parquet")
        args[name] = [str(folder / f"{name}.parquet")]
    return {"args": args, "outputs": {}}  # outputs: filled by the first test (needs capsys)


def _reference_outputs(reference: dict[str, object], capsys) -> dict[str, str]:
    outputs = reference["outputs"]
    assert isinstance(outputs, dict)
    if not outputs:
        for command, argv in commands(reference["args"]).items():  # type: ignore[arg-type]
            code, out, err = run(argv, capsys)
            assert code == 0, err
            outputs[command] = out
    return outputs


def _write_all(folder: Path, rng: np.random.Generator) -> tuple[dict[str, list[str]], dict]:
    """Write every table in layouts of one drawn kind; return their arguments and layouts."""
    kind = layouts.draw_kind(rng)
    args: dict[str, list[str]] = {}
    drawn: dict[str, layouts.Written] = {}
    contradicted = {"forks", "cases", "states"} if kind == "contradiction" else set()
    for name, frame in tables().items():
        table_kind = kind
        if kind in ("hive", "contradiction") and not HIVE_KEYS.get(name):
            table_kind = "files"
        elif kind == "contradiction" and name not in contradicted:
            table_kind = "hive"
        written = layouts.write(
            frame, folder / name, rng, kind=table_kind, hive_keys=HIVE_KEYS.get(name, ())
        )
        args[name] = written.args
        drawn[name] = written
    return args, drawn


def _same_rows(name: str, args: list[str]) -> None:
    """The scanned rows equal the reference rows (types as the reference, rows sorted)."""
    expected = tables()[name]
    got = rl.scan(args if len(args) > 1 else args[0]).collect()
    assert sorted(got.columns) == sorted(expected.columns)
    got = got.select(expected.columns).cast(dict(expected.schema))  # type: ignore[arg-type]
    assert_frame_equal(got.sort(expected.columns), expected.sort(expected.columns))


def _check_layout(index: int, tmp_path: Path, reference, capsys) -> None:
    rng = np.random.default_rng([SEED, index])
    expected = _reference_outputs(reference, capsys)
    args, drawn = _write_all(tmp_path / f"layout{index}", rng)
    ambiguous = any(w.ambiguous for w in drawn.values())
    where = f"layout {index}: " + "; ".join(f"{t} {w.layout}" for t, w in drawn.items())
    if ambiguous:
        for command, argv in commands(args).items():
            code, out, err = run(argv, capsys)
            lines = err.strip().splitlines()
            assert (code, out, len(lines)) == (2, "", 1), (where, command, err)
            assert lines[0].startswith(f"recoverylab {command}: error: `"), (where, err)
            assert "where its directory `" in lines[0], (where, err)
            assert "a partition directory and the file's own column must agree" in lines[0]
        return
    _same_rows("forks", args["forks"])  # the table with an optional column (commands: all)
    for command, argv in commands(args).items():
        code, out, err = run(argv, capsys)
        assert code == 0, (where, command, err)
        assert out == expected[command], (where, command)
    if index % 10 == 0:  # a row-level output: same rows (sorted: see the module docstring)
        _check_pairs_out(args["forks"], reference, tmp_path / f"layout{index}", capsys)


def _check_pairs_out(forks: list[str], reference, folder: Path, capsys) -> None:
    outputs = []
    for given, name in ((forks, "layout"), (reference["args"]["forks"], "reference")):
        target = folder / f"{name}_pairs.parquet"
        code, _, err = run(["paired", *given, *FAST, "--pairs-out", str(target)], capsys)
        assert code == 0, err
        outputs.append(pl.read_parquet(target))
    got, expected = outputs
    got = got.select(expected.columns)
    key = [c for c, d in expected.schema.items() if not d.is_nested()]
    assert_frame_equal(got.sort(key, nulls_last=True), expected.sort(key, nulls_last=True))


@pytest.mark.parametrize("batch", range(BATCHES))
def test_every_command_gives_the_reference_output_in_every_layout(
    batch: int, tmp_path: Path, reference, capsys
) -> None:
    for index in range(batch, N_LAYOUTS, BATCHES):
        _check_layout(index, tmp_path, reference, capsys)


def test_the_generator_draws_every_kind_of_layout(tmp_path: Path) -> None:
    """The 200 layouts cover what the generator promises (so the suite tests what it claims)."""
    seen: dict[str, set[object]] = {"kind": set(), "naming": set(), "formats": set()}
    hive_depths, mixed, dictionary, dropped = set(), 0, 0, 0
    for index in range(N_LAYOUTS):
        rng = np.random.default_rng([SEED, index])
        kind = layouts.draw_kind(rng)
        seen["kind"].add(kind)
        if index % 8:  # writing every table of every layout twice would double the time
            continue
        _, drawn = _write_all(tmp_path / f"l{index}", rng)
        for written in drawn.values():
            seen["naming"].add(written.layout.naming)
            seen["formats"].update(written.layout.formats)
            hive_depths.add(len(written.layout.hive_keys))
            mixed += len(written.layout.formats) > 1
            dictionary += written.layout.dictionary
            dropped += written.layout.dropped_optional
    assert seen["kind"] == set(layouts.KINDS)
    assert seen["naming"] == {"file", "directory", "glob", "list"}
    assert seen["formats"] == set(layouts.FORMATS)
    assert hive_depths == {0, 1, 2}
    assert min(mixed, dictionary, dropped) > 0


# --- in-memory kinds (Python API) -----------------------------------------------------------

API: dict[str, Callable[[Callable[[str], object]], pl.DataFrame]] = {
    "validate": lambda t: rl.validate(t("forks"), "forks").collect().sort("task_id", "condition"),
    "paired": lambda t: paired.summarize(t("forks"), n_resamples=20, seed=3),
    "goal": lambda t: goal.summarize(goal.score(*(t(n) for n in GOAL_TABLES)), n_resamples=20),
    "takeover": lambda t: takeover.summarize(t("states"), t("attempts"), k=2, n_resamples=20),
}


@pytest.mark.parametrize("kind", layouts.MEMORY)
def test_in_memory_kinds_give_the_dataframe_result(kind: str) -> None:
    rng = np.random.default_rng([SEED, layouts.MEMORY.index(kind)])
    for name, verb in API.items():
        expected = verb(lambda table: tables()[table])
        got = verb(lambda table: layouts.in_memory(tables()[table], kind, rng))
        if name == "validate":  # row-level: compare as a set of rows
            got = got.sort(got.columns, nulls_last=True)
            expected = expected.sort(expected.columns, nulls_last=True)
        assert_frame_equal(got, expected, check_dtypes=True)


# --- hostile text inputs: nested keys, deep values, cut streams (issue 39) ---------------------


def _hostile(frame: pl.DataFrame, path: Path, kind: str) -> str:
    """Write ``frame`` as NDJSON made hostile in one row; return what the error must say."""
    rows = frame.write_ndjson().splitlines()
    key = frame.columns[0]  # every table's first column is (part of) its key
    if kind == "object_key":
        rows[1] = rows[1].replace(f'"{key}":', f'"{key}":{{"id":', 1).replace(",", "},", 1)
        path.write_text("\n".join(rows) + "\n")
        return f"`{path}` line 2: column `{key}` holds a JSON object or array where"
    if kind == "deep":
        rows[0] = rows[0][:-1] + ',"trace":' + "[" * 100_000 + "]" * 100_000 + "}"
        path.write_text("\n".join(rows) + "\n")
        return f"`{path}` line 1: JSON values nested more than 100 levels deep"
    import gzip

    data = gzip.compress(("\n".join(rows) + "\n").encode())
    path.write_bytes(data[: len(data) // 2])  # a cut gzip stream
    return f"`{path}` is not a readable gzip file ("


def _all_commands(args: dict[str, list[str]]) -> dict[str, list[str]]:
    """The layout commands and the other verbs reading forks (through the same resolver)."""
    return {
        **commands(args),
        "contrast": ["contrast", *args["forks"], "--a", "stale1", "--b", "clean", *FAST],
        "monitor": ["monitor", *args["forks"], "--quiet", "--format", "csv"],
        "policy": ["policy", "--decisions", *args["decisions"], "--forks", *args["forks"], *FAST],
        "gate": ["gate", str(SAMPLES / "paired" / "gate_policy.toml"), *args["forks"], "--quiet"],
        "plan": ["plan", *args["forks"], "--quiet"],
        "router": [
            "router",
            "fit",
            "--decision-points",
            str(SAMPLES / "router" / "train" / "decision_points.parquet"),
            "--forks",
            *args["forks"],
            "--features",
            "repetition,noops",
            "--out",
            str(Path(args["forks"][0]).parent / "rule.json"),
            "--quiet",
        ],
    }


def _decisions(folder: Path) -> list[str]:
    """A decision table for ``policy``: every forks episode, recovering at delay 1."""
    path = folder / "decisions.parquet"
    episodes = tables()["forks"].select("task_id", "condition").unique()
    episodes.with_columns(pl.lit(1, dtype=pl.Int64).alias("delay")).write_parquet(path)
    return [str(path)]


@pytest.mark.parametrize("kind", ["object_key", "deep", "cut_gzip"])
@pytest.mark.parametrize(
    "command",
    [
        "validate",
        "paired",
        "goal",
        "takeover",
        "contrast",
        "monitor",
        "policy",
        "gate",
        "plan",
        "router",
    ],
)
def test_every_command_refuses_a_hostile_text_table_in_one_line(
    command: str, kind: str, tmp_path: Path, reference, capsys
) -> None:
    args = {**reference["args"], "decisions": _decisions(tmp_path)}
    argv = _all_commands(args)[command]
    table = next(t for t in tables() if args[t][0] in argv)  # the command's first table
    suffix = ".ndjson.gz" if kind == "cut_gzip" else ".ndjson"
    path = tmp_path / f"{table}{suffix}"
    message = _hostile(tables()[table], path, kind)
    args[table] = [str(path)]
    code, out, err = run(_all_commands(args)[command], capsys)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1, err
    assert err.startswith(f"recoverylab {command}: error: {message}"), err


@pytest.mark.parametrize("codec", ["gz", "zst", "bz2"])
def test_paired_on_compressed_ndjson_gives_the_cells_of_the_plain_file(
    codec: str, tmp_path: Path, capsys
) -> None:
    """The acceptance check: ``recoverylab paired logs.ndjson.gz`` = the uncompressed file."""
    import bz2
    import gzip

    import zstandard

    plain = tmp_path / "logs.ndjson"
    tables()["forks"].write_ndjson(plain)
    packers = {"gz": gzip.compress, "bz2": bz2.compress}
    packers["zst"] = zstandard.ZstdCompressor().compress
    packed = tmp_path / f"logs.ndjson.{codec}"
    packed.write_bytes(packers[codec](plain.read_bytes()))
    cells = {}
    for name, path in (("plain", plain), ("packed", packed)):
        target = tmp_path / f"{name}.parquet"
        code, _, err = run(["paired", str(path), *FAST, "--out", str(target)], capsys)
        assert code == 0, err
        cells[name] = pl.read_parquet(target)
    assert_frame_equal(cells["packed"], cells["plain"])
