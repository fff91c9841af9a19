"""Every number the report shows is the number the run wrote (ARCHITECTURE §6).

``recoverylab demo`` writes its results as parquet and ``report.html`` from them; synthetic runs
write ``recoverylab paired --out`` (``goal --out``, ``takeover --out-dir``) and ``recoverylab
report`` on the same tables with the same settings. This module
parses the rendered tables with the standard library's ``html.parser`` and compares every cell
with the value in the parquet the same run wrote, after the documented display rounding (rates
in percentage points, × 100, one decimal; counts as written; p-values to two significant
digits): each value sits in an element whose ``data-column`` names its column, and a row is
found in the parquet by its key cells. ``—`` must stand exactly for a null.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from recoverylab._display import ALL, MISSING, is_rate, p_str
from recoverylab.cli import main

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

#: The parquet files behind each section of the demo report; a cohort key added by the demo
#: (both cohorts in one table) names the file each row comes from.
DEMO_SOURCES: dict[str, dict[str | None, str]] = {
    "paired-rescue-harm": {
        "full": "paired/main_full_summary.parquet",
        "factual_success": "paired/main_factual_summary.parquet",
    },
    "paired-effect": {
        "full": "paired/main_full_summary.parquet",
        "factual_success": "paired/main_factual_summary.parquet",
    },
    "paired-contrast": {
        "full": "paired/main_full_contrast.parquet",
        "factual_success": "paired/main_factual_contrast.parquet",
    },
    "paired-overlap": {None: "paired/mechanism_overlap.parquet"},
    "paired-policy": {None: "paired/policy_summary.parquet"},
    "router-policies": {None: "router_evaluation.parquet"},
    "router-uplift": {None: "router_uplift.parquet"},
    "goal-ts": {None: "goal/synthetic_by_model.parquet"},
    "goal-reasons": {None: "goal/synthetic_summary.parquet"},
    "goal-drop": {None: "goal/synthetic_drop.parquet"},
    "takeover-depth": {None: "takeover/summary.parquet"},
    "takeover-funnel": {None: "takeover/summary_by_agent.parquet"},
    "takeover-pass-hat-k": {None: "takeover/reliability.parquet"},
    # judged outcomes of the judged samples (issue 40): the judge's agreement, PPI++ cells
    "judged-agreement": {None: "paired/judged_agreement.parquet"},
    "judged-estimates": {None: "paired/judged_summary.parquet"},
    "takeover-judged-agreement": {None: "takeover/judged_agreement.parquet"},
    "takeover-judged-estimates": {None: "takeover/judged.parquet"},
    "takeover-judged-pass-k": {None: "takeover/judged_pass_k.parquet"},
    "goal-judged-agreement": {None: "goal/judged_agreement.parquet"},
    "goal-judged-estimates": {None: "goal/judged.parquet"},
}


# ------------------------------------------------------------------------------------------------
# Reading the rendered tables
# ------------------------------------------------------------------------------------------------


@dataclass
class Value:
    """One shown value: its column, its text, whether it is a rate (pp) and its row lookup."""

    column: str
    text: str = ""
    rate: bool = False
    key: bool = False
    row: dict[str, str] = field(default_factory=dict)


@dataclass
class Table:
    section: str
    headers: list[str] = field(default_factory=list)
    rows: list[list[Value]] = field(default_factory=list)


class Tables(HTMLParser):
    """Every ``table.result`` of a page, by section, with each cell's ``data-column`` values.

    Values outside tables that name their source (``data-source``: the headline's numbers) are
    collected in ``sourced`` with the section whose result they come from.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Table] = []
        self.sourced: list[tuple[str, Value]] = []
        self.headings: list[str] = []
        self._section = ""
        self._stack: list[tuple[str, Value | None]] = []
        self._in_rate = 0
        self._header: list[str] | None = None
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "section" and "id" in attributes:
            self._section = attributes["id"]
        if tag in ("h1", "h2", "h3"):
            self._heading = []
        if tag == "table" and "result" in attributes.get("class", "").split():
            self.tables.append(Table(self._section))
        if tag == "th" and self.tables:
            self._header = []
        if tag == "tr" and self.tables and self._stack_has("tbody"):
            self.tables[-1].rows.append([])
        classes = attributes.get("class", "").split()
        if tag == "td" and "rate" in classes:
            self._in_rate += 1
        value = None
        if "data-source" in attributes:
            rows = {
                name.removeprefix("data-row-"): v
                for name, v in attributes.items()
                if name.startswith("data-row-")
            }
            value = Value(attributes["data-column"], rate=is_rate(attributes["data-column"]))
            value.row = rows
            self.sourced.append((attributes["data-source"], value))
        elif "data-column" in attributes and self.tables:
            rows = {
                name.removeprefix("data-row-"): v
                for name, v in attributes.items()
                if name.startswith("data-row-")
            }
            value = Value(attributes["data-column"], rate=self._in_rate > 0, row=rows)
            value.key = tag == "td" and "key" in classes
            self.tables[-1].rows[-1].append(value)
        self._stack.append((tag, value))

    def _stack_has(self, tag: str) -> bool:
        return any(open_tag == tag for open_tag, _ in self._stack)

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            open_tag, _ = self._stack.pop()
            if open_tag == "td" and tag == "td" and self._in_rate:
                self._in_rate = max(0, self._in_rate - 1)
            if open_tag == tag:
                break
        if tag == "th" and self._header is not None:
            self.tables[-1].headers.append("".join(self._header).strip())
            self._header = None
        if tag in ("h1", "h2", "h3") and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._header is not None:
            self._header.append(data)
        if self._heading is not None:
            self._heading.append(data)
        for _, value in reversed(self._stack):
            if value is not None:
                value.text += data
                break


