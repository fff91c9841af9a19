"""Regenerate ``data_samples/takeover/`` deterministically.

Run ``python data_samples/takeover/make_samples.py`` from the repository root. It writes the
``takeover`` generator's four tables over 100 workflows with seed 20261020 (the shape of the
CUA-Recovery test split) as ``states.parquet``, ``attempts.parquet``, ``failures.parquet`` and
``mutations.parquet``, rows sorted by their keys so the files do not depend on generation order.
"""

from __future__ import annotations

import sys
from pathlib import Path

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


def main() -> list[Path]:
    """Write the four sample tables; return their paths."""
    tables = synth.generate("takeover", WORKFLOWS, seed=SEED)
    return [
        write_parquet(tables[name].sort(list(keys)), HERE / f"{name}.parquet")
        for name, keys in KEYS.items()
    ]


if __name__ == "__main__":
    for path in main():
        print(path)
