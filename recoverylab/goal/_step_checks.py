"""The checks of the goal steps inside the one-pass scoring (:mod:`recoverylab.goal._one_pass`).

Per episode the steps must have distinct step numbers, rows that break no data check, and an
episode id that is the owner's (its second hash, :data:`_one_pass._CHECK_SEED`, the owner's).
The streaming pass that counts the steps checks them in one of two ways, chosen from the first
rows (:func:`numbered_as_runs`):

* steps numbered as runs (0..n-1, 1..n, any start): one ``_tag`` per episode, a sum of hashes
  that clean steps give exactly and anything else misses but for a chance of about 2**-64
  (:func:`step_parts`, :func:`steps_clean`); the few episodes it does not vouch for are checked
  exactly in a second pass over only their steps. Against the exact flags this saves a set of
  step numbers per episode (0.35-0.4 GB of peak memory and about 0.2 s CPU at 10M steps) and
  two more aggregations (0.1-0.15 s).
* steps numbered otherwise (with gaps): the exact flags in the one pass, since the tag would
  vouch for none of the episodes and the second pass would read every step again (score at
  10M steps with every step number doubled: 5.75 s CPU against 4.06 s).
"""

from __future__ import annotations

import polars as pl

from recoverylab.goal._rules import _step_counts
from recoverylab.goal._tables import _violated

#: Seed of the hash of a step number in an episode's ``_tag``.
_STEP_SEED = 0x57E9_F1A6_2026

#: Added to an episode's ``_tag`` per row that breaks a data check (odd: k < 2**64 rows never
#: add up to 0 mod 2**64).
_VIOLATION_WEIGHT = 0x9E37_79B9_7F4A_7C15

#: The step numbers whose prefix sums of hashes :func:`steps_clean` tabulates (32 MB at most).
_MAX_TABULATED_STEP = 1 << 22

#: Rows of the steps that :func:`numbered_as_runs` reads to choose the check.
_SAMPLE_ROWS = 1 << 16

#: Share of the sampled episodes numbered as runs above which the tag is used.
_RUNS_SHARE = 0.9


def numbered_as_runs(steps: pl.LazyFrame) -> bool:
    """Return whether the first :data:`_SAMPLE_ROWS` steps number their episodes as runs.

    A guess that only chooses how the steps are checked (both ways are exact): an episode whose
    sampled numbers span exactly as many values as it has rows is a run (a repeat or a gap
    spans another count); the last sampled episode may be cut, hence a share.
    """
    step = pl.col("step")
    spans = (
        steps.select("_episode", "step")
        .head(_SAMPLE_ROWS)
        .group_by("_episode")
        .agg((step.max() - step.min() + 1 == pl.len()).fill_null(False).alias("_run"))
    )
    share = spans.select(pl.col("_run").mean()).collect(engine="streaming").item()
    return share is None or float(share) >= _RUNS_SHARE


def step_parts(steps: pl.LazyFrame, owners: pl.LazyFrame, *, as_runs: bool) -> pl.LazyFrame:
    """Per episode key: the scoring's step counts and what :func:`steps_clean` reads.

    ``owners``: each episode's key and its check hash as ``_owner`` (a join in this streaming
    query costs less than looking the keys up in the collected part). With ``as_runs``:
    ``_first`` (the smallest step number) and ``_tag``, one sum (mod 2**64) over the episode's
    rows of the step number's hash, the row's check hash of its episode id and, for a row that
    breaks a data check, :data:`_VIOLATION_WEIGHT`. Otherwise ``_clean``, the exact flags.
    """
    if as_runs:
        weight = pl.lit(_VIOLATION_WEIGHT, dtype=pl.UInt64)
        violations = _violated(steps, "steps").cast(pl.UInt64) * weight
        tag = _step_hash(pl.col("step")) + pl.col("_episode_check") + violations
        checks = [pl.col("step").min().cast(pl.Int64).alias("_first"), tag.sum().alias("_tag")]
        kept = [pl.col("_first", "_tag", "_owner")]
    else:
        steps = steps.with_columns(_violated(steps, "steps"))
        checks, kept = _exact_checks(), [_exactly_clean()]
    counted = _step_counts(steps, *checks).join(owners, on="_episode", how="left")
    return counted.select("_episode", "steps", "n_prohibited", *kept)


