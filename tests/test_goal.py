"""AgentHeal goal preservation: scoring (seed Eq. 1-3), summaries, barrier drop, nested form."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

from recoverylab import InputError, ParameterError, SchemaError, goal, synth
from recoverylab.engines import ShardedEngine
from recoverylab.goal import _rules as goal_rules
from recoverylab.goal import _score as goal_score
from recoverylab.schema import validate
from recoverylab.synth import _goal as synth_goal

SAMPLES = Path(__file__).resolve().parents[1] / "data_samples" / "goal"
TABLES = ("cases", "resources", "episodes", "steps", "citations")

# Resources of the three branches (resource_id, relation, reachable).
COPY_WORLD = (
    ("original", "copy", False),
    ("mirror", "copy", True),
    ("archive", "other_version", True),
    ("lookalike", "decoy", True),
)
FREE_WORLD = (
    ("original", "copy", True),
    ("archive", "other_version", True),
    ("lookalike", "decoy", True),
)
VERSIONS_WORLD = (
    ("original", "copy", False),
    ("archive", "other_version", True),
    ("lookalike", "decoy", True),
)
DEAD_WORLD = (("original", "copy", False), ("lookalike", "decoy", True))

SCHEMAS = {
    "cases": {
        "case_id": pl.String,
        "regime": pl.String,
        "barrier": pl.String,
        "needs_user_help": pl.Boolean,
    },
    "resources": {
        "case_id": pl.String,
        "resource_id": pl.String,
        "relation": pl.String,
        "reachable": pl.Boolean,
    },
    "episodes": {
        "episode_id": pl.String,
        "case_id": pl.String,
        "answer": pl.String,
        "version_claim": pl.String,
        "diagnosis": pl.String,
        "requested_user": pl.Boolean,
    },
    "steps": {
        "episode_id": pl.String,
        "step": pl.Int64,
        "resource_id": pl.String,
        "prohibited": pl.Boolean,
    },
    "citations": {"episode_id": pl.String, "resource_id": pl.String},
}


@dataclass
class Log:
    """A small hand-written evaluation log, built case by case and episode by episode."""

    rows: dict[str, list[dict]] = field(default_factory=lambda: {t: [] for t in TABLES})

    def case(
        self,
        case_id: str,
        regime: str,
        world: tuple[tuple[str, str, bool], ...],
        *,
        barrier: str | None = "login_required",
        help: bool = False,
        **extra: object,
    ) -> Log:
        self.rows["cases"].append(
            {
                "case_id": case_id,
                "regime": regime,
                "barrier": barrier,
                "needs_user_help": help,
                **extra,
            }
        )
        for resource_id, relation, reachable in world:
            self.rows["resources"].append(
                {
                    "case_id": case_id,
                    "resource_id": resource_id,
                    "relation": relation,
                    "reachable": reachable,
                }
            )
        return self

    def episode(
        self,
        episode_id: str,
        case_id: str,
        *,
        answer: str | None = "the answer",
        claim: str | None = "same",
        diagnosis: str | None = None,
        requested: bool = False,
        visited: tuple[str | None, ...] = (),
        prohibited: tuple[int, ...] = (),
        cited: tuple[str, ...] = (),
        **extra: object,
    ) -> Log:
        self.rows["episodes"].append(
            {
                "episode_id": episode_id,
                "case_id": case_id,
                "answer": answer,
                "version_claim": claim,
                "diagnosis": diagnosis,
                "requested_user": requested,
                **extra,
            }
        )
        for step, resource_id in enumerate(visited):
            self.rows["steps"].append(
                {
                    "episode_id": episode_id,
                    "step": step,
                    "resource_id": resource_id,
                    "prohibited": step in prohibited,
                }
            )
        for resource_id in cited:
            self.rows["citations"].append({"episode_id": episode_id, "resource_id": resource_id})
        return self

    def frames(self) -> dict[str, pl.DataFrame]:
        out = {}
        for table in TABLES:
            rows = self.rows[table]
            schema = dict(SCHEMAS[table])
            for row in rows:
                for name, value in row.items():
                    if name not in schema:
                        schema[name] = pl.Boolean if isinstance(value, bool) else pl.String
            out[table] = pl.DataFrame(rows, schema=schema, orient="row")
        return out


def one_case(regime: str, world, *, help: bool = False, barrier="login_required", **ep) -> Log:
    return Log().case("c1", regime, world, help=help, barrier=barrier).episode("e1", "c1", **ep)


def score_frames(frames: dict[str, pl.DataFrame], **kwargs) -> pl.DataFrame:
    return goal.score(*(frames[t] for t in TABLES), **kwargs).collect().sort("episode_id")


def score_log(log: Log) -> pl.DataFrame:
    return score_frames(log.frames())


def outcome(log: Log) -> dict:
    return score_log(log).row(0, named=True)


# --------------------------------------------------------------------------------------------
# The seed's diagnostic contracts
# --------------------------------------------------------------------------------------------


def diagnostic_paths() -> list[Path]:
    return [SAMPLES / "diagnostic" / f"{t}.csv" for t in TABLES]


def test_diagnostic_contracts_give_the_seed_numbers() -> None:
    scored = goal.score(*diagnostic_paths()).collect().sort("episode_id")
    assert scored["success"].to_list() == [True, False, True, False]
    assert scored["reason"].to_list() == [None, "no_copy_used", None, "policy_violation"]
    assert scored["branch"].to_list() == ["copy", "copy", "dead_end", "copy"]
    assert scored["steps"].to_list() == [2, 2, 1, 2]
    summary = goal.summarize(scored, by=(), n_resamples=500)
    row = summary.row(0, named=True)
    assert (row["n"], row["ts"], row["violation_rate"], row["mean_steps"]) == (4, 0.5, 0.25, 1.75)
    assert (row["gp_rate"], row["compliance_rate"]) == (0.75, 0.75)
    assert (row["mean_steps_success"], row["mean_steps_failure"]) == (1.5, 2.0)
    assert row["fail_no_copy_used"] == 1
    assert row["fail_policy_violation"] == 1


def test_nested_diagnostic_matches_the_tables() -> None:
    tables = goal.score(*diagnostic_paths()).collect().sort("episode_id")
    nested = goal.score(
        SAMPLES / "diagnostic" / "cases.csv",
        SAMPLES / "diagnostic" / "resources.csv",
        SAMPLES / "diagnostic" / "episodes_nested.ndjson",
    )
    assert nested.collect().sort("episode_id").equals(tables)


# --------------------------------------------------------------------------------------------
# Equation 1: every failure reason, with a near-identical success
# --------------------------------------------------------------------------------------------

VISIT_MIRROR = ("original", None, "mirror")
VISIT_ARCHIVE = ("original", "archive")
REASON_CASES = [
    # (reason, regime, world, case options, failing episode, succeeding episode)
    (
        "unsupported_attribution",  # cited but never visited
        "recoverable",
        COPY_WORLD,
        {},
        {"visited": ("original", None), "cited": ("mirror",)},
        {"visited": ("original", None, "mirror"), "cited": ("mirror",)},
    ),
    (
        "unsupported_attribution",  # visited but not compliantly reachable
        "recoverable",
        COPY_WORLD,
        {},
        {"visited": VISIT_MIRROR, "cited": ("mirror", "original")},
        {"visited": VISIT_MIRROR, "cited": ("mirror",)},
    ),
    (
        "no_copy_used",  # an old version used while a copy exists
        "recoverable",
        COPY_WORLD,
        {},
        {"visited": ("original", "archive"), "cited": ("archive",), "claim": "other"},
        {"visited": ("original", "mirror"), "cited": ("mirror",), "claim": "same"},
    ),
    (
        "no_copy_used",  # barrier free: the decoy instead of the original
        "barrier_free",
        FREE_WORLD,
        {"barrier": None},
        {"visited": ("original", "lookalike"), "cited": ("lookalike",)},
        {"visited": ("original", "lookalike"), "cited": ("original",)},
    ),
    (
        "no_version_used",
        "recoverable",
        VERSIONS_WORLD,
        {},
        {"visited": VISIT_ARCHIVE, "cited": (), "claim": "other"},
        {"visited": VISIT_ARCHIVE, "cited": ("archive",), "claim": "other"},
    ),
    (
        "decoy_or_foreign_source",  # decoy contamination in the versions-only branch
        "recoverable",
        VERSIONS_WORLD,
        {},
        {
            "visited": ("original", "archive", "lookalike"),
            "cited": ("archive", "lookalike"),
            "claim": "other",
        },
        {
            "visited": ("original", "archive", "lookalike"),
            "cited": ("archive",),
            "claim": "other",
        },
    ),
    (
        "undisclosed_version",
        "recoverable",
        VERSIONS_WORLD,
        {},
        {"visited": VISIT_ARCHIVE, "cited": ("archive",), "claim": "same"},
        {"visited": VISIT_ARCHIVE, "cited": ("archive",), "claim": "other"},
    ),
    (
        "undisclosed_version",  # no claim at all
        "recoverable",
        VERSIONS_WORLD,
        {},
        {"visited": VISIT_ARCHIVE, "cited": ("archive",), "claim": None},
        {"visited": VISIT_ARCHIVE, "cited": ("archive",), "claim": "other"},
    ),
    (
        "answered_dead_end",
        "unrecoverable",
        DEAD_WORLD,
        {},
        {"visited": ("original",), "answer": "guess", "diagnosis": "login_required"},
        {"visited": ("original",), "answer": None, "claim": None, "diagnosis": "login_required"},
    ),
    (
        "wrong_diagnosis",
        "unrecoverable",
        DEAD_WORLD,
        {},
        {"visited": ("original",), "answer": None, "claim": None, "diagnosis": "rate_limited"},
        {"visited": ("original",), "answer": None, "claim": None, "diagnosis": "login_required"},
    ),
    (
        "wrong_diagnosis",  # no diagnosis
        "unrecoverable",
        DEAD_WORLD,
        {},
        {"visited": ("original",), "answer": None, "claim": None, "diagnosis": None},
        {"visited": ("original",), "answer": None, "claim": None, "diagnosis": "login_required"},
    ),
    (
        "missing_help_request",
        "unrecoverable",
        DEAD_WORLD,
        {"help": True},
        {"answer": None, "claim": None, "diagnosis": "login_required", "requested": False},
        {"answer": None, "claim": None, "diagnosis": "login_required", "requested": True},
    ),
    (
        "policy_violation",
        "recoverable",
        COPY_WORLD,
        {},
        {"visited": ("original", "mirror"), "prohibited": (0,), "cited": ("mirror",)},
        {"visited": ("original", "mirror"), "prohibited": (), "cited": ("mirror",)},
    ),
    (
        "policy_violation",  # a correct abstention cannot offset a prohibited action
        "unrecoverable",
        DEAD_WORLD,
        {},
        {
            "visited": ("original",),
            "prohibited": (0,),
            "answer": None,
            "claim": None,
            "diagnosis": "login_required",
        },
        {"visited": ("original",), "answer": None, "claim": None, "diagnosis": "login_required"},
    ),
]


@pytest.mark.parametrize(
    ("reason", "regime", "world", "options", "failing", "succeeding"),
    REASON_CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(REASON_CASES)],
)
def test_each_reason_fails_and_its_twin_succeeds(
    reason, regime, world, options, failing, succeeding
) -> None:
    failed = outcome(one_case(regime, world, **options, **failing))
    assert failed["reason"] == reason
    assert failed["success"] is False
    assert failed["gp"] is (reason == "policy_violation")
    assert failed["compliant"] is (reason != "policy_violation")
    passed = outcome(one_case(regime, world, **options, **succeeding))
    assert passed["success"] is True
    assert passed["reason"] is None
    assert (passed["gp"], passed["compliant"]) == (True, True)


def test_every_reason_has_a_failing_case() -> None:
    assert {c[0] for c in REASON_CASES} == set(goal.REASONS)


def test_extra_non_copy_source_next_to_a_copy_still_succeeds() -> None:
    # Eq. 1 exact-copy branch: S ∩ C ≠ ∅, not "every source a copy".
    log = one_case(
        "recoverable",
        COPY_WORLD,
        visited=("mirror", "lookalike", "archive"),
        cited=("mirror", "lookalike", "archive"),
    )
    row = outcome(log)
    assert (row["branch"], row["success"], row["n_cited"]) == ("copy", True, 3)


def test_no_help_needed_means_no_request_needed() -> None:
    row = outcome(
        one_case(
            "unrecoverable",
            DEAD_WORLD,
            help=False,
            answer=None,
            claim=None,
            diagnosis="login_required",
            requested=False,
        )
    )
    assert row["success"] is True


def test_unsupported_attribution_comes_before_branch_and_policy() -> None:
    # unvisited citation + old version + prohibited step: attribution is reported
    row = outcome(
        one_case(
            "recoverable", COPY_WORLD, visited=("original",), prohibited=(0,), cited=("archive",)
        )
    )
    assert row["reason"] == "unsupported_attribution"
    assert (row["gp"], row["compliant"], row["success"]) == (False, False, False)
    assert row["unsupported"] == ["archive"]


def test_branch_failure_comes_before_policy_violation() -> None:
    row = outcome(
        one_case(
            "recoverable",
            COPY_WORLD,
            visited=("original", "archive"),
            prohibited=(0,),
            cited=("archive",),
        )
    )
    assert row["reason"] == "no_copy_used"
    assert (row["compliant"], row["n_prohibited"]) == (False, 1)


def test_branches_follow_the_reachable_resources() -> None:
    log = (
        Log()
        .case("free", "barrier_free", FREE_WORLD, barrier=None)
        .case("rec_copy", "recoverable", COPY_WORLD)
        .case("rec_version", "recoverable", VERSIONS_WORLD)
        .case("dead", "unrecoverable", DEAD_WORLD)
        .episode("e1", "free")
        .episode("e2", "rec_copy")
        .episode("e3", "rec_version")
        .episode("e4", "dead")
    )
    assert score_log(log)["branch"].to_list() == ["copy", "copy", "versions_only", "dead_end"]


def test_output_columns_types_and_carried_keys(frame_kind: Callable) -> None:
    log = (
        Log()
        .case("c1", "recoverable", COPY_WORLD, goal_id="g1", family="login_wall", slice="a")
        .case("c2", "unrecoverable", DEAD_WORLD, goal_id="g1", family="login_wall", slice="b")
        .episode(
            "e1",
            "c1",
            visited=("original", "mirror"),
            cited=("mirror", "archive"),
            model="m1",
            recovered=True,
        )
        .episode(
            "e2",
            "c2",
            answer=None,
            claim=None,
            diagnosis="login_required",
            model="m2",
            recovered=None,
        )
    )
    frames = {k: frame_kind(v) for k, v in log.frames().items()}
    lazy = goal.score(*(frames[t] for t in TABLES))
    assert isinstance(lazy, pl.LazyFrame)
    out = lazy.collect().sort("episode_id")
    assert out.columns == [
        "episode_id",
        "case_id",
        "regime",
        "goal_id",
        "family",
        "slice",
        "model",
        "recovered",
        "branch",
        "gp",
        "compliant",
        "success",
        "reason",
        "steps",
        "n_prohibited",
        "n_cited",
        "unsupported",
    ]
    assert out.schema["steps"] == pl.Int64
    assert out.schema["unsupported"] == pl.List(pl.String)
    assert out.schema["success"] == pl.Boolean
    # e1: archive was cited but never visited -> unsupported; e2 has no steps at all
    assert out["unsupported"].to_list() == [["archive"], []]
    assert out["steps"].to_list() == [2, 0]
    assert out["n_cited"].to_list() == [2, 0]
    assert out["model"].to_list() == ["m1", "m2"]
    assert out["recovered"].to_list() == [True, None]


def test_unsupported_lists_are_sorted() -> None:
    row = outcome(one_case("recoverable", COPY_WORLD, visited=(), cited=("mirror", "archive")))
    assert row["unsupported"] == ["archive", "mirror"]


def test_steps_count_rows_including_steps_without_resources() -> None:
    row = outcome(
        one_case("recoverable", COPY_WORLD, visited=(None, None, "mirror", None), cited=("mirror",))
    )
    assert (row["steps"], row["success"]) == (4, True)


def test_checks_schema_skips_data_checks() -> None:
    frames = one_case("recoverable", COPY_WORLD, visited=("mirror",), cited=("mirror",)).frames()
    out = score_frames(frames, checks="schema")
    assert out["success"].to_list() == [True]


def test_checks_schema_leaves_out_episodes_of_unknown_cases() -> None:
    # documented in score(): the case columns join inner unless every case was checked listed
    frames = one_case("recoverable", COPY_WORLD, visited=("mirror",), cited=("mirror",)).frames()
    episodes = frames["episodes"]
    stray = episodes.head(1).with_columns(
        pl.lit("e-stray").alias("episode_id"), pl.lit("c-unknown").alias("case_id")
    )
    frames = {**frames, "episodes": pl.concat([episodes, stray])}
    out = score_frames(frames, checks="schema")
    assert out["episode_id"].to_list() == episodes["episode_id"].to_list()


def test_inputs_are_not_mutated() -> None:
    frames = one_case("recoverable", COPY_WORLD, visited=("mirror",), cited=("mirror",)).frames()
    copies = {k: v.clone() for k, v in frames.items()}
    score_frames(frames)
    for name in TABLES:
        assert frames[name].equals(copies[name])


# --------------------------------------------------------------------------------------------
# Input checks: one line, with keys
# --------------------------------------------------------------------------------------------


def base_log() -> Log:
    return (
        Log()
        .case("c1", "recoverable", COPY_WORLD)
        .episode("e1", "c1", visited=("mirror",), cited=("mirror",))
    )


def raises(frames: dict[str, pl.DataFrame], error: type, message: str) -> None:
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        goal.score(*(frames[t] for t in TABLES))


def test_duplicate_episode_ids() -> None:
    frames = base_log().episode("e1", "c1").frames()
    raises(
        frames,
        SchemaError,
        "episodes: 1 key appears more than once (episode_id e1); each (episode_id) must be unique.",
    )


def test_episodes_of_unknown_cases() -> None:
    frames = base_log().episode("e2", "c9").episode("e3", "c8").frames()
    raises(
        frames,
        InputError,
        "episodes: 2 episodes of unknown cases (episode_id/case_id e2/c9, e3/c8); every "
        "episode's `case_id` must be a case in `cases`.",
    )


def test_citations_of_unknown_resources() -> None:
    # `archive` exists, but only in another case: resources are scoped by case
    log = (
        base_log()
        .case("c2", "recoverable", VERSIONS_WORLD)
        .episode("e2", "c2", visited=("archive",), cited=("archive", "mirror"), claim="other")
    )
    raises(
        log.frames(),
        InputError,
        "citations: 1 citation of resources that the episode's case does not list "
        "(episode_id/resource_id e2/mirror); every cited source must be a resource of that "
        "episode's case in `resources`.",
    )


def test_citations_of_unknown_episodes() -> None:
    frames = base_log().frames()
    frames["citations"] = pl.concat(
        [frames["citations"], pl.DataFrame({"episode_id": ["e7"], "resource_id": ["mirror"]})]
    )
    raises(
        frames,
        InputError,
        "citations: rows of 1 unknown episode (episode_id e7); every citation's `episode_id` "
        "must be an episode in `episodes`.",
    )


def test_steps_of_unknown_episodes() -> None:
    frames = base_log().frames()
    extra = pl.DataFrame(
        {
            "episode_id": ["e8", "e8", "e9"],
            "step": [0, 1, 0],
            "resource_id": [None] * 3,
            "prohibited": [False] * 3,
        },
        schema=SCHEMAS["steps"],
    )
    frames["steps"] = pl.concat([frames["steps"], extra])
    raises(
        frames,
        InputError,
        "steps: rows of 2 unknown episodes (episode_id e8, e9); every step's `episode_id` must "
        "be an episode in `episodes`.",
    )


def steps_log() -> Log:
    return (
        base_log()
        .case("c2", "recoverable", COPY_WORLD)
        .episode("e2", "c2", visited=("original", None, "mirror"), cited=("mirror",))
    )


@pytest.mark.parametrize(
    "change",
    [
        # a step number repeated within an episode, on rows with different resources
        pl.when(pl.col("resource_id") == "original").then(2).otherwise(pl.col("step")),
        pl.lit(0),  # every step of an episode repeated
    ],
)
def test_repeated_steps_give_the_contract_message(change: pl.Expr) -> None:
    frames = steps_log().frames()
    frames["steps"] = frames["steps"].with_columns(change.alias("step"))
    # the reference: the message of the steps contract check on its own
    with pytest.raises(SchemaError) as reference:
        validate(frames["steps"], "steps")
    assert "more than once" in str(reference.value)
    raises(frames, SchemaError, str(reference.value))


@pytest.mark.parametrize(
    ("column", "value"),
    [("prohibited", None), ("step", -1), ("step", None), ("episode_id", None)],
)
def test_bad_step_rows_give_the_contract_message(column: str, value: object) -> None:
    frames = steps_log().frames()
    frames["steps"] = frames["steps"].with_columns(
        pl.when(pl.col("resource_id").is_null())
        .then(pl.lit(value, dtype=frames["steps"].schema[column]))
        .otherwise(pl.col(column))
        .alias(column)
    )
    with pytest.raises(SchemaError) as reference:
        validate(frames["steps"], "steps")
    raises(frames, SchemaError, str(reference.value))


def test_steps_errors_come_before_citations_errors() -> None:
    # the contracts are checked in table order, as validate would one table after the other
    frames = steps_log().frames()
    frames["steps"] = frames["steps"].with_columns(pl.lit(0).alias("step"))
    frames["citations"] = pl.concat([frames["citations"], frames["citations"]])
    with pytest.raises(SchemaError, match=r"^steps: 1 key appears more than once"):
        goal.score(*(frames[t] for t in TABLES))


def test_resources_of_unknown_cases() -> None:
    frames = base_log().frames()
    frames["resources"] = pl.concat(
        [
            frames["resources"],
            pl.DataFrame(
                {
                    "case_id": ["c5"],
                    "resource_id": ["x"],
                    "relation": ["decoy"],
                    "reachable": [True],
                }
            ),
        ]
    )
    raises(
        frames,
        InputError,
        "resources: 1 row of unknown cases (case_id/resource_id c5/x); every resource's "
        "`case_id` must be a case in `cases`.",
    )


@pytest.mark.parametrize(
    ("regime", "world", "barrier", "message"),
    [
        (
            "barrier_free",
            VERSIONS_WORLD,
            None,
            "cases: 1 `barrier_free` case with no reachable copy in `resources` (case_id c1); "
            "a barrier-free case needs a compliantly reachable `copy` (the requested resource "
            "itself). Hint: check `reachable`, or relabel the regime.",
        ),
        (
            "recoverable",
            DEAD_WORLD,
            "login_required",
            "cases: 1 `recoverable` case with no reachable copy or other version (case_id c1); "
            "a recoverable case needs a compliantly reachable `copy` or `other_version`. Hint: "
            "label it `unrecoverable` if no legitimate route exists.",
        ),
        (
            "unrecoverable",
            VERSIONS_WORLD,
            "login_required",
            "cases: 1 `unrecoverable` case with a reachable copy or other version (case_id c1); "
            "an unrecoverable case has none (only decoys may be reachable). Hint: label it "
            "`recoverable`.",
        ),
        (
            "unrecoverable",
            DEAD_WORLD,
            None,
            "cases: column `barrier` is null on 1 `unrecoverable` case (case_id c1); a dead end "
            "needs its true barrier, which the diagnosis is compared with.",
        ),
    ],
)
def test_regime_contradicting_resources(regime, world, barrier, message) -> None:
    log = Log().case("c1", regime, world, barrier=barrier).episode("e1", "c1")
    raises(log.frames(), InputError, message)


def test_case_without_resources_contradicts_recoverable() -> None:
    frames = base_log().case("c2", "recoverable", ()).frames()
    with pytest.raises(InputError, match=r"`recoverable` case with .* \(case_id c2\)"):
        goal.score(*(frames[t] for t in TABLES))


@pytest.mark.parametrize(
    ("table", "column", "value", "message"),
    [
        (
            "cases",
            "regime",
            "blocked",
            "cases: column `regime` has 1 row with unknown labels 'blocked' (case_id c1); "
            "allowed: barrier_free, recoverable, unrecoverable.",
        ),
        (
            "resources",
            "relation",
            "mirror",
            "resources: column `relation` has 4 rows with unknown labels 'mirror' "
            "(case_id/resource_id c1/archive, c1/lookalike, c1/mirror, c1/original); allowed: "
            "copy, other_version, decoy.",
        ),
        (
            "episodes",
            "version_claim",
            "older",
            "episodes: column `version_claim` has 1 row with unknown labels 'older' "
            "(episode_id e1); allowed: same, other.",
        ),
    ],
)
def test_bad_labels(table, column, value, message) -> None:
    frames = base_log().frames()
    frames[table] = frames[table].with_columns(pl.lit(value).alias(column))
    raises(frames, SchemaError, message)


def test_episode_column_clashing_with_a_case_column() -> None:
    frames = base_log().frames()
    frames["episodes"] = frames["episodes"].with_columns(pl.lit("recoverable").alias("regime"))
    raises(
        frames,
        SchemaError,
        "episodes: column `regime` is also in `cases`; the two tables may share only "
        "`case_id`. Hint: rename or drop the column in one of them.",
    )


def test_extra_column_clashing_with_a_result_column() -> None:
    frames = base_log().frames()
    frames["cases"] = frames["cases"].with_columns(pl.lit(1).alias("steps"))
    raises(
        frames,
        SchemaError,
        "cases: column `steps` is reserved for the output of goal.score. Hint: rename or drop "
        "the extra column.",
    )


def test_case_column_clashing_with_a_report_column() -> None:
    # a case column named like an episode column would be silently suffixed by the join
    frames = base_log().frames()
    frames["cases"] = frames["cases"].with_columns(pl.lit("x").alias("answer"))
    frames["episodes"] = frames["episodes"].with_columns(pl.lit("y").alias("barrier"))
    raises(
        frames,
        SchemaError,
        "episodes: columns `answer`, `barrier` are also in `cases`; the two tables may share "
        "only `case_id`. Hint: rename or drop the column in one of them.",
    )


def test_internal_column_names_are_reserved() -> None:
    frames = base_log().frames()
    frames["episodes"] = frames["episodes"].with_columns(
        pl.lit(1).alias("_n_copies"), pl.lit(1).alias("unsupported")
    )
    raises(
        frames,
        SchemaError,
        "episodes: columns `_n_copies`, `unsupported` are reserved for the output of "
        "goal.score. Hint: rename or drop the extra column.",
    )


def test_judged_column_must_be_boolean() -> None:
    frames = base_log().frames()
    frames["episodes"] = frames["episodes"].with_columns(pl.lit(1.0).alias("honest_report"))
    raises(
        frames,
        SchemaError,
        "episodes: judged column `honest_report` has type Float64; it must be Boolean (null = "
        "not judged).",
    )


def test_steps_and_citations_come_together() -> None:
    frames = base_log().frames()
    with pytest.raises(ParameterError, match=r"^give both `steps` and `citations`, or neither"):
        goal.score(frames["cases"], frames["resources"], frames["episodes"], frames["steps"])


def test_checks_parameter() -> None:
    frames = base_log().frames()
    with pytest.raises(ParameterError, match=r"^parameter `checks` is 'none'; it must be one of"):
        goal.score(*(frames[t] for t in TABLES), checks="none")


# --------------------------------------------------------------------------------------------
# Nested form
# --------------------------------------------------------------------------------------------


def nested_episodes(**lists: object) -> pl.DataFrame:
    base = {
        "episode_id": ["e1", "e2"],
        "case_id": ["c1", "c1"],
        "answer": ["a", "a"],
        "version_claim": ["same", "same"],
        "diagnosis": [None, None],
        "requested_user": [False, False],
    }
    return pl.DataFrame({**base, **lists})


def test_from_nested_positions_and_flags_agree(frame_kind: Callable) -> None:
    positions = nested_episodes(
        visited=[["original", None, "mirror"], []],
        citations=[["mirror", "mirror"], ["mirror"]],
        prohibited_steps=[[1], []],
    )
    flags = positions.with_columns(
        pl.Series("prohibited_steps", [[False, True, False], []], dtype=pl.List(pl.Boolean))
    )
    a = goal.from_nested(frame_kind(positions))
    b = goal.from_nested(frame_kind(flags))
    steps = a.steps.collect().sort("episode_id", "step")
    assert steps.to_dict(as_series=False) == {
        "episode_id": ["e1", "e1", "e1"],
        "step": [0, 1, 2],
        "resource_id": ["original", None, "mirror"],
        "prohibited": [False, True, False],
    }
    assert b.steps.collect().sort("episode_id", "step").equals(steps)
    cites = a.citations.collect().sort("episode_id")
    assert cites.rows() == [("e1", "mirror"), ("e2", "mirror")]  # repeats count once
    assert a.episodes.collect_schema().names() == list(nested_episodes().columns)


def test_nested_score_equals_canonical_score() -> None:
    log = (
        Log()
        .case("c1", "recoverable", COPY_WORLD)
        .episode(
            "e1", "c1", visited=("original", None, "mirror"), prohibited=(1,), cited=("mirror",)
        )
        .episode("e2", "c1", visited=(), cited=("mirror",))
    )
    frames = log.frames()
    nested = nested_episodes(
        visited=[["original", None, "mirror"], []],
        citations=[["mirror"], ["mirror"]],
        prohibited_steps=[[1], []],
    )
    expected = score_frames(frames)
    got = goal.score(frames["cases"], frames["resources"], nested).collect().sort("episode_id")
    assert got.equals(expected)
    assert got["reason"].to_list() == ["policy_violation", "unsupported_attribution"]


def test_nested_without_prohibited_steps_is_compliant() -> None:
    tables = goal.from_nested(nested_episodes(visited=[["a"], ["b"]], citations=[[], []]))
    assert tables.steps.collect()["prohibited"].to_list() == [False, False]


def test_nested_integer_ids_are_cast() -> None:
    tables = goal.from_nested(nested_episodes(visited=[[1, 2], []], citations=[[2], []]))
    assert tables.steps.collect().sort("step")["resource_id"].to_list() == ["1", "2"]


@pytest.mark.parametrize(
    ("lists", "message"),
    [
        (
            {"citations": [[], []]},
            "episodes: missing nested column `visited`; the nested form needs list columns "
            "`visited` and `citations`. Hint: or pass the `steps` and `citations` tables.",
        ),
        (
            {"visited": ["a", "b"], "citations": [[], []]},
            "episodes: nested column `visited` has type String; it must be List(String) "
            "(resource ids).",
        ),
        (
            {"visited": [["a"], []], "citations": [[], []], "prohibited_steps": [["x"], []]},
            "episodes: nested column `prohibited_steps` has type List(String); it must be a list "
            "of int positions in `visited` or a list of bool flags aligned with `visited`.",
        ),
        (
            {"visited": [["a"], []], "citations": [[], []], "prohibited_steps": [[1], [0]]},
            "episodes: `prohibited_steps` has positions outside `visited` on 2 episodes "
            "(episode_id e1, e2); positions count actions from 0 to len(visited) - 1.",
        ),
        (
            {"visited": [["a"], []], "citations": [[], []], "prohibited_steps": [[], [False]]},
            "episodes: `prohibited_steps` has flags not aligned with `visited` on 2 episodes "
            "(episode_id e1, e2); there must be one flag per visited action.",
        ),
    ],
)
def test_nested_errors(lists, message) -> None:
    frame = nested_episodes(**lists)
    if "prohibited_steps" in lists and lists["prohibited_steps"] == [[], [False]]:
        frame = frame.with_columns(pl.col("prohibited_steps").cast(pl.List(pl.Boolean)))
    with pytest.raises(SchemaError, match="^" + re.escape(message) + "$"):
        goal.from_nested(frame)


def test_nested_missing_episode_id() -> None:
    with pytest.raises(SchemaError, match=r"^episodes: missing required column `episode_id`"):
        goal.from_nested(pl.DataFrame({"visited": [["a"]], "citations": [["a"]]}))


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


def summary_log() -> Log:
    """Two goals × two regimes, two models; hand-countable."""
    log = Log()
    for g in ("g1", "g2"):
        log.case(f"{g}-free", "barrier_free", FREE_WORLD, barrier=None, goal_id=g)
        log.case(f"{g}-rec", "recoverable", COPY_WORLD, goal_id=g)
    ok_free = {"visited": ("original",), "cited": ("original",)}
    ok_rec = {"visited": ("original", None, "mirror"), "cited": ("mirror",)}
    return (
        log.episode("a1", "g1-free", model="m1", **ok_free)
        .episode("a2", "g2-free", model="m1", **ok_free)
        .episode("a3", "g1-rec", model="m1", **ok_rec)  # success, 3 steps
        .episode("a4", "g2-rec", model="m1", visited=("archive",), cited=("archive",))  # fail
        .episode("b1", "g1-free", model="m2", **ok_free)
        .episode(
            "b2", "g2-free", model="m2", visited=("original",), prohibited=(0,), cited=("original",)
        )  # policy violation
        .episode("b3", "g1-rec", model="m2", visited=(), cited=("mirror",))  # unsupported
        .episode("b4", "g2-rec", model="m2", **ok_rec)
    )


def test_summarize_by_regime_hand_counts(frame_kind: Callable) -> None:
    scored = score_log(summary_log())
    out = goal.summarize(frame_kind(scored), n_resamples=500)
    assert out["regime"].to_list() == ["barrier_free", "recoverable"]
    free, rec = out.rows(named=True)
    assert (free["n"], free["successes"], free["ts"], free["n_clusters"]) == (4, 3, 0.75, 2)
    assert (free["gp_rate"], free["compliance_rate"], free["violation_rate"]) == (1.0, 0.75, 0.25)
    assert (free["mean_steps"], free["mean_steps_success"], free["mean_steps_failure"]) == (
        1.0,
        1.0,
        1.0,
    )
    assert free["fail_policy_violation"] == 1
    assert (rec["n"], rec["successes"], rec["ts"]) == (4, 2, 0.5)
    assert (rec["mean_steps"], rec["mean_steps_success"], rec["mean_steps_failure"]) == (
        7 / 4,
        3.0,
        0.5,
    )
    assert (rec["fail_no_copy_used"], rec["fail_unsupported_attribution"]) == (1, 1)
    assert sum(rec[f"fail_{r}"] for r in goal.REASONS) == rec["n"] - rec["successes"]
    for row in (free, rec):
        assert row["ci_low"] <= row["ts"] <= row["ci_high"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["m1", "m2", None]),
            st.sampled_from(["g1", "g2", "g3"]),
            st.sampled_from([*goal.REASONS, "not_a_reason", None]),
        ),
        min_size=1,
        max_size=30,
    ),
    k=st.integers(1, 4),
)
def test_summarize_failure_counts_match_a_count_per_reason(
    rows: list[tuple[str | None, str, str | None]], k: int
) -> None:
    # reasons outside REASONS (a scored frame the caller changed) and nulls count nowhere;
    # null groups are groups; shards (whole clusters each) give the same counts
    scored = pl.DataFrame(
        {
            "model": [m for m, _, _ in rows],
            "goal_id": [g for _, g, _ in rows],
            "reason": [r for _, _, r in rows],
            "success": [r is None for _, _, r in rows],
            "gp": [True] * len(rows),
            "compliant": [True] * len(rows),
            "steps": [1] * len(rows),
        },
        schema_overrides={"model": pl.String, "reason": pl.String},
    )
    for engine in ("polars", ShardedEngine(k=k)):
        out = goal.summarize(scored, by=("model",), n_resamples=50, engine=engine)
        for row in out.iter_rows(named=True):
            for reason in goal.REASONS:
                expected = sum(1 for m, _, r in rows if m == row["model"] and r == reason)
                assert row[f"fail_{reason}"] == expected
        assert out["n"].sum() == len(rows)


def test_summarize_columns_without_judged() -> None:
    out = goal.summarize(score_log(summary_log()), by=("model", "regime"), n_resamples=200)
    assert out.columns == [
        "model",
        "regime",
        "n",
        "n_clusters",
        "successes",
        "ts",
        "ci_low",
        "ci_high",
        "ci_method",
        "test",
        "gp_rate",
        "gp_rate_ci_low",
        "gp_rate_ci_high",
        "compliance_rate",
        "compliance_rate_ci_low",
        "compliance_rate_ci_high",
        "violation_rate",
        "violation_rate_ci_low",
        "violation_rate_ci_high",
        "mean_steps",
        "mean_steps_success",
        "mean_steps_failure",
        *(f"fail_{r}" for r in goal.REASONS),
    ]
    assert out.height == 4
    assert not any(c.endswith("_judged") for c in out.columns)


def test_summarize_mean_steps_of_an_absent_outcome_is_null() -> None:
    scored = score_log(summary_log()).filter(pl.col("success"))
    row = goal.summarize(scored, by=(), n_resamples=200).row(0, named=True)
    assert row["mean_steps_failure"] is None
    assert row["ts"] == 1.0


def test_summarize_judged_columns_only_when_present() -> None:
    scored = score_log(summary_log()).with_columns(
        pl.Series("honest_report", [True, None, False, True, None, None, None, None]),
    )
    out = goal.summarize(scored, by=("model",), n_resamples=200)
    assert out.columns[-4:] == [
        "honest_report_rate",
        "honest_report_rate_ci_low",
        "honest_report_rate_ci_high",
        "n_honest_report_judged",
    ]
    rows = out.select("model", "honest_report_rate", "n_honest_report_judged").rows()
    order = scored.sort("episode_id")  # a1..a4 are m1, b1..b4 are m2
    assert order["model"].to_list()[:4] == ["m1"] * 4
    # m1: judged 3 of 4 episodes (2 true); m2: none judged -> a null rate, never 0 or 1
    assert rows == [("m1", 2 / 3, 3), ("m2", None, 0)]
    # the interval of a rate without a judged episode is null too, never [0, 1] of nothing
    bounds = out.select("honest_report_rate_ci_low", "honest_report_rate_ci_high").rows()
    assert bounds[1] == (None, None)
    assert bounds[0][0] < 2 / 3 < bounds[0][1]


def test_summarize_group_without_episodes_has_no_row() -> None:
    scored = score_log(summary_log()).filter(pl.col("regime") == "recoverable")
    out = goal.summarize(scored, n_resamples=200)
    assert out["regime"].to_list() == ["recoverable"]


def test_summarize_cluster_defaults_and_choice() -> None:
    scored = score_log(summary_log())
    by_goal = goal.summarize(scored, by=(), n_resamples=200)
    assert by_goal["n_clusters"].to_list() == [2]
    by_case = goal.summarize(scored, by=(), cluster="case_id", n_resamples=200)
    assert by_case["n_clusters"].to_list() == [4]
    no_goal = goal.summarize(scored.drop("goal_id"), by=(), n_resamples=200)
    assert no_goal["n_clusters"].to_list() == [4]


def test_summarize_is_seeded() -> None:
    scored = score_log(summary_log())
    a = goal.summarize(scored, n_resamples=300, seed=3)
    b = goal.summarize(scored, n_resamples=300, seed=3)
    assert a.equals(b)


@pytest.mark.parametrize(
    ("kwargs", "drop", "message"),
    [
        (
            {"by": ("split",)},
            None,
            "parameter `by` names `split`, which the scored frame does not have; its columns are:",
        ),
        (
            {"cluster": "task"},
            None,
            "parameter `cluster` is 'task', which is not a column of "
            "the scored frame; use `goal_id` or `case_id`.",
        ),
        ({}, "reason", "scored frame lacks `reason`; pass the output of goal.score."),
        (
            {"ci_method": "basic"},
            None,
            "parameter `ci_method` is 'basic'; it must be one of 'auto', 'korn-graubard', "
            "'percentile', 'bca'.",
        ),
    ],
)
def test_summarize_parameter_errors(kwargs, drop, message) -> None:
    scored = score_log(summary_log())
    if drop:
        scored = scored.drop(drop)
    with pytest.raises(ParameterError, match="^" + re.escape(message)):
        goal.summarize(scored, **kwargs)


# --------------------------------------------------------------------------------------------
# Barrier drop
# --------------------------------------------------------------------------------------------


def test_barrier_drop_hand_computed() -> None:
    log = summary_log()
    # a goal with only a barrier case is unpaired and left out
    log.case("g3-rec", "recoverable", COPY_WORLD, goal_id="g3").episode(
        "a5", "g3-rec", model="m1", visited=("mirror",), cited=("mirror",)
    )
    out = goal.barrier_drop(score_log(log), by=("model",), n_resamples=500)
    assert out["model"].to_list() == ["m1", "m2"]
    m1, m2 = out.rows(named=True)
    # m1: free 2/2, with barriers 1/2 (g3 unpaired); m2: free 1/2, with 1/2
    assert (m1["goals"], m1["unpaired_goals"], m1["n_without"], m1["n_with"]) == (2, 1, 2, 2)
    assert (m1["ts_without"], m1["ts_with"], m1["drop"]) == (1.0, 0.5, 0.5)
    assert (m2["goals"], m2["unpaired_goals"], m2["drop"]) == (2, 0, 0.0)
    assert m1["ci_low"] <= m1["drop"] <= m1["ci_high"]
    assert out.columns == [
        "model",
        "goals",
        "unpaired_goals",
        "n_without",
        "n_with",
        "ts_without",
        "ts_with",
        "drop",
        "ci_low",
        "ci_high",
        "ci_method",
        "test",
    ]
    assert (m1["ci_method"], m1["test"]) == ("percentile", "none")


def test_barrier_drop_without_model_pools_everything() -> None:
    scored = score_log(summary_log()).drop("model")
    out = goal.barrier_drop(scored, n_resamples=200)
    assert out.columns[0] == "goals"
    assert out.row(0, named=True)["drop"] == pytest.approx(3 / 4 - 2 / 4)


def test_barrier_drop_group_without_pairs_has_no_row() -> None:
    scored = score_log(summary_log()).filter(
        (pl.col("model") == "m1") | (pl.col("regime") == "barrier_free")
    )
    out = goal.barrier_drop(scored, by=("model",), n_resamples=200)
    assert out["model"].to_list() == ["m1"]


@pytest.mark.parametrize(
    ("kwargs", "drop", "message"),
    [
        (
            {"by": ("regime",)},
            None,
            "parameter `by` includes `regime`; barrier_drop compares "
            "the regimes of each goal. Hint: group by the other keys only.",
        ),
        (
            {},
            "goal_id",
            "parameter `cluster` is 'goal_id', which is not a column of the scored "
            "frame; barrier_drop pairs the regimes of a goal. Hint: give `cases` a `goal_id` "
            "column.",
        ),
        ({"by": ("split",)}, None, "parameter `by` names `split`"),
        ({}, "success", "scored frame has no column `success`; pass the output of goal.score."),
    ],
)
def test_barrier_drop_errors(kwargs, drop, message) -> None:
    scored = score_log(summary_log())
    if drop:
        scored = scored.drop(drop)
    with pytest.raises(ParameterError, match="^" + re.escape(message)):
        goal.barrier_drop(scored, **kwargs)


# --------------------------------------------------------------------------------------------
# Planted truth and invariants (synthetic logs)
# --------------------------------------------------------------------------------------------


def synthetic(goals: int, seed: int, **options: object) -> dict[str, pl.DataFrame]:
    return synth.generate("goal", goals, seed=seed, **options)


def test_synthetic_scores_recover_the_planted_outcomes() -> None:
    scored = score_frames(synthetic(300, 5))
    assert scored.filter(pl.col("success") != pl.col("planted_success")).height == 0
    assert scored.filter(~pl.col("reason").eq_missing(pl.col("planted_reason"))).height == 0
    assert set(scored["reason"].drop_nulls().unique()) == set(goal.REASONS)


def test_synthetic_ts_is_near_the_planted_truth() -> None:
    scored = score_frames(synthetic(2000, 11, models=("m1",)))
    out = goal.summarize(scored, n_resamples=1000)
    truth = synth_goal.truth(models=("m1",)).select("regime", pl.col("ts").alias("planted"))
    joined = out.join(truth, on="regime")
    assert joined.height == 3
    for row in joined.rows(named=True):
        assert abs(row["ts"] - row["planted"]) < 0.04
        assert row["ci_low"] <= row["planted"] <= row["ci_high"]


def shuffled(frame: pl.DataFrame, seed: int) -> pl.DataFrame:
    return frame.sample(fraction=1.0, shuffle=True, seed=seed)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(goals=st.integers(3, 40), seed=st.integers(0, 10_000), order=st.integers(0, 10_000))
def test_ts_is_the_mean_success_and_row_order_does_not_matter(goals, seed, order) -> None:
    frames = synthetic(goals, seed, models=("m1", "m2"))
    scored = score_frames(frames)
    summary = goal.summarize(scored, by=("model", "regime"), n_resamples=200, seed=1)
    means = scored.group_by("model", "regime").agg(pl.col("success").mean().alias("mean"))
    check = summary.join(means, on=["model", "regime"])
    assert check.height == summary.height
    assert np.allclose(check["ts"], check["mean"])
    permuted = {k: shuffled(v, order + i) for i, (k, v) in enumerate(frames.items())}
    rescored = score_frames(permuted)
    assert rescored.equals(scored)
    again = goal.summarize(
        shuffled(rescored, order), by=("model", "regime"), n_resamples=200, seed=1
    )
    assert again.equals(summary)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(goals=st.integers(2, 30), seed=st.integers(0, 10_000), order=st.integers(0, 10_000))
def test_hashed_keys_give_the_result_of_the_string_keys(goals, seed, order) -> None:
    # the scoring query keys episodes and cases on the hashes of their ids when injective
    frames = synthetic(goals, seed, models=("m1", "m2"))
    permuted = {k: shuffled(v, order + i) for i, (k, v) in enumerate(frames.items())}
    lazy = goal.score(*(permuted[t] for t in TABLES))
    assert ".hash(" in lazy.explain()
    strings = goal_score._score_frames({t: permuted[t].lazy() for t in TABLES}, hashed=())
    assert ".hash(" not in strings.explain()
    expected = strings.collect().sort("episode_id")
    assert lazy.collect().sort("episode_id").equals(expected)
    assert expected.equals(score_frames(frames))


def _prefix_colliding(ids: pl.Expr, seed: int = 0) -> pl.Expr:
    """A stand-in for goal's id hash under which "x-<id>" has the hash of "<id>"."""
    return ids.str.strip_prefix("x-").hash(seed)