def parse(page: str) -> Tables:
    parser = Tables()
    parser.feed(page)
    return parser


# ------------------------------------------------------------------------------------------------
# Comparing a shown value with the written one
# ------------------------------------------------------------------------------------------------


def agrees(value: Value, written: object) -> str | None:
    """Return why ``value`` does not show ``written`` (None when it does)."""
    text = value.text.strip()
    missing = written is None or (isinstance(written, float) and math.isnan(written))
    if text == MISSING or missing:
        return None if text == MISSING and missing else f"shows {text!r}, written {written!r}"
    if value.column.startswith("p_") or value.column == "p_value":
        expected = p_str(float(written))  # type: ignore[arg-type]
        return None if text == expected else f"shows {text!r}, written {written!r} ({expected})"
    if isinstance(written, str):
        return None if text == written else f"shows {text!r}, written {written!r}"
    shown = float(text.replace("−", "-").replace(",", ""))
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    scale = 100.0 if value.rate else 1.0
    if abs(shown - float(written) * scale) <= 0.5 * 10**-decimals + 1e-9:  # type: ignore[arg-type]
        return None
    return f"shows {text!r}, written {written!r} (× {scale:g})"


def key_matches(frame: pl.DataFrame, keys: dict[str, str]) -> pl.DataFrame:
    """The rows of ``frame`` whose key columns show as ``keys`` (``all`` and ``—`` are null)."""
    for column, text in keys.items():
        if text in (ALL, MISSING):
            frame = frame.filter(pl.col(column).is_null())
        else:
            frame = frame.filter(pl.col(column).cast(pl.String) == text)
    return frame


def check_table(table: Table, written: pl.DataFrame) -> list[str]:
    """Compare every row of a rendered table with its row in ``written``; return the problems."""
    problems = []
    for number, row in enumerate(table.rows):
        keys = {v.column: v.text.strip() for v in row if v.key}
        matched = key_matches(written, keys)
        where = f"{table.section} row {number} {keys}"
        if matched.height != 1:
            problems.append(f"{where}: {matched.height} rows of the parquet have these keys")
            continue
        for value in row:
            if value.key:
                continue
            source = matched
            if value.row:
                source = key_matches(written, {**keys, **value.row})
                if source.height != 1:
                    problems.append(f"{where}: {value.column} looked up on {value.row}: none")
                    continue
            if value.column not in source.columns:
                problems.append(f"{where}: shows {value.column!r}, which the parquet lacks")
                continue
            wrong = agrees(value, source[value.column].item())
            if wrong:
                problems.append(f"{where}, {value.column}: {wrong}")
    return problems


