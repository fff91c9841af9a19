"""Pairing through per-task bit sets: the fast path of the cell counts (ARCHITECTURE §1.3, §3.1).

The pairing rules are those of :mod:`._rules`, applied to 64-bit words per task instead of rows;
this module adds the layout that turns rows into words. Joining every recovery row to its
episode's ``none`` row is the expensive part of the pairing (46M probe rows at 1M tasks, on one
core in polars). When no ``none`` row is delay-specific, one group-by over the cluster (the task
with its ``pair_by`` keys) is a cheaper exact route:

1. *Survey*: the rows per distinct (condition, *pair_by*, method, delay): the points, the
   design grid and the key-level data checks of :func:`recoverylab.schema.validate` (raised
   with its messages, in its order).
2. *Bit layout* (:func:`layout`): each (condition, method, delay) point gets one bit of a
   63-bit word (several words past 63 points), found through a lookup table indexed by a hash
   of the three keys modulo a size at which no two points share a slot; a row whose 64-bit
   hash is not its slot's point's takes an extra slot with no bit (a point missing from the
   layout with the very hash of one in it would pass for it: a 2^-64 coincidence, as for the
   prefix fingerprint below).
3. *Task words* (:func:`task_words`, one streaming group-by): per task, the sum of the bits of
   its rows (``P``), of its successful rows (``S``) and, on ``none`` rows, of the recovery
   points at or after the end of the run (``E``: ``perturb_action + delay >= end_action``,
   §3.1 carry-forward), with the rows failing the other data checks counted alongside. A
   task's keys are distinct and at the layout's points exactly when its bits are (popcount
   of ``P`` = rows): the duplicate check is free.
4. *Cell counts* (:func:`cell_counts`): every outcome is a bit operation on a task's words
   (rescue = present & has-none & not-ended & not-y0 & y1); a cell counts the tasks with it.

The layout is guessed from the first rows (:func:`sample_counts`). When every task has one bit
per row, the survey is read off the words (:func:`point_rows`: the input is read once);
otherwise (points the first rows missed, repeated or invalid keys) the survey query reads the
point keys (:func:`survey_query`) and, unless the layout of every point is the guess, the
words are computed again with every point: the lookup is exact.

The task words are built in one read of the input within a memory budget
(:func:`words_in_budget`, :mod:`._budget`): one streaming group-by when its state fits, else the
rows' lookup indices are hash-partitioned by task into temporary files in that one read and each
file is grouped on its own.

Prefix hashes (§3.1, ``prefix_mismatch``) are compared in the same group-by by a per-task
fingerprint: each recovery row adds F(condition, prefix), each ``none`` row subtracts k ×
F(condition, its prefix), k being its condition's recovery points before the end of its run
(same lookup as ``E``), in wrapping 64-bit arithmetic. When a task's recovery rows are exactly
those points and no prefix is null, the sum is zero exactly when every recovery row carries its
``none`` row's prefix (up to a 2^-64 coincidence). Tasks the test cannot decide (missing points,
null prefixes, no ``none`` row) are settled by comparing prefixes per episode; tasks with a
conflict go to the join of :mod:`._pairs`, which counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from recoverylab._outputs import scratch_dir
from recoverylab.paired import _budget
from recoverylab.paired import _rules as rules
from recoverylab.paired._pairs import OUTCOMES, Design, Forks, design_of
from recoverylab.schema import SPECS, data_checks, raise_data_problems, raise_duplicate_keys

__all__ = ["BitCounts", "Layout", "Survey", "bit_counts", "check", "survey"]

_FORKS = SPECS["forks"]
_WORD_BITS = 63
#: At most this many 63-bit words per task (252 points); more points take the join path.
MAX_WORDS = 4
#: Largest lookup table (entries) of the end-of-run bits; beyond it the join path is taken.
_MAX_TABLE = 1 << 22
#: Spilled lookup indices fit 32 bits (a lookup table has at most ``_MAX_TABLE`` entries).
_NARROW = {"__slot": pl.UInt32, "__at_gap": pl.UInt32, "__success": pl.UInt8}
#: Odd multipliers that mix the per-column hashes into one point hash (wrapping u64 products).
_MIX = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5)
#: Per-task classes of a recovery point, in the order of the count columns they feed.
CLASSES = (*OUTCOMES, "carried_forward", "unpaired", "after_end")


def _u64(value: int) -> pl.Expr:
    return pl.lit(value, dtype=pl.UInt64)


def _mixed_hash(columns: Sequence[str]) -> pl.Expr:
    """One u64 hash of several columns: per-column hashes mixed by odd multipliers."""
    expr = pl.col(columns[0]).hash()
    for i, name in enumerate(columns[1:]):
        expr = expr ^ (pl.col(name).hash() * _u64(_MIX[i % len(_MIX)]))
    return expr


def _point_hash(condition: pl.Expr) -> pl.Expr:
    """:func:`_mixed_hash` of (condition, method, delay), given the condition's hash."""
    method, delay = pl.col("method").hash(), pl.col("delay").hash()
    return condition ^ (method * _u64(_MIX[0])) ^ (delay * _u64(_MIX[1]))


