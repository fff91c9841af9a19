"""Tests of the report's tables, sections, provenance, HTML assembly and result rendering."""

from __future__ import annotations

import html
import json
import os
import re
import stat
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recoverylab import __version__, goal, paired, report, stats, takeover
from recoverylab._errors import ParameterError, SchemaError
from tests.conftest import SAMPLES

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------

FRAME = pl.DataFrame(
    {
        "regime": ["barrier_free", None, "<b>&"],
        "ts": [0.835, None, -0.0000001],
        "ci_low": [0.78, None, -0.01],
        "ci_high": [0.885, None, 0.02],
        "n": [200, 0, 7],
        "steps": [3.456, 1.0, None],
        "p_value": [0.2891, 0.00001, None],
    }
)
COLUMNS = [
    report.Key("regime"),
    report.Rate("ts", "n", "TS", "n (episodes)", ci=("ci_low", "ci_high"), signed=True),
    report.Count("steps", "mean steps", digits=2),
    report.PValue(),
]


def cells(html: str) -> list[list[str]]:
    """The cells of a table as shown: each value's ``data-column`` element unwrapped."""
    rows = re.findall(r"<tr>(.*?)</tr>", html.split("<tbody>")[1])
    shown = [re.sub(r'<span data-column="[^"]*">([^<]*)</span>', r"\1", row) for row in rows]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in shown]


def test_every_value_names_its_column() -> None:
    html = report.table_html(FRAME, COLUMNS)
    first = re.findall(r"<tr>(.*?)</tr>", html.split("<tbody>")[1])[0]
    assert re.findall(r'data-column="(\w+)">([^<]*)<', first) == [
        ("regime", "barrier_free"),
        ("ts", "+83.5"),
        ("ci_low", "78.0"),
        ("ci_high", "88.5"),
        ("n", "200"),
        ("steps", "3.46"),
        ("p_value", "0.29"),
    ]


def test_a_denominator_shown_once_per_table() -> None:
    columns = [
        report.Key("regime"),
        report.Rate("ts", "n", "TS", "n (episodes)"),
        report.Count("steps"),
        report.Rate("ci_low", "n", "low", "n (episodes)"),
    ]
    headers = re.findall(r"<th\b[^>]*>(.*?)</th>", report.table_html(FRAME, columns))
    assert headers == ["regime", "TS, pp", "n (episodes)", "steps", "low, pp"]


def test_table_rates_in_pp_with_n_beside_by_hand() -> None:
    html = report.table_html(FRAME, COLUMNS)
    headers = re.findall(r"<th\b[^>]*>(.*?)</th>", html)
    assert headers == ["regime", "TS, pp [CI]", "n (episodes)", "mean steps", "p"]
    assert cells(html) == [
        ["barrier_free", '+83.5 <span class="ci">[78.0, 88.5]</span>', "200", "3.46", "0.29"],
        ["all", "—", "0", "1.00", "&lt; 0.001"],
        ["&lt;b&gt;&amp;", '0.0 <span class="ci">[-1.0, 2.0]</span>', "7", "—", "—"],
    ]


def test_table_every_rate_header_is_followed_by_its_n() -> None:
    columns = [
        report.Key("regime"),
        report.Rate("ts", "n", "TS"),
        report.Rate("ci_low", "n", "low", "n (low)"),
    ]
    classes = re.findall(r'<th class="(\w+)"', report.table_html(FRAME, columns))
    assert classes == ["key", "rate", "n", "rate", "n"]


def test_table_keeps_row_order_lazy_and_eager(frame_kind) -> None:
    assert report.table_html(frame_kind(FRAME), COLUMNS) == report.table_html(FRAME, COLUMNS)


def test_table_of_no_rows_and_caption() -> None:
    html = report.table_html(FRAME.clear(), COLUMNS, caption="A & B")
    assert "<caption>A &amp; B</caption>" in html
    assert 'colspan="5" class="empty">no rows</td>' in html


def test_table_names_missing_columns() -> None:
    with pytest.raises(
        SchemaError,
        match=r"^report table: the frame has no column `gp`, `m`; its columns are: regime, ts,",
    ):
        report.table_html(FRAME, [report.Rate("gp", "m")])


# ------------------------------------------------------------------------------------------------
# Provenance and result objects
# ------------------------------------------------------------------------------------------------