def _step_hash(numbers: pl.Expr) -> pl.Expr:
    """Return the 64-bit hash of step numbers that an episode's ``_tag`` sums."""
    return numbers.cast(pl.Int64).hash(_STEP_SEED)


def _exact_checks() -> list[pl.Expr]:
    """Return the aggregations of the exact flags (rows with ``_violated``, see _exactly_clean)."""
    check = pl.col("_episode_check")
    return [
        (pl.len() == pl.col("step").n_unique()).alias("_distinct"),
        check.min().alias("_lo"),
        check.max().alias("_hi"),
        pl.col("_violated").any(),
    ]


def _exactly_clean() -> pl.Expr:
    """Return ``_clean`` from :func:`_exact_checks` after the owners' join (no owner: not clean).

    Distinct step numbers, no data-check violation, and every row's check hash the owner's.
    """
    owner = pl.col("_owner")
    clean = pl.col("_distinct") & (pl.col("_lo") == owner) & (pl.col("_hi") == owner)
    return (clean & ~pl.col("_violated")).fill_null(False).alias("_clean")


def steps_clean(part: pl.DataFrame, steps: pl.LazyFrame, owners: pl.LazyFrame) -> bool:
    """Return whether no step breaks a check: a data check, a repeated step, an unknown episode.

    A part of the exact flags answers directly. With the tag, an episode is clean for sure when
    its ``_tag`` is the one clean steps numbered as a run from the smallest give: the hashes of
    the run, read off a table of prefix sums, plus n times the owner's check hash. Anything
    else differs but for a chance of about 2**-64 per episode: a repeat or a gap changes the
    hashed numbers, a row of a foreign id under the key adds k times the difference of two
    check hashes (0 only when k times it is 0 mod 2**64), and k violations add k times an odd
    weight. The other episodes (numbers with gaps, which are clean, or broken checks, or runs
    beyond the table of :data:`_MAX_TABULATED_STEP` numbers) are checked exactly by
    :func:`_checked_exactly`, in a second pass over only their steps.
    """
    if part.is_empty():
        return True
    if "_clean" in part.columns:
        return bool(part["_clean"].all())
    first, count = part["_first"], part["steps"]
    end = first + count
    size = min(int(end.max() or 0), _MAX_TABULATED_STEP)
    runs = pl.select(_step_hash(pl.int_range(0, size)).cum_sum()).to_series()
    prefix = pl.Series([0], dtype=pl.UInt64).append(runs)  # prefix[k]: the hashes of 0..k-1

    def before(numbers: pl.Series) -> pl.Series:
        return prefix.gather(numbers.clip(0, size))

    run = before(end) - before(first)
    owned = count.cast(pl.UInt64) * part["_owner"]
    clean = (end <= size) & (part["_tag"] == run + owned)  # a negative step: a violation
    unsure = part.filter(~clean.fill_null(False)).select("_episode")
    return unsure.is_empty() or _checked_exactly(unsure, steps, owners)


def _checked_exactly(episodes: pl.DataFrame, steps: pl.LazyFrame, owners: pl.LazyFrame) -> bool:
    """Return whether the steps of ``episodes`` (keys) are clean, by the exact flags.

    A null key has no steps the join finds: then not clean.
    """
    counted = (
        steps.join(episodes.lazy(), on="_episode", how="semi")
        .with_columns(_violated(steps, "steps"))
        .group_by("_episode")
        .agg(_exact_checks())
        .join(owners, on="_episode", how="left")
        .select(_exactly_clean())
        .collect(engine="streaming")
        .to_series()
    )
    return counted.len() == episodes.height and bool(counted.all())
