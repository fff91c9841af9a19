"""inspect_ai evaluation logs -> ``forks`` and takeover tables (ARCHITECTURE §8, §3.1, §3.4).

Logs are read only through ``inspect_ai.log`` (headers and sample summaries; full samples only for
a marker in the store or events), several files at a time. Each sample-epoch becomes one row;
what cannot be used goes to ``excluded`` with a reason, never counted as a failure:

========================  ===========================================================
reason                    meaning
========================  ===========================================================
``superseded_log``        an earlier run of the same eval (inspect's ``task_id`` and
                          model, and every header value the mapping reads); the latest
                          complete one is used (see ``_inspect_identity``)
``error``                 the sample raised an error
``limit``                 the sample hit a limit (tokens, messages, time...)
``unmapped``              a column's source has no value for this sample
``missing_score``         the chosen scorer gave no value
``invalid_score``         the value cannot be read as success (e.g. ``P`` without a
                          threshold, a string, NaN)
``recovery_not_applied``  (forks) the run ended before recovery fired; the ``none``
                          row carries the task forward (``end_action``)
========================  ===========================================================

Cluster keys are the samples' stable ``id`` (ints and strings unified as strings), never
inspect's per-run ids. Sample ids are unique only within a dataset, so ``task_id`` is
``<dataset>/<id>`` whenever the log records its dataset's name (``eval.dataset.name``), the id
alone otherwise; ``raw_task_id`` and ``task_scope`` (the dataset) are kept in ``forks`` and
``excluded`` (:mod:`recoverylab.adapters._identity`); takeover ``states`` are named from the
qualified id and carry the state id made from the raw one in ``raw_task_id``. With several
epochs an ``epoch`` column is added (pair by it); with several models a ``model`` column.

Both functions return the shared adapter shape, :class:`~recoverylab.adapters.Imported`
(``tables``, ``excluded`` and a :class:`~recoverylab.adapters.ReadReport` in ``report``: files
read, logs used, logs superseded and by which, samples per exclusion reason, rows per table),
that also unpacks as ``forks, excluded`` and ``states, attempts, excluded``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from recoverylab._errors import InputError, ParameterError, format_keys
from recoverylab.adapters._identity import RAW, SCOPE, qualify
from recoverylab.adapters._inspect_identity import latest_runs
from recoverylab.adapters._inspect_read import Log, read_logs
from recoverylab.adapters._mapping import (
    MISSING,
    Source,
    SourceSpec,
    parse_source,
    score_kind,
)
from recoverylab.adapters._report import Imported, ReadReport, Superseded

__all__ = [
    "EXCLUDED_SCHEMA",
    "EpochWarning",
    "InspectForks",
    "InspectTakeover",
    "forks",
    "takeover",
]

#: Columns of every ``excluded`` table.
EXCLUDED_SCHEMA = {
    "log": pl.String,
    "task_id": pl.String,
    "epoch": pl.Int64,
    "reason": pl.String,
    "detail": pl.String,
    RAW: pl.String,
    SCOPE: pl.String,
}
Success = float | Callable[[Any], bool] | None
Epochs = Literal["forks", "independent"] | None
_SCORE_FIELDS = ("aware", "root_cause_fixed", "derived_fixed", "passed")
#: Columns of a sample row before the mapped values and the score parts (see ``_rows``).
_ROW_COLUMNS = (
    "log",
    "task_id",
    "epoch",
    "model",
    "error",
    "limit",
    "turns",
    "marker",
    "unmapped",
    SCOPE,
)
#: Takeover eligibility flags, read from sample metadata when present (true otherwise).
_FLAGS = ("replay_ok", "expected_ok")


class EpochWarning(UserWarning):
    """Several epochs, and nothing says whether they are seeded forks or independent runs."""


@dataclass(frozen=True, eq=False)
class InspectForks(Imported):
    """What :func:`forks` returns: an :class:`~recoverylab.adapters.Imported` with ``forks``.

    It is the shared adapter shape (``tables``, ``excluded``, ``report``) and unpacks as before
    into ``forks, excluded``.
    """

    @property
    def forks(self) -> pl.DataFrame:
        """The ``forks`` table (§3.1)."""
        return self.tables["forks"]

    @property
    def pair_by(self) -> tuple[str, ...]:
        """The extra pairing keys to pass to the paired protocol (``epoch``, ``model``)."""
        return tuple(c for c in ("model", "epoch") if c in self.forks.columns)

    def __iter__(self) -> Iterator[pl.DataFrame]:
        """Unpack as ``forks, excluded``."""
        return iter((self.forks, self.excluded))


@dataclass(frozen=True, eq=False)
class InspectTakeover(Imported):
    """What :func:`takeover` returns: an ``Imported`` with ``states`` and ``attempts``.

    It unpacks as before into ``states, attempts, excluded``.
    """

    @property
    def states(self) -> pl.DataFrame:
        """The takeover ``states`` table (§3.4)."""
        return self.tables["states"]

    @property
    def attempts(self) -> pl.DataFrame:
        """The takeover ``attempts`` table (§3.4)."""
        return self.tables["attempts"]

    def __iter__(self) -> Iterator[pl.DataFrame]:
        """Unpack as ``states, attempts, excluded``."""
        return iter((self.states, self.attempts, self.excluded))


def forks(
    logs: object,
    *,
    condition: SourceSpec,
    method: SourceSpec,
    delay: SourceSpec,
    none_label: str = "none",
    scorer: str | None = None,
    score_key: str | None = None,
    success: Success = None,
    recovery_marker: str | None = None,
    perturb_action: SourceSpec | None = None,
    epochs: Epochs = None,
    workers: int | None = None,
) -> InspectForks:
    """Read inspect logs into a ``forks`` table (§3.1) and the samples it could not use.

    Each log is one arm of the experiment: its ``condition``, ``method`` (``none_label`` marks the
    no-recovery continuation) and ``delay`` (null on ``none`` rows) come from where you say. Each
    sample-epoch is one branch; ``task_id`` is the sample ``id``.

    Epochs: with more than one, an ``epoch`` column is added and pairs are formed per epoch
    (``pair_by``). Epochs that are seeded forks (the recovery run of epoch k continues the same
    state as the no-recovery run of epoch k) identify rescue and harm separately; independent
    epochs identify only the effect (rescue - harm). Say which with ``epochs``; otherwise an
    :class:`EpochWarning` says so.

    Parameters
    ----------
    logs
        Log files (``.eval`` or ``.json``), directories, globs, ``EvalLog`` objects, or a list.
    condition, method, delay
        Where each value comes from: ``"task_arg:NAME"``, ``"eval_metadata:NAME"``,
        ``"sample_metadata:NAME"``, ``"model"``, ``"task"``, ``"literal:VALUE"``, or a callable
        given a mapping with ``task``, ``task_args``, ``model``, ``eval_metadata``,
        ``sample_metadata``, ``id`` and ``epoch``.
    none_label
        The ``method`` value of the no-recovery arm (written as ``none``).
    scorer
        The score to read; by default the only one in the logs (several: an error naming them).
    score_key
        For a dict-valued score (one scorer writing several values), the key to read; a
        dict-valued score without it is an error naming its keys.
    success
        How a score value becomes success: by default inspect's letters (``C`` true, ``I`` and
        ``N`` false; ``P`` is invalid), booleans, or the numbers 0 and 1; a number is a threshold
        (value >= threshold, letters as inspect's C=1, P=0.5, I=N=0); a callable maps a value.
    recovery_marker
        Where a recovery arm records whether recovery fired: ``"store:KEY"``,
        ``"sample_metadata:KEY"`` (a boolean) or ``"event:NAME"`` (an info event or span of that
        name fired). A recovery row whose recovery never fired is left to carry-forward: its
        ``none`` row gets ``perturb_action`` and ``end_action`` (the run's model turns).
    perturb_action
        Source of the action index at which the observation was perturbed (needed with
        ``recovery_marker``).
    epochs
        ``"forks"`` or ``"independent"``: what repeated epochs are (see above).
    workers
        Files read in parallel (default: up to 8).

    Returns
    -------
    InspectForks
        ``forks``: task_id, condition, method, delay (Int64), success, then ``epoch`` and
        ``model`` when there are several, then ``perturb_action`` and ``end_action`` with a
        marker. ``excluded``: log, task_id, epoch, reason, detail. ``pair_by`` lists the extra
        pairing keys; ``report`` is the read report. Unpacks as ``forks, excluded``.

    Raises
    ------
    ParameterError
        A source form that is not allowed, a task argument or eval metadata key a log lacks,
        several scorers and none chosen, a dict-valued score without ``score_key``, or mixed
        score types.
    InputError
        Two logs of one eval (inspect's ``task_id``) differ in a header value the mapping reads,
        or two different evals map to the same branch.
    SourceError
        A path that does not exist or is not a readable inspect log.

    Examples
    --------
    >>> from recoverylab.adapters import inspect as ri  # doctest: +SKIP
    >>> result = ri.forks("logs/", condition="task_arg:condition", method="task_arg:method",
    ...                   delay="task_arg:delay", epochs="forks")  # doctest: +SKIP
    """
    labels = {"condition": condition, "method": method, "delay": delay}
    sources = {name: parse_source(name, spec) for name, spec in labels.items()}
    if recovery_marker is not None:
        if perturb_action is None:
            raise ParameterError(
                "parameter `recovery_marker` needs `perturb_action` (where the observation was "
                "perturbed) to place the recovery point. Hint: perturb_action="
                "'sample_metadata:perturb_action'."
            )
        sources["perturb_action"] = parse_source("perturb_action", perturb_action)
    if epochs not in (None, "forks", "independent"):
        raise ParameterError(
            f"parameter `epochs` is {epochs!r}; it must be 'forks', 'independent' or None."
        )
    marker, full = _marker(recovery_marker)
    read = read_logs(logs, marker, full=full, workers=workers)
    used, superseded, dropped = latest_runs(read, sources, EXCLUDED_SCHEMA)
    score = (_scorer_name(used, scorer), _score_key(used, _scorer_name(used, scorer), score_key))
    rows = _rows(used, sources, marker is not None, {"score": score})
    rows, identity = qualify(rows, "dataset", "inspect")
    rows = _convert(rows, "score", "success", success, score[0])
    table, excluded = _forks_table(rows, none_label, marker is not None)
    if "epoch" in table.columns and epochs is None:
        warnings.warn(
            "inspect logs: several epochs, paired per epoch; nothing says whether the epochs are "
            "seeded forks (rescue and harm identified) or independent runs (only the effect "
            "identified). Hint: pass epochs='forks' or 'independent' (on the command line: "
            "--epochs).",
            EpochWarning,
            stacklevel=2,
        )
    excluded = pl.concat([dropped, excluded], how="vertical")
    extra = [c for c in ("model", "epoch") if c in table.columns]
    hint = f"pair by {', '.join(extra)}" if extra else ""
    report = _report(read, used, superseded, hint).with_identity(identity)
    return InspectForks({"forks": table}, excluded, report.with_tables({"forks": table}, excluded))


def takeover(
    logs: object,
    *,
    state: SourceSpec | None = None,
    agent: SourceSpec = "model",
    workflow: SourceSpec | None = None,
    root_cause: SourceSpec | None = None,
    depth: SourceSpec = "sample_metadata:depth",
    scores: Mapping[str, str] | None = None,
    workers: int | None = None,
) -> InspectTakeover:
    """Read inspect logs into takeover ``states`` and ``attempts`` (§3.4).

    A state is (sample, ``state`` key); the agent is the model (or ``agent``); the repeat is the
    epoch. ``aware``, ``root_cause_fixed``, ``derived_fixed`` and ``passed`` come from the scores
    named in ``scores`` (field -> scorer), else from scorers of those names, else from the keys of
    the only dict-valued score. ``replay_ok`` and ``expected_ok`` come from sample metadata when
    present (true otherwise); ``workflow_id`` and ``root_cause_id`` default to the state.

    Parameters
    ----------
    logs
        As for :func:`forks`.
    state
        Source of the state key (default: the sample id alone).
    agent, workflow, root_cause, depth
        Sources (see :func:`forks`); ``workflow`` and ``root_cause`` may be None.
    scores
        Field -> scorer name for the four outcome fields.
    workers
        Files read in parallel.

    Returns
    -------
    InspectTakeover
        ``states`` (state_id, workflow_id, root_cause_id, depth, replay_ok, expected_ok),
        ``attempts`` (state_id, agent, repeat, aware, root_cause_fixed, derived_fixed, passed,
        steps), ``excluded`` and ``report``. Unpacks as ``states, attempts, excluded``.
    """
    sources = {"agent": parse_source("agent", agent), "depth": parse_source("depth", depth)}
    for flag in _FLAGS:  # a boolean sample metadata key, true when absent
        sources[flag] = Source(flag, "sample_metadata", name=flag, default=True)
    for name, spec in (("state", state), ("workflow", workflow), ("root_cause", root_cause)):
        if spec is not None:
            sources[name] = parse_source(name, spec)
    read = read_logs(logs, None, full=False, workers=workers)
    used, superseded, dropped = latest_runs(read, sources, EXCLUDED_SCHEMA)
    rows = _rows(used, sources, False, _score_fields(used, scores))
    rows, identity = qualify(rows, "dataset", "inspect")
    states, attempts, excluded = _takeover_tables(rows)
    excluded = pl.concat([dropped, excluded], how="vertical")
    tables = {"states": states, "attempts": attempts}
    report = _report(read, used, superseded, "").with_identity(identity)
    report = report.with_tables(tables, excluded)
    return InspectTakeover(tables, excluded, report)


def _report(
    read: list[Log], used: list[Log], superseded: list[Superseded], hint: str
) -> ReadReport:
    """Return the read report of one import, before its tables are counted."""
    return ReadReport(
        format="inspect",
        files_read=tuple(sorted(log.location for log in read)),
        used=tuple(sorted(log.location for log in used)),
        superseded=tuple(superseded),
        unit="samples",
        hint=hint,
    )


def _marker(spec: str | None) -> tuple[Callable[[Any], Any] | None, bool]:
    """Parse ``recovery_marker``: a reader of one sample and whether it needs full samples."""
    if spec is None:
        return None, False
    kind, _, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if kind == "sample_metadata" and name:
        return (lambda s: (s.metadata or {}).get(name)), False
    if kind == "store" and name:
        return (lambda s: (s.store or {}).get(name)), True
    if kind == "event" and name:
        return (lambda s: _has_event(s, name)), True
    raise ParameterError(
        f"parameter `recovery_marker` is {spec!r}; it must be store:KEY, sample_metadata:KEY "
        "or event:NAME."
    )


def _has_event(sample: Any, name: str) -> bool:
    """Whether an info event with source ``name`` or a span named ``name`` was recorded."""
    return any(
        (e.event == "info" and e.source == name) or (e.event == "span_begin" and e.name == name)
        for e in sample.events
    )


def _score_names(used: list[Log]) -> list[str]:
    return sorted({n for log in used for s in log.samples for n in (s.scores or {})})


def _scorer_name(used: list[Log], scorer: str | None) -> str:
    names = _score_names(used)
    if scorer is not None:
        if scorer not in names:
            raise ParameterError(
                f"parameter `scorer` is {scorer!r}, but the logs have no such score "
                f"(they have: {', '.join(names) or 'none'})."
            )
        return scorer
    if len(names) == 1:
        return names[0]
    if not names:  # every sample dropped or unscored: no scorer to choose, nothing to import
        shown = ", ".join(f"`{log.location}`" for log in used[:3])
        more = f" and {len(used) - 3} more" if len(used) > 3 else ""
        raise InputError(f"inspect logs {shown}{more} hold no scored sample; nothing to import.")
    raise ParameterError(
        f"inspect logs have {len(names)} scorers ({', '.join(names) or 'none'}); choose one "
        "with `scorer` (--scorer)."
    )


def _score_fields(
    used: list[Log], scores: Mapping[str, str] | None
) -> dict[str, tuple[str, str | None]]:
    """Field -> (scorer, dict key or None) for the takeover outcome fields."""
    names = _score_names(used)
    unknown = sorted(set(scores or ()) - set(_SCORE_FIELDS))
    if unknown:
        raise ParameterError(
            f"parameter `scores` names {', '.join(unknown)}; the fields are "
            f"{', '.join(_SCORE_FIELDS)}."
        )
    found: dict[str, tuple[str, str | None]] = (
        {f: (scores[f], None) for f in scores}
        if scores is not None
        else {f: (f, None) for f in _SCORE_FIELDS if f in names}
    )
    missing = [f for f in _SCORE_FIELDS if f not in found]
    if missing and len(names) == 1 and _dict_valued(used, names[0]):
        found.update({f: (names[0], f) for f in missing})  # keys of a dict-valued score
        missing = []
    if missing:
        raise ParameterError(
            f"inspect logs: no score for {', '.join(missing)} "
            f"(scorers: {', '.join(names) or 'none'}"
            "). Hint: pass scores={'aware': SCORER, ...} or one dict-valued score with these keys."
        )
    return found


def _score_key(used: list[Log], name: str, key: str | None) -> str | None:
    """Check ``score_key`` against the values of score ``name`` (dicts need a key)."""
    keys = sorted(
        {
            str(k)
            for log in used
            for s in log.samples
            if s.scores and name in s.scores and isinstance(s.scores[name].value, dict)
            for k in s.scores[name].value
        }
    )
    if key is None and keys:
        raise ParameterError(
            f"inspect logs: score `{name}` holds several values ({', '.join(keys)}); choose one "
            "with `score_key` (--score-key)."
        )
    if key is not None and key not in keys:
        raise ParameterError(
            f"parameter `score_key` is {key!r}, but score `{name}` has no such key "
            f"(it has: {', '.join(keys) or 'none; its values are not dicts'})."
        )
    return key


def _dict_valued(used: list[Log], name: str) -> bool:
    """Whether the score ``name`` holds dicts (its keys can then be the outcome fields)."""
    return any(
        isinstance(s.scores[name].value, dict)
        for log in used
        for s in log.samples
        if s.scores and name in s.scores
    )


def _rows(
    used: list[Log],
    sources: dict[str, Source],
    with_marker: bool,
    wanted: dict[str, tuple[str, str | None]],
) -> pl.DataFrame:
    """One row per sample-epoch with every mapped value and the raw scores (Python objects in).

    ``wanted`` maps a row field to (scorer, dict key or None) for each score to read.
    """
    parts = ("kind", "letter", "num", "raw")
    names = (*_ROW_COLUMNS, *sources, *(f"{f}__{p}" for f in wanted for p in parts))
    columns: dict[str, list[Any]] = {c: [] for c in names}
    for log in used:
        per_log = {k: s.of_log(log) for k, s in sources.items() if not s.per_sample}
        log_view = {
            "task": log.task,
            "task_args": log.task_args,
            "model": log.model,
            "eval_metadata": log.metadata,
        }
        for s in log.samples:
            view = {**log_view, "sample_metadata": s.metadata or {}, "id": s.id, "epoch": s.epoch}
            values = {
                k: per_log[k] if k in per_log else src.of_sample(view) for k, src in sources.items()
            }
            gaps = [k for k, v in values.items() if v is MISSING]
            row = [
                log.location,
                str(s.id),
                s.epoch,
                log.model,
                s.error,
                s.limit,
                s.turn_count,
                log.markers.get((str(s.id), s.epoch)) if with_marker else None,
                ", ".join(gaps) or None,
                log.dataset,
                *(None if v is MISSING else v for v in values.values()),
            ]
            for scorer_name, key in wanted.values():
                score = (s.scores or {}).get(scorer_name)
                raw = None if score is None else score.value
                if key is not None:  # a key of a dict-valued score
                    raw = raw.get(key) if isinstance(raw, dict) else None
                row += [*score_kind(raw), raw]
            for column, value in zip(names, row, strict=True):
                columns[column].append(value)
    return _frame(columns, sources)


def _frame(columns: dict[str, list[Any]], sources: dict[str, Source]) -> pl.DataFrame:
    """Build the row frame, typing each mapped column (labels as strings, delay as an integer)."""
    raw = {c: v for c, v in columns.items() if c.endswith("__raw")}
    typed = {c: v for c, v in columns.items() if c not in raw and c not in sources}
    frame = pl.DataFrame(
        typed,
        schema_overrides={
            **dict.fromkeys(("epoch", "turns"), pl.Int64),
            **dict.fromkeys(("error", "limit", "unmapped", SCOPE), pl.String),
            "marker": pl.Boolean,
            **{c: pl.Float64 for c in typed if c.endswith("__num")},
            **{c: pl.String for c in typed if c.endswith(("__letter", "__kind"))},
        },
        strict=False,
    )
    return frame.with_columns(
        *(
            _typed(n, columns[n], n in ("delay", "depth", "perturb_action"), columns["log"])
            for n in sources
        ),
        *(pl.Series(name, values, dtype=pl.Object) for name, values in raw.items()),
    )


def _typed(name: str, values: list[Any], integer: bool, logs: list[str]) -> pl.Series:
    nested = next((i for i, v in enumerate(values) if isinstance(v, (dict, list))), None)
    if nested is not None:  # its JSON text would become a key nobody wrote (issue 39)
        raise InputError(
            f"inspect log `{logs[nested]}`: `{name}` is a JSON object or array "
            f"({str(values[nested])[:40]}) where a key or label belongs; it must be text or a "
            "number."
        )
    if name in _FLAGS:
        bad = [v for v in values if not isinstance(v, bool)]
        if bad:
            raise ParameterError(
                f"inspect logs: `{name}` must be true or false, but its source gives "
                f"{format_keys(dict.fromkeys(map(repr, bad)))}."
            )
        return pl.Series(name, values, dtype=pl.Boolean)
    if not integer:
        return pl.Series(name, [None if v is None else str(v) for v in values], dtype=pl.String)
    bad = [v for v in values if v is not None and not _is_int(v)]
    if bad:
        raise ParameterError(
            f"inspect logs: `{name}` must be a whole number, but its source gives "
            f"{format_keys(repr(v) for v in dict.fromkeys(map(str, bad)))}."
        )
    return pl.Series(name, [None if v is None else int(float(v)) for v in values], dtype=pl.Int64)


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return number == int(number)


def _convert(
    rows: pl.DataFrame, field: str, out: str, success: Success, label: str
) -> pl.DataFrame:
    """Add ``out`` (a score read as success; null where missing or invalid) and its problem."""
    kind, letter, num = (pl.col(f"{field}__{p}") for p in ("kind", "letter", "num"))
    ok: pl.Expr
    if callable(success):
        # a callable gives success only as a bool; a missing score stays missing
        values = [
            r if v is not None and isinstance(r := success(v), bool) else None
            for v in rows[f"{field}__raw"].to_list()
        ]
        rows = rows.with_columns(pl.Series(out, values, dtype=pl.Boolean))
        ok = pl.col(out)
    elif success is not None:
        if isinstance(success, bool) or not isinstance(success, (int, float)):
            raise ParameterError(
                f"parameter `success` is {success!r}; give a threshold number, a callable or None."
            )
        ok = pl.when(kind.is_in(["letter", "bool", "number"])).then(num >= success).otherwise(None)
    else:
        found = rows.filter(~kind.is_in(["missing", "other"])).group_by(kind).len().sort(kind)
        if found.height > 1:
            shown = ", ".join(f"{k} in {n} samples" for k, n in found.iter_rows())
            raise ParameterError(
                f"inspect logs: score `{label}` has mixed value types ({shown}). Hint: pass "
                "`success` as a threshold or a callable that reads every type."
            )
        ok = (
            pl.when(kind == "letter")
            .then(pl.when(letter == "P").then(None).otherwise(num > 0))
            .when(kind == "bool")
            .then(num > 0)
            .when((kind == "number") & num.is_in([0.0, 1.0]))
            .then(num > 0)
            .otherwise(None)
        )
    problem = (
        pl.when(kind == "missing")
        .then(pl.lit("missing_score"))
        .when(ok.is_null())
        .then(pl.lit("invalid_score"))
    )
    return rows.with_columns(ok.alias(out), problem.alias(f"{out}__problem"))


def _reason(problems: list[str]) -> pl.Expr:
    """First exclusion reason of a row (sample error, limit, unmapped, then score problems)."""
    sample = (
        pl.when(pl.col(c).is_not_null()).then(pl.lit(c)) for c in ("error", "limit", "unmapped")
    )
    return pl.coalesce(*sample, *problems)


def _excluded(rows: pl.DataFrame) -> pl.DataFrame:
    detail = (
        pl.when(pl.col("reason") == "error")
        .then(pl.col("error"))
        .when(pl.col("reason") == "limit")
        .then(pl.col("limit"))
        .when(pl.col("reason") == "unmapped")
        .then(pl.lit("no value for ") + pl.col("unmapped"))
        .when(pl.col("reason") == "recovery_not_applied")
        .then(pl.lit("the run ended before recovery; the none row carries it forward"))
    )
    return (
        rows.filter(pl.col("reason").is_not_null())
        .select(
            "log", "task_id", "epoch", "reason", detail.cast(pl.String).alias("detail"), RAW, SCOPE
        )
        .cast(dict(EXCLUDED_SCHEMA))  # type: ignore[arg-type]
    )


def _forks_table(
    rows: pl.DataFrame, none_label: str, with_marker: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    method = pl.when(pl.col("method") == none_label).then(pl.lit("none")).otherwise("method")
    reason = _reason(["success__problem"])
    if with_marker:
        skipped = (method != "none") & (pl.col("marker") == False)  # noqa: E712
        reason = pl.coalesce(reason, pl.when(skipped).then(pl.lit("recovery_not_applied")))
    rows = rows.with_columns(method.alias("method"), reason.alias("reason"))
    keys = ["task_id", "condition", "method", "delay"]
    extra = [c for c in ("model", "epoch") if rows[c].n_unique() > 1]
    table = rows.filter(pl.col("reason").is_null()).select(
        *keys,
        "success",
        *extra,
        RAW,
        SCOPE,
        *(
            pl.when(pl.col("method") == "none").then(pl.col(source)).alias(name)
            for source, name in (("perturb_action", "perturb_action"), ("turns", "end_action"))
            if with_marker
        ),
    )
    branch = [*keys, *extra]
    _check_branches(rows.filter(pl.col("reason").is_null()), branch)
    excluded = _excluded(rows)
    if with_marker:
        _check_carried(rows, table, [*keys[:2], *extra])
    return table.sort(branch, nulls_last=True), excluded


def _check_branches(good: pl.DataFrame, branch: list[str]) -> None:
    """Raise InputError naming the logs when two evals map to the same branch."""
    dup = good.filter(pl.struct(branch).is_duplicated())
    if dup.height == 0:
        return
    keys = dup.select(branch).unique().sort(branch, nulls_last=True)
    logs = sorted(set(dup["log"].to_list()))
    raise InputError(
        f"inspect logs: {keys.height} branches appear in more than one log "
        f"({'/'.join(branch)} {format_keys(keys.rows())}; logs {format_keys(logs)}); these are "
        "different evals (inspect task_ids), not retries of one another, yet map to the same "
        "condition, method and delay. Hint: check that the mapping reads every value that tells "
        "the arms apart, or remove the duplicate logs."
    )


def _check_carried(rows: pl.DataFrame, table: pl.DataFrame, episode: list[str]) -> None:
    """Check that every recovery that never fired is carried forward by its ``none`` row."""
    skipped = rows.filter(pl.col("reason") == "recovery_not_applied").select(*episode, "delay")
    none = table.filter(pl.col("method") == "none").select(*episode, "perturb_action", "end_action")
    joined = skipped.join(none, on=episode, how="left", nulls_equal=True)
    lost = joined.filter(
        ~(pl.col("perturb_action") + pl.col("delay") >= pl.col("end_action")).fill_null(False)
    )
    if lost.height:
        raise InputError(
            f"inspect logs: {lost.height} recovery runs never fired, but their no-recovery run "
            "did not end before the recovery point (perturb_action + delay >= end_action), so "
            f"they cannot be carried forward ({'/'.join([*episode, 'delay'])} "
            f"{format_keys(lost.select(*episode, 'delay').rows(), lost.height)}). Hint: check "
            "`recovery_marker` and `perturb_action`."
        )


def _takeover_tables(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    for f in _SCORE_FIELDS:
        rows = _convert(rows, f, f, None, f)
    rows = rows.with_columns(_reason([f"{f}__problem" for f in _SCORE_FIELDS]).alias("reason"))
    state, raw_state = pl.col("task_id"), pl.col(RAW)
    if "state" in rows.columns:
        state = pl.concat_str(["task_id", pl.col("state")], separator="/")
        raw_state = pl.concat_str([RAW, pl.col("state")], separator="/")
    good = rows.filter(pl.col("reason").is_null()).with_columns(
        state.alias("state_id"), raw_state.alias(f"__{RAW}")
    )
    states = (
        good.group_by("state_id")
        .agg(
            *(
                pl.col(source if source in rows.columns else "state_id")
                .first()
                .alias(f"{source}_id")
                for source in ("workflow", "root_cause")
            ),
            pl.col("depth").first(),
            *(pl.col(flag).all() for flag in _FLAGS),
            pl.col(f"__{RAW}").first().alias(RAW),  # the state id made from the raw sample id
            pl.col(SCOPE).first(),
        )
        .sort("state_id")
    )
    attempts = good.select(
        "state_id",
        "agent",
        pl.col("epoch").alias("repeat"),
        *_SCORE_FIELDS,
        pl.col("turns").alias("steps"),
    ).sort("state_id", "agent", "repeat")
    return states, attempts, _excluded(rows)
