"""The CIR router and its baselines as scikit-learn-style estimators (ARCHITECTURE §3.2).

Each maps decision points to at most one refresh delay per episode; a fitted rule policy exports
a JSON rule (:meth:`to_json`) that :func:`recoverylab.router.apply_rule` applies in plain Python.
"""

from __future__ import annotations

import inspect
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, asdict, dataclass, fields
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar, cast

import numpy as np
import polars as pl

from recoverylab._diagnose import reads_inputs
from recoverylab._errors import (
    NotFittedError,
    ParameterError,
    SourceError,
)
from recoverylab.io import atomic_file
from recoverylab.router import _data, _models, _search, _training
from recoverylab.router._rule import FORMAT, FORMAT_VERSION
from recoverylab.stats import result_html

__all__ = [
    "NEVER",
    "AnomalyRouter",
    "FitReport",
    "Never",
    "RateMatchedAnomaly",
    "Router",
    "Thresholds",
    "load_rule",
]

#: Threshold value meaning "never refresh": probabilities and utilities never reach it.
NEVER = 2.0


class Thresholds(NamedTuple):
    """Thresholds of the sequential rule; ``None`` means the check is not made (baselines)."""

    alpha: float
    beta: float | None
    gamma: float | None


@dataclass(frozen=True)
class FitReport:
    """What a fit learned and how its rule did on the out-of-fold (OOF) predictions.

    Rates are fractions with their denominators alongside: ``oof_gain`` is the objective (mean
    paired gain over non-clean episodes, ``n_nonclean``), ``oof_gain_overall`` the same over all
    ``n_episodes``, ``oof_clean_harm_rate`` and ``oof_clean_touch_rate`` are over ``n_clean``
    clean episodes, ``oof_intervention_rate`` over ``n_episodes``. AUCs are ``None`` for a model
    not fitted by this policy or whose labels have one class.
    """

    policy: str
    n_tasks: int
    n_episodes: int
    n_clean: int
    n_nonclean: int
    n_points: int
    n_ignored_points: int
    auc_err: float | None
    auc_p0: float | None
    auc_p1: float | None
    alpha: float
    beta: float | None
    gamma: float | None
    never: bool
    oof_gain: float
    oof_gain_overall: float
    oof_clean_harm_rate: float
    oof_clean_touch_rate: float
    oof_intervention_rate: float
    interventions: int
    rescue: int
    harm: int
    clean_harm: int
    grid_size: tuple[int, ...]
    target_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dictionary."""
        data = asdict(self)
        data["grid_size"] = list(self.grid_size)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FitReport:
        """Inverse of :meth:`to_dict`."""
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}
        values["grid_size"] = tuple(values["grid_size"] or ())
        return cls(**values)

    def _repr_html_(self) -> str:
        return result_html(self, title=f"{self.policy} fit report (out-of-fold)")


def _number(check: Callable[[float], bool]) -> Callable[[object], bool]:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and check(v)


def _int_at_least(low: int) -> Callable[[object], bool]:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= low


def _delays(value: object) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) > 0
        and all(_int_at_least(0)(d) for d in value)
        and all(a < b for a, b in pairwise(value))
    )


def _names(value: object) -> bool:
    return isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value)


def _label(value: object) -> bool:
    return isinstance(value, str) and value != ""


# Parameter constraints, declared once (scikit-learn style).
_CONSTRAINTS: dict[str, tuple[Callable[[object], bool], str]] = {
    "C": (_number(lambda v: v > 0), "a number > 0"),
    "lam": (_number(lambda v: v >= 0), "a number >= 0"),
    "eps": (_number(lambda v: 0 <= v <= 1), "a fraction between 0 and 1"),
    "delays": (_delays, "a non-empty, strictly increasing list of integers >= 0"),
    "folds": (_int_at_least(2), "an integer >= 2"),
    "clean_label": (_label, "a non-empty string"),
    "method": (_label, "a non-empty string"),
    "seed": (_int_at_least(0), "an integer >= 0"),
    "pair_by": (_names, "a list of column names"),
    "n_grid": (_int_at_least(2), "an integer >= 2"),
    "target_rate": (_number(lambda v: 0 <= v <= 1), "a fraction between 0 and 1"),
}


class _Estimator:
    """get_params / repr / parameter validation shared by every policy."""

    kind: ClassVar[str] = ""

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self) -> dict[str, Any]:
        """Return the constructor parameters (scikit-learn convention)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def _validate_params(self) -> None:
        for name, value in self.get_params().items():
            check, allowed = _CONSTRAINTS[name]
            if not check(value):
                raise ParameterError(
                    f"{type(self).__name__}: parameter `{name}` is {value!r}; it must be {allowed}."
                )


