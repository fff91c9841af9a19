"""Fitting data of the rule policies: labelled decision points, laid out by episode × delay.

The router and its anomaly baselines (:mod:`recoverylab.router._policies`) fit on the same
data: each candidate point labelled from the forks (ARCHITECTURE §3.2: ``obs_error``, ``y0``,
``y1``), task-grouped folds, and the out-of-fold scores as episode × delay arrays for the
threshold search (:mod:`recoverylab.router._search`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl

from recoverylab._errors import InputError, ParameterError, SchemaError
from recoverylab.router import _data, _models, _search


class Settings(Protocol):
    """The policy parameters the fitting data depends on."""

    delays: Sequence[int]
    folds: int
    clean_label: str
    seed: int
    method: str
    pair_by: Sequence[str]


@dataclass(frozen=True)
class Training:
    """Collected training data: the labelled points and their episode × delay layout."""

    frame: pl.DataFrame
    x: np.ndarray
    fold: np.ndarray
    episode: np.ndarray
    delay_index: np.ndarray
    clean: np.ndarray
    n_tasks: int
    n_ignored: int
    tasks: pl.Series


def auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Area under the ROC curve from ranks (ties count one half); ``None`` with one class."""
    positives = int(labels.sum())
    negatives = labels.shape[0] - positives
    if positives == 0 or negatives == 0:
        return None
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]  # average ranks of ties, from 1
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def training(
    settings: Settings,
    decision_points: object,
    forks: object,
    features: Sequence[str],
    *,
    owner: str,
) -> Training:
    """Label the decision points with their forks' outcomes and lay them out by episode × delay.

    Checks what fitting needs and a table cannot say: features that vary, points at candidate
    delays, no more folds than tasks, both clean and non-clean episodes. ``owner`` names the
    policy in messages.
    """
    lazy = _data.points(decision_points, settings.pair_by)
    _data.check_features(lazy, features, settings.pair_by)
    features = tuple(features)
    frame, n_ignored, episodes = _data.labelled_points(
        lazy,
        forks,
        features=features,
        delays=settings.delays,
        pair_by=settings.pair_by,
        method=settings.method,
        clean_label=settings.clean_label,
    )
    if frame.height == 0:
        raise InputError(
            f"decision_points: no decision point is at a candidate delay "
            f"({', '.join(map(str, settings.delays))}); check the `delays` parameter."
        )
    _data.check_finite(frame.lazy(), features, settings.pair_by)
    check_constant(frame, features)
    keys = _data.episode_keys(settings.pair_by)
    episodes = episodes.with_row_index("__e")
    tasks = frame.get_column("task_id").unique().sort()
    n_tasks = tasks.len()
    if settings.folds > n_tasks:
        raise ParameterError(
            f"{owner}: parameter `folds` is {settings.folds} but the training data "
            f"has {n_tasks} task{'s' if n_tasks != 1 else ''}; folds are grouped by task, so "
            "use at most that many."
        )
    layout = frame.select(keys).join(
        episodes, on=keys, how="left", nulls_equal=True, maintain_order="left"
    )
    task_index = (
        frame.select(pl.col("task_id").rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    )
    episode = layout.get_column("__e").to_numpy().astype(np.int64)
    delay_index = (
        frame.get_column("delay")
        .replace_strict(list(settings.delays), list(range(len(settings.delays))))
        .to_numpy()
    )
    clean = (episodes.get_column("condition") == settings.clean_label).to_numpy()
    n_clean = int(clean.sum())
    if n_clean == 0 or n_clean == clean.shape[0]:
        which = "clean" if n_clean == 0 else "non-clean"
        raise InputError(
            f"decision_points: the training data has no {which} episodes (clean label "
            f"{settings.clean_label!r}); the thresholds are chosen to gain on non-clean episodes "
            "under a limit on clean harm, which needs both. Hint: check `clean_label`."
        )
    return Training(
        frame=frame,
        x=frame.select(features).to_numpy().astype(np.float64),
        fold=_models.task_folds(task_index, n_tasks, settings.folds, settings.seed),
        episode=episode,
        delay_index=delay_index,
        clean=clean,
        n_tasks=n_tasks,
        n_ignored=n_ignored,
        tasks=tasks,
    )


def check_constant(frame: pl.DataFrame, features: Sequence[str]) -> None:
    """Raise for a feature with one value on every training point (it cannot be standardised)."""
    spread = frame.select(
        *(pl.col(f).n_unique().alias(f) for f in features),
        *(pl.col(f).first().alias(f"__first_{f}") for f in features),
    )
    for name in features:
        if spread[name][0] == 1:
            value = spread[f"__first_{name}"][0]
            raise SchemaError(
                f"decision_points: feature `{name}` is constant (every training point has "
                f"{value!r}); a constant feature carries no signal and cannot be "
                "standardised. Hint: leave it out of `features`."
            )


def model_labels(data: Training, models: Sequence[str]) -> dict[str, np.ndarray]:
    """Return the training label of each model (``p_err``, ``p0``, ``p1``); both classes needed."""
    columns = {"p_err": "obs_error", "p0": "y0", "p1": "y1"}
    labels = {}
    for name in models:
        y = data.frame.get_column(columns[name]).to_numpy().astype(bool)
        positives = int(y.sum())
        if positives in (0, y.shape[0]):
            value = "true" if positives else "false"
            raise InputError(
                f"decision_points: label `{columns[name]}` is {value} on every training point; "
                f"the `{name}` model needs both outcomes."
            )
        labels[name] = y
    return labels


def episode_arrays(
    data: Training, oof: Mapping[str, np.ndarray], n_delays: int, lam: float
) -> _search.EpisodeArrays:
    """Out-of-fold scores laid out as episode × candidate delay arrays for the threshold search."""
    shape = (data.clean.shape[0], n_delays)

    def layout(values: np.ndarray, fill: float | bool = 0.0) -> np.ndarray:
        out = np.full(shape, fill, dtype=np.asarray(values).dtype)
        out[data.episode, data.delay_index] = values
        return out

    if "p0" in oof:
        p0, p1 = oof["p0"], oof["p1"]
        not_p0 = layout(1.0 - p0)
        utility = layout((1.0 - p0) * p1 - lam * p0 * (1.0 - p1))
    else:
        not_p0 = utility = np.zeros(shape)
    return _search.EpisodeArrays(
        available=layout(np.ones(data.episode.shape[0], dtype=bool), fill=False),
        p_err=layout(oof["p_err"]),
        not_p0=not_p0,
        utility=utility,
        y0=layout(data.frame.get_column("y0").to_numpy().astype(bool), fill=False),
        y1=layout(data.frame.get_column("y1").to_numpy().astype(bool), fill=False),
        clean=data.clean,
    )
