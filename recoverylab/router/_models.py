"""The three logistic models of the CIR router: scaling, task-grouped folds, OOF predictions.

scikit-learn is imported here, lazily, only when a model is fitted: deciding with a fitted or
loaded router needs only the stored coefficients (:class:`LinearModel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from recoverylab._errors import MissingDependencyError

__all__ = ["LinearModel", "Scaling", "fit_logistic", "oof_predictions", "task_folds"]

#: Probability used for a fold whose training labels are all one class (see ``fit_logistic``).
_CLIP = 1e-6


@dataclass(frozen=True)
class Scaling:
    """Standardisation of the features: ``(x - mean) / scale`` (population standard deviation)."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]

    @classmethod
    def fit(cls, x: np.ndarray) -> Scaling:
        """Learn the mean and standard deviation of every column of ``x``."""
        return cls(tuple(map(float, x.mean(axis=0))), tuple(map(float, x.std(axis=0))))

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Return the standardised copy of ``x``."""
        return (x - np.asarray(self.mean)) / np.asarray(self.scale)

    def exprs(self, features: tuple[str, ...]) -> list[pl.Expr]:
        """Polars expressions of the standardised features, in the order of ``features``."""
        return [
            (pl.col(name).cast(pl.Float64) - mean) / scale
            for name, mean, scale in zip(features, self.mean, self.scale, strict=True)
        ]


@dataclass(frozen=True)
class LinearModel:
    """A fitted L2 logistic regression on standardised features: intercept and coefficients."""

    intercept: float
    coef: tuple[float, ...]

    def logit_numpy(self, x: np.ndarray) -> np.ndarray:
        """Return the logits of the rows of the standardised ``x``."""
        z = np.full(x.shape[0], self.intercept)
        for j, weight in enumerate(self.coef):  # left to right, as in ``apply_rule``
            z = z + weight * x[:, j]
        return z

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Return the probabilities of the rows of the standardised ``x``."""
        return _sigmoid(self.logit_numpy(x))

    def expr(self, standardised: list[pl.Expr]) -> pl.Expr:
        """Polars expression of the probability (same operation order as ``apply_rule``)."""
        z: pl.Expr = pl.lit(self.intercept, dtype=pl.Float64)
        for weight, x in zip(self.coef, standardised, strict=True):
            z = z + pl.lit(weight, dtype=pl.Float64) * x
        e = z.exp()
        return pl.when(z >= 0).then(1.0 / (1.0 + (-z).exp())).otherwise(e / (1.0 + e))

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: ``{"intercept": float, "coef": [float, ...]}``."""
        return {"intercept": self.intercept, "coef": list(self.coef)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LinearModel:
        """Inverse of :meth:`to_dict`."""
        return cls(float(data["intercept"]), tuple(float(c) for c in data["coef"]))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, c: float) -> LinearModel:
    """Fit an L2 logistic regression (scikit-learn) with inverse regularisation ``c``.

    Labels of a single class (possible inside one fold of a small data set) give a constant model
    at the clipped class frequency instead of failing; the full fit checks labels beforehand.
    """
    positives = int(y.sum())
    if positives in (0, y.shape[0]):
        rate = min(max(positives / y.shape[0], _CLIP), 1 - _CLIP)
        return LinearModel(float(np.log(rate / (1 - rate))), (0.0,) * x.shape[1])
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError as exc:
        raise MissingDependencyError(
            "fitting a router needs scikit-learn, which is not installed; "
            "install it with `pip install 'recoverylab[router]'`."
        ) from exc
    # Newton–Cholesky solves this small, dense, L2-penalised problem exactly and fast (few
    # features, many points); the optimum is the same as with any other solver.
    model = LogisticRegression(C=c, solver="newton-cholesky", max_iter=100)
    model.fit(x, y)
    return LinearModel(float(model.intercept_[0]), tuple(map(float, model.coef_[0])))


def task_folds(task_index: np.ndarray, n_tasks: int, folds: int, seed: int) -> np.ndarray:
    """Assign every row to a fold so that all rows of a task share one fold.

    Tasks (numbered ``0..n_tasks-1`` in sorted task-id order) are shuffled with ``seed`` and dealt
    round-robin, so fold sizes differ by at most one task and the split does not depend on the
    order of the rows.
    """
    order = np.random.default_rng(seed).permutation(n_tasks)
    fold_of_task = np.empty(n_tasks, dtype=np.int64)
    fold_of_task[order] = np.arange(n_tasks) % folds
    return fold_of_task[task_index]


def oof_predictions(
    x: np.ndarray, labels: dict[str, np.ndarray], fold: np.ndarray, folds: int, c: float
) -> dict[str, np.ndarray]:
    """Out-of-fold probabilities of one logistic model per label.

    Each fold is predicted by models fitted on the other folds, standardised with the training
    folds' own scaling, so no held-out row shapes its own prediction.
    """
    out = {name: np.empty(x.shape[0]) for name in labels}
    for k in range(folds):  # a loop over folds, not rows
        test = fold == k
        train = ~test
        scaling = Scaling.fit(x[train])
        safe = Scaling(scaling.mean, tuple(s if s > 0 else 1.0 for s in scaling.scale))
        x_train, x_test = safe.transform(x[train]), safe.transform(x[test])
        for name, y in labels.items():
            out[name][test] = fit_logistic(x_train, y[train], c).predict(x_test)
    return out
