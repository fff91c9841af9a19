"""Goal and takeover without recoverylab: what an analyst would write in DuckDB and pandas.

* ``goal``: ``goal.score`` + ``goal.summarize`` (ARCHITECTURE §3.3) -- the five tables joined,
  the branch of seed Eq. 1 per episode, the first failure reason, then per regime: episodes,
  clusters (goals), successes (GP), goal preserved, compliant, step sums and the failure counts
  by reason. No interval (the SQL analyst stops at the counts).
* ``takeover``: ``takeover.summarize`` (ARCHITECTURE §3.4) with the defaults (k = 3, by agent ×
  depth) -- per (state, agent) units, rejected states excluded and counted, then per cell:
  attempted states, root causes, workflows, attempts, the funnel counts, the pass@1 and pass@k
  sums (unbiased estimator, product form) and the state counts of the depth slice. No interval.

Every function returns a polars DataFrame with the columns of :data:`GOAL_COLUMNS` or
:data:`TAKEOVER_COLUMNS`; :func:`goal_counts_of_summary` and :func:`takeover_counts_of_summary`
turn recoverylab's summaries into the same frames, so the engines can be compared exactly (the
integer counts) or within 1e-9 (the two float sums of takeover).

No validation is done here (recoverylab checks contracts, keys and consistency between tables).
"""

from __future__ import annotations

from pathlib import Path

#: Failure reasons of goal.score, in precedence order (kept in sync with recoverylab.goal.REASONS).
REASONS = (
    "unsupported_attribution",
    "no_copy_used",
    "no_version_used",
    "decoy_or_foreign_source",
    "undisclosed_version",
    "answered_dead_end",
    "wrong_diagnosis",
    "missing_help_request",
    "policy_violation",
)
GOAL_COLUMNS = (
    "regime",
    "n",
    "n_clusters",
    "successes",
    "gp",
    "compliant",
    "steps",
    *(f"fail_{r}" for r in REASONS),
)
GOAL_TABLES = ("cases", "resources", "episodes", "steps", "citations")
#: Columns each goal table contributes to the scoring (the scan floor reads these).
GOAL_NEEDED = {
    "cases": ("case_id", "regime", "barrier", "needs_user_help", "goal_id"),
    "resources": ("case_id", "resource_id", "relation", "reachable"),
    "episodes": ("episode_id", "case_id", "answer", "version_claim", "diagnosis", "requested_user"),
    "steps": ("episode_id", "resource_id", "prohibited"),
    "citations": ("episode_id", "resource_id"),
}
FUNNEL = (
    "n_aware",
    "n_fixed",
    "n_derived",
    "n_passed",
    "aware_fixed",
    "aware_fixed_derived",
    "aware_fixed_derived_passed",
    "off_funnel_fixed",
    "off_funnel_derived",
    "off_funnel_passed",
)
TAKEOVER_INTS = (
    "eligible_states",
    "rejected_states",
    "rejected_replay_mismatch",
    "rejected_missing_expected",
    "attempted_states",
    "root_causes",
    "workflows",
    "attempts",
    "excluded_attempts",
    *FUNNEL,
)
TAKEOVER_FLOATS = ("pass_at_1", "pass_at_k")
TAKEOVER_COLUMNS = ("agent", "depth", *TAKEOVER_INTS, *TAKEOVER_FLOATS)
TAKEOVER_NEEDED = {
    "states": ("state_id", "workflow_id", "root_cause_id", "depth", "replay_ok", "expected_ok"),
    "attempts": ("state_id", "agent", "aware", "root_cause_fixed", "derived_fixed", "passed"),
}
K = 3


def _files(folder: Path, table: str) -> str:
    files = sorted((folder / table).glob("*.parquet"))
    return "[" + ", ".join(f"'{f}'" for f in files) + "]"


# --------------------------------------------------------------------------------------------
# goal
# --------------------------------------------------------------------------------------------

