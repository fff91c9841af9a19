"""SWE-bench evaluation trees in: one ``trials`` row per (instance, run) (``import swebench``).

SWE-bench's harness (``swebench.harness.run_evaluation``, 5.x) writes, under the directory it runs
in, one directory per graded instance and a run summary; this module reads them by the field
names of the harness's own writers (``swebench/harness/reporting.py``, ``grading.py``,
``constants/__init__.py``; SWE-bench is not needed), as a preset over the path templates of
:mod:`recoverylab.adapters._templates`:

======================================================================  =========================
path (relative to the directory the harness ran in)                      what
======================================================================  =========================
``logs/run_evaluation/{run_id}/{model}/{instance_id}/report.json``       ``get_eval_report``: an
                                                                         object keyed by the
                                                                         instance id holding
                                                                         ``patch_is_None``,
                                                                         ``patch_exists``,
                                                                         ``patch_successfully_``
                                                                         ``applied``,
                                                                         ``resolved``,
                                                                         ``tests_status`` (and
                                                                         5.x ``infra_failure``)
``logs/run_evaluation/{run_id}/{model}/{instance_id}/*``                 ``run_instance.log``,
                                                                         ``test_output.txt``,
                                                                         ``patch.diff``: the
                                                                         instance was run
``logs/run_evaluation/{run_id}/run.json``                                5.x: ``dataset``,
                                                                         ``split`` of the run
``{model}.{run_id}.json``                                                ``make_run_report``:
                                                                         ``resolved_ids``,
                                                                         ``unresolved_ids``,
                                                                         ``error_ids``,
                                                                         ``empty_patch_ids``,
                                                                         ``incomplete_ids``;
                                                                         ``schema_version`` 2
                                                                         adds
                                                                         ``infra_failure_ids``,
                                                                         ``ambiguous_failure_``
                                                                         ``ids``,
                                                                         ``failure_reasons``
======================================================================  =========================

``{model}`` is ``model_name_or_path`` with ``/`` written ``__`` (kept as written in ``model``).

Which instances count (the harness's own split of infrastructure from agent failures, §8):

* **resolved / unresolved**: ``report.json`` holds the instance with a boolean ``resolved``: an
  outcome (``success``), whatever the summary's ``ambiguous_failure_ids`` says (the harness keeps
  those in the denominator; ``ambiguous_failure`` and ``failure_reason`` are columns).
* **infra_failure**: in ``infra_failure_ids`` (or ``infra_failure: true`` in the report):
  excluded by reason, the harness's ``failure_reasons`` entry as the detail.
* **error**: the instance was run but its ``report.json`` is missing, empty, not JSON or has no
  entry for it (the harness's ``error_ids``): excluded by reason.
* **empty patch**: ``empty_patch_ids``, or a report with ``patch_is_None`` / no
  ``patch_exists``: an agent failure (``success`` false, ``empty_patch`` true) unless
  ``empty_patch="exclude"`` (excluded by reason ``empty_patch``).
* **incomplete**: ``incomplete_ids`` (no prediction): excluded by reason.

An instance's ``report.json`` and its run's summary must agree (a summary listing an instance as
resolved whose report says otherwise, or as an error whose report is valid): one line naming
both files. A rerun into the same tree (same ``run_id``) rewrites both, so they agree again.
Instance ids are scoped by the dataset the run graded against (``run.json``'s ``dataset``, or
``dataset=`` when the run predates it): ``task_id`` is ``<dataset>/<instance_id>``, the id as
written in ``raw_task_id`` (:mod:`recoverylab.adapters._identity`). The runs of one model are its
attempts, numbered from 0 in run-id order (``attempt``), so pass^k reads them as repeats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from recoverylab._errors import InputError, ParameterError, SourceError
from recoverylab._formats import read_decompressed, strip_compression
from recoverylab._json import load, load_object
from recoverylab.adapters import _templates, table
from recoverylab.adapters._identity import SCOPE, qualify
from recoverylab.adapters._report import Identity, Imported, ReadReport
from recoverylab.adapters._trials import TRIALS
from recoverylab.schema import validate

__all__ = ["EMPTY_PATCH", "SUMMARY_LISTS", "TRIALS_SCHEMA", "read"]

#: What an empty patch is: an agent failure (default) or excluded by reason.
EMPTY_PATCH = ("failure", "exclude")
#: The id lists of a run summary (``make_run_report``), each an instance's category.
SUMMARY_LISTS = (
    "resolved_ids",
    "unresolved_ids",
    "error_ids",
    "empty_patch_ids",
    "incomplete_ids",
)
_FLAGS = ("infra_failure_ids", "ambiguous_failure_ids")
_BASE = "logs/run_evaluation/{run_id}/{model}/{instance_id}"
_TEMPLATES = {
    "report": _BASE + "/report.json",
    "run": "logs/run_evaluation/{run_id}/run.json",
    "instance": _BASE + "/{file}",
    "top": "{name}.json",
}
#: Columns and types of ``trials``, in order.
TRIALS_SCHEMA: Mapping[str, pl.DataType] = {
    "task_id": pl.String(),
    "attempt": pl.Int64(),
    "success": pl.Boolean(),
    "reward": pl.Float64(),
    "model": pl.String(),
    "run_id": pl.String(),
    "dataset": pl.String(),
    "patch_exists": pl.Boolean(),
    "patch_successfully_applied": pl.Boolean(),
    "empty_patch": pl.Boolean(),
    "ambiguous_failure": pl.Boolean(),
    "failure_reason": pl.String(),
    "raw_task_id": pl.String(),
    SCOPE: pl.String(),
    "log": pl.String(),
}
_EXCLUDED = ("log", "task_id", "reason", "detail", "raw_task_id", SCOPE, "model", "run_id")


@dataclass
class _Unit:
    """What the tree says about one (run_id, model, instance_id)."""

    run_id: str
    model: str
    instance_id: str
    directory: Path | None = None
    report: Path | None = None
    summary: Path | None = None
    listed: str | None = None  # the summary list naming it
    flags: set[str] = field(default_factory=set)
    reason: str | None = None  # failure_reasons entry


@dataclass(frozen=True)
class _Report:
    """One ``report.json`` entry as the harness reads it (``resolved`` None: an error)."""

    resolved: bool | None
    detail: str = ""
    patch_exists: bool | None = None
    applied: bool | None = None
    infra: bool = False
    infra_reason: str | None = None


def _summary_of(path: Path, runs: set[str]) -> tuple[str, str] | None:
    """Return (model, run_id) of a top-level ``{model}.{run_id}.json`` (None: not a summary)."""
    name = strip_compression(path).name
    found = [r for r in runs if name.endswith(f".{r}.json") and len(name) > len(r) + 6]
    if not found:
        return None
    run_id = max(found, key=len)
    return name[: -len(f".{run_id}.json")], run_id


def _read_summary(path: Path) -> dict[str, Any]:
    """Read a run summary: its id lists checked (one line naming the file and the field)."""
    summary = load_object(path, what="SWE-bench run summary")
    version = summary.get("schema_version")
    if version not in (None, 2):
        raise InputError(
            f"swebench: `{path}` has schema_version {version!r}; this reader knows the run "
            "summaries of SWE-bench 4.x (none) and 5.x (2)."
        )
    for name in (*SUMMARY_LISTS, *_FLAGS):
        value = summary.get(name, [] if name in _FLAGS else None)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            problem = "has no" if value is None else "has a malformed"
            raise InputError(
                f"swebench: `{path}` {problem} `{name}` (a list of instance ids); it is not a "
                "SWE-bench run summary."
            )
    reasons = summary.get("failure_reasons", {})
    if not isinstance(reasons, dict):
        raise InputError(f"swebench: `{path}` has a malformed `failure_reasons` (an object).")
    return summary


def _read_report(path: Path, instance_id: str) -> _Report:
    """Read one ``report.json`` the way ``make_run_report`` does (an error is a result)."""
    if not read_decompressed(path).strip():
        return _Report(None, "report.json is empty")
    try:
        value = load(path)
    except SourceError as exc:  # the harness's error_ids: a report it cannot parse
        return _Report(None, str(exc))
    if not isinstance(value, dict):
        return _Report(None, "report.json is not a JSON object keyed by the instance id")
    _templates.keyed_rows(path, value, "instance_id")  # an id keyed twice: a bad tree
    entry = value.get(instance_id)
    if not isinstance(entry, dict) or not isinstance(entry.get("resolved"), bool):
        return _Report(None, f"report.json has no `resolved` entry for {instance_id}")
    flags = {k: entry.get(k) for k in ("patch_is_None", "patch_exists", "infra_failure")}
    for name, flag in flags.items():
        if flag is not None and not isinstance(flag, bool):
            raise InputError(
                f"swebench: `{path}` has `{name}` = {flag!r} for {instance_id}; it must be true "
                "or false."
            )
    exists = not entry.get("patch_is_None", False) and entry.get("patch_exists", True)
    reason = entry.get("infra_failure_reason")
    return _Report(
        entry["resolved"],
        patch_exists=bool(exists),
        applied=entry.get("patch_successfully_applied"),
        infra=bool(entry.get("infra_failure", False)),
        infra_reason=str(reason) if reason is not None else None,
    )


def _units(roots: Sequence[str | Path]) -> tuple[dict[tuple[str, str, str], _Unit], dict]:
    """Walk the trees: every instance a directory, a report or a summary names."""
    templates = {k: _templates.parse_template(v) for k, v in _TEMPLATES.items()}
    tree = _templates.match_tree(roots, templates)
    units: dict[tuple[str, str, str], _Unit] = {}
    seen: dict[tuple[str, str, str], Path] = {}

    def unit(run_id: str, model: str, instance_id: str) -> _Unit:
        key = (run_id, model, instance_id)
        return units.setdefault(key, _Unit(run_id, model, instance_id))

    for match in tree.matches["report"]:
        v = match.values
        key = (v["run_id"], v["model"], v["instance_id"])
        if key in seen:
            raise InputError(
                f"swebench: `{seen[key]}` and `{match.path}` both hold run {key[0]} of "
                f"{key[1]} on {key[2]}; read each run once."
            )
        seen[key] = match.path
        found = unit(*key)
        found.report, found.directory = match.path, match.path.parent
    for match in tree.matches["instance"]:
        v = match.values
        unit(v["run_id"], v["model"], v["instance_id"]).directory = match.path.parent
    runs = {m.values["run_id"]: m.path for m in tree.matches["run"]}
    run_ids = set(runs) | {k[0] for k in units}
    unmatched = list(tree.unmatched)
    summaries: list[Path] = []
    meta = {"runs": runs, "summaries": summaries, "unmatched": unmatched}
    for match in tree.matches["top"]:
        named = _summary_of(match.path, run_ids)
        if named is None:
            unmatched.append(match.path)
            continue
        summaries.append(match.path)
        _apply_summary(match.path, *named, unit)
    meta["unmatched"] = sorted(unmatched)
    return units, meta


def _apply_summary(path: Path, model: str, run_id: str, unit: Any) -> None:
    """Record what one run summary says of each instance it lists (one category each)."""
    summary = _read_summary(path)
    for listed in SUMMARY_LISTS:
        for instance_id in summary[listed]:
            found = unit(run_id, model, instance_id)
            if found.summary is not None:
                raise InputError(
                    f"swebench: `{path}` lists {instance_id} in `{found.listed}` and "
                    f"`{listed}`; an instance has one category."
                )
            found.summary, found.listed = path, listed
    for flag in _FLAGS:  # the harness's flags mark listed ids; a flag alone still names a unit
        for instance_id in summary.get(flag, []):
            found = unit(run_id, model, instance_id)
            found.flags.add(flag)
            found.summary = found.summary or path
    for instance_id, reason in summary.get("failure_reasons", {}).items():
        found = unit(run_id, model, instance_id)
        found.reason = str(reason)
        found.summary = found.summary or path


def _disagree(unit: _Unit, says: str) -> InputError:
    report = unit.report or (unit.directory / "report.json" if unit.directory else None)
    return InputError(
        f"swebench: `{unit.summary}` lists {unit.instance_id} in `{unit.listed}` but `{report}` "
        f"{says}; an instance's report.json and its run summary must agree. Hint: rerun the "
        "evaluation with the same run_id (it rewrites both) or remove the stale file."
    )


def _classify(unit: _Unit, empty_patch: str) -> dict[str, Any]:
    """One unit's row: its outcome, or its exclusion reason (see the module docstring)."""
    report = _read_report(unit.report, unit.instance_id) if unit.report else None
    listed = unit.listed
    row: dict[str, Any] = {
        "success": None,
        "patch_exists": None,
        "patch_successfully_applied": None,
        "empty_patch": False,
        "reason": None,
        "detail": None,
        "ambiguous_failure": "ambiguous_failure_ids" in unit.flags,
        "failure_reason": unit.reason,
        "log": str(unit.report or unit.directory or unit.summary),
    }
    if report is not None and report.resolved is not None:
        expect = {"resolved_ids": True, "unresolved_ids": False}
        if listed in ("error_ids", "incomplete_ids"):
            raise _disagree(
                unit, f"holds a graded result (resolved {str(report.resolved).lower()})"
            )
        if listed in expect and expect[listed] != report.resolved:
            raise _disagree(unit, f"says resolved {str(report.resolved).lower()}")
        if listed == "empty_patch_ids" and report.patch_exists:
            raise _disagree(unit, "holds a patch that exists")
        row.update(
            success=report.resolved,
            patch_exists=report.patch_exists,
            patch_successfully_applied=report.applied,
            empty_patch=not report.patch_exists,
        )
        if report.infra:
            row["failure_reason"] = row["failure_reason"] or report.infra_reason
        infra = report.infra or "infra_failure_ids" in unit.flags
    elif listed in ("resolved_ids", "unresolved_ids"):
        raise _disagree(unit, report.detail if report else "does not exist")
    elif listed == "empty_patch_ids":
        row.update(success=False, patch_exists=False, empty_patch=True)
        infra = False
    elif listed == "incomplete_ids":
        row.update(reason="incomplete", detail="no prediction for the instance")
        return row
    else:  # run (a directory or a report), or listed as an error: the harness's error_ids
        infra = "infra_failure_ids" in unit.flags
        detail = report.detail if report else "report.json is missing"
        row.update(reason="error", detail=detail)
    if infra:
        row.update(reason="infra_failure", detail=unit.reason or row["failure_reason"] or "")
    elif row["empty_patch"] and empty_patch == "exclude":
        row.update(reason="empty_patch", detail="the prediction's patch is empty")
    return row


