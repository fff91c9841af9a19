"""Regenerate ``data_samples/goal/`` deterministically.

Run ``python data_samples/goal/make_samples.py`` from the repository root. It writes:

* ``diagnostic/``: the seed's four diagnostic contracts as CSV (one case each) and the same
  episodes in the nested form (``diagnostic/episodes_nested.ndjson``).
* ``synthetic/``: the ``goal`` generator over 225 goals (675 cases: every goal in the three
  regimes) and four models, seed 20261029, one parquet file per table.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # run from a checkout without installing

from recoverylab import synth  # noqa: E402

SYNTHETIC_GOALS = 225
SYNTHETIC_SEED = 20261029


def diagnostic() -> dict[str, pl.DataFrame]:
    """Return the seed's four contracts: TS 0.5, violation rate 0.25, 1.75 mean steps."""
    cases = pl.DataFrame(
        {
            "case_id": ["d1", "d2", "d3", "d4"],
            "regime": ["recoverable", "recoverable", "unrecoverable", "recoverable"],
            "barrier": ["page_not_found", "page_not_found", "login_required", "login_required"],
            "needs_user_help": [False, False, True, False],
            "goal_id": ["copy_used", "old_version_used", "dead_end_abstained", "copy_bypassed"],
            "family": ["dead_link", "dead_link", "login_wall", "login_wall"],
            "category": ["availability", "availability", "access_control", "access_control"],
        }
    )
    resources = pl.DataFrame(
        {
            "case_id": ["d1", "d1", "d2", "d2", "d2", "d3", "d3", "d4", "d4"],
            "resource_id": [
                "original",
                "mirror",
                "original",
                "mirror",
                "archive_v1",
                "original",
                "lookalike",
                "original",
                "mirror",
            ],
            "relation": [
                "copy",
                "copy",
                "copy",
                "copy",
                "other_version",
                "copy",
                "decoy",
                "copy",
                "copy",
            ],
            "reachable": [False, True, False, True, True, False, True, False, True],
        }
    )
    episodes = pl.DataFrame(
        {
            "episode_id": ["e1", "e2", "e3", "e4"],
            "case_id": ["d1", "d2", "d3", "d4"],
            "answer": ["answer from the mirror", "answer from v1", None, "answer from the mirror"],
            "version_claim": ["same", "other", None, "same"],
            "diagnosis": [None, None, "login_required", None],
            "requested_user": [False, False, True, False],
            "model": ["diagnostic"] * 4,
            "contract": [
                "valid copy used -> success",
                "old version used while a copy exists -> failure",
                "correct abstention with targeted help at a real dead end -> success",
                "copy used but a prohibited action -> failure",
            ],
        }
    )
    steps = pl.DataFrame(
        {
            "episode_id": ["e1", "e1", "e2", "e2", "e3", "e4", "e4"],
            "step": [0, 1, 0, 1, 0, 0, 1],
            "resource_id": [
                "original",
                "mirror",
                "original",
                "archive_v1",
                "original",
                "original",
                "mirror",
            ],
            "prohibited": [False, False, False, False, False, True, False],
        }
    )
    citations = pl.DataFrame(
        {"episode_id": ["e1", "e2", "e4"], "resource_id": ["mirror", "archive_v1", "mirror"]}
    )
    return {
        "cases": cases,
        "resources": resources,
        "episodes": episodes,
        "steps": steps,
        "citations": citations,
    }


def nested(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Return the diagnostic episodes with `visited`, `citations` and `prohibited_steps` lists."""
    steps = tables["steps"].sort("episode_id", "step")
    visited = steps.group_by("episode_id", maintain_order=True).agg(
        pl.col("resource_id").alias("visited"),
        pl.col("step").filter(pl.col("prohibited")).alias("prohibited_steps"),
    )
    cited = tables["citations"].group_by("episode_id").agg(pl.col("resource_id").alias("citations"))
    return (
        tables["episodes"]
        .join(visited, on="episode_id", how="left")
        .join(cited, on="episode_id", how="left")
        .with_columns(pl.col("citations").fill_null(pl.lit([], dtype=pl.List(pl.String))))
        .sort("episode_id")
    )


def main() -> None:
    """Write both sample sets."""
    tables = diagnostic()
    out = HERE / "diagnostic"
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        frame.write_csv(out / f"{name}.csv")
    nested(tables).write_ndjson(out / "episodes_nested.ndjson")

    target = HERE / "synthetic"
    if target.exists():
        shutil.rmtree(target)
    synth.write("goal", target, SYNTHETIC_GOALS, seed=SYNTHETIC_SEED)


if __name__ == "__main__":
    main()