_GOAL_SQL = """
WITH cs AS (SELECT case_id, regime, barrier, needs_user_help, goal_id FROM read_parquet({cases})),
rs AS (SELECT case_id, resource_id, relation, reachable FROM read_parquet({resources})),
ep AS (SELECT episode_id, case_id, answer, version_claim, diagnosis, requested_user
       FROM read_parquet({episodes})),
st AS (SELECT episode_id, resource_id, prohibited FROM read_parquet({steps})),
ct AS (SELECT episode_id, resource_id FROM read_parquet({citations})),
per_case AS (
    SELECT cs.*, coalesce(r.n_copies, 0) AS n_copies, coalesce(r.n_versions, 0) AS n_versions
    FROM cs LEFT JOIN (
        SELECT case_id,
               count(*) FILTER (WHERE relation = 'copy' AND reachable) AS n_copies,
               count(*) FILTER (WHERE relation = 'other_version' AND reachable) AS n_versions
        FROM rs GROUP BY case_id
    ) r USING (case_id)
),
per_step AS (
    SELECT episode_id, count(*) AS steps, count(*) FILTER (WHERE prohibited) AS n_prohibited
    FROM st GROUP BY episode_id
),
visited AS (SELECT DISTINCT episode_id, resource_id FROM st WHERE resource_id IS NOT NULL),
cited AS (
    SELECT ct.episode_id, r.relation,
           (v.episode_id IS NOT NULL AND coalesce(r.reachable, FALSE)) AS supported
    FROM ct JOIN ep e ON ct.episode_id = e.episode_id
    LEFT JOIN rs r ON r.case_id = e.case_id AND r.resource_id = ct.resource_id
    LEFT JOIN visited v ON v.episode_id = ct.episode_id AND v.resource_id = ct.resource_id
),
per_cit AS (
    SELECT episode_id, count(*) AS n_cited,
           count(*) FILTER (WHERE NOT supported) AS n_unsupported,
           count(*) FILTER (WHERE supported AND relation = 'copy') AS n_cited_copy,
           count(*) FILTER (WHERE supported AND relation = 'other_version') AS n_cited_version
    FROM cited GROUP BY episode_id
),
scored AS (
    SELECT e.answer, e.version_claim, e.diagnosis, e.requested_user,
           pc.regime, pc.goal_id, pc.barrier, pc.needs_user_help,
           coalesce(ps.steps, 0) AS steps, coalesce(ps.n_prohibited, 0) AS n_prohibited,
           coalesce(ci.n_cited, 0) AS n_cited, coalesce(ci.n_unsupported, 0) AS n_unsupported,
           coalesce(ci.n_cited_copy, 0) AS n_cited_copy,
           coalesce(ci.n_cited_version, 0) AS n_cited_version,
           CASE WHEN pc.n_copies > 0 THEN 'copy' WHEN pc.n_versions > 0 THEN 'versions_only'
                ELSE 'dead_end' END AS branch
    FROM ep e JOIN per_case pc ON e.case_id = pc.case_id
    LEFT JOIN per_step ps ON ps.episode_id = e.episode_id
    LEFT JOIN per_cit ci ON ci.episode_id = e.episode_id
),
reasoned AS (
    SELECT *, CASE
        WHEN branch = 'copy' THEN CASE WHEN n_cited_copy > 0 THEN NULL ELSE 'no_copy_used' END
        WHEN branch = 'versions_only' THEN CASE
            WHEN n_cited = 0 THEN 'no_version_used'
            WHEN n_cited_version < n_cited THEN 'decoy_or_foreign_source'
            WHEN coalesce(version_claim, '') <> 'other' THEN 'undisclosed_version' END
        ELSE CASE
            WHEN answer IS NOT NULL THEN 'answered_dead_end'
            WHEN NOT coalesce(diagnosis = barrier, FALSE) THEN 'wrong_diagnosis'
            WHEN needs_user_help AND NOT requested_user THEN 'missing_help_request' END
        END AS branch_reason
    FROM scored
),
final AS (
    SELECT regime, goal_id, steps,
           n_unsupported = 0 AND branch_reason IS NULL AS gp, n_prohibited = 0 AS compliant,
           CASE WHEN n_unsupported > 0 THEN 'unsupported_attribution'
                WHEN branch_reason IS NOT NULL THEN branch_reason
                WHEN n_prohibited > 0 THEN 'policy_violation' END AS reason
    FROM reasoned
)
SELECT regime, count(*) AS n, count(DISTINCT goal_id) AS n_clusters,
       count(*) FILTER (WHERE gp AND compliant) AS successes,
       count(*) FILTER (WHERE gp) AS gp, count(*) FILTER (WHERE compliant) AS compliant,
       sum(steps) AS steps,
       {fails}
FROM final GROUP BY regime
"""