@dataclass(eq=False, repr=False)
class Never(_Estimator):
    """The policy that never refreshes: every episode gets a null delay.

    Parameters
    ----------
    pair_by
        Extra episode keys (e.g. ``model``), as for the other policies.
    clean_label
        The clean observation condition (used by :func:`compare`).
    method
        The recovery method of the forks (used by :func:`compare`).

    Examples
    --------
    >>> import polars as pl
    >>> points = pl.DataFrame({"task_id": ["t1"], "condition": ["clean"], "delay": [1]})
    >>> Never().decide(points).collect()["delay"].to_list()
    [None]
    """

    kind = "never"

    pair_by: Sequence[str] = ()
    clean_label: str = "clean"
    method: str = "refresh"

    def fit(self, decision_points: object = None, forks: object = None, features: object = None):
        """Nothing to learn; returns ``self`` (same interface as the other policies)."""
        self._validate_params()
        return self

    def decide(self, decision_points: object) -> pl.LazyFrame:
        """Return every episode of ``decision_points`` with a null ``delay``.

        Returns
        -------
        pl.LazyFrame
            Columns task_id, condition, *pair_by, delay (Int64, always null).
        """
        self._validate_params()
        keys = _data.episode_keys(self.pair_by)
        lazy = _data.points(decision_points, self.pair_by)
        return (
            lazy.select(keys)
            .unique()
            .with_columns(pl.lit(None, dtype=pl.Int64).alias("delay"))
            .sort(keys, nulls_last=True)
        )


_Policy = TypeVar("_Policy", bound="_RuleFitting")


class _RuleState(_Estimator):
    """The parameters every rule policy stores, its learned state, and the fitted check.

    Learned state (scikit-learn style, trailing underscore): ``features_``, ``scaler_``,
    ``models_`` (name -> logistic model), ``thresholds_``, ``train_tasks_``, ``fit_report_``.
    """

    _MODELS: ClassVar[tuple[str, ...]] = ()

    # Parameters every subclass stores in ``__init__`` (declared here for the shared methods).
    C: float
    eps: float
    delays: Sequence[int]
    folds: int
    clean_label: str
    seed: int
    method: str
    pair_by: Sequence[str]
    n_grid: int

    features_: tuple[str, ...]
    scaler_: _models.Scaling
    models_: dict[str, _models.LinearModel]
    thresholds_: Thresholds
    train_tasks_: pl.Series
    fit_report_: FitReport

    def _check_fitted(self, what: str) -> None:
        if not hasattr(self, "thresholds_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call `fit(decision_points, "
                f"forks, features=[...])` or load a rule with `{type(self).__name__}.from_json` "
                f"before `{what}`."
            )

    def _lam(self) -> float:
        return 0.0


