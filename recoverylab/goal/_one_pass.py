"""The checks of :func:`recoverylab.goal.score` folded into its scoring pass (no pass of their own).

On the polars engine over whole tables, :func:`score` skips its separate check stage (a
``for_shards`` stage): the scoring stage calls :func:`checked_scoring`, which collects the per-key
parts the scoring query needs (the step counts per episode, the cited sources, the reachable
resources per case) together with every count the checks need, one streaming query per part
(collected together, their hash tables would all be held at once: 1.9 GB against 1.2 GB at 10M
steps). When every count says "clean", the scoring query is built over these collected parts: the
steps are read by the two queries the scoring needs (the counts per episode and the visits of the
cited sources), each for its own columns, and by no check pass of their own (only their first rows
choose how the steps are checked, and a second pass reads the steps of any episode the first
does not vouch for: :mod:`recoverylab.goal._step_checks`). When any count is off (a broken
contract, an inconsistency between the tables, two ids that share a hash, a table that cannot be
read) nothing is decided here: the exact checks of :mod:`recoverylab.goal._score` run and raise the
error they always raised, the same message in the same order, or score on the id strings when ids
merely share a hash.

Ids are keyed by their 64-bit hash, as the scoring query keys them. The owners of the ids
(``episodes`` for episode ids, ``cases`` for case ids) must have distinct hashes; a row that
refers to an id (a step, a citation, a resource, an episode's case) counts as that owner's only
when the id's second hash, independently seeded (:data:`_CHECK_SEED`), is the owner's too
(:func:`_owned`, after a join with the owners: an id that is not its owner's passes only when
both of its hashes are some owner's, a chance of about 2**-106 at three million owners; the
resources of a key compare the sum of their second hashes, :func:`_resource_parts`, and the
steps their tag, :mod:`recoverylab.goal._step_checks`). A
citation's visits are met the same way, by two independent 64-bit hashes of its (episode,
source) pair, and its resource by one, with the source's second hash compared
(:func:`_cited_pairs`). The scoring compares an episode's diagnosis with its case's barrier
by the same two hashes (:func:`_hashed_text`).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from recoverylab._diagnose import decode_errors
from recoverylab._errors import RecoveryLabError
from recoverylab.goal._rules import (
    _case_rules,
    _keyed,
    _reachable_exprs,
    _scored,
    _with_reachable,
)
from recoverylab.goal._step_checks import numbered_as_runs, step_parts, steps_clean
from recoverylab.goal._tables import _HASHED, _TABLES, _check_columns, _violated
from recoverylab.schema import spec, validate

#: Seed of the second hash of an id (any seed other than the key hash's default).
_CHECK_SEED = 0x5EED_C0DE_2026

#: Per key column: the id column behind it and the name of the id's second hash.
_CHECKS = {"_episode": ("episode_id", "_episode_check"), "_case": ("case_id", "_case_check")}

#: Per table: the key columns its rows carry (for the owners, cases and episodes, the first is
#: the one they own).
_KEYS = {
    "cases": ("_case",),
    "resources": ("_case",),
    "episodes": ("_episode", "_case"),
    "steps": ("_episode",),
    "citations": ("_episode",),
}


def checked_scoring(frames: Mapping[str, pl.LazyFrame]) -> pl.LazyFrame | None:
    """Return the scoring query when every check of ``score`` passes, else None.

    None means "run the exact checks": they raise (or score on strings when ids share a hash).
    """
    if any(name not in frames for name in _TABLES):
        return None  # the nested form of episodes: the exact path unnests and checks it
    refused: tuple[type[BaseException], ...] = (RecoveryLabError, *decode_errors())
    try:
        return _checked_scoring(frames)
    except refused:
        return None


def _checked_scoring(frames: Mapping[str, pl.LazyFrame]) -> pl.LazyFrame | None:
    """Collect the parts with every check count; score over them when they are clean."""
    tables = {name: validate(frames[name], name, checks="schema") for name in _TABLES}
    case_columns, episode_columns = _check_columns(tables["cases"], tables["episodes"])
    keyed = _keyed(tables, tuple(_HASHED))
    checked = {name: _with_check_hashes(frame, _KEYS[name]) for name, frame in keyed.items()}
    # the owners first: the steps and resources parts meet them in their own streaming query;
    # the cases part keeps every column, the scoring's case columns included
    cases = checked["cases"].with_columns(_violated(checked["cases"], "cases"))
    parts = {"cases": cases.with_columns(_hashed_text("barrier")).collect(engine="streaming")}
    case_owners = _owners(parts["cases"], "_case")
    episodes = _flagged(checked["episodes"], "episodes", "_case", "_case_check")
    parts["episodes"] = (
        episodes.join(case_owners, on="_case", how="left")
        .with_columns(
            _owned(pl.col("_violated"), pl.col("_case_check") == pl.col("_owner")).alias(
                "_violated"
            )
        )
        .drop("_owner")
        .collect(engine="streaming")
    )
    # while little is held: the hash table of the visits is the largest of the parts'
    unvisited = _unvisited(checked["citations"], checked["steps"])
    episode_owners = _owners(parts["episodes"], "_episode")
    as_runs = numbered_as_runs(checked["steps"])
    steps = step_parts(checked["steps"], episode_owners, as_runs=as_runs).collect(
        engine="streaming"
    )
    if not steps_clean(steps, checked["steps"], episode_owners):
        return None
    parts["steps"] = steps.select("_episode", "steps", "n_prohibited")  # checks: not kept
    parts["per_case"] = _resource_parts(checked["resources"], case_owners).collect(
        engine="streaming"
    )
    # the episodes' keys are collected: the citations join them rather than read them again
    owners = {**checked, "episodes": parts["episodes"].lazy()}
    parts["cited"] = _cited_pairs(owners, unvisited).collect(engine="streaming")
    # the cases with their |C| and |V|: the regime rules and the scoring read them both
    reachable = parts["per_case"].select("_case", "_n_copies", "_n_versions")
    parts["with_reachable"] = _with_reachable(parts["cases"].lazy(), reachable.lazy()).collect()
    if not _clean(parts):
        return None
    episodes = keyed["episodes"].with_columns(_hashed_text("diagnosis"))
    return _scored(
        {**keyed, "episodes": episodes},
        parts["steps"].lazy(),
        parts["cited"].drop("_known", "_visit").lazy(),
        parts["with_reachable"].drop("_case_check", "_violated").lazy(),
        case_columns,
        episode_columns,
        cases_listed=True,  # every episode's case is an owner's (_clean)
    )


def _with_check_hashes(frame: pl.LazyFrame, keys: tuple[str, ...]) -> pl.LazyFrame:
    """Add the second hash of the id behind each of ``keys`` (see :data:`_CHECKS`)."""
    return frame.with_columns(
        pl.col(_CHECKS[key][0]).hash(_CHECK_SEED).alias(_CHECKS[key][1]) for key in keys
    )


def _flagged(frame: pl.LazyFrame, table: str, *columns: str) -> pl.LazyFrame:
    """Select an owner table's own key, its check hash, ``columns`` and ``_violated``."""
    own = _KEYS[table][0]
    return frame.select(own, _CHECKS[own][1], *columns, _violated(frame, table))


