"""Mutation fuzzer for the inspect_ai adapter (issue 39, point 5; see ``tests/fuzz_support.py``).

The genuine logs are made by inspect_ai itself (its mock model, through
:func:`recoverylab.synth.inspect_logs.write_inspect_logs`, JSON format so that their fields can
be edited) and read through inspect_ai's own reader. Samples and logs are mutated: samples
dropped, duplicated, errored, their scores voided or retyped, ids and epochs retyped, metadata
made huge or deeply nested, task arguments replaced by objects or removed, files truncated,
re-encoded, compressed and copied. Each mutation states its effect, and the run must agree.
"""

from __future__ import annotations

import gc
import json
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

pytest.importorskip("inspect_ai")

from recoverylab.adapters import inspect as ri
from recoverylab.synth.inspect_logs import layout_mapping, write_inspect_logs
from tests import fuzz_support as fz
from tests.test_adapters_inspect import no_network

# inspect_ai leaves anyio memory streams for the garbage collector while it runs an eval (its
# own ResourceWarning, not ours); the fixture collects them at once, under this filter.
pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
MAPPING = layout_mapping("task_args")
#: Any error of ours in one line, naming no particular file (a check across logs).
ONE_LINE = fz.Expect("error")


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fz.Outcome]:
    """Two logs (the ``none`` arm and one recovery arm) of two samples, one epoch."""
    root = tmp_path_factory.mktemp("inspect") / "logs"
    with no_network(root.parent / "default-logs"):
        write_inspect_logs(
            root, samples=2, epochs=1, conditions=("clean",), delays=(1,), log_format="json"
        )
        gc.collect()
    base = fz.run_python(lambda: ri.forks(root, **MAPPING), "forks")
    assert base.error is None
    assert (base.rows, base.excluded) == (4, {})
    return root, base


def _mutate_sample(
    data: st.DataObject, sample: dict[str, Any], log: dict[str, Any], file: Path
) -> tuple[fz.Expect, int]:
    kind = data.draw(
        st.sampled_from(
            [
                *("drop", "scores_none", "score_value", "error", "id_nested", "id_new"),
                *("epoch_text", "metadata", "deep", "duplicate"),
            ]
        ),
        label="sample mutation",
    )
    if kind == "drop":  # a sample that never ran leaves no row
        log["samples"].remove(sample)
        return fz.Expect("delta", rows=-1), 0
    if kind == "scores_none":
        sample["scores"] = None
        return fz.excluded("missing_score"), 0
    if kind == "score_value":
        value = data.draw(st.sampled_from(["C", "I", float("nan"), "abc"]))
        sample["scores"]["recovered"]["value"] = value
        return (fz.SAME if value in ("C", "I") else fz.excluded("invalid_score")), 0
    if kind == "error":
        sample["error"] = {"message": "boom", "traceback": "t", "traceback_ansi": "t"}
        return fz.excluded("error"), 0
    if kind == "id_nested":
        sample["id"] = data.draw(st.sampled_from([[1], {"id": 1}]))
        return fz.error(file), 0
    if kind == "id_new":  # a sample id no other sample has: one more task
        sample["id"] = 70 + log["samples"].index(sample)
        return fz.SAME, 0
    if kind == "epoch_text":
        sample["epoch"] = data.draw(st.sampled_from(["x", [1], None]))
        return fz.error(file), 0
    if kind == "metadata":
        sample["metadata"] = {
            "x": data.draw(st.sampled_from(["y" * 10**6, 10**40, float("nan"), -float("inf")]))
        }
        return fz.SAME, 0
    if kind == "deep":
        sample["metadata"] = {"x": fz.DEEP}
        return fz.SAME, data.draw(st.sampled_from([1, 50, 300, 5_000, 100_000]))
    log["samples"].append(json.loads(json.dumps(sample)))  # the same sample-epoch twice
    return ONE_LINE, 0


def _mutate_log(data: st.DataObject, file: Path) -> fz.Expect:
    log = json.loads(file.read_text("utf-8"))
    kind = data.draw(
        st.sampled_from(["samples", "samples", "task_arg", "file", "compress", "copy"]),
        label="log mutation",
    )
    depth, expect = 0, fz.SAME
    if kind == "samples":
        chosen = data.draw(
            st.lists(st.sampled_from(log["samples"]), min_size=1, max_size=2, unique_by=id)
        )
        for sample in chosen:
            if sample not in log["samples"]:
                continue
            effect, deep = _mutate_sample(data, sample, log, file)
            depth = max(depth, deep)
            expect = expect + effect
        if depth >= 5_000:  # inspect's JSON reader has a recursion limit: one line
            expect = fz.error(file)
        elif depth > 50:  # near its limit (about 200 levels): read, or refused in one line
            expect = fz.Expect("either", expect.rows, expect.excluded, (file,))
    elif kind == "task_arg":
        name = data.draw(st.sampled_from(["condition", "method", "delay"]))
        value = data.draw(st.sampled_from([{"a": 1}, ["x"], "absent"]))
        if value == "absent":
            log["eval"]["task_args"].pop(name)
        else:
            log["eval"]["task_args"][name] = value
        expect = fz.error(file)
    elif kind == "file":
        encoding = data.draw(st.sampled_from([*fz.ENCODINGS, "truncate"]))
        if encoding == "truncate":
            text = file.read_bytes()
            fz.write(file, text[: data.draw(st.integers(0, len(text) - 2))])
        else:
            fz.write(file, fz.dump(log, 0, encoding))
        return fz.error(file)
    elif kind == "compress":
        packed = fz.compress(file, data.draw(st.sampled_from(fz.CODECS)))
        if data.draw(st.booleans(), label="cut the compressed stream"):
            fz.write(packed, packed.read_bytes()[: data.draw(st.integers(0, 20))])
            return fz.error(packed)
        return fz.SAME
    else:  # the log saved twice under inspect's naming: one supersedes the other
        twin = file.with_name(file.name.replace(".json", "-copy.json"))
        fz.write(twin, file.read_bytes())
        return fz.excluded("superseded_log", rows=0)
    fz.write(file, fz.dump(log, depth))
    return expect