def _frame(
    units: dict[tuple[str, str, str], _Unit],
    runs: Mapping[str, Path],
    dataset: str | None,
    empty_patch: str,
) -> tuple[pl.DataFrame, Identity]:
    """Every unit as a row: keys, dataset, attempt (run-id order per model), outcome or reason."""
    datasets = {}
    for run_id, path in runs.items():
        value = load_object(path, what="run metadata").get("dataset")
        datasets[run_id] = str(value) if value is not None else dataset
    rows = []
    for key in sorted(units):
        unit = units[key]
        rows.append(
            {
                "task_id": unit.instance_id,
                "model": unit.model,
                "run_id": unit.run_id,
                "dataset": datasets.get(unit.run_id, dataset),
                **_classify(unit, empty_patch),
            }
        )
    schema = {
        **{k: v for k, v in TRIALS_SCHEMA.items() if k not in ("attempt", "reward", "raw_task_id")},
        "reason": pl.String(),
        "detail": pl.String(),
    }
    frame = pl.DataFrame(rows, schema=schema)
    attempt = pl.col("run_id").rank("dense").over("model").cast(pl.Int64) - 1
    frame = frame.with_columns(
        attempt.alias("attempt"),
        pl.col("success").cast(pl.Float64).alias("reward"),
        pl.col("dataset").alias(SCOPE),
    )
    return qualify(frame, "dataset", "swebench")