#: Hash of a row's (condition, method, delay): the key of its bit in the lookup tables.
_POINT_HASH = _point_hash(pl.col("condition").hash())


@dataclass(frozen=True)
class Survey:
    """What the survey aggregation found: rows per point, the design grid, checks left."""

    counts: pl.DataFrame
    """Rows per distinct (condition, *pair_by*, method, delay): column ``rows``."""
    design: Design
    """The candidate recovery points, as :func:`~recoverylab.paired._pairs.design_grid`."""
    pending: dict[str, pl.Expr]
    """Checks on values other than the point keys (null task_id, success), for a row pass."""
    key: tuple[str, ...]
    """The full key of the table (contract key, then pair_by)."""
    totals: dict[str, int]
    """Violations of the key-level data checks, by name."""


def _point_keys(forks: Forks) -> list[str]:
    return ["condition", *forks.pair_by, "method", "delay"]


def survey_query(forks: Forks, head: int | None = None) -> pl.LazyFrame:
    """Rows per distinct (condition, *pair_by*, method, delay) (of the first ``head`` rows)."""
    keys = _point_keys(forks)
    rows = forks.lf.select(keys) if head is None else forks.lf.select(keys).head(head)
    return rows.group_by(keys).agg(pl.len().cast(pl.Int64).alias("rows"))


def sample_counts(forks: Forks, rows: int = 200_000) -> pl.DataFrame:
    """Survey the first ``rows`` rows only: a cheap guess of the points for the bit layout."""
    return survey_query(forks, rows).collect()


def read_survey(forks: Forks, counts: pl.DataFrame, key: Sequence[str]) -> Survey:
    """Read the design grid and the key-level data checks off the survey counts (no raise).

    The checks on the point keys (null condition or method, a recovery row without a delay, a
    negative delay) run on the small result; the checks on other values are left ``pending``.
    """
    keys = _point_keys(forks)
    checks = data_checks(_FORKS, forks.lf.collect_schema())
    on_rows = {n: e for n, e in checks.items() if not set(e.meta.root_names()) <= set(keys)}
    on_keys = {n: e for n, e in checks.items() if n not in on_rows}
    weighted = counts.select(
        pl.when(e.fill_null(False)).then(pl.col("rows")).otherwise(0).sum().alias(n)
        for n, e in on_keys.items()
    )
    return Survey(
        counts=counts,
        design=design_of(counts.select(keys)),
        pending=on_rows,
        key=tuple(key),
        totals={n: int(weighted[n].item()) for n in on_keys},
    )


def check(forks: Forks, found: Survey, pending: dict[str, int] | None = None) -> None:
    """Raise the first failed data check, with :func:`~recoverylab.schema.validate`'s order.

    ``pending``: the pending checks' violations, if a pass over the rows counted them; else
    they are counted here (one pass), so the error is always validate's (same message).
    """
    if pending is None:
        counted = forks.lf.select(e.sum().alias(n) for n, e in found.pending.items()).collect(
            engine="streaming"
        )
        pending = {n: int(counted[n].item()) for n in found.pending}
    rows = int(found.counts["rows"].sum())
    raise_data_problems(forks.lf, _FORKS, found.key, {**found.totals, **pending}, rows)


def survey(forks: Forks, key: Sequence[str]) -> Survey:
    """Run the survey aggregation and every data check but the duplicate keys (two passes)."""
    found = read_survey(forks, survey_query(forks).collect(engine="streaming"), key)
    check(forks, found)
    return found


