"""OSWorld result trees in: one ``trials`` row per (example, results directory).

OSWorld (xlang-ai/OSWorld) runs a computer-use agent on each example of each domain and writes,
under its ``--result_dir`` (default ``./results``), one directory per example. The layout read
here (``recoverylab import osworld``) is that of OSWorld's ``lib_run_single.py``
(``run_single_example``) and ``show_result.py`` (``get_result``) on its main branch as of 2025
(read through forks' copies: no snapshot of xlang-ai/OSWorld could be fetched), as a preset over
the path templates of
:mod:`recoverylab.adapters._templates`:

========================================================================  ======================
path (relative to the results directory)                                   what
========================================================================  ======================
``{action_space}/{observation_type}/{model}/{domain}/{example_id}/``       one example's run
``.../{example_id}/result.txt``                                            the score
                                                                           ``env.evaluate()``
                                                                           wrote (one number,
                                                                           a line break)
``.../{example_id}/traj.jsonl``                                            one JSON line per
                                                                           step (``step_num``,
                                                                           ``action``,
                                                                           ``reward``, ``done``,
                                                                           ``info``, ...)
``.../{example_id}/*``                                                     screenshots,
                                                                           ``runtime.log``,
                                                                           ``recording.mp4``
========================================================================  ======================

Which examples count: an example directory with ``result.txt`` is an outcome: ``reward`` is the
score, ``success`` is ``reward >= success`` (default 1: OSWorld's scores are in [0, 1], partial
credit below 1). A directory without ``result.txt`` is ``unfinished`` (the run stopped or crashed
before evaluation; ``show_result.py`` counts only directories holding ``result.txt``, and a
resumed run clears and reruns them; a directory the resume cleared and never refilled is one
too): excluded by reason, with the ``Error`` line of its ``traj.jsonl`` as the detail when it
has one. A ``result.txt`` holding anything but one number is
a bad tree (one line naming the file); files beside the example directories are listed in the
read report (``unmatched``).

Example ids are scoped by domain (§8): ``task_id`` is ``<domain>/<example_id>``, the id as
written in ``raw_task_id``. Each results directory given is one repeat: ``attempt`` is its
position among the directories given (from 0), so several runs of the same agent read as trials
for pass^k. ``--to forks`` maps the trials with polars SQL (arms from the model, the action
space or observation type segments, or a literal). ``--to takeover`` needs a recovery marker
(``marker``): a trajectory step holding it makes the attempt *aware* (EAR); ``states`` and
``attempts`` are then mapped from the trials (:data:`TAKEOVER_DEFAULTS`, overridable).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from recoverylab._errors import ParameterError, SourceError
from recoverylab._resolve import ignored
from recoverylab.adapters import _templates, table
from recoverylab.adapters._identity import SCOPE, qualify
from recoverylab.adapters._report import Imported, ReadReport
from recoverylab.adapters._trials import TRIALS
from recoverylab.schema import validate

__all__ = ["ARMS", "TAKEOVER_DEFAULTS", "TRIALS_SCHEMA", "read"]

#: The path segments above an example directory, outermost first.
ARMS = ("action_space", "observation_type", "model", "domain")
_BASE = "{action_space}/{observation_type}/{model}/{domain}/{example_id}"
_TEMPLATES = {
    "result": _BASE + "/result.txt",
    "traj": _BASE + "/traj.jsonl",
    "example": _BASE + "/{file}",
}
#: Where each takeover column comes from by default (polars SQL over the trials columns): every
#: example is a state of its own at depth 0, attempted by its model once per results directory
#: (``finished_repeat``: its finished repeats numbered 0, 1, ...; ``attempt`` keeps the directory).
TAKEOVER_DEFAULTS: Mapping[str, str] = {
    "state_id": "task_id",
    "workflow_id": "task_id",
    "root_cause_id": "task_id",
    "depth": "0",
    "replay_ok": "TRUE",
    "expected_ok": "TRUE",
    "agent": "model",
    "repeat": "finished_repeat",
    "aware": "aware",
    "passed": "success",
}
#: Columns and types of ``trials``, in order.
TRIALS_SCHEMA: Mapping[str, pl.DataType] = {
    "task_id": pl.String(),
    "attempt": pl.Int64(),
    "success": pl.Boolean(),
    "reward": pl.Float64(),
    **{arm: pl.String() for arm in ARMS},
    "steps": pl.Int64(),
    "raw_task_id": pl.String(),
    SCOPE: pl.String(),
    "log": pl.String(),
}
_EXCLUDED = ("log", "task_id", "reason", "detail", "raw_task_id", SCOPE, *ARMS, "attempt")


@dataclass
class _Example:
    """What one results directory holds for one example."""

    values: Mapping[str, str]
    attempt: int
    directory: Path
    result: Path | None = None
    traj: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _examples(roots: Sequence[str | Path]) -> tuple[list[_Example], list[Path], list[Path]]:
    """Every example directory under each root (its position is the attempt)."""
    templates = {k: _templates.parse_template(v) for k, v in _TEMPLATES.items()}
    found: dict[tuple[int, Path], _Example] = {}
    unmatched: list[Path] = []
    for attempt, root in enumerate(roots):
        tree = _templates.match_tree([root], templates)
        unmatched.extend(tree.unmatched)
        for kind in ("result", "traj", "example"):
            for match in tree.matches[kind]:
                values = {k: v for k, v in match.values.items() if k != "file"}
                key = (attempt, match.path.parent)
                example = found.setdefault(key, _Example(values, attempt, match.path.parent))
                if kind in ("result", "traj"):
                    setattr(example, kind, match.path)
        for directory in _empty_examples(Path(root), {k[1] for k in found if k[0] == attempt}):
            values = dict(
                zip((*ARMS, "example_id"), directory.relative_to(root).parts, strict=True)
            )
            found[(attempt, directory)] = _Example(values, attempt, directory)
    read = [e.result for e in found.values() if e.result] + [
        e.traj for e in found.values() if e.traj
    ]
    return [found[k] for k in sorted(found, key=lambda k: (k[0], str(k[1])))], read, unmatched


def _empty_examples(root: Path, seen: set[Path]) -> list[Path]:
    """Return the example directories holding no file (a resume cleared them, then stopped).

    OSWorld's resume empties an unfinished example's directory before running it again; a run
    stopped in between leaves the directory empty. It is an example all the same (unfinished),
    so it is listed here rather than lost with the files it no longer holds.
    """
    return [
        d
        for d in sorted(root.glob("*/*/*/*/*"))
        if d.is_dir()
        and d not in seen
        and not any(ignored(part) for part in d.relative_to(root).parts)
        and not any(f.is_file() for f in d.rglob("*"))
    ]


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _steps(traj: Path | None, marker: str | None) -> tuple[int | None, str | None, int | None]:
    """Return a ``traj.jsonl``'s steps, its last ``Error`` and the first step naming ``marker``.

    The marker is looked for in each step's ``response`` and ``action`` (the agent's words and
    what it did); the step is its ``step_num`` (its line number when it has none).
    """
    if traj is None:
        return None, None, None
    rows = _templates.json_rows(traj, None)
    errors = [str(r["Error"]) for r in rows if "Error" in r]
    first = None
    if marker is not None:
        for number, row in enumerate(rows, 1):
            if any(marker in _text(row[k]) for k in ("response", "action") if k in row):
                step = row.get("step_num", number)
                first = step if isinstance(step, int) and not isinstance(step, bool) else number
                break
    return sum("Error" not in r for r in rows), (errors[-1] if errors else None), first


def _row(example: _Example, marker: str | None) -> dict[str, Any]:
    steps, error, marker_step = _steps(example.traj, marker)
    row: dict[str, Any] = {
        "task_id": example.values["example_id"],
        "attempt": example.attempt,
        **{arm: example.values[arm] for arm in ARMS},
        "steps": steps,
        "log": str(example.result or example.traj or example.directory),
        "reward": None,
        "reason": None,
        "detail": None,
        "marker_step": marker_step,
    }
    if example.result is None:
        row["reason"] = "unfinished"
        empty = example.traj is None and not any(example.directory.iterdir())
        row["detail"] = (
            f"error: {error}" if error else "empty directory" if empty else "no result.txt"
        )
    else:
        row["reward"] = _templates.number_row(example.result)["value"]
    return row


def _read_iv(
    to: str, mapping: Mapping[str, str] | None, key: Sequence[str], marker: str | None
) -> None:
    """Check :func:`read`'s parameters before any file is read."""
    if to not in ("trials", "forks", "takeover"):
        raise ParameterError(
            f"osworld: `to` is {to!r}; it must be 'trials', 'forks' or 'takeover'."
        )
    if to == "trials" and (mapping or key):
        raise ParameterError("osworld: `mapping` and `key` apply to `to='forks'` or 'takeover'.")
    if to == "takeover" and not marker:
        raise ParameterError(
            "osworld: `to='takeover'` needs `marker`, the text a trajectory step holds when the "
            "agent recognises the error it took over (its awareness)."
        )


