"""Paired counterfactual recovery evaluation (CIR protocol, ARCHITECTURE §3.1).

Layout: ``_pairs``/``_rules``/``_bits`` (pairing), ``_shards`` (pairs_plan), ``_summary`` and
``_contrast`` (cells), ``_policy``, ``_breakeven``, ``_planning``. May import the core (plan, stats,
schema, io, _errors) and ``engines.run``; never another protocol or an engine module.

From the same execution state a run is forked twice: once without recovery (``method="none"``)
and once with a recovery operation at some delay. Pairing the two branches separates what one
average success rate hides: the runs a recovery *rescued* (no-recovery fails, recovery succeeds)
and the runs it *harmed* (no-recovery succeeds, recovery fails).

* :func:`pairs` -- one row per paired recovery branch (lazy), with carry-forward;
  :func:`pairs_plan` -- the same pairs as a plan, for any engine or another protocol's plan.
* :func:`exclusions` -- recovery rows left out, counted by reason (lazy).
* :func:`summarize` -- rescue/harm cells per (condition, delay, method, *by*) with an exact
  sign-flip p-value and an interval that agrees with it (``ci_method`` names it per cell).
* :func:`summarize_judged` -- the same cells when a judge decided ``success``: PPI++ rescue,
  harm and effect from the judge on every branch and human labels on a random subset;
  :func:`judge_agreement` -- the judge's sensitivity, specificity and agreement;
  :func:`judged_pairs` -- the pairs with both branches' verdicts and labels;
  :func:`rogan_gladen_effect` -- the effect corrected by the judge's known error rates.
* :func:`contrast` -- effect of one condition minus another, tasks resampled jointly.
* :func:`rescue_overlap` -- which tasks two methods rescue, and how many both do.
* :func:`evaluate_policy` -- a recovery policy's decisions scored against the forks.
* :func:`break_even` -- the break-even failure probability p* = d / (r + d) per cell (also
  ``summarize(..., break_even=True)``).
* :func:`gate` -- ship or hold: a policy's claims judged on the forks (PASS / FAIL /
  INCONCLUSIVE, adjusted as one family); :func:`read_policy` reads its TOML policy.
* :func:`monitor` -- anytime-valid confidence sequences of each cell's effect over tasks in
  arrival order, and the task at which each claim is decided.
* :func:`plan_study`, :func:`power`, :func:`mde`, :func:`tasks_needed` -- plan a paired study
  (Connor 1987 with the design effect of several pairs per task); :func:`pilot_rates` estimates
  the inputs from a pilot, :func:`simulate_power` checks a plan against the exact test.
"""

from recoverylab._diagnose import reads_inputs
from recoverylab.paired import (
    _breakeven,
    _contrast,
    _gate,
    _judged,
    _monitor,
    _pairs,
    _planning,
    _policy,
    _summary,
)
from recoverylab.paired._breakeven import BREAK_EVEN_COLUMNS
from recoverylab.paired._gate import GateResult
from recoverylab.paired._gate_policy import Claim, Policy, read_policy
from recoverylab.paired._monitor import MonitorResult
from recoverylab.paired._pairs import Cohort
from recoverylab.paired._planning import (
    SimulatedPower,
    mde,
    power,
    simulate_power,
    tasks_needed,
)
from recoverylab.paired._policy import RATE_INTERVAL_COLUMNS as POLICY_RATE_COLUMNS
from recoverylab.paired._policy import RESULT_COLUMNS as POLICY_COLUMNS
from recoverylab.paired._shards import pairs_plan

# Public verbs: an engine error on a damaged input file becomes a SourceError naming the file.
exclusions = reads_inputs(_pairs.exclusions)
pairs = reads_inputs(_pairs.pairs)
evaluate_policy = reads_inputs(_policy.evaluate_policy)
contrast = reads_inputs(_contrast.contrast)
rescue_overlap = reads_inputs(_contrast.rescue_overlap)
summarize = reads_inputs(_summary.summarize)
break_even = reads_inputs(_breakeven.break_even)
pilot_rates = reads_inputs(_planning.pilot_rates)
plan_study = reads_inputs(_planning.plan_study)
gate = reads_inputs(_gate.gate)
monitor = reads_inputs(_monitor.monitor)
summarize_judged = reads_inputs(_judged.summarize_judged)
judged_pairs = reads_inputs(_judged.judged_pairs)
judge_agreement = reads_inputs(_judged.judge_agreement)
rogan_gladen_effect = reads_inputs(_judged.rogan_gladen_effect)

__all__ = [
    "BREAK_EVEN_COLUMNS",
    "POLICY_COLUMNS",
    "POLICY_RATE_COLUMNS",
    "Claim",
    "Cohort",
    "GateResult",
    "MonitorResult",
    "Policy",
    "SimulatedPower",
    "break_even",
    "contrast",
    "evaluate_policy",
    "exclusions",
    "gate",
    "judge_agreement",
    "judged_pairs",
    "mde",
    "monitor",
    "pairs",
    "pairs_plan",
    "pilot_rates",
    "plan_study",
    "power",
    "read_policy",
    "rescue_overlap",
    "rogan_gladen_effect",
    "simulate_power",
    "summarize",
    "summarize_judged",
    "tasks_needed",
]