def read(
    logs: object,
    *,
    to: str = "trials",
    dataset: str | None = None,
    empty_patch: str = "failure",
    mapping: Mapping[str, str] | None = None,
    key: Sequence[str] = (),
) -> Imported:
    """Read SWE-bench evaluation trees into ``trials`` (or ``forks``).

    Parameters
    ----------
    logs
        The directories the harness ran in (each holding ``logs/run_evaluation/`` and the run
        summaries ``{model}.{run_id}.json``), or a list of them.
    to
        ``"trials"`` (default) or ``"forks"``: the trials mapped with ``mapping`` (polars SQL
        over the trials columns, as in :mod:`recoverylab.adapters.table`; arms from the run id,
        the model or a literal), paired by ``attempt`` (plus ``key``).
    dataset
        The dataset of runs without ``run.json`` (SWE-bench before 5.x): the instance ids' scope.
    empty_patch
        ``"failure"`` (default: an empty patch is the agent's failure) or ``"exclude"``.
    mapping, key
        Only for ``to="forks"``.

    Returns
    -------
    Imported
        ``tables["trials"]`` (or ``["forks"]``), ``excluded`` (reasons ``infra_failure``,
        ``error``, ``incomplete``, ``empty_patch``) and the read report (files matching no
        SWE-bench path listed as ``unmatched``).

    Raises
    ------
    InputError
        A report.json and a summary that disagree (both named), a summary that is not one, the
        same run read twice.
    SourceError
        A root that is not a directory, a report keying one instance twice, a tree with nothing
        of SWE-bench in it.

    Examples
    --------
    >>> import tempfile
    >>> from recoverylab.synth.swebench_runs import write_swebench_runs
    >>> root = write_swebench_runs(tempfile.mkdtemp(), instances=4)
    >>> read(root).tables["trials"].select("model").unique().height
    2
    """
    if to not in ("trials", "forks"):
        raise ParameterError(f"swebench: `to` is {to!r}; it must be 'trials' or 'forks'.")
    if empty_patch not in EMPTY_PATCH:
        raise ParameterError(
            f"swebench: `empty_patch` is {empty_patch!r}; it must be 'failure' or 'exclude'."
        )
    if to == "trials" and (mapping or key):
        raise ParameterError("swebench: `mapping` and `key` apply to `to='forks'` only.")
    roots = [logs] if isinstance(logs, (str, Path)) else list(logs)  # type: ignore[call-overload]
    units, meta = _units(roots)
    if not units:
        raise SourceError(
            f"no SWE-bench evaluation under {', '.join(f'`{r}`' for r in roots)}: no "
            "logs/run_evaluation/RUN/MODEL/INSTANCE/ directory and no run summary. Hint: give "
            "the directory the harness ran in (the one holding logs/), not logs/ itself."
        )
    frame, identity = _frame(units, meta["runs"], dataset, empty_patch)
    kept = frame.filter(pl.col("reason").is_null())
    trials = validate(kept.select(list(TRIALS_SCHEMA)), TRIALS, key=["model"]).collect()
    trials = trials.sort("task_id", "model", "attempt")
    excluded = frame.filter(pl.col("reason").is_not_null()).select(*_EXCLUDED, "attempt")
    excluded = excluded.sort("log", "task_id", "model", "attempt")
    tables = {"trials": trials}
    hint = ""
    if to == "forks":
        pair_by = list(dict.fromkeys(["attempt", *key]))
        tables, _ = table.from_frame(trials.lazy(), to="forks", mapping=mapping, key=pair_by)
        hint = f"pair by {', '.join(pair_by)}"
    read_files = [
        *(str(u.report) for u in units.values() if u.report),
        *(str(p) for p in meta["runs"].values()),
        *(str(p) for p in meta["summaries"]),
    ]
    used = set(trials["log"].to_list())
    report = ReadReport(
        format="swebench",
        files_read=tuple(sorted(set(read_files))),
        used=tuple(sorted(used & set(read_files))),
        unit="instances",
        hint=hint,
    )
    report = report.with_identity(identity)
    report = report.with_unmatched(tuple(str(p) for p in meta["unmatched"]))
    return Imported(tables, excluded, report.with_tables(tables, excluded))
