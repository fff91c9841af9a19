"""Regenerate ``data_samples/goal/`` deterministically.

Run ``python data_samples/goal/make_samples.py`` from the repository root. It writes:

* ``diagnostic/``: the seed's four diagnostic contracts as CSV (one case each) and the same
  episodes in the nested form (``diagnostic/episodes_nested.ndjson``).
* ``synthetic/``: the ``goal`` generator over 225 goals (675 cases: every goal in the three
  regimes) and four models, seed 20261029, one parquet file per table.
* ``judged_episodes.parquet``: the judged variant of ``synthetic/episodes`` (issue 40): the same
  episodes with a judge's verdict on their success, of known error (:data:`JUDGE`), and gold
  labels on the episodes of a random share of goals (:data:`GOLD_SHARE`, drawn by goal).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # run from a checkout without installing

from recoverylab import synth  # noqa: E402

SYNTHETIC_GOALS = 225
SYNTHETIC_SEED = 20261029

#: The judged variant: the judge's true sensitivity and specificity on an episode's success.
JUDGE = {"sensitivity": 0.90, "specificity": 0.75}
#: Share of goals whose episodes (every regime, every model) a human labelled: drawn by goal.
GOLD_SHARE = 0.30
JUDGED_SEED = 20261207


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


def judged_episodes(episodes: pl.DataFrame, cases: pl.DataFrame) -> pl.DataFrame:
    """Return the episodes (sorted by id) with ``judge_success`` and ``gold_success``.

    The true success is the planted one (``planted_success``, which ``goal.score`` reproduces).
    The judge is right with probability ``JUDGE["sensitivity"]`` on a success and
    ``JUDGE["specificity"]`` on a failure, independently per episode; ``gold_success`` is the
    true success on every episode of a random :data:`GOLD_SHARE` of goals, null elsewhere.
    """
    rng = np.random.default_rng(JUDGED_SEED)
    frame = episodes.sort("episode_id")
    goals = cases["goal_id"].unique().sort()
    labelled = goals.filter(pl.Series(rng.random(goals.len()) < GOLD_SHARE)).implode()
    goal_of = frame.join(
        cases.select("case_id", "goal_id"), on="case_id", how="left", maintain_order="left"
    )
    truth = frame["planted_success"].to_numpy()
    right = rng.random(frame.height) < np.where(truth, JUDGE["sensitivity"], JUDGE["specificity"])
    unlabelled = np.flatnonzero(~goal_of["goal_id"].is_in(labelled).to_numpy())
    return frame.with_columns(
        pl.Series("judge_success", np.where(right, truth, ~truth)),
        frame["planted_success"].alias("gold_success").scatter(unlabelled, None),
    )


def main() -> None:
    """Write both sample sets and the judged episodes."""
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
    judged = judged_episodes(
        pl.read_parquet(target / "episodes"), pl.read_parquet(target / "cases")
    )
    judged.write_parquet(HERE / "judged_episodes.parquet")


if __name__ == "__main__":
    main()
