"""Seed Eq. 1-2 as polars expressions, and the checks that the annotations agree with them.

Per episode: the reachable copies C and other versions V of its case, the cited sources S, the
branch (copy / versions_only / dead_end), gp, compliance and the first failure reason
(:data:`recoverylab.goal.REASONS`); a regime annotation that contradicts the resources is an
:class:`InputError` (:func:`_check_consistency`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from recoverylab.goal._tables import (
    _CASE_INTERNAL,
    _RESULT_COLUMNS,
    BRANCHES,
    REASONS,
    _Problem,
    _raise_first,
)


def _reachable_counts(resources: pl.LazyFrame, key: str = "case_id") -> pl.LazyFrame:
    """Per case (``key``: its id or its key column): |C| and |V| (reachable copies, versions)."""
    return resources.group_by(key).agg(*_reachable_exprs())


def _reachable_exprs() -> list[pl.Expr]:
    """Return the aggregations ``_n_copies`` and ``_n_versions`` of a case's resources."""
    copies = (pl.col("relation") == "copy") & pl.col("reachable")
    versions = (pl.col("relation") == "other_version") & pl.col("reachable")
    return [
        copies.sum().cast(pl.Int64).alias("_n_copies"),
        versions.sum().cast(pl.Int64).alias("_n_versions"),
    ]


def _score_query(
    tables: Mapping[str, pl.LazyFrame],
    case_columns: list[str],
    episode_columns: list[str],
    *,
    hashed: Sequence[str] = (),
) -> pl.LazyFrame:
    """Build the lazy per-episode scoring query (seed Eq. 1-3) over the checked tables.

    ``steps`` is read once (one scan shared by the query) into two streaming aggregations: the
    counts per episode and the visited cited sources (:func:`_cited_sources`, where the steps
    are only filtered by a semi-join); the rest is one row per episode or citation. The keys
    ``_episode`` and ``_case`` are the ids' hashes for the columns in ``hashed`` (see
    :func:`_key_partial`), else the ids.
    """
    keyed = _keyed(tables, hashed)
    return _scored(
        keyed,
        _step_counts(keyed["steps"]),
        _cited_sources(keyed, prefilter="episode_id" in hashed),
        _with_reachable(keyed["cases"], _reachable_counts(keyed["resources"], "_case")),
        case_columns,
        episode_columns,
    )


def _with_reachable(cases: pl.LazyFrame, reachable: pl.LazyFrame) -> pl.LazyFrame:
    """Per case key: the case's columns but its id, and |C|, |V| (null when it lists none)."""
    return cases.drop("case_id").join(reachable, on="_case", how="left")


def _keyed(tables: Mapping[str, pl.LazyFrame], hashed: Sequence[str]) -> dict[str, pl.LazyFrame]:
    """Return the tables with their keys ``_episode`` and ``_case`` (hashes for ``hashed``)."""
    episode = _key("episode_id", "_episode", hashed="episode_id" in hashed)
    case = _key("case_id", "_case", hashed="case_id" in hashed)
    return {
        "cases": tables["cases"].with_columns(case),
        "resources": tables["resources"].with_columns(case),
        "episodes": tables["episodes"].with_columns(episode, case),
        "steps": tables["steps"].with_columns(episode),
        "citations": tables["citations"].with_columns(episode),
    }


def _step_counts(steps: pl.LazyFrame, *extra: pl.Expr) -> pl.LazyFrame:
    """Per episode key: ``steps`` and ``n_prohibited`` (and the ``extra`` aggregations)."""
    return steps.group_by("_episode").agg(
        pl.len().cast(pl.Int64).alias("steps"),
        pl.col("prohibited").sum().cast(pl.Int64).alias("n_prohibited"),
        *extra,
    )


def _scored(
    keyed: Mapping[str, pl.LazyFrame],
    step_counts: pl.LazyFrame,
    cited: pl.LazyFrame,
    per_case: pl.LazyFrame,
    case_columns: list[str],
    episode_columns: list[str],
    *,
    cases_listed: bool = False,
) -> pl.LazyFrame:
    """Score the episodes from the keyed tables and their per-key parts (see _score_query).

    ``step_counts``: :func:`_step_counts`; ``cited``: :func:`_cited_sources` (or the same
    columns from :mod:`recoverylab.goal._one_pass`); ``per_case``: :func:`_with_reachable`.
    They may be collected frames made lazy again.
    ``cases_listed``: every episode's case is known to be listed (see :func:`_episode_counts`).
    """
    counts = _episode_counts(
        keyed["episodes"],
        step_counts,
        *_citation_counts(cited),
        per_case,
        cases_listed=cases_listed,
    )
    return (
        counts.with_columns(_branch().alias("branch"))
        .with_columns(_branch_reason().alias("_branch_reason"))
        .with_columns(*_outcomes())
        .with_columns(_decoded("branch", BRANCHES), _decoded("reason", REASONS))
        .select("episode_id", "case_id", *case_columns, *episode_columns, *_RESULT_COLUMNS)
    )


