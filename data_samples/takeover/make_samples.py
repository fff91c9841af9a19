"""Regenerate ``data_samples/takeover/`` deterministically.

Run ``python data_samples/takeover/make_samples.py`` from the repository root. It writes the
``takeover`` generator's four tables over 100 workflows with seed 20261020 (the shape of the
CUA-Recovery test split) as ``states.parquet``, ``attempts.parquet``, ``failures.parquet`` and
``mutations.parquet``, rows sorted by their keys so the files do not depend on generation order.

``judged_attempts.parquet`` is the judged variant (issue 40): the attempts' key and outcome
columns with two judges of known error (:data:`JUDGE`) and gold labels on a random share of
(state, agent) units (:data:`GOLD_SHARE`: every repeat of a drawn unit), for ``takeover --judge
... --gold ...``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # run from a checkout without installing

from recoverylab import synth  # noqa: E402
from recoverylab.io import write_parquet  # noqa: E402

WORKFLOWS = 100
SEED = 20261020
KEYS = {
    "states": ("state_id",),
    "attempts": ("state_id", "agent", "repeat"),
    "failures": ("root_cause_id",),
    "mutations": ("workflow_id", "mutation_id"),
}

#: The judged variant: per judged outcome, the judge's true (sensitivity, specificity).
JUDGE = {"passed": (0.85, 0.95), "aware": (0.90, 0.80)}
#: Share of (state, agent) units a human labelled: every repeat and both outcomes of a drawn unit
#: (so pass@k and pass^k have gold unit values too), within workflows (the clusters).
GOLD_SHARE = 0.20
JUDGED_SEED = 20261207
_ATTEMPT_COLUMNS = ("state_id", "agent", "repeat", "aware", "root_cause_fixed", "derived_fixed")


def judged_attempts(attempts: pl.DataFrame) -> pl.DataFrame:
    """Return the attempts (sorted by key) with ``judge_<outcome>`` and ``gold_<outcome>``.

    Per outcome of :data:`JUDGE`, the judge's verdict is right with probability ``se`` when the
    true outcome is true and ``sp`` when false, independently per attempt; ``gold_<outcome>``
    is the true outcome on every attempt of a random :data:`GOLD_SHARE` of (state, agent) units
    (the same attempts for both outcomes: a human labels the whole unit), null elsewhere.
    """
    rng = np.random.default_rng(JUDGED_SEED)
    frame = attempts.sort("state_id", "agent", "repeat").select(*_ATTEMPT_COLUMNS, "passed")
    unit = frame.select(pl.struct("state_id", "agent").rank("dense").cast(pl.Int64) - 1)
    drawn = rng.random(int(unit.max().item()) + 1) < GOLD_SHARE  # one draw per unit, key order
    unlabelled = np.flatnonzero(~drawn[unit.to_series().to_numpy()])
    columns = []
    for outcome, (sensitivity, specificity) in JUDGE.items():
        truth = frame[outcome].to_numpy()
        right = rng.random(frame.height) < np.where(truth, sensitivity, specificity)
        columns.append(pl.Series(f"judge_{outcome}", np.where(right, truth, ~truth)))
        columns.append(frame[outcome].alias(f"gold_{outcome}").scatter(unlabelled, None))
    return frame.with_columns(columns)


def main() -> list[Path]:
    """Write the four sample tables; return their paths."""
    tables = synth.generate("takeover", WORKFLOWS, seed=SEED)
    written = [
        write_parquet(tables[name].sort(list(keys)), HERE / f"{name}.parquet")
        for name, keys in KEYS.items()
    ]
    judged = judged_attempts(tables["attempts"])
    return [*written, write_parquet(judged, HERE / "judged_attempts.parquet")]


if __name__ == "__main__":
    for path in main():
        print(path)
