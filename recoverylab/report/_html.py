"""The self-contained HTML report: sections of table, chart, reading and provenance.

One file that opens with no network: the chart specifications (with their data) and the Vega,
Vega-Lite and vega-embed JavaScript (from ``vl-convert``) are inlined. A chart that cannot be
drawn says so in the page, in place of the chart.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recoverylab._errors import ParameterError
from recoverylab.io import atomic_file
from recoverylab.report import _deps
from recoverylab.report._glossary_html import GLOSSARY_HEADING, how_to_read_html
from recoverylab.report._registry import GROUPS, HOW_TO_READ, SUMMARY

__all__ = ["Input", "Provenance", "Section", "render_html", "write_report"]


def _version() -> str:
    from recoverylab import __version__

    return __version__


@dataclass(frozen=True)
class Input:
    """One input table of a section: its role, where it came from and how many rows it has."""

    name: str
    source: str
    rows: int | None = None


@dataclass(frozen=True)
class Provenance:
    """Where a section's numbers come from, so a reader can reproduce them.

    Attributes
    ----------
    inputs
        The input tables (role, source, row count).
    exclusions
        ``(reason, count)`` of rows left out of the section's metric, zero counts included.
    seed, n_resamples, confidence
        Resampling settings of the intervals and tests (``None`` where none was made). A
        section builder sets ``n_resamples`` to the resamples its result's intervals drew per
        cell: 0 when every interval was computed without resampling (e.g. the exact
        Fay–Lumbard interval of a paired effect).
    settings
        Other ``(name, value)`` settings: cohort, k, interval method, grouping...
    version
        The recoverylab version that computed the results.
    """

    inputs: tuple[Input, ...] = ()
    exclusions: tuple[tuple[str, int], ...] = ()
    seed: int | None = None
    n_resamples: int | None = None
    confidence: float | None = None
    settings: tuple[tuple[str, str], ...] = ()
    version: str = field(default_factory=_version)

    def to_html(self) -> str:
        """Render the provenance block (a definition list)."""

        def item(term: str, value: str) -> str:
            return f"<dt>{html.escape(term)}</dt><dd>{value}</dd>"

        inputs = "".join(
            f"<li><code>{html.escape(i.name)}</code>: {html.escape(i.source)}"
            + (f" ({i.rows:,} rows)" if i.rows is not None else "")
            + "</li>"
            for i in self.inputs
        )
        exclusions = ", ".join(f"{html.escape(r)}: {n:,}" for r, n in self.exclusions) or "none"
        resampling = "none"
        if self.n_resamples is not None:
            drawn = (
                "none drawn (0 resamples)"
                if self.n_resamples == 0
                else f"{self.n_resamples:,} resamples"
            )
            shown = f"{self.confidence * 100:.4g}%" if self.confidence is not None else ""
            resampling = drawn + (f", {shown} intervals" if shown else "")
        parts = [
            item("inputs", f"<ul>{inputs}</ul>" if inputs else "none"),
            item("exclusions by reason", exclusions),
            item("seed", "none" if self.seed is None else str(self.seed)),
            item("resampling", resampling),
            *(item(name, html.escape(value)) for name, value in self.settings),
            item("recoverylab", html.escape(self.version)),
        ]
        return f'<dl class="provenance">{"".join(parts)}</dl>'

    def _repr_html_(self) -> str:
        return self.to_html()


@dataclass(frozen=True)
class Section:
    """One section of the report: a table, a chart, how to read them, and their provenance.

    Attributes
    ----------
    key
        Identifier (the HTML anchor), unique within a report.
    group
        The protocol heading the section sits under (e.g. ``"Goal preservation"``).
    title
        Section heading.
    reading
        Two sentences on how to read the chart and the table.
    table
        The table as HTML (see :func:`recoverylab.report.table_html`).
    chart
        An Altair chart (or ``None`` for a table-only section).
    provenance
        Inputs, row counts, exclusions, seed, resamples, version.
    """

    key: str
    group: str
    title: str
    reading: str
    table: str
    chart: Any
    provenance: Provenance

    def body_html(self, chart_html: str) -> str:
        """Render the section around an already rendered chart element."""
        return (
            f'<section class="section" id="{html.escape(self.key)}">'
            f"<h3>{html.escape(self.title)}</h3>"
            f'<p class="reading">{html.escape(self.reading)}</p>'
            f"{chart_html}"
            f'<div class="table-wrap">{self.table}</div>'
            f'<details class="provenance-block" open><summary>Provenance</summary>'
            f"{self.provenance.to_html()}</details></section>"
        )

    def _repr_html_(self) -> str:
        """Show the section in Jupyter, the chart as a static SVG (no script needed)."""
        chart = ""
        if self.chart is not None:
            svg = _deps.vl_convert().vegalite_to_svg(self.chart.to_dict(), **_vl_version())
            chart = f'<div class="chart">{svg}</div>'
        return f'<style>{_CSS}</style><div class="recoverylab">{self.body_html(chart)}</div>'


def _vl_version() -> dict[str, str]:
    """Return the Vega-Lite version of altair's schema when vl-convert has it (else its default)."""
    wanted = ".".join(_deps.altair().SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return {"vl_version": wanted} if wanted in _deps.vl_convert().get_vegalite_versions() else {}


def _script_safe(bundle: str) -> str:
    r"""Make JavaScript safe to inline in a ``<script>`` element (no ``</script`` inside).

    ``<\\/script`` means the same as ``</script`` in JavaScript strings and regular expressions.
    """
    return re.sub(r"(?i)</(script)", lambda match: "<\\/" + match.group(1), bundle)


def _json_safe(text: str) -> str:
    r"""Make JSON safe to inline in a ``<script>`` element: ``<`` only as ``\\u003c``."""
    return text.replace("<", "\\u003c")


def render_html(sections: Sequence[Section], *, title: str = "recoverylab report") -> str:
    """Assemble sections into one self-contained HTML page.

    Parameters
    ----------
    sections
        The sections, in order; consecutive sections with the same ``group`` share a heading.
    title
        Page title.

    Returns
    -------
    str
        The HTML document: styles, the chart library and every chart specification inlined.

    Raises
    ------
    ParameterError
        For no sections or two sections with the same key.
    MissingDependencyError
        Without the ``report`` extra (altair, vl-convert-python).
    """
    if not sections:
        raise ParameterError("a report needs at least one section; none was given.")
    _check_unique(sections)
    vl_convert = _deps.vl_convert()
    specs = {f"chart-{s.key}": s.chart.to_dict() for s in sections if s.chart is not None}
    summary: list[str] = []
    body: list[str] = []
    toc: list[str] = []
    for group, members in _grouped(sections):
        anchor = f"group-{members[0].key}"
        part = summary if group == SUMMARY else body
        part.append(f'<h2 id="{anchor}">{html.escape(group)}</h2>')
        items = "".join(f'<li><a href="#{s.key}">{html.escape(s.title)}</a></li>' for s in members)
        toc.append(f'<li><a href="#{anchor}">{html.escape(group)}</a><ul>{items}</ul></li>')
        for section in members:
            label = html.escape(section.title)
            chart = f'<div class="chart" id="chart-{section.key}" role="img" aria-label="{label}">'
            part.append(section.body_html("" if section.chart is None else chart + "</div>"))
    toc.append(f'<li><a href="#how-to-read">{html.escape(HOW_TO_READ)}</a></li>')
    body.append(how_to_read_html())
    bundle = vl_convert.javascript_bundle(**_vl_version())
    return _PAGE.format(
        title=html.escape(title),
        version=html.escape(_version()),
        css=_PAGE_CSS + _CSS,
        summary=f'<div class="recoverylab">{"".join(summary)}</div>' if summary else "",
        toc="".join(toc),
        body="".join(body),
        bundle=_script_safe(bundle),
        specs=_json_safe(json.dumps(specs, separators=(",", ":"), allow_nan=False)),
        script=_SCRIPT,
    )


def _check_unique(sections: Sequence[Section]) -> None:
    """Refuse two sections with one key or one title, or a title that is a group heading."""
    for what, values in (
        ("keys", [s.key for s in sections]),
        (
            "titles",
            [s.title for s in sections] + sorted(_headings(sections)),
        ),
    ):
        duplicated = sorted({v for v in values if values.count(v) > 1})
        if duplicated:
            raise ParameterError(
                f"section {what} must be unique (a heading appears once in a report); "
                f"{', '.join(duplicated)} appear more than once."
            )


def _headings(sections: Sequence[Section]) -> set[str]:
    """Return the page's headings other than section titles: its groups and closing part's."""
    return {HOW_TO_READ, GLOSSARY_HEADING, *(s.group for s in sections)}


def _grouped(sections: Sequence[Section]) -> list[tuple[str, list[Section]]]:
    """Sections by group, the groups in the registry's order (others after, as first given)."""
    groups: dict[str, list[Section]] = {}
    for section in sections:
        groups.setdefault(section.group, []).append(section)
    rank = {group: at for at, group in enumerate(GROUPS)}
    return sorted(groups.items(), key=lambda item: rank.get(item[0], len(GROUPS)))


def write_report(
    path: str | os.PathLike[str],
    sections: Sequence[Section],
    *,
    title: str = "recoverylab report",
) -> Path:
    """Write the HTML report atomically (a temporary file renamed into place).

    Parameters
    ----------
    path
        The ``.html`` file to write; its directory is created if needed.
    sections, title
        As :func:`render_html`.

    Returns
    -------
    Path
        The written file.

    Raises
    ------
    ParameterError, MissingDependencyError
        As :func:`render_html`; nothing is written then.
    """
    page = render_html(sections, title=title)
    with atomic_file(path) as out:
        out.write(page.encode("utf-8"))
    return Path(path)


#: Styles of the page around the sections (never injected into a notebook).
_PAGE_CSS = """
*, *::before, *::after { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328;
  margin: 0 auto; max-width: 1760px; padding: 0 clamp(10px, 2.5vw, 32px) 48px; }
header { border-bottom: 1px solid #d1d9e0; margin-bottom: 16px; }
h1 { margin: 24px 0 4px; font-size: 26px; }
h2 { margin: 36px 0 8px; padding-top: 8px; border-top: 3px solid #1f2328; font-size: 21px; }
.lead { color: #59636e; max-width: 860px; }
nav ul { margin: 4px 0; padding-left: 20px; } nav > ul { columns: 2; }
#report-errors:empty { display: none; }
.chart-error { color: #b42318; background: #fef3f2; border: 1px solid #fda29b; padding: 8px 12px; }
@media (max-width: 700px) {
  body { font-size: 14px; }
  h1 { font-size: 22px; }
  nav > ul { columns: 1; }
}
"""

#: Styles of a section, scoped to ``.recoverylab`` (safe to show inside a notebook). A chart is
#: never shrunk (its text would fall below 10 px): what does not fit scrolls sideways, as a wide
#: table does. Shadows at an edge show there is more to scroll to (CSS only: the white covers
#: move with the content, the shadows stay at the edges of the box).
_CSS = """
.recoverylab { --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; min-width: 0; }
.recoverylab h3 { margin: 28px 0 4px; font-size: 17px; }
.recoverylab .reading { color: var(--muted); max-width: 860px; }
.recoverylab .section { margin-bottom: 28px; min-width: 0; }
.recoverylab .chart { margin: 8px 0 12px; min-height: 40px; max-width: 100%; }
.recoverylab .chart svg { height: auto; }
.recoverylab .chart-note { color: var(--muted); font-size: 13px; margin: -6px 0 10px; }
.recoverylab .table-wrap, .recoverylab .chart { max-width: 100%; overflow-x: auto;
  background:
    linear-gradient(to right, #fff 30%, rgba(255, 255, 255, 0)) left center / 40px 100%,
    linear-gradient(to left, #fff 30%, rgba(255, 255, 255, 0)) right center / 40px 100%,
    radial-gradient(farthest-side at 0 50%, rgba(0, 0, 0, 0.3), rgba(0, 0, 0, 0))
      left center / 14px 100%,
    radial-gradient(farthest-side at 100% 50%, rgba(0, 0, 0, 0.3), rgba(0, 0, 0, 0))
      right center / 14px 100%;
  background-repeat: no-repeat; background-color: #fff;
  background-attachment: local, local, scroll, scroll; }
.recoverylab table.result { border-collapse: collapse; font-size: 13px; margin: 4px 0 8px; }
.recoverylab table.result th, .recoverylab table.result td { border-bottom: 1px solid var(--line);
  padding: 3px 6px; }
.recoverylab table.result th { background: var(--soft); text-align: left; font-weight: 600;
  vertical-align: bottom; white-space: normal; min-width: 3.5em; max-width: 8em; }
.recoverylab table.result td.key { white-space: nowrap; }
.recoverylab table.result td.rate, .recoverylab table.result td.n,
.recoverylab table.result td.count { text-align: right; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
.recoverylab table.result td.n, .recoverylab table.result th.n { color: var(--muted);
  border-right: 1px solid var(--line); }
.recoverylab table.result .ci { color: var(--muted); }
.recoverylab table.result th.key:first-child, .recoverylab table.result td.key:first-child {
  position: sticky; left: 0; background: #fff; z-index: 1; }
.recoverylab table.result th.key:first-child { background: var(--soft); }
.recoverylab details.provenance-block { font-size: 13px; color: var(--muted);
  background: var(--soft); border-radius: 6px; padding: 6px 12px; overflow-wrap: anywhere; }
.recoverylab details.provenance-block summary { cursor: pointer; font-weight: 600; }
.recoverylab dl.provenance { display: grid; grid-template-columns: max-content minmax(0, 1fr);
  gap: 2px 14px; margin: 6px 0; }
.recoverylab dl.provenance dt { font-weight: 600; }
.recoverylab dl.provenance dd { margin: 0; min-width: 0; }
.recoverylab dl.provenance ul { margin: 0; padding-left: 18px; }
.recoverylab dl.glossary { display: grid; grid-template-columns: max-content minmax(0, 60em);
  gap: 4px 16px; margin: 6px 0; }
.recoverylab dl.glossary dt { font-weight: 600; }
.recoverylab dl.glossary dd { margin: 0; min-width: 0; }
.recoverylab ul.headline li { margin-bottom: 6px; max-width: 960px; }
@media (max-width: 1500px) {
  .recoverylab table.result { font-size: 12px; }
  .recoverylab table.result .ci { display: block; font-size: 11px; }
}
@media (max-width: 700px) {
  .recoverylab table.result { font-size: 12px; }
  .recoverylab table.result th, .recoverylab table.result td { padding: 2px 5px; }
  .recoverylab dl.provenance, .recoverylab dl.glossary { grid-template-columns: minmax(0, 1fr); }
}
"""

_SCRIPT = """
(function () {
  var specs = JSON.parse(document.getElementById("recoverylab-specs").textContent);
  var box = document.getElementById("report-errors");
  function note(message) {
    var p = document.createElement("p");
    p.className = "chart-error";
    p.textContent = message;
    box.appendChild(p);
  }
  function fail(id, message) {
    var element = document.getElementById(id);
    element.textContent = "";
    var p = document.createElement("p");
    p.className = "chart-error";
    p.textContent = "This chart could not be drawn: " + message +
      " (the table below has every number).";
    element.appendChild(p);
    element.setAttribute("data-rendered", "failed");
  }
  window.addEventListener("error", function (event) { note("Script problem: " + event.message); });
  var ids = Object.keys(specs);
  if (typeof vegaEmbed !== "function") {
    ids.forEach(function (id) { fail(id, "the chart library did not load"); });
    return;
  }
  var options = {
    renderer: "svg",
    actions: {export: true, source: false, compiled: false, editor: false}
  };
  // Charts are specified at a natural size; here their panel widths are scaled so that each
  // chart fills the width of its column (narrower on a phone, wider on a large screen), with
  // the text at its own size. A chart that still overflows is never shrunk: it scrolls.
  function scaled(node, factor, parentKey) {
    if (Array.isArray(node)) {
      return node.map(function (item) { return scaled(item, factor, parentKey); });
    }
    if (!node || typeof node !== "object") { return node; }
    var copy = {};
    Object.keys(node).forEach(function (key) {
      var value = node[key];
      if (key === "datasets" || key === "data" || key === "config" || key === "mark" ||
          key === "encoding") {
        copy[key] = value;
      } else if (key === "width" && typeof value === "number") {
        copy[key] = Math.max(60, Math.round(value * factor));
      } else if (key === "width" && value && typeof value.step === "number") {
        // a band narrows to no less than 12 px a mark (its labels turn on a narrow page)
        copy[key] = {step: Math.max(12, value.step * factor)};
      } else {
        copy[key] = scaled(value, factor, key);
      }
    });
    return copy;
  }
  function drawnWidth(element) {
    // the drawn size, before any CSS scaling (max-width) of the SVG
    var svg = element.querySelector("svg.marks");
    return svg ? Number(svg.getAttribute("width")) || svg.getBoundingClientRect().width : 0;
  }
  function narrow(spec) {
    // on a narrow page legends go below the chart, where they take no width from the panels
    var config = Object.assign({}, spec.config);
    config.legend = Object.assign({}, config.legend, {orient: "bottom", direction: "vertical"});
    return turned(stacked(Object.assign({}, spec, {config: config})));
  }
  function turned(node) {
    // and the labels of a band axis turn, so narrow bands do not run them into each other
    if (Array.isArray(node)) { return node.map(turned); }
    if (!node || typeof node !== "object") { return node; }
    var copy = {};
    Object.keys(node).forEach(function (key) {
      var value = node[key];
      var band = value && (value.type === "ordinal" || value.type === "nominal");
      if (key === "x" && band && typeof value === "object") {
        var axis = Object.assign({}, value.axis, {labelAngle: -45, labelAlign: "right"});
        copy[key] = Object.assign({}, value, {axis: axis});
      } else if (key === "datasets" || key === "data") {
        copy[key] = value;
      } else {
        copy[key] = turned(value);
      }
    });
    return copy;
  }
  function stacked(spec) {
    // and charts side by side go one under the other
    if (Array.isArray(spec.hconcat)) {
      var copy = Object.assign({}, spec, {vconcat: spec.hconcat.map(stacked)});
      delete copy.hconcat;
      return copy;
    }
    if (Array.isArray(spec.vconcat)) {
      return Object.assign({}, spec, {vconcat: spec.vconcat.map(stacked)});
    }
    return spec;
  }
  function draw(id, spec, factor, round) {
    var element = document.getElementById(id);
    var fitted = scaled(element.parentNode.clientWidth < 640 ? narrow(spec) : spec, factor);
    // no background of its own: the box's edge shadows (more to scroll to) show through
    fitted.background = null;
    return vegaEmbed("#" + id, fitted, options).then(function (result) {
      // the room is the section's width (vega-embed makes the chart element shrink to fit);
      // the actions menu sits to the right of the chart
      var room = element.parentNode.clientWidth - 40;
      var width = drawnWidth(element);
      // panels narrow to no less than 45% of their natural width: a chart whose fixed parts
      // (bands, labels) do not fit keeps readable panels and scrolls instead
      var next = Math.max(0.45, factor * Math.min(2.5, Math.max(0.3, room / width)));
      if (round < 4 && width > 0 && room > 0 && Math.abs(next / factor - 1) > 0.04) {
        result.finalize();
        return draw(id, spec, next, round + 1);
      }
      return result;
    });
  }
  ids.forEach(function (id) {
    draw(id, specs[id], 1, 0).then(function () {
      document.getElementById(id).setAttribute("data-rendered", "svg");
    }).catch(function (error) { fail(id, String(error && error.message || error)); });
  });
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="recoverylab {version}">
<title>{title}</title>
<style>{css}</style>
<script>{bundle}</script>
</head>
<body>
<header>
<h1>{title}</h1>
<p class="lead">Made by recoverylab {version}. Rates are in percentage points (pp), each with
its denominator n beside it; every section gives the table, the chart, how to read them, and where
the numbers come from (see <a href="#how-to-read">how to read this report</a>).</p>
<noscript><p class="chart-error">Charts need JavaScript; the tables hold every number.</p>
</noscript>
<div id="report-errors" role="alert"></div>
{summary}
<nav><ul>{toc}</ul></nav>
</header>
<main class="recoverylab">{body}</main>
<script type="application/json" id="recoverylab-specs">{specs}</script>
<script>{script}</script>
</body>
</html>
"""
