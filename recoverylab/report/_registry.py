"""The report's section groups, in page order: one registry, so no heading appears twice.

Every section builder names its group with one of these constants, and
:func:`recoverylab.report.render_html` writes each group's heading once, in this order, with all
of its sections under it (wherever they were given). A group a caller invents (a
:class:`~recoverylab.report.Section` built by hand) follows the registered ones.
"""

from __future__ import annotations

__all__ = [
    "GATE",
    "GOAL",
    "GROUPS",
    "HOW_TO_READ",
    "JUDGED",
    "PAIRED",
    "ROUTER",
    "SUMMARY",
    "TAKEOVER",
]

#: The headline: what helped, what harmed, the router's net effect, the gate's verdict.
SUMMARY = "Summary"
#: The release gate's verdicts.
GATE = "Ship or hold"
PAIRED = "Paired recovery (CIR paired forks)"
ROUTER = "Recovery router (CIR router)"
GOAL = "Goal preservation (AgentHeal)"
TAKEOVER = "Takeover from replayed error states (CUA-Recovery)"
#: Outcomes an LLM judge decided: its agreement with the gold labels, corrected estimates.
JUDGED = "Judged outcomes"
#: The page's closing part: units, intervals and the glossary of recoverylab's own terms.
HOW_TO_READ = "How to read this report"

#: Group headings in page order.
GROUPS: tuple[str, ...] = (SUMMARY, GATE, PAIRED, ROUTER, GOAL, TAKEOVER, JUDGED)
