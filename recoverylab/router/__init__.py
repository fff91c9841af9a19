"""Causal Intervention Router (CIR, ARCHITECTURE §3.2): learn when recovery helps.

Layout: ``_data`` (labels), ``_training``/``_models``/``_search`` (fitting), ``_policies`` (Router,
baselines), ``_rule`` (the JSON rule), ``_compare``, ``_uplift``, ``_breakeven``. May import the
core, ``engines.run`` and paired's public API; never goal, takeover or an engine module.

Paired forks say after the fact whether a refresh rescued or harmed an episode; a harness has to
decide before either outcome is known. The router turns paired evidence into a deployable rule:
three logistic models estimate, from features visible before the decision, the probability of an
observation error (``p_err``) and of success without (``p0``) and with (``p1``) a refresh now; the
sequential rule refreshes at the first candidate delay whose scores clear thresholds chosen on
out-of-fold predictions to maximise the gain on non-clean episodes under a limit ``eps`` on the
clean-harm rate.

* :class:`Router` -- fit / decide / score / to_json / from_json.
* :class:`AnomalyRouter`, :class:`RateMatchedAnomaly`, :class:`Never` -- baselines with the same
  interface.
* :func:`compare` -- policies scored on held-out forks (through
  :func:`recoverylab.paired.evaluate_policy`) and paired margins between policies.
* :class:`BreakEven` -- baseline: refresh when the router's failure probability 1 − p0 reaches
  the break-even p* learned from the training forks.
* :func:`uplift` -- policies as uplift rankers on held-out forks: TOC and Qini curves, RATE
  (AUTOC, QINI), uplift@k, task-clustered intervals and paired RATE differences.
* :func:`apply_rule` -- the exported JSON rule applied in plain Python (copyable into a harness).
* :func:`load_rule` -- any exported policy back from JSON.

scikit-learn is needed to fit (``pip install 'recoverylab[router]'``), not to decide.
"""

from recoverylab._diagnose import reads_inputs
from recoverylab._errors import RecoveryLabWarning
from recoverylab.router import _compare, _uplift
from recoverylab.router._breakeven import BreakEven
from recoverylab.router._models import LinearModel, Scaling
from recoverylab.router._policies import (
    NEVER,
    AnomalyRouter,
    FitReport,
    Never,
    RateMatchedAnomaly,
    Router,
    Thresholds,
    load_rule,
)
from recoverylab.router._rule import apply_rule
from recoverylab.router._uplift import CURVE_COLUMNS, METRIC_COLUMNS, Uplift, rate_statistics

compare = reads_inputs(_compare.compare)
uplift = reads_inputs(_uplift.uplift)

__all__ = [
    "CURVE_COLUMNS",
    "METRIC_COLUMNS",
    "NEVER",
    "AnomalyRouter",
    "BreakEven",
    "FitReport",
    "LinearModel",
    "Never",
    "RateMatchedAnomaly",
    "RecoveryLabWarning",
    "Router",
    "Scaling",
    "Thresholds",
    "Uplift",
    "apply_rule",
    "compare",
    "load_rule",
    "rate_statistics",
    "uplift",
]
