"""Path templates (``import table --files``): generated trees compared with a plain reference.

A seeded generator writes the same scores as per-run directory trees: the bound segments in any
order (and inside literal text), each score as a number file, a JSON object, one object keyed by
ids (``--unnest-keys``), JSON lines or CSV, sometimes compressed, with extra files beside them
that the template must not match (and the read report must list). The reference is written from
the drawn scores alone, without the reader: the rows, and the extra files.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from recoverylab._errors import SourceError
from recoverylab.adapters import table
from recoverylab.cli import main

MODELS = ("m1", "org__m2")
DOMAINS = ("chrome", "os")
TASKS = ("e0", "e1", "e2")
KINDS = ("number", "json", "keyed", "jsonl", "csv")
SEGMENTS = ("model", "domain", "task_id")


def _draw_scores(rng: np.random.Generator) -> list[tuple[str, str, str, float]]:
    cells = list(itertools.product(MODELS, DOMAINS, TASKS))
    keep = rng.random(len(cells)) < 0.8
    keep[0] = True
    return [(*c, float(rng.choice([0.0, 0.5, 1.0]))) for c, k in zip(cells, keep, strict=True) if k]


def _write(path: Path, data: bytes, compress: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)


def _layout(rng: np.random.Generator, root: Path) -> tuple[str, str | None, list[str]]:
    """Write one drawn tree; return the template, the unnest column and the extra files."""
    scores = _draw_scores(rng)
    kind = str(rng.choice(KINDS))
    per_file = kind in ("number", "json")
    order = list(rng.permutation(SEGMENTS if per_file else SEGMENTS[:2]))
    compress = bool(rng.random() < 0.3) and kind != "csv"
    dirs = [f"run-{{{n}}}" if n == "model" and rng.random() < 0.5 else f"{{{n}}}" for n in order]
    name = {"number": "result.txt", "json": "result.json", "keyed": "scores.json"}.get(
        kind, f"rows.{kind}"
    )
    template = "/".join(["results", *dirs, name + (".gz" if compress else "")])
    extras: list[str] = []

    def directory(values: dict[str, str]) -> Path:
        return root.joinpath("results", *(d.format(**values) for d in dirs))

    groups: dict[Path, list[tuple[str, float]]] = {}
    for model, domain, task, value in scores:
        here = directory({"model": model, "domain": domain, "task_id": task})
        groups.setdefault(here, []).append((task, value))
    for here, items in groups.items():
        if kind == "number":
            _write(here / name, f"{items[0][1]}\n".encode(), compress)
        elif kind == "json":
            _write(here / name, json.dumps({"score": items[0][1]}).encode(), compress)
        elif kind == "keyed":
            body = {task: {"score": value, "patch_exists": True} for task, value in items}
            _write(here / name, json.dumps(body, indent=2).encode(), compress)
        elif kind == "jsonl":
            lines = "".join(json.dumps({"task_id": t, "score": v}) + "\n" for t, v in items)
            _write(here / name, lines.encode(), compress)
        else:
            frame = pl.DataFrame({"task_id": [t for t, _ in items], "score": [v for _, v in items]})
            here.mkdir(parents=True, exist_ok=True)
            frame.write_csv(here / name)
        if rng.random() < 0.5:  # a companion the template does not name
            (here / "traj.jsonl").write_text('{"step_num": 1}\n')
            extras.append(str(here / "traj.jsonl"))
        if rng.random() < 0.2:
            (here / "_SUCCESS").write_text("")  # bookkeeping: skipped by the resolver, unlisted
    (root / "results" / "README.md").write_text("notes\n")
    extras.append(str(root / "results" / "README.md"))
    expected = pl.DataFrame(
        {
            "task_id": [f"{d}/{t}" for _, d, t, _ in scores],
            "attempt": [0] * len(scores),
            "success": [v >= 1 for *_, v in scores],
            "reward": [v for *_, v in scores],
            "model": [m for m, *_ in scores],
        }
    )
    _REFERENCE[str(root)] = expected
    return template, ("task_id" if kind == "keyed" else None), sorted(extras)


_REFERENCE: dict[str, pl.DataFrame] = {}


@pytest.mark.parametrize("index", range(24))
def test_generated_trees_read_as_the_reference(index: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(41_000 + index)
    template, unnest, extras = _layout(rng, tmp_path)
    value = "value" if template.endswith(("result.txt", "result.txt.gz")) else "score"
    out = table.read(
        table.Logs(tmp_path, files=template, unnest_keys=unnest),
        to="trials",
        mapping={
            "attempt": "0",
            "success": f"{value} >= 1",
            "reward": value,
            "task_scope": "domain",
        },
        key=("model",),
    )
    got = out.tables["trials"].select("task_id", "attempt", "success", "reward", "model")
    want = _REFERENCE.pop(str(tmp_path)).sort("task_id", "attempt", "model")
    assert_frame_equal(got, want, check_dtypes=False)
    assert sorted(out.report.unmatched) == extras
    assert "README.md" in out.report.render()


def test_segments_may_sit_in_any_order_and_give_the_same_rows(tmp_path: Path) -> None:
    rows = {("m1", "chrome", "e0"): 1.0, ("m1", "os", "e0"): 0.0}
    tables = []
    for order in itertools.permutations(SEGMENTS):
        root = tmp_path / "".join(o[0] for o in order)
        for (model, domain, task), value in rows.items():
            values = {"model": model, "domain": domain, "task_id": task}
            here = root.joinpath(*(values[o] for o in order))
            here.mkdir(parents=True)
            (here / "result.txt").write_text(f"{value}\n")
        template = "/".join(f"{{{o}}}" for o in order) + "/result.txt"
        out = table.read(
            table.Logs(root, files=template),
            to="trials",
            mapping={"attempt": "0", "success": "value >= 1", "task_scope": "domain"},
            key=("model",),
        )
        tables.append(out.tables["trials"].select(sorted(out.tables["trials"].columns)))
    for other in tables[1:]:
        assert_frame_equal(other, tables[0])
    assert tables[0]["task_id"].to_list() == ["chrome/e0", "os/e0"]


def test_a_list_of_repeats_is_one_row_per_element_with_its_position(tmp_path: Path) -> None:
    # lm-evaluation-harness with repeats: 3 writes each sample's responses as one list
    folder = tmp_path / "lm" / "gsm8k"
    folder.mkdir(parents=True)
    lines = [
        {"doc_id": 0, "resps": [["a"], ["b"], ["c"]], "filtered_resps": ["a", "b", "c"]},
        {"doc_id": 1, "resps": [["x"], ["y"], ["z"]], "filtered_resps": ["x", "y", "y"]},
    ]
    (folder / "samples_gsm8k_2025-01-01.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in lines)
    )
    logs = table.Logs(
        tmp_path / "lm",
        files="{task}/samples_{task}_*.jsonl",
        explode="filtered_resps",
        position="epoch",
    )
    out = table.read(
        logs,
        to="trials",
        mapping={
            "task_id": "CAST(doc_id AS VARCHAR)",
            "attempt": "epoch",
            "success": "filtered_resps = 'a' OR filtered_resps = 'y'",
        },
    )
    trials = out.tables["trials"]
    assert trials.select("task_id", "attempt", "success").rows() == [
        ("0", 0, True),
        ("0", 1, False),
        ("0", 2, False),
        ("1", 0, False),
        ("1", 1, True),
        ("1", 2, True),
    ]


def test_the_template_parser_refuses_what_it_cannot_bind() -> None:
    from recoverylab._errors import ParameterError
    from recoverylab.adapters._templates import parse_template

    for bad, words in [
        ("", "is empty"),
        ("/abs/{x}.txt", "absolute path"),
        ("a//{x}", "empty, `.` or `..` segment"),
        ("{a}{b}/r.txt", "nothing between them"),
        ("{a-b}/r.txt", "is a column name"),
        ("{a/r.txt", "unbalanced brace"),
    ]:
        with pytest.raises(ParameterError, match=words):
            parse_template(bad)
    template = parse_template("{model}.{run_id}.json")
    assert template.match("gpt-4.run1.json") == {"model": "gpt-4", "run_id": "run1"}
    assert parse_template("{x}/{x}.txt").match("a/b.txt") is None
    assert parse_template("{x}/{x}.txt").match("a/a.txt") == {"x": "a"}


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("tree", "template", "extra", "message"),
    [
        (
            {"m%2Fx/e0/result.txt": "1\n"},
            "{model}/{task_id}/result.txt",
            [],
            "`{root}/m%2Fx/e0/result.txt`: the segment `m%2Fx` bound to `{{model}}` holds an "
            "escaped `/` (%2F)",
        ),
        (
            {"m/e0/result.txt": "done\n"},
            "{model}/{task_id}/result.txt",
            [],
            "`{root}/m/e0/result.txt` holds `done`, not one number",
        ),
        (
            {"m/report.json": '{"e0": {"resolved": true}, "e0": {"resolved": false}}'},
            "{model}/report.json",
            ["--unnest-keys", "task_id"],
            "`{root}/m/report.json` writes the task_id `e0` twice",
        ),
        (
            {"m/e0/r.json": '{"model": "other", "score": 1}'},
            "{model}/{task_id}/r.json",
            [],
            "`{root}/m/e0/r.json` holds `model` = `other` where its path says `m`",
        ),
        (
            {"m/rows.csv": "model,task_id\nm,e0\nx,e1\n"},
            "{model}/rows.csv",
            [],
            "`{root}/m/rows.csv` holds `model` = `x` where its path says `m`",
        ),
        (
            {"m/report.json": "[1, 2]"},
            "{model}/report.json",
            ["--unnest-keys", "task_id"],
            "`{root}/m/report.json` is not a JSON object keyed by `task_id`",
        ),
    ],
)
def test_bad_trees_are_one_line_naming_the_file(
    tree: dict[str, str],
    template: str,
    extra: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "runs"
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    argv = ["import", "table", str(root), "--files", template, "--to", "trials", *extra]
    argv += ["--map", "attempt=0", "--map", "success=true", "--out", str(tmp_path / "out")]
    code, err = _cli(argv, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert message.format(root=root) in err
    assert not (tmp_path / "out").exists()


def test_a_template_matching_nothing_names_the_tree(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("1\n")
    with pytest.raises(SourceError, match=r"matches the template `\{m\}/result.txt`"):
        table.read(table.Logs(tmp_path, files="{m}/result.txt"), to="trials")


def test_the_command_line_explodes_and_excludes_tree_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "lm"
    for task, scores in {"gsm8k": [[1, 0, 1], [0, 0, 0]], "arc": [[1, 1, -1]]}.items():
        (root / task).mkdir(parents=True)
        lines = [{"doc_id": i, "acc": s} for i, s in enumerate(scores)]
        (root / task / f"samples_{task}_2025-01-01T00.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines)
        )
    (root / "results_2025-01-01T00.json").write_text("{}")
    argv = ["import", "table", str(root), "--files", "{task}/samples_{task}_*.jsonl"]
    argv += ["--explode", "acc", "--position", "epoch", "--to", "trials", "--scope", "task"]
    argv += ["--map", "task_id=CAST(doc_id AS VARCHAR)", "--map", "attempt=epoch"]
    argv += ["--map", "success=acc >= 1", "--exclude", "crashed=acc < 0"]
    argv += ["--out", str(tmp_path / "out")]
    code, err = _cli(argv, capsys)
    assert code == 0, err
    trials = pl.read_parquet(tmp_path / "out" / "trials.parquet")
    assert trials.select("task_id", "attempt", "success").rows() == [
        ("arc/0", 0, True),
        ("arc/0", 1, True),
        ("gsm8k/0", 0, True),
        ("gsm8k/0", 1, False),
        ("gsm8k/0", 2, True),
        ("gsm8k/1", 0, False),
        ("gsm8k/1", 1, False),
        ("gsm8k/1", 2, False),
    ]
    excluded = pl.read_parquet(tmp_path / "out" / "excluded.parquet")
    assert excluded.select("task_id", "reason").rows() == [("arc/0", "crashed")]
    assert f"not read: {root / 'results_2025-01-01T00.json'}" in err


def test_explode_keeps_an_empty_list_visible_and_checks_its_columns(tmp_path: Path) -> None:
    from recoverylab._errors import SchemaError

    (tmp_path / "t").mkdir()
    lines = [{"doc_id": 0, "acc": [1, 0]}, {"doc_id": 1, "acc": []}]
    (tmp_path / "t" / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    mapping = {"task_id": "CAST(doc_id AS VARCHAR)", "attempt": "epoch", "success": "acc >= 1"}
    logs = table.Logs(tmp_path, files="{task}/s.jsonl", explode="acc", position="epoch")
    out = table.read(logs, to="trials", mapping=mapping, exclude={"no_response": "epoch IS NULL"})
    assert out.tables["trials"].select("task_id", "attempt").rows() == [("0", 0), ("0", 1)]
    assert out.excluded.select("task_id", "reason").rows() == [("1", "no_response")]
    for explode, position, words in [
        ("nope", "epoch", "`nope`, which is not a column of the logs"),
        ("doc_id", "epoch", "`doc_id`, which holds Int64, not a list"),
        ("acc", "doc_id", "`position` names `doc_id`, already a column"),
    ]:
        bad = table.Logs(tmp_path, files="{task}/s.jsonl", explode=explode, position=position)
        with pytest.raises(SchemaError, match=words):
            table.read(bad, to="trials", mapping=mapping)


def _lm_eval_run(folder: Path, arms: dict[str, dict], date: str = "2025-01-01T00-00") -> None:
    """An lm-evaluation-harness output directory: results_{date}.json and samples per task."""
    folder.mkdir(parents=True, exist_ok=True)
    configs = {task: {"task": task, "repeats": 2, "metadata": meta} for task, meta in arms.items()}
    (folder / f"results_{date}.json").write_text(json.dumps({"configs": configs, "results": {}}))
    for task in arms:
        lines = [{"doc_id": i, "filtered_resps": [f"{task}{i}", "x"]} for i in range(2)]
        (folder / f"samples_{task}_{date}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines)
        )


def test_a_context_file_gives_each_file_its_arms(tmp_path: Path) -> None:
    root = tmp_path / "out"
    _lm_eval_run(root / "model-a", {"gsm8k": {"arm": "none"}, "arc": {"arm": "none"}})
    _lm_eval_run(root / "model-b", {"gsm8k": {"arm": "retry"}, "arc": {"arm": "retry"}})
    logs = table.Logs(
        root,
        files="{model}/samples_{task}_*.jsonl",
        explode="filtered_resps",
        position="epoch",
        context="{model}/results_*.json:configs.{task}.metadata",
    )
    out = table.read(
        logs,
        to="forks",
        mapping={
            "task_id": "task || '-' || CAST(doc_id AS VARCHAR)",
            "condition": "'clean'",
            "method": "context.arm",
            "delay": "CASE WHEN context.arm = 'none' THEN NULL ELSE 0 END",
            "success": "filtered_resps <> 'x'",
        },
        key=("epoch",),
    )
    forks = out.tables["forks"]
    assert forks.height == 2 * 2 * 2 * 2  # models x tasks x docs x epochs
    assert set(forks["method"]) == {"none", "retry"}
    assert forks.filter(pl.col("epoch") == 0)["success"].all()
    assert not forks.filter(pl.col("epoch") == 1)["success"].any()
    read = set(out.report.files_read) - set(out.report.used)
    assert read == {str(p) for p in root.glob("*/results_*.json")}  # read, no unit of theirs
    assert out.report.unmatched == ()


def test_a_context_file_must_be_one_and_hold_the_key(tmp_path: Path) -> None:
    root = tmp_path / "out"
    _lm_eval_run(root / "m", {"gsm8k": {"arm": "none"}})
    base = {"files": "{model}/samples_{task}_*.jsonl", "explode": "filtered_resps"}
    mapping = {"task_id": "task", "attempt": "0", "success": "true"}
    missing = table.Logs(root, **base, context="{model}/results_*.json:configs.{task}.meta")
    with pytest.raises(SourceError, match=r"has no `configs.gsm8k.meta` \(no key `meta`\)"):
        table.read(missing, to="trials", mapping=mapping)
    from recoverylab._errors import ParameterError

    unbound = table.Logs(root, **base, context="results_*.json:configs.{dataset}")
    with pytest.raises(ParameterError, match=r"names `\{dataset\}`, which the files template"):
        table.read(unbound, to="trials", mapping=mapping)
    _lm_eval_run(root / "m", {"gsm8k": {"arm": "none"}}, date="2025-02-02T00-00")
    two = table.Logs(root, **base, context="{model}/results_*.json:configs.{task}.metadata")
    with pytest.raises(SourceError, match=r"both `.*results_2025-01-01T00-00\.json` and"):
        table.read(two, to="trials", mapping=mapping)
