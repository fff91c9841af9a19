"""Time ``Router.fit`` on synthetic decision points (issue 4: 100,000 points in under a minute).

Run from the repository root::

    .venv/bin/python benchmarks/bench_router.py [TASKS ...]

Prints, per size, the decision points, the wall time of each fit stage and of the whole fit
(5 task-grouped folds × 3 logistic models, the vectorised threshold search over a 41 × 41 × 42
grid, the final refit), and ``decide`` on the same points.
"""

from __future__ import annotations

import sys
import time

from recoverylab import synth
from recoverylab.router import Router
from recoverylab.synth._router import FEATURES


def main(sizes: list[int]) -> None:
    """Fit and decide at each size (tasks); print one line per size."""
    import sklearn.linear_model  # noqa: F401  (import time is not fit time)

    print("tasks  decision_points  fit_seconds  decide_seconds  oof_gain  clean_harm")
    for tasks in sizes:
        tables = synth.generate("decision_points", tasks, seed=0)
        points, forks = tables["decision_points"], tables["forks"]
        start = time.perf_counter()
        router = Router().fit(points, forks, list(FEATURES))
        fit = time.perf_counter() - start
        start = time.perf_counter()
        router.decide(points).collect()
        decide = time.perf_counter() - start
        report = router.fit_report_
        print(
            f"{tasks:>5}  {points.height:>15,}  {fit:>11.2f}  {decide:>14.2f}  "
            f"{report.oof_gain:>8.4f}  {report.oof_clean_harm_rate:>10.4f}"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000, 8_400, 34_000])
