"""Charts and the self-contained HTML report (the optional ``report`` extra).

Layout: ``_deps`` (optional packages), a chart module per protocol, ``_sections``, ``_tables``,
``_repr`` and ``_html``. May import the protocols' public API, stats, io and _errors; never an
engine or the cli. No protocol imports the report.

Install with ``pip install 'recoverylab[report]'`` (altair and vl-convert-python). Importing this
module is cheap and never imports altair; a chart function used without the extra raises
:class:`~recoverylab.MissingDependencyError` naming it.

Every chart takes a frame returned by a protocol function, unchanged, and returns an Altair chart
that renders in Jupyter and exports to PNG/SVG without a browser (``chart.save("x.svg")`` through
vl-convert). In notebooks charts display offline by default: the first chart switches altair to
its ``svg`` renderer (drawn in the kernel by vl-convert; no CDN), unless you chose a renderer
already. :func:`chart_renderer` picks another (``chart_renderer("default")`` for altair's
interactive charts, which load Vega from the web). :func:`show` displays a result frame with
rates in percentage points and ``n``, the same columns and labels as the command line. Rates
are drawn in percentage points and every mark that shows a rate carries its denominator ``n`` in
its tooltip.

Charts
------
* paired (:mod:`recoverylab.paired`): :func:`rescue_harm`, :func:`effect`, :func:`contrast`,
  :func:`rescue_overlap`;
* policies (:func:`recoverylab.paired.evaluate_policy`, :func:`recoverylab.router.compare`):
  :func:`policy_success`, :func:`policy_gain`, :func:`policy_rates`;
* goal (:mod:`recoverylab.goal`): :func:`ts_by_regime`, :func:`failure_reasons`,
  :func:`barrier_drop`;
* takeover (:mod:`recoverylab.takeover`): :func:`depth_rates`, :func:`repair_funnel`,
  :func:`pass_hat_k_by_depth` (of :func:`recoverylab.takeover.reliability`).
* router uplift (:func:`recoverylab.router.uplift`): :func:`toc_curves`.

Judged outcomes (``summarize_judged``, ``judge_agreement``) have table-only sections:
:func:`judge_agreement_section` and :func:`judged_estimates_section`.

Report
------
:class:`Section` (table, chart, two sentences on how to read them, :class:`Provenance`), built by
the ``*_section`` functions (:func:`headline_section`: the findings that open the report, read
from the same results); :func:`render_html` / :func:`write_report` assemble sections into one
HTML file that opens with no network. :func:`table_html` renders a result frame with rates in
percentage points and ``n`` beside every rate; :func:`result_html` renders a non-frame result.

Examples
--------
>>> from recoverylab import goal, report
>>> scored = goal.score(*(f"data_samples/goal/diagnostic/{t}.csv" for t in
...     ("cases", "resources", "episodes", "steps", "citations")))
>>> chart = report.ts_by_regime(goal.summarize(scored, n_resamples=200))  # doctest: +SKIP
>>> chart.save("ts.svg")  # doctest: +SKIP
"""

from recoverylab.report._deps import EXTRA, chart_renderer, check_extra
from recoverylab.report._gate import gate_section
from recoverylab.report._goal import barrier_drop, failure_reasons, ts_by_regime
from recoverylab.report._headline import headline_section
from recoverylab.report._html import Input, Provenance, Section, render_html, write_report
from recoverylab.report._judged import judge_agreement_section, judged_estimates_section
from recoverylab.report._paired import contrast, effect, rescue_harm, rescue_overlap
from recoverylab.report._repr import ResultTable, show
from recoverylab.report._router import policy_gain, policy_rates, policy_success
from recoverylab.report._sections import (
    contrast_section,
    depth_section,
    drop_section,
    effect_section,
    funnel_section,
    overlap_section,
    policy_section,
    reasons_section,
    rescue_harm_section,
    router_policies_section,
    ts_section,
)
from recoverylab.report._tables import Count, Key, PValue, Rate, table_html
from recoverylab.report._takeover import depth_rates, repair_funnel
from recoverylab.report._uplift_reliability import (
    pass_hat_k_by_depth,
    reliability_section,
    toc_curves,
    toc_section,
)
from recoverylab.stats import result_html

#: Every chart function, by name (each takes one result frame).
CHARTS = (
    "rescue_harm",
    "effect",
    "contrast",
    "rescue_overlap",
    "policy_success",
    "policy_gain",
    "policy_rates",
    "ts_by_regime",
    "failure_reasons",
    "barrier_drop",
    "depth_rates",
    "repair_funnel",
    "toc_curves",
    "pass_hat_k_by_depth",
)

__all__ = [
    "CHARTS",
    "EXTRA",
    "Count",
    "Input",
    "Key",
    "PValue",
    "Provenance",
    "Rate",
    "ResultTable",
    "Section",
    "barrier_drop",
    "chart_renderer",
    "check_extra",
    "contrast",
    "contrast_section",
    "depth_rates",
    "depth_section",
    "drop_section",
    "effect",
    "effect_section",
    "failure_reasons",
    "funnel_section",
    "gate_section",
    "headline_section",
    "judge_agreement_section",
    "judged_estimates_section",
    "overlap_section",
    "pass_hat_k_by_depth",
    "policy_gain",
    "policy_rates",
    "policy_section",
    "policy_success",
    "reasons_section",
    "reliability_section",
    "render_html",
    "repair_funnel",
    "rescue_harm",
    "rescue_harm_section",
    "rescue_overlap",
    "result_html",
    "router_policies_section",
    "show",
    "table_html",
    "toc_curves",
    "toc_section",
    "ts_by_regime",
    "ts_section",
    "write_report",
]