def read(
    results: object,
    *,
    to: str = "trials",
    success: float = 1.0,
    mapping: Mapping[str, str] | None = None,
    key: Sequence[str] = (),
    marker: str | None = None,
) -> Imported:
    """Read OSWorld results directories into ``trials`` (or ``forks``).

    Parameters
    ----------
    results
        OSWorld ``--result_dir`` directories (each one repeat), or one.
    to
        ``"trials"`` (default) or ``"forks"``: the trials mapped with ``mapping`` (polars SQL
        over the trials columns: ``model``, ``action_space``, ``observation_type``, ``domain``,
        ``attempt``...), paired by ``attempt`` (plus ``key``).
    success
        The score at which an example counts as a success (``reward >= success``).
    mapping, key
        Only for ``to="forks"`` and ``to="takeover"`` (where ``mapping`` overrides
        :data:`TAKEOVER_DEFAULTS`; ``root_cause_fixed`` and ``derived_fixed`` have no default:
        OSWorld scores only the end state, so the user says what stands for them).
    marker
        Text a trajectory step holds (in its ``response`` or ``action``) when the agent
        recognises the error it took over: trials gain ``aware`` and ``marker_step`` (the first
        such step); needed for ``to="takeover"`` (``aware`` is the awareness of EAR).

    Returns
    -------
    Imported
        ``tables["trials"]`` (or ``["forks"]``, or ``["states"]`` and ``["attempts"]``),
        ``excluded`` (reason ``unfinished``) and the
        read report (files beside the example directories listed as ``unmatched``).

    Raises
    ------
    SourceError
        A result directory that does not exist or holds no example, a ``result.txt`` that is
        not one number, a ``traj.jsonl`` line that is not JSON (each naming the file).

    Examples
    --------
    >>> import tempfile
    >>> from recoverylab.synth.osworld_runs import write_osworld_runs
    >>> root = write_osworld_runs(tempfile.mkdtemp(), examples=2)
    >>> sorted(read(root).tables["trials"]["domain"].unique())
    ['chrome', 'gimp', 'os']
    """
    _read_iv(to, mapping, key, marker)
    roots = [results] if isinstance(results, (str, Path)) else list(results)  # type: ignore[call-overload]
    examples, read_files, unmatched = _examples(roots)
    if not examples:
        raise SourceError(
            f"no OSWorld example under {', '.join(f'`{r}`' for r in roots)}: no "
            "ACTION_SPACE/OBSERVATION_TYPE/MODEL/DOMAIN/EXAMPLE_ID/ directory."
        )
    schema = {k: v for k, v in TRIALS_SCHEMA.items() if k not in ("success", "raw_task_id", SCOPE)}
    schema = {**schema, "reason": pl.String(), "detail": pl.String(), "marker_step": pl.Int64()}
    frame = pl.DataFrame([_row(e, marker) for e in examples], schema=schema)
    frame = frame.with_columns(
        (pl.col("reward") >= success).alias("success"),
        pl.col("domain").alias(SCOPE),
        pl.col("marker_step").is_not_null().alias("aware"),
    )
    frame, identity = qualify(frame, "domain", "osworld")
    columns = [*TRIALS_SCHEMA, *(("aware", "marker_step") if marker else ())]
    kept = frame.filter(pl.col("reason").is_null()).select(columns)
    extra = [a for a in ARMS if a != "domain"]
    trials = validate(kept, TRIALS, key=extra).collect().sort("task_id", *extra, "attempt")
    excluded = frame.filter(pl.col("reason").is_not_null()).select(_EXCLUDED)
    excluded = excluded.sort("log", "task_id", "attempt")
    tables = {"trials": trials}
    hint = ""
    if to == "forks":
        pair_by = list(dict.fromkeys(["attempt", *key]))
        tables, _ = table.from_frame(trials.lazy(), to="forks", mapping=mapping, key=pair_by)
        hint = f"pair by {', '.join(pair_by)}"
    elif to == "takeover":
        given = {**TAKEOVER_DEFAULTS, **(mapping or {})}
        # the finished repeats of an example by one agent, numbered 0, 1, ... (an unfinished
        # repeat is excluded by reason, and the takeover contract wants repeats without gaps)
        rank = pl.col("attempt").rank("dense").over("task_id", *extra) - 1
        ranked = trials.with_columns(rank.cast(pl.Int64).alias("finished_repeat"))
        tables, _ = table.from_frame(ranked.lazy(), to="takeover", mapping=given, key=key)
    files = tuple(sorted(str(p) for p in read_files))
    kept_dirs = {Path(log).parent for log in trials["log"].to_list()}
    report = ReadReport(
        format="osworld",
        files_read=files,
        used=tuple(sorted(str(p) for p in read_files if p.parent in kept_dirs)),
        unit="examples",
        hint=hint,
    ).with_identity(identity)
    report = report.with_unmatched(tuple(sorted(str(p) for p in unmatched)))
    return Imported(tables, excluded, report.with_tables(tables, excluded))
