"""Harbor (Terminal-Bench) job directories in: trials, forks and takeover tables (ARCHITECTURE §8).

Harbor writes one directory per job and, inside it, one directory per trial with a
``result.json`` (Harbor's ``TrialResult``). This adapter reads those files directly, by the field
names of Harbor's pydantic models (Harbor 0.26.0: ``harbor/models/trial/result.py``,
``trial/config.py``, ``verifier/result.py``, ``job/config.py``), so it needs no ``harbor`` package
(Harbor needs Python >= 3.12). Reading is one polars scan over every file (see
:mod:`recoverylab.adapters._harbor_read`).

Sources
-------
Where each of our columns comes from, as a string (the same in Python and on the command line):

========================  ======================================================================
``task``                  ``TrialResult.task_name`` (the default ``task_id``)
``agent``                 ``agent_info.name``
``model``                 ``agent_info.model_info.name``
``source``                ``TrialResult.source`` (the dataset)
``job``                   the name of the trial's job directory
``agent_kwarg:NAME``      ``config.agent.kwargs[NAME]`` (the agent's configuration)
``agent_metadata:NAME``   ``agent_result.metadata[NAME]`` (what the agent reported)
``config:PATH``           any field of the trial's ``TrialConfig`` by dotted path
``job_config:PATH``       any field of the job's ``config.json`` (``JobConfig``) by dotted path
``literal:VALUE``         the same value on every trial
========================  ======================================================================

Which trials count
------------------
A trial is an outcome when Harbor's own ``TrialResult.reward_valid`` holds: its verifier recorded
a non-empty ``rewards`` dict and every recorded exception (``exception_info``, then each step's)
keeps a valid reward under Harbor's error policy, with the exception's ``policy_override``
applied (:mod:`recoverylab.adapters._harbor_policy`). So an ``AgentTimeoutError`` is an outcome
(the verifier graded what the agent left) while a ``SandboxBuildFailedError`` or an
``ApiRateLimitError`` is excluded with its exception type as the ``reason``; a trial with no
reward and no such exception is excluded as ``no_reward``, a valid trial without the chosen
reward key as ``no_reward_key``, a trial directory without ``result.json`` as ``unfinished``, and
a result Harbor's own models reject (an ``exception_info`` lacking ``exception_type`` or another
required field; Harbor skips such a trial when it loads the job) as ``invalid_result``.
The ``reward_valid`` and ``ExceptionInfo.policy`` values a file records are not read: they are
computed fields, which Harbor itself recomputes from its table whenever it loads a result.

``success`` comes from one reward key (``reward``; the only key when the results hold one):
binary rewards (0 or 1) by default, or ``reward >= success`` for a threshold.

Repeats and duplicates
----------------------
Harbor runs ``n_attempts`` trials of each (task, agent configuration) in a job, with random trial
names and no attempt number. ``attempt`` (0, 1, ...) numbers the trials of one task, arm (every
mapped column), agent and model by start time (then trial name), across jobs. Before numbering,
duplicates are resolved by Harbor's record of its runs, never by a rule of ours alone:

1. the same trial ``id`` in two files (a job read twice, a copied trial): identical in every field
   read, the first file is kept and the others are excluded as ``duplicate`` (the detail names
   the file kept); different, an error naming both files;
2. the same ``(config.job_id, trial_name)`` with different ids: Harbor retried that trial in place
   (a retry reuses the trial's config and name); the earlier one must have recorded an exception
   and is superseded by the later one (``retry``);
3. a regrade (``config.source_trial`` with action ``regrade``: Harbor re-ran only the verifier on
   another trial's agent output) supersedes the trial it re-graded, found by trial id or
   directory, when that trial is read too (``regrade``);
4. more trials of one (job id, task, agent configuration) than the job's ``n_attempts``: the job
   was resumed after some trials failed (Harbor re-runs them under new names); the earliest
   trials that recorded an exception are superseded by the later ones (``resumed``).

A superseded trial and its replacement must agree on every mapped value (else an error naming both
files and the column); surplus trials that did not fail are an error naming two of them.

Task identity
-------------
Harbor names tasks per dataset (``TrialResult.source``: two datasets may both hold a
``hello-world``), so ``task_id`` is ``<source>/<task>`` whenever the trial records a source, the
task as written otherwise; ``raw_task_id`` and ``task_scope`` (the source) are kept in ``trials``,
``forks`` and ``excluded``, and in takeover ``states`` (the state id as written and its dataset;
:mod:`recoverylab.adapters._identity`). Attempts are numbered, and duplicates resolved, per
qualified task.

The ``trials`` table (``--to trials``)
--------------------------------------
One row per trial whose reward counts: ``task_id`` (str), ``attempt`` (int), ``success`` (bool),
``reward`` (float, the chosen key), the mapped columns (str; ``delay`` int), ``agent``, ``model``
(str), ``exception_type`` (str, null when none: an exception that kept the reward valid),
``started_at``, ``finished_at`` (UTC datetimes), ``seconds`` and ``agent_seconds`` (float), ``job``
(the job directory's name), ``trial_name`` and ``file`` (str). ``excluded`` has ``log`` (the
result file or trial directory), ``task_id``, ``attempt``, ``reason`` and ``detail``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from recoverylab._errors import InputError, ParameterError
from recoverylab.adapters._harbor_policy import has_valid_reward
from recoverylab.adapters._harbor_read import REQUIRED, HarborRead, read_jobs
from recoverylab.adapters._harbor_resolve import resolve_duplicates
from recoverylab.adapters._identity import RAW, SCOPE, qualify
from recoverylab.adapters._report import Imported, ReadReport

__all__ = ["EXCLUDED_SCHEMA", "FORMS", "forks", "parse_source", "takeover", "trials"]

Jobs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
FORMS = (
    "task, agent, model, source, job, agent_kwarg:NAME, agent_metadata:NAME, config:PATH, "
    "job_config:PATH or literal:VALUE"
)
_FIXED = {"task": "task_name", "agent": "agent", "model": "model", "source": "source"}
_NAMED = ("agent_kwarg", "agent_metadata", "config", "job_config", "literal")
EXCLUDED_SCHEMA = pl.Schema(
    {
        "log": pl.String(),
        "task_id": pl.String(),
        "attempt": pl.Int64(),
        "reason": pl.String(),
        "detail": pl.String(),
        RAW: pl.String(),
        SCOPE: pl.String(),
    }
)
_FUNNEL = ("aware", "root_cause_fixed", "derived_fixed")


@dataclass(frozen=True)
class Source:
    """A parsed source for one column: ``kind`` and, for the named kinds, ``name``."""

    param: str
    kind: str
    name: str = ""

    @property
    def leaf(self) -> tuple[str, str] | None:
        """The (top-level field, field) of ``TrialResult`` read as text for this source."""
        if self.kind == "agent_kwarg":
            return ("config", "agent")
        if self.kind == "agent_metadata":
            return ("agent_result", "metadata")
        if self.kind == "config":
            return ("config", self.name.split(".")[0])
        return None

    def text(self) -> str:
        return f"{self.kind}:{self.name}" if self.kind in _NAMED else self.kind


def parse_source(param: str, spec: object) -> Source:
    """Parse a source string (see the module docstring); raise ParameterError otherwise."""
    if not isinstance(spec, str):
        raise ParameterError(
            f"parameter `{param}` is a {type(spec).__name__}; give one of {FORMS}."
        )
    kind, colon, name = spec.partition(":")
    if kind in _FIXED or kind == "job":
        if not colon:
            return Source(param, kind)
    elif kind in _NAMED and name and (kind == "literal" or _path_ok(name)):
        return Source(param, kind, name)
    raise ParameterError(f"parameter `{param}` is {spec!r}; it must be one of {FORMS}.")


def _path_ok(path: str) -> bool:
    return all(part and "'" not in part and "\\" not in part for part in path.split("."))


def _json_path(parts: Sequence[str]) -> str:
    return "$" + "".join(f"['{p}']" for p in parts)


def trials(
    jobs: Jobs,
    *,
    columns: Mapping[str, str] | None = None,
    task_id: str = "task",
    reward: str | None = None,
    success: float | None = None,
) -> Imported:
    """Read Harbor jobs into a ``trials`` table (see the module docstring) and ``excluded``.

    Parameters
    ----------
    jobs
        Job directories (or directories of jobs, trial directories, their ``result.json``), globs.
    columns
        Column name -> source of each mapped column (``{"condition": "agent_kwarg:condition"}``).
    task_id
        Source of ``task_id`` (default: the task name).
    reward
        The reward key read for ``success`` (default: the only key).
    success
        Threshold for non-binary rewards (``success = reward >= success``).

    Returns
    -------
    Imported
        ``tables={"trials": ...}``, ``excluded`` and the read report.

    Raises
    ------
    ParameterError, InputError, SourceError
        On a bad source, an unknown or ambiguous reward key, a file that is not a TrialResult,
        conflicting duplicates; each one line naming the file.
    """
    used, excluded, report = _load(jobs, _sources(task_id, columns or {}), reward, success)
    return _imported(report, {"trials": used}, excluded, used)


def forks(
    jobs: Jobs,
    *,
    condition: str,
    method: str,
    delay: str,
    none_label: str = "none",
    task_id: str = "task",
    reward: str | None = None,
    success: float | None = None,
) -> Imported:
    """Read Harbor jobs into a ``forks`` table (§3.1): one row per trial, ``attempt`` to pair by.

    Each arm of the experiment is the (``condition``, ``method``, ``delay``) its sources give;
    ``method == none_label`` marks the no-recovery trials, whose ``delay`` is left null. The table
    keeps ``attempt``, ``agent`` and ``model``: pair by ``attempt`` (and by the model or agent when
    the jobs hold several). Other parameters as for :func:`trials`.
    """
    cols = {"condition": condition, "method": method, "delay": delay}
    used, excluded, report = _load(jobs, _sources(task_id, cols), reward, success)
    table = used.select(
        "task_id",
        "condition",
        "method",
        pl.when(pl.col("method") == none_label)
        .then(None)
        .otherwise(pl.col("delay"))
        .alias("delay"),
        "success",
        "attempt",
        "agent",
        "model",
        RAW,
        SCOPE,
    ).with_columns(pl.col("method").replace(none_label, "none"))
    from recoverylab.schema import validate

    table = validate(table, "forks", key=("attempt", "agent", "model")).collect()
    return _imported(report, {"forks": table}, excluded, used)


def takeover(
    jobs: Jobs,
    *,
    state: str = "task",
    agent: str = "agent",
    workflow: str | None = None,
    root_cause: str | None = None,
    depth: str = "literal:0",
    reward: str | None = None,
    success: float | None = None,
) -> Imported:
    """Read Harbor jobs into takeover ``states`` and ``attempts`` (§3.4).

    A state is the ``state`` key of a trial (default its task); the attempt's ``agent`` comes from
    ``agent`` and its ``repeat`` numbers the trials of (state, agent) whose reward counts, in
    attempt order (excluded trials leave no gap). ``passed`` is ``success``; ``aware``,
    ``root_cause_fixed`` and ``derived_fixed`` are the reward keys of those names (1 = true, or at
    least ``success``). ``workflow_id`` and ``root_cause_id`` default to the state; ``replay_ok``
    and ``expected_ok`` are true (trials whose environment never came up are excluded instead).
    """
    cols = {"agent_key": agent, "depth": depth}
    given = {"workflow_id": workflow, "root_cause_id": root_cause}
    cols |= {name: spec for name, spec in given.items() if spec is not None}
    used, excluded, report = _load(jobs, _sources(state, cols), reward, success, extra=_FUNNEL)
    used = used.rename({"task_id": "state_id"})
    # a workflow or root cause that defaults to the state is the state's qualified id
    used = used.with_columns(pl.col("state_id").alias(n) for n, s in given.items() if s is None)
    states = used.group_by("state_id").agg(
        pl.col("workflow_id", "root_cause_id", "depth").unique(), pl.col(RAW, SCOPE).first()
    )
    for name in ("workflow_id", "root_cause_id", "depth"):
        clash = states.filter(pl.col(name).list.len() > 1)
        if clash.height:
            raise InputError(
                f"harbor takeover: state `{clash['state_id'][0]}` has several `{name}` values "
                f"({', '.join(map(str, clash[name][0].to_list()))})."
            )
    states = states.select(
        "state_id",
        *(pl.col(n).list.first() for n in ("workflow_id", "root_cause_id", "depth")),
        replay_ok=pl.lit(True),
        expected_ok=pl.lit(True),
        **{RAW: pl.col(RAW), SCOPE: pl.col(SCOPE)},  # the state's id as written, its dataset
    ).sort("state_id")
    attempts = used.select(
        "state_id",
        pl.col("agent_key").alias("agent"),
        # repeats run 0, 1, ... over the attempts that count (as Harbor's pass@k counts them)
        (pl.col("attempt").rank("ordinal").over("state_id", "agent_key") - 1)
        .cast(pl.Int64)
        .alias("repeat"),
        *_FUNNEL,
        pl.col("success").alias("passed"),
        pl.col("agent_seconds").alias("seconds"),
    ).sort("state_id", "agent", "repeat")
    from recoverylab.schema import validate

    tables = {
        "states": validate(states, "states").collect(),
        "attempts": validate(attempts, "attempts").collect(),
    }
    return _imported(report, tables, excluded, used)


#: Column names the adapter uses itself (outputs and the fields it reads).
_RESERVED = frozenset(
    [
        "task_id",
        "attempt",
        "success",
        "reward",
        "agent",
        "model",
        "exception_type",
        "started_at",
        "finished_at",
        "seconds",
        "agent_seconds",
        "job",
        "trial_name",
        "file",
        "id",
        "task_name",
        "trial_uri",
        "task_ref",
        "task_checksum",
        "source",
        "agent_version",
        "rewards",
        "exceptions",
        "agent_started_at",
        "agent_finished_at",
        "job_dir",
        "config",
    ]
)


def _sources(task_id: str, columns: Mapping[str, str]) -> dict[str, Source]:
    bad = sorted(n for n in columns if n in _RESERVED or n.startswith("_") or "." in n)
    if bad:
        raise ParameterError(
            f"import harbor: column `{bad[0]}` is a name the adapter uses itself; rename it."
        )
    sources = {"task_id": parse_source("task_id", task_id)}
    sources |= {name: parse_source(name, spec) for name, spec in columns.items()}
    return sources


def _imported(
    report: ReadReport, tables: dict[str, pl.DataFrame], excluded: pl.DataFrame, used: pl.DataFrame
) -> Imported:
    pair = ["attempt"] + [c for c in ("agent", "model") if used[c].n_unique() > 1]
    hint = f"pair by {', '.join(pair)}" if "forks" in tables else ""
    report = ReadReport(
        format="harbor",
        files_read=report.files_read,
        used=report.used,
        superseded=report.superseded,
        unit="trials",
        hint=hint,
    ).with_identity(report.identity)
    return Imported(tables, excluded, report.with_tables(tables, excluded))


def _load(
    jobs: Jobs,
    sources: dict[str, Source],
    reward: str | None,
    success: float | None,
    extra: Sequence[str] = (),
) -> tuple[pl.DataFrame, pl.DataFrame, ReadReport]:
    """Read, map, resolve duplicates, classify and number the trials of ``jobs``."""
    leaves = [s.leaf for s in sources.values() if s.leaf is not None]
    read = read_jobs(jobs if not isinstance(jobs, (str, os.PathLike)) else [jobs], leaves)
    _check_required(read.trials)
    frame = _map(read, sources).with_columns(*_validity(), _utc("started_at").alias("_start"))
    frame, identity = qualify(frame.with_columns(pl.col("source").alias(SCOPE)), "source", "harbor")
    frame, superseded, copies = resolve_duplicates(frame, list(sources), _capacities(read))
    frame = _number(frame, [c for c in sources if c != "task_id"])
    frame, threshold = _reward(frame, reward, success, extra)
    kept = pl.col("_valid") & pl.col("_reward").is_not_null()
    used = _outcome_rows(frame.filter(kept), threshold, list(sources), extra)
    excluded = pl.concat(
        [_excluded_rows(frame.filter(~kept)), _unfinished(read), _copy_rows(copies)],
        how="vertical",
    ).sort("reason", "log")
    report = ReadReport(
        format="harbor",
        files_read=read.files_read,
        used=tuple(sorted(used["file"].to_list())),
        superseded=tuple(superseded),
    ).with_identity(identity)
    return used, excluded, report


def _check_required(frame: pl.DataFrame) -> None:
    columns = {
        "agent_info.name": "agent",
        "agent_info.version": "agent_version",
        "task_id": "task_ref",
    }
    for field in REQUIRED:
        column = columns.get(field, field)
        bad = frame.filter(pl.col(column).is_null())
        if bad.height:
            raise InputError(
                f"harbor result `{bad['file'][0]}` has no `{field}` (TrialResult requires it); "
                f"{bad.height} file{'s' if bad.height > 1 else ''} lack it."
            )


def _map(read: HarborRead, sources: dict[str, Source]) -> pl.DataFrame:
    """Add one String column per source; a trial without the value is an error naming it."""
    frame = read.trials
    names = {d: os.path.basename(d) for d in read.jobs}
    frame = frame.with_columns(pl.col("job_dir").replace_strict(names, default=None).alias("job"))
    plain = {n: s for n, s in sources.items() if s.leaf is None}
    frame = frame.with_columns(**{name: _expr(source, read) for name, source in plain.items()})
    frame = _paths(frame, {n: s for n, s in sources.items() if s.leaf is not None})
    for name, source in sources.items():
        if name == "delay":  # null on no-recovery trials; the forks contract checks the rest
            continue
        missing = frame.filter(pl.col(name).is_null())
        if missing.height:
            raise InputError(
                f"harbor result `{missing['file'][0]}`: `{name}` comes from {source.text()}, but "
                f"{missing.height} trial{'s have' if missing.height > 1 else ' has'} no such "
                "value (or it is null)."
            )
    for name in ("delay", "depth"):
        if name in sources:
            frame = _cast_int(frame, name, sources[name])
    return frame


def _paths(frame: pl.DataFrame, sources: dict[str, Source]) -> pl.DataFrame:
    """Add the JSON-path sources, each evaluated once per distinct JSON text it reads.

    An agent configuration is the same text on every trial of an arm: its paths are read on the
    few distinct texts and joined back, not parsed again for every trial.
    """
    by_leaf: dict[str, dict[str, pl.Expr]] = {}
    for name, source in sources.items():
        leaf = source.leaf
        assert leaf is not None
        by_leaf.setdefault(f"{leaf[0]}.{leaf[1]}", {})[name] = _expr(source, None)
    for column, exprs in by_leaf.items():
        distinct = frame.select(pl.col(column).unique()).with_columns(**exprs)
        frame = frame.join(distinct, on=column, how="left", nulls_equal=True)
    return frame


def _expr(source: Source, read: HarborRead | None) -> pl.Expr:
    kind, name = source.kind, source.name
    if kind in _FIXED:
        return pl.col(_FIXED[kind])
    if kind == "job":
        return pl.col("job")
    if kind == "literal":
        return pl.lit(name, dtype=pl.String)
    if kind == "job_config":
        assert read is not None
        values = {d: _dig(config, name.split(".")) for d, config in read.jobs.items()}
        return pl.col("job_dir").replace_strict(values, default=None, return_dtype=pl.String)
    leaf = source.leaf
    assert leaf is not None
    rest = (
        name.split(".")[1:]
        if kind == "config"
        else ["kwargs", name]
        if kind == "agent_kwarg"
        else [name]
    )
    column = pl.col(f"{leaf[0]}.{leaf[1]}")
    return column.str.json_path_match(_json_path(rest)) if rest else column


def _dig(value: Any, path: Sequence[str]) -> str | None:
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def _cast_int(frame: pl.DataFrame, name: str, source: Source) -> pl.DataFrame:
    """Cast an integer column read as text (``3``, ``3.0``); a value that is not one is named."""
    cast = pl.col(name).cast(pl.Float64, strict=False)
    bad = frame.filter((pl.col(name).is_not_null() & cast.is_null()) | (cast != cast.round(0)))
    if bad.height:
        raise InputError(
            f"harbor result `{bad['file'][0]}`: `{name}` comes from {source.text()} and is "
            f"{bad[name][0]!r}, not a whole number."
        )
    return frame.with_columns(cast.cast(pl.Int64))


def _validity() -> list[pl.Expr]:
    """Compute ``_valid`` (Harbor's ``reward_valid``) and ``_reason`` (the first voiding type)."""
    table = has_valid_reward()
    element = pl.element().struct
    keeps = (
        element.field("policy_override")
        .struct.field("has_valid_reward")
        .fill_null(element.field("exception_type").replace_strict(table, default=True))
    )
    types = pl.col("exceptions").list.eval(element.field("exception_type"))
    invalid = pl.col("exceptions").list.eval(element.field("exception_type").filter(~keeps))
    has_rewards = pl.col("rewards").is_not_null() & ~pl.col("rewards").is_in(["{}", "null"])
    rejected = pl.col("invalid_result").is_not_null()  # Harbor's models reject the file
    return [
        (has_rewards & (invalid.list.len() == 0) & ~rejected).alias("_valid"),
        pl.when(rejected)
        .then(pl.lit("invalid_result"))
        .otherwise(invalid.list.first().fill_null(pl.lit("no_reward")))
        .alias("_reason"),
        types.list.first().alias("exception_type"),
        pl.coalesce(
            "invalid_result",
            pl.col("exceptions").list.first().struct.field("exception_message").str.slice(0, 200),
        ).alias("_message"),
    ]


def _capacities(read: HarborRead) -> dict[str, int]:
    """``n_attempts`` of each job (by directory) whose ``config.json`` was read."""
    caps: dict[str, int] = {}
    for job_dir, config in read.jobs.items():
        if config:
            value = config.get("n_attempts", 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(
                    f"harbor job config `{os.path.join(job_dir, 'config.json')}`: `n_attempts` "
                    f"is {value!r}; JobConfig requires an integer >= 1."
                )
            caps[job_dir] = value
    return caps


def _number(frame: pl.DataFrame, arms: list[str]) -> pl.DataFrame:
    """Add ``attempt``: the trials of each (task, arm, agent, model) numbered by start time."""
    group = ["task_id", *arms, "agent", "model"]
    order = pl.struct(pl.col("_start"), pl.col("trial_name"), pl.col("id"), pl.col("file"))
    return frame.with_columns(
        (order.rank("ordinal").over(group) - 1).cast(pl.Int64).alias("attempt")
    )


def _rewards_by_row(valid: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Read the reward keys trial by trial, where polars' column-wide decoding failed.

    Rewards that are numbers to Harbor (a bool, an integer beyond 64 bits) but that polars
    cannot decode together (a mixed column) are read one by one as floats, so a value's
    meaning never depends on what other trials hold; a value that is no float names its file.
    """
    columns: dict[str, list[float | None]] = {key: [] for key in keys}
    for text, file in zip(valid["rewards"], valid["file"], strict=True):
        values = json.loads(text) if isinstance(text, str) else None
        for key in keys:
            value = values.get(key) if isinstance(values, dict) else None
            try:
                number = None if value is None else float(value)
            except (TypeError, ValueError, OverflowError):
                raise InputError(
                    f"harbor result `{file}`: reward `{key}` is {str(value)[:40]}, one of the "
                    "values that are not numbers; VerifierResult.rewards holds numbers."
                ) from None
            columns[key].append(number)
    return pl.DataFrame({key: pl.Series(key, v, dtype=pl.Float64) for key, v in columns.items()})


def _reward(
    frame: pl.DataFrame, reward: str | None, success: float | None, extra: Sequence[str]
) -> tuple[pl.DataFrame, float]:
    """Decode the rewards of valid trials into ``_reward`` (the chosen key) and ``extra`` keys.

    Returns the frame and the success threshold (1 for binary rewards).
    """
    valid = frame.filter(pl.col("_valid"))
    if valid.height == 0:
        reasons = frame.group_by("_reason").len().sort("_reason")
        counts = ", ".join(f"{r} {n}" for r, n in reasons.iter_rows()) or "no trials"
        raise InputError(f"import harbor: no trial has a reward that counts ({counts}).")
    decoded = valid["rewards"].str.json_decode(infer_schema_length=None)
    keys = [f.name for f in decoded.dtype.fields] if isinstance(decoded.dtype, pl.Struct) else []
    keys_text = ", ".join(f"`{k}`" for k in keys) or "none"
    if reward is None:
        candidates = [k for k in keys if k not in extra]
        if len(candidates) != 1:
            raise ParameterError(
                f"import harbor: the trials' rewards have keys {keys_text}; choose one with "
                "`reward` (--reward KEY)."
            )
        reward = candidates[0]
    for key in (reward, *extra):
        if key not in keys:
            raise ParameterError(
                f"import harbor: no trial has reward key `{key}`; the rewards have keys "
                f"{keys_text}."
            )
    try:
        parts = decoded.struct.unnest().select([reward, *extra]).cast(pl.Float64)
    except pl.exceptions.PolarsError:
        parts = _rewards_by_row(valid, [reward, *extra])
    parts.columns = ["_reward", *extra]
    valid = pl.concat([valid, parts], how="horizontal")
    _check_binary(valid, reward, success, ["_reward", *extra])
    rest = frame.filter(~pl.col("_valid")).with_columns(
        pl.lit(None, pl.Float64).alias(c) for c in ["_reward", *extra]
    )
    frame = pl.concat([valid, rest], how="vertical")
    return frame, 1.0 if success is None else success


def _check_binary(
    frame: pl.DataFrame, reward: str, success: float | None, columns: list[str]
) -> None:
    if success is not None:
        return
    for column in columns:
        odd = frame.filter(pl.col(column).is_not_null() & ~pl.col(column).is_in([0.0, 1.0]))
        if odd.height:
            key = reward if column == "_reward" else column
            raise ParameterError(
                f"import harbor: reward `{key}` is {odd[column][0]} in `{odd['file'][0]}` (and "
                f"{odd.height - 1} more), not 0 or 1; give a threshold with `success` (--success)."
            )


def _outcome_rows(
    frame: pl.DataFrame, threshold: float, mapped: list[str], extra: Sequence[str]
) -> pl.DataFrame:
    start = _utc("started_at")
    end = _utc("finished_at")
    arms = [c for c in mapped if c != "task_id"]
    return frame.select(
        "task_id",
        "attempt",
        (pl.col("_reward") >= threshold).alias("success"),
        pl.col("_reward").alias("reward"),
        *arms,
        *(pl.col(c) >= threshold for c in extra),
        "agent",
        "model",
        "exception_type",
        start.alias("started_at"),
        end.alias("finished_at"),
        ((end - start).dt.total_microseconds() / 1e6).alias("seconds"),
        (
            (_utc("agent_finished_at") - _utc("agent_started_at")).dt.total_microseconds() / 1e6
        ).alias("agent_seconds"),
        "job",
        "trial_name",
        "file",
        RAW,
        SCOPE,
    ).sort(["task_id", *arms, "agent", "model", "attempt"], nulls_last=True)


def _utc(column: str) -> pl.Expr:
    """Parse an ISO timestamp as pydantic writes it (``Z``, an offset, or naive = UTC)."""
    text = pl.col(column).str.replace(r"Z$", "+00:00")
    text = pl.when(text.str.contains(r"[+-]\d\d:\d\d$")).then(text).otherwise(text + "+00:00")
    return text.str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%:z", time_unit="us", time_zone="UTC", strict=False
    )


def _excluded_rows(frame: pl.DataFrame) -> pl.DataFrame:
    reason = pl.when(pl.col("_valid")).then(pl.lit("no_reward_key")).otherwise(pl.col("_reason"))
    return frame.select(
        pl.col("file").alias("log"),
        "task_id",
        "attempt",
        reason.alias("reason"),
        pl.col("_message").fill_null(pl.col("rewards")).alias("detail"),
        RAW,
        SCOPE,
    ).cast(EXCLUDED_SCHEMA)


def _copy_rows(copies: pl.DataFrame) -> pl.DataFrame:
    return copies.select(
        pl.col("file").alias("log"),
        "task_id",
        pl.lit(None, pl.Int64).alias("attempt"),
        pl.lit("duplicate").alias("reason"),
        pl.format("the same trial as {}", "by").alias("detail"),
        RAW,
        SCOPE,
    ).cast(EXCLUDED_SCHEMA)


def _unfinished(read: HarborRead) -> pl.DataFrame:
    rows = [
        (d, None, None, "unfinished", "trial directory without result.json", None, None)
        for d in read.unfinished
    ]
    return pl.DataFrame(rows, schema=EXCLUDED_SCHEMA, orient="row")