def _owners(part: pl.DataFrame, key: str) -> pl.LazyFrame:
    """Return an owner part's key and its check hash as ``_owner`` (one row per owner)."""
    return part.lazy().select(key, pl.col(_CHECKS[key][1]).alias("_owner"))


def _owned(broken: pl.Expr, owner_check: pl.Expr) -> pl.Expr:
    """Return ``broken`` widened to the rows whose key has no owner with their check hash.

    Applied after a left join with :func:`_owners` (owners' keys were checked distinct):
    ``owner_check`` tells whether the row's check hash is its owner's (``_owner``), a row
    without an owner (null) counting as broken.
    """
    return pl.any_horizontal(broken, ~owner_check).fill_null(True)


def _resource_parts(resources: pl.LazyFrame, owners: pl.LazyFrame) -> pl.LazyFrame:
    """Per case key: |C|, |V|, the ``_rows`` and a ``_broken`` flag.

    ``_broken``: a data-check violation, a resource listed twice under the case (its ids'
    hashes repeat; distinct ids that merely share a hash also count, and the exact checks then
    decide), or a row under the key with no case of ``owners`` with that key and check hash.
    The last is told by one sum per key: the check hashes of its rows sum (mod 2**64) to
    ``_rows`` times the owner's, which costs about half a minimum and a maximum; rows that mix
    ``k`` ids of foreign check ``c`` with the owner's ``o`` pass only when ``k (c - o)`` is 0
    mod 2**64, a chance of at most ``k`` in 2**64 where two ids already share the key hash.
    One pass over ``resources`` makes both the scoring's counts and the checks'.
    """
    broken = pl.any_horizontal(pl.col("_violated"), pl.col("_distinct") != pl.col("_rows"))
    owned = pl.col("_checks") == pl.col("_owner") * pl.col("_rows").cast(pl.UInt64)
    return (
        resources.with_columns(_violated(resources, "resources"))
        .group_by("_case")
        .agg(
            pl.col("_case_check").sum().alias("_checks"),
            *_reachable_exprs(),
            pl.len().alias("_rows"),
            pl.col("resource_id").hash().n_unique().alias("_distinct"),
            pl.col("_violated").any(),
        )
        .join(owners, on="_case", how="left")
        .with_columns(_owned(broken, owned).alias("_broken"))
        .drop("_checks", "_distinct", "_violated", "_owner")
    )