def _cited_sources(tables: Mapping[str, pl.LazyFrame], *, prefilter: bool) -> pl.LazyFrame:
    """One row per cited (episode key, source) with its ``relation`` and whether ``_supported``.

    Supported = visited and compliantly reachable (only those count towards S ∩ C and S ⊆ V).
    ``_cites`` is the number of citation rows of the pair (1 in a checked table). Whether a
    cited source was visited comes from one group-by over the citations and the steps together
    (a step row adds to ``_rows`` only). With ``prefilter`` (keys already hashed), the steps
    enter it only when their pair's hash is a citation's: a superset of the cited pairs (equal
    pairs hash alike), so the group-by stays exact and holds about as many groups as there are
    citations (0.2 GB less peak memory at 10M steps); the string-keyed query hashes nothing.
    """
    cites = pl.col("_cites")
    pair = (pl.col("_episode").hash() ^ pl.col("resource_id").hash()).alias("_pair")
    citations = tables["citations"].select("_episode", "resource_id")
    steps = (
        tables["steps"]
        .select("_episode", "resource_id")
        .filter(pl.col("resource_id").is_not_null())  # never cited: drop, not probe
    )
    if prefilter:
        steps = (
            steps.with_columns(pair)
            .join(citations.select(pair), on="_pair", how="semi")
            .drop("_pair")
        )
    pairs = (
        pl.concat(
            [
                citations.with_columns(pl.lit(1).alias("_cites")),
                steps.with_columns(pl.lit(0).alias("_cites")),
            ]
        )
        .group_by("_episode", "resource_id")
        .agg(cites.sum(), pl.len().alias("_rows"))
        .filter(cites > 0)
    )
    supported = (pl.col("_rows") > cites) & pl.col("reachable").fill_null(False)
    return (
        pairs.join(tables["episodes"].select("_episode", "_case"), on="_episode", how="inner")
        .join(
            tables["resources"].select("_case", "resource_id", "relation", "reachable"),
            on=["_case", "resource_id"],
            how="left",
        )
        .select(
            "_episode",
            "resource_id",
            "relation",
            cites,
            supported.alias("_supported"),
        )
    )