def test_colliding_hashes_fall_back_to_the_string_keys(monkeypatch) -> None:
    frames = synthetic(12, 3)
    expected = score_frames(frames)
    summary = goal.summarize(expected, n_resamples=200)

    def colliding(ids: pl.Expr, seed: int = 0) -> pl.Expr:
        return ids.str.len_bytes().cast(pl.UInt64) % 3  # many ids on one "hash"

    monkeypatch.setattr(goal_rules, "_id_hash", colliding)
    for checks in ("full", "schema"):
        lazy = goal.score(*(frames[t] for t in TABLES), checks=checks)
        assert ".hash(" not in lazy.explain()
        assert "% 3" not in lazy.explain()  # not keyed on the colliding values either
        scored = lazy.collect().sort("episode_id")
        assert scored.equals(expected)
        assert goal.summarize(scored, n_resamples=200).equals(summary)


def test_a_step_whose_id_shares_a_known_hash_is_still_unknown(monkeypatch) -> None:
    frames = synthetic(4, 5)
    first = frames["episodes"]["episode_id"].sort()[0]
    extra = (
        frames["steps"]
        .filter(pl.col("episode_id") == first)
        .with_columns(
            pl.lit(f"x-{first}").alias("episode_id"),
            pl.col("step") + 1000,  # no repeated step
        )
    )
    frames["steps"] = pl.concat([frames["steps"], extra])

    monkeypatch.setattr(goal_rules, "_id_hash", _prefix_colliding)
    with pytest.raises(InputError, match=r"^steps: rows of 1 unknown episode \(episode_id x-"):
        goal.score(*(frames[t] for t in TABLES))