class _RuleFitting(_RuleState, ABC):
    """Fitting: out-of-fold model predictions, the threshold search, the refit and its report."""

    @reads_inputs
    def fit(
        self: _Policy, decision_points: object, forks: object, features: Sequence[str]
    ) -> _Policy:
        """Learn the models and the thresholds on the training tasks.

        The router learns its three models and (alpha, beta, gamma); the anomaly baselines the
        error model and alpha (:class:`RateMatchedAnomaly`: the alpha closest to its target rate).

        Parameters
        ----------
        decision_points
            One row per (task_id, condition, *pair_by, delay) candidate point with the feature
            columns (any table source).
        forks
            The paired forks of the same tasks (none rows and ``method`` rows at the delays).
        features
            Numeric feature columns visible before the decision.

        Returns
        -------
        Router, AnomalyRouter or RateMatchedAnomaly
            ``self``, fitted.

        Raises
        ------
        ParameterError
            Bad parameters, unknown or key feature names, more folds than tasks.
        SchemaError
            Invalid tables; non-numeric, non-finite or constant features.
        InputError
            Decision points without paired outcomes; training data without clean or without
            non-clean episodes; a label with one class.
        MissingDependencyError
            scikit-learn is not installed.
        """
        self._fit(decision_points, forks, features)
        return self

    def _fit(self, decision_points: object, forks: object, features: Sequence[str]) -> None:
        self._validate_params()
        data = _training.training(self, decision_points, forks, features, owner=type(self).__name__)
        labels = _training.model_labels(data, self._MODELS)
        oof = _models.oof_predictions(data.x, labels, data.fold, self.folds, self.C)
        arrays = _training.episode_arrays(data, oof, len(self.delays), self._lam())
        thresholds, grid_size, extra = self._choose(arrays)
        off = (-np.inf if t is None else t for t in thresholds)  # None: the check is not made
        counts = _search.rule_counts(arrays, _search.first_delay(arrays, *off))
        self.features_ = tuple(features)
        self.scaler_ = _models.Scaling.fit(data.x)
        x = self.scaler_.transform(data.x)
        self.models_ = {name: _models.fit_logistic(x, y, self.C) for name, y in labels.items()}
        self.thresholds_ = thresholds
        self.train_tasks_ = data.tasks
        n_episodes = arrays.n_episodes
        n_clean = int(arrays.clean.sum())
        aucs = {name: _training.auc(oof[name], labels[name]) for name in labels}
        self.fit_report_ = FitReport(
            policy=self.kind,
            n_tasks=data.n_tasks,
            n_episodes=n_episodes,
            n_clean=n_clean,
            n_nonclean=n_episodes - n_clean,
            n_points=data.frame.height,
            n_ignored_points=data.n_ignored,
            auc_err=aucs.get("p_err"),
            auc_p0=aucs.get("p0"),
            auc_p1=aucs.get("p1"),
            alpha=thresholds.alpha,
            beta=thresholds.beta,
            gamma=thresholds.gamma,
            never=thresholds.alpha >= NEVER,
            oof_gain=counts["gain_nonclean"] / (n_episodes - n_clean),
            oof_gain_overall=counts["gain"] / n_episodes,
            oof_clean_harm_rate=counts["clean_harm"] / n_clean,
            oof_clean_touch_rate=counts["clean_touches"] / n_clean,
            oof_intervention_rate=counts["interventions"] / n_episodes,
            interventions=counts["interventions"],
            rescue=counts["rescue"],
            harm=counts["harm"],
            clean_harm=counts["clean_harm"],
            grid_size=grid_size,
            **extra,
        )

    @abstractmethod
    def _choose(
        self, arrays: _search.EpisodeArrays
    ) -> tuple[Thresholds, tuple[int, ...], dict[str, Any]]:
        """Search the thresholds on the OOF episode arrays: (thresholds, grid shape, extra)."""