def _cited_pairs(tables: Mapping[str, pl.LazyFrame], unvisited: pl.Series) -> pl.LazyFrame:
    """:func:`~recoverylab.goal._rules._cited_sources` with each citation's visit keyed by hash.

    One row per citation with ``resource_id``, ``relation``, ``_cites`` (1), ``_supported``,
    ``_known`` and ``_visit``, the 128-bit key of its (episode, source) pair
    (:func:`_visit_key`); a clean table has one citation per pair (:func:`_clean` counts the
    distinct ``_visit``). A citation was visited unless its ``_visit`` is ``unvisited``
    (:func:`_unvisited`).

    The resource is met by the 64-bit hash ``_k`` of the case key and the source's hash, so it
    decides nothing alone: ``_known`` holds only where the citation's episode has an owner with
    its check hash and where the matched resource (if any) has the citation's case and second
    hash of the source (:data:`_CHECK_SEED`); else the exact checks decide. The strings of the
    sources come from their resources (a cited source without one is refused anyway: null
    ``relation``).
    """
    source = pl.col("resource_id")
    source_hash, check = _text_hash(source).alias("_r"), _text_check(source).alias("_rc")
    citations = (
        tables["citations"]
        .select("_episode", "_episode_check", source_hash, check)
        .with_columns(_visit_key(pl.col("_episode"), pl.col("_r"), pl.col("_rc")))
    )
    owners = tables["episodes"].select("_episode", "_case", _owner="_episode_check")
    resources = tables["resources"].select(
        _pair_key(pl.col("_case"), _text_hash(source)).alias("_k"),
        pl.col("_case").alias("_res_case"),
        check.alias("_res_rc"),
        "resource_id",
        "relation",
        "reachable",
    )
    known = (pl.col("_episode_check") == pl.col("_owner")) & (
        pl.col("_res_case").is_null()  # no resource: refused by its null relation
        | ((pl.col("_res_case") == pl.col("_case")) & (pl.col("_res_rc") == pl.col("_rc")))
    )
    # a null key (a null episode id, refused anyway: it has no owner) counts as visited
    visited = (~pl.col("_visit").is_in(unvisited.implode())).fill_null(True)
    return (
        citations.join(owners, on="_episode", how="left")
        .with_columns(_pair_key(pl.col("_case"), pl.col("_r")).alias("_k"))
        .join(resources, on="_k", how="left")
        .select(
            "_episode",
            "resource_id",
            "relation",
            pl.lit(1).alias("_cites"),
            (pl.col("reachable").fill_null(False) & visited).alias("_supported"),
            known.fill_null(False).alias("_known"),
            "_visit",
        )
    )