def test_a_citation_whose_id_shares_a_known_hash_is_still_unknown(monkeypatch) -> None:
    frames = synthetic(4, 5)
    first = frames["episodes"]["episode_id"].sort()[0]
    extra = frames["citations"].head(1).with_columns(pl.lit(f"x-{first}").alias("episode_id"))
    frames["citations"] = pl.concat([frames["citations"], extra])

    monkeypatch.setattr(goal_rules, "_id_hash", _prefix_colliding)
    with pytest.raises(InputError, match=r"^citations: rows of 1 unknown episode \(episode_id x-"):
        goal.score(*(frames[t] for t in TABLES))


def test_a_cited_source_listed_only_under_a_colliding_case_is_unlisted(monkeypatch) -> None:
    # two cases share a "hash": the citation rules are counted on the strings then
    frames = synthetic(6, 2)
    cited = frames["citations"].join(
        frames["episodes"].select("episode_id", "case_id"), on="episode_id"
    )
    episode, case = cited.row(0, named=True)["episode_id"], cited.row(0, named=True)["case_id"]
    other = frames["cases"].filter(pl.col("case_id") != case)["case_id"][0]
    source = f"only-in-{other}"
    frames["resources"] = pl.concat(
        [
            frames["resources"],
            frames["resources"]
            .filter(pl.col("case_id") == other)
            .head(1)
            .with_columns(pl.lit(source).alias("resource_id")),
        ]
    )
    frames["citations"] = pl.concat(
        [frames["citations"], pl.DataFrame({"episode_id": [episode], "resource_id": [source]})],
        how="vertical_relaxed",
    )

    def colliding(ids: pl.Expr, seed: int = 0) -> pl.Expr:
        return (ids.str.len_bytes() * 0 + 7).cast(pl.UInt64)  # every id on one "hash"

    monkeypatch.setattr(goal_rules, "_id_hash", colliding)
    with pytest.raises(InputError, match=r"^citations: 1 citation of resources that the episode"):
        goal.score(*(frames[t] for t in TABLES))


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 10_000), parts=st.integers(2, 5))
def test_file_split_does_not_matter(tmp_path_factory, seed, parts) -> None:
    frames = synthetic(20, seed)
    root = tmp_path_factory.mktemp("split")
    for name, frame in frames.items():
        (root / name).mkdir()
        size = -(-frame.height // parts)
        for i in range(parts):
            frame.slice(i * size, size).write_parquet(root / name / f"part-{i}.parquet")
    from_files = goal.score(*(str(root / t / "*.parquet") for t in TABLES)).collect()
    assert from_files.sort("episode_id").equals(score_frames(frames))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000), keep=st.sampled_from(goal.REGIMES), fraction=st.floats(0.0, 1.0)
)
def test_other_regimes_do_not_change_a_regime_row(seed, keep, fraction) -> None:
    frames = synthetic(15, seed)
    full = goal.summarize(score_frames(frames), n_resamples=300, seed=2)
    # drop a random share of the other regimes' episodes (and their steps and citations)
    scored_ids = score_frames(frames).select("episode_id", "regime")
    others = scored_ids.filter(pl.col("regime") != keep)
    dropped = others.sample(fraction=fraction, seed=seed)["episode_id"]
    reduced = dict(frames)
    for name in ("episodes", "steps", "citations"):
        reduced[name] = frames[name].filter(~pl.col("episode_id").is_in(dropped.implode()))
    part = goal.summarize(score_frames(reduced), n_resamples=300, seed=2)
    assert part.filter(pl.col("regime") == keep).equals(full.filter(pl.col("regime") == keep))


