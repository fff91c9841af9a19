"""The statistics engine: cluster bootstrap, sign-flip tests and paired-effect intervals.

The statistics work on additive per-cluster partials (ARCHITECTURE §3, principle 3), so intervals
and tests respect clustering (task, workflow, case) and cost what the clusters cost, never
rows × resamples. Resampling K clusters with replacement is drawing multinomial counts over the
distinct cluster *types* (rows of partial values) with probabilities ``count / K`` (ARCHITECTURE
§4): a cell of a million tasks but three types costs three numbers per resample. Polars appears
only in the frame-facing wrappers (:func:`cluster_bootstrap`, :func:`sign_flip_cells`,
:func:`paired_effect_cells`, :func:`wilson_exprs`). Randomness is per cell (:func:`cell_rng`: the
seed and a stable hash of the cell key), so a cell's result does not depend on the other cells,
their order or the machine (except the coupled workflow sets of
:func:`cluster_bootstrap_ratios`, drawn together).

The random-stream guarantee: what is drawn depends only on the seed, the cell key (or the
coupled sets' clusters) and ``n_resamples``; *how* the draws are counted and summed (batches,
the rows counted per ``bincount``, float32 products for integer columns whose sums stay below
2**24, or several such columns packed side by side in the bits of one float64 column (exact
below 2**53), block layout and orientation of the products, one product for columns that are
multiples of another, multiples of 1/L summed as integers and divided once, the coupled sets'
corrections added to those integer sums set by set) never consumes or reorders the stream. So
a faster path gives the same resamples: sums of integer partials are identical bit for bit,
fractional ones up to the summation order of a product (a multiple of 1/L, such as a pass@1 sum
over three repeats, is summed exactly, corrections included: its last bit may differ from a
float64 sum's) (tests/test_stats_shared_bootstrap.py compares :func:`cluster_bootstrap_ratios`'
coupled sums with a dense reference draw for draw).

One public namespace over topic modules (each says what it holds and why); other packages
import from ``recoverylab.stats`` only, never from a private topic module. The one public
submodule is :mod:`recoverylab.stats.sequences`: anytime-valid confidence sequences (betting),
used by the gate and the monitor (``from recoverylab.stats import sequences``).

* ``_checks``: the shared vocabularies (``ci_method``, ``alternative``, ``adjust``) and
  :func:`check_resampling`; ``_cells``: frames of partials to per-cell type tables.
* ``_streams``: :func:`cell_rng` and clusters merged into types; ``_limits``: size limits.
* ``_column_sums``: :func:`ratio`, :func:`ratio_difference`; ``_reliability``:
  :func:`icc_oneway`.
* ``_bootstrap``: :func:`bootstrap_types`, :func:`cluster_bootstrap` (percentile, BCa);
  ``_bootstrap_ratios`` and ``_shared_draws``: :func:`cluster_bootstrap_ratios` (the coupled
  draws' exact product in ``_exact_product``, their set-by-set corrections in ``_corrections``).
* ``_signflip``: :func:`sign_flip_test`, :func:`sign_flip_cells`; ``_distributions``: the
  distribution functions computed without scipy.
* ``_paired_intervals``: :func:`fay_lumbard_interval`, :func:`sign_flip_interval`,
  :func:`cluster_melded_interval` (``_meld``: their quadrature); ``_paired_effect``:
  :func:`paired_effect_cells` (each interval with the p-value of the test it inverts),
  :func:`interval_agrees_with_test`; :func:`agree_with_test` is deprecated (moves nothing).
* ``_rates``: :func:`rate_cells`, :func:`rate_interval`, :func:`korn_graubard`: the one
  interval policy of every protocol's rates (``ci_method="auto"``; Korn–Graubard where the
  bootstrap is not accurate).
* ``_judged``: :func:`judged_cells`, :func:`judged_partials`: judged outcomes,
  prediction-powered (PPI++) from judge verdicts on every unit and gold labels on a random
  subset, cluster-aware and stratified; ``_judged_paired``: :func:`judged_paired_cells`
  (its phases :func:`judged_paired_partials`, :func:`judged_paired_finish`),
  :func:`check_judged_units` (its phases :func:`judged_unit_counts`,
  :func:`raise_judged_unit_counts`, for engines); ``_judged_planning``:
  :func:`gold_labels_needed` (the gold labels a target half-width needs, given the judge's
  error rates);
  ``_judge_error``: :func:`judge_error_cells` (sensitivity, specificity, agreement) and
  :func:`rogan_gladen_cells` (a judge rate corrected by known error rates).
* ``_multiplicity``: :func:`adjust_p_values`; ``_classical``: :func:`mcnemar_exact`,
  :func:`wilson_interval`, :func:`wilson_exprs`.
* ``_results``: the result dataclasses and :func:`result_html`.
"""

