"""Inputs of the router: decision-point validation, feature checks, and labels from paired forks.

Labels follow ARCHITECTURE §3.2: ``obs_error`` is ``condition != clean_label``; ``y0`` and ``y1``
are the paired no-recovery and refresh outcomes of the decision point's (task, condition,
*pair_by, delay), taken from :func:`recoverylab.paired.pairs`, so the carry-forward rule and the
exclusions (unpaired, prefix mismatch) are exactly those of the paired evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from recoverylab._errors import InputError, ParameterError, SchemaError, format_keys
from recoverylab.schema import validate

__all__ = [
    "check_features",
    "check_finite",
    "check_labels",
    "episode_keys",
    "every_episode",
    "labelled_points",
    "method_outcomes",
    "points",
    "string_keys",
]

TABLE = "decision_points"


def episode_keys(pair_by: Sequence[str]) -> list[str]:
    """Return the columns that identify an episode: task, condition, the ``pair_by`` keys."""
    return ["task_id", "condition", *pair_by]


def points(decision_points: object, pair_by: Sequence[str]) -> pl.LazyFrame:
    """Validate ``decision_points`` against its contract (``pair_by`` joins the key).

    Categorical ``pair_by`` keys are cast to strings, as :mod:`recoverylab.paired` does, so the
    points join their forks however the keys were stored.
    """
    return string_keys(validate(decision_points, TABLE, key=tuple(pair_by)), pair_by)


def string_keys(lazy: pl.LazyFrame, pair_by: Sequence[str]) -> pl.LazyFrame:
    """Cast categorical ``pair_by`` key columns to strings (contract keys already are)."""
    schema = lazy.collect_schema()
    categorical = [
        pl.col(k).cast(pl.String)
        for k in pair_by
        if isinstance(schema[k], (pl.Categorical, pl.Enum))
    ]
    return lazy.with_columns(categorical) if categorical else lazy


def every_episode(
    forks: object, pair_by: Sequence[str], points: pl.LazyFrame, seen: pl.LazyFrame
) -> pl.LazyFrame:
    """Episode keys of ``seen`` and of ``forks`` (schema-checked) in the tasks of ``points``.

    An episode with no candidate point (its task ended before the first candidate delay) still
    counts: it stays in the denominators with the no-recovery outcome, never refreshed (§3.1).
    """
    keys = episode_keys(pair_by)
    lazy = string_keys(validate(forks, "forks", key=tuple(pair_by), checks="schema"), pair_by)
    in_forks = lazy.select(keys).join(points.select("task_id").unique(), on="task_id", how="semi")
    return pl.concat([in_forks, seen.select(keys)]).unique()


def check_features(lazy: pl.LazyFrame, features: Sequence[str], pair_by: Sequence[str]) -> None:
    """Check that every feature is a numeric, non-key column of the decision points.

    Raises ParameterError for no features, a feature named twice, a key column used as a
    feature, or names that are not columns; SchemaError for a feature that is not numeric.
    """
    schema = lazy.collect_schema()
    keys = {*episode_keys(pair_by), "delay"}
    numeric = [n for n, t in schema.items() if t.is_numeric() and n not in keys]
    if isinstance(features, str) or not features:
        raise ParameterError(
            f"parameter `features` is {features!r}; give a list of feature columns, e.g. "
            f"{numeric[:3]}."
        )
    twice = sorted({f for f in features if list(features).count(f) > 1})
    if twice:
        raise ParameterError(f"parameter `features` names {format_keys(twice)} more than once.")
    used_keys = [f for f in features if f in keys]
    if used_keys:
        raise ParameterError(
            f"parameter `features` includes the key column{'s' if len(used_keys) > 1 else ''} "
            f"{', '.join(f'`{k}`' for k in used_keys)}; features must be measurements taken "
            "before the decision."
        )
    unknown = [f for f in features if f not in schema]
    if unknown:
        noun = "a column" if len(unknown) == 1 else "columns"
        raise ParameterError(
            f"parameter `features` names {len(unknown)} unknown feature"
            f"{'s' if len(unknown) > 1 else ''} ({format_keys(unknown, len(unknown))}) that "
            f"{TABLE} does not have as {noun}; its numeric columns are: "
            f"{', '.join(numeric) or 'none'}."
        )
    not_numeric = [(f, schema[f]) for f in features if not schema[f].is_numeric()]
    if not_numeric:
        name, dtype = not_numeric[0]
        raise SchemaError(
            f"{TABLE}: feature `{name}` has type {dtype}; features must be numeric. "
            "Hint: encode it as numbers or leave it out of `features`."
        )


def _bad_value(name: str) -> pl.Expr:
    column = pl.col(name).cast(pl.Float64)
    return column.is_null() | ~column.is_finite()


def check_finite(lazy: pl.LazyFrame, features: Sequence[str], pair_by: Sequence[str]) -> None:
    """Raise SchemaError if a feature holds null, NaN or infinite values (one aggregation).

    The error names the first such feature, its count and up to five of its point keys.
    """
    counts = lazy.select([_bad_value(f).sum().alias(f) for f in features]).collect()
    for name in features:
        n = int(counts[name][0])
        if n:
            key = [*episode_keys(pair_by), "delay"]
            sample = (
                lazy.filter(_bad_value(name))
                .select(key)
                .sort(key, nulls_last=True)
                .head(5)
                .collect()
            )
            raise SchemaError(
                f"{TABLE}: feature `{name}` has {n} value{'s' if n > 1 else ''} that "
                f"{'are' if n > 1 else 'is'} null, NaN or infinite ({'/'.join(key)} "
                f"{format_keys(sample.rows(), n)}); features must be finite numbers. "
                "Hint: impute or drop those decision points."
            )


def method_outcomes(pairs: pl.LazyFrame, at: Sequence[str], method: str) -> pl.LazyFrame:
    """Return the paired outcomes ``y0``/``y1`` (Boolean) of ``method`` at each point ``at``."""
    return pairs.filter(pl.col("method") == method).select(
        *at, pl.col("y0").cast(pl.Boolean), pl.col("y1").cast(pl.Boolean)
    )


def labelled_points(
    lazy: pl.LazyFrame,
    forks: object,
    *,
    features: Sequence[str],
    delays: Sequence[int],
    pair_by: Sequence[str],
    method: str,
    clean_label: str,
) -> tuple[pl.DataFrame, int, pl.DataFrame]:
    """Join the decision points at the candidate delays to their paired outcomes and collect.

    Returns the labelled points sorted by (task_id, condition, *pair_by, delay), features as
    Float64 and ``obs_error``, ``y0``, ``y1`` (Boolean); the number of points ignored (delay not
    a candidate); and every episode key of the training tasks (points and forks), sorted. Raises
    InputError for points with no paired ``method`` outcome at their delay.
    """
    from recoverylab import paired

    keys = episode_keys(pair_by)
    at = [*keys, "delay"]
    outcomes = method_outcomes(paired.pairs(forks, pair_by=tuple(pair_by)), at, method)
    candidates = lazy.with_columns(pl.col("delay").is_in(list(delays)).alias("__candidate"))
    joined = (
        candidates.filter("__candidate")
        .select(*at, *(pl.col(f).cast(pl.Float64) for f in features))
        .join(outcomes, on=at, how="left", nulls_equal=True)
        .with_columns((pl.col("condition") != clean_label).alias("obs_error"))
        .sort(at, nulls_last=True)
    )
    ignored = candidates.select((~pl.col("__candidate")).sum().alias("ignored"))
    episodes = every_episode(forks, pair_by, lazy, lazy).sort(keys, nulls_last=True)
    frame, ignored_count, all_episodes = pl.collect_all([joined, ignored, episodes])
    check_labels(frame, at, method)
    return frame, int(ignored_count["ignored"][0]), all_episodes


def check_labels(frame: pl.DataFrame, at: Sequence[str], method: str) -> None:
    """Raise InputError if a candidate point of ``frame`` (sorted by ``at``) has no outcome.

    The error names the count and up to five ``at`` keys of points with a null ``y0`` or ``y1``.
    """
    missing = frame.filter(pl.col("y0").is_null() | pl.col("y1").is_null())
    if missing.height:
        n = missing.height
        raise InputError(
            f"{TABLE}: {n} decision point{'s have' if n > 1 else ' has'} no paired `{method}` "
            f"outcome in forks ({'/'.join(at)} {format_keys(missing.select(at).rows(), n)}); "
            f"every candidate point needs its `none` row and its `{method}` row at that delay "
            "(or a carried-forward outcome). Hint: drop points without forks, or check the "
            "`method` and `pair_by` parameters."
        )
