"""tau2-bench results in: one ``trials`` row per (task, trial) (``recoverylab import tau2``).

tau2-bench (sierra-research/tau2-bench) runs each task of a domain several times (``trials``)
with an LLM agent against an LLM user simulator and reports pass^k. Its results follow the
pydantic models of ``src/tau2/data_model/simulation.py``; tau2-bench is not on PyPI (the PyPI
package ``tau2`` is unrelated), so this module reads the JSON directly, by those models' field
names (mirrored, not imported), in both layouts ``Results.load`` reads:

- **json**: one file holding the whole ``Results`` document (``info``, ``tasks``,
  ``simulations``);
- **dir**: a ``results.json`` without ``simulations`` but with a ``simulation_index`` (id,
  task_id, trial, ...) and one ``simulations/<id>.json`` per ``SimulationRun``. As tau2 does, a
  path is read as this layout when it is a directory or has a sibling ``simulations/``, and the
  index must name exactly the files on disk.

Read per simulation: ``id``, ``task_id``, ``trial``, ``seed``, ``termination_reason``,
``reward_info.reward``, ``duration``, ``agent_cost``, ``user_cost``; per file from ``info``:
``environment_info.domain_name``, ``agent_info.implementation``/``llm``, ``user_info.llm``.

``trials`` (one row per (domain, agent, agent_model, user_model, task_id, attempt), sorted so):

=================== ======= ====================================================================
column              type    from tau2-bench
=================== ======= ====================================================================
task_id             str     ``<domain>/<SimulationRun.task_id>`` (tau2 numbers tasks per domain)
attempt             int     ``SimulationRun.trial`` (from 0)
success             bool    tau2's ``is_successful``: reward within 1e-6 of 1 (partial: false)
reward              float   ``reward_info.reward`` (partial rewards kept)
termination_reason  str     ``SimulationRun.termination_reason`` (a ``TerminationReason``)
domain              str     ``info.environment_info.domain_name``
agent               str     ``info.agent_info.implementation``
agent_model         str     ``info.agent_info.llm`` (null when none)
user_model          str     ``info.user_info.llm`` (null when none)
seed                int     ``SimulationRun.seed`` (null when none)
simulation_id       str     ``SimulationRun.id``
duration            float   ``SimulationRun.duration``
agent_cost          float   ``SimulationRun.agent_cost`` (null when none)
user_cost           float   ``SimulationRun.user_cost`` (null when none)
raw_task_id         str     ``SimulationRun.task_id`` as written
task_scope          str     the domain (the scope of tau2's task ids)
=================== ======= ====================================================================

**Task identity.** tau2-bench numbers the tasks of each domain from ``0``, so ``0`` of airline and
``0`` of retail are two tasks: ``task_id`` is always ``<domain>/<id>`` (``airline/0``), the raw id
in ``raw_task_id`` (see :mod:`recoverylab.adapters._identity`; ``--raw-ids`` keeps raw ids and
refuses when one occurs in two domains).

**Which runs count** follows tau2-bench's own rule: the termination reasons in
``NON_EVALUABLE_TERMINATION_REASONS`` (``infrastructure_error`` and ``context_window_exceeded``;
tau2's ``get_metrics_df`` drops them before pass^k) go to ``excluded`` with the reason as it is;
every other termination (user or agent stop, max steps, timeouts, agent or user errors) is an
outcome with tau2's reward (0 for a run that ended early). At tau2-bench's main branch of
2026-08 only ``infrastructure_error`` is dropped; ``context_window_exceeded`` joins it in
sierra-research/tau2-bench#360 -- pass ``non_evaluable=("infrastructure_error",)`` for the older
rule. A simulation without ``reward_info`` (never evaluated) goes to ``excluded`` as
``no_reward``: tau2 would count it as a failure; we never count a missing score as one.

**Resumed runs** (tau2's ``runner/checkpoint.py``): a run is identified by (trial, task_id,
seed); on resume, infrastructure errors are re-run and everything else is kept. So among
simulations of one (domain, agent, models, task, trial): the same simulation read twice (same
``id`` and outcome, e.g. a checkpoint copy beside the final file) is kept once; an
infrastructure error with a later simulation of the same trial is superseded by it (reason
``retry``, listed in the read report); two *different* evaluable simulations are an error naming
both files and the key, never a silent choice.

pass^k: ``takeover.repeats_reliability(trials, unit=[*EXPERIMENT, "task_id"],
cluster="task_id", outcome="success", by=["domain", "agent_model"], k=k)`` gives tau2-bench's
pass^k (the mean over tasks of C(c, k)/C(n, k)) for every k up to the fewest trials of a task.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from recoverylab import io
from recoverylab._errors import InputError, ParameterError, SourceError, format_keys
from recoverylab._formats import strip_compression
from recoverylab._json import load
from recoverylab.adapters import table
from recoverylab.adapters._identity import RAW, SCOPE, qualify
from recoverylab.adapters._report import Imported, ReadReport, Superseded

__all__ = [
    "EXPERIMENT",
    "NON_EVALUABLE_TERMINATION_REASONS",
    "TERMINATION_REASONS",
    "TRIALS_SCHEMA",
    "read",
]

#: tau2-bench's ``TerminationReason`` values.
TERMINATION_REASONS = (
    "user_stop",
    "agent_stop",
    "max_steps",
    "timeout",
    "too_many_errors",
    "agent_error",
    "user_error",
    "infrastructure_error",
    "context_window_exceeded",
    "unexpected_error",
)
#: Terminations that leave the denominator (tau2-bench's ``NON_EVALUABLE_TERMINATION_REASONS``).
NON_EVALUABLE_TERMINATION_REASONS = ("infrastructure_error", "context_window_exceeded")
#: The columns that tell one tau2 run (results file) from another.
EXPERIMENT = ("domain", "agent", "agent_model", "user_model")
#: Columns and types of ``trials``, in order.
TRIALS_SCHEMA: Mapping[str, pl.DataType] = {
    "task_id": pl.String(),
    "attempt": pl.Int64(),
    "success": pl.Boolean(),
    "reward": pl.Float64(),
    "termination_reason": pl.String(),
    "domain": pl.String(),
    "agent": pl.String(),
    "agent_model": pl.String(),
    "user_model": pl.String(),
    "seed": pl.Int64(),
    "simulation_id": pl.String(),
    "duration": pl.Float64(),
    "agent_cost": pl.Float64(),
    "user_cost": pl.Float64(),
    RAW: pl.String(),
    SCOPE: pl.String(),
}
_KEY = [*EXPERIMENT, "task_id", "attempt"]
_INFRA = "infrastructure_error"
_SUCCESS_TOLERANCE = 1e-6  # tau2's is_successful: (1 - 1e-6) <= reward <= (1 + 1e-6)


@dataclass(frozen=True)
class _Source:
    """One tau2 run on disk: its metadata file and, in the dir layout, its simulations."""

    path: Path
    meta: Path
    simulations: Path | None


def _sources(results: object) -> list[_Source]:
    """Every run named by files, directories (a run, or a folder of runs) and globs."""
    entries = [results] if isinstance(results, (str, os.PathLike)) else list(results)  # type: ignore[call-overload]
    if not entries:
        raise SourceError("tau2: no results given; give results files or directories.")
    found: list[_Source] = []
    for entry in entries:
        path = Path(entry)
        if path.is_dir() and (path / "results.json").is_file():
            found.append(_Source(path, path / "results.json", path / "simulations"))
        elif path.is_dir():
            inner = [p for p in sorted(path.iterdir()) if _is_json(p) or p.is_dir()]
            runs = [_one(p) for p in inner if p.is_file() or (p / "results.json").is_file()]
            if not runs:
                raise SourceError(f"`{path}` holds no tau2-bench results file or run directory.")
            found.extend(runs)
        else:
            found.extend(_one(p) for p in io.expand_paths([entry]))
    return list(dict.fromkeys(found))


def _one(path: Path) -> _Source:
    if path.is_dir():
        return _Source(path, path / "results.json", path / "simulations")
    sims = path.parent / "simulations"
    return _Source(path, path, sims if sims.is_dir() else None)


def _is_json(path: Path) -> bool:
    """Return whether ``path`` is a ``.json`` file, plain or compressed (``.json.gz``...)."""
    return strip_compression(path).suffix == ".json" and path.is_file()


def _load_json(path: Path) -> Any:
    """Read one JSON file through the one reader (depth, encoding, compression: one line)."""
    try:
        return load(path)
    except SourceError:
        raise
    except OSError as exc:
        raise SourceError(f"`{path}` cannot be read ({exc.strerror}).") from None


def _field(document: Any, dotted: str, path: Path) -> Any:
    value = document
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise InputError(f"`{path}` is not a tau2-bench results file: it has no `{dotted}`.")
        value = value[part]
    return value


def _simulations(
    source: _Source, meta: dict[str, Any], read: list[str]
) -> Iterator[tuple[Path, Any]]:
    """Each ``SimulationRun`` with the file it came from (dir layout: checked against the index)."""
    if source.simulations is None:
        sims = _field(meta, "simulations", source.meta)
        if not isinstance(sims, list):
            raise InputError(f"`{source.meta}`: `simulations` is not a list.")
        yield from ((source.meta, sim) for sim in sims)
        return
    files = (
        sorted(p for p in source.simulations.iterdir() if _is_json(p))
        if source.simulations.is_dir()
        else []
    )
    index = meta.get("simulation_index")
    if index is not None:
        indexed = {str(entry.get("id")) for entry in index if isinstance(entry, dict)}
        on_disk = {strip_compression(f).stem for f in files}
        if indexed != on_disk:
            gone, extra = sorted(indexed - on_disk), sorted(on_disk - indexed)
            raise InputError(
                f"`{source.meta}`: its simulation_index and `{source.simulations}` disagree "
                f"(missing files: {format_keys(gone, len(gone)) or 'none'}; files not in "
                f"the index: {format_keys(extra, len(extra)) or 'none'})."
            )
    for file in files:
        read.append(str(file))
        yield file, _load_json(file)


def _run_columns(meta: dict[str, Any], path: Path) -> dict[str, Any]:
    """Return the experiment columns of one run, from its ``info``."""
    where = f"`{path}`: info"
    agent_info, user_info = (
        _field(meta, "info.agent_info", path),
        _field(meta, "info.user_info", path),
    )
    for name, value in (("agent_info", agent_info), ("user_info", user_info)):
        if not isinstance(value, dict):
            raise InputError(f"{where} has `{name}` {value!r:.60}; it must be an object.")
    models = [agent_info.get("llm"), user_info.get("llm")]
    return {
        "domain": _key(
            _field(meta, "info.environment_info.domain_name", path), where, "domain_name"
        ),
        "agent": _key(
            _field(meta, "info.agent_info.implementation", path), where, "implementation"
        ),
        "agent_model": None if models[0] is None else _key(models[0], where, "agent_info.llm"),
        "user_model": None if models[1] is None else _key(models[1], where, "user_info.llm"),
    }


def _sim_row(sim: Any, file: Path, position: int) -> dict[str, Any]:
    """Return the columns of one simulation, its fields checked."""
    where = f"`{file}`: simulation {position}"
    if not isinstance(sim, dict):
        raise InputError(f"{where} is not an object.")
    for name in ("id", "task_id", "trial", "termination_reason"):
        if sim.get(name) is None:
            raise InputError(f"{where} has no `{name}`; every SimulationRun needs one.")
    reason = sim["termination_reason"]
    if reason not in TERMINATION_REASONS:
        raise InputError(
            f"{where} ({sim['id']}) has termination_reason {reason!r}; tau2-bench's are "
            f"{', '.join(TERMINATION_REASONS)}."
        )
    if not isinstance(sim["trial"], int) or isinstance(sim["trial"], bool):
        raise InputError(f"{where} ({sim['id']}) has trial {sim['trial']!r}; it must be an int.")
    reward_info = sim.get("reward_info")
    reward = reward_info.get("reward") if isinstance(reward_info, dict) else None
    where = f"{where} ({_key(sim['id'], where, 'id')})"
    return {
        "task_id": _key(sim["task_id"], where, "task_id"),
        "attempt": sim["trial"],
        "reward": _reward(reward, where),
        "termination_reason": reason,
        "seed": _number(sim.get("seed"), where, "seed", integer=True),
        "simulation_id": _key(sim["id"], where, "id"),
        "duration": _number(sim.get("duration"), where, "duration"),
        "agent_cost": _number(sim.get("agent_cost"), where, "agent_cost"),
        "user_cost": _number(sim.get("user_cost"), where, "user_cost"),
        "log": str(file),
    }


def _reward(value: Any, where: str) -> float | None:
    """Return a reward: a number in [0, 1] (tau2's is a product of checks), or null."""
    reward = _number(value, where, "reward_info.reward")
    if reward is not None and not 0.0 <= reward <= 1.0:
        raise InputError(
            f"{where} has `reward_info.reward` {reward!r}; tau2-bench's rewards lie in [0, 1]."
        )
    return reward


def _key(value: Any, where: str, name: str) -> str:
    """Return an identifier as text: tau2 writes a string (or a number); refuse anything else."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    kind = "a JSON object or array" if isinstance(value, (dict, list)) else repr(value)
    raise InputError(f"{where} has `{name}` {kind} where a key belongs; it must be text.")


def _number(value: Any, where: str, name: str, *, integer: bool = False) -> Any:
    """Return a finite number (an int where ``integer``) or null; refuse anything else."""
    if value is None:
        return None
    wanted = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted) or not math.isfinite(value):
        shown = "a JSON object or array" if isinstance(value, (dict, list)) else repr(value)
        kind = "an integer" if integer else "a finite number"
        raise InputError(f"{where} has `{name}` {shown[:60]}; it must be {kind} or null.")
    return value if integer else float(value)


def _read_rows(sources: list[_Source]) -> tuple[pl.DataFrame, list[str]]:
    """Every simulation of every run as one frame (``log``: the file it came from)."""
    read: list[str] = []
    rows: list[dict[str, Any]] = []
    for source in sources:
        read.append(str(source.meta))
        meta = _load_json(source.meta)
        if not isinstance(meta, dict):
            raise InputError(f"`{source.meta}` is not a tau2-bench results file (not an object).")
        run = _run_columns(meta, source.meta)
        for position, (file, sim) in enumerate(_simulations(source, meta, read)):
            rows.append({**_sim_row(sim, file, position), **run})
    schema = {n: t for n, t in TRIALS_SCHEMA.items() if n not in ("success", RAW, SCOPE)}
    frame = pl.DataFrame(rows, schema={**schema, "log": pl.String()}, orient="row")
    return frame, read


def _deduplicate(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[Superseded]]:
    """Apply tau2's resume rule: one simulation per key; retries supersede infra errors."""
    frame = frame.sort([*_KEY, "log", "simulation_id"], nulls_last=False)
    same = [*_KEY, "simulation_id", "termination_reason", "reward", "seed"]
    first = pl.struct(same).is_first_distinct()
    copies = frame.filter(~first).join(
        frame.filter(first).select(*same, pl.col("log").alias("by")), on=same, nulls_equal=True
    )
    frame = frame.filter(first)
    others = (pl.col("termination_reason") != _INFRA).any().over(_KEY)
    infra = pl.col("termination_reason") == _INFRA
    # An infra error is replaced by the evaluable run of its trial, else by the first infra.
    keep = ~infra | (~others & (pl.int_range(pl.len()).over(_KEY) == 0))
    retried = frame.filter(~keep)
    frame = frame.filter(keep)
    replacing = frame.select(
        *_KEY, pl.col("log").alias("by"), pl.col("simulation_id").alias("by_id")
    )
    retried = retried.join(replacing, on=_KEY, nulls_equal=True)
    superseded = _grouped(copies, "duplicate") + _grouped(retried, "retry")
    _refuse_conflicts(frame)
    return frame, superseded


def _grouped(dropped: pl.DataFrame, kind: str) -> list[Superseded]:
    """One report entry per (file, replacing file): what was dropped, and how many."""
    counts = dropped.group_by("log", "by").len().sort("log", "by")
    return [
        Superseded(log, by, f"{kind}, {n} simulation{'s' if n > 1 else ''}")
        for log, by, n in zip(*counts, strict=True)
    ]


def _refuse_conflicts(frame: pl.DataFrame) -> None:
    """Two different simulations of one trial: an error naming the files and the key."""
    clash = frame.filter(pl.len().over(_KEY) > 1)
    if clash.height == 0:
        return
    first = clash.head(1).select(*_KEY, RAW).row(0, named=True)
    pair = clash.join(clash.head(1).select(_KEY), on=_KEY, nulls_equal=True)
    columns = pair.select("log", "simulation_id", "termination_reason", "reward").head(2)
    shown = "; ".join(
        f"`{log}` (simulation {sim}, {reason}, reward {reward})"
        for log, sim, reason, reward in zip(*columns, strict=True)
    )
    raise InputError(
        f"tau2: task `{first[RAW]}` trial {first['attempt']} of domain {first['domain']}, "
        f"agent {first['agent']} ({first['agent_model']}), user {first['user_model']} has "
        f"{pair.height} different simulations: {shown}. tau2-bench keeps one run per (task, "
        "trial, seed); give the files of one run (a resumed run's final file supersedes its "
        "checkpoint only for infrastructure errors)."
    )


def _split(
    frame: pl.DataFrame, non_evaluable: Sequence[str]
) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Split into ``trials`` (outcomes) and ``excluded`` (non-evaluable, missing rewards).

    Also returns the files that gave ``trials`` a row (the report's logs used).
    """
    reason = (
        pl.when(pl.col("termination_reason").is_in(list(non_evaluable)))
        .then(pl.col("termination_reason"))
        .when(pl.col("reward").is_null())
        .then(pl.lit("no_reward"))
    )
    marked = frame.with_columns(reason.alias("reason"))
    excluded = marked.filter(pl.col("reason").is_not_null()).select(
        "log", *_KEY, "reason", pl.col("simulation_id").alias("detail"), RAW, SCOPE
    )
    success = (pl.col("reward") - 1.0).abs() <= _SUCCESS_TOLERANCE
    trials = marked.filter(pl.col("reason").is_null()).with_columns(success.alias("success"))
    used = trials["log"].unique().to_list()
    return (
        trials.select(list(TRIALS_SCHEMA)).sort(_KEY, nulls_last=False),
        excluded.sort(["log", *_KEY], nulls_last=False),
        used,
    )


def read(
    results: object,
    *,
    to: str = "trials",
    mapping: Mapping[str, str] | None = None,
    key: Sequence[str] = (),
    non_evaluable: Sequence[str] = NON_EVALUABLE_TERMINATION_REASONS,
) -> Imported:
    """Read tau2-bench results (either layout) into ``trials`` or ``forks``.

    Parameters
    ----------
    results
        Results files, run directories (dir layout), folders of either, or globs.
    to
        ``"trials"`` (default) or ``"forks"``: the trials mapped to forks with ``mapping``
        (polars SQL expressions over the trials columns, as in :mod:`recoverylab.adapters.table`;
        e.g. ``{"method": "CASE WHEN agent_model = 'o4-mini' THEN 'none' ELSE 'retry' END",
        "condition": "'clean'", "delay": "CASE WHEN agent_model = 'o4-mini' THEN NULL ELSE 1
        END"}``), paired by domain and attempt (plus ``key``).
    mapping, key
        Only for ``to="forks"``.
    non_evaluable
        Termination reasons sent to ``excluded`` (default: tau2-bench's).

    Returns
    -------
    Imported
        ``tables["trials"]`` (or ``["forks"]``), ``excluded`` (log, the trial key, reason =
        the termination reason or ``no_reward``, detail = the simulation id) and the report.

    Raises
    ------
    SourceError
        A path that matches nothing, a file that is not JSON.
    InputError
        A file that is not a tau2 results file (the missing field named), a dir layout whose
        index and files disagree, two different simulations of one (task, trial).

    Examples
    --------
    >>> import tempfile
    >>> from recoverylab.synth.tau2_results import write_tau2_results
    >>> paths = write_tau2_results(tempfile.mkdtemp(), domains=("retail",), tasks=3, trials=2)
    >>> read(paths).tables["trials"].select("domain", "agent_model").unique().height
    2
    """
    if to not in ("trials", "forks"):
        raise ParameterError(f"tau2: `to` is {to!r}; it must be 'trials' or 'forks'.")
    unknown = [r for r in non_evaluable if r not in TERMINATION_REASONS]
    if unknown:
        raise ParameterError(
            f"tau2: `non_evaluable` names {unknown[0]!r}; termination reasons are "
            f"{', '.join(TERMINATION_REASONS)}."
        )
    sources = _sources(results)
    frame, files_read = _read_rows(sources)
    frame, identity = qualify(frame.with_columns(pl.col("domain").alias(SCOPE)), "domain", "tau2")
    frame, superseded = _deduplicate(frame)
    trials, excluded, used = _split(frame, non_evaluable)
    tables = {"trials": trials}
    hint = ""
    if to == "forks":
        pair_by = list(dict.fromkeys(["domain", "attempt", *key]))
        tables, _ = table.from_frame(trials.lazy(), to="forks", mapping=mapping, key=pair_by)
        hint = f"pair by {', '.join(pair_by)}"
    report = ReadReport(
        format="tau2",
        files_read=tuple(sorted(files_read)),
        used=tuple(sorted(used)),
        superseded=tuple(superseded),
        unit="simulations",
        hint=hint,
    ).with_identity(identity)
    return Imported(tables, excluded, report.with_tables(tables, excluded))
