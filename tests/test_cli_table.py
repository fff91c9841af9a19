"""Printed result tables (recoverylab/cli/_table.py) and the shared number format (_display)."""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoverylab._display import label, p_text, pp_text
from recoverylab.cli._table import render, render_many
from tests.conftest import SAMPLES

S = SAMPLES
GOAL = S / "goal" / "diagnostic"
ROUTER = S / "router"

#: Every printing command of the acceptance list, on its shipped sample (small resamples).
COMMANDS: dict[str, list[object]] = {
    "paired": ["paired", S / "paired" / "main_forks.parquet", "--resamples", 200],
    "contrast": [
        "contrast", S / "paired" / "main_forks.parquet", "--a", "stale2", "--b", "clean",
        "--resamples", 200,
    ],
    "policy": [
        "policy", "--decisions", S / "paired" / "policy_decisions.parquet",
        "--forks", S / "paired" / "policy_forks.parquet", "--resamples", 200,
    ],
    "goal": [
        "goal", "--cases", GOAL / "cases.csv", "--resources", GOAL / "resources.csv",
        "--episodes", GOAL / "episodes.csv", "--steps", GOAL / "steps.csv",
        "--citations", GOAL / "citations.csv", "--resamples", 200,
    ],
    "takeover": [
        "takeover", "--states", S / "takeover" / "states.parquet",
        "--attempts", S / "takeover" / "attempts.parquet",
        "--failures", S / "takeover" / "failures.parquet",
        "--mutations", S / "takeover" / "mutations.parquet",
        "--compare", "agent_a,agent_b", "--resamples", 200,
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def rule(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from recoverylab.cli import main

    path = tmp_path_factory.mktemp("rule") / "rule.json"
    code = main(
        [
            "--quiet",
            "router",
            "fit",
            "--decision-points",
            str(ROUTER / "train" / "decision_points.parquet"),
            "--forks",
            str(ROUTER / "train" / "forks.parquet"),
            "--features",
            "repetition,noops,obs_novelty,consistency",
            "--out",
            str(path),
        ]
    )
    assert code == 0
    return path


def command(name: str, rule: Path) -> list[object]:
    if name == "router evaluate":
        return [
            "router", "evaluate", "--rule", rule,
            "--decision-points", ROUTER / "test" / "decision_points.parquet",
            "--forks", ROUTER / "test" / "forks.parquet", "--resamples", 200,
        ]  # fmt: skip
    return COMMANDS[name]


def header_lines(text: str) -> list[list[str]]:
    """The header lines above each dashed rule, as lists of their words.

    A line belongs to the header when every character it prints lies within a column of the
    rule below it (a title or a note crosses the gaps between columns).
    """
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not re.fullmatch(r"-+( +-+)*", line):
            continue
        spans = [(m.start(), m.end()) for m in re.finditer(r"-+", line)]

        def inside(position: int, spans: list[tuple[int, int]] = spans) -> bool:
            return any(start <= position < end for start, end in spans)

        j = i - 1
        while j >= 0 and lines[j].strip():
            if not all(inside(p) for p, ch in enumerate(lines[j]) if ch != " "):
                break
            found.append(lines[j].split())
            j -= 1
    return found


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("name", [*COMMANDS, "router evaluate"])
def test_printed_tables_fit_the_terminal(
    cli: Callable, monkeypatch: pytest.MonkeyPatch, rule: Path, name: str, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    result = cli("--quiet", *command(name, rule))
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert not re.search("[│┆═╞╡┌┐└┘]", result.out)  # plain text: no box drawing
    # every header word is a whole word of a column's label (a header never splits a word)
    machine = cli("--quiet", *command(name, rule), "--format", "json")
    data = json.loads(machine.out)
    tables = data.values() if isinstance(data, dict) else [data]
    names = {column for rows in tables for row in rows for column in row}
    words = {word for column in names for word in label(column).split()} | {"[CI]"}
    headers = header_lines(result.out)
    assert headers, "no table header found"
    for header in headers:
        assert set(header) <= words, header


def test_narrow_view_shows_the_main_columns_and_wide_every_column(
    cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow = cli("--quiet", *COMMANDS["paired"]).out
    assert "effect pp [CI]" in narrow
    assert re.search(r" rescue +harm +effect pp \[CI\]", narrow)  # the counts behind the effect
    assert "unchanged" not in narrow
    assert "secondary columns not shown; --wide shows every column" in narrow
    monkeypatch.setenv("COLUMNS", "400")  # wide enough for every header on one line
    wide = cli("--quiet", *COMMANDS["paired"], "--wide").out
    assert " 87.7 " in wide  # clean base rate 93/106 in pp, one decimal
    for column in ("unchanged", "carried forward", "prefix mismatch", "recovery rate pp"):
        assert column in wide
    assert "--wide" not in wide


def test_policy_overall_row_is_labelled_all(cli: Callable) -> None:
    out = cli("--quiet", *COMMANDS["policy"]).out
    assert re.search(r"^all +300 ", out, re.M)
    assert "null" not in out


def test_machine_formats(cli: Callable, tmp_path: Path) -> None:
    out = tmp_path / "cells.parquet"
    assert cli("--quiet", *COMMANDS["paired"], "--out", out).code == 0
    cells = pl.read_parquet(out)
    as_csv = cli("--quiet", *COMMANDS["paired"], "--format", "csv").out
    assert pl.read_csv(io.StringIO(as_csv)).equals(cells)  # unchanged: fractions, every column
    as_json = json.loads(cli("--quiet", *COMMANDS["paired"], "--format", "json").out)
    assert pl.DataFrame(as_json).equals(cells)
    markdown = cli("--quiet", *COMMANDS["paired"], "--format", "markdown").out.splitlines()
    assert markdown[:2] == ["rescue and harm by condition, delay, method", ""]
    assert markdown[2].startswith("95% intervals: fay-lumbard")  # the method, as a paragraph
    assert markdown[3] == ""
    markdown = markdown[4:]
    assert markdown[0].startswith("| condition | delay | method | n |")
    assert markdown[1].startswith("|---|---|---|---:|")
    assert len(markdown) == 2 + cells.height
    # several tables: one JSON object keyed by table name
    takeover = json.loads(cli("--quiet", *COMMANDS["takeover"], "--format", "json").out)
    assert set(takeover) >= {"eligibility", "summary", "awareness", "latency", "verifier_gate"}


def test_router_fit_report_in_percentage_points(cli: Callable, tmp_path: Path) -> None:
    result = cli(
        "--quiet", "router", "fit",
        "--decision-points", ROUTER / "train" / "decision_points.parquet",
        "--forks", ROUTER / "train" / "forks.parquet",
        "--features", "repetition,noops,obs_novelty,consistency", "--out", tmp_path / "r.json",
    )  # fmt: skip
    assert result.code == 0, result.err
    rates = result.out.split("== out-of-fold rates (pp)", 1)[1].split("== ", 1)[0]
    assert re.search(r"^oof_clean_touch_rate +15\.0$", rates, re.M)  # one unit: the table's pp
    others = result.out.split("== counts, scores and settings", 1)[1]
    assert re.search(r"^auc_err +0\.\d+$", others, re.M)  # as computed, in its own table
    assert "0.1500" not in result.out


def test_render_wraps_headers_and_repeats_keys_in_blocks() -> None:
    frame = pl.DataFrame(
        {
            "condition": ["clean", None],
            "n": [106, 212],
            "intervention_rate": [0.25, 0.125],
            "clean_touch_rate": [0.1, 0.05],
            "recovery_rate": [0.5, 0.75],
            "effect": [0.0377, -0.0094],
            "ci_low": [-0.01, -0.05],
            "ci_high": [0.08, 0.02],
            "p_value": [0.2891, 0.00002],
        }
    )
    text = render(frame, width=30)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 30
    blocks = text.split("\n\n")
    assert len(blocks) >= 2
    for block in blocks:  # the keys are repeated in every block
        assert re.search(r"^condition ", block, re.M)
    assert "+3.8 [-1.0, 8.0]" in text
    assert "-0.9 [-5.0, 2.0]" in text
    assert "< 0.001" in text
    assert "0.29" in text
    assert re.search(r"^all +212", text, re.M)
    assert lines[-1] == "2 rows"
    one_line = render(frame, wide=True, width=200)
    assert "intervention rate pp" in one_line  # wide: headers on one line


def test_render_many_csv_sections_and_empty_tables() -> None:
    frames = {
        "a": pl.DataFrame({"k": ["x"], "n": [1]}),
        "b": pl.DataFrame({"k": []}, {"k": pl.String}),
    }
    text = render_many(frames, "csv")
    assert text == "# a\nk,n\nx,1\n\n# b\nk"
    assert "(no rows)" in render_many(frames)


@pytest.mark.parametrize(
    ("p", "shown"),
    [
        (0.2891, "0.29"),
        (0.125, "0.13"),
        (0.049, "0.049"),
        (0.1875000000000001, "0.19"),
        (1.0, "1.0"),
        (0.001, "0.001"),
        (0.000999, "< 0.001"),
        (0.0, "< 0.001"),
    ],
)
def test_p_values_two_significant_digits(p: float, shown: str) -> None:
    frame = pl.DataFrame({"p_value": [p]})
    assert frame.select(p_text("p_value")).item() == shown


@settings(max_examples=200, deadline=None)
@given(st.floats(0.001, 1.0))
def test_p_text_is_the_p_value_to_two_significant_digits(p: float) -> None:
    shown = pl.DataFrame({"p": [p]}).select(p_text("p")).item()
    value = float(shown)
    digits = 1 - math.floor(math.log10(p))
    assert math.isclose(value, p, rel_tol=0.051)
    assert value == pytest.approx(round(value, digits))


@settings(max_examples=200, deadline=None)
@given(st.floats(-1.0, 1.0))
def test_pp_text_is_one_decimal_of_percentage_points(x: float) -> None:
    shown = pl.DataFrame({"x": [x]}).select(pp_text("x", signed=True)).item()
    assert re.fullmatch(r"[+-]?\d+\.\d", shown)
    assert abs(float(shown) - x * 100) <= 0.05 + 1e-9
    assert not shown.startswith("-") or float(shown) < 0  # never "-0.0"


def test_result_objects_show_p_as_every_table_does() -> None:
    from recoverylab.report import result_html
    from recoverylab.stats import SignFlipResult

    result = SignFlipResult(
        statistic=3.0, p_value=0.1875000000000001, method="exact-convolution", n_clusters=6,
        n_resamples=None,
    )  # fmt: skip
    assert repr(result) == (
        "SignFlipResult(statistic=3, p_value=0.19, method='exact-convolution', n_clusters=6, "
        "n_resamples=None, alternative='two-sided')"
    )
    assert "<td style='text-align:left'>0.19</td>" in result._repr_html_()
    assert "<td style='text-align:left'>0.19</td>" in result_html(result)
