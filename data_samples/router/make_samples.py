"""Regenerate the router samples in this directory (deterministic: same files every run).

Run from the repository root::

    .venv/bin/python data_samples/router/make_samples.py

Train and test come from the ``decision_points`` synthetic generator with different seeds and
task-id prefixes, so their tasks are disjoint.
"""

from __future__ import annotations

from pathlib import Path

from recoverylab import synth
from recoverylab.io import write_parquet

HERE = Path(__file__).resolve().parent

#: Sample name -> (tasks, seed, task-id prefix).
SAMPLES = {"train": (600, 11, "train-"), "test": (400, 12, "test-")}


def main() -> list[Path]:
    """Write ``train/`` and ``test/`` (decision_points.parquet and forks.parquet in each)."""
    written = []
    for name, (tasks, seed, prefix) in SAMPLES.items():
        tables = synth.generate("decision_points", tasks, seed=seed, prefix=prefix)
        for table, frame in tables.items():
            written.append(write_parquet(frame, HERE / name / f"{table}.parquet"))
    return written


if __name__ == "__main__":
    for path in main():
        print(path)