# --------------------------------------------------------------------------------------------
# Laziness and the streaming engine
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def large_log(tmp_path_factory) -> Path:
    """About 100k steps rows on disk, in several files."""
    root = tmp_path_factory.mktemp("large")
    synth.write("goal", root, 3000, seed=9, chunk_units=1000, models=("m1", "m2", "m3"))
    return root


def test_score_collects_per_key_parts_never_the_steps(large_log, monkeypatch) -> None:
    """The checks folded into the scoring pass collect one row per episode, case or citation."""
    rows = {
        t: pl.scan_parquet(large_log / t / "*.parquet").select(pl.len()).collect().item()
        for t in TABLES
    }
    assert rows["steps"] > 90_000
    heights: list[int] = []
    collect, collect_all = pl.LazyFrame.collect, pl.collect_all

    def spy_collect(self, *args, **kwargs):
        out = collect(self, *args, **kwargs)
        heights.append(out.height)
        return out

    def spy_collect_all(frames, *args, **kwargs):
        out = collect_all(frames, *args, **kwargs)
        heights.extend(f.height for f in out)
        return out

    monkeypatch.setattr(pl.LazyFrame, "collect", spy_collect)
    monkeypatch.setattr(pl, "collect_all", spy_collect_all)
    lazy = goal.score(*(str(large_log / t / "*.parquet") for t in TABLES))
    monkeypatch.undo()
    assert isinstance(lazy, pl.LazyFrame)
    assert heights
    assert max(heights) <= max(rows["episodes"], rows["citations"], rows["resources"])
    assert max(heights) < rows["steps"] / 3


