"""Interval and p-value as one computation, on 2,000 generated multi-pair cells (issue 38).

Every paired interval is reported beside the p-value of the test it inverts (ARCHITECTURE §4),
and no code moves a computed bound. This script checks that on the issue's family of cells
(15-120 tasks, 2-4 pairs each, various rescue/harm rates; the generator of
``tests/test_interval_test_agreement.py``) and prints, for the library's default interval:

* cells whose reported bounds differ from the named method's own output (called directly):
  must be 0;
* cells where "zero lies outside the interval" and "p < 1 - confidence" disagree: must be 0;
* cells where the sign-flip test (shown in its own column, ``p_sign_flip``) rejects but the
  interval's own test does not -- the cells whose bound the retired ``agree_with_test`` used to
  move to the smallest float beyond zero.

The test suite runs the same check on a few hundred cells; this script runs the full 2,000
(a few minutes on two cores). Usage: ``python benchmarks/interval_agreement.py [--cells 2000]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Run the check and print its figures; exit 1 if any bound or p-value disagrees."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    import polars as pl

    from recoverylab import stats
    from tests.test_interval_test_agreement import (
        assert_bounds_are_the_methods_own,
        generated_cells,
    )

    started = time.perf_counter()
    types = generated_cells(args.cells, seed=args.seed, one_pair=False)
    out = stats.paired_effect_cells(types, cells=["cell"], confidence=args.confidence)
    seconds = time.perf_counter() - started
    alpha = 1.0 - args.confidence
    agree = stats.interval_agrees_with_test(
        out["ci_low"].to_numpy(),
        out["ci_high"].to_numpy(),
        out["p_value"].to_numpy(),
        confidence=args.confidence,
    )
    try:
        assert_bounds_are_the_methods_own(types, out, ["cell"], confidence=args.confidence)
        differ = 0
    except AssertionError:
        differ = -1  # at least one; the assertion names the first
    split = out.filter((pl.col("p_sign_flip") < alpha) & (pl.col("p_value") >= alpha)).height
    print(f"cells: {out.height} (methods: {sorted(out['ci_method'].unique().to_list())})")
    print(f"library time: {seconds:.1f} s")
    print(f"bounds differing from the method's own output: {'≥ 1' if differ else 0}")
    print(f"zero-outside vs p < {alpha:g} disagreements: {int((~agree).sum())}")
    print(f"sign-flip rejects but the interval's own test does not: {split}")
    return 0 if differ == 0 and bool(agree.all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