def _unvisited(citations: pl.LazyFrame, steps: pl.LazyFrame) -> pl.Series:
    """Return the ``_visit`` keys of the citations that no step visited.

    One anti-join: a hash table of the steps' visits, probed by the citations' keys. It runs
    before the citations meet their episodes and resources, so its table (0.3-0.4 GB at 10M
    steps) is not held beside theirs (with the citations collected first, the peak was about
    0.15 GB higher). Grouping the citations and their visits together by pair needed a
    semi-join, a group-by of both and checks that each pair's rows agree (0.5 s CPU more). A
    step counts as a visit of another pair only when both independent 64-bit halves of the key
    match (a chance of about 2**-84 over 2.7 million citations and 5.8 million visits).
    """
    source = pl.col("resource_id")

    def visit(frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.select(_visit_key(pl.col("_episode"), _text_hash(source), _text_check(source)))

    visits = visit(steps.filter(source.is_not_null()))  # never cited
    unvisited = visit(citations).join(visits, on="_visit", how="anti")
    return unvisited.collect(engine="streaming").to_series()


def _text_hash(texts: pl.Expr) -> pl.Expr:
    """Return the 64-bit hash of a text (a source, keying its pairs; a diagnosis or barrier)."""
    return texts.hash()


def _text_check(texts: pl.Expr) -> pl.Expr:
    """Return the second, independently seeded 64-bit hash of a text."""
    return texts.hash(_CHECK_SEED)


def _pair_key(key: pl.Expr, source_hash: pl.Expr) -> pl.Expr:
    """Return the 64-bit key of a (key, source) pair from the key and the source's hash."""
    return key.hash() ^ source_hash


def _pair_check(key: pl.Expr, source_check: pl.Expr) -> pl.Expr:
    """Return a second 64-bit hash of a (key, source) pair, independent of :func:`_pair_key`."""
    return key.hash(_CHECK_SEED) ^ source_check


def _visit_key(key: pl.Expr, source_hash: pl.Expr, source_check: pl.Expr) -> pl.Expr:
    """Return ``_visit``: :func:`_pair_key` and :func:`_pair_check` side by side (:func:`_wide`)."""
    return _wide(_pair_key(key, source_hash), _pair_check(key, source_check)).alias("_visit")


def _wide(high: pl.Expr, low: pl.Expr) -> pl.Expr:
    """Return two 64-bit hashes side by side in an Int128.

    The high half is read as a signed integer, so no product overflows.
    """
    wide = pl.Int128
    return high.reinterpret(signed=True).cast(wide) * pl.lit(1 << 64, dtype=wide) + low.cast(wide)


def _hashed_text(name: str) -> pl.Expr:
    """Return a report text the scoring only compares (diagnosis = barrier) as its 128-bit hash.

    The scoring only tests ``diagnosis == barrier``, after the case join. Carried through the
    joins as one Int128 (:func:`_wide` of two independent 64-bit hashes; null stays null)
    rather than as strings, the scoring costs about 0.25-0.3 s CPU less at three million
    episodes. Two distinct texts compare equal only when both hashes agree: a chance of about
    2**-106 over three million episodes.
    """
    text = pl.col(name)
    return pl.when(text.is_not_null()).then(_wide(_text_hash(text), _text_check(text))).alias(name)


def _clean(parts: Mapping[str, pl.DataFrame]) -> bool:
    """Return whether no check of ``score`` can fail on the tables the ``parts`` count.

    The steps were checked when their part was collected (:func:`steps_clean`). The
    citations need no totals of their own: a citation with a null or unknown episode id has
    no owner (``_known``), one with a null or unlisted source no ``relation``, and a repeated one
    the ``_visit`` of another; the table may be empty.
    """
    episodes, cases = parts["episodes"], parts["cases"]
    per_case, cited = parts["per_case"], parts["cited"]
    return (
        _enough("episodes", episodes.height)
        and _enough("cases", cases.height)
        and _enough("resources", int(per_case["_rows"].sum()))
        and _none(episodes, pl.col("_violated"))
        and _none(cases, pl.col("_violated"))
        and episodes["_episode"].n_unique() == episodes.height
        and cases["_case"].n_unique() == cases.height
        and _none(per_case, pl.col("_broken"))
        and _none(parts["with_reachable"], *(rule for rule, _, _ in _case_rules()))
        and _none(cited, ~pl.col("_known"), pl.col("relation").is_null())
        and cited["_visit"].n_unique() == cited.height
    )


def _none(frame: pl.DataFrame, *conditions: pl.Expr) -> bool:
    """Return whether no row of ``frame`` meets any of ``conditions`` (null counts as met)."""
    if not conditions or frame.height == 0:
        return True
    return not frame.select(pl.any_horizontal(conditions).fill_null(True).any()).item()


def _enough(table: str, rows: int) -> bool:
    """Return whether ``table`` has the rows its contract needs (any, unless it may be empty)."""
    return rows > 0 or spec(table).allow_empty