from __future__ import annotations

import sys
import types

from recoverylab.stats import _limits
from recoverylab.stats._bootstrap import _acceleration as _acceleration
from recoverylab.stats._bootstrap import bootstrap_types, cluster_bootstrap
from recoverylab.stats._bootstrap_ratios import cluster_bootstrap_ratios
from recoverylab.stats._checks import (
    ADJUST_METHODS,
    ALTERNATIVES,
    CI_METHODS,
    PAIRED_CI_METHODS,
    check_resampling,
)
from recoverylab.stats._classical import mcnemar_exact, wilson_exprs, wilson_interval
from recoverylab.stats._column_sums import Statistic as Statistic
from recoverylab.stats._column_sums import ratio, ratio_difference
from recoverylab.stats._distributions import _binomial_half_pmf as _binomial_half_pmf
from recoverylab.stats._distributions import _binomial_half_two_sided as _binomial_half_two_sided
from recoverylab.stats._distributions import _fft_convolve as _fft_convolve
from recoverylab.stats._distributions import _normal_cdf as _normal_cdf
from recoverylab.stats._distributions import _normal_quantile as _normal_quantile
from recoverylab.stats._distributions import _special as _special
from recoverylab.stats._judge_error import (
    JUDGE_MEASURES,
    check_judge_error_rates,
    judge_error_cells,
    rogan_gladen_cells,
)
from recoverylab.stats._judged import (
    JUDGED_CI_METHODS,
    JUDGED_COLUMNS,
    JUDGED_TESTS,
    JUDGED_VALUES,
    MIN_LABELLED_CLUSTERS,
    MIN_LABELLED_EVENTS,
    MIN_LABELLED_UNITS,
    judged_cells,
    judged_partials,
)
from recoverylab.stats._judged_paired import (
    PAIRED_OUTCOMES,
    check_judged_units,
    judged_paired_cells,
    judged_paired_finish,
    judged_paired_partials,
    judged_unit_counts,
    raise_judged_unit_counts,
)
from recoverylab.stats._judged_planning import GoldPlan, gold_labels_needed
from recoverylab.stats._meld import _meld_cdf as _meld_cdf
from recoverylab.stats._meld import _meld_quantile as _meld_quantile
from recoverylab.stats._meld import _meld_setup as _meld_setup
from recoverylab.stats._multiplicity import adjust_p_values
from recoverylab.stats._paired_effect import BOOTSTRAP_TEST as BOOTSTRAP_TEST
from recoverylab.stats._paired_effect import SPARSE_CLUSTERS as SPARSE_CLUSTERS
from recoverylab.stats._paired_effect import SPARSE_NONZERO_CLUSTERS as SPARSE_NONZERO_CLUSTERS
from recoverylab.stats._paired_effect import (
    agree_with_test,
    interval_agrees_with_test,
    paired_effect_cells,
)
from recoverylab.stats._paired_intervals import _melded_bounds as _melded_bounds
from recoverylab.stats._paired_intervals import (
    cluster_melded_interval,
    effective_melded_interval,
    fay_lumbard_interval,
    sign_flip_interval,
)
from recoverylab.stats._rates import (
    BOOTSTRAP_MIN_CLUSTERS,
    BOOTSTRAP_MIN_EVENTS,
    RATE_CI_METHODS,
    RATE_COLUMNS,
    RATE_TESTS,
    RateInterval,
    bootstrap_accurate,
    korn_graubard,
    rate_cells,
    rate_interval,
)
from recoverylab.stats._reliability import ICC_COLUMNS as ICC_COLUMNS
from recoverylab.stats._reliability import icc_oneway
from recoverylab.stats._results import (
    BootstrapResult,
    Interval,
    IntervalExprs,
    ResultHtml,
    SignFlipResult,
    TestResult,
    result_html,
)
from recoverylab.stats._shared_draws import _coupled_resample_sums as _coupled_resample_sums
from recoverylab.stats._shared_draws import _shared_resample_sums as _shared_resample_sums
from recoverylab.stats._signflip import sign_flip_cells, sign_flip_test
from recoverylab.stats._streams import _merge_types as _merge_types
from recoverylab.stats._streams import cell_rng

