"""Achieved power of the exact sign-flip test at the sizes ``paired.tasks_needed`` plans.

For every design of a grid (rates, pairs per task, ICC, sidedness) the planner's size is
simulated ``--sims`` times with the exact test (``paired.simulate_power``) and the achieved power
is compared with the target. The acceptance bar (issue 17) is ±3 points.

Usage::

    python benchmarks/plan_power.py                # the full grid, 4,000 studies per design
    python benchmarks/plan_power.py --sims 1000    # a quick look
    python benchmarks/plan_power.py --refine 2000  # sizes from simulation (m > 1), slower

The full grid (32 designs × 4,000 studies) takes about 40 s on one core; with ``--refine 2000``
several minutes (a bisection of simulated studies per design with several pairs per task).
"""

from __future__ import annotations

import argparse
import itertools
import time

import polars as pl

from recoverylab import paired

RATES = [(0.15, 0.05), (0.3, 0.1), (0.1, 0.02), (0.4, 0.25)]
DESIGNS = [(1, 0.0), (2, 0.2), (3, 0.0), (4, 0.5)]
ALTERNATIVES = ["two-sided", "greater"]
TOLERANCE = 0.03


def run(n_sims: int, seed: int, target: float, refine: int | None = None) -> pl.DataFrame:
    """Simulate every design of the grid; one row per design."""
    rows = []
    for (p10, p01), (m, icc), alternative in itertools.product(RATES, DESIGNS, ALTERNATIVES):
        n = paired.tasks_needed(
            p10,
            p01,
            power=target,
            pairs_per_task=m,
            icc=icc,
            alternative=alternative,
            n_sims=refine,
            seed=seed + 1,
        )
        sim = paired.simulate_power(
            n,
            p10,
            p01,
            pairs_per_task=m,
            icc=icc,
            alternative=alternative,
            n_sims=n_sims,
            seed=seed,
        )
        rows.append(
            {
                "p10": p10,
                "p01": p01,
                "pairs_per_task": m,
                "icc": icc,
                "alternative": alternative,
                "tasks": n,
                "planned_power": paired.power(
                    n, p10, p01, pairs_per_task=m, icc=icc, alternative=alternative
                ),
                "simulated_power": sim.power,
                "se": sim.se,
            }
        )
    return pl.DataFrame(rows).with_columns(
        (pl.col("simulated_power") - target).alias("gap"),
        ((pl.col("simulated_power") - target).abs() <= TOLERANCE).alias("within_3_points"),
    )


def main() -> None:
    """Run the grid and print it with a one-line verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--power", type=float, default=0.8)
    parser.add_argument(
        "--refine", type=int, default=None, help="size m > 1 designs by N simulated studies"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    table = run(args.sims, args.seed, args.power, args.refine)
    pl.Config.set_tbl_rows(100)
    print(table)
    worst = table["gap"].abs().max()
    print(
        f"{table['within_3_points'].sum()}/{table.height} designs within ±3 points "
        f"(largest gap {worst:.3f}); {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
