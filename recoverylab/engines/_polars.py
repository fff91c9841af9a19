"""The polars engines: the whole tables at once (default), or split into k shards (tests).

ARCHITECTURE §7; :class:`ShardedEngine` proves, without Java, that every plan's partials add up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from recoverylab import schema
from recoverylab._errors import ParameterError
from recoverylab.io import scan
from recoverylab.plan import Input, Plan, Stage, collect_parts

__all__ = ["PolarsEngine", "ShardedEngine"]

_KEY = "__shard_key"
_VIA = "__shard_via"
_SHARD = "__shard"


def _scan_inputs(plan: Plan) -> dict[str, pl.LazyFrame]:
    return {i.name: scan(i.source) for i in plan.inputs}


@dataclass(frozen=True)
class PolarsEngine:
    """Run a plan with polars over the whole tables (streaming): the default engine.

    Stages marked ``for_shards`` are skipped: on the whole tables the next stage derives
    their state itself.
    """

    def run(self, plan: Plan) -> Any:
        """Run ``plan``; return its finish's result."""
        frames: dict[str, pl.LazyFrame] = {}
        plan = replace(plan, stages=tuple(s for s in plan.stages if not s.for_shards))

        def run_stage(stage: Stage, state: Any) -> dict[str, pl.DataFrame]:
            if not frames:
                frames.update(_scan_inputs(plan))
            return collect_parts(stage.partial(frames, state))

        return plan.execute(run_stage)

    def rows(self, plan: Plan) -> pl.LazyFrame:
        """Run every stage but the last; return the last stage's one part, lazily."""
        state = run_head(self.run, plan)
        (out,) = plan.stages[-1].partial(_scan_inputs(plan), state).values()
        return out.lazy()


def run_head(run: Callable[[Plan], Any], plan: Plan) -> Any:
    """Run the check and every stage of ``plan`` but the last through ``run``; return the state."""
    first = plan.stages[:-1]
    if not first:
        if plan.check is not None:
            plan.check()
        return plan.state
    head = Plan(plan.inputs, first, lambda state: state, plan.check, plan.state, plan.progress)
    return run(head)


def _owner_key(table: Input, frame: pl.LazyFrame) -> str:
    key = table.key_column(frame.collect_schema())
    if key is None:
        raise ValueError(f"plan input {table.name!r} has no cluster key")  # a bug in a plan
    return key


def shard_keys(
    inputs: tuple[Input, ...], frames: Mapping[str, pl.LazyFrame]
) -> dict[str, pl.LazyFrame]:
    """Attach each row's cluster key (as a string column) to every input.

    ``via=(other, column)``: the least key of ``other``'s rows with that ``column`` value (or null).
    """
    by_name = {i.name: i for i in inputs}
    keyed = {}
    for table in inputs:
        frame = frames[table.name]
        if table.via is not None:
            other, on = table.via
            owner = _owner_key(by_name[other], frames[other])
            mapping = (
                frames[other]
                .group_by(pl.col(on).cast(pl.String).alias(_VIA))
                .agg(pl.col(owner).cast(pl.String).min().alias(_KEY))
            )
            frame = (
                frame.with_columns(pl.col(on).cast(pl.String).alias(_VIA))
                .join(mapping, on=_VIA, how="left")
                .drop(_VIA)
            )
        elif table.key is not None:
            key = _owner_key(table, frame)
            frame = frame.with_columns(pl.col(key).cast(pl.String).alias(_KEY))
        else:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(_KEY))
        keyed[table.name] = frame
    return keyed


@dataclass(frozen=True)
class ShardedEngine:
    """Split every input by cluster key into ``k`` shards; run the partials per shard.

    Within a shard the contracts are checked as for a shard (an empty part is no error); the
    "table is empty" rule is checked over the whole table. Stages that need no whole cluster
    (``clustered=False``) get an arbitrary split by row position instead. Shards with no rows
    are skipped, as Spark skips empty partitions.

    Parameters
    ----------
    k
        Number of shards (at least 1).
    seed
        Seed of the hash that assigns keys to shards.
    """

    k: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise ParameterError(f"parameter `k` is {self.k!r}; it must be an integer >= 1.")

    def _shards(self, plan: Plan, stage: Stage) -> list[dict[str, pl.DataFrame]]:
        frames = _scan_inputs(plan)
        if stage.clustered:
            keyed = shard_keys(plan.inputs, frames)
            keyed = {i.name: keyed[i.name] for i in stage.read(plan.inputs)}
            shard = pl.col(_KEY).hash(self.seed) % self.k
        else:
            keyed = {
                i.name: frames[i.name].with_columns(pl.lit(None, dtype=pl.String).alias(_KEY))
                for i in stage.read(plan.inputs)
            }
            shard = pl.int_range(pl.len(), dtype=pl.UInt64) % self.k
        tagged = {n: f.with_columns(shard.alias(_SHARD)).collect() for n, f in keyed.items()}
        return [
            {n: f.filter(pl.col(_SHARD) == s).drop(_SHARD, _KEY) for n, f in tagged.items()}
            for s in range(self.k)
        ]

    def run(self, plan: Plan) -> Any:
        """Run ``plan``; return its finish's result."""

        def run_stage(stage: Stage, state: Any) -> dict[str, pl.DataFrame]:
            shards = self._shards(plan, stage)
            rows = {n: sum(s[n].height for s in shards) for n in shards[0]}
            raise_empty(stage.read(plan.inputs), rows, lambda t: shards[0][t.name])
            busy = [s for s in shards if any(f.height for f in s.values())] or shards[:1]
            outputs = _per_shard(stage, busy, state)
            names = dict.fromkeys(n for out in outputs for n in out)
            return {
                n: pl.concat([o[n] for o in outputs if n in o], how="vertical_relaxed")
                for n in names
            }

        return plan.execute(run_stage)

    def rows(self, plan: Plan) -> pl.LazyFrame:
        """Run every stage but the last; return the last stage's part of every shard, lazily."""
        state = run_head(self.run, plan)
        last = plan.stages[-1]
        outputs = _per_shard(last, self._shards(plan, last), state)
        return pl.concat(
            [o for (o,) in (p.values() for p in outputs)], how="vertical_relaxed"
        ).lazy()


def _per_shard(
    stage: Stage, shards: list[dict[str, pl.DataFrame]], state: Any
) -> list[dict[str, pl.DataFrame]]:
    """Collect the stage's partials of every shard, its contracts checked as for a shard."""
    with schema.shard_scope():
        return [
            collect_parts(stage.partial({n: f.lazy() for n, f in s.items()}, state)) for s in shards
        ]


def raise_empty(
    tables: Iterable[Any], rows: Mapping[str, int], empty: Callable[[Any], pl.DataFrame]
) -> None:
    """Raise the "table is empty" error of an input with no rows in any shard (``rows``).

    ``empty(table)`` gives a frame of the input's columns.
    """
    for table in tables:
        if table.contract is not None and rows[table.name] == 0:
            schema.validate(empty(table).head(0), table.contract, checks="full")
