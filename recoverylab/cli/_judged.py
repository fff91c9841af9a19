"""Judged outcomes of every protocol, computed once for the demo and the report (issue 40).

``recoverylab demo`` writes, per protocol, the judged sample's corrected (PPI++) estimates and
the judge's agreement with the gold labels as parquet, and its report shows those files;
``recoverylab report --judge/--takeover-judge/--goal-judge`` computes the same two frames on the
inputs given. Both go through the functions here, so a demo file and a report table of the same
inputs come from one computation:

* :func:`paired_judged` -- rescue, harm and effect per cell (``paired.summarize_judged``) and
  the judge's agreement per (condition, method) (``paired.judge_agreement``), clustered by task;
* :func:`takeover_judged` -- pass@1 and/or EAR per cell (``takeover.summarize_judged``, one
  judge per outcome, stacked under a ``judged_outcome`` key), pass@k and pass^k of the judge of
  ``passed`` (``takeover.reliability_judged``) and the judge's agreement over the same attempts
  (the attempts of the units ``takeover.score`` scores), clustered by workflow;
* :func:`goal_judged` -- task success per group (``goal.summarize_judged``) and the judge's
  agreement over the same scored episodes, clustered like it (goal, else case).

The warnings of the statistics (a cell sent to the gold-only interval, and why) are returned
with the frames for the caller to show, never dropped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "CLUSTERS",
    "DEMO_FILES",
    "DEMO_K",
    "DEMO_PASS_K",
    "GOAL_DEMO_JUDGE",
    "TAKEOVER_DEMO_JUDGES",
    "Judged",
    "goal_judged",
    "paired_judged",
    "takeover_judged",
]

#: The demo's judged outputs per protocol: (estimates, agreement), under the demo's folder.
DEMO_FILES = {
    "paired": ("paired/judged_summary.parquet", "paired/judged_agreement.parquet"),
    "takeover": ("takeover/judged.parquet", "takeover/judged_agreement.parquet"),
    "goal": ("goal/judged.parquet", "goal/judged_agreement.parquet"),
}
#: The demo's judged pass@k and pass^k of takeover (the name ``takeover --out-dir`` gives it).
DEMO_PASS_K = "takeover/judged_pass_k.parquet"
#: The k of the demo's judged pass@k and pass^k (the takeover demo's k).
DEMO_K = 3
#: The judged takeover sample's judges: (outcome, judge column, gold column).
TAKEOVER_DEMO_JUDGES = (
    ("passed", "judge_passed", "gold_passed"),
    ("aware", "judge_aware", "gold_aware"),
)
#: The judged goal sample's judge and gold columns.
GOAL_DEMO_JUDGE = ("judge_success", "gold_success")
#: The clusters of each protocol's judged intervals, plural, as the report names them.
CLUSTERS = {"paired": "tasks", "takeover": "workflows", "goal": "goals"}

_T = TypeVar("_T")


@dataclass(frozen=True)
class Judged:
    """A protocol's judged outcomes: the corrected estimates and the judge's agreement.

    Attributes
    ----------
    estimates
        One row per cell (and outcome): the keys, then :data:`recoverylab.stats.JUDGED_COLUMNS`.
    agreement
        The judge's sensitivity, specificity and agreement per cell
        (:func:`recoverylab.stats.judge_error_cells`' columns).
    cluster
        The clusters both respect, plural, as the report names them (tasks, workflows, goals).
    warnings
        The statistics' warnings, in order (cells on the gold-only interval and why).
    pass_k
        Takeover only: the judged pass@k and pass^k per cell (``metric``, ``k`` and
        :data:`recoverylab.stats.JUDGED_COLUMNS`), when a judge of ``passed`` was given.
    """

    estimates: pl.DataFrame
    agreement: pl.DataFrame
    cluster: str
    warnings: tuple[str, ...] = ()
    pass_k: pl.DataFrame | None = None


def _recorded(compute: Callable[[], _T]) -> tuple[_T, tuple[str, ...]]:
    """Run ``compute`` and return its result and the messages of its recoverylab warnings."""
    from recoverylab._errors import RecoveryLabWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecoveryLabWarning)
        result = compute()
    return result, tuple(str(w.message) for w in caught)


def paired_judged(
    forks: object,
    *,
    judge: str,
    gold: str,
    pair_by: Sequence[str] = (),
    cohort: str = "full",
    confidence: float = 0.95,
) -> Judged:
    """Judged rescue, harm and effect per cell and the judge's agreement, clustered by task."""
    from recoverylab import paired

    def compute() -> tuple[pl.DataFrame, pl.DataFrame]:
        estimates = paired.summarize_judged(
            forks,
            judge=judge,
            gold=gold,
            pair_by=pair_by,
            cohort=cohort,  # type: ignore[arg-type]
            confidence=confidence,
        )
        agreement = paired.judge_agreement(forks, judge=judge, gold=gold, confidence=confidence)
        return estimates, agreement

    (estimates, agreement), said = _recorded(compute)
    return Judged(estimates, agreement, CLUSTERS["paired"], said)


def takeover_judged(
    states: pl.DataFrame | pl.LazyFrame,
    attempts: pl.DataFrame | pl.LazyFrame,
    *,
    judges: Sequence[tuple[str, str, str]],
    by: Sequence[str] = ("agent",),
    k: int = DEMO_K,
    confidence: float = 0.95,
) -> Judged:
    """Judged attempt rates per cell, one judge per outcome, and each judge's agreement.

    Parameters
    ----------
    states, attempts
        The takeover tables; ``attempts`` holds every judge and gold column named.
    judges
        ``(outcome, judge, gold)`` per judged outcome (``passed``: pass@1, ``aware``: EAR).
    by
        The cells (must include ``agent``).
    k
        The k of the judged pass@k and pass^k (computed for the judge of ``passed``).
    confidence
        Confidence level of every interval.

    Returns
    -------
    Judged
        The estimates and the agreement with a first key column ``judged_outcome`` (the outcome
        each row's judge decided), and ``pass_k`` when a judge decided ``passed``. The agreement
        is over the attempts of the scored units (those ``takeover.score`` keeps: replay and
        expected-state checks passed), the units ``summarize_judged`` corrects.
    """
    import polars as pl

    from recoverylab import stats, takeover

    by = list(by)
    kept = (
        takeover.score(states, attempts, by=by, k=1)
        .filter(pl.col("excluded").is_null())
        .select("state_id", "agent", "workflow_id", *(b for b in by if b != "agent"))
    )
    units = attempts.lazy().join(kept, on=["state_id", "agent"], how="inner")

    def compute() -> tuple[list[pl.DataFrame], list[pl.DataFrame], pl.DataFrame | None]:
        estimates, agreement, pass_k = [], [], None
        for outcome, judge, gold in judges:
            label = pl.lit(outcome).alias("judged_outcome")
            cells = takeover.summarize_judged(
                states,
                attempts,
                judge=judge,
                gold=gold,
                outcome=outcome,
                by=by,
                confidence=confidence,
            )
            estimates.append(cells.select(label, pl.all()))
            part = stats.judged_partials(units, by=[*by, "workflow_id"], judge=judge, gold=gold)
            error = stats.judge_error_cells(
                part, cells=by, cluster="workflow_id", confidence=confidence
            )
            agreement.append(error.select(label, pl.all()))
            if outcome == "passed":
                pass_k = takeover.reliability_judged(
                    states, attempts, judge=judge, gold=gold, k=k, by=by, confidence=confidence
                )
        return estimates, agreement, pass_k

    (estimates, agreement, pass_k), said = _recorded(compute)
    frames = pl.concat(estimates), pl.concat(agreement)
    return Judged(*frames, CLUSTERS["takeover"], said, pass_k=pass_k)


def goal_judged(
    scored: pl.DataFrame | pl.LazyFrame,
    *,
    judge: str,
    gold: str,
    by: Sequence[str] = ("regime",),
    cluster: str | None = None,
    confidence: float = 0.95,
) -> Judged:
    """Judged task success per group and the judge's agreement, on the same scored episodes.

    ``scored`` is ``goal.score``'s result (or episodes with the groups and the cluster); the
    cluster defaults to ``goal_id`` when present, else ``case_id``, as in
    ``goal.summarize_judged``.
    """
    from recoverylab import goal, stats

    lazy = scored.lazy()
    cluster = cluster or ("goal_id" if "goal_id" in lazy.collect_schema() else "case_id")

    def compute() -> tuple[pl.DataFrame, pl.DataFrame]:
        estimates = goal.summarize_judged(
            lazy, judge=judge, gold=gold, by=by, cluster=cluster, confidence=confidence
        )
        part = stats.judged_partials(lazy, by=[*by, cluster], judge=judge, gold=gold)
        agreement = stats.judge_error_cells(
            part, cells=list(by), cluster=cluster, confidence=confidence
        )
        return estimates, agreement

    (estimates, agreement), said = _recorded(compute)
    plural = {"goal_id": CLUSTERS["goal"], "case_id": "cases"}.get(cluster, f"{cluster} values")
    return Judged(estimates, agreement, plural, said)