def written_by(out: Path, sources: dict[str | None, str]) -> pl.DataFrame:
    """The parquet behind a table; with cohorts, each file with its cohort as a key column."""
    frames = [
        pl.read_parquet(out / path).with_columns(pl.lit(cohort).alias("cohort"))
        if cohort is not None
        else pl.read_parquet(out / path)
        for cohort, path in sources.items()
    ]
    return pl.concat(frames, how="diagonal_relaxed")


# ------------------------------------------------------------------------------------------------
# The demo
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Tables]:
    out = tmp_path_factory.mktemp("demo")
    assert main(["--quiet", "demo", "--out", str(out)]) == 0
    return out, parse((out / "report.html").read_text(encoding="utf-8"))


def test_every_number_of_the_demo_report_is_the_written_one(demo: tuple[Path, Tables]) -> None:
    out, page = demo
    assert sorted(t.section for t in page.tables if t.section in DEMO_SOURCES) == sorted(
        DEMO_SOURCES
    )
    problems = []
    for table in page.tables:
        if table.section in DEMO_SOURCES:
            assert table.rows, table.section
            problems += check_table(table, written_by(out, DEMO_SOURCES[table.section]))
    assert problems == []


def test_every_number_of_the_headline_is_the_written_one(demo: tuple[Path, Tables]) -> None:
    out, page = demo
    assert {source for source, _ in page.sourced} == {
        "paired-effect",
        "paired-policy",
        "router-policies",
        "goal-drop",
        "takeover-funnel",
    }
    problems = []
    for source, value in page.sourced:
        written = key_matches(written_by(out, DEMO_SOURCES[source]), value.row)
        if written.height != 1:
            problems.append(f"{source} {value.row}: {written.height} rows")
            continue
        wrong = agrees(value, written[value.column].item())
        if wrong:
            problems.append(f"{source} {value.row} {value.column}: {wrong}")
    assert problems == []
    assert len(page.sourced) > 40


def test_the_headline_names_the_routers_harm_on_clean_runs(demo: tuple[Path, Tables]) -> None:
    out, _ = demo
    page = (out / "report.html").read_text(encoding="utf-8")
    summary = page.split('<ul class="headline">', 1)[1].split("</ul>", 1)[0]
    text = re.sub(r"<[^>]+>", "", summary)
    written = pl.read_parquet(out / "router_evaluation.parquet").filter(
        (pl.col("policy") == "router") & (pl.col("reference") == "never")
    )
    clean = written.filter(pl.col("condition") == "clean").row(0, named=True)
    overall = written.filter(pl.col("condition").is_null()).row(0, named=True)
    # the demo's router harms clean runs
    assert clean["gain"] < 0
    assert clean["p_value"] < 0.05
    expected = (
        f"it harms clean runs ({clean['gain'] * 100:.1f} pp, p = {p_str(clean['p_value'])}) "
        f"while touching {overall['clean_touch_rate'] * 100:.1f} % of the {clean['n']} clean "
        "episodes"
    )
    assert expected in text
    assert text.index("Helped most:") < text.index("router:")


def test_the_policy_all_rows_show_the_written_clean_touch_rate(
    demo: tuple[Path, Tables],
) -> None:
    out, page = demo
    (table,) = [t for t in page.tables if t.section == "router-policies"]
    written = pl.read_parquet(out / "router_evaluation.parquet")
    overall = written.filter(
        (pl.col("policy") == "router") & (pl.col("reference") == "never")
    ).filter(pl.col("condition").is_null())
    clean = written.filter(
        (pl.col("policy") == "router")
        & (pl.col("reference") == "never")
        & (pl.col("condition") == "clean")
    )
    for row in table.rows:
        keys = {v.column: v.text for v in row if v.key}
        if keys == {"policy": "router", "reference": "never", "condition": ALL}:
            shown = {v.column: v.text for v in row}
            assert shown["clean_touch_rate"] == f"{overall['clean_touch_rate'].item() * 100:.1f}"
            assert shown["n"] == str(clean["n"].item())  # the clean episodes, not all
            break
    else:
        pytest.fail("the router's overall row is missing")


