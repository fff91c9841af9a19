"""The names of the table contracts (ARCHITECTURE §3), without the contracts themselves.

The contracts (:data:`recoverylab.schema.SPECS`) hold polars types and row rules as polars
expressions, so reading them imports polars; the command line needs only their names, to offer
them as the choices of ``recoverylab validate TABLE`` while the parser is built (``--help`` and a
misspelt table name import nothing beyond the standard library). ``tests/test_schema.py`` holds
this list equal to ``SPECS``, name for name and in order.
"""

from __future__ import annotations

__all__ = ["TABLE_NAMES"]

#: The name of every table contract, in the order of :data:`recoverylab.schema.SPECS`.
TABLE_NAMES = (
    "forks",
    "decisions",
    "decision_points",
    "cases",
    "resources",
    "episodes",
    "steps",
    "citations",
    "states",
    "attempts",
    "failures",
    "mutations",
)