__all__ = [
    "ADJUST_METHODS",
    "ALTERNATIVES",
    "BOOTSTRAP_MIN_CLUSTERS",
    "BOOTSTRAP_MIN_EVENTS",
    "CI_METHODS",
    "JUDGED_CI_METHODS",
    "JUDGED_COLUMNS",
    "JUDGED_TESTS",
    "JUDGED_VALUES",
    "JUDGE_MEASURES",
    "MIN_LABELLED_CLUSTERS",
    "MIN_LABELLED_EVENTS",
    "MIN_LABELLED_UNITS",
    "PAIRED_CI_METHODS",
    "PAIRED_OUTCOMES",
    "RATE_CI_METHODS",
    "RATE_COLUMNS",
    "RATE_TESTS",
    "BootstrapResult",
    "GoldPlan",
    "Interval",
    "IntervalExprs",
    "RateInterval",
    "ResultHtml",
    "SignFlipResult",
    "TestResult",
    "adjust_p_values",
    "agree_with_test",
    "bootstrap_accurate",
    "bootstrap_types",
    "cell_rng",
    "check_judge_error_rates",
    "check_judged_units",
    "check_resampling",
    "cluster_bootstrap",
    "cluster_bootstrap_ratios",
    "cluster_melded_interval",
    "effective_melded_interval",
    "fay_lumbard_interval",
    "gold_labels_needed",
    "icc_oneway",
    "interval_agrees_with_test",
    "judge_error_cells",
    "judged_cells",
    "judged_paired_cells",
    "judged_paired_finish",
    "judged_paired_partials",
    "judged_partials",
    "judged_unit_counts",
    "korn_graubard",
    "mcnemar_exact",
    "paired_effect_cells",
    "raise_judged_unit_counts",
    "rate_cells",
    "rate_interval",
    "ratio",
    "ratio_difference",
    "result_html",
    "rogan_gladen_cells",
    "sign_flip_cells",
    "sign_flip_interval",
    "sign_flip_test",
    "wilson_exprs",
    "wilson_interval",
]


def _limit(name: str) -> property:
    """Return the size limit ``_limits.<name>`` as a property read and set there."""
    return property(
        lambda _: getattr(_limits, name),
        lambda _, value: setattr(_limits, name, value),
        doc=f"``_limits.{name}``, the value every topic module reads.",
    )


class _Namespace(types.ModuleType):
    """``recoverylab.stats`` itself: its size limits are read from and set in ``_limits``.

    The topic modules read a limit from ``_limits`` when they run, so one value serves them all;
    setting ``stats._MAX_LATTICE`` (as a test's monkeypatch does) sets that value, instead of a
    copy here that no code reads.
    """

    _MAX_BATCH_ELEMENTS = _limit("MAX_BATCH_ELEMENTS")
    _MAX_ENUMERATION = _limit("MAX_ENUMERATION")
    _MAX_LATTICE = _limit("MAX_LATTICE")
    _DIRECT_CONVOLVE_MAX = _limit("DIRECT_CONVOLVE_MAX")
    _SCIPY_MC_MAX_CLUSTERS = _limit("SCIPY_MC_MAX_CLUSTERS")


sys.modules[__name__].__class__ = _Namespace
