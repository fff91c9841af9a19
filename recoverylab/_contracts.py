"""The table contracts of ARCHITECTURE §3, declared once: columns, keys and row rules.

This module holds declarations only (no reading, no validation), so the readers in
:mod:`recoverylab.io` can ask which columns hold text (kept as text when read from CSV) and
:mod:`recoverylab.schema` can validate against the same contracts without an import circle.
Import the names from :mod:`recoverylab.schema`, which re-exports them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

__all__ = [
    "MAX_SAFE_INTEGER",
    "REGIMES",
    "RELATIONS",
    "SPECS",
    "VERSION_CLAIMS",
    "Column",
    "Rule",
    "TableSpec",
    "text_columns",
]

#: Canonical polars types a column may have, by contract name.
_CANONICAL: dict[str, pl.DataType] = {
    "str": pl.String(),
    "int": pl.Int64(),
    "float": pl.Float64(),
    "bool": pl.Boolean(),
}


@dataclass(frozen=True)
class Column:
    """One column of a table contract.

    Parameters
    ----------
    name
        Column name.
    kind
        ``"str"``, ``"int"``, ``"float"``, ``"bool"``, or ``"any"`` (carried as it is).
    required
        Whether the column must be present.
    nullable
        Whether null values are allowed.
    labels
        The allowed values of a string column; ``None`` allows any value.
    identifier
        Integer values are accepted and cast to strings (ids read from CSV often arrive as ints).
    meaning
        One line for error messages and documentation.
    """

    name: str
    kind: Literal["str", "int", "float", "bool", "any"]
    required: bool = True
    nullable: bool = False
    labels: tuple[str, ...] | None = None
    identifier: bool = False
    meaning: str = ""

    @property
    def dtype(self) -> pl.DataType | None:
        """The canonical polars type, or ``None`` for ``kind="any"``."""
        return _CANONICAL.get(self.kind)


@dataclass(frozen=True)
class Rule:
    """A named row rule: ``violation`` is true on rows that break it.

    ``what`` describes the broken rows (``{n}`` and ``{s}`` are filled with the count and a
    plural "s"); ``requirement`` says what is allowed.
    """

    name: str
    violation: pl.Expr
    what: str
    requirement: str


@dataclass(frozen=True)
class TableSpec:
    """The contract of one table: columns, primary key and row rules."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    rules: tuple[Rule, ...] = ()
    allow_empty: bool = False
    description: str = ""
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {c.name: c for c in self.columns})

    def column(self, name: str) -> Column:
        """Return the contract column called ``name``."""
        return self._by_name[name]

    @property
    def required(self) -> tuple[str, ...]:
        """Names of the required columns."""
        return tuple(c.name for c in self.columns if c.required)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


#: Largest integer a contract column may hold (2^53 - 1, exact in float64).
MAX_SAFE_INTEGER = 2**53 - 1


def _non_negative(column: str) -> Rule:
    return Rule(
        f"{column}_non_negative",
        pl.col(column) < 0,
        f"column `{column}` is negative on {{n}} row{{s}}",
        "it must be >= 0",
    )


#: Barrier regimes of a goal (AgentHeal; the seed instantiates every goal in all three).
REGIMES = ("barrier_free", "recoverable", "unrecoverable")
RELATIONS = ("copy", "other_version", "decoy")
VERSION_CLAIMS = ("same", "other")

