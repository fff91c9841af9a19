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
space or observation type segments, or a literal). ``--to takeover`` is not built.
"""

from __future__ import annotations

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

__all__ = ["ARMS", "TRIALS_SCHEMA", "read"]

#: The path segments above an example directory, outermost first.
ARMS = ("action_space", "observation_type", "model", "domain")
_BASE = "{action_space}/{observation_type}/{model}/{domain}/{example_id}"
_TEMPLATES = {
    "result": _BASE + "/result.txt",
    "traj": _BASE + "/traj.jsonl",
    "example": _BASE + "/{file}",
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


def _steps(traj: Path | None) -> tuple[int | None, str | None]:
    """Return the steps of a ``traj.jsonl`` and the ``Error`` it records, if any."""
    if traj is None:
        return None, None
    rows = _templates.json_rows(traj, None)
    errors = [str(r["Error"]) for r in rows if "Error" in r]
    return sum("Error" not in r for r in rows), (errors[-1] if errors else None)


def _row(example: _Example) -> dict[str, Any]:
    steps, error = _steps(example.traj)
    row: dict[str, Any] = {
        "task_id": example.values["example_id"],
        "attempt": example.attempt,
        **{arm: example.values[arm] for arm in ARMS},
        "steps": steps,
        "log": str(example.result or example.traj or example.directory),
        "reward": None,
        "reason": None,
        "detail": None,
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


def read(
    results: object,
    *,
    to: str = "trials",
    success: float = 1.0,
    mapping: Mapping[str, str] | None = None,
    key: Sequence[str] = (),
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
        Only for ``to="forks"``.

    Returns
    -------
    Imported
        ``tables["trials"]`` (or ``["forks"]``), ``excluded`` (reason ``unfinished``) and the
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
    if to not in ("trials", "forks"):
        raise ParameterError(
            f"osworld: `to` is {to!r}; it must be 'trials' or 'forks' (takeover is not built)."
        )
    if to == "trials" and (mapping or key):
        raise ParameterError("osworld: `mapping` and `key` apply to `to='forks'` only.")
    roots = [results] if isinstance(results, (str, Path)) else list(results)  # type: ignore[call-overload]
    examples, read_files, unmatched = _examples(roots)
    if not examples:
        raise SourceError(
            f"no OSWorld example under {', '.join(f'`{r}`' for r in roots)}: no "
            "ACTION_SPACE/OBSERVATION_TYPE/MODEL/DOMAIN/EXAMPLE_ID/ directory."
        )
    schema = {k: v for k, v in TRIALS_SCHEMA.items() if k not in ("success", "raw_task_id", SCOPE)}
    frame = pl.DataFrame(
        [_row(e) for e in examples], schema={**schema, "reason": pl.String, "detail": pl.String}
    )
    frame = frame.with_columns(
        (pl.col("reward") >= success).alias("success"), pl.col("domain").alias(SCOPE)
    )
    frame, identity = qualify(frame, "domain", "osworld")
    kept = frame.filter(pl.col("reason").is_null()).select(list(TRIALS_SCHEMA))
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
