"""The break-even baseline: refresh when predicted failure is likelier than p*."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from recoverylab._errors import NotFittedError, ParameterError
from recoverylab.router import _data

__all__ = ["BreakEven"]


class BreakEven:
    """Refresh at the first candidate delay whose predicted failure probability reaches p*.

    A refresh pays on average exactly when the probability that the run fails without it exceeds
    p* = d / (r + d) (see :func:`recoverylab.paired.break_even`). The baseline takes the router's
    failure model (1 − p0), learns p* per candidate delay from the training forks pooled over
    conditions (the condition is not known when deciding), and asks whether the router's harm
    model and thresholds add anything over "recover when failure is likely enough to pay".

    Parameters
    ----------
    router
        A fitted :class:`~recoverylab.router.Router` (its ``p0`` model is used).

    Attributes
    ----------
    p_star_
        ``{delay: p*}`` learned by :meth:`fit` (pooled over conditions).

    Examples
    --------
    >>> from recoverylab import synth
    >>> from recoverylab.router import Router
    >>> tables = synth.generate("decision_points", 200, seed=0)
    >>> router = Router(folds=3).fit(tables["decision_points"], tables["forks"],
    ...                              features=["repetition", "noops", "progress"])
    >>> baseline = BreakEven(router).fit(tables["forks"])
    >>> baseline.decide(tables["decision_points"]).collect().columns
    ['task_id', 'condition', 'delay']
    """

    kind = "break_even"

    def __init__(self, router: object) -> None:
        self.router = router

    @property
    def pair_by(self) -> Sequence[str]:
        """Episode keys, as the router's."""
        return tuple(getattr(self.router, "pair_by", ()))

    @property
    def clean_label(self) -> str:
        """Clean condition label, as the router's."""
        return str(getattr(self.router, "clean_label", "clean"))

    @property
    def method(self) -> str:
        """Recovery method, as the router's."""
        return str(getattr(self.router, "method", "refresh"))

    @property
    def delays(self) -> Sequence[int]:
        """Candidate delays, as the router's."""
        return tuple(getattr(self.router, "delays", (1, 2, 4)))

    def fit(self, forks: object) -> BreakEven:
        """Learn p* per candidate delay from training forks (pooled over conditions)."""
        from recoverylab import paired

        if getattr(self.router, "kind", None) != "router" or not hasattr(self.router, "models_"):
            raise ParameterError(
                "parameter `router` must be a fitted Router (its p0 model gives the failure "
                f"probability); found {type(self.router).__name__}."
            )
        table = paired.break_even(forks, by=(), pair_by=self.pair_by, n_resamples=1, seed=0).filter(
            pl.col("method") == self.method, pl.col("delay").is_in(list(self.delays))
        )
        pooled = table.group_by("delay").agg(
            (pl.col("harm_given_success") * (1 - pl.col("p_fail")) * pl.col("n")).sum().alias("h"),
            ((1 - pl.col("p_fail")) * pl.col("n")).sum().alias("s"),
            (pl.col("rescue_given_fail") * pl.col("p_fail") * pl.col("n")).sum().alias("r"),
            (pl.col("p_fail") * pl.col("n")).sum().alias("f"),
        )
        rates = pooled.select(
            "delay",
            ((pl.col("h") / pl.col("s")) / (pl.col("h") / pl.col("s") + pl.col("r") / pl.col("f")))
            .fill_nan(None)
            .alias("p_star"),
        ).drop_nulls()
        self.p_star_ = dict(zip(rates["delay"].to_list(), rates["p_star"].to_list(), strict=True))
        return self

    def decide(self, decision_points: object) -> pl.LazyFrame:
        """Return one row per episode with the first candidate delay where 1 − p0 ≥ p*, or null."""
        if not hasattr(self, "p_star_"):
            raise NotFittedError("BreakEven.decide: call fit(forks) first.")
        keys = _data.episode_keys(self.pair_by)
        scores = self.router.score(decision_points)  # type: ignore[attr-defined]
        thresholds = pl.DataFrame(
            {"delay": list(self.p_star_), "__p_star": list(self.p_star_.values())},
            schema={"delay": pl.Int64, "__p_star": pl.Float64},
        ).lazy()
        chosen = (
            scores.join(thresholds, on="delay", how="inner")
            .filter((1.0 - pl.col("p0")) >= pl.col("__p_star"))
            .group_by(keys)
            .agg(pl.col("delay").min())
        )
        return (
            scores.select(keys)
            .unique()
            .join(chosen, on=keys, how="left", nulls_equal=True)
            .sort(keys, nulls_last=True)
        )

    def score(self, decision_points: object) -> pl.LazyFrame:
        """Return the router's scores with ``p_fail`` = 1 − p0 (the baseline's priority)."""
        return self.router.score(decision_points).with_columns(  # type: ignore[attr-defined]
            (1.0 - pl.col("p0")).alias("p_fail")
        )
