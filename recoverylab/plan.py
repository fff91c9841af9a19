r"""What a protocol hands an engine: inputs, a parameter check, stages of partials, a finish.

ARCHITECTURE §1.3 and §7. Every aggregating verb of recoverylab is a :class:`Plan`: its input
tables (each with the cluster key that keeps a cluster's rows together, and the contract whose
"table is empty" rule holds for the whole table); a parameter check run before any data is
read; one or more :class:`Stage`\\ s (a *partial* query over one shard -- whole clusters of every
input -- that returns small named frames, and a *combine* of every shard's partials,
concatenated, into the state the next stage and the finish receive); a *finish* that turns the
last state into the result (statistics included).

An engine (:mod:`recoverylab.engines`) runs a plan: polars on the whole tables, sharded polars
(tests prove additivity with it), or Spark through ``mapInArrow``. A protocol builds plans; the
caller chooses the engine (:func:`recoverylab.engines.run` resolves a verb's ``engine=``), and
this module imports none. Partial queries are pickled
to Spark's workers: module-level functions (or ``functools.partial`` of one) whose state pickles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from recoverylab._diagnose import translate_read_errors
from recoverylab._errors import ParameterError

if TYPE_CHECKING:
    from recoverylab.schema import TableSpec

__all__ = ["Engine", "Input", "Partial", "Plan", "Stage", "collect_parts", "rows", "run"]

#: A partial query: (the tables of one shard, the state so far) -> named partial frames.
Partial = Callable[[Mapping[str, pl.LazyFrame], Any], Mapping[str, pl.LazyFrame | pl.DataFrame]]
#: A combine: (the partials of every shard, concatenated; the state so far) -> the new state.
Combine = Callable[[dict[str, pl.DataFrame], Any], Any]


@dataclass(frozen=True)
class Input:
    """One input table of a plan.

    Attributes
    ----------
    name
        Name the partial queries receive the table under.
    source
        Anything :func:`recoverylab.io.scan` reads (an engine may read paths itself).
    key
        The cluster key column: rows with equal keys (in every input) are in one shard; or a
        function of the table's schema that names it. ``None`` when no stage is clustered.
    contract
        Table contract (a name of :data:`~recoverylab.schema.SPECS` or a spec) whose "table is
        empty" rule the engine checks over the whole table; ``None`` for none.
    via
        ``(input, column)``: the row's cluster key is the smallest key of that input's rows
        with the same value in ``column`` (steps get their episode's case; a duplicated
        episode lands in one shard when an input is keyed through itself).
    columns
        The columns the partial queries read (default: all).
    """

    name: str
    source: object
    key: str | Callable[[pl.Schema], str] | None = None
    contract: str | TableSpec | None = None
    via: tuple[str, str] | None = None
    columns: tuple[str, ...] | None = None

    def key_column(self, schema: pl.Schema) -> str | None:
        """Return the cluster key column (a ``key`` function picks it from the schema)."""
        return self.key(schema) if callable(self.key) else self.key


def _keep(parts: dict[str, pl.DataFrame], state: Any) -> Any:
    """Hand the concatenated partials on unchanged (the default combine)."""
    return parts


@dataclass(frozen=True)
class Stage:
    """One pass over the data: a partial query per shard, then a combine.

    Attributes
    ----------
    label
        What the stage computes, for progress messages.
    partial
        The partial query (see :data:`Partial`); it may raise a RecoveryLabError.
    combine
        Turns the concatenated partials of all shards into the new state.
    clustered
        ``False`` when the partial needs no cluster to be whole (distinct design points,
        per-row checks): an engine may then skip the shuffle.
    reads
        The inputs the partial reads (default: all). An engine ships only these, and checks
        the "table is empty" rule of these only, before the errors the partials raised.
    for_shards
        ``True`` when only a split of the data needs the stage: the next stage's partial,
        handed the whole tables and the state before this stage, derives this state itself
        (a design grid read in the same pass). An engine that runs every stage once over the
        whole tables skips the stage and saves its read.
    """

    label: str
    partial: Partial
    combine: Combine = _keep
    clustered: bool = True
    reads: tuple[str, ...] | None = None
    for_shards: bool = False

    def read(self, inputs: tuple[Input, ...]) -> tuple[Input, ...]:
        """Return the inputs this stage reads."""
        return tuple(i for i in inputs if self.reads is None or i.name in self.reads)


@dataclass(frozen=True)
class Plan:
    """An aggregating verb, as data (ARCHITECTURE §7).

    Attributes
    ----------
    inputs
        The input tables.
    stages
        The passes over the data, in order; each receives the state the previous combined.
    finish
        Turns the last state into the result.
    check
        Parameter checks, run before any data is read.
    state
        The state the first stage receives.
    """

    inputs: tuple[Input, ...]
    stages: tuple[Stage, ...]
    finish: Callable[[Any], Any]
    check: Callable[[], None] | None = None
    state: Any = None
    progress: Callable[[str], None] | None = field(default=None, compare=False)

    def execute(self, run_stage: Callable[[Stage, Any], dict[str, pl.DataFrame]]) -> Any:
        """Run the check, every stage (through the engine's ``run_stage``) and the finish."""
        if self.check is not None:
            self.check()
        state = self.state
        for stage in self.stages:
            if self.progress is not None:
                self.progress(stage.label)
            state = stage.combine(run_stage(stage, state), state)
        return self.finish(state)


class Engine(Protocol):
    """Runs plans; see :mod:`recoverylab.engines`."""

    def run(self, plan: Plan) -> Any:
        """Run ``plan`` and return its finish's result."""


def collect_parts(outputs: Mapping[str, pl.LazyFrame | pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Collect a partial query's outputs (lazy ones together, on the streaming engine)."""
    lazy = {n: f for n, f in outputs.items() if isinstance(f, pl.LazyFrame)}
    collected = dict(
        zip(lazy, pl.collect_all(list(lazy.values()), engine="streaming"), strict=True)
    )
    return {n: f if isinstance(f, pl.DataFrame) else collected[n] for n, f in outputs.items()}


def run(engine: object, plan: Plan) -> Any:
    """Run ``plan`` on ``engine``, an engine object the caller chose.

    The plan never chooses its engine: a verb's ``engine=`` argument (``"polars"``, ``"spark"``,
    a SparkSession) is resolved by :func:`recoverylab.engines.run`, which calls this.

    Parameters
    ----------
    engine
        An engine object: anything with ``run(plan)``
        (:func:`recoverylab.engines.resolve` makes one from a name or a SparkSession).
    plan
        The plan.

    Returns
    -------
    Any
        What the plan's finish returns.

    Raises
    ------
    ParameterError
        For an ``engine`` without a ``run`` method.
    """
    runner = _method(engine, "run")
    # an engine error on a damaged input becomes our error naming the file (and line)
    with translate_read_errors([table.source for table in plan.inputs]):
        return runner(plan)


def rows(engine: object, plan: Plan) -> Any:
    """Run a row-level plan on ``engine`` lazily: every stage but the last, then its one part.

    ``engine`` is an engine object, as for :func:`run`. Returns a polars LazyFrame on the
    polars engines and a lazy Spark DataFrame on Spark.
    """
    return _method(engine, "rows")(plan)


def _method(engine: object, name: str) -> Callable[[Plan], Any]:
    method = getattr(engine, name, None)
    if isinstance(engine, str) or not callable(method):
        raise ParameterError(
            f"parameter `engine` is {engine!r}; plan.{name} needs an engine object. "
            "Hint: recoverylab.engines.resolve turns 'polars', 'spark' or a SparkSession into "
            f"one, and recoverylab.engines.{name} resolves and runs in one call."
        )
    return method
