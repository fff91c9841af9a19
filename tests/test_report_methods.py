"""The report's words about methods match what the result computed (issue 29, item 4).

Every ``ci_method`` the package supports is requested from the protocols; each section is
rendered from the result and its reading and provenance are checked against the method its
cells actually got (the ``ci_method`` column): the interval named, a mixed result said to be
mixed, resamples counted only when an interval resampled (0 otherwise), the test named.
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

import polars as pl
import pytest

from recoverylab import goal, paired, report, stats, takeover
from recoverylab._errors import RecoveryLabWarning, SchemaError
from recoverylab.report._methods import INTERVAL_METHODS

SAMPLES = Path(__file__).resolve().parents[1] / "data_samples"
PAIRED = SAMPLES / "paired"
RESAMPLES = 200
#: A level other than 95% and a number of resamples other than the default, so that words
#: copied from a default cannot pass.
PROVENANCE = report.Provenance(
    inputs=(report.Input("forks", "f.parquet", 10),),
    seed=3,
    n_resamples=RESAMPLES,
    confidence=0.9,
)

#: What a reader must find for each method, written here independently of the report's table:
#: a phrase that names it, and whether it resamples.
NAMES = {
    "fay-lumbard": ("exact Fay–Lumbard method", False),
    "cluster-melded": ("cluster meld", False),
    "sign-flip": ("inversion of the sign-flip test", False),
    "percentile": ("percentile bootstrap", True),
    "bca": ("BCa", True),
}
REQUESTED = stats.PAIRED_CI_METHODS


@functools.cache
def summary(ci_method: str) -> pl.DataFrame:
    return paired.summarize(
        PAIRED / "main_forks.parquet", ci_method=ci_method, n_resamples=RESAMPLES
    )


@functools.cache
def policy(ci_method: str) -> pl.DataFrame:
    return paired.evaluate_policy(
        PAIRED / "policy_decisions.parquet",
        PAIRED / "policy_forks.parquet",
        ci_method=ci_method,
        n_resamples=RESAMPLES,
    )


def computed(frame: pl.DataFrame) -> dict[str, int]:
    """Cells per interval method, as the result says."""
    return dict(frame.group_by("ci_method").len().iter_rows())


def check_words(section: report.Section, frame: pl.DataFrame, *, reading: bool = True) -> None:
    """The reading (if it names the interval) and provenance name the methods of ``frame``."""
    methods = computed(frame)
    html = section.body_html("")
    provenance = section.provenance.to_html()
    intervals = re.search(r"<dt>intervals</dt><dd>(.*?)</dd>", provenance)
    assert intervals is not None, provenance
    for name, (phrase, _) in NAMES.items():
        assert (phrase in intervals.group(1)) == (name in methods), (name, provenance)
        assert phrase not in section.reading or reading
    assert "sign-flip test of the per-task" in provenance
    resampled = any(NAMES[m][1] for m in methods)
    if resampled:
        assert "<dd>200 resamples, 90% intervals</dd>" in provenance
        assert section.provenance.n_resamples == RESAMPLES
    else:
        assert "<dd>none drawn (0 resamples), 90% intervals</dd>" in provenance
        assert "200 resamples" not in html
        assert section.provenance.n_resamples == 0
    if not reading:
        assert "bootstrap" not in section.reading
        return
    for name, (phrase, _) in NAMES.items():
        assert (phrase in section.reading) == (name in methods), (name, section.reading)
    assert ("bootstrap" in section.reading) == resampled
    assert ("resamples whole tasks" in section.reading) == resampled
    assert "90% interval" in section.reading
    assert "95%" not in section.reading
    if len(methods) > 1:
        assert "differs by cell (the ci_method column)" in section.reading
        for name, cells in methods.items():
            noun = "cell" if cells == 1 else "cells"
            after = section.reading.split(f"{cells} {noun} from ")[1]
            assert after.split(" from ")[0].count(NAMES[name][0]) == 1, (name, after)
            assert f"{cells} {noun}" in provenance
    else:
        assert "differs by cell" not in section.reading
        assert f"{frame.height} cells" in provenance
    agree = [not NAMES[m][1] for m in methods]
    # the p-value beside each interval is that of the test it inverts (the `test` column)
    agreement = "exactly when its p-value is below 1 − confidence"
    assert (agreement in section.reading) == all(agree)
    assert html.count(section.reading.split(".")[0].replace("'", "&#x27;")) == 1


def test_every_supported_method_has_words() -> None:
    assert set(REQUESTED) - {"auto"} == set(NAMES) <= set(INTERVAL_METHODS)


def test_the_requests_reach_every_method() -> None:
    # The words are checked against what was computed, so every method must be computed by
    # one of the requests below (a request for the cluster meld on one-pair cells gets
    # Fay–Lumbard: the column, not the request, says which).
    reached = set()
    for requested in REQUESTED:
        reached |= set(computed(summary(requested))) | set(computed(policy(requested)))
    assert reached == set(NAMES)
    assert set(computed(summary("cluster-melded"))) == {"fay-lumbard"}
    assert len(computed(policy("auto"))) == 2  # mixed: the overall row has several pairs a task


@pytest.mark.parametrize("requested", REQUESTED)
def test_effect_section_names_the_computed_interval(requested: str) -> None:
    frame = summary(requested)
    check_words(report.effect_section(frame, PROVENANCE), frame)
    check_words(report.rescue_harm_section(frame, PROVENANCE), frame, reading=False)


@pytest.mark.parametrize("method", NAMES)
def test_the_words_follow_the_column(method: str) -> None:
    # the same cells relabelled: the words change with the column, not with the request
    relabel = pl.lit(method).alias("ci_method")
    frame = summary("auto").with_columns(relabel)
    check_words(report.effect_section(frame, PROVENANCE), frame)
    frame = policy("auto").with_columns(relabel)
    check_words(report.policy_section(frame, PROVENANCE), frame)


@pytest.mark.parametrize("requested", REQUESTED)
def test_policy_section_names_each_cells_interval(requested: str) -> None:
    frame = policy(requested)
    check_words(report.policy_section(frame, PROVENANCE), frame)


@pytest.mark.parametrize("requested", ["auto", "bca"])
def test_contrast_section_names_its_bootstrap(requested: str) -> None:
    frame = paired.contrast(
        PAIRED / "main_forks.parquet", "stale2", "clean", ci_method=requested, n_resamples=50
    )
    section = report.contrast_section(frame, PROVENANCE)
    expected = "percentile" if requested == "auto" else "bca"  # the contrast has no exact CI
    assert set(frame["ci_method"]) == {expected}
    assert ("BCa" in section.reading) == (expected == "bca")
    assert ("percentile bootstrap" in section.reading) == (expected == "percentile")
    assert "each resample of tasks serving both effects" in section.reading
    assert "<dd>200 resamples, 90% intervals</dd>" in section.provenance.to_html()
    assert "sign-flip test of the per-cluster summed differences" in section.provenance.to_html()


def test_the_rendered_report_says_what_each_section_computed() -> None:
    exact, mixed, boot = summary("auto"), policy("auto"), summary("percentile")
    sections = [
        report.effect_section(exact, PROVENANCE),
        report.policy_section(mixed, PROVENANCE),
        report.effect_section(
            boot, PROVENANCE, key="paired-effect-bootstrap", title="Effect, bootstrap"
        ),
    ]
    page = report.render_html(sections)
    blocks = page.split('<section class="section"')[1:]
    assert len(blocks) == 3
    assert "exact Fay–Lumbard method" in blocks[0]
    assert "bootstrap" not in blocks[0]
    assert "none drawn (0 resamples)" in blocks[0]
    assert "differs by cell" in blocks[1]
    assert "cluster meld" in blocks[1]
    assert "none drawn (0 resamples)" in blocks[1]
    assert "percentile bootstrap that resamples whole tasks" in blocks[2]
    assert "200 resamples, 90% intervals" in blocks[2]
    assert "Fay–Lumbard" not in blocks[2]


def test_results_without_a_ci_method_column_are_the_cluster_bootstrap() -> None:
    folder = SAMPLES / "goal" / "diagnostic"
    tables = ("cases", "resources", "episodes", "steps", "citations")
    scored = goal.score(*(folder / f"{t}.csv" for t in tables)).collect()
    summary = goal.summarize(scored, n_resamples=RESAMPLES).drop("ci_method", "test", strict=False)
    ts = report.ts_section(summary, PROVENANCE)
    assert "90% interval from a bootstrap that resamples whole goals" in ts.reading
    assert "<dd>200 resamples, 90% intervals</dd>" in ts.provenance.to_html()
    assert "cluster bootstrap over goals" in ts.provenance.to_html()
    states = SAMPLES / "takeover" / "states.parquet"
    attempts = SAMPLES / "takeover" / "attempts.parquet"
    by_depth = takeover.summarize(states, attempts, n_resamples=20)
    depth = report.depth_section(by_depth.drop("ci_method", "test", strict=False), PROVENANCE)
    assert "bootstrap that resamples whole workflows" in depth.reading
    assert "cluster bootstrap over workflows" in depth.provenance.to_html()


def test_a_section_without_provenance_level_names_no_level() -> None:
    frame = summary("auto")
    section = report.effect_section(frame, report.Provenance())
    assert "with an interval from the exact Fay–Lumbard method" in section.reading
    assert "%" not in section.reading
    # nothing was drawn, whatever the settings were
    assert "<dt>resampling</dt><dd>none drawn (0 resamples)</dd>" in section.provenance.to_html()


def test_a_method_the_report_has_no_words_for_is_named_as_the_column_names_it() -> None:
    frame = summary("auto").with_columns(
        pl.when(pl.int_range(pl.len()) < 2)
        .then(pl.lit("jackknife"))
        .otherwise(pl.col("ci_method"))
        .alias("ci_method")
    )
    section = report.effect_section(frame, PROVENANCE)
    assert "2 cells from the jackknife method (as the result's ci_method names it)" in (
        section.reading
    )
    nulls = summary("auto").with_columns(pl.lit(None, pl.String).alias("ci_method"))
    with pytest.raises(SchemaError) as error:
        report.effect_section(nulls, PROVENANCE)
    assert str(error.value) == (
        f"report: column `ci_method` has {nulls.height} rows with a method the report cannot "
        "name (null); every interval must name its method."
    )


def test_the_test_column_names_what_each_interval_inverts() -> None:
    frame = summary("auto").with_columns(pl.lit("fay-lumbard").alias("test"))
    frame = frame.with_columns(pl.col("p_value").alias("p_sign_flip"))
    section = report.effect_section(frame, PROVENANCE)
    block = section.provenance.to_html()
    assert (
        "<dt>p-values</dt><dd>the Fay–Lumbard meld's own test at zero "
        f"(the exact McNemar p-value): {frame.height} cells</dd>"
    ) in html.unescape(block)
    assert "<dt>p (sign-flip)</dt><dd>sign-flip test of the per-task summed differences" in block
    assert "it excludes zero exactly when its p-value is below 1 − confidence" in section.reading
    headers = re.findall(r"<th\b[^>]*>(.*?)</th>", section.table)
    assert headers[-2:] == ["p (the interval&#x27;s test)", "p (sign-flip)"]


def test_provenance_of_intervals_that_drew_nothing() -> None:
    block = report.Provenance(n_resamples=0, confidence=0.95).to_html()
    assert "<dt>resampling</dt><dd>none drawn (0 resamples), 95% intervals</dd>" in block
    block = report.Provenance(n_resamples=0).to_html()
    assert "<dt>resampling</dt><dd>none drawn (0 resamples)</dd>" in block
    assert "97.5% intervals" in report.Provenance(n_resamples=5, confidence=0.975).to_html()


def test_cli_help_names_the_methods_the_defaults_compute() -> None:
    from recoverylab.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    helper = commands["paired"]
    options = {a.dest: a for a in helper._actions}
    assert tuple(options["ci_method"].choices) == REQUESTED
    assert options["ci_method"].default == "auto"
    # the default computes the test-based intervals the description names, drawing nothing
    assert set(computed(summary("auto"))) | set(computed(policy("auto"))) == {
        "fay-lumbard",
        "cluster-melded",
    }
    assert "Fay-Lumbard" in helper.description
    assert "cluster meld" in helper.description
    assert "cluster-bootstrap interval" not in helper.description
    assert (
        "exact intervals, such as the default paired ones, draw none" in options["resamples"].help
    )


def test_judged_methods_have_words() -> None:
    # every interval a judged result can name (issue 40), requested or fallen back to, and the
    # test each inverts, has the report's own words (never "as the result's ci_method names it")
    from recoverylab.report._methods import TESTS, interval_method

    judged = [m for m in stats.JUDGED_CI_METHODS if m != "auto"]
    for name in [*judged, "mover", "korn-graubard", "korn-graubard-bonferroni", "rogan-gladen"]:
        assert name in INTERVAL_METHODS, name
        assert "ci_method names it" not in interval_method(name).label
        assert not interval_method(name).resamples
    assert {*stats.JUDGED_TESTS.values(), "mover"} <= set(TESTS)
    # a judged section reads the methods its cells got, here both PPI++ and the fallback
    forks = paired_judged_forks()
    with pytest.warns(RecoveryLabWarning, match="too few for the normal approximation"):
        estimates = paired.summarize_judged(forks, judge="judge", gold="gold")
    section = report.judged_estimates_section(estimates, PROVENANCE)
    intervals = dict(section.provenance.settings)["intervals"]
    counts = dict(estimates["ci_method"].value_counts().iter_rows())
    assert {"ppi++-cp", "mover", "korn-graubard"} <= set(counts)
    for name, cells in counts.items():
        label = INTERVAL_METHODS[name].label.format(cluster="tasks")
        assert f"{label}: {cells:,} cell" in intervals
    assert section.provenance.n_resamples == 0
    assert "whose method differs by cell" in section.reading


def paired_judged_forks() -> pl.DataFrame:
    from recoverylab import synth

    grid = {"conditions": ["stale2", "clean"], "delays": [0], "methods": ["refresh"]}
    return synth.generate(
        "forks", 300, seed=2, **grid, judge_sensitivity=0.9, judge_specificity=0.8, gold_share=0.3
    )["forks"]