class _RuleDeciding(_RuleState):
    """Deciding: the frozen models' scores and the sequential rule, as lazy polars queries."""

    def _checked(self, decision_points: object) -> pl.LazyFrame:
        lazy = _data.points(decision_points, self.pair_by)
        _data.check_features(lazy, self.features_, self.pair_by)
        _data.check_finite(lazy, self.features_, self.pair_by)
        return lazy

    def _score_exprs(self) -> dict[str, pl.Expr]:
        standardised = self.scaler_.exprs(self.features_)
        scores = {name: model.expr(standardised) for name, model in self.models_.items()}
        if "p0" in scores:
            p0, p1 = scores["p0"], scores["p1"]
            lam = pl.lit(self._lam(), dtype=pl.Float64)
            # Same operation order as apply_rule, so both decide identically.
            scores["s_rescue"] = (1.0 - p0) * p1
            scores["s_harm"] = p0 * (1.0 - p1)
            scores["utility"] = (1.0 - p0) * p1 - lam * p0 * (1.0 - p1)
        return scores

    def score(self, decision_points: object) -> pl.LazyFrame:
        """Return the model scores of every decision point (lazy in, lazy out).

        Returns
        -------
        pl.LazyFrame
            task_id, condition, *pair_by, delay, then ``p_err`` and, for the router, ``p0``,
            ``p1``, ``s_rescue`` = (1 - p0) p1, ``s_harm`` = p0 (1 - p1) and ``utility`` =
            s_rescue - lam s_harm.

        Raises
        ------
        NotFittedError
            Before ``fit``.
        """
        self._check_fitted("score")
        lazy = self._checked(decision_points)
        keys = [*_data.episode_keys(self.pair_by), "delay"]
        return lazy.select(*keys, *(expr.alias(name) for name, expr in self._score_exprs().items()))

    def decide(self, decision_points: object) -> pl.LazyFrame:
        """Apply the frozen sequential rule: at most one refresh delay per episode.

        Parameters
        ----------
        decision_points
            Candidate points (any table source) with the feature columns the policy was fitted
            on. Points at delays that are not candidate delays are ignored.

        Returns
        -------
        pl.LazyFrame
            One row per episode (task_id, condition, *pair_by) with ``delay``: the first
            candidate delay whose scores clear every threshold, or null (no refresh).

        Raises
        ------
        NotFittedError
            Before ``fit`` (or ``from_json``).
        SchemaError, ParameterError
            Missing or non-numeric feature columns; null, NaN or infinite feature values.

        Examples
        --------
        >>> from recoverylab import synth
        >>> tables = synth.generate("decision_points", 200, seed=0)
        >>> router = Router(folds=3).fit(tables["decision_points"], tables["forks"],
        ...                              features=["repetition", "noops", "progress"])
        >>> router.decide(tables["decision_points"]).collect().columns
        ['task_id', 'condition', 'delay']
        """
        self._check_fitted("decide")
        lazy = self._checked(decision_points)
        keys = _data.episode_keys(self.pair_by)
        scores = self._score_exprs()
        alpha, beta, gamma = self.thresholds_
        rule = scores["p_err"] >= alpha
        if beta is not None:
            rule = rule & ((1.0 - scores["p0"]) >= beta)
        if gamma is not None:
            rule = rule & (scores["utility"] >= gamma)
        chosen = (
            lazy.filter(pl.col("delay").is_in(list(self.delays)) & rule)
            .group_by(keys)
            .agg(pl.col("delay").min())  # candidate delays are increasing: the first one
        )
        return (
            lazy.select(keys)
            .unique()
            .join(chosen, on=keys, how="left", nulls_equal=True)
            .sort(keys, nulls_last=True)
        )


