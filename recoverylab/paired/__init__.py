"""Paired counterfactual recovery evaluation (CIR protocol, ARCHITECTURE §3.1).

From the same execution state a run is forked twice: once without recovery (``method="none"``)
and once with a recovery operation at some delay. Pairing the two branches separates what one
average success rate hides: the runs a recovery *rescued* (no-recovery fails, recovery succeeds)
and the runs it *harmed* (no-recovery succeeds, recovery fails).

* :func:`pairs` -- one row per paired recovery branch (lazy), with carry-forward.
* :func:`exclusions` -- recovery rows left out, counted by reason (lazy).
* :func:`summarize` -- rescue/harm cells per (condition, delay, method, *by*) with a task-level
  cluster bootstrap CI and an exact sign-flip p-value.
* :func:`contrast` -- effect of one condition minus another, tasks resampled jointly.
* :func:`rescue_overlap` -- which tasks two methods rescue, and how many both do.
* :func:`evaluate_policy` -- a recovery policy's decisions scored against the forks.
"""

from recoverylab.paired._pairs import Cohort, exclusions, pairs
from recoverylab.paired._policy import RESULT_COLUMNS as POLICY_COLUMNS
from recoverylab.paired._policy import evaluate_policy
from recoverylab.paired._summary import contrast, rescue_overlap, summarize

__all__ = [
    "POLICY_COLUMNS",
    "Cohort",
    "contrast",
    "evaluate_policy",
    "exclusions",
    "pairs",
    "rescue_overlap",
    "summarize",
]
