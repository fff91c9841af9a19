"""Tests of ``recoverylab report`` (recoverylab.cli._report)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from recoverylab import paired
from recoverylab.cli import _report
from recoverylab.router import compare
from tests.conftest import SAMPLES

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

PAIRED = SAMPLES / "paired"
ROUTER = SAMPLES / "router"
GOAL = SAMPLES / "goal" / "synthetic"
TAKEOVER = SAMPLES / "takeover"
GOAL_ARGS = [arg for name in _report._GOAL_TABLES for arg in (f"--{name}", GOAL / name)]
EVERY_SECTION = [
    "summary",
    "paired-rescue-harm",
    "paired-effect",
    "paired-contrast",
    "paired-overlap",
    "paired-policy",
    "router-policies",
    "router-uplift",
    "goal-ts",
    "goal-reasons",
    "goal-drop",
    "takeover-depth",
    "takeover-funnel",
    "takeover-pass-hat-k",
]


def section_ids(page: str) -> list[str]:
    return re.findall(r'<section class="section" id="([^"]+)">', page)


@pytest.fixture(scope="module")
def rule(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An anomaly rule exported as JSON (fitted on a small synthetic set: fast)."""
    from recoverylab import synth
    from recoverylab.router import AnomalyRouter

    train = synth.generate("decision_points", 150, seed=5, prefix="fit")
    features = ["repetition", "noops", "obs_novelty", "consistency", "progress", "context_used"]
    fitted = AnomalyRouter().fit(train["decision_points"], train["forks"], features)
    return fitted.to_json(tmp_path_factory.mktemp("rule") / "anomaly.json")