class _RuleExport(_RuleState):
    """Export: the fitted rule as a JSON-ready dictionary or file, and back."""

    def to_rule(self, *, include_tasks: bool = True) -> dict[str, Any]:
        """Return the fitted rule as a JSON-ready dictionary (see :meth:`to_json`)."""
        self._check_fitted("to_rule")
        from recoverylab import __version__

        rule: dict[str, Any] = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "policy": self.kind,
            "recoverylab_version": __version__,
            "features": list(self.features_),
            "scaling": {"mean": list(self.scaler_.mean), "scale": list(self.scaler_.scale)},
            "models": {name: model.to_dict() for name, model in self.models_.items()},
            "thresholds": self.thresholds_._asdict(),
            "lam": self._lam(),
            "delays": list(self.delays),
            "params": {
                k: list(v) if isinstance(v, tuple) else v for k, v in self.get_params().items()
            },
            "fit_report": self.fit_report_.to_dict(),
        }
        if include_tasks:
            rule["train_tasks"] = self.train_tasks_.to_list()
        return rule

    def to_json(self, path: str | os.PathLike[str], *, include_tasks: bool = True) -> Path:
        """Write the fitted rule to a JSON file, atomically.

        The file holds the format name and version, the policy kind, feature names, scaling
        (mean, scale), the logistic models (intercept, coefficients), the thresholds, lambda,
        the candidate delays, the fit parameters, the fit report and (unless ``include_tasks``
        is false) the training task ids, so that :func:`compare` can warn about overlap.
        :func:`recoverylab.router.apply_rule` reads it in plain Python.

        Returns
        -------
        Path
            The written path.
        """
        text = json.dumps(self.to_rule(include_tasks=include_tasks), indent=1, allow_nan=False)
        with atomic_file(path) as out:
            out.write((text + "\n").encode("utf-8"))
        return Path(path)

    @classmethod
    def from_rule(cls, rule: Mapping[str, Any]) -> _RulePolicy:
        """Rebuild a fitted policy from a rule dictionary (the inverse of :meth:`to_rule`)."""
        if rule.get("format") != FORMAT or rule.get("version") != FORMAT_VERSION:
            raise SourceError(
                f"not a {FORMAT} rule of version {FORMAT_VERSION} (found format "
                f"{rule.get('format')!r}, version {rule.get('version')!r})."
            )
        kind = rule.get("policy")
        base = cast("type[_RulePolicy]", cls)  # the export piece only ever serves a rule policy
        target = _KINDS.get(str(kind), base) if cls is _RulePolicy else base
        if kind != target.kind:
            raise SourceError(
                f"the rule is a {kind!r} policy, not {target.kind!r}; load it with "
                "`recoverylab.router.load_rule`."
            )
        params = {
            k: tuple(v) if isinstance(v, list) else v
            for k, v in rule["params"].items()
            if k in target._param_names()
        }
        policy = target(**params)
        policy.features_ = tuple(rule["features"])
        policy.scaler_ = _models.Scaling(
            tuple(map(float, rule["scaling"]["mean"])), tuple(map(float, rule["scaling"]["scale"]))
        )
        policy.models_ = {
            name: _models.LinearModel.from_dict(model) for name, model in rule["models"].items()
        }
        t = rule["thresholds"]
        policy.thresholds_ = Thresholds(float(t["alpha"]), t["beta"], t["gamma"])
        policy.train_tasks_ = pl.Series("task_id", rule.get("train_tasks", []), dtype=pl.String)
        policy.fit_report_ = FitReport.from_dict(rule["fit_report"])
        return policy

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> _RulePolicy:
        """Load a fitted policy written by :meth:`to_json`.

        Raises
        ------
        SourceError
            A missing or unreadable file, or a rule of another format, version or policy kind.
        """
        return cls.from_rule(_read_rule(path))


class _RulePolicy(_RuleFitting, _RuleDeciding, _RuleExport):
    """A policy that decides with logistic models and thresholds: fitted, deciding, exported.

    Its pieces: :class:`_RuleState` (parameters and learned state), :class:`_RuleFitting`,
    :class:`_RuleDeciding` and :class:`_RuleExport`; the subclasses choose the models
    (``_MODELS``) and the threshold search (``_choose``).
    """


def _read_rule(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SourceError(f"cannot read the rule `{path}` ({exc.strerror or exc}).") from exc
    try:
        rule = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"`{path}` is not a JSON rule ({exc.msg} at line {exc.lineno}).") from exc
    if not isinstance(rule, dict):
        raise SourceError(f"`{path}` is not a JSON rule (it holds a {type(rule).__name__}).")
    return rule


def load_rule(path: str | os.PathLike[str]) -> _RulePolicy:
    """Load any fitted rule policy (router or baseline) written by ``to_json``.

    Examples
    --------
    >>> policy = load_rule("rule.json")  # doctest: +SKIP
    """
    return _RulePolicy.from_rule(_read_rule(path))