def test_provenance_block() -> None:
    provenance = report.Provenance(
        inputs=(report.Input("forks", "data_samples/paired/main_forks.parquet", 1054),),
        exclusions=(("unpaired", 0), ("prefix_mismatch", 42)),
        seed=3,
        n_resamples=2000,
        confidence=0.9,
        settings=(("cohort", "factual_success"),),
    )
    html = provenance.to_html()
    assert "<code>forks</code>: data_samples/paired/main_forks.parquet (1,054 rows)" in html
    assert "<dd>unpaired: 0, prefix_mismatch: 42</dd>" in html
    assert "<dt>seed</dt><dd>3</dd>" in html
    assert "<dd>2,000 resamples, 90% intervals</dd>" in html
    assert "<dt>cohort</dt><dd>factual_success</dd>" in html
    assert f"<dt>recoverylab</dt><dd>{__version__}</dd>" in html
    assert provenance._repr_html_() == html
    empty = report.Provenance().to_html()
    assert "<dt>inputs</dt><dd>none</dd>" in empty
    assert "<dt>exclusions by reason</dt><dd>none</dd>" in empty
    assert "<dt>resampling</dt><dd>none</dd>" in empty


def test_result_html_of_stats_and_goal_results() -> None:
    result = stats.bootstrap_types(
        np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([3, 2]), n_resamples=500, rng=0
    )
    html = report.result_html(result)
    assert html.startswith("<table><caption>BootstrapResult</caption>")
    assert f"<td style='text-align:left'>{result.estimate:.6g}</td>" in html
    assert "array of 500 values (float64)" in html
    tables = goal.GoalTables(*(pl.LazyFrame({"a": [1], "b": [2]}),) * 3)
    assert "(not collected)" in report.result_html(tables, title="tables")
    assert "<caption>tables</caption>" in report.result_html(tables, title="tables")
    with pytest.raises(TypeError, match="result_html expects a dataclass instance, got dict"):
        report.result_html({"a": 1})


# ------------------------------------------------------------------------------------------------
# Sections
# ------------------------------------------------------------------------------------------------

PROVENANCE = report.Provenance(inputs=(report.Input("forks", "f.parquet", 10),), seed=0)


@pytest.fixture(scope="module")
def mechanism() -> pl.DataFrame:
    return paired.summarize(SAMPLES / "paired" / "mechanism_forks.parquet", n_resamples=100)


@pytest.fixture(scope="module")
def by_depth() -> pl.DataFrame:
    folder = SAMPLES / "takeover"
    return takeover.summarize(
        folder / "states.parquet", folder / "attempts.parquet", interval="wilson"
    )


def test_paired_sections_count_exclusions_by_reason(mechanism: pl.DataFrame) -> None:
    section = report.rescue_harm_section(mechanism, PROVENANCE)
    assert (section.key, section.group) == (
        "paired-rescue-harm",
        "Paired recovery (CIR paired forks)",
    )
    # 6 cells, each with 7 recovery rows whose prefix hash disagrees with the none row.
    assert section.provenance.exclusions == (("unpaired", 0), ("prefix_mismatch", 42))
    assert section.provenance.inputs == PROVENANCE.inputs
    assert len(re.findall(r"[.!?](\s|$)", section.reading)) == 2  # two sentences
    # an interval's header names the level the provenance gives, or none when it gives none
    effect = report.effect_section(mechanism, PROVENANCE)
    assert "effect, pp [CI]" in effect.table
    at_90 = report.effect_section(mechanism, replace(PROVENANCE, confidence=0.9))
    assert "effect, pp [90% CI]" in at_90.table


def test_takeover_sections_count_each_rejected_state_once(by_depth: pl.DataFrame) -> None:
    section = report.depth_section(by_depth, PROVENANCE)
    # 23 rejected states over the six depths (12 replay mismatches, 11 missing expected states),
    # although every agent's row repeats its depth's counts.
    assert dict(section.provenance.exclusions) == {
        "state_replay_mismatch": 12,
        "state_missing_expected": 11,
        "attempt_on_rejected_state": 0,
        "attempt_not_common_state": 0,
        "attempt_not_common_sample": 0,
    }
    assert section.table.count("<tr>") == by_depth.height + 1


