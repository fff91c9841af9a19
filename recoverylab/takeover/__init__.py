"""Takeover from replayed error states (CUA-Recovery protocol, ARCHITECTURE §3.4).

Layout: ``_inputs`` (contracts, scored units), ``_stages`` (the stages every plan shares),
``_summary``, ``_compare``, ``_awareness``, ``_reliability``, ``_annotations``, ``_judged``
(judged plans, pass@1 and EAR) and ``_judged_repeats`` (judged pass@k and pass^k). May import the
core (plan, stats, schema, io, _errors, _judged_plan) and ``engines.run``; never another protocol
or an engine module.

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
* :func:`summarize_judged` — pass@1 or EAR when an LLM judge decided the outcome: PPI++ from
  human labels on a random subset of attempts, or Rogan–Gladen from the judge's known
  sensitivity and specificity.
* :func:`reliability_judged` — pass@k and pass^k when a judge decided each attempt: PPI++ on
  per-unit values (a unit's gold value needs a gold label on every attempt).
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

from recoverylab._diagnose import reads_inputs
from recoverylab.takeover import (
    _annotations,
    _awareness,
    _compare,
    _inputs,
    _judged,
    _judged_repeats,
    _reliability,
    _summary,
)
from recoverylab.takeover._awareness import INTERPRETATION
from recoverylab.takeover._inputs import FLAGS, pass_at_k_expr
from recoverylab.takeover._reliability import (
    RELIABILITY_COLUMNS,
    RELIABILITY_METHOD_COLUMNS,
    pass_hat_k_expr,
)
from recoverylab.takeover._summary import RATES

# Public verbs: an engine error on a damaged input file becomes a SourceError naming the file.
latency = reads_inputs(_annotations.latency)
leakage = reads_inputs(_annotations.leakage)
verifier_gate = reads_inputs(_annotations.verifier_gate)
eligibility = reads_inputs(_inputs.eligibility)
score = reads_inputs(_inputs.score)
awareness_split = reads_inputs(_awareness.awareness_split)
compare_agents = reads_inputs(_compare.compare_agents)
summarize = reads_inputs(_summary.summarize)
summarize_judged = reads_inputs(_judged.summarize_judged)
reliability_judged = reads_inputs(_judged_repeats.reliability_judged)
reliability = reads_inputs(_reliability.reliability)
repeats_reliability = reads_inputs(_reliability.repeats_reliability)

__all__ = [
    "FLAGS",
    "INTERPRETATION",
    "RATES",
    "RELIABILITY_COLUMNS",
    "RELIABILITY_METHOD_COLUMNS",
    "awareness_split",
    "compare_agents",
    "eligibility",
    "latency",
    "leakage",
    "pass_at_k_expr",
    "pass_hat_k_expr",
    "reliability",
    "reliability_judged",
    "repeats_reliability",
    "score",
    "summarize",
    "summarize_judged",
    "verifier_gate",
]