@dataclass(eq=False, repr=False)
class Router(_RulePolicy):
    """The Causal Intervention Router: refresh only where expected rescue outweighs harm.

    Three L2-regularised logistic regressions on standardised features (ARCHITECTURE §3.2):
    ``p_err`` = P(observation error), ``p0`` = P(success | no recovery), ``p1`` = P(success |
    refresh now), fitted separately (T-learner). Scores ``s_R = (1-p0) p1``, ``s_H = p0 (1-p1)``
    and utility ``u = s_R - lam s_H``. The sequential rule refreshes at the first candidate delay
    with ``p_err >= alpha``, ``1 - p0 >= beta`` and ``u >= gamma``, at most once per episode.
    alpha, beta, gamma are chosen on out-of-fold predictions (folds grouped by task) to maximise
    the paired gain on non-clean episodes subject to a clean-harm rate <= ``eps``; then the models
    are refitted on all training tasks and frozen.

    Parameters
    ----------
    C
        Inverse L2 regularisation strength of the three models (scikit-learn's, as in the paper).
    lam
        Weight of the harm score in the utility.
    eps
        Largest allowed OOF clean-harm rate: clean episodes that succeed without recovery and
        fail under the policy, over clean episodes.
    delays
        Candidate delays, checked in this (increasing) order.
    folds
        Out-of-fold folds, grouped by task.
    clean_label
        The condition with correct observations.
    seed
        Seed of the task-to-fold assignment.
    method
        The recovery method of the forks whose outcomes are ``y1``.
    pair_by
        Extra episode keys of the forks and decision points (e.g. ``model``).
    n_grid
        Candidate values per threshold (distinct OOF score quantiles; ``gamma`` also gets 0).

    Attributes
    ----------
    features_ : tuple of str
        Feature columns, in model order.
    scaler_ : Scaling
        Feature means and standard deviations.
    models_ : dict
        ``p_err``, ``p0``, ``p1`` -> LinearModel (intercept, coefficients on standardised
        features).
    thresholds_ : Thresholds
        (alpha, beta, gamma). All equal to :data:`NEVER` when no feasible rule gains.
    train_tasks_ : pl.Series
        The training task ids.
    fit_report_ : FitReport
        OOF AUCs, thresholds, OOF gain, clean-harm and intervention rates, rescue / harm counts.

    Examples
    --------
    >>> from recoverylab import synth
    >>> train = synth.generate("decision_points", 300, seed=1, prefix="a")
    >>> router = Router().fit(train["decision_points"], train["forks"],
    ...                       features=["repetition", "noops", "obs_novelty", "consistency",
    ...                                 "progress", "context_used"])
    >>> router.fit_report_.oof_clean_harm_rate <= router.eps
    True
    """

    kind = "router"
    _MODELS = ("p_err", "p0", "p1")

    C: float = 0.1
    lam: float = 2.0
    eps: float = 0.02
    delays: Sequence[int] = (1, 2, 4)
    folds: int = 5
    clean_label: str = "clean"
    seed: int = 0
    _: KW_ONLY
    method: str = "refresh"
    pair_by: Sequence[str] = ()
    n_grid: int = 41

    def _lam(self) -> float:
        return float(self.lam)

    def _choose(self, arrays):
        ok = arrays.available
        grids = (
            _search.quantile_grid(arrays.p_err[ok], self.n_grid),
            _search.quantile_grid(arrays.not_p0[ok], self.n_grid),
            _search.quantile_grid(arrays.utility[ok], self.n_grid, extra=(0.0,)),
        )
        counts = _search.grid_counts(arrays, grids)
        best, _ = _search.choose(counts, eps=self.eps, n_clean=int(arrays.clean.sum()))
        size = tuple(len(g) for g in grids)
        if best is None:
            return Thresholds(NEVER, NEVER, NEVER), size, {}
        return Thresholds(*(float(grid[i]) for grid, i in zip(grids, best, strict=True))), size, {}


