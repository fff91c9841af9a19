"""Duplicate Harbor trials: a trial read twice, a regrade, a retry, a resumed job's re-runs.

The rules (and why they follow Harbor's own record of its runs) are those of
:mod:`recoverylab.adapters.harbor`. Only the few groups that hold a duplicate are looked at one by
one; the rest stays in polars.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab._errors import InputError
from recoverylab.adapters._report import Superseded

__all__ = ["resolve_duplicates"]

#: Columns that say where a copy lies, not what the trial was.
_PLACE = ("file", "job_dir", "job")


def resolve_duplicates(
    frame: pl.DataFrame, mapped: Sequence[str], capacities: Mapping[str, int]
) -> tuple[pl.DataFrame, list[Superseded], pl.DataFrame]:
    """Drop the copies and superseded trials of ``frame``.

    ``mapped`` are the columns the mapping read (a superseded trial must agree with its
    replacement on each); ``capacities`` the ``n_attempts`` of each job directory. Returns the
    frame, the superseded trials (retries, re-runs of a resumed job) and the copies of a trial
    read from another file (``file``, ``task_id``, ``by``: the file kept).
    """
    frame = frame.with_row_index("_row")
    dropped: list[Superseded] = []
    frame, copies = _copies(frame)
    frame = _regraded(frame, mapped, dropped)
    job = pl.col("config.job_id")
    retried = frame.filter(job.is_not_null()).with_columns(_cap=pl.lit(1))
    frame = _surplus(frame, retried, ["config.job_id", "trial_name"], mapped, "retry", dropped)
    caps = pl.col("job_dir").replace_strict(dict(capacities), default=None, return_dtype=pl.Int64)
    planned = frame.filter(job.is_not_null()).with_columns(caps.alias("_cap"))
    group = ["config.job_id", "task_scope", "task_name", "config.agent"]  # names are per dataset
    frame = _surplus(
        frame, planned.filter(pl.col("_cap").is_not_null()), group, mapped, "resumed", dropped
    )
    return frame.drop("_row"), sorted(dropped, key=lambda s: (s.log, s.by)), copies


def _copies(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rule 1: one trial id in several files; identical copies collapse to the first file."""
    twins = frame.filter(pl.col("id").is_duplicated())
    if twins.height == 0:
        return frame, twins.select("file", "task_id", "raw_task_id", "task_scope", by="file")
    compared = [c for c in frame.columns if c not in (*_PLACE, "_row")]
    versions = pl.struct(compared).n_unique().over("id")
    conflict = twins.filter(versions > 1)
    if conflict.height:
        rows = conflict.filter(pl.col("id") == conflict["id"][0]).sort("file").to_dicts()
        other = next(r for r in rows if any(r[c] != rows[0][c] for c in compared))
        differs = next(c for c in compared if other[c] != rows[0][c])
        raise InputError(
            f"harbor results `{rows[0]['file']}` and `{other['file']}` are the same trial "
            f"(id {other['id']}) but differ in `{differs}`; remove the stale copy."
        )
    extra = twins.with_columns(pl.col("file").min().over("id").alias("by"))
    extra = extra.filter(pl.col("file") != pl.col("by"))
    kept = frame.filter(~pl.col("_row").is_in(extra["_row"].implode()))
    return kept, extra.select("file", "task_id", "raw_task_id", "task_scope", "by")


