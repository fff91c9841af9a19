"""The report's closing part: how to read its numbers, and the glossary of our own terms.

The glossary is :data:`recoverylab._glossary.GLOSSARY`, the one the README and the command line
use: each term is defined once, wherever a reader looks it up.
"""

from __future__ import annotations

import html

from recoverylab._display import ALL, MISSING
from recoverylab._glossary import GLOSSARY
from recoverylab.report._registry import HOW_TO_READ

__all__ = ["GLOSSARY_HEADING", "how_to_read_html"]

#: The heading of the glossary (inside the "how to read" part).
GLOSSARY_HEADING = "Glossary"


def how_to_read_html() -> str:
    """Render the "how to read" part: units, intervals, marks, and the glossary as a list."""
    terms = "".join(
        f'<dt id="term-{html.escape(term.replace(" ", "-"))}">{html.escape(term)}</dt>'
        f"<dd>{html.escape(meaning)}</dd>"
        for term, meaning in GLOSSARY.items()
    )
    glossary = f'<h3>{GLOSSARY_HEADING}</h3><dl class="glossary">{terms}</dl>'
    return (
        f'<section class="section how-to-read" id="how-to-read"><h2>{html.escape(HOW_TO_READ)}</h2>'
        "<ul>"
        "<li>Rates, effects and gains are in percentage points (pp): a fraction × 100, one "
        "decimal. Each rate has its denominator n beside it in the table (a column headed "
        "<em>n (…)</em> names what was counted) and in the chart tooltips (hover a mark).</li>"
        "<li>Intervals follow their estimate in brackets. The provenance block under each "
        "table names each cell's interval method and level, the test behind its p-values and "
        "the resamples drawn; p-values have two significant digits (&lt; 0.001 below).</li>"
        "<li><em>p (the interval's test)</em> is the p-value of the test the interval beside it "
        "inverts, so that interval excludes zero exactly when p is below 1 − confidence; "
        "<em>p (sign-flip)</em>, where shown, is a second test in a column of its own. The "
        "headline calls a cell significant by its own p, not adjusted across cells.</li>"
        f"<li><em>{html.escape(ALL)}</em> in a key column is the row over every value of that "
        f"key; {html.escape(MISSING)} is a value the result does not have (null), never a "
        "zero.</li>"
        "<li>Every number in a table is the value in the result the run wrote, rounded for "
        "display; a table or chart wider than the page scrolls sideways (a shadow at its edge "
        "shows there is more), and chart text is never shrunk.</li>"
        "</ul>"
        f"{glossary}</section>"
    )