@dataclass(eq=False, repr=False)
class AnomalyRouter(_RulePolicy):
    """Sequential anomaly baseline: refresh at the first delay with ``p_err >= alpha``.

    The same error model as :class:`Router` (same parameters give the same ``p_err``), without
    outcome models: alpha is chosen on OOF predictions under the router's objective (gain on
    non-clean episodes) and constraint (clean-harm rate <= ``eps``). Parameters and attributes
    are those of :class:`Router`; ``thresholds_`` is ``(alpha, None, None)``.
    """

    kind = "anomaly"
    _MODELS = ("p_err",)

    C: float = 0.1
    eps: float = 0.02
    delays: Sequence[int] = (1, 2, 4)
    folds: int = 5
    clean_label: str = "clean"
    seed: int = 0
    _: KW_ONLY
    method: str = "refresh"
    pair_by: Sequence[str] = ()
    n_grid: int = 201

    def _alpha_counts(self, arrays):
        off = np.array([-np.inf])
        grids = (_search.quantile_grid(arrays.p_err[arrays.available], self.n_grid), off, off)
        return grids, _search.grid_counts(arrays, grids)

    def _choose(self, arrays):
        grids, counts = self._alpha_counts(arrays)
        best, _ = _search.choose(counts, eps=self.eps, n_clean=int(arrays.clean.sum()))
        alpha = NEVER if best is None else float(grids[0][best[0]])
        return Thresholds(alpha, None, None), (len(grids[0]),), {}


class RateMatchedAnomaly(AnomalyRouter):
    """Rate-matched anomaly baseline: alpha chosen to match a target OOF intervention rate.

    Separates "intervening selectively" from "intervening as often": with ``target_rate`` set to
    the router's OOF intervention rate (:meth:`matching` does this), the baseline refreshes about
    as often as the router but ranks points by ``p_err`` alone. Among alphas that respect the
    clean-harm limit ``eps`` (never refreshing always does), the one whose OOF intervention rate
    is closest to the target is chosen; ties go to the larger alpha.

    Parameters
    ----------
    target_rate
        The intervention rate to match (fraction of training episodes).
    C, eps, delays, folds, clean_label, seed, method, pair_by, n_grid
        As for :class:`AnomalyRouter`.
    """

    kind = "rate_matched"

    def __init__(
        self,
        target_rate: float = 0.0,
        C: float = 0.1,  # noqa: N803 (scikit-learn's and the paper's name)
        eps: float = 0.02,
        delays: Sequence[int] = (1, 2, 4),
        folds: int = 5,
        clean_label: str = "clean",
        seed: int = 0,
        *,
        method: str = "refresh",
        pair_by: Sequence[str] = (),
        n_grid: int = 201,
    ) -> None:
        super().__init__(
            C, eps, delays, folds, clean_label, seed, method=method, pair_by=pair_by, n_grid=n_grid
        )
        self.target_rate = target_rate

    @classmethod
    def matching(cls, router: Router, *, n_grid: int = 201) -> RateMatchedAnomaly:
        """Build a rate-matched baseline with the router's parameters and OOF rate.

        Raises
        ------
        NotFittedError
            If ``router`` is not fitted.
        """
        router._check_fitted("RateMatchedAnomaly.matching")
        params = {k: v for k, v in router.get_params().items() if k not in ("lam", "n_grid")}
        return cls(target_rate=router.fit_report_.oof_intervention_rate, n_grid=n_grid, **params)

    def _choose(self, arrays):
        grids, counts = self._alpha_counts(arrays)
        n_clean = int(arrays.clean.sum())
        interventions = counts.counts["interventions"][:, 0, 0]
        feasible = counts.counts["clean_harm"][:, 0, 0] <= self.eps * n_clean + 1e-9
        rates = np.append(interventions / arrays.n_episodes, 0.0)  # last: never refresh
        alphas = np.append(grids[0], NEVER)
        feasible = np.append(feasible, True)
        distance = np.where(feasible, np.abs(rates - self.target_rate), np.inf)
        best = np.lexsort((-alphas, distance))[0]  # closest rate, then the larger alpha
        extra = {"target_rate": float(self.target_rate)}
        return Thresholds(float(alphas[best]), None, None), (len(grids[0]),), extra


_KINDS: dict[str, type[_RulePolicy]] = {
    cls.kind: cls for cls in (Router, AnomalyRouter, RateMatchedAnomaly)
}