def _regraded(
    frame: pl.DataFrame, mapped: Sequence[str], dropped: list[Superseded]
) -> pl.DataFrame:
    """Drop each trial that a regrade read here re-graded (``config.source_trial``).

    Harbor's regrade re-runs only the verifier on the source trial's agent output: the two are
    one agent run graded twice. The source is found by its trial id, else by its directory.
    """
    source = pl.col("config.source_trial")
    regrades = frame.filter(source.str.json_path_match("$.action") == "regrade").select(
        "_row",
        "file",
        source.str.json_path_match("$.trial_id").alias("_of_id"),
        source.str.json_path_match("$.path").alias("_of_path"),
    )
    if regrades.height == 0:
        return frame
    absolute = [os.path.abspath(os.path.dirname(f)) for f in frame["file"]]
    place = frame.select("_row", "id").with_columns(pl.Series("_dir", absolute, pl.String))
    regrades = regrades.with_columns(
        pl.Series("_of_path", [_absolute(p) for p in regrades["_of_path"]], pl.String)
    )
    by_id = regrades.join(place, left_on="_of_id", right_on="id", suffix="_old")
    by_dir = regrades.filter(pl.col("_of_id").is_null() | ~pl.col("_of_id").is_in(place["id"]))
    by_dir = by_dir.join(place, left_on="_of_path", right_on="_dir", suffix="_old")
    pairs = pl.concat([by_id.select("_row", "_row_old"), by_dir.select("_row", "_row_old")])
    rows = {r["_row"]: r for r in frame.filter(pl.col("_row").is_in(
        pl.concat([pairs["_row"], pairs["_row_old"]]).implode()
    )).to_dicts()}  # fmt: skip
    for new, old in pairs.iter_rows():
        _agree(rows[old], rows[new], mapped)
        dropped.append(Superseded(rows[old]["file"], rows[new]["file"], "regrade"))
    return frame.filter(~pl.col("_row").is_in(pairs["_row_old"].implode()))


def _absolute(path: str | None) -> str | None:
    return None if path is None else os.path.abspath(path)


def _surplus(
    frame: pl.DataFrame,
    candidates: pl.DataFrame,
    group: list[str],
    mapped: Sequence[str],
    reason: str,
    dropped: list[Superseded],
) -> pl.DataFrame:
    """Rules 2 and 3: a group holding more trials than ``_cap`` keeps the later ones."""
    over = candidates.filter(pl.len().over(group) > pl.col("_cap"))
    if over.height == 0:
        return frame
    order = ["_start", "trial_name", "id"]  # _start: started_at as a UTC datetime
    drop: list[int] = []
    for part in over.sort(order, nulls_last=True).partition_by(group):
        rows = part.to_dicts()
        for old, new in _replaced(rows, len(rows) - rows[0]["_cap"], reason):
            _agree(old, new, mapped)
            dropped.append(Superseded(old["file"], new["file"], reason))
            drop.append(old["_row"])
    return frame.filter(~pl.col("_row").is_in(drop))


def _replaced(
    rows: list[dict[str, Any]], surplus: int, reason: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pair the ``surplus`` failed trials a re-run replaced with the trial that replaced each.

    Cancelled trials go first (``harbor jobs resume`` removes them by default), then the
    earliest failed ones.
    """
    failed = [i for i, row in enumerate(rows[:-1]) if row["exception_type"] is not None]
    failed.sort(key=lambda i: (rows[i]["exception_type"] != "CancelledError", i))
    if len(failed) < surplus:
        clean = [row["file"] for row in rows if row["exception_type"] is None][:2] or [
            rows[0]["file"],
            rows[1]["file"],
        ]
        what = "trial name" if reason == "retry" else "task and agent configuration"
        raise InputError(
            f"harbor results `{clean[0]}` and `{clean[-1]}` are {len(rows)} runs of one job's "
            f"{what} (job id {rows[0]['config.job_id']}) where the job plans {rows[0]['_cap']}, "
            "and they did not fail, so none replaces another; remove the stray copies."
        )
    gone = set(failed[:surplus])
    pairs = []
    for i in sorted(gone):
        later = next(j for j in range(i + 1, len(rows)) if j not in gone)
        pairs.append((rows[i], rows[later]))
    return pairs


def _agree(old: dict[str, Any], new: dict[str, Any], mapped: Sequence[str]) -> None:
    for column in mapped:
        if old[column] != new[column]:
            raise InputError(
                f"harbor results `{old['file']}` and `{new['file']}` would be one trial run twice "
                f"but differ in mapped `{column}` ({old[column]!r} vs {new[column]!r})."
            )