def goal_duckdb(folder: Path) -> object:
    """GP/TS counts per regime in one DuckDB query over the five goal tables."""
    import duckdb

    fails = ",\n       ".join(
        f"count(*) FILTER (WHERE reason = '{r}') AS fail_{r}" for r in REASONS
    )
    sql = _GOAL_SQL.format(fails=fails, **{t: _files(folder, t) for t in GOAL_TABLES})
    with duckdb.connect() as con:
        return _goal_frame(con.sql(sql).pl())


def goal_pandas(folder: Path) -> object:
    """The same counts in idiomatic pandas (merges and group-bys)."""
    import numpy as np
    import pandas as pd

    read = {
        t: pd.read_parquet(sorted((folder / t).glob("*.parquet")), columns=list(c))
        for t, c in GOAL_NEEDED.items()
    }
    cases, res, eps, st, ct = (read[t] for t in GOAL_TABLES)
    reach = (
        res.assign(
            n_copies=(res["relation"] == "copy") & res["reachable"],
            n_versions=(res["relation"] == "other_version") & res["reachable"],
        )
        .groupby("case_id", as_index=False)[["n_copies", "n_versions"]]
        .sum()
    )
    per_case = cases.merge(reach, on="case_id", how="left").fillna({"n_copies": 0, "n_versions": 0})
    per_step = st.groupby("episode_id", as_index=False).agg(
        steps=("prohibited", "size"), n_prohibited=("prohibited", "sum")
    )
    visited = st.loc[st["resource_id"].notna(), ["episode_id", "resource_id"]].drop_duplicates()
    visited["visited"] = True
    cited = (
        ct.merge(eps[["episode_id", "case_id"]], on="episode_id")
        .merge(res, on=["case_id", "resource_id"], how="left")
        .merge(visited, on=["episode_id", "resource_id"], how="left")
    )
    ok = cited["visited"].eq(True) & cited["reachable"].eq(True)
    cited = cited.assign(
        n_cited=1,
        n_unsupported=~ok,
        n_cited_copy=ok & cited["relation"].eq("copy"),
        n_cited_version=ok & cited["relation"].eq("other_version"),
    )
    per_cit = cited.groupby("episode_id", as_index=False)[
        ["n_cited", "n_unsupported", "n_cited_copy", "n_cited_version"]
    ].sum()
    e = (
        eps.merge(per_case, on="case_id")
        .merge(per_step, on="episode_id", how="left")
        .merge(per_cit, on="episode_id", how="left")
    )
    zero = ["steps", "n_prohibited", "n_cited", "n_unsupported", "n_cited_copy", "n_cited_version"]
    e[zero] = e[zero].fillna(0)
    copy, versions = e["n_copies"] > 0, (e["n_copies"] == 0) & (e["n_versions"] > 0)
    dead = ~copy & ~versions
    diagnosed = (e["diagnosis"] == e["barrier"]) & e["diagnosis"].notna()
    conditions = [
        e["n_unsupported"] > 0,
        copy & (e["n_cited_copy"] == 0),
        versions & (e["n_cited"] == 0),
        versions & (e["n_cited_version"] < e["n_cited"]),
        versions & e["version_claim"].fillna("").ne("other"),
        dead & e["answer"].notna(),
        dead & ~diagnosed,
        dead & e["needs_user_help"].eq(True) & e["requested_user"].eq(False),
    ]
    reason = np.select(conditions, list(REASONS[:-1]), default="")
    gp = reason == ""
    compliant = (e["n_prohibited"] == 0).to_numpy()
    reason = np.where(gp & ~compliant, REASONS[-1], reason)
    flags = pd.DataFrame(
        {
            "regime": e["regime"],
            "n": 1,
            "successes": gp & compliant,
            "gp": gp,
            "compliant": compliant,
            "steps": e["steps"],
            **{f"fail_{r}": reason == r for r in REASONS},
        }
    )
    out = flags.groupby("regime", as_index=False).sum()
    clusters = e.groupby("regime")["goal_id"].nunique().rename("n_clusters").reset_index()
    import polars as pl

    return _goal_frame(pl.from_pandas(out.merge(clusters, on="regime")))