@dataclass(frozen=True)
class Layout:
    """The bit of every (condition, method, delay) point and the lookup tables of a row's bit."""

    points: pl.DataFrame
    """One row per point: ``bit``, ``word``, condition, method, delay, ``rows``, ``none``."""
    words: int
    size: int
    """Lookup-table size: the point hashes modulo ``size`` are distinct. The tables have one
    more slot, ``size``: that of a row whose point the layout lacks (no bit, nothing ended)."""
    owners: pl.Series
    """Slot -> the point hash of the slot's point (``slot + 1`` on an empty slot, which no row
    of that slot can hash to): a row whose point hash differs takes the slot ``size``."""
    gaps: int
    """Distinct clipped run gaps: end_action - perturb_action clipped to 0..max delay + 1."""
    present: tuple[pl.Series, ...]
    """Per word: slot -> the bit value of the slot's point in that word (0 elsewhere)."""
    ended: tuple[pl.Series, ...]
    """Per word: slot * gaps + g -> on a ``none`` slot, the bits of its condition's recovery
    points at or after the end of a run with clipped gap g (delay >= g, §3.1); else 0."""
    weight: pl.Series
    """slot * gaps + g -> the row's factor in the prefix fingerprint: 1 on a recovery slot,
    -k (mod 2^64) on a ``none`` slot, k = its condition's recovery points with delay < g."""

    def mask(self, word: int, where: pl.Expr) -> int:
        """Bits of the points of ``word`` selected by ``where`` (on the points table)."""
        bits = self.points.filter((pl.col("word") == word) & where)["bit"].to_list()
        return sum(1 << (b % _WORD_BITS) for b in bits)


def _with_design(counts: pl.DataFrame, design: Design | None) -> pl.DataFrame:
    """Add the whole table's recovery points a shard has no rows for (with 0 rows).

    A shard may lack a point (all of its tasks ended before it) yet carry its tasks forward
    there, so the layout needs a bit for it.
    """
    if design is None:
        return counts
    keys = [c for c in counts.columns if c != "rows"]
    missing = design.points.select(keys).join(
        counts.select(keys), on=keys, how="anti", nulls_equal=True
    )
    return pl.concat([counts, missing.with_columns(rows=0).cast(counts.schema)], how="vertical")


