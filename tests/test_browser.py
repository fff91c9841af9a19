"""The demo report in a real browser: ``recoverylab demo`` then headless Debian chromium.

The module runs ``recoverylab demo`` once, checks the report it writes, then opens the report in
headless chromium with networking off, waits for rendering, and checks in the rendered DOM that
every chart is drawn (an SVG in each chart element, no error text from the chart library), that
the page logged nothing to the console, and saves a screenshot under ``test-artifacts/``.

The layout is measured at a desktop (1280×800) and a phone (390×844) viewport: the report is
loaded into an iframe of that size (headless chromium has a minimum window width of 500 px), and
a probe script appended to a copy of the page reports, once every chart is drawn, the page's
``scrollWidth`` against ``innerWidth``, the overflow of every table and its scroll cue, the drawn
charts and the smallest size any chart text is drawn at (font size × the SVG's scale: at least
10 px at either width). The
repair funnel is read from the drawn bars' accessible labels: its nested layers never widen.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it). When it is missing the test
installs it with apt-get; it is skipped only where neither chromium nor apt-get is available.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from recoverylab import goal, takeover
from recoverylab.cli import main
from recoverylab.cli._report import DEMO_SETTINGS
from tests.conftest import REPO, SAMPLES

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

ARTIFACTS = REPO / "test-artifacts"
SECTIONS = [
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
#: The judged-outcome sections (issue 40): a table each, no chart; last, in their own group.
JUDGED_SECTIONS = [
    *("judged-agreement", "judged-estimates"),
    *("takeover-judged-agreement", "takeover-judged-estimates", "takeover-judged-pass-k"),
    *("goal-judged-agreement", "goal-judged-estimates"),
]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    assert main(["--quiet", "demo", "--out", str(out)]) == 0
    return out


# ------------------------------------------------------------------------------------------------
# The demo's report, as written
# ------------------------------------------------------------------------------------------------


def test_demo_writes_the_report(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = (demo_dir / "report.html").read_text(encoding="utf-8")
    # the headline (no chart, no table: a list of findings) opens the report
    shown = ["summary", *SECTIONS, *JUDGED_SECTIONS]
    assert re.findall(r'<section class="section" id="([^"]+)">', page) == shown
    assert page.count('<div class="chart" id="chart-') == len(SECTIONS)
    assert page.count('<table class="result">') == len(SECTIONS) + len(JUDGED_SECTIONS)
    assert page.count('<ul class="headline">') == 1
    assert page.count('<p class="reading">') == len(shown)
    assert page.count('<dl class="provenance">') == len(shown)
    assert "<code>states</code>: data_samples/takeover/states.parquet (" in page
    assert "<dd>state_replay_mismatch: 12, state_missing_expected: 11," in page
    assert "<dd>2,000 resamples, 95% intervals</dd>" in page
    assert "<dd>10,000 resamples, 95% intervals</dd>" in page


def test_demo_report_states_the_demos_real_settings(demo_dir: Path) -> None:
    # The goal and takeover demos resample with their own settings; the report's provenance
    # (DEMO_SETTINGS) must be those: recomputing with them gives the demo's results exactly.
    scored = pl.read_parquet(demo_dir / "goal" / "synthetic_episodes.parquet")
    summary = goal.summarize(scored, by=("regime",), **DEMO_SETTINGS["goal"])
    assert summary.equals(pl.read_parquet(demo_dir / "goal" / "synthetic_summary.parquet"))
    folder = SAMPLES / "takeover"
    pooled = takeover.summarize(
        folder / "states.parquet",
        folder / "attempts.parquet",
        by=("agent",),
        **DEMO_SETTINGS["takeover"],
    )
    assert pooled.equals(pl.read_parquet(demo_dir / "takeover" / "summary_by_agent.parquet"))


# ------------------------------------------------------------------------------------------------
# The report in headless chromium
# ------------------------------------------------------------------------------------------------


def find_chromium() -> str:
    """Path of Debian's chromium; installed with apt-get when missing; skip when impossible."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.skip("neither chromium nor apt-get is available: cannot run the browser test")
    prefix = ["env", "DEBIAN_FRONTEND=noninteractive"]
    if os.geteuid() != 0:
        prefix = ["sudo", "-n", *prefix]
    for command in (
        [*prefix, apt, "update", "-qq"],
        [*prefix, apt, "install", "-y", "-qq", "chromium"],
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            pytest.fail(
                "chromium is missing and `apt-get install chromium` failed "
                f"({' '.join(command)}): {done.stderr.strip()[-500:]}"
            )
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("apt-get installed chromium, but no `chromium` executable is on PATH")
    return found


class Charts(HTMLParser):
    """Per chart element (``div.chart``): whether Vega drew into it (SVG or canvas), its text."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, dict] = {}
        self.errors_box: list[str] = []
        self._stack: list[str | None] = []  # chart id of each open element (None outside)
        self._in_errors = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        current = self._stack[-1] if self._stack else None
        if tag == "div" and "chart" in (attributes.get("class") or "").split():
            current = attributes.get("id") or f"anonymous-{len(self.charts)}"
            self.charts[current] = {
                "drawn": False,
                "text": "",
                "rendered": attributes.get("data-rendered"),
            }
        elif current is not None and (
            tag == "canvas" or (tag == "svg" and "marks" in (attributes.get("class") or ""))
        ):  # Vega's own root element (class "marks"), not an icon of the actions menu
            self.charts[current]["drawn"] = True
        if attributes.get("id") == "report-errors":
            self._in_errors += 1
        if tag not in ("br", "img", "input", "meta", "link", "hr", "wbr"):
            self._stack.append(current)

    def handle_endtag(self, tag: str) -> None:
        if self._stack:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        current = self._stack[-1] if self._stack else None
        if current is not None:
            self.charts[current]["text"] += data


def test_demo_report_renders_in_headless_chromium(demo_dir: Path) -> None:
    chromium = find_chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "demo_report.png"
    screenshot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="recoverylab-chromium-") as profile:
        command = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # no network: the page must not need it
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=30000",
            "--window-size=1280,2400",
            f"--screenshot={screenshot}",
            "--dump-dom",
            (demo_dir / "report.html").as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    # The page logs nothing: any console message (a script error, a Vega warning) fails.
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    parser = Charts()
    parser.feed(dom)
    assert len(parser.charts) == len(SECTIONS)
    for chart_id, chart in parser.charts.items():
        assert chart["drawn"], f"{chart_id} has no svg/canvas"
        assert chart["rendered"] == "svg", chart_id
        # Vega and vega-embed report failures as "Error: ..." text; the page's own fallback says
        # the chart "could not be drawn". (Titles may say "error", e.g. the error-aware rate.)
        failure = re.search(r"\berror\s*:|could not be drawn|uncaught", chart["text"], re.I)
        assert failure is None, (chart_id, chart["text"][:300])
    assert 'class="chart-error"' not in dom.split("</noscript>", 1)[1]
    assert re.search(r'<div id="report-errors" role="alert"></div>', dom)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 20_000


def test_without_chromium_and_apt_the_browser_test_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="neither chromium nor apt-get is available"):
        find_chromium()


# ------------------------------------------------------------------------------------------------
# Layout at a desktop and a phone viewport
# ------------------------------------------------------------------------------------------------

#: Appended to a copy of the report: once every chart is drawn (or after 20 s), write the
#: layout measurements as JSON into the parent (harness) page, which chromium dumps.
PROBE = """
(function () {
  function drawn() {
    return Array.prototype.every.call(document.querySelectorAll("div.chart"), function (c) {
      return c.getAttribute("data-rendered");
    });
  }
  function measure() {
    var out = {
      innerWidth: window.innerWidth,
      scrollWidth: document.documentElement.scrollWidth,
      tables: Array.prototype.map.call(document.querySelectorAll(".table-wrap"), function (w) {
        return {section: w.closest("section").id, scrollWidth: w.scrollWidth,
                clientWidth: w.clientWidth, overflowX: window.getComputedStyle(w).overflowX,
                cue: window.getComputedStyle(w).backgroundImage};
      }),
      charts: Array.prototype.map.call(document.querySelectorAll("div.chart"), function (c) {
        var svg = c.querySelector("svg.marks");
        // the size text is drawn at: its font size times the scale CSS gives the SVG
        var scale = svg ? svg.getBoundingClientRect().width / svg.width.baseVal.value : 1;
        var smallest = null;
        Array.prototype.forEach.call(svg ? svg.querySelectorAll("text") : [], function (t) {
          if (!t.textContent.trim()) { return; }
          var size = parseFloat(window.getComputedStyle(t).fontSize) * scale;
          if (smallest === null || size < smallest.px) {
            smallest = {px: size, text: t.textContent.slice(0, 60)};
          }
        });
        // axis labels that run into each other: level labels whose boxes overlap, or turned
        // labels (parallel slanted lines) closer to each other than their font size
        var overlaps = [];
        Array.prototype.forEach.call(
          svg ? svg.querySelectorAll("g.role-axis-label") : [], function (axis) {
            var labels = Array.prototype.map.call(axis.querySelectorAll("text"), function (t) {
              var turn = /rotate\\(([-\\d.]+)\\)/.exec(t.getAttribute("transform") || "");
              return {text: t.textContent, box: t.getBoundingClientRect(),
                      angle: turn ? Number(turn[1]) : 0,
                      size: parseFloat(window.getComputedStyle(t).fontSize) * scale};
            }).filter(function (label) { return label.text.trim(); });
            labels.forEach(function (a, i) {
              labels.slice(i + 1).forEach(function (b) {
                var w = Math.min(a.box.right, b.box.right) - Math.max(a.box.left, b.box.left);
                var h = Math.min(a.box.bottom, b.box.bottom) - Math.max(a.box.top, b.box.top);
                if (a.angle !== 0 && a.angle === b.angle) {
                  // the distance between the two slanted baselines, anchored at their right ends
                  var apart = Math.abs(a.box.right - b.box.right) *
                    Math.abs(Math.sin(a.angle * Math.PI / 180));
                  if (h > 1 && apart < 0.9 * a.size) { overlaps.push([a.text, b.text]); }
                } else if (w > 1 && h > 1) { overlaps.push([a.text, b.text]); }
              });
            });
          });
        return {id: c.id, rendered: c.getAttribute("data-rendered"), svgs: svg ? 1 : 0,
                overlappingLabels: overlaps.slice(0, 5),
                canvases: c.querySelectorAll("canvas").length,
                width: svg ? svg.getBoundingClientRect().width : 0,
                box: c.getBoundingClientRect().width,
                overflowX: window.getComputedStyle(c).overflowX,
                smallestText: smallest,
                text: c.textContent.slice(0, 300)};
      }),
      funnel: Array.prototype.map.call(
        document.querySelectorAll("#chart-takeover-funnel [aria-label^='stage: ']"),
        function (mark) { return mark.getAttribute("aria-label"); })
    };
    var pre = window.parent.document.createElement("pre");
    pre.id = "layout-probe";
    pre.textContent = JSON.stringify(out);
    window.parent.document.body.appendChild(pre);
  }
  var tries = 0;
  (function wait() {
    if (drawn() || tries++ > 200) { measure(); } else { setTimeout(wait, 100); }
  })();
})();
"""

#: Layers of the nested funnel, top to bottom (recoverylab.report._takeover).
FUNNEL_LAYERS = ["aware", "+ root cause fixed", "+ derived fixed", "+ passed"]


def measure_layout(chromium: str, report: Path, width: int, height: int, work: Path) -> dict:
    """Load ``report`` in an iframe of ``width`` × ``height``; return the probe's measurements."""
    page = report.read_text(encoding="utf-8")
    head, _, tail = page.rpartition("</body>")  # the inlined library mentions </body> too
    (work / "page.html").write_text(f"{head}<script>{PROBE}</script></body>{tail}", "utf-8")
    (work / "harness.html").write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe style="border:0" width="{width}" height="{height}" src="page.html"></iframe>'
        "</body></html>",
        "utf-8",
    )
    with tempfile.TemporaryDirectory(prefix="recoverylab-chromium-") as profile:
        command = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--allow-file-access-from-files",  # the probe in the iframe writes to the harness
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=30000",
            f"--window-size={width + 100},{height + 100}",
            "--dump-dom",
            (work / "harness.html").as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', done.stdout, re.S)
    assert found, "the layout probe did not report (charts never finished drawing?)"
    return json.loads(html.unescape(found.group(1)))