def _goal_frame(frame: object) -> object:
    import polars as pl

    return frame.select(  # type: ignore[attr-defined]
        pl.col("regime").cast(pl.String), *(pl.col(c).cast(pl.Int64) for c in GOAL_COLUMNS[1:])
    ).sort("regime")


def goal_counts_of_summary(summary: object) -> object:
    """The integer counts behind recoverylab's ``goal.summarize`` rates (exact: rate × n)."""
    import polars as pl

    def count(rate: str) -> pl.Expr:
        return (pl.col(rate) * pl.col("n")).round(0)

    frame = summary.with_columns(  # type: ignore[attr-defined]
        count("gp_rate").alias("gp"),
        count("compliance_rate").alias("compliant"),
        count("mean_steps").alias("steps"),
    )
    return _goal_frame(frame)


# --------------------------------------------------------------------------------------------
# takeover
# --------------------------------------------------------------------------------------------


def _pass_at_k_sql(k: int) -> str:
    factors = " * ".join(
        f"(greatest(repeats - n_passed - {i}, 0)::DOUBLE / (repeats - {i}))" for i in range(k)
    )
    return f"CASE WHEN repeats >= {k} THEN 1.0 - {factors} END"


_TAKEOVER_SQL = """
WITH st AS (SELECT state_id, workflow_id, root_cause_id, depth, replay_ok, expected_ok
            FROM read_parquet({states})),
units AS (
    SELECT state_id, agent, count(*) AS repeats,
        count(*) FILTER (WHERE passed) AS n_passed,
        count(*) FILTER (WHERE aware) AS n_aware,
        count(*) FILTER (WHERE root_cause_fixed) AS n_fixed,
        count(*) FILTER (WHERE derived_fixed) AS n_derived,
        count(*) FILTER (WHERE aware AND root_cause_fixed) AS aware_fixed,
        count(*) FILTER (WHERE aware AND root_cause_fixed AND derived_fixed) AS aware_fixed_derived,
        count(*) FILTER (WHERE aware AND root_cause_fixed AND derived_fixed AND passed)
            AS aware_fixed_derived_passed,
        count(*) FILTER (WHERE root_cause_fixed AND NOT aware) AS off_funnel_fixed,
        count(*) FILTER (WHERE derived_fixed AND NOT (aware AND root_cause_fixed))
            AS off_funnel_derived,
        count(*) FILTER (WHERE passed AND NOT (aware AND root_cause_fixed AND derived_fixed))
            AS off_funnel_passed
    FROM read_parquet({attempts})
    GROUP BY state_id, agent
),
scored AS (
    SELECT u.*, s.workflow_id, s.root_cause_id, s.depth,
           (s.replay_ok AND s.expected_ok) AS ok,
           u.n_passed::DOUBLE / u.repeats AS pass_at_1, {pass_at_k} AS pass_at_k
    FROM units u JOIN st s ON u.state_id = s.state_id
),
cells AS (
    SELECT agent, depth,
        count(*) FILTER (WHERE ok) AS attempted_states,
        count(DISTINCT root_cause_id) FILTER (WHERE ok) AS root_causes,
        count(DISTINCT workflow_id) FILTER (WHERE ok) AS workflows,
        coalesce(sum(repeats) FILTER (WHERE ok), 0) AS attempts,
        coalesce(sum(repeats) FILTER (WHERE NOT ok), 0) AS excluded_attempts,
        {funnel},
        sum(pass_at_1) FILTER (WHERE ok) / count(*) FILTER (WHERE ok) AS pass_at_1,
        sum(pass_at_k) FILTER (WHERE ok) / count(*) FILTER (WHERE ok) AS pass_at_k
    FROM scored GROUP BY agent, depth
),
slices AS (
    SELECT depth,
        count(*) FILTER (WHERE replay_ok AND expected_ok) AS eligible_states,
        count(*) FILTER (WHERE NOT (replay_ok AND expected_ok)) AS rejected_states,
        count(*) FILTER (WHERE NOT replay_ok) AS rejected_replay_mismatch,
        count(*) FILTER (WHERE replay_ok AND NOT expected_ok) AS rejected_missing_expected
    FROM st GROUP BY depth
)
SELECT * FROM cells LEFT JOIN slices USING (depth)
"""