_CONTRACTS = (
    TableSpec(
        name="forks",
        description="CIR paired forks: one row per continuation branch forked from the same state.",
        columns=(
            Column("task_id", "str", identifier=True, meaning="cluster unit: the task instance"),
            Column("condition", "str", meaning="observation condition (clean, stale1, ...)"),
            Column("method", "str", meaning="recovery operation; `none` = no recovery"),
            Column("delay", "int", nullable=True, meaning="actions from perturbation to recovery"),
            Column("success", "bool", meaning="final outcome of this branch"),
            Column("prefix_hash", "str", required=False, nullable=True),
            Column("perturb_action", "int", required=False, nullable=True),
            Column("end_action", "int", required=False, nullable=True),
            Column("factual_success", "bool", required=False, nullable=True),
        ),
        key=("task_id", "condition", "method", "delay"),
        rules=(
            Rule(
                "delay_on_recovery_rows",
                (pl.col("method") != "none") & pl.col("delay").is_null(),
                "column `delay` is null on {n} recovery row{s}",
                "only `none` rows may leave it null",
            ),
            _non_negative("delay"),
            _non_negative("perturb_action"),
            _non_negative("end_action"),
        ),
    ),
    TableSpec(
        name="decisions",
        description="A recovery policy's choices: at most one recovery point per episode.",
        columns=(
            Column("task_id", "str", identifier=True),
            Column("condition", "str"),
            Column("delay", "int", nullable=True, meaning="chosen recovery delay; null = none"),
        ),
        key=("task_id", "condition"),
        rules=(_non_negative("delay"),),
    ),
    TableSpec(
        name="decision_points",
        description="CIR router candidates: one row per (task, condition, delay) with features.",
        columns=(
            Column("task_id", "str", identifier=True),
            Column("condition", "str"),
            Column("delay", "int"),
        ),
        key=("task_id", "condition", "delay"),
        rules=(_non_negative("delay"),),
    ),
    TableSpec(
        name="cases",
        description="AgentHeal evaluator annotations: one row per case.",
        columns=(
            Column("case_id", "str", identifier=True),
            Column("regime", "str", labels=REGIMES),
            Column("barrier", "str", nullable=True, meaning="the true barrier β"),
            Column("needs_user_help", "bool"),
            Column("goal_id", "str", required=False, identifier=True),
            Column("family", "str", required=False, nullable=True),
            Column("category", "str", required=False, nullable=True),
        ),
        key=("case_id",),
    ),
    TableSpec(
        name="resources",
        description="AgentHeal resources of a case, with their relation to the requested work.",
        columns=(
            Column("case_id", "str", identifier=True),
            Column("resource_id", "str", identifier=True),
            Column("relation", "str", labels=RELATIONS),
            Column("reachable", "bool", meaning="compliantly reachable"),
        ),
        key=("case_id", "resource_id"),
    ),
    TableSpec(
        name="episodes",
        description="AgentHeal agent records: one row per episode with the final report.",
        columns=(
            Column("episode_id", "str", identifier=True),
            Column("case_id", "str", identifier=True),
            Column("answer", "str", nullable=True, meaning="null = abstained"),
            Column("version_claim", "str", nullable=True, labels=VERSION_CLAIMS),
            Column("diagnosis", "str", nullable=True),
            Column("requested_user", "bool"),
            Column("model", "str", required=False, nullable=True),
        ),
        key=("episode_id",),
    ),
    TableSpec(
        name="steps",
        description="AgentHeal actions: one row per (episode, step) with the policy audit.",
        columns=(
            Column("episode_id", "str", identifier=True),
            Column("step", "int"),
            Column("resource_id", "str", nullable=True, identifier=True),
            Column("prohibited", "bool"),
        ),
        key=("episode_id", "step"),
        rules=(_non_negative("step"),),
        allow_empty=True,
    ),
    TableSpec(
        name="citations",
        description="AgentHeal attribution: the sources S credited for an episode's answer.",
        columns=(
            Column("episode_id", "str", identifier=True),
            Column("resource_id", "str", identifier=True),
        ),
        key=("episode_id", "resource_id"),
        allow_empty=True,
    ),
    TableSpec(
        name="states",
        description="CUA-Recovery replayed error states: one row per takeover state.",
        columns=(
            Column("state_id", "str", identifier=True),
            Column("workflow_id", "str", identifier=True),
            Column("root_cause_id", "str", identifier=True),
            Column("depth", "int"),
            Column("replay_ok", "bool"),
            Column("expected_ok", "bool"),
            Column("split", "str", required=False, nullable=True),
            Column("prefix_version", "str", required=False, nullable=True),
            Column("snapshot_id", "str", required=False, nullable=True),
            Column("action_space", "str", required=False, nullable=True),
            Column("context_window", "any", required=False, nullable=True),
            Column("verifier_version", "str", required=False, nullable=True),
            Column("budget", "any", required=False, nullable=True),
            Column("source_agent", "str", required=False, nullable=True),
        ),
        key=("state_id",),
        rules=(_non_negative("depth"),),
    ),
    TableSpec(
        name="attempts",
        description="CUA-Recovery takeover attempts: one row per (state, agent, repeat).",
        columns=(
            Column("state_id", "str", identifier=True),
            Column("agent", "str"),
            Column("repeat", "int"),
            Column("aware", "bool"),
            Column("root_cause_fixed", "bool"),
            Column("derived_fixed", "bool"),
            Column("passed", "bool"),
            Column("steps", "int", required=False, nullable=True),
            Column("cost", "float", required=False, nullable=True),
            Column("seconds", "float", required=False, nullable=True),
        ),
        key=("state_id", "agent", "repeat"),
        rules=(_non_negative("repeat"),),
    ),
    TableSpec(
        name="failures",
        description="CUA-Recovery failure annotations: where each root cause surfaced.",
        columns=(
            Column("root_cause_id", "str", identifier=True),
            Column("root_cause_step", "int"),
            Column("surfaced_step", "int", nullable=True, meaning="null = never surfaced"),
            Column("final_step", "int"),
        ),
        key=("root_cause_id",),
        rules=(
            Rule(
                "surfaced_before_root_cause",
                pl.col("surfaced_step") < pl.col("root_cause_step"),
                "column `surfaced_step` is before `root_cause_step` on {n} row{s}",
                "a failure surfaces at or after its root cause",
            ),
            Rule(
                "surfaced_after_final",
                pl.col("surfaced_step") > pl.col("final_step"),
                "column `surfaced_step` is after `final_step` on {n} row{s}",
                "a failure surfaces at or before the final step",
            ),
        ),
    ),
    TableSpec(
        name="mutations",
        description="CUA-Recovery verifier mutation tests: one row per (workflow, mutation).",
        columns=(
            Column("workflow_id", "str", identifier=True),
            Column("mutation_id", "str", identifier=True),
            Column("executed", "bool"),
            Column("caught", "bool"),
        ),
        key=("workflow_id", "mutation_id"),
    ),
)
#: Every table contract, by name.
SPECS: Mapping[str, TableSpec] = {s.name: s for s in _CONTRACTS}


@functools.cache
def text_columns() -> Mapping[str, pl.DataType]:
    """Return the contract columns that hold text, as ``{name: pl.String()}``.

    The mapping is computed once and shared: do not change it. Text readers use it as a type
    override, so an identifier such as ``007`` read from CSV stays
    ``"007"`` instead of becoming the integer 7 (ARCHITECTURE §1.5).

    Examples
    --------
    >>> text_columns()["task_id"]
    String
    """
    return {
        column.name: pl.String()
        for contract in SPECS.values()
        for column in contract.columns
        if column.kind == "str"
    }