def test_headings_and_column_labels_are_unique(demo: tuple[Path, Tables]) -> None:
    _, page = demo
    assert len(page.headings) == len(set(page.headings)), page.headings
    for table in page.tables:
        assert len(table.headers) == len(set(table.headers)), (table.section, table.headers)


def test_the_check_finds_a_wrong_number(demo: tuple[Path, Tables]) -> None:
    # the comparison is not vacuous: one changed value in the parquet is found
    out, page = demo
    (table,) = [t for t in page.tables if t.section == "paired-policy"]
    written = written_by(out, DEMO_SOURCES["paired-policy"])
    assert check_table(table, written) == []
    changed = written.with_columns(
        pl.when(pl.col("condition").is_null())
        .then(pl.col("clean_touch_rate") + 0.01)
        .otherwise(pl.col("clean_touch_rate"))
        .alias("clean_touch_rate")
    )
    assert check_table(table, changed) == [
        "paired-policy row 4 {'condition': 'all'}, clean_touch_rate: shows '0.0', written "
        "0.01 (× 100)"
    ]
    nulled = written.with_columns(pl.lit(None, pl.Int64).alias("rescue"))
    assert any("rescue: shows" in problem for problem in check_table(table, nulled))


# ------------------------------------------------------------------------------------------------
# A synthetic run: `recoverylab paired --out` and `recoverylab report` on the same forks
# ------------------------------------------------------------------------------------------------


def test_every_number_of_a_synthetic_report_is_the_written_one(tmp_path: Path) -> None:
    assert (
        main(["--quiet", "synth", "forks", "--tasks", "40", "--seed", "3", "--out", str(tmp_path)])
        == 0
    )
    forks = str(tmp_path / "forks")
    settings = ["--seed", "5", "--resamples", "500"]
    summary = tmp_path / "summary.parquet"
    assert main(["--quiet", "paired", forks, *settings, "--out", str(summary)]) == 0
    page_path = tmp_path / "report.html"
    assert main(["--quiet", "report", "--forks", forks, *settings, "--out", str(page_path)]) == 0
    page = parse(page_path.read_text(encoding="utf-8"))
    written = pl.read_parquet(summary)
    checked = [t for t in page.tables if t.section in ("paired-rescue-harm", "paired-effect")]
    assert len(checked) == 2
    problems = [problem for table in checked for problem in check_table(table, written)]
    assert problems == []
    assert sum(len(t.rows) for t in checked) == 2 * written.height
    # the headline opens the page, each of its numbers the written one
    assert page.headings[1:3] == ["Summary", "What helped, what harmed, and the verdict"]
    assert page.sourced
    for source, value in page.sourced:
        assert source == "paired-effect"
        row = key_matches(written, value.row)
        assert agrees(value, row[value.column].item()) is None, (value, row)