def takeover_duckdb(folder: Path) -> object:
    """EAR, pass@1, pass@k and funnel counts per agent × depth in one DuckDB query."""
    import duckdb

    funnel = ",\n        ".join(f"coalesce(sum({c}) FILTER (WHERE ok), 0) AS {c}" for c in FUNNEL)
    sql = _TAKEOVER_SQL.format(
        states=_files(folder, "states"),
        attempts=_files(folder, "attempts"),
        pass_at_k=_pass_at_k_sql(K),
        funnel=funnel,
    )
    with duckdb.connect() as con:
        return _takeover_frame(con.sql(sql).pl())


def takeover_pandas(folder: Path) -> object:
    """The same counts in idiomatic pandas."""
    import numpy as np
    import pandas as pd
    import polars as pl

    states = pd.read_parquet(
        sorted((folder / "states").glob("*.parquet")), columns=list(TAKEOVER_NEEDED["states"])
    )
    att = pd.read_parquet(
        sorted((folder / "attempts").glob("*.parquet")), columns=list(TAKEOVER_NEEDED["attempts"])
    )
    a, f, d, p = (att[c] for c in ("aware", "root_cause_fixed", "derived_fixed", "passed"))
    flags = pd.DataFrame(
        {
            "state_id": att["state_id"],
            "agent": att["agent"],
            "repeats": 1,
            "n_passed": p,
            "n_aware": a,
            "n_fixed": f,
            "n_derived": d,
            "aware_fixed": a & f,
            "aware_fixed_derived": a & f & d,
            "aware_fixed_derived_passed": a & f & d & p,
            "off_funnel_fixed": f & ~a,
            "off_funnel_derived": d & ~(a & f),
            "off_funnel_passed": p & ~(a & f & d),
        }
    )
    del att
    units = flags.groupby(["state_id", "agent"], as_index=False).sum()
    units = units.merge(states, on="state_id")
    units["ok"] = units["replay_ok"] & units["expected_ok"]
    n, c = units["repeats"].to_numpy(float), units["n_passed"].to_numpy(float)
    miss = np.ones(len(units))
    for i in range(K):
        miss *= np.clip(n - c - i, 0, None) / (n - i)
    units["pass_at_1"] = c / n
    units["pass_at_k"] = np.where(n >= K, 1.0 - miss, np.nan)
    scored = units[units["ok"]]
    sums = ["repeats", *FUNNEL, "pass_at_1", "pass_at_k"]
    cells = scored.groupby(["agent", "depth"]).agg(
        attempted_states=("state_id", "size"),
        root_causes=("root_cause_id", "nunique"),
        workflows=("workflow_id", "nunique"),
        **{c: (c, "sum") for c in sums},
    )
    cells = cells.rename(columns={"repeats": "attempts"})
    cells["pass_at_1"] /= cells["attempted_states"]
    cells["pass_at_k"] /= cells["attempted_states"]
    excluded = units[~units["ok"]].groupby(["agent", "depth"])["repeats"].sum()
    all_cells = units[["agent", "depth"]].drop_duplicates().set_index(["agent", "depth"])
    cells = all_cells.join(cells).join(excluded.rename("excluded_attempts"))
    cells = cells.fillna({c: 0 for c in cells.columns if c not in TAKEOVER_FLOATS}).reset_index()
    ok = states["replay_ok"] & states["expected_ok"]
    slices = (
        pd.DataFrame(
            {
                "depth": states["depth"],
                "eligible_states": ok,
                "rejected_states": ~ok,
                "rejected_replay_mismatch": ~states["replay_ok"],
                "rejected_missing_expected": states["replay_ok"] & ~states["expected_ok"],
            }
        )
        .groupby("depth", as_index=False)
        .sum()
    )
    return _takeover_frame(pl.from_pandas(cells.merge(slices, on="depth", how="left")))