def test_report_of_every_protocol(cli: Callable, rule: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = cli(
        "report",
        "--forks",
        PAIRED / "main_forks.parquet",
        "--overlap",
        "refresh,content_ablated",
        "--overlap-forks",
        PAIRED / "mechanism_forks.parquet",
        "--decisions",
        PAIRED / "policy_decisions.parquet",
        "--policy-forks",
        PAIRED / "policy_forks.parquet",
        "--rule",
        rule,
        "--decision-points",
        ROUTER / "test" / "decision_points.parquet",
        "--router-forks",
        ROUTER / "test" / "forks.parquet",
        *GOAL_ARGS,
        "--states",
        TAKEOVER / "states.parquet",
        "--attempts",
        TAKEOVER / "attempts.parquet",
        "--resamples",
        100,
        "--seed",
        4,
        "--title",
        "Runs of week 12",
        "--out",
        out,
    )
    assert result.code == 0, result.err
    assert f"wrote {out} ({len(EVERY_SECTION)} sections)" in result.err
    page = out.read_text(encoding="utf-8")
    assert section_ids(page) == EVERY_SECTION
    assert page.count('<div class="chart" id="chart-') == len(EVERY_SECTION) - 1  # no summary
    assert page.count('<details class="provenance-block" open>') == len(EVERY_SECTION)
    assert "<title>Runs of week 12</title>" in page
    # Provenance: inputs relative to the checkout with row counts, settings, exclusions.
    assert "<code>forks</code>: data_samples/paired/main_forks.parquet (1,054 rows)" in page
    assert "<dt>seed</dt><dd>4</dd>" in page
    assert "<dd>100 resamples, 95% intervals</dd>" in page
    assert "<dd>prefix_mismatch: 42</dd>" in page  # the mechanism forks, for the overlap
    assert "<dt>rules</dt>" in page
    # The report's numbers are the protocol's: the first cell's effect in pp.
    summary = paired.summarize(PAIRED / "main_forks.parquet", n_resamples=100, seed=4)
    first = summary.row(0, named=True)
    assert f'data-column="effect">{first["effect"] * 100:+.1f}</span> <span' in page


def test_report_of_one_protocol(cli: Callable, tmp_path: Path) -> None:
    out = tmp_path / "goal.html"
    result = cli("--quiet", "report", *GOAL_ARGS, "--resamples", 100, "--out", out)
    assert result.code == 0, result.err
    page = out.read_text(encoding="utf-8")
    # the headline reads the barrier drop: what access barriers cost
    assert section_ids(page) == ["summary", "goal-ts", "goal-reasons", "goal-drop"]
    assert "<strong>Barriers cost</strong> task success" in page


def test_a_result_without_rows_has_no_section(cli: Callable, tmp_path: Path) -> None:
    # The diagnostic cases have no barrier-free regime: no goal can be paired for the drop.
    diagnostic = SAMPLES / "goal" / "diagnostic"
    tables = [a for n in _report._GOAL_TABLES for a in (f"--{n}", diagnostic / f"{n}.csv")]
    out = tmp_path / "diagnostic.html"
    result = cli("report", *tables, "--resamples", 100, "--out", out)
    assert result.code == 0, result.err
    assert "the barrier drop (no goal has both sides) has no rows" in result.err
    assert section_ids(out.read_text(encoding="utf-8")) == ["goal-ts", "goal-reasons"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [],
            "give the inputs of at least one protocol: --forks, --decisions, --rule with "
            "--decision-points, --cases/--resources/--episodes, or --states/--attempts.",
        ),
        (["--cases", GOAL / "cases"], "the goal report needs --resources, --episodes as well."),
        (["--states", TAKEOVER / "states.parquet"], "the takeover report needs --attempts"),
        (["--overlap", "a,b"], "`--contrast` and `--overlap` need `--forks`."),
        (
            ["--decisions", PAIRED / "policy_decisions.parquet"],
            "`--decisions` needs `--policy-forks` (or `--forks`).",
        ),
        (
            ["--decision-points", ROUTER / "test" / "decision_points.parquet"],
            "the router report needs --rule, --decision-points and --router-forks (or --forks).",
        ),
        (
            ["--forks", PAIRED / "main_forks.parquet", "--contrast", "stale2,clean,missing"],
            "`--contrast` is 'stale2,clean,missing'; give two conditions.",
        ),
        (
            [*GOAL_ARGS[:6], "--steps", GOAL / "steps"],
            "give both --steps and --citations, or neither (episodes in the nested form).",
        ),
        (["--judge", "judge", "--gold", "gold"], "`--judge` and `--gold` need `--forks`."),
        (
            ["--forks", PAIRED / "main_forks.parquet", "--judge", "judge"],
            "the judged report needs --gold as well.",
        ),
        (
            ["--forks", PAIRED / "main_forks.parquet", "--judge", "judge", "--gold", "gold"],
            "forks: the judge column `judge` is not in the table",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    cli: Callable, tmp_path: Path, args: list, message: str
) -> None:
    result = cli("report", *args, "--resamples", 50, "--out", tmp_path / "r.html")
    assert result.code == 2
    assert result.err.strip().splitlines()[-1].startswith("recoverylab report: error: ")
    assert message in result.err
    assert not (tmp_path / "r.html").exists()


def test_out_must_be_html_and_not_an_input(cli: Callable, tmp_path: Path) -> None:
    result = cli("report", *GOAL_ARGS, "--out", tmp_path / "r.parquet")
    assert result.code == 2
    assert "`--out` is `" in result.err
    assert "the report is an .html file." in result.err
    copy = tmp_path / "cases.html"
    copy.write_bytes((GOAL / "cases" / "part-00000.parquet").read_bytes())
    result = cli("report", "--cases", copy, *GOAL_ARGS[2:], "--out", copy)
    assert result.code == 2
    assert "which is also an input" in result.err


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_without_the_extra_report_fails_and_demo_skips_it(tmp_path: Path) -> None:
    result = run_python(
        "import sys\n"
        "sys.modules['altair'] = None  # as if the report extra were not installed\n"
        "from recoverylab.cli import main, _report\n"
        f"code = main(['report', '--states', {str(TAKEOVER / 'states.parquet')!r}, "
        f"'--attempts', {str(TAKEOVER / 'attempts.parquet')!r}, "
        f"'--out', {str(tmp_path / 'r.html')!r}])\n"
        f"print(code, _report.demo_report(__import__('pathlib').Path({str(tmp_path)!r}), print))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "None"]
    assert result.stderr.splitlines() == [
        "recoverylab report: error: the optional package `altair` is needed for charts but is "
        "not installed. Hint: pip install 'recoverylab[report]'",
        "recoverylab demo: report.html skipped: the optional package `altair` is needed for "
        "charts but is not installed. Hint: pip install 'recoverylab[report]'",
    ]
    assert not (tmp_path / "r.html").exists()


def test_demo_settings_are_the_protocol_defaults() -> None:
    # The demo report states the resampling settings of each demo; the paired and router demos
    # rely on the functions' defaults (the goal and takeover settings are checked against the
    # demo's own outputs in tests/test_browser.py).
    for function in (paired.summarize, paired.contrast, paired.evaluate_policy, compare):
        defaults = {
            name: p.default
            for name, p in inspect.signature(function).parameters.items()
            if name in ("seed", "n_resamples", "confidence")
        }
        assert defaults == _report.DEMO_SETTINGS["paired"] == _report.DEMO_SETTINGS["router"]


def test_demo_without_scikit_learn_skips_the_router_and_runs_the_rest(tmp_path: Path) -> None:
    result = run_python(
        "import sys\n"
        "sys.modules['sklearn'] = None  # as if the router extra were not installed\n"
        "from recoverylab.cli import main\n"
        f"sys.exit(main(['--quiet', 'demo', '--out', {str(tmp_path)!r}]))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "recoverylab demo: router skipped: fitting a router needs scikit-learn, which is not "
        "installed; install it with `pip install 'recoverylab[router]'`."
    ]
    assert not list(tmp_path.glob("router_*"))
    report = (tmp_path / "report.html").read_text()
    for group in (
        "Paired recovery (CIR paired forks)",
        "Goal preservation",
        "Takeover from replayed",
    ):
        assert f">{group}" in report
    assert ">Recovery router (CIR router)<" not in report