def _any_scored_sample(root: Path) -> bool:
    """Whether a log under ``root`` still holds a scored sample.

    A file this cannot parse (compressed or broken) counts as scored: it keeps the expectation
    its own mutation gave.
    """
    for path in root.iterdir():
        try:
            log = json.loads(path.read_text("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return True
        if any(sample.get("scores") for sample in log.get("samples") or []):
            return True
    return False


def _case(data: st.DataObject, root: Path) -> fz.Expect:
    logs = sorted(root.glob("*.json"))
    chosen = data.draw(st.lists(st.sampled_from(logs), min_size=1, max_size=2, unique=True))
    expect = fz.SAME
    for file in chosen:
        expect = expect + _mutate_log(data, file)
    if expect.kind != "error" and not _any_scored_sample(root):
        return fz.Expect("error")  # every sample dropped or unscored: nothing to import
    return expect


@pytest.mark.slow  # 500 cases: 10-60 s on a loaded 2-core machine (CI runs slow tests)
@fz.MUTATIONS
@given(data=st.data())
def test_every_mutation_of_inspect_logs_is_counted_excluded_or_one_line(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject
) -> None:
    source, base = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "logs")
        expect = _case(data, root)
        got = fz.run_python(lambda: ri.forks(root, **MAPPING), "forks")
        fz.check(base, expect, got, "inspect")


@fz.COMMAND_LINE
@given(data=st.data())
def test_the_command_line_gives_exit_0_or_one_line_and_exit_2(
    genuine: tuple[Path, fz.Outcome], data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    source, _ = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "logs")
        expect = _case(data, root)
        out = Path(folder) / "out"
        arms = [a for k, v in MAPPING.items() for a in (f"--{k}", v)]
        argv = ["import", "inspect", str(root), "--to", "forks", *arms, "--out", str(out)]
        code, err = fz.run_cli(argv, capsys)
        fz.check_cli(expect, code, err, out, "forks")


def test_logs_without_a_scored_sample_are_one_line_naming_them(genuine) -> None:
    """Every sample dropped: no scorer to choose (it used to ask for one among 0 scorers)."""
    source, _ = genuine
    with tempfile.TemporaryDirectory() as folder:
        root = fz.copy_tree(source, Path(folder) / "logs")
        for file in sorted(root.glob("*.json")):
            log = json.loads(file.read_text("utf-8"))
            log["samples"] = []
            file.write_text(json.dumps(log), "utf-8")
        got = fz.run_python(lambda: ri.forks(root, **MAPPING), "forks")
    assert got.error is not None
    assert got.error.startswith("inspect logs `"), got.error
    assert got.error.endswith(" hold no scored sample; nothing to import."), got.error


def test_a_log_nested_100000_levels_is_refused_before_inspect_reads_it(
    genuine: tuple[Path, fz.Outcome], tmp_path: Path
) -> None:
    """inspect_ai's reader took about 10 GB on such a file before failing (a CI worker was
    killed for memory): the depth is counted first, and the refusal names the file."""
    from recoverylab._errors import SourceError
    from recoverylab.adapters._inspect_read import MAX_LOG_DEPTH

    root = tmp_path / "logs"  # its own logs: the shared ones are other tests' to copy
    with no_network(tmp_path / "default-logs"):
        write_inspect_logs(
            root, samples=2, epochs=1, conditions=("clean",), delays=(1,), log_format="json"
        )
        gc.collect()
    file = sorted(root.rglob("*.json"))[0]
    log = json.loads(file.read_text("utf-8"))
    log["samples"][0]["metadata"] = {"x": fz.DEEP, "text": "[" * 5_000}  # brackets in a string
    fz.write(file, fz.dump(log, 100_000))
    with pytest.raises(SourceError, match=f"nested more than {MAX_LOG_DEPTH} levels") as caught:
        ri.forks(root, **MAPPING)
    assert str(file) in str(caught.value)
    fz.write(file, fz.dump(log, 3))  # shallow, with the same bracketed text: read as before
    assert ri.forks(root, **MAPPING).tables["forks"].height == genuine[1].rows