def funnel_layers(labels: list[str]) -> dict[str, list[float]]:
    """Per series, the nested funnel's shares of attempts in layer order (from the bars)."""
    shares: dict[str, dict[str, float]] = {}
    for text in labels:
        fields = dict(part.split(": ", 1) for part in text.split("; ") if ": " in part)
        if "share of attempts (pp)" in fields:
            value = float(fields["share of attempts (pp)"])
            shares.setdefault(fields["series"], {})[fields["stage"]] = value
    return {series: [by[layer] for layer in FUNNEL_LAYERS] for series, by in shares.items()}


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_demo_report_layout_fits_the_viewport(
    demo_dir: Path, tmp_path: Path, width: int, height: int
) -> None:
    chromium = find_chromium()
    layout = measure_layout(chromium, demo_dir / "report.html", width, height, tmp_path)
    assert layout["innerWidth"] == width
    # no sideways scroll of the page
    assert layout["scrollWidth"] <= layout["innerWidth"], layout["scrollWidth"]
    # every chart drawn as SVG or canvas, without error text
    assert [c["id"] for c in layout["charts"]] == [f"chart-{key}" for key in SECTIONS]
    for chart in layout["charts"]:
        assert chart["rendered"] == "svg", chart
        assert chart["svgs"] + chart["canvases"] >= 1, chart
        assert not re.search(r"\berror\s*:|could not be drawn", chart["text"], re.I), chart
        assert chart["width"] > 0
        # a chart is never shrunk below its text size: what does not fit scrolls in its box
        assert 0 < chart["box"] <= width, chart
        assert chart["overflowX"] == "auto"
        # chart text is legible: drawn at 10 px or more, however narrow the page (the SVG's
        # own scale, up to float rounding)
        assert chart["smallestText"]["px"] >= 10 - 1e-3, (chart["id"], chart["smallestText"])
        # and no two labels of an axis run into each other
        assert chart["overlappingLabels"] == [], (chart["id"], chart["overlappingLabels"])
    # a wide table scrolls in its box and shows it: shadows at the edges with more to see
    for table in layout["tables"]:
        assert table["overflowX"] == "auto", table
        assert table["cue"].count("radial-gradient") == 2, table
    if width < 500:
        assert any(t["scrollWidth"] > t["clientWidth"] for t in layout["tables"])
    if width >= 1280:
        # on a desktop every table shows every column (no scroll inside the table either)
        for table in layout["tables"]:
            assert table["scrollWidth"] <= table["clientWidth"], table
    # the repair funnel is nested: its layers never widen, for every agent
    layers = funnel_layers(layout["funnel"])
    assert sorted(layers) == [f"agent_{c}" for c in "abcdef"]
    for series, shares in layers.items():
        assert shares == sorted(shares, reverse=True), (series, shares)
        assert shares[0] > shares[-1] > 0