def _takeover_frame(frame: object) -> object:
    import polars as pl

    return frame.select(  # type: ignore[attr-defined]
        pl.col("agent").cast(pl.String),
        pl.col("depth").cast(pl.Int64),
        *(pl.col(c).fill_null(0).cast(pl.Int64) for c in TAKEOVER_INTS),
        *(pl.col(c).cast(pl.Float64).fill_nan(None) for c in TAKEOVER_FLOATS),
    ).sort("agent", "depth")


def takeover_counts_of_summary(summary: object) -> object:
    """The counts of recoverylab's ``takeover.summarize`` in :data:`TAKEOVER_COLUMNS` form."""
    return _takeover_frame(summary)


# --------------------------------------------------------------------------------------------
# scan floors and the comparison
# --------------------------------------------------------------------------------------------


def scan_floor(folder: Path, needed: dict[str, tuple[str, ...]]) -> int:
    """Polars streaming scan of the needed columns of every table, trivial aggregation."""
    import polars as pl

    frames = []
    for table, columns in needed.items():
        lazy = pl.scan_parquet(sorted((folder / table).glob("*.parquet")))
        schema = lazy.collect_schema()
        touch = [
            pl.col(c).str.len_bytes().sum()
            if schema[c] == pl.String
            else pl.col(c).cast(pl.Int64).sum()
            for c in columns
        ]
        frames.append(lazy.select(pl.len(), *touch))
    done = pl.collect_all(frames, engine="streaming")
    return int(sum(f["len"].item() for f in done))


def compare_frames(reference: object, other: object, floats: tuple[str, ...] = ()) -> str | None:
    """Return a description of the first difference (None: integer columns equal, floats ≤ 1e-9)."""
    import polars as pl

    ints = [c for c in reference.columns if c not in floats]  # type: ignore[attr-defined]
    if not reference.select(ints).equals(other.select(ints)):  # type: ignore[attr-defined]
        diff = pl.concat(
            [
                reference.select(ints).join(other.select(ints), on=ints, how="anti"),  # type: ignore[attr-defined]
                other.select(ints).join(reference.select(ints), on=ints, how="anti"),  # type: ignore[attr-defined]
            ]
        )
        return f"integer counts differ:\n{diff}"
    for column in floats:
        a, b = reference[column], other[column]  # type: ignore[index]
        gap = ((a - b).abs() / b.abs().clip(lower_bound=1e-300)).fill_null(0.0).max()
        if a.null_count() != b.null_count() or (gap is not None and gap > 1e-9):
            return f"{column} differs (largest relative gap {gap})"
    return None