def layout(counts: pl.DataFrame) -> Layout | None:
    """Assign bits to the points of a survey; ``None`` when the bit-set path does not apply.

    It does not apply to delay-specific ``none`` rows (their precedence needs the join), to
    more than ``MAX_WORDS`` × 63 points, nor to points breaking the contract (in a guess from
    the first rows only: the survey's checks raise on them).
    """
    is_none = rules.is_baseline().fill_null(False)
    unusable = (
        (is_none & pl.col("delay").is_not_null())
        | (~is_none & pl.col("delay").is_null())
        | (pl.col("delay") < 0).fill_null(False)
        | pl.col("condition").is_null()
        | pl.col("method").is_null()
    )
    if counts.filter(unusable).height:
        return None
    points = (
        counts.group_by("condition", "method", "delay")
        .agg(pl.col("rows").sum())
        .sort("condition", "method", "delay", nulls_last=False)
        .with_row_index("bit")
        .with_columns(
            pl.col("bit").cast(pl.Int64),
            (pl.col("bit") // _WORD_BITS).cast(pl.Int64).alias("word"),
            rules.is_baseline().alias("none"),
            _POINT_HASH.alias("__hash"),
        )
    )
    words = -(-points.height // _WORD_BITS)
    if words > MAX_WORDS or words == 0:
        return None
    hashes, n = points["__hash"].to_list(), points.height
    size = next((k for k in range(n, 64 * n + 64) if len({h % k for h in hashes}) == n), None)
    if size is None:  # pragma: no cover - needs a 64-bit hash collision between points
        return None
    recovery = points.filter(~pl.col("none"))
    # a run gap beyond the latest delay ends after every point: clip it there
    gaps = max((int(d) for d in recovery["delay"]), default=0) + 2
    if (size + 1) * gaps > _MAX_TABLE:
        return None
    present = [[0] * (size + 1) for _ in range(words)]
    ended = [[0] * ((size + 1) * gaps) for _ in range(words)]
    weight = [0] * ((size + 1) * gaps)
    owners = [k + 1 for k in range(size)]
    for bit, word, condition, none, hashed in points.select(
        "bit", "word", "condition", "none", "__hash"
    ).iter_rows():
        slot = hashed % size
        owners[slot] = hashed
        present[word][slot] = 1 << (bit % _WORD_BITS)
        if not none:
            weight[slot * gaps : (slot + 1) * gaps] = [1] * gaps
            continue
        mine = recovery.filter(pl.col("condition") == condition).select("bit", "word", "delay")
        for g in range(gaps):
            for b, w, delay in mine.iter_rows():
                if rules.after_end(delay, g):
                    ended[w][slot * gaps + g] |= 1 << (b % _WORD_BITS)
            weight[slot * gaps + g] = -sum(not rules.after_end(d, g) for d in mine["delay"]) % 2**64
    return Layout(
        points=points.drop("__hash"),
        words=words,
        size=size,
        owners=pl.Series("__owners", owners, dtype=pl.UInt64),
        gaps=gaps,
        present=tuple(pl.Series(f"__p{w}", v, dtype=pl.UInt64) for w, v in enumerate(present)),
        ended=tuple(pl.Series(f"__e{w}", v, dtype=pl.UInt64) for w, v in enumerate(ended)),
        weight=pl.Series("__weight", weight, dtype=pl.UInt64),
    )


def task_words(
    forks: Forks, plan: Layout, keys: Sequence[str], pending: Sequence[pl.Expr] = ()
) -> pl.LazyFrame:
    """Per cluster (``keys``: task_id, *pair_by*, ...): rows and the words P, S and E.

    Columns: the keys, ``rows``, ``__pending`` (rows failing a ``pending`` check), ``P0``,
    ``E0``, ``S0``, ``P1``, ... (UInt64), and with ``prefix_hash`` the fingerprint ``F``
    (UInt64) and ``null_prefixes``. Every value is a lookup or arithmetic on the row, then a
    plain sum per cluster: the group-by stays on polars' streaming fast path.
    """
    rows = row_indices(forks, plan, keys, pending)
    return group_words(rows, plan, keys, prefix="prefix_hash" in forks.columns)


def row_indices(
    forks: Forks, plan: Layout, keys: Sequence[str], pending: Sequence[pl.Expr] = ()
) -> pl.LazyFrame:
    """Per row: the keys and what :func:`group_words` needs (narrow: what a spill writes).

    Columns: the keys, ``__slot`` and ``__at_gap`` (lookup indices; the slot ``plan.size`` for
    a point the layout lacks), ``__success`` (UInt64), ``__pending`` (whether the row fails
    one of the ``pending`` checks: one sum per task instead of one per check, since valid
    input fails none), and with ``prefix_hash`` ``__prefix`` (UInt64) and ``null_prefixes``.
    """
    if {"perturb_action", "end_action"} <= forks.columns:
        # A null perturb or end never ends: it takes the largest gap, after every point.
        gap = rules.run_gap().clip(0, plan.gaps - 1).fill_null(plan.gaps - 1).cast(pl.UInt64)
    else:
        gap = _u64(plan.gaps - 1)
    prefix = "prefix_hash" in forks.columns
    # the condition's hash, the point hash and the slot first, once per row (polars does not
    # share sub-expressions here)
    condition = pl.col("__condition")
    fingerprint = pl.col("prefix_hash").hash() ^ (condition * _u64(_MIX[3]))
    nulls = pl.col("prefix_hash").is_null().alias("null_prefixes")
    point, slot = pl.col("__point"), pl.col("__point") % _u64(plan.size)
    owned = pl.lit(plan.owners).gather(slot) == point
    return (
        forks.lf.with_columns(pl.col("condition").hash().alias("__condition"))
        .with_columns(_point_hash(condition).alias("__point"))
        .with_columns(pl.when(owned).then(slot).otherwise(_u64(plan.size)).alias("__slot"))
        .select(
            *keys,
            "__slot",
            (pl.col("__slot") * _u64(plan.gaps) + gap).alias("__at_gap"),
            pl.col("success").cast(pl.UInt64).alias("__success"),
            pl.any_horizontal(*pending, pl.lit(False)).alias("__pending"),
            *([fingerprint.alias("__prefix"), nulls] if prefix else []),
        )
    )


def group_words(
    indices: pl.LazyFrame, plan: Layout, keys: Sequence[str], *, prefix: bool
) -> pl.LazyFrame:
    """Look up the words of :func:`row_indices`' rows and sum them per cluster (``keys``)."""
    sums: list[pl.Expr] = [pl.len().cast(pl.Int64).alias("rows"), pl.col("__pending").sum()]
    lookups: list[pl.Expr] = []
    for w in range(plan.words):
        lookups += [
            pl.lit(plan.present[w]).gather(pl.col("__slot")).alias(f"P{w}"),
            pl.lit(plan.ended[w]).gather(pl.col("__at_gap")).alias(f"E{w}"),
        ]
        sums += [pl.col(f"P{w}").sum(), pl.col(f"E{w}").sum(), pl.col(f"S{w}").sum()]
    derived = [(pl.col(f"P{w}") * pl.col("__success")).alias(f"S{w}") for w in range(plan.words)]
    if prefix:
        weight = pl.lit(plan.weight).gather(pl.col("__at_gap"))
        derived += [(weight * pl.col("__prefix")).alias("F"), pl.col("null_prefixes")]
        sums += [pl.col("F").sum(), pl.col("null_prefixes").sum().cast(pl.Int64)]
    return (
        indices.with_columns(lookups)
        .select(
            *keys,
            "__pending",
            *(pl.col(e.meta.output_name()) for e in lookups),
            *derived,
        )
        .group_by(keys)
        .agg(sums)
    )


def rows_per_task(forks: Forks) -> float:
    """Rows per distinct task among the first rows (``_budget.HINT_ROWS``): ~1 if scattered."""
    first = forks.lf.select("task_id").head(_budget.HINT_ROWS).collect()
    return first.height / max(first["task_id"].n_unique(), 1)


def words_in_budget(
    forks: Forks, plan: Layout, keys: Sequence[str], pending: Sequence[pl.Expr], *, budget: int
) -> pl.DataFrame:
    """Per-task words (:func:`task_words`) from one read of ``forks``, within ``budget`` bytes.

    Returns the words, one row per cluster in no particular order. When one pass's group-by
    state would exceed the budget (:func:`._budget.partitions`), the pass writes each row's
    lookup indices (:func:`row_indices`, narrowed) to one Arrow IPC file per hash partition of
    the task ids in a scratch directory, then groups each file on its own: a task's rows are
    all in one file, so the words are those of the one pass, and the input is read once.
    """
    rows = int(forks.lf.select(pl.len()).collect().item())  # parquet/IPC: from the metadata
    hint = rows_per_task(forks) if _budget.worth_a_look(rows) else None
    parts = _budget.partitions(rows, budget, hint)
    if parts == 1:
        return task_words(forks, plan, keys, pending).collect(engine="streaming")
    indices = row_indices(forks, plan, keys, pending).with_columns(
        pl.col(name).cast(dtype) for name, dtype in _NARROW.items()
    )
    part = (pl.col("task_id").hash() % _u64(parts)).alias("__part")
    prefix = "prefix_hash" in forks.columns
    with scratch_dir() as folder:
        indices.with_columns(part).sink_ipc(
            pl.PartitionBy(folder, key="__part", include_key=False), mkdir=True
        )
        found = [
            group_words(pl.scan_ipc(f), plan, keys, prefix=prefix).collect(engine="streaming")
            for f in sorted(folder.rglob("*.ipc"))
        ]
    # (no partition file only without rows, which take the one-pass branch)
    return pl.concat(found) if found else task_words(forks, plan, keys, pending).clear().collect()


def _spread(plan: Layout, word: str, w: int) -> pl.Expr:
    """Per condition: its recovery bits in word ``w`` when its none bit is set in ``word``."""
    recovery = ~pl.col("none")
    nones = plan.points.filter(pl.col("none")).select("condition", "bit", "word").rows()
    parts = [
        pl.when((pl.col(f"{word}{nw}") & _u64(1 << (nb % _WORD_BITS))) != 0)
        .then(_u64(plan.mask(w, recovery & (pl.col("condition") == c))))
        .otherwise(_u64(0))
        for c, nb, nw in nones
    ]
    return pl.sum_horizontal(*parts, _u64(0))


def prefix_conflicts(forks: Forks, clusters: pl.DataFrame) -> pl.DataFrame:
    """Keys of the ``clusters`` with an episode whose non-null prefix hashes differ.

    Episodes are grouped by a 64-bit hash of their key: two episodes sharing one can only add
    conflicts, never hide one. Only the clusters' rows are grouped; a conflict found reads the
    table again for its clusters.
    """
    keys = clusters.columns
    episode = _mixed_hash(forks.episode).alias("__episode")
    rows = forks.lf.join(clusters.lazy(), on=keys, how="semi", nulls_equal=True)
    conflicts = (
        rows.select(episode, pl.col("prefix_hash").hash().alias("__value"))
        .group_by("__episode")
        .agg(pl.col("__value").min().alias("__low"), pl.col("__value").max().alias("__high"))
        .filter(pl.col("__low") != pl.col("__high"))
        .select("__episode")
        .collect(engine="streaming")
    )
    if not conflicts.height:
        return clusters.clear()
    return (
        forks.lf.select(*keys, episode)
        .join(conflicts.lazy(), on="__episode", how="semi")
        .select(keys)
        .unique()
        .collect(engine="streaming")
    )


def _ones(plan: Layout) -> pl.Expr:
    """Bits set in a cluster's words P: its rows, unless a point repeats or is not in ``plan``."""
    return pl.sum_horizontal(
        *(pl.col(f"P{w}").bitwise_count_ones().cast(pl.Int64) for w in range(plan.words))
    )


def _survey_of_words(
    forks: Forks, scan: Forks, words: pl.DataFrame, plan: Layout, full_key: Sequence[str]
) -> Survey:
    """Read the survey off the task words when they tell it; then run every check but keys.

    When each cluster has one bit in P per row, every row is at a point of ``plan`` (a row at
    a point it lacks sets no bit) and no point repeats, so the rows per point are the bits set
    per point, and the key-level checks hold (a layout only has valid points): the input was
    read once. Otherwise the survey query reads the point keys again (a guess from the first
    rows that missed points, duplicate keys or bad keys). The row checks' violations are one
    flag per row; when any row is flagged, :func:`check` counts them per check (input that
    fails raises, so that second read is on bad input only).
    """
    if words.select((_ones(plan) == pl.col("rows")).all()).item():
        counts = point_rows(words, plan, forks.pair_by)
    else:
        counts = survey_query(scan).collect(engine="streaming")
    found = read_survey(forks, counts, full_key)
    flagged = int(words["__pending"].sum())
    check(forks, found, None if flagged else dict.fromkeys(found.pending, 0))
    return found


def point_rows(words: pl.DataFrame, plan: Layout, pair_by: Sequence[str]) -> pl.DataFrame:
    """Rows per (condition, *pair_by*, method, delay) of words with one bit per row.

    The columns of :func:`survey_query` (points without rows left out).
    """
    index, groups = _group_index(words, pair_by)
    points = plan.points.select("bit", "condition", "method", "delay")
    bits = points["bit"].to_numpy()
    counted = _bits_per_point(words, "P", plan, bits, index, groups.height)
    long = pl.DataFrame(
        {
            "__group": np.repeat(np.arange(groups.height), len(bits)),
            "bit": np.tile(bits, groups.height),
            "rows": counted.ravel().astype(np.int64),
        }
    )
    return (
        long.join(groups.with_columns(pl.col("__group").cast(pl.Int64)), on="__group")
        .join(points, on="bit")
        .filter(pl.col("rows") > 0)
        .select("condition", *pair_by, "method", "delay", "rows")
    )


def _group_index(frame: pl.DataFrame, by: Sequence[str]) -> tuple[np.ndarray, pl.DataFrame]:
    """Each row's group of ``by`` values, and the groups (``__group``, *by*; at least one)."""
    if not by:
        return np.zeros(frame.height, dtype=np.int64), pl.DataFrame({"__group": [0]})
    groups = frame.select(by).unique(maintain_order=True).with_row_index("__group")
    index = frame.join(groups, on=list(by), how="left", nulls_equal=True, maintain_order="left")
    return index["__group"].to_numpy(), groups


def _bits_per_point(
    frame: pl.DataFrame, word: str, plan: Layout, bits: np.ndarray, index: np.ndarray, n: int
) -> np.ndarray:
    """Per group and point (of ``bits``): the rows of ``frame`` with its bit set in ``word``."""
    position = bits % _WORD_BITS
    counted = np.stack(
        [_set_bits(frame[f"{word}{w}"].to_numpy(), index, n) for w in range(plan.words)], axis=1
    )
    return counted[:, bits // _WORD_BITS, position]


def check_duplicates(
    forks: Forks, words: pl.DataFrame, plan: Layout, keys: Sequence[str], full_key: Sequence[str]
) -> None:
    """Raise the duplicate-key error if a cluster repeats a point (fewer ones in P than rows)."""
    suspects = words.filter(_ones(plan) != pl.col("rows")).select(keys)
    if suspects.height == 0:
        return
    rows = forks.lf.join(suspects.lazy(), on=list(keys), how="semi", nulls_equal=True)
    raise_duplicate_keys(rows, _FORKS, full_key)
    raise RuntimeError(  # pragma: no cover - the bit test and the exact check disagree
        "internal error: the bit-set duplicate test found repeated points but no repeated key."
    )


def check_layout(words: pl.DataFrame, plan: Layout) -> None:
    """Check each point's bit was set once per survey row (else two engines' hashes disagree)."""
    totals = words.select(
        ((pl.col(f"P{word}") & _u64(1 << (bit % _WORD_BITS))) != 0).sum().alias(str(bit))
        for bit, word in plan.points.select("bit", "word").iter_rows()
    )
    found = [int(totals[str(b)].item()) for b in plan.points["bit"]]
    if found != plan.points["rows"].to_list():  # pragma: no cover - a bug, never bad input
        raise RuntimeError("internal error: the bit-set lookup disagrees with the survey counts.")


def cell_counts(
    words: pl.DataFrame,
    plan: Layout,
    design: Design,
    pair_by: Sequence[str],
    by: Sequence[str],
) -> pl.DataFrame:
    """Cell counts from task words: one row per (condition, delay, method, *by*) with rows.

    Columns: the cells, ``n``, ``rescue``, ``harm``, ``kept``, ``unchanged``,
    ``carried_forward``, ``unpaired``, ``prefix_mismatch`` (0: conflicting episodes take the
    join path), ``after_end``.
    """
    recovery = ~pl.col("none")
    frame = words.lazy()
    if pair_by:
        grid = _grid_words(design, plan, pair_by).lazy()
        frame = frame.join(grid, on=list(pair_by), how="left", nulls_equal=True)
    exprs: list[pl.Expr] = []
    for w in range(plan.words):
        rec = _u64(plan.mask(w, recovery))
        present, success, ended = pl.col(f"P{w}") & rec, pl.col(f"S{w}") & rec, pl.col(f"E{w}")
        has_none, y0 = _spread(plan, "P", w), _spread(plan, "S", w)
        state = rules.standing(present, has_none, ended)
        # carry-forward only reaches the design grid's points of the cluster's pair_by keys
        # (without pair_by, every recovery point: has_none holds no other bit)
        carried = state["carried"] & pl.col(f"G{w}").fill_null(0) if pair_by else state["carried"]
        masks = {**state, **rules.outcomes(state["pair"], carried, y0, success)}
        exprs += [masks[name].alias(f"{name}{w}") for name in CLASSES]
    classes = frame.select(*by, *exprs).collect()
    index, groups = _group_index(classes, by)
    bits = plan.points.filter(recovery)["bit"].to_numpy()
    counted = {  # (group, recovery point) in bit order
        name: _bits_per_point(classes, name, plan, bits, index, groups.height) for name in CLASSES
    }
    long = pl.DataFrame(
        {
            "__group": np.repeat(np.arange(groups.height), len(bits)),
            "bit": np.tile(bits, groups.height),
            **{name: values.ravel().astype(np.int64) for name, values in counted.items()},
        }
    ).join(groups.with_columns(pl.col("__group").cast(pl.Int64)), on="__group")
    cells = ["condition", "delay", "method", *by]
    n = pl.sum_horizontal(OUTCOMES).alias("n")
    zero = pl.lit(0, dtype=pl.Int64).alias("prefix_mismatch")
    return (
        long.join(plan.points.select("bit", *cells[:3]), on="bit")
        .select(*cells, n, *CLASSES[:-1], zero, "after_end")
        .filter(pl.col("n") + pl.col("unpaired") + pl.col("after_end") > 0)
    )


#: Bit k of byte value v, for every byte value: the 256 × 8 table of the byte histogram.
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")


def _set_bits(values: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """How many values of each group have each of the 64 bits set: shape (n_groups, 64).

    Vectorised through byte histograms: one bincount per byte position (8 passes over the
    values, whatever the number of bits), then a product with the bits of each byte value.
    """
    octets = np.ascontiguousarray(values, dtype=np.uint64).view(np.uint8).reshape(-1, 8)
    out = np.empty((n_groups, 64), dtype=np.int64)
    table = _BYTE_BITS.astype(np.int64)
    for k in range(8):  # little-endian byte k holds bits 8k .. 8k + 7
        histogram = np.bincount(group * 256 + octets[:, k], minlength=n_groups * 256)
        out[:, 8 * k : 8 * k + 8] = histogram.reshape(n_groups, 256) @ table
    return out


def _grid_words(design: Design, plan: Layout, pair_by: Sequence[str]) -> pl.DataFrame:
    """Per pair_by combination: the words of its design-grid recovery points."""
    bits = design.points.join(
        plan.points.select("condition", "method", "delay", "bit", "word"),
        on=["condition", "method", "delay"],
        nulls_equal=True,
    )
    return bits.group_by(list(pair_by)).agg(
        pl.when(pl.col("word") == w)
        .then(pl.lit(2, dtype=pl.UInt64).pow(pl.col("bit") % _WORD_BITS))
        .otherwise(_u64(0))
        .sum()
        .alias(f"G{w}")
        for w in range(plan.words)
    )


@dataclass(frozen=True)
class BitCounts:
    """Cell counts of the bit-set path, and the clusters it left to the join path."""

    counts: pl.DataFrame
    """As :func:`cell_counts`, over every cluster not in ``rest``."""
    rest: pl.DataFrame | None
    """Keys (task_id, *pair_by*) of clusters with an episode whose prefix hashes differ."""


def bit_counts(
    forks: Forks,
    by: Sequence[str],
    full_key: Sequence[str],
    design: Design | None = None,
    *,
    budget: int | None = None,
) -> tuple[Survey, BitCounts | None]:
    """Survey and check the table, then count its cells through task words where that applies.

    Raises the errors of :func:`~recoverylab.schema.validate` (duplicate keys too). The path
    applies when no ``none`` row is delay-specific, the points fit in ``MAX_WORDS`` words and
    every ``by`` key is constant within each cluster (task_id, *pair_by*; checked on the task
    words); otherwise the second result is ``None`` (every check but duplicates has run).
    ``design``: the whole table's grid (a shard's may lack points). ``budget``: bytes for
    the per-task pass (:func:`words_in_budget`; default :func:`._budget.default_budget`).
    """
    budget = _budget.default_budget() if budget is None else budget
    clusters = ["task_id", *forks.pair_by]
    extra = [k for k in by if k not in forks.pair_by]
    keys = [*clusters, *extra]
    # the pass over the rows reads integer task ids as they are (see Forks.int_ids)
    scan = forks if forks.int_ids is None else Forks(forks.int_ids, forks.pair_by, forks.columns)
    sample = sample_counts(scan)
    pending = list(read_survey(forks, sample, full_key).pending.values())  # as the survey's
    # the design's points too: a shard given the whole table's design needs bits for them
    guess = layout(_with_design(sample, design))
    words = None
    if guess is None:
        found = survey(forks, full_key)
    else:
        words = words_in_budget(scan, guess, keys, pending, budget=budget)
        found = _survey_of_words(forks, scan, words, guess, full_key)
    plan = layout(_with_design(found.counts, design))
    if plan is None:
        return found, None
    point = ["condition", "method", "delay"]
    if words is None or guess is None or not guess.points[point].equals(plan.points[point]):
        # the first rows missed some points: the same layout function, on every point
        words = words_in_budget(scan, plan, keys, pending, budget=budget)
    # one row per task from here on: task ids as the canonical table has them (strings)
    words = words.with_columns(pl.col("task_id").cast(pl.String))
    if extra and words.select(clusters).is_duplicated().any():
        return found, None  # a by value varies within a task: the join keeps each row's value
    check_duplicates(forks, words, plan, keys, full_key)
    check_layout(words, plan)
    design = found.design if design is None else design
    words, slow = _set_aside_conflicts(forks, words, plan, clusters)
    return found, BitCounts(cell_counts(words, plan, design, forks.pair_by, by), slow)


def _set_aside_conflicts(
    forks: Forks, words: pl.DataFrame, plan: Layout, clusters: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Split off the clusters whose prefixes conflict (the join path counts them).

    Returns the other clusters' words and the conflicted keys (``None`` if none). The tasks
    the fingerprint cannot decide are settled episode by episode, grouping only their rows.
    Decidable: the recovery rows of each condition are exactly its points before the end of
    the run when it has a ``none`` row, none at all otherwise, and no prefix hash is null.
    """
    if "F" not in words.columns:
        return words, None
    recovery = ~pl.col("none")
    exact = [
        (pl.col(f"P{w}") & _u64(plan.mask(w, recovery)))
        == (_spread(plan, "P", w) & ~pl.col(f"E{w}"))
        for w in range(plan.words)
    ]
    open_ = ~pl.all_horizontal(*exact) | (pl.col("null_prefixes") > 0)
    conflicted = words.filter(~open_ & (pl.col("F") != 0)).select(clusters)
    unsure = words.filter(open_).select(clusters)
    if unsure.height:
        conflicted = pl.concat([conflicted, prefix_conflicts(forks, unsure)])
    if not conflicted.height:
        return words, None
    slow = conflicted.unique()
    return words.join(slow, on=clusters, how="anti", nulls_equal=True), slow