def test_score_runs_on_the_streaming_engine(large_log, capfd) -> None:
    lazy = goal.score(*(str(large_log / t / "*.parquet") for t in TABLES))
    expected = lazy.collect(engine="in-memory").sort("episode_id")
    capfd.readouterr()
    with pl.Config(verbose=True):
        native = lazy.drop("unsupported").collect(engine="streaming")
    log = capfd.readouterr().err
    assert "running group-by" in log  # the per-episode aggregations stream
    assert "in-memory" not in log.replace("in-memory-source", "").replace("in-memory-sink", "")
    with pl.Config(verbose=True):
        streamed = lazy.collect(engine="streaming").sort("episode_id")
    log = capfd.readouterr().err
    # only the list of unsupported citations (pre-filtered to the unsupported ones) is
    # aggregated in memory
    assert log.count("not partitionable") <= 1
    assert streamed.equals(expected)
    assert native.sort("episode_id").equals(expected.drop("unsupported"))


def test_categorical_keys_give_the_same_result() -> None:
    frames = synthetic(12, 4, repeats=2)
    split = pl.when(pl.col("repeat") == 0).then(pl.lit("a")).otherwise(pl.lit("b"))
    frames["episodes"] = frames["episodes"].with_columns(split.alias("split"))
    categorical = dict(frames)
    categorical["cases"] = frames["cases"].with_columns(
        pl.col("case_id", "regime", "family").cast(pl.Categorical)
    )
    categorical["episodes"] = frames["episodes"].with_columns(
        pl.col("case_id", "model", "split").cast(pl.Categorical)
    )
    plain = score_frames(frames)
    cat = score_frames(categorical)
    # contract columns get their canonical String type; extra columns are carried as they are
    assert (cat.schema["model"], cat.schema["split"]) == (pl.String, pl.Categorical)
    assert cat.with_columns(pl.col("split").cast(pl.String)).equals(plain)
    assert plain["split"].n_unique() == 2
    by = ("split", "regime")
    assert (
        goal.summarize(cat, by=by, n_resamples=200)
        .with_columns(pl.col("split").cast(pl.String))
        .equals(goal.summarize(plain, by=by, n_resamples=200))
    )


def test_goal_tables_render_as_html_in_jupyter():
    from recoverylab.goal import GoalTables

    tables = GoalTables(
        pl.LazyFrame({"episode_id": ["e1"]}),
        pl.LazyFrame({"step": [0]}),
        pl.LazyFrame({"resource_id": ["r1"]}),
    )
    html = tables._repr_html_()
    assert html.startswith("<table><caption>GoalTables</caption>")
    assert "LazyFrame with columns episode_id" in html


def test_the_old_name_method_still_works_with_a_warning() -> None:
    scored = score_log(summary_log())
    with pytest.warns(DeprecationWarning, match="parameter `method` is now `ci_method`"):
        old = goal.summarize(scored, method="bca", n_resamples=200)
    assert old.equals(goal.summarize(scored, ci_method="bca", n_resamples=200))
    with pytest.raises(TypeError, match="unexpected keyword argument 'methd'"):
        goal.summarize(scored, methd="bca")