def test_policy_section_shows_the_written_clean_touch_rate_with_the_clean_episodes() -> None:
    folder = SAMPLES / "paired"
    evaluation = paired.evaluate_policy(
        folder / "policy_decisions.parquet", folder / "policy_forks.parquet", n_resamples=100
    )
    section = report.policy_section(evaluation, PROVENANCE)
    rows = {row[0]: row for row in cells(section.table)}
    clean = evaluation.filter(pl.col("condition") == "clean").row(0, named=True)
    interval = (
        f' <span class="ci">[{clean["clean_touch_rate_ci_low"] * 100:.1f}, '
        f"{clean['clean_touch_rate_ci_high'] * 100:.1f}]</span>"
    )
    # clean-touch rate and its n (clean episodes) are the last two cells: on the clean row and
    # the overall row, whose clean episodes are the clean row's n (not all 300 episodes).
    assert rows["clean"][-2:] == ["0.0" + interval, "75"]
    assert rows["all"][-2][:3] == "0.0"
    assert rows["all"][-1] == "75"
    assert rows["stale2"][-2:] == ["—", "—"]
    assert 'data-column="n" data-row-condition="clean">75</td>' in section.table


def test_goal_sections() -> None:
    folder = SAMPLES / "goal" / "diagnostic"
    tables = ("cases", "resources", "episodes", "steps", "citations")
    scored = goal.score(*(folder / f"{t}.csv" for t in tables)).collect()
    summary = goal.summarize(scored, n_resamples=100)
    ts = report.ts_section(summary, PROVENANCE)
    # recoverable: e1 succeeds, e2 uses an old version, e4 breaks policy -> TS 1/3 of n = 3.
    regime, ts_cell, n = cells(ts.table)[0][:3]
    assert (regime, ts_cell.split(" <span")[0], n) == ("recoverable", "33.3", "3")
    reasons = report.reasons_section(summary, PROVENANCE)
    assert "no copy used" in reasons.table
    episodes = pl.DataFrame(
        {
            "goal_id": ["g1", "g1", "g1", "g2"],
            "regime": ["barrier_free", "recoverable", "unrecoverable", "recoverable"],
            "success": [True, True, False, True],
        }
    )
    drop = report.drop_section(goal.barrier_drop(episodes, n_resamples=100), PROVENANCE)
    assert drop.provenance.exclusions == (("unpaired_goal", 1),)  # g2 has no barrier-free case
    assert cells(drop.table)[0][:2] == ["100.0", "1"]


def test_section_displays_in_jupyter_with_a_static_svg(mechanism: pl.DataFrame) -> None:
    html = report.effect_section(mechanism, PROVENANCE)._repr_html_()
    assert html.startswith("<style>")
    # Its styles are scoped: showing a section never restyles the notebook around it.
    style = html.split("</style>")[0].removeprefix("<style>")
    style = re.sub(r"@media[^{]*{", "}", style)  # rules inside media queries are checked too
    selectors = re.findall(r"(?:^|})([^{}]+){", style)
    assert selectors
    assert all(rule.strip().startswith(".recoverylab") for rule in selectors), selectors
    assert '</style><div class="recoverylab">' in html
    assert "<svg" in html
    assert '<table class="result">' in html
    assert '<dl class="provenance">' in html


# ------------------------------------------------------------------------------------------------
# The page
# ------------------------------------------------------------------------------------------------


def test_render_refuses_no_sections_and_duplicate_keys(mechanism: pl.DataFrame) -> None:
    with pytest.raises(ParameterError, match=r"^a report needs at least one section; none"):
        report.render_html([])
    section = report.effect_section(mechanism, PROVENANCE)
    with pytest.raises(
        ParameterError,
        match=r"^section keys must be unique \(a heading appears once in a report\); "
        "paired-effect appear more than",
    ):
        report.render_html([section, section])
    other = report.effect_section(mechanism, PROVENANCE, key="other")
    with pytest.raises(
        ParameterError,
        match=r"^section titles must be unique .*; Effect of recovery with its confidence "
        "interval appear",
    ):
        report.render_html([section, other])


