"""Report sections of judged outcomes (issue 40): the judge's agreement, corrected estimates.

When an LLM judge decided the outcomes and humans labelled a random subset (gold), two tables
say how far the judge can be trusted and what its errors did to the estimates:

* :func:`judge_agreement_section` -- the judge's sensitivity, specificity and agreement with the
  gold labels and their intervals, per cell, as :func:`recoverylab.paired.judge_agreement` (or
  :func:`recoverylab.stats.judge_error_cells`) computed them;
* :func:`judged_estimates_section` -- per cell and outcome the PPI++ (corrected) estimate beside
  the judge-only and gold-only estimates and the labelled share, as a ``summarize_judged``
  function of a protocol returned them (:data:`recoverylab.stats.JUDGED_COLUMNS`).

Every number is the result frame's own (each value sits in an element naming its column); the
words about interval methods and tests come from the frames' ``ci_method`` and ``test`` columns.
A cell without an interval (a gold stratum without labels: null ``ci_method``) shows ``—`` and
is counted in the provenance block.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from recoverylab.report._common import as_frame, keys_before, require_columns
from recoverylab.report._html import Provenance, Section
from recoverylab.report._methods import Methods, level
from recoverylab.report._registry import JUDGED
from recoverylab.report._tables import Column, Count, Key, PValue, Rate, leveled_table

__all__ = ["judge_agreement_section", "judged_estimates_section"]

_ESTIMATE_COLUMNS = (
    "estimate",
    "ci_low",
    "ci_high",
    "judge_estimate",
    "gold_estimate",
    "gold_ci_low",
    "gold_ci_high",
    "n",
    "n_labelled",
    "labelled_share",
    "n_clusters",
    "n_labelled_clusters",
    "ci_method",
)
_AGREEMENT_COLUMNS = ("measure", "estimate", "ci_low", "ci_high", "n", "n_clusters", "ci_method")


def _methods(frame: pl.DataFrame, cluster: str, provenance: Provenance) -> tuple[str, Provenance]:
    """Return the interval source for a reading and the provenance saying what was computed.

    Rows without an interval (null ``ci_method``) have no method to name; they are counted.
    """
    named = frame.filter(pl.col("ci_method").is_not_null())
    methods = Methods.of(named, cluster)
    shown = level(provenance)
    interval = f"a {shown} interval" if shown else "an interval"
    said = methods.provenance(provenance)
    missing = frame.height - named.height
    if missing:
        note = (("cells without an interval", f"{missing:,} (a gold stratum without labels)"),)
        said = replace(said, settings=(*said.settings, *note))
    if not named.height:
        return f"{interval} (no cell has one)", said
    return f"{interval} {methods.source()}", said


def judged_estimates_section(
    estimates: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    cluster: str = "tasks",
    key: str = "judged-estimates",
    title: str = "Judged outcomes: corrected (PPI++) vs judge-only vs gold-only",
) -> Section:
    """Section of a ``summarize_judged`` result: corrected, judge-only and gold-only estimates.

    Parameters
    ----------
    estimates
        The frame of :func:`recoverylab.paired.summarize_judged` (or the takeover and goal
        protocols' ``summarize_judged``), unchanged: its keys come before ``estimate``.
    provenance
        Where it came from; the interval methods and tests are read from the frame.
    cluster
        The clusters its intervals respect, plural (tasks, cases, workflows).
    key, title
        The section's anchor and heading.
    """
    frame = as_frame(estimates, "judged_estimates")
    require_columns(frame, _ESTIMATE_COLUMNS, "judged_estimates", "a summarize_judged function")
    source, said = _methods(frame, cluster, provenance)
    columns: list[Column] = [
        *(Key(k) for k in keys_before(frame, "estimate")),
        Rate("estimate", "n", "corrected (PPI++)", "n (units)", ci=("ci_low", "ci_high")),
        Rate("judge_estimate", "n", "judge only", "n (units)"),
        Rate(
            "gold_estimate",
            "n_labelled",
            "gold only",
            "n (labelled)",
            ci=("gold_ci_low", "gold_ci_high"),
        ),
        Rate("labelled_share", "n", "labelled share", "n (units)"),
        Count("n_clusters", cluster),
        Count("n_labelled_clusters", f"labelled {cluster}"),
        *([PValue(title="p (the interval's test)")] if "p_value" in frame.columns else []),
        Key("ci_method", "interval method"),
        *(
            [Key("gold_ci_method", "gold-only interval method")]
            if "gold_ci_method" in frame.columns
            else []
        ),
    ]
    return Section(
        key=key,
        group=JUDGED,
        title=title,
        reading="Each row sets the corrected estimate (the judge's verdicts on every unit, "
        f"corrected by the human-labelled subset) with {source} beside what the judge alone "
        "and the gold labels alone would report. A judge-only estimate far from the corrected "
        "one is the judge's bias; a corrected interval narrower than the gold-only one is what "
        "the judge's verdicts added.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=None,
        provenance=said,
    )


def judge_agreement_section(
    agreement: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    cluster: str = "tasks",
    key: str = "judged-agreement",
    title: str = "The judge against the gold labels: sensitivity, specificity, agreement",
) -> Section:
    """Section of :func:`recoverylab.paired.judge_agreement`: the judge's error per cell.

    Parameters
    ----------
    agreement
        The frame of :func:`recoverylab.paired.judge_agreement` (or
        :func:`recoverylab.stats.judge_error_cells`), unchanged: its keys come before
        ``measure``.
    provenance, cluster, key, title
        As in :func:`judged_estimates_section`.
    """
    frame = as_frame(agreement, "judge_agreement")
    require_columns(frame, _AGREEMENT_COLUMNS, "judge_agreement", "paired.judge_agreement")
    source, said = _methods(frame, cluster, provenance)
    columns: list[Column] = [
        *(Key(k) for k in keys_before(frame, "measure")),
        Key("measure"),
        Rate("estimate", "n", "estimate", "n (labelled units)", ci=("ci_low", "ci_high")),
        Count("n_clusters", cluster),
        Key("ci_method", "interval method"),
    ]
    return Section(
        key=key,
        group=JUDGED,
        title=title,
        reading="Over the human-labelled units: sensitivity is the share of gold successes the "
        "judge called successes, specificity the share of gold failures it called failures, "
        f"agreement the share it got right, each with {source}. Sensitivity and specificity "
        "that differ between cells mean the judge's errors bias those cells' rates differently.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=None,
        provenance=said,
    )
