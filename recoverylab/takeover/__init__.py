"""Takeover from replayed error states (CUA-Recovery protocol, ARCHITECTURE §3.4).

Long-horizon agents inherit errors that are already written into files and databases. A takeover
benchmark replays a trajectory to a point ``depth`` steps after a controlled root cause, checks
that the replayed state matches the original, and hands it to a recovery agent. This module asks,
per agent and per depth, whether the agent noticed the inherited error (EAR), repaired the root
cause and the derived state, and passed the final verifier — each layer scored separately, with
its own denominator.

Main entry points:

* :func:`summarize` — eligible / rejected states, attempts, EAR, pass@1, pass@k and the repair
  funnel per (agent, depth, *by*), with workflow-clustered bootstrap or Wilson intervals;
  ``common_sample`` and ``common_states`` restrict to comparable samples.
* :func:`compare_agents` — paired pass@k difference of two agents on common states, with a
  cluster-bootstrap interval and a sign-flip p-value.
* :func:`reliability` — pass^k (all k repeats pass), the flip rate and the ICC of repeats, with
  workflow-clustered intervals (also ``summarize(..., reliability=True)``);
  :func:`repeats_reliability` does the same for any repeated-trials table.
* :func:`awareness_split` — pass rates of aware vs unaware attempts (an association).
* :func:`latency`, :func:`leakage`, :func:`verifier_gate` — checks on how the benchmark was
  built.
* :func:`score`, :func:`eligibility`, :func:`pass_at_k_expr` — the lazy building blocks.

Examples
--------
>>> from recoverylab import synth, takeover
>>> tables = synth.generate("takeover", 20, seed=3)
>>> summary = takeover.summarize(tables["states"], tables["attempts"], interval="wilson")
>>> {"ear", "pass_at_k", "attempted_states"} <= set(summary.columns)
True
"""

from recoverylab.takeover._annotations import latency, leakage, verifier_gate
from recoverylab.takeover._inputs import FLAGS, eligibility, pass_at_k_expr, score
from recoverylab.takeover._reliability import (
    RELIABILITY_COLUMNS,
    pass_hat_k_expr,
    reliability,
    repeats_reliability,
)
from recoverylab.takeover._summary import (
    INTERPRETATION,
    RATES,
    awareness_split,
    compare_agents,
    summarize,
)

__all__ = [
    "FLAGS",
    "INTERPRETATION",
    "RATES",
    "RELIABILITY_COLUMNS",
    "awareness_split",
    "compare_agents",
    "eligibility",
    "latency",
    "leakage",
    "pass_at_k_expr",
    "pass_hat_k_expr",
    "reliability",
    "repeats_reliability",
    "score",
    "summarize",
    "verifier_gate",
]