def test_page_is_self_contained_and_script_safe(mechanism: pl.DataFrame) -> None:
    hostile = mechanism.with_columns(
        pl.when(pl.col("condition") == "clean")
        .then(pl.lit("</script><b>x"))
        .otherwise(pl.col("condition"))
        .alias("condition")
    )
    sections = [
        report.rescue_harm_section(hostile, PROVENANCE),
        report.effect_section(mechanism, PROVENANCE, key="second", title="Second"),
    ]
    page = report.render_html(sections, title="T & t")
    assert "<title>T &amp; t</title>" in page
    # No external resource: outside the inlined scripts, no src and no href but page anchors.
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.DOTALL)
    assert not re.findall(r"\bsrc=", markup)
    assert re.findall(r'href="([^"#][^"]*)"', markup) == []
    # Only the three script elements of the page; the data never closes one.
    assert page.count("</script>") == 3
    specs = re.search(
        r'<script type="application/json" id="recoverylab-specs">(.*?)</script>', page
    )
    parsed = json.loads(specs.group(1))
    assert sorted(parsed) == ["chart-paired-rescue-harm", "chart-second"]
    labels = {
        row["condition"]
        for rows in parsed["chart-paired-rescue-harm"]["datasets"].values()
        for row in rows
    }
    assert "</script><b>x" in labels
    assert page.count('<div class="chart" id="chart-') == 2
    assert 'href="#paired-rescue-harm"' in page
    assert 'href="#second"' in page
    assert (
        page.count('<h2 id="group-paired-rescue-harm">Paired recovery (CIR paired forks)</h2>') == 1
    )


