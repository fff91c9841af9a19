"""The release gate's verdicts as the report's first section (ARCHITECTURE §6, §9)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoverylab.report._html import Provenance, Section
from recoverylab.report._methods import Methods
from recoverylab.report._registry import GATE
from recoverylab.report._tables import Column, Count, Key, PValue, Rate, table_html

if TYPE_CHECKING:
    from recoverylab.paired import GateResult

__all__ = ["GATE", "gate_section"]


def gate_section(result: GateResult, provenance: Provenance, *, key: str = "gate") -> Section:
    """Section of :func:`recoverylab.paired.gate`: one row per (claim, cell), a table only.

    Parameters
    ----------
    result
        The gate's result.
    provenance
        Its inputs (forks, the policy file) and settings.
    key
        The HTML anchor.

    Returns
    -------
    Section
        Titled with the overall verdict and exit status; no chart.
    """
    frame = result.claims
    columns: list[Column] = [
        Key("claim"),
        Key("cell"),
        Key("verdict"),
        Rate("estimate", "n", "estimate", "n (pairs or episodes)", signed=True),
        Rate("ci_low", "n", "lower bound, family-adjusted", "n (pairs or episodes)", signed=True),
        Rate("ci_high", "n", "upper bound, family-adjusted", "n (pairs or episodes)", signed=True),
        Rate("threshold", "n_tasks", "threshold", "tasks", signed=True),
        PValue("p_adjusted", f"p ({result.adjust})"),
        Count("more_tasks", "more tasks (fixed-n, power 0.8)"),
    ]
    mode = (
        "confidence sequences (valid however often the gate is re-run)"
        if result.sequential
        else "fixed-n one-sided tests"
    )
    reading = (
        f"Each claim holds on every cell it names; it PASSES when its one-sided bound clears the "
        f"threshold, FAILS when the interval lies wholly on the wrong side, and is INCONCLUSIVE "
        f"otherwise, by {mode}, the claims adjusted as one family ({result.adjust}). The bounds "
        "are at each row's family-adjusted level (wider than the same cell's interval in the "
        "paired table), so they agree with the adjusted p-values; 'more tasks' is what a "
        "fixed-n study would still need beyond the tasks seen, if the observed rates held "
        "(power 0.8; it matters for the INCONCLUSIVE claims)."
    )
    return Section(
        key=key,
        group=GATE,
        title=f"Release gate: {result.verdict} (exit status {result.exit_status})",
        reading=reading,
        table=table_html(frame, columns),
        chart=None,
        provenance=Methods.of(frame, "tasks").provenance(provenance),
    )
