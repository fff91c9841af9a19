"""Where the time goes: ``python benchmarks/profile_protocols.py WORKLOAD DATA [--html OUT]``.

Runs one workload under pyinstrument (``pip install -e '.[bench]'``) and prints its call tree;
``WORKLOAD`` is ``paired`` (``paired.summarize`` on the parquet files of the folder ``DATA``),
``goal`` (``goal.score`` + ``goal.summarize`` on a folder written by ``recoverylab synth goal``)
or ``takeover`` (``takeover.summarize``). Imports happen before the profile starts; the peak
resident set of the process is printed at the end.
"""

from __future__ import annotations

import argparse
import resource
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def _paired(data: Path) -> Callable[[], object]:
    import polars as pl

    from recoverylab import paired

    files = sorted(data.glob("*.parquet"))
    return lambda: paired.summarize(pl.scan_parquet(files), n_resamples=10_000)


def _goal(data: Path) -> Callable[[], object]:
    import polars as pl

    from recoverylab import goal

    names = ("cases", "resources", "episodes", "steps", "citations")
    tables = [pl.scan_parquet(data / t / "*.parquet") for t in names]
    return lambda: goal.summarize(goal.score(*tables), n_resamples=10_000)


def _takeover(data: Path) -> Callable[[], object]:
    import polars as pl

    from recoverylab import takeover

    states = pl.scan_parquet(data / "states" / "*.parquet")
    attempts = pl.scan_parquet(data / "attempts" / "*.parquet")
    return lambda: takeover.summarize(states, attempts, n_resamples=10_000)


WORKLOADS = {"paired": _paired, "goal": _goal, "takeover": _takeover}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("data", type=Path)
    parser.add_argument("--html", type=Path, help="also write pyinstrument's HTML view here")
    args = parser.parse_args(argv)
    import scipy.signal
    import scipy.stats  # noqa: F401  (recoverylab imports them on first use: not profiled)
    from pyinstrument import Profiler

    job = WORKLOADS[args.workload](args.data)
    profiler = Profiler(interval=0.005)
    profiler.start()
    job()
    profiler.stop()
    print(profiler.output_text(unicode=True, color=False, show_all=False))
    if args.html:
        args.html.write_text(profiler.output_html())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"peak RSS of the process: {peak / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
