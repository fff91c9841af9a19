"""Policies scored side by side on held-out forks, with paired margins between them."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import stats
from recoverylab._errors import ParameterError, RecoveryLabWarning, format_keys, require_one_of
from recoverylab.paired import POLICY_COLUMNS, POLICY_RATE_COLUMNS
from recoverylab.router import _data

__all__ = ["COLUMNS", "compare"]

#: Columns of the :func:`compare` result, in order.
COLUMNS = (
    "policy",
    "reference",
    "condition",
    *POLICY_COLUMNS,
)
_INTERVENTION = ("interventions", "intervention_rate", "clean_touch_rate", *POLICY_RATE_COLUMNS)


def _named(policies: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    if isinstance(policies, Mapping):
        named = dict(policies)
    else:
        named = {}
        for policy in policies:
            name = getattr(policy, "kind", type(policy).__name__)
            if name in named:
                raise ParameterError(
                    f"parameter `policies` has two {name!r} policies; pass a mapping "
                    "{name: policy} to tell them apart."
                )
            named[name] = policy
    if not named:
        raise ParameterError("parameter `policies` is empty; give at least one policy.")
    for name, policy in named.items():
        if not callable(getattr(policy, "decide", None)):
            raise ParameterError(
                f"parameter `policies`: {name!r} is a {type(policy).__name__}, which has no "
                "`decide` method."
            )
    return named


def _shared_setting(named: Mapping[str, Any], attribute: str, default: object) -> Any:
    values = {name: getattr(p, attribute, default) for name, p in named.items()}
    distinct = {tuple(v) if isinstance(v, (list, tuple)) else v for v in values.values()}
    if len(distinct) > 1:
        shown = ", ".join(f"{n}: {v!r}" for n, v in values.items())
        raise ParameterError(
            f"parameter `policies`: the policies disagree on `{attribute}` ({shown}); they must "
            "be scored on the same episodes and forks."
        )
    return distinct.pop()


def _margin_pairs(
    named: Mapping[str, Any], margins: str | Sequence[tuple[str, str]] | None
) -> list[tuple[str, str]]:
    names = list(named)
    if margins is None:
        return []
    if margins == "first":
        # A margin against `Never` would repeat the policy's own gain rows.
        return [
            (names[0], other)
            for other in names[1:]
            if getattr(named[other], "kind", None) != "never"
        ]
    if isinstance(margins, str):
        raise ParameterError(
            f"parameter `margins` is {margins!r}; use 'first', None or a list of "
            "(policy, reference) name pairs."
        )
    pairs = [tuple(m) for m in margins]
    for pair in pairs:
        if len(pair) != 2 or any(p not in names for p in pair) or pair[0] == pair[1]:
            raise ParameterError(
                f"parameter `margins` has {pair!r}; each margin is a pair of two different "
                f"policy names among {', '.join(names)}."
            )
    return pairs  # type: ignore[return-value]


def _warn_overlap(named: Mapping[str, Any], test_tasks: pl.LazyFrame) -> None:
    """Warn when a fitted policy was trained on any of the tasks it is now scored on."""
    for name, policy in named.items():
        train = getattr(policy, "train_tasks_", None)
        if train is None or len(train) == 0:
            continue
        shared = test_tasks.join(
            pl.LazyFrame({"task_id": train.cast(pl.String)}), on="task_id", how="semi"
        ).sort("task_id")
        found = shared.select(pl.len()).collect().item()
        if found:
            sample = shared.head(5).collect()["task_id"].to_list()
            warnings.warn(
                f"compare: {found} of the evaluated tasks were also used to fit policy {name!r} "
                f"(task_id {format_keys(sample, found)}); its results are not a held-out "
                "evaluation. Hint: split tasks into disjoint train and test sets before fitting.",
                RecoveryLabWarning,
                stacklevel=3,
            )


def _all_episodes(
    decided: pl.LazyFrame, points: pl.LazyFrame, forks: object, pair_by: tuple[str, ...]
) -> pl.LazyFrame:
    """Decisions for every episode of the evaluated tasks; null where the policy saw no point."""
    episodes = _data.every_episode(forks, pair_by, points, decided)
    return episodes.join(decided, on=_data.episode_keys(pair_by), how="left", nulls_equal=True)


def _rows(
    decisions: Mapping[str, pl.LazyFrame],
    forks: object,
    policy: str,
    reference: str | None,
    options: Any,
) -> pl.DataFrame:
    """Rows of ``policy`` over never recovering (``reference`` None) or over another policy.

    A margin is :func:`recoverylab.paired.evaluate_policy` with the reference policy's decisions
    as its baseline; the intervention columns belong to the policies' own rows, not a margin.
    """
    from recoverylab import paired

    baseline = None if reference is None else decisions[reference]
    return paired.evaluate_policy(decisions[policy], forks, reference=baseline, **options).select(
        pl.lit(policy).alias("policy"),
        pl.lit("never" if reference is None else reference).alias("reference"),
        pl.all() if reference is None else pl.exclude(_INTERVENTION),
    )


def compare(
    policies: Mapping[str, Any] | Sequence[Any],
    decision_points: object,
    forks: object,
    *,
    margins: str | Sequence[tuple[str, str]] | None = "first",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    engine: object = "polars",
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Score several fitted policies on the same held-out episodes, and their paired margins.

    Parameters
    ----------
    policies
        ``{name: policy}``, or a list of policies named by their kind (``router``, ``anomaly``,
        ``rate_matched``, ``never``). Each has ``decide(decision_points)``; they must agree on
        ``pair_by``, ``clean_label`` and ``method``.
    decision_points
        The evaluation decision points (any table source); tasks should not overlap the
        training tasks of any policy (a :class:`RecoveryLabWarning` says so when they do).
        Every episode of these tasks in ``forks`` is scored; one with no decision point (its
        task ended before the first candidate delay) is never refreshed.
    forks
        The paired forks of the evaluation tasks.
    margins
        ``"first"`` (default): the first policy against each other one; a list of
        ``(policy, reference)`` name pairs; or ``None`` for no margins.
    confidence, n_resamples, seed
        Interval settings of every gain and margin (as :func:`recoverylab.paired.evaluate_policy`:
        the ``ci_method`` column names each row's interval; only a bootstrap draws
        ``n_resamples``); seeds are fixed by default.
    engine
        Engine of every :func:`recoverylab.paired.evaluate_policy` run, margins included
        (``"polars"``, a SparkSession or an engine of :mod:`recoverylab.engines`).
    alternative
        ``"two-sided"`` (default), ``"greater"`` (the policy is better) or ``"less"``: p-values
        and intervals are one-sided to match (``p_value`` is the p-value of the test each
        row's interval inverts, named in ``test``; see
        :func:`recoverylab.stats.paired_effect_cells`).
    adjust
        ``None``, ``"holm"`` or ``"bh"``: add ``p_adjusted`` over all rows of the result.

    Returns
    -------
    pl.DataFrame
        Columns :data:`COLUMNS`. Per policy, one row per condition and one overall row (null
        ``condition``) from :func:`recoverylab.paired.evaluate_policy`, with ``reference =
        "never"``: ``base_rate`` (never recovering), ``policy_rate``, ``gain`` with ``ci_low``,
        ``ci_high`` and ``p_value`` (of the test named in ``test``, which the interval inverts
        where ``ci_inverts_test``; the sign-flip test in ``p_sign_flip``), ``ci_method``,
        ``rescue``, ``harm``, ``interventions``,
        ``intervention_rate``, ``clean_touch_rate``. Per margin, the same rows with ``reference``
        the other policy: ``base_rate`` and ``policy_rate`` are the two policies' success rates,
        ``gain`` their paired difference (policy - reference) with its CI and p-value,
        ``rescue`` / ``harm`` the episodes where only the policy / only the reference succeeds;
        the intervention columns are null there (see the policy's own rows).

    Raises
    ------
    ParameterError
        Empty or inconsistent policies, unknown margin names.
    NotFittedError
        An unfitted policy.
    SchemaError, InputError
        As :meth:`Router.decide` and :func:`recoverylab.paired.evaluate_policy`.

    Warns
    -----
    RecoveryLabWarning
        When evaluated tasks were used to fit a policy.

    Examples
    --------
    >>> from recoverylab import synth
    >>> from recoverylab.router import Never, Router
    >>> features = ["repetition", "noops", "obs_novelty", "consistency", "progress"]
    >>> train = synth.generate("decision_points", 300, seed=1, prefix="a")
    >>> test = synth.generate("decision_points", 300, seed=2, prefix="b")
    >>> router = Router().fit(train["decision_points"], train["forks"], features=features)
    >>> table = compare([router, Never()], test["decision_points"], test["forks"],
    ...                 n_resamples=500)
    >>> table.filter(pl.col("condition").is_null())["policy"].to_list()
    ['router', 'never']
    """
    require_one_of("alternative", alternative, stats.ALTERNATIVES)
    require_one_of("adjust", adjust, stats.ADJUST_METHODS)

    named = _named(policies)
    pair_by = tuple(_shared_setting(named, "pair_by", ()))
    options: dict[str, Any] = {
        "pair_by": pair_by,
        "clean_label": _shared_setting(named, "clean_label", "clean"),
        "method": _shared_setting(named, "method", "refresh"),
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
        "engine": engine,
        "alternative": alternative,
    }
    margin_names = _margin_pairs(named, margins)
    points = _data.points(decision_points, pair_by)
    _warn_overlap(named, points.select("task_id").unique())
    decisions = {
        name: _all_episodes(policy.decide(points), points, forks, pair_by)
        for name, policy in named.items()
    }
    pairs = [*((name, None) for name in named), *margin_names]
    rows = [_rows(decisions, forks, policy, reference, options) for policy, reference in pairs]
    schema = {
        **dict.fromkeys(("policy", "reference", "condition"), pl.String),
        **dict.fromkeys(("n", "rescue", "harm", "interventions"), pl.Int64),
        "ci_method": pl.String,
        "sparse": pl.Boolean,
        "test": pl.String,
        "ci_inverts_test": pl.Boolean,
    }
    result = pl.concat(rows, how="diagonal_relaxed")
    result = result.select(
        *(pl.col(c).cast(schema.get(c, pl.Float64)) for c in COLUMNS),
        *(c for c in result.columns if c not in COLUMNS),
    )
    if adjust is None:
        return result
    adjusted = stats.adjust_p_values(result["p_value"].to_numpy(), adjust)
    return result.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64))
