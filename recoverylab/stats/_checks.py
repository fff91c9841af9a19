"""The vocabularies and validators that every statistic shares.

One place for the allowed values of ``ci_method``, ``alternative`` and ``adjust`` and for the
checks of ``confidence``, ``n_resamples``, ``seed`` and count arrays (STYLE: one way in for a
concern): :func:`check_resampling` validates a protocol's resampling parameters before any data
is read, with the same names and messages in every protocol.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recoverylab._errors import ParameterError, format_keys, require_one_of

#: Interval methods of a paired effect (``paired_effect_cells``); ``auto`` is the default.
PAIRED_CI_METHODS = ("auto", "fay-lumbard", "cluster-melded", "sign-flip", "percentile", "bca")

#: Multiplicity adjustments across the cells of one result (``p_adjusted``).
ADJUST_METHODS = (None, "holm", "bh")

#: Alternatives of every test (and the matching one-sided intervals).
ALTERNATIVES = ("two-sided", "greater", "less")


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _check_seed(name: str, value: object) -> int:
    if not _is_int(value) or int(value) < 0:  # type: ignore[call-overload]
        raise ParameterError(f"parameter `{name}` is {value!r}; it must be a non-negative integer.")
    return int(value)  # type: ignore[call-overload]


def _check_n_resamples(value: object) -> int:
    if not _is_int(value) or int(value) < 1:  # type: ignore[call-overload]
        raise ParameterError(f"parameter `n_resamples` is {value!r}; it must be an integer >= 1.")
    return int(value)  # type: ignore[call-overload]


def _check_confidence(value: object) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )
    if not ok or not 0.0 < float(value) < 1.0:  # type: ignore[arg-type]
        raise ParameterError(
            f"parameter `confidence` is {value!r}; it must be a number strictly between 0 and 1, "
            "e.g. 0.95."
        )
    return float(value)  # type: ignore[arg-type]


#: Interval methods of the cluster bootstrap (``ci_method`` of every protocol).
CI_METHODS = ("percentile", "bca")


def check_resampling(
    *,
    confidence: object,
    n_resamples: object,
    seed: object,
    ci_method: object = "percentile",
    ci_methods: Sequence[str] = CI_METHODS,
    alternative: object = "two-sided",
    adjust: object = None,
) -> None:
    """Check the resampling parameters every protocol shares, before any data is read.

    The one parameter-validation helper of recoverylab (ARCHITECTURE §4): the same names and
    the same messages in every protocol.

    Raises
    ------
    ParameterError
        For a ``confidence`` outside (0, 1), ``n_resamples`` < 1, a negative or non-integer
        ``seed``, a ``ci_method`` not in ``ci_methods`` (the bootstrap's ``"percentile"`` and
        ``"bca"`` by default; :data:`PAIRED_CI_METHODS` for paired effects), an unknown
        ``alternative`` or ``adjust``.

    Examples
    --------
    >>> check_resampling(confidence=0.95, n_resamples=1000, seed=0, ci_method="bca")
    """
    require_one_of("ci_method", ci_method, ci_methods)
    require_one_of("alternative", alternative, ALTERNATIVES)
    require_one_of("adjust", adjust, ADJUST_METHODS)
    _check_confidence(confidence)
    _check_n_resamples(n_resamples)
    _check_seed("seed", seed)


def _numeric_array(name: str, data: object) -> np.ndarray:
    array = np.asarray(data)
    if array.dtype.kind not in "biuf":
        raise ParameterError(
            f"parameter `{name}` has dtype {array.dtype}; it must hold numbers (int or float)."
        )
    return array


def _check_counts(counts: object, length: int, rows: str) -> np.ndarray:
    """Check that ``counts`` holds one positive integer per type and return it as int64."""
    array = _numeric_array("counts", counts)
    if array.ndim != 1 or array.shape[0] != length:
        raise ParameterError(
            f"parameter `counts` has shape {array.shape} but there are {length} {rows}; give one "
            "count per type."
        )
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(array) | (array < 1) | (array != np.round(array))
    if bad.any():
        where = np.flatnonzero(bad)
        shown = format_keys((f"row {i}: {array[i]}" for i in where), total=where.size)
        raise ParameterError(
            f"parameter `counts` has {where.size} entries that are not positive integers "
            f"({shown}); each count is a number of clusters >= 1."
        )
    return array.astype(np.int64)


#: The interval keyword's old name (deprecated for one release).
_OLD_CI_NAME = {"method": "ci_method"}