def test_write_report_is_atomic(mechanism: pl.DataFrame, tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.html"
    written = report.write_report(target, [report.effect_section(mechanism, PROVENANCE)])
    assert written == target
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    before = target.read_bytes()
    with pytest.raises(ParameterError):
        report.write_report(target, [])
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.html"]


def test_toc_section_names_coinciding_policies_and_its_legend_is_legible() -> None:
    q = [0.1, 0.5, 1.0]
    curves = pl.DataFrame(
        {
            "policy": ["a"] * 3 + ["b"] * 3 + ["c"] * 3,
            "q": q * 3,
            "toc": [0.2, 0.1, 0.0] * 2 + [0.3, 0.1, 0.0],
            "toc_ci_low": [0.1, 0.0, 0.0] * 3,
            "toc_ci_high": [0.3, 0.2, 0.0] * 3,
            "qini": [0.02, 0.05, 0.0] * 3,
        }
    )
    metrics = pl.DataFrame(
        {
            "policy": ["a", "b", "c"],
            "reference": [None, None, None],
            "metric": ["autoc"] * 3,
            "estimate": [0.1, 0.1, 0.2],
            "ci_low": [0.0, 0.0, 0.1],
            "ci_high": [0.2, 0.2, 0.3],
            "points": [30, 30, 30],
            "tasks": [10, 10, 10],
        },
        schema_overrides={"reference": pl.String},
    )
    section = report.toc_section(curves, metrics, PROVENANCE)
    assert section.table.startswith(
        '<p class="chart-note">Drawn on top of each other (identical curves, one visible '
        "line): a and b.</p><table"
    )
    spec = section.chart.to_dict()
    legends = [layer["encoding"]["color"].get("legend") for layer in spec["layer"][:2]]
    assert {legend["symbolOpacity"] for legend in legends if legend} == {1}
    assert "strokeDash" in spec["layer"][1]["encoding"]
    distinct = curves.with_columns(pl.col("toc") + pl.col("q") * pl.int_range(pl.len()) / 100)
    assert "chart-note" not in report.toc_section(distinct, metrics, PROVENANCE).table


def test_the_report_closes_with_how_to_read_and_the_glossary(mechanism: pl.DataFrame) -> None:
    from recoverylab._glossary import GLOSSARY

    page = report.render_html([report.effect_section(mechanism, PROVENANCE)])
    part = page.split('<section class="section how-to-read" id="how-to-read">', 1)[1]
    assert part.startswith("<h2>How to read this report</h2>")
    assert '<a href="#how-to-read">How to read this report</a>' in page  # in the contents
    terms = dict(re.findall(r"<dt [^>]*>(.*?)</dt><dd>(.*?)</dd>", part))
    assert {html.unescape(t): html.unescape(d) for t, d in terms.items()} == dict(GLOSSARY)
    # the terms a reader meets in recoverylab's output, each defined
    for term in (
        "kept", "unchanged", "carried forward", "sparse", "cluster meld", "prefix mismatch",
        "task types", "design effect", "ICC below zero", "rescue", "harm", "clean-touch rate",
        "EAR", "pass@k", "pass^k", "family-adjusted",
    ):  # fmt: skip
        assert term in GLOSSARY
    glossary = report.Section("g", "Other", "Glossary", "", "", None, PROVENANCE)
    with pytest.raises(ParameterError, match="Glossary appear more than once"):
        report.render_html([glossary])


def headline_text(section: report.Section) -> list[str]:
    items = re.findall(r"<li>(.*?)</li>", section.table)
    return [html.unescape(re.sub(r"<[^>]+>", "", item)) for item in items]


def test_headline_names_what_helped_and_what_harmed_from_the_frame() -> None:
    effects = pl.DataFrame(
        {
            "condition": ["stale2", "stale2", "clean", "clean"],
            "delay": [1, 2, 1, 2],
            "method": ["refresh"] * 4,
            "n": [100, 100, 80, 80],
            "effect": [0.12, 0.3, -0.05, -0.02],
            "ci_low": [0.02, -0.01, -0.09, -0.06],
            "ci_high": [0.22, 0.6, -0.01, 0.02],
            "p_value": [0.012, 0.06, 0.0004, 0.3],
            "ci_inverts_test": [True] * 4,
        }
    )
    section = report.headline_section(effects=effects, confidence=0.95)
    assert section.group == "Summary"
    assert headline_text(section) == [
        "Helped most: refresh under stale2, delay 1: +12.0 pp [2.0, 22.0], p = 0.012, "
        "n = 100 pairs.",
        "Harmed: refresh under clean, delay 1: -5.0 pp [-9.0, -1.0], p < 0.001, n = 80 pairs.",
        "Significant means the cell's own p-value is below 0.05 (its interval excludes zero), "
        "not adjusted across the 4 cells of the effects table.",
    ]
    # each number names its row: source section, column and keys
    assert (
        '<span class="value" data-source="paired-effect" data-column="effect" '
        'data-row-condition="stale2" data-row-delay="1" data-row-method="refresh">+12.0</span>'
    ) in section.table
    # nothing significant: said so; a bootstrap interval is not claimed to agree with p
    calm = effects.with_columns(
        pl.lit(0.5).alias("p_value"), pl.lit(False).alias("ci_inverts_test")
    )
    assert headline_text(report.headline_section(effects=calm)) == [
        "Helped most: no cell's effect is significantly positive.",
        "Harmed: no cell's effect is significantly negative.",
        "Significant means the cell's own p-value is below 0.05, not adjusted across the 4 "
        "cells of the effects table.",
    ]
    with pytest.raises(ParameterError, match=r"^a headline needs at least one result"):
        report.headline_section()
    with pytest.raises(ParameterError, match=r"^parameter `confidence` is 1\.5"):
        report.headline_section(effects=effects, confidence=1.5)


def test_headline_of_a_policy_without_clean_episodes_says_nothing_about_them() -> None:
    folder = SAMPLES / "paired"
    evaluation = paired.evaluate_policy(
        folder / "policy_decisions.parquet", folder / "policy_forks.parquet", n_resamples=100
    )
    without = evaluation.filter(pl.col("condition").is_null() | (pl.col("condition") != "clean"))
    without = without.with_columns(pl.lit(None, pl.Float64).alias("clean_touch_rate"))
    (line,) = headline_text(report.headline_section(policy=without))
    assert line.startswith("The policy: net gain over never recovering +3.0 pp [")
    assert "clean" not in line
    (line,) = headline_text(report.headline_section(policy=evaluation))
    assert line.endswith("while touching 0.0 % of the 75 clean episodes.")


def test_headline_says_what_barriers_cost_and_which_agents_notice_errors() -> None:
    drop = pl.DataFrame(
        {"goals": [40], "unpaired_goals": [0], "drop": [0.25], "ci_low": [0.1], "ci_high": [0.4]}
    )
    assert headline_text(report.headline_section(drop=drop)) == [
        "Barriers cost task success (TS without minus with): +25.0 pp [10.0, 40.0] over 40 goals."
    ]
    takeover = pl.DataFrame(
        {
            "agent": ["a", "b", "c"],
            "k": [3, 3, 3],
            "attempts": [30, 60, 90],
            "attempted_states": [10, 20, 30],
            "ear": [0.5, 0.2, None],
            "ear_ci_low": [0.3, 0.1, None],
            "ear_ci_high": [0.7, 0.35, None],
            "pass_at_k": [0.1, 0.3, 0.2],
        }
    )
    assert headline_text(report.headline_section(takeover=takeover)) == [
        "EAR (attempts that noticed the inherited error): highest a 50.0 pp [30.0, 70.0] of 30 "
        "attempts; lowest b 20.0 pp [10.0, 35.0] of 60 attempts.",
        "pass@3 (a state passed in any of 3 tries): highest b 30.0 pp of 20 states; lowest a "
        "10.0 pp of 10 states.",
    ]