def test_a_gate_report_opens_with_the_verdict_then_the_gate(tmp_path: Path) -> None:
    from recoverylab import paired
    from tests.conftest import SAMPLES

    folder = SAMPLES / "paired"
    forks, decisions = folder / "policy_forks.parquet", folder / "policy_decisions.parquet"
    policy = folder / "gate_policy.toml"
    out = tmp_path / "report.html"
    arguments = ["--forks", str(forks), "--decisions", str(decisions), "--policy", str(policy)]
    assert main(["--quiet", "report", *arguments, "--resamples", "200", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    page = parse(text)
    result = paired.gate(forks, paired.read_policy(policy), decisions=decisions)
    assert page.headings[1:4] == [
        "Summary",
        "What helped, what harmed, and the verdict",
        "Ship or hold",
    ]
    first = re.search(r'<ul class="headline"><li>(.*?)</li>', text)
    assert first is not None
    counts = result.claims["verdict"].value_counts().sort("verdict")
    tally = ", ".join(f"{n} {verdict}" for verdict, n in counts.iter_rows())
    assert re.sub(r"<[^>]+>", "", first.group(1)).startswith(
        f"Release gate: {result.verdict} (exit status {result.exit_status}; claim rows: {tally}"
    )
    (gate,) = [t for t in page.tables if t.section == "gate"]
    written = result.claims.with_columns(pl.col("cell").cast(pl.String))
    assert check_table(gate, written) == []


@pytest.mark.slow
def test_every_number_of_a_synthetic_goal_and_takeover_report_is_the_written_one(
    tmp_path: Path,
) -> None:
    # `recoverylab goal --out`, `takeover --out-dir` and `report` on the same synthetic tables
    for table in ("takeover", "goal"):
        synth = ["--quiet", "synth", table, "--tasks", "15", "--seed", "2", "--out", str(tmp_path)]
        assert main(synth) == 0
    settings = ["--seed", "5", "--resamples", "200"]
    takeover = [f"--{t}" for t in ("states", "attempts")]
    goal = [f"--{t}" for t in ("cases", "resources", "episodes", "steps", "citations")]
    inputs = {name: str(tmp_path / name.removeprefix("--")) for name in (*takeover, *goal)}
    given = {name: [name, path] for name, path in inputs.items()}
    run = ["--quiet", "takeover", *given["--states"], *given["--attempts"], *settings]
    assert main([*run, "--out-dir", str(tmp_path / "takeover_out")]) == 0
    run = ["--quiet", "goal", *(a for name in goal for a in given[name]), *settings]
    assert main([*run, "--out", str(tmp_path / "by_regime.parquet")]) == 0
    assert main([*run, "--by", "model,regime", "--out", str(tmp_path / "by_model.parquet")]) == 0
    page_path = tmp_path / "report.html"
    every = [a for args in given.values() for a in args]
    assert main(["--quiet", "report", *every, *settings, "--out", str(page_path)]) == 0
    page = parse(page_path.read_text(encoding="utf-8"))
    sources = {
        "goal-ts": "by_model.parquet",
        "goal-reasons": "by_regime.parquet",
        "takeover-depth": "takeover_out/summary.parquet",
        "takeover-pass-hat-k": "takeover_out/reliability.parquet",
    }
    checked = [t for t in page.tables if t.section in sources]
    assert sorted(t.section for t in checked) == sorted(sources)
    for table in checked:
        written = pl.read_parquet(tmp_path / sources[table.section])
        assert len(table.rows) == written.height, table.section
        assert check_table(table, written) == [], table.section


def test_every_number_of_a_judged_report_is_the_written_one(tmp_path: Path) -> None:
    # `synth forks` with a judge of known error, `paired --judge --gold` (with --judge-out) and
    # `report --judge --gold` on the same forks: both judged tables show the written numbers
    judged = ["--judge-sensitivity", "clean=0.95,*=0.85", "--judge-specificity", "0.8"]
    synth = ["synth", "forks", "--tasks", "400", "--seed", "4", "--out", str(tmp_path)]
    assert main(["--quiet", *synth, *judged, "--gold-share", "0.3"]) == 0
    forks = str(tmp_path / "forks")
    columns = ["--judge", "judge", "--gold", "gold"]
    estimates, agreement = tmp_path / "judged.parquet", tmp_path / "agreement.parquet"
    run = ["--quiet", "paired", forks, *columns, "--out", str(estimates)]
    assert main([*run, "--judge-out", str(agreement)]) == 0
    page_path = tmp_path / "report.html"
    report = ["--quiet", "report", "--forks", forks, *columns, "--resamples", "200"]
    assert main([*report, "--out", str(page_path)]) == 0
    text = page_path.read_text(encoding="utf-8")
    page = parse(text)
    assert "Judged outcomes" in page.headings
    sources = {"judged-estimates": estimates, "judged-agreement": agreement}
    checked = [t for t in page.tables if t.section in sources]
    assert sorted(t.section for t in checked) == sorted(sources)
    for table in checked:
        written = pl.read_parquet(sources[table.section])
        assert len(table.rows) == written.height, table.section
        assert check_table(table, written) == [], table.section
    # both the PPI++ cells and the gold-only fallback are shown, each method named in the
    # provenance in the report's own words for it (whichever PPI++ interval the cells got)
    from recoverylab.report._methods import INTERVAL_METHODS

    methods = set(pl.read_parquet(estimates)["ci_method"].drop_nulls())
    assert "korn-graubard" in methods
    assert any(method.startswith("ppi++") for method in methods), methods
    for method in methods:
        assert INTERVAL_METHODS[method].label.format(cluster="tasks") in html.unescape(text)


# ------------------------------------------------------------------------------------------------
# Judged outcomes (issue 40): the demo's judged samples, and `report` on judged takeover/goal
# ------------------------------------------------------------------------------------------------

#: The judged sections of the demo report and, per section, the columns every row must show.
JUDGED_COLUMNS = {
    "judged-agreement": ("measure", "estimate", "ci_low", "ci_high", "n", "n_clusters"),
    "judged-estimates": ("estimate", "judge_estimate", "gold_estimate", "labelled_share"),
}


def test_the_demo_report_shows_every_judged_row_of_every_protocol(
    demo: tuple[Path, Tables],
) -> None:
    # per protocol: the judge's agreement and corrected vs judge-only vs gold-only, all rows
    out, page = demo
    judged = {t.section: t for t in page.tables if "judged" in t.section}
    # paired and goal: agreement and estimates; takeover: pass@k and pass^k as well
    assert sorted(judged) == sorted(s for s in DEMO_SOURCES if "judged" in s)
    assert len(judged) == 7
    for section, table in judged.items():
        written = written_by(out, DEMO_SOURCES[section])
        assert len(table.rows) == written.height, section
        kind = "judged-agreement" if section.endswith("agreement") else "judged-estimates"
        for row in table.rows:
            shown = {v.column for v in row}
            assert set(JUDGED_COLUMNS[kind]) <= shown, (section, shown)
    # the takeover judges decided both outcomes; pass@3 and pass^3 come from the judge of passed
    takeover = pl.read_parquet(out / "takeover" / "judged.parquet")
    assert sorted(set(takeover["judged_outcome"])) == ["aware", "passed"]
    assert takeover.height == 12
    pass_k = pl.read_parquet(out / "takeover" / "judged_pass_k.parquet")
    assert sorted(set(pass_k["metric"])) == ["pass@k", "pass^k"]
    assert set(pass_k["k"]) == {3}
    assert pl.read_parquet(out / "goal" / "judged.parquet")["regime"].to_list() == [
        "barrier_free",
        "recoverable",
        "unrecoverable",
    ]
    text = (out / "report.html").read_text(encoding="utf-8")
    for subject in ("Paired forks", "Takeover", "Goal preservation"):
        assert f"{subject}: corrected (PPI++) vs judge-only vs gold-only" in text
        assert f"{subject}: the judge against the gold labels" in text
    assert "data_samples/takeover/judged_attempts.parquet" in text


def _takeover_units(states: Path, attempts: Path) -> pl.DataFrame:
    """Attempts on eligible states (replay and expected values checked), with their agent."""
    eligible = pl.read_parquet(states).filter(pl.col("replay_ok") & pl.col("expected_ok"))
    return pl.read_parquet(attempts).join(eligible.select("state_id"), on="state_id")


def _agreement_by_hand(units: pl.DataFrame, by: str, judge: str, gold: str) -> pl.DataFrame:
    """Sensitivity, specificity and agreement over the labelled units, computed directly."""
    labelled = units.filter(pl.col(gold).is_not_null())
    right = pl.col(judge) == pl.col(gold)
    measures = {
        "sensitivity": pl.col(gold),
        "specificity": ~pl.col(gold),
        "agreement": pl.lit(value=True),
    }
    return pl.concat(
        labelled.filter(among)
        .group_by(by)
        .agg(right.mean().alias("estimate"), pl.len().cast(pl.Int64).alias("n"))
        .with_columns(pl.lit(measure).alias("measure"))
        for measure, among in measures.items()
    )


@pytest.mark.slow
def test_every_number_of_a_judged_takeover_and_goal_report_is_the_written_one(
    tmp_path: Path,
) -> None:
    # `takeover --judge --gold --by agent`, `goal --judge --gold --judged-out` and `report
    # --takeover-judge/--goal-judge` on the judged samples: the report's estimates are the
    # commands' frames; its agreement tables equal a direct count over the labelled units
    from tests.conftest import SAMPLES

    states, attempts = (
        SAMPLES / "takeover" / "states.parquet",
        SAMPLES / "takeover" / "judged_attempts.parquet",
    )
    goal_dir, episodes = (
        SAMPLES / "goal" / "synthetic",
        SAMPLES / "goal" / "judged_episodes.parquet",
    )
    goal = [
        a
        for name in ("cases", "resources", "episodes", "steps", "citations")
        for a in (f"--{name}", str(episodes if name == "episodes" else goal_dir / name))
    ]
    takeover = ["--states", str(states), "--attempts", str(attempts)]
    settings = ["--resamples", "50"]
    judge = ["--judge", "judge_passed", "--gold", "gold_passed"]
    run = ["--quiet", "takeover", *takeover, *judge, "--by", "agent", *settings]
    assert main([*run, "--out-dir", str(tmp_path / "takeover_out")]) == 0
    goal_judge = ["--judge", "judge_success", "--gold", "gold_success"]
    goal_out = ["--out", str(tmp_path / "goal.parquet")]
    judged_out = ["--judged-out", str(tmp_path / "goal_judged.parquet")]
    assert main(["--quiet", "goal", *goal, *goal_judge, *settings, *goal_out, *judged_out]) == 0
    page_path = tmp_path / "report.html"
    judges = ["--takeover-judge", "judge_passed", "--takeover-gold", "gold_passed"]
    judges += ["--goal-judge", "judge_success", "--goal-gold", "gold_success"]
    report = ["--quiet", "report", *takeover, *goal, *judges, *settings]
    assert main([*report, "--out", str(page_path)]) == 0
    page = parse(page_path.read_text(encoding="utf-8"))
    tables = {t.section: t for t in page.tables if "judged" in t.section}
    assert sorted(tables) == [
        "goal-judged-agreement",
        "goal-judged-estimates",
        "takeover-judged-agreement",
        "takeover-judged-estimates",
        "takeover-judged-pass-k",
    ]
    written = {
        "takeover-judged-estimates": pl.read_parquet(
            tmp_path / "takeover_out" / "judged.parquet"
        ).with_columns(pl.lit("passed").alias("judged_outcome")),
        "takeover-judged-pass-k": pl.read_parquet(
            tmp_path / "takeover_out" / "judged_pass_k.parquet"
        ),
        "goal-judged-estimates": pl.read_parquet(tmp_path / "goal_judged.parquet"),
    }
    for section, frame in written.items():
        assert len(tables[section].rows) == frame.height, section
        assert check_table(tables[section], frame) == [], section
    by_hand = {
        "takeover-judged-agreement": _agreement_by_hand(
            _takeover_units(states, attempts), "agent", "judge_passed", "gold_passed"
        ).with_columns(pl.lit("passed").alias("judged_outcome")),
        "goal-judged-agreement": _agreement_by_hand(
            pl.read_parquet(episodes).join(
                pl.read_parquet(goal_dir / "cases").select("case_id", "regime"), on="case_id"
            ),
            "regime",
            "judge_success",
            "gold_success",
        ),
    }
    for section, frame in by_hand.items():
        table = tables[section]
        assert len(table.rows) == frame.height, section
        for row in table.rows:
            keys = {v.column: v.text.strip() for v in row if v.key and v.column != "ci_method"}
            (expected,) = key_matches(frame, keys).iter_rows(named=True)
            shown = {v.column: v for v in row}
            assert agrees(shown["estimate"], expected["estimate"]) is None, (section, keys)
            assert agrees(shown["n"], expected["n"]) is None, (section, keys)
