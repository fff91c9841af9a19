"""Mutation fuzzer for ``import table`` (issue 39, point 5; see ``tests/fuzz_support.py``).

The genuine-shaped logs are a made-up harness's, in each shape
:func:`recoverylab.synth.custom_logs.write_custom_logs` writes (nested JSON lines, flat CSV,
JSON array shards, parquet with a struct), read back with each shape's own mapping. Rows and
files are mutated: keys replaced by objects or arrays or new text, outcomes and keys deleted,
rows duplicated, NaN, integers beyond 64 bits, huge and deeply nested values added, encodings
changed, files truncated, compressed and copied. Each mutation states its effect, and the run
must agree. Errors found after mapping (a null or duplicate key of the contract) name the table,
the column, the keys and the log (``import table`` names the log whose rows fail on their own,
or the logs holding a repeated key); a mapping expression that fails on the rows' types (text
compared with a number) names the log when there is one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

from recoverylab.adapters import table
from recoverylab.synth.custom_logs import SHAPES, write_custom_logs
from tests import fuzz_support as fz

#: Per JSON shape: its key fields (dotted), its outcome field, and how an excluded row looks.
JSON_SHAPES = {
    "jsonl_nested": (("run.task", "run.cond", "run.arm"), "reward", ("status", "sandbox_error")),
    "json_array": (("id", "obs", "recovery"), "outcome", ("outcome", "crashed")),
}


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, fz.Outcome]]:
    root = tmp_path_factory.mktemp("table")
    bases = {}
    for shape in SHAPES:
        write_custom_logs(root / shape, shape, tasks=2)
        bases[shape] = fz.run_python(lambda s=shape: _read(root / s, s), "forks")
        assert bases[shape].error is None
        assert (bases[shape].rows, bases[shape].excluded) == (9, {"infrastructure": 3})
    return root, bases


def _read(folder: Path, shape: str) -> Any:
    return table.read(folder, to="forks", **SHAPES[shape])


def _set(row: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        row = row[part]
    row[last] = value


def _pop(row: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        row = row[part]
    row.pop(last, None)


def _mutate_row(
    data: st.DataObject, row: dict[str, Any], rows: list[dict[str, Any]], shape: str, file: Path
) -> tuple[fz.Expect, int]:
    """Change one JSON row (or add one); return the effect and a depth for ``fz.DEEP``."""
    keys, outcome, (flag, flagged) = JSON_SHAPES[shape]
    dropped = row.get(flag) == flagged  # an excluded row: the contract never sees it
    kind = data.draw(
        st.sampled_from(
            [
                *("key_nested", "key_text", "delete_outcome", "delete_key", "duplicate"),
                *("nan", "bigint", "deep", "huge"),
            ]
        ),
        label="row mutation",
    )
    if kind == "key_nested":
        _set(row, data.draw(st.sampled_from(keys)), data.draw(st.sampled_from([{"id": 1}, ["a"]])))
        return fz.error(file), 0
    if kind == "key_text":  # a key nobody else has: one more task, the same rows
        _set(row, keys[0], f"new-{len(rows)}-{id(row)}")
        return fz.SAME, 0
    if kind == "delete_outcome":
        if shape == "json_array" and dropped:  # the outcome is what excluded it: now a null
            row.pop(outcome)
            return fz.error(file), 0
        row.pop(outcome)
        return (fz.SAME if dropped else fz.error(file)), 0
    if kind == "delete_key":
        _pop(row, data.draw(st.sampled_from(keys)))
        return (fz.SAME if dropped else fz.error(file)), 0
    if kind == "duplicate":
        rows.append(json.loads(json.dumps(row)))
        return (fz.excluded("infrastructure", rows=0) if dropped else fz.error(file)), 0
    if kind == "nan":
        row["score_extra"] = data.draw(st.sampled_from([float("nan"), float("inf"), -float("inf")]))
        return fz.error(file), 0
    if kind == "bigint":
        row["big"] = data.draw(st.sampled_from([2**63, -(2**63) - 1, 10**40]))
        return fz.error(file), 0
    if kind == "deep":
        row["trace"] = fz.DEEP
        return fz.SAME, data.draw(st.sampled_from([1, 40, 97, 98, 99, 100, 130, 5_000, 100_000]))
    row["log"] = "x" * data.draw(st.sampled_from([10, 10**6]))
    return fz.SAME, 0


def _mutate_json(data: st.DataObject, folder: Path, shape: str) -> fz.Expect:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    file = data.draw(st.sampled_from(files))
    if shape == "jsonl_nested":
        rows = [json.loads(line) for line in file.read_text("utf-8").splitlines()]
    else:
        rows = json.loads(file.read_text("utf-8"))
    target = data.draw(st.integers(0, len(rows) - 1))
    expect, depth = _mutate_row(data, rows[target], rows, shape, file)
    if shape == "jsonl_nested":  # the row, then the nested value: depth + 1 levels
        lines = [fz.dump(r, depth if i == target else 0) for i, r in enumerate(rows)]
        fz.write(file, b"\n".join(lines) + b"\n")
        levels = depth + 1
    else:  # the array, the item, then the value
        fz.write(file, fz.dump(rows, depth))
        levels = depth + 2
    if depth and levels > 100:
        return fz.error(file)
    return expect


def _mutate_csv(data: st.DataObject, folder: Path) -> fz.Expect:
    file = folder / "runs.csv"
    lines = file.read_text("utf-8").splitlines()
    index = data.draw(st.integers(1, len(lines) - 1))
    fields = lines[index].split(",")
    kind = data.draw(st.sampled_from(["ragged", "key_text", "score_text", "quote"]))
    if kind == "ragged":  # one field too many or too few
        fields = fields[:-1] if data.draw(st.booleans()) else [*fields, "x"]
        expect = fz.error(file)
    elif kind == "key_text":  # what looks like JSON in a CSV field is text: a new task id
        fields[0] = '"{""id"": 1}"' if index == 1 else f"new{index}"
        expect = fz.SAME
    elif kind == "score_text":
        fields[4] = "abc"
        expect = fz.error(file)  # the score column is text now: mapping `score >= 1` fails
    else:  # an unclosed quote
        fields[1] = '"' + fields[1]
        expect = fz.error(file)
    lines[index] = ",".join(fields)
    fz.write(file, ("\n".join(lines) + "\n").encode())
    return expect


def _mutate_file(data: st.DataObject, folder: Path, shape: str) -> fz.Expect:
    """A whole-file mutation: encoding, truncation, compression, a copy."""
    file = data.draw(st.sampled_from(sorted(p for p in folder.iterdir() if p.is_file())))
    binary = shape == "parquet_struct"
    kind = data.draw(st.sampled_from(["truncate", "compress", "cut", "copy", "encoding"]))
    if kind == "truncate":
        text = file.read_bytes()
        cuts = [i for i in range(len(text) - 1) if text[i - 1 : i] != b"\n"]
        fz.write(file, text[: data.draw(st.sampled_from(cuts))])
        return fz.error(file)
    if kind == "copy":  # every row twice: duplicate keys, named with the logs they came from
        shutil.copy(file, file.with_name(f"copy-{file.name}"))
        return fz.error(file)
    if kind == "encoding" and not binary:
        encoding = data.draw(st.sampled_from(fz.ENCODINGS))
        raw = file.read_text("utf-8")
        if encoding == "latin-1":  # a character that is not ASCII, so not UTF-8 in latin-1
            raw = (
                raw.replace("none", "non\u00e8", 1)
                if shape == "csv_flat"
                else raw.replace("{", '{"note_\u00e9": 1, ', 1)
            )
        fz.write(file, raw.encode(encoding))
        return fz.SAME if encoding == "utf-8-sig" else fz.error(file)
    if kind == "encoding":
        return fz.SAME
    packed = fz.compress(file, data.draw(st.sampled_from(fz.CODECS)))
    if binary:  # parquet is never wrapped
        return fz.error(packed)
    if kind == "cut":
        fz.write(packed, packed.read_bytes()[: data.draw(st.integers(0, 20))])
        return fz.error(packed)
    return fz.SAME


def _case(data: st.DataObject, root: Path) -> tuple[str, fz.Expect]:
    shape = data.draw(st.sampled_from(sorted(SHAPES)), label="shape")
    folder = root / shape
    if data.draw(st.booleans(), label="whole file") or shape == "parquet_struct":
        return shape, _mutate_file(data, folder, shape)
    if shape == "csv_flat":
        return shape, _mutate_csv(data, folder)
    return shape, _mutate_json(data, folder, shape)


@pytest.mark.slow  # 500 cases: 10-60 s on a loaded 2-core machine (CI runs slow tests)
@fz.MUTATIONS
@given(data=st.data())
def test_every_mutation_of_a_run_log_is_counted_excluded_or_one_line(
    genuine: tuple[Path, dict[str, fz.Outcome]], data: st.DataObject
) -> None:
    source, bases = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "logs")
        shape, expect = _case(data, root)
        got = fz.run_python(lambda: _read(root / shape, shape), "forks")
        fz.check(bases[shape], expect, got, f"table {shape}")


@fz.COMMAND_LINE
@given(data=st.data())
def test_the_command_line_gives_exit_0_or_one_line_and_exit_2(
    genuine: tuple[Path, dict[str, fz.Outcome]],
    data: st.DataObject,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, _ = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "logs")
        shape, expect = _case(data, root)
        out = Path(folder) / "out"
        maps = [a for n, e in SHAPES[shape]["mapping"].items() for a in ("--map", f"{n}={e}")]
        drop = [a for n, e in SHAPES[shape]["exclude"].items() for a in ("--exclude", f"{n}={e}")]
        argv = ["import", "table", str(root / shape), "--to", "forks", *maps, *drop]
        code, err = fz.run_cli([*argv, "--out", str(out)], capsys)
        fz.check_cli(expect, code, err, out, "forks")