def _citation_counts(cited: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per episode key that cites: |S| and the unsupported / supported-copy / -version counts.

    Also, per episode key with an unsupported source: the sorted ``unsupported`` list. The two
    are joined to the episodes one after the other: joined to each other first, they cost
    0.3 s CPU more at 10M steps (the per-pair rows feed both group-bys).
    """
    supported = pl.col("_supported")
    cites = pl.col("_cites")

    def count(condition: pl.Expr, name: str) -> pl.Expr:
        # when/then, not a filter per group: the same sums at about half the CPU
        return pl.when(condition).then(cites).otherwise(0).sum().cast(pl.Int64).alias(name)

    counts = cited.group_by("_episode").agg(
        cites.sum().cast(pl.Int64).alias("n_cited"),
        count(~supported, "_n_unsupported"),
        count(supported & (pl.col("relation") == "copy"), "_n_cited_copy"),
        count(supported & (pl.col("relation") == "other_version"), "_n_cited_version"),
    )
    # The lists are built from the unsupported rows only (a tenth of them at 10M steps: 0.25 s
    # against 2.2 s for an empty-or-not list per citing episode); null = none, filled later.
    unsupported = pl.col("resource_id").repeat_by(cites)
    lists = (
        cited.filter(~supported)
        .group_by("_episode")
        .agg(unsupported.list.explode(keep_nulls=False, empty_as_null=False).sort())
    )
    return counts, lists.rename({"resource_id": "unsupported"})


def _episode_counts(
    episodes: pl.LazyFrame,
    step_counts: pl.LazyFrame,
    citation_counts: pl.LazyFrame,
    unsupported: pl.LazyFrame,
    per_case: pl.LazyFrame,
    *,
    cases_listed: bool = False,
) -> pl.LazyFrame:
    """Every episode of a known case with its case columns, |C|, |V| and its counts (0 if none).

    The report's strings are only compared: the episode's own ones become flags before any
    join, and the case columns join last, so each join carries as few columns as it can.
    ``cases_listed`` (every episode's case was checked to be listed): the case columns join
    left, the same rows; polars would move an inner join first and carry the case's strings
    through the other joins (0.2-0.3 s CPU at three million episodes).
    """
    counts = ("steps", "n_prohibited", "n_cited", "_n_unsupported")
    own, with_case = _report_flags()
    return (
        episodes.with_columns(*own)
        .drop("answer", "version_claim")
        .join(step_counts, on="_episode", how="left")
        .join(citation_counts, on="_episode", how="left")
        .join(per_case, on="_case", how="left" if cases_listed else "inner")
        .join(unsupported, on="_episode", how="left")
        .with_columns(*with_case)
        .drop("diagnosis", "requested_user", *_CASE_INTERNAL)
        .with_columns(
            pl.col("_n_copies", "_n_versions", *counts, "_n_cited_copy", "_n_cited_version")
            .fill_null(pl.lit(0, dtype=pl.Int64))
            .cast(pl.Int64),
            pl.col("unsupported").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        )
    )


def _report_flags() -> tuple[list[pl.Expr], list[pl.Expr]]:
    """Return the parts of an episode's report that seed Eq. 1 tests, as Boolean columns.

    The first flags need the episode only; the others compare it with its case.
    """
    own = [
        pl.col("answer").is_not_null().alias("_answered"),
        (pl.col("version_claim").fill_null("") == "other").alias("_disclosed"),
    ]
    with_case = [
        (pl.col("diagnosis") == pl.col("barrier")).fill_null(False).alias("_diagnosed"),
        (pl.col("needs_user_help") & ~pl.col("requested_user")).alias("_help_missing"),
    ]
    return own, with_case


def _code(name: str) -> pl.Expr:
    """Return the small-integer code of a branch or reason (its position in BRANCHES, REASONS).

    The rules pick codes, and each row's string is made once by :func:`_decoded`: a chain of
    when/then over strings would build a string column per link.
    """
    names = BRANCHES if name in BRANCHES else REASONS
    return pl.lit(names.index(name), dtype=pl.UInt8)


def _decoded(column: str, names: Sequence[str]) -> pl.Expr:
    """Return a code column of :func:`_code` as its strings (null stays null)."""
    return pl.col(column).replace_strict(
        list(range(len(names))), list(names), return_dtype=pl.String
    )


def _branch() -> pl.Expr:
    """Return the branch code of seed Eq. 1, decided by the reachable resources of the case."""
    return (
        pl.when(pl.col("_n_copies") > 0)
        .then(_code("copy"))
        .when(pl.col("_n_versions") > 0)
        .then(_code("versions_only"))
        .otherwise(_code("dead_end"))
    )


def _outcomes() -> list[pl.Expr]:
    """Return ``gp``, ``compliant``, ``success`` (Eq. 2-3) and the first failure ``reason``."""
    gp = (pl.col("_n_unsupported") == 0) & pl.col("_branch_reason").is_null()
    compliant = pl.col("n_prohibited") == 0
    reason = (
        pl.when(pl.col("_n_unsupported") > 0)
        .then(_code("unsupported_attribution"))
        .when(pl.col("_branch_reason").is_not_null())
        .then(pl.col("_branch_reason"))
        .when(pl.col("n_prohibited") > 0)
        .then(_code("policy_violation"))
        .otherwise(pl.lit(None, dtype=pl.UInt8))
    )
    return [
        gp.alias("gp"),
        compliant.alias("compliant"),
        (gp & compliant).alias("success"),
        reason.alias("reason"),
    ]


def _branch_reason() -> pl.Expr:
    """Return the code of the first failure of seed Eq. 1 in the episode's branch (or null)."""
    none = pl.lit(None, dtype=pl.UInt8)
    n_cited = pl.col("n_cited")
    # Exact-copy branch: S ∩ C ≠ ∅ (one reachable copy among the sources suffices).
    copy = pl.when(pl.col("_n_cited_copy") > 0).then(none).otherwise(_code("no_copy_used"))
    # Versions-only branch: ∅ ≠ S ⊆ V and the other version disclosed.
    versions = (
        pl.when(n_cited == 0)
        .then(_code("no_version_used"))
        .when(pl.col("_n_cited_version") < n_cited)
        .then(_code("decoy_or_foreign_source"))
        .when(~pl.col("_disclosed"))
        .then(_code("undisclosed_version"))
        .otherwise(none)
    )
    # Dead end: abstain, name the true barrier, ask the user when only the user can unlock.
    dead_end = (
        pl.when(pl.col("_answered"))
        .then(_code("answered_dead_end"))
        .when(~pl.col("_diagnosed"))
        .then(_code("wrong_diagnosis"))
        .when(pl.col("_help_missing"))
        .then(_code("missing_help_request"))
        .otherwise(none)
    )
    return (
        pl.when(pl.col("branch") == _code("copy"))
        .then(copy)
        .when(pl.col("branch") == _code("versions_only"))
        .then(versions)
        .otherwise(dead_end)
    )


def _per_case(tables: Mapping[str, pl.LazyFrame]) -> pl.LazyFrame:
    """Per case: ``case_id, regime, barrier`` and |C|, |V| (null when it lists no resource)."""
    return (
        tables["cases"]
        .select("case_id", "regime", "barrier")
        .join(_reachable_counts(tables["resources"]), on="case_id", how="left")
    )


def _case_counts(
    tables: Mapping[str, pl.LazyFrame], rules: Sequence[tuple[pl.Expr, str, str]]
) -> pl.LazyFrame:
    """Count the cases breaking each regime rule and the resources of ``_unknown`` cases.

    One pass over ``resources``: its per-case counts are fully joined with ``cases``, so a
    resource row whose case is not listed lands in a row of its own.
    """
    per_resource_case = (
        tables["resources"].group_by("case_id").agg(pl.len().alias("_n_rows"), *_reachable_exprs())
    )
    listed = pl.col("_listed").fill_null(False)
    return (
        tables["cases"]
        .select("case_id", "regime", "barrier", pl.lit(True).alias("_listed"))
        .join(per_resource_case, on="case_id", how="full", coalesce=True)
        .select(
            *(rule.filter(listed).sum().alias(str(i)) for i, (rule, *_) in enumerate(rules)),
            pl.col("_n_rows").filter(~listed).sum().alias("_unknown"),
        )
    )


def _citation_counts_on(tables: Mapping[str, pl.LazyFrame], *, hashed: bool) -> pl.LazyFrame:
    """Count the citations of ``unknown`` episodes and of ``unlisted`` sources.

    Exact on hashed ids when the hashes are distinct (the ``keys`` flags) and every resource and
    episode has a known case (raised before); else they are counted again on the strings.
    """
    episode_key = _key("episode_id", "_episode", hashed=hashed)
    case_key = _key("case_id", "_case", hashed=hashed)
    cited = (
        tables["citations"]
        .select(episode_key, "episode_id", "resource_id")
        .join(
            tables["episodes"].select(episode_key, pl.col("episode_id").alias("_id"), case_key),
            on="_episode",
            how="left",
        )
        .with_columns((pl.col("_id") == pl.col("episode_id")).fill_null(False).alias("_known"))
    )
    listed = tables["resources"].select(case_key, "resource_id", pl.lit(True).alias("_listed"))
    known = pl.col("_known")
    return cited.join(listed, on=["_case", "resource_id"], how="left").select(
        pl.col("episode_id").filter(~known).n_unique().alias("unknown"),
        (known & pl.col("_listed").is_null()).sum().alias("unlisted"),
    )


def _check_consistency(
    tables: Mapping[str, pl.LazyFrame], unknown_steps: int, keys: pl.DataFrame
) -> None:
    """Raise on the first inconsistency between the five tables (one batch of counts).

    ``keys``: the flags of :func:`_validate_ids`; ``unknown_steps``: counted in the pass over
    the steps. The tables are read again only to name the offending keys of a broken rule.
    """
    cases, resources = tables["cases"], tables["resources"]
    episodes, steps, citations = tables["episodes"], tables["steps"], tables["citations"]
    case_ids = cases.select("case_id")
    episode_ids = episodes.select("episode_id")
    episode_case = episodes.select("episode_id", "case_id")
    per_case = _per_case(tables)
    rules = _case_rules()
    case_counts, citation_counts, unknown_cases = pl.collect_all(
        [
            _case_counts(tables, rules),
            _citation_counts_on(tables, hashed=True),
            episodes.select("case_id").join(case_ids, on="case_id", how="anti").select(pl.len()),
        ],
        engine="streaming",
    )
    unknown_resources = case_counts["_unknown"]
    if not all(keys.row(0)):
        citation_counts = _citation_counts_on(tables, hashed=False).collect()
    case_problems = [
        _Problem(per_case.filter(rule).select("case_id"), ("case_id",), what, requirement, n)
        for (rule, what, requirement), n in zip(
            rules, case_counts.drop("_unknown").row(0), strict=True
        )
    ]
    # Anti-joins come before any de-duplication, so only offending rows (normally none) are
    # de-duplicated rather than every step.
    problems: list[_Problem] = [
        _Problem(
            resources.join(case_ids, on="case_id", how="anti").select("case_id", "resource_id"),
            ("case_id", "resource_id"),
            "resources: {n} row{s} of unknown cases",
            "every resource's `case_id` must be a case in `cases`",
            int(unknown_resources.item()),
        ),
        *case_problems,
        _Problem(
            episode_case.join(case_ids, on="case_id", how="anti"),
            ("episode_id", "case_id"),
            "episodes: {n} episode{s} of unknown cases",
            "every episode's `case_id` must be a case in `cases`",
            int(unknown_cases.item()),
        ),
        _Problem(
            steps.select("episode_id").join(episode_ids, on="episode_id", how="anti").unique(),
            ("episode_id",),
            "steps: rows of {n} unknown episode{s}",
            "every step's `episode_id` must be an episode in `episodes`",
            unknown_steps,
        ),
        _Problem(
            citations.select("episode_id").join(episode_ids, on="episode_id", how="anti").unique(),
            ("episode_id",),
            "citations: rows of {n} unknown episode{s}",
            "every citation's `episode_id` must be an episode in `episodes`",
            int(citation_counts["unknown"].item()),
        ),
        _Problem(
            citations.select("episode_id", "resource_id")
            .join(episode_case, on="episode_id")
            .join(resources, on=["case_id", "resource_id"], how="anti")
            .select("episode_id", "resource_id"),
            ("episode_id", "resource_id"),
            "citations: {n} citation{s} of resources that the episode's case does not list",
            "every cited source must be a resource of that episode's case in `resources`",
            int(citation_counts["unlisted"].item()),
        ),
    ]
    _raise_first(problems)


def _case_rules() -> list[tuple[pl.Expr, str, str]]:
    """Return the regime rules of ARCHITECTURE §3.3: (violation, message, requirement)."""
    copies = pl.col("_n_copies").fill_null(0)
    versions = pl.col("_n_versions").fill_null(0)
    regime = pl.col("regime")
    return [
        (
            (regime == "barrier_free") & (copies == 0),
            "cases: {n} `barrier_free` case{s} with no reachable copy in `resources`",
            "a barrier-free case needs a compliantly reachable `copy` (the requested resource "
            "itself). Hint: check `reachable`, or relabel the regime",
        ),
        (
            (regime == "recoverable") & (copies == 0) & (versions == 0),
            "cases: {n} `recoverable` case{s} with no reachable copy or other version",
            "a recoverable case needs a compliantly reachable `copy` or `other_version`. Hint: "
            "label it `unrecoverable` if no legitimate route exists",
        ),
        (
            (regime == "unrecoverable") & ((copies > 0) | (versions > 0)),
            "cases: {n} `unrecoverable` case{s} with a reachable copy or other version",
            "an unrecoverable case has none (only decoys may be reachable). Hint: label it "
            "`recoverable`",
        ),
        (
            (regime == "unrecoverable") & pl.col("barrier").is_null(),
            "cases: column `barrier` is null on {n} `unrecoverable` case{s}",
            "a dead end needs its true barrier, which the diagnosis is compared with",
        ),
    ]


def _id_hash(ids: pl.Expr) -> pl.Expr:
    """Return the 64-bit hash of an id column (null stays null: a null id matches nothing)."""
    return pl.when(ids.is_not_null()).then(ids.hash())


def _key(column: str, name: str, *, hashed: bool) -> pl.Expr:
    """Return the key column ``name`` of an id column: its hash when ``hashed``, else the id."""
    return (_id_hash(pl.col(column)) if hashed else pl.col(column)).alias(name)
