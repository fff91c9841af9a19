"""The recoverylab benchmark: one command, ``python benchmarks/run.py --tasks 1000000``.

Generates synthetic forks with ``recoverylab synth`` (1M tasks × 4 conditions × (1 + 4 delays ×
3 methods) ≈ 52M rows in 10 parquet files; skipped when the files for that size and seed exist),
then times, each in a fresh process and alternating the engines round by round (A B C ... A B
C ...), the bare scan floor, recoverylab's paired partials with and without statistics, the
same counts in DuckDB and in pandas (also as literal per-task partials), and checks that every
engine produced identical counts -- exiting with status 1 and a diff if not. Then the
statistics at a million clusters against scipy, ``goal``, ``takeover`` and ``Router.fit``.
Writes ``benchmarks/RESULTS.md`` (and ``results.json``) and prints the table.

``--quick`` runs the same pipeline on a small size in CI time (used by the tests).
``--paired-tasks N`` sizes the forks and every data shape of them (``--tasks`` is the same
option); with ``--generate-only`` the command writes them and stops, e.g. the 52M-row shapes of
issue 19: ``python benchmarks/run.py --paired-tasks 1040000 --generate-only --data-dir DIR``
(about 1.6 GB of parquet; the shuffle across files holds every row: ~10 GB of RAM).

``--ratios`` measures only the acceptance ratios against DuckDB of issue 28, in one run, and
writes their section at the top of ``--out`` (a full run keeps it): ``paired.summarize`` on every
data shape at 5M and 52M rows (``--ratio-tasks 100000,1040000``, the default; the data is
generated first when missing), ``goal`` at ~10M steps, ``takeover`` with intervals and its counts
alone at ~5M attempts, and ``recoverylab --help`` against ``import polars``; CPU time, wall time
and peak RSS per workload, ``--ratio-rounds`` alternating rounds (see :mod:`ratios`)::

    python benchmarks/run.py --ratios                       # the whole acceptance table
    python benchmarks/run.py --ratios --ratio-tasks 100000  # 5M rows only: minutes
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import ratios  # noqa: E402
import report  # noqa: E402

#: The forks workloads, in the order of one round.
FORKS_WORKLOADS = (
    "floor",
    "recoverylab",
    "recoverylab_stats",
    "duckdb",
    "pandas",
    "floor_duckdb",
    "duckdb_per_task",
    "pandas_per_task",
)
#: Context rows measured in the first round only (they take minutes and set no target).
ONCE = ("floor_duckdb", "duckdb_per_task", "pandas_per_task")
#: Measured in the first three rounds only (a minute per run).
THRICE = ("pandas",)
#: Workloads whose cell counts must be identical, and those whose per-task types must be.
SAME_COUNTS = ("recoverylab", "recoverylab_stats", "duckdb", "pandas")
SAME_TYPES = ("recoverylab", "duckdb_per_task", "pandas_per_task")

#: Other shapes of the same forks (see :func:`reshape`): name -> (description, task id type,
#: files: 0 = the same files, order: grouped as generated or shuffled).
SHAPES = {
    "grouped_int": ("rows grouped by task, integer task ids", "int", 0, "grouped"),
    "shuffled_within": ("rows shuffled within each file", "str", 0, "shuffled"),
    "shuffled_across": ("rows of every task scattered across 4 files", "str", 4, "shuffled"),
    "shuffled_across_int": (
        "rows scattered across 4 files, integer task ids",
        "int",
        4,
        "shuffled",
    ),
}
#: Workloads measured on every other shape (results keyed ``name@shape``).
SHAPE_WORKLOADS = ("floor", "recoverylab_stats", "duckdb", "duckdb_per_task")
#: Goal and takeover: recoverylab, its DuckDB and pandas equivalents, the scan floor.
PROTOCOL_WORKLOADS = ("floor", "recoverylab", "duckdb", "pandas")

FULL = {
    "tasks": 1_000_000,
    "chunk": 100_000,
    "rounds": 5,
    "stats_clusters": 1_000_000,
    "goal_units": 250_000,  # ~10M steps rows
    "takeover_units": 12_500,  # ~5M attempts
    "router_tasks": 8_400,  # ~100,000 decision points
    "scaling_files": (2, 5),
    "scipy_budget": 60.0,  # a scipy reference run may take up to a minute
    "shapes": tuple(SHAPES),
    "shape_workloads": SHAPE_WORKLOADS,
    "protocol_rounds": 3,
}
QUICK = {
    "tasks": 2_000,
    "chunk": 500,
    "rounds": 1,
    "stats_clusters": 20_000,
    "goal_units": 300,
    "takeover_units": 20,
    "router_tasks": 300,
    "scaling_files": (),
    "scipy_budget": 0.3,
    "shapes": ("shuffled_across_int",),
    "shape_workloads": ("recoverylab_stats", "duckdb", "duckdb_per_task"),
    "protocol_rounds": 1,
}


def _python() -> str:
    return sys.executable


def generate(table: str, units: int, seed: int, out: Path, chunk: int) -> dict:
    """Write synthetic tables with ``recoverylab synth`` unless they already exist."""
    marker = out / "COMPLETE.json"
    wanted = {"table": table, "units": units, "seed": seed, "chunk": chunk}
    if marker.exists() and json.loads(marker.read_text()).get("wanted") == wanted:
        return json.loads(marker.read_text())
    if out.exists():
        shutil.rmtree(out)
    start = time.perf_counter()
    subprocess.run(
        [
            _python(),
            "-m",
            "recoverylab",
            "synth",
            table,
            "--tasks",
            str(units),
            "--seed",
            str(seed),
            "--out",
            str(out),
            "--chunk-tasks",
            str(chunk),
            "--quiet",
        ],
        check=True,
        cwd=ROOT,
    )
    files = sorted(out.rglob("*.parquet"))
    info = {
        "wanted": wanted,
        "seconds": time.perf_counter() - start,
        "files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
    }
    marker.write_text(json.dumps(info))
    return info


def reshape(source: Path, shape: str, seed: int) -> dict:
    """Write the forks of ``source`` in another shape, next to it (skipped when present).

    The rows are the same; only their order, the number of files and the type of ``task_id``
    change: ``grouped_int`` keeps the files and their order, ``shuffled_within`` permutes the
    rows of each file, the ``shuffled_across`` shapes permute all rows and cut them into 4 files
    (so every task's rows are scattered over all the files, as in logs appended by many
    workers), ``_int`` makes the task ids integers.
    """
    import polars as pl

    _, ids, files, order = SHAPES[shape]
    out = source.parent / f"{source.parent.name}_{shape}"
    marker = out / "COMPLETE.json"
    if marker.exists():
        return json.loads(marker.read_text())
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    start = time.perf_counter()
    parts = sorted(source.glob("*.parquet"))
    # one file at a time for a shuffle within files; all rows at once for a shuffle across them
    groups = [[f] for f in parts] if files == 0 else [parts]
    written = 0
    for i, group in enumerate(groups):
        frame = pl.read_parquet(group)
        if order == "shuffled":
            frame = frame.sample(fraction=1.0, shuffle=True, seed=seed + i)
        if ids == "int":
            frame = frame.with_columns(pl.col("task_id").str.replace(r"^\D+", "").cast(pl.Int64))
        step = -(-frame.height // max(files, 1))
        for j in range(max(files, 1)):
            frame.slice(j * step, step).write_parquet(out / f"part-{written:05d}.parquet")
            written += 1
    info = {
        "shape": shape,
        "seconds": time.perf_counter() - start,
        "files": written,
        "bytes": sum(f.stat().st_size for f in out.glob("*.parquet")),
    }
    marker.write_text(json.dumps(info))
    return info


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU time of the whole machine since boot, in clock ticks (Linux)."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return None
    return sum(values) - values[3] - values[4], sum(values)


def busy_cpus(window: float = 1.0) -> float:
    """CPUs kept busy by anything during ``window`` seconds (from /proc/stat; 0 elsewhere)."""
    before = _cpu_jiffies()
    time.sleep(window)
    after = _cpu_jiffies()
    if before is None or after is None or after[1] == before[1]:
        return 0.0
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)


def wait_for_quiet(max_busy: float, max_wait: float) -> float:
    """Wait until other processes keep fewer than ``max_busy`` CPUs busy (or time runs out).

    Returns the busy CPUs seen last. The waiting is charged to ``WAIT`` so that a run on a
    machine that never calms down still ends (``--wait-budget``).
    """
    start = time.monotonic()
    deadline = start + max(0.0, min(max_wait, WAIT["budget"] - WAIT["spent"]))
    busy = busy_cpus(0.5 if max_wait > 0 else 0.1)
    while busy > max_busy and time.monotonic() < deadline:
        busy = busy_cpus(2.0)
    WAIT["spent"] += time.monotonic() - start
    return busy


#: Seconds spent waiting for a quiet machine so far, and the most the run may spend.
WAIT = {"spent": 0.0, "budget": 600.0}
#: A measurement this long is not repeated when it was disturbed.
_RETRY_BELOW = 60.0


def measure(
    args: argparse.Namespace,
    workload: str,
    data: Path,
    out: Path,
    size: int = 0,
    files: int = 0,
    budget: float = 60.0,
) -> dict:
    """Run one workload in a fresh process and note how much other processes disturbed it.

    Other processes' CPU use during the run is the machine's busy time (/proc/stat) minus the
    worker's own CPU time. A run of under a minute during which they kept more than
    ``--max-busy`` CPUs busy on average is repeated (``--retries`` times at most) and the least
    disturbed attempt kept.
    """
    command = [
        _python(), str(HERE / "worker.py"), workload, "--data", str(data), "--out", str(out),
        "--size", str(size), "--files", str(files), "--budget", str(budget),
    ]  # fmt: skip
    best = None
    for attempt in range(args.retries + 1):
        busy = wait_for_quiet(args.max_busy, args.max_wait)
        load = os.getloadavg()[0]
        machine0, own0 = _cpu_jiffies(), resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
        elapsed = time.perf_counter() - start
        machine1, own1 = _cpu_jiffies(), resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"benchmark workload {workload!r} failed (exit {done.returncode})")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        own = (own1.ru_utime + own1.ru_stime) - (own0.ru_utime + own0.ru_stime)
        others = 0.0
        if machine0 is not None and machine1 is not None:
            ticks = os.sysconf("SC_CLK_TCK")
            others = max(0.0, (machine1[0] - machine0[0]) / ticks - own) / elapsed
        result.update(
            workload=workload,
            process_seconds=elapsed,
            process_cpu_seconds=own,
            busy_cpus=busy,
            others_during=others,
            load1=load,
            attempts=attempt + 1,
        )
        if best is None or others < best["others_during"]:
            best = result
        if others <= args.max_busy or elapsed > _RETRY_BELOW:
            break
    return best


def _same(base: tuple[str, ...], outputs: dict[str, Path]) -> list[str]:
    """The measured workloads among ``base``, on every shape (``name@shape``), in order."""
    return [n for n in outputs if n.split("@")[0] in base]


def compare(outputs: dict[str, Path]) -> list[str]:
    """Compare the counts and types the engines wrote; return the differences (none = ok).

    The forks of every shape hold the same rows, so their counts and per-task types must be the
    same as well.
    """
    import polars as pl

    problems = []
    for suffix, base in ((".counts.parquet", SAME_COUNTS), (".types.parquet", SAME_TYPES)):
        names = _same(base, outputs)
        frames = {
            n: pl.read_parquet(outputs[n].with_suffix(suffix))
            for n in names
            if n in outputs and outputs[n].with_suffix(suffix).exists()
        }
        if len(frames) < 2:
            continue
        first, reference = next(iter(frames.items()))
        for name, frame in frames.items():
            if not frame.equals(reference):
                diff = pl.concat(
                    [
                        reference.join(frame, on=reference.columns, how="anti").with_columns(
                            pl.lit(f"only {first}").alias("side")
                        ),
                        frame.join(reference, on=reference.columns, how="anti").with_columns(
                            pl.lit(f"only {name}").alias("side")
                        ),
                    ]
                )
                problems.append(f"{name} differs from {first} ({suffix}):\n{diff}")
    return problems


def run_protocols(
    args: argparse.Namespace,
    sizes: dict,
    data_dir: Path,
    work: Path,
    skip: set[str],
    gen: dict,
    say: Callable[[str], None],
) -> tuple[dict[str, dict[str, list[dict]]], list[str]]:
    """Time goal and takeover against DuckDB, pandas (first round) and the scan floor.

    The engines alternate within each round; returns the runs per protocol and engine, and the
    differences between the counts they wrote (none = ok).
    """
    import polars as pl
    from protocol_baselines import TAKEOVER_FLOATS, compare_frames

    runs: dict[str, dict[str, list[dict]]] = {}
    problems: list[str] = []
    for protocol, units in (("goal", sizes["goal_units"]), ("takeover", sizes["takeover_units"])):
        if protocol in skip:
            continue
        folder = data_dir / f"{protocol}_{units}_seed{args.seed}"
        gen[protocol] = generate(protocol, units, args.seed, folder, max(1, -(-units // 10)))
        runs[protocol] = {}
        for r in range(sizes["protocol_rounds"]):
            for engine in PROTOCOL_WORKLOADS:
                if f"{protocol}_{engine}" in skip or (r > 0 and engine == "pandas"):
                    continue
                name = protocol if engine == "recoverylab" else f"{protocol}_{engine}"
                result = measure(args, name, folder, work / f"{name}_r{r}")
                runs[protocol].setdefault(engine, []).append(result)
                say(
                    f"round {r + 1}: {name} {result['seconds']:.2f} s, "
                    f"{result['peak_rss_bytes'] / 1e9:.2f} GB"
                )
        floats = TAKEOVER_FLOATS if protocol == "takeover" else ()
        if not (work / f"{protocol}_r0.counts.parquet").exists():
            continue
        reference = pl.read_parquet(work / f"{protocol}_r0.counts.parquet")
        for engine in ("duckdb", "pandas"):
            path = work / f"{protocol}_{engine}_r0.counts.parquet"
            if engine in runs[protocol] and path.exists():
                problem = compare_frames(reference, pl.read_parquet(path), floats)
                if problem:
                    problems.append(f"{protocol}: {engine} differs from recoverylab: {problem}")
    return runs, problems


def previous_records() -> list[dict]:
    """Earlier runs kept for reference (``results-<date>-<label>.json``), newest first."""
    files = sorted(HERE.glob("results-20*.json"), reverse=True)
    return [json.loads(f.read_text()) for f in files]


def _say(started: float, message: str) -> None:
    """Print a progress line with the seconds since ``started``."""
    print(f"[bench {time.perf_counter() - started:6.0f}s] {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return the exit status (1 when the engines disagree)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--paired-tasks",
        "--tasks",
        dest="tasks",
        type=int,
        help="forks tasks of the paired data and every shape of it (default 1,000,000: ~50M rows)",
    )
    parser.add_argument(
        "--generate-only",
        action="store_true",
        help="write the forks and their shapes under --data-dir, then stop (no measurement)",
    )
    parser.add_argument("--rounds", type=int, help="alternating rounds (default 5)")
    parser.add_argument("--goal-units", type=int, help="goal instances (default 250,000)")
    parser.add_argument("--takeover-units", type=int, help="takeover workflows (default 12,500)")
    parser.add_argument(
        "--protocol-rounds", type=int, help="alternating rounds of goal and takeover (default 3)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--note", default="", help="a sentence to print at the top of the report")
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--skip", default="", help="comma-separated workloads to leave out")
    parser.add_argument(
        "--max-busy",
        type=float,
        default=0.5,
        help="before each measurement, wait while other processes keep more CPUs busy",
    )
    parser.add_argument(
        "--max-wait", type=float, default=60.0, help="seconds to wait at most per measurement"
    )
    parser.add_argument(
        "--wait-budget", type=float, default=600.0, help="seconds to wait at most in all"
    )
    parser.add_argument(
        "--retries", type=int, default=2, help="repeats of a short run other processes disturbed"
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite --out from the results.json next to it, without measuring",
    )
    ratios.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.render_only:
        record = json.loads(args.out.with_name("results.json").read_text())
        kept = report.kept_sections(args.out.read_text()) if args.out.exists() else []
        args.out.write_text(report.render_with_previous(record, previous_records(), kept))
        return 0
    sizes = dict(QUICK if args.quick else FULL)
    if args.tasks:
        sizes["tasks"] = args.tasks
        sizes["chunk"] = max(1, -(-args.tasks // 10))
    for option in ("rounds", "goal_units", "takeover_units", "protocol_rounds"):
        if getattr(args, option):
            sizes[option] = getattr(args, option)
    skip = {s for s in args.skip.split(",") if s}
    started = time.perf_counter()
    if args.ratios:
        return ratios.run_ratios(args, lambda m: _say(started, m))
    data_dir: Path = args.data_dir
    work = data_dir / "out"
    work.mkdir(parents=True, exist_ok=True)

    def say(message: str) -> None:
        _say(started, message)

    say(f"generating data in {data_dir} (skipped when present)")
    forks_dir = data_dir / f"forks_{sizes['tasks']}_seed{args.seed}"
    gen = {"forks": generate("forks", sizes["tasks"], args.seed, forks_dir, sizes["chunk"])}
    forks = forks_dir / "forks"

    shapes = {"grouped": forks}
    for shape in sizes["shapes"]:
        if shape not in skip:
            say(f"writing the forks {SHAPES[shape][0]} (skipped when present)")
            gen[shape] = reshape(forks, shape, args.seed)
            shapes[shape] = forks_dir / f"{forks_dir.name}_{shape}"

    if args.generate_only:
        say("data written; --generate-only: nothing measured")
        return 0
    results: dict[str, list[dict]] = {}
    outputs: dict[str, Path] = {}
    WAIT["budget"] = args.wait_budget
    for r in range(sizes["rounds"]):
        for shape, folder in shapes.items():
            names = FORKS_WORKLOADS if shape == "grouped" else sizes["shape_workloads"]
            for name in names:
                if name in skip or (r > 0 and name in ONCE) or (r > 2 and name in THRICE):
                    continue
                key = name if shape == "grouped" else f"{name}@{shape}"
                out = work / f"{key.replace('@', '_')}_r{r}"
                result = measure(args, name, folder, out)
                results.setdefault(key, []).append(result)
                outputs[key] = out
                say(
                    f"round {r + 1}: {key} {result['seconds']:.2f} s, "
                    f"{result['peak_rss_bytes'] / 1e9:.2f} GB"
                )
    problems = compare(outputs)
    protocols, problems_p = run_protocols(args, sizes, data_dir, work, skip, gen, say)
    problems += problems_p
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(
            "benchmark: engines disagree on the counts (see above); no report written.",
            file=sys.stderr,
        )
        return 1
    say(
        "counts identical across "
        + ", ".join(_same(SAME_COUNTS, outputs))
        + "; per-task types identical across "
        + ", ".join(_same(SAME_TYPES, outputs))
    )
    for protocol, engines in protocols.items():
        checked = [e for e in engines if e != "floor"]
        say(f"{protocol}: counts identical across " + ", ".join(checked))

    scaling = {}
    total_files = len(list(forks.glob("*.parquet")))
    if "recoverylab" not in skip:
        for files in sizes["scaling_files"]:
            if files < total_files:
                scaling[files] = measure(
                    args, "recoverylab", forks, work / f"scale{files}", files=files
                )
                say(f"scaling: recoverylab on {files} files {scaling[files]['seconds']:.2f} s")

    extras: dict[str, dict] = {}
    if "stats_scale" not in skip:
        extras["stats_scale"] = measure(
            args,
            "stats_scale",
            forks,
            work / "stats",
            size=sizes["stats_clusters"],
            budget=sizes["scipy_budget"],
        )
        say("statistics at scale done")
    if "router" not in skip:
        extras["router"] = measure(
            args, "router", forks, work / "router", size=sizes["router_tasks"]
        )
        say(f"router: {extras['router']['seconds']:.2f} s")

    startup = None
    if not args.quick and "startup" not in skip:
        import startup as startup_module

        say("start-up of the command line (whole processes)")
        startup = startup_module.main(["--runs", "10"])
    record = {
        "command": "python benchmarks/run.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": report.machine(),
        "versions": report.versions(),
        "sizes": {
            k: v
            for k, v in sizes.items()
            if k not in ("scaling_files", "shapes", "shape_workloads")
        },
        "data": gen,
        "rounds": results,
        "scaling": {str(k): v for k, v in scaling.items()},
        "scaling_total_files": total_files,
        "extras": extras,
        "protocols": protocols,
        "startup": startup,
        "shapes": {s: SHAPES[s][0] for s in sizes["shapes"] if s not in skip},
        "correct": True,
        "note": args.note,
        "total_seconds": time.perf_counter() - started,
        "waited_seconds": WAIT["spent"],
    }
    text = report.render(record)
    kept = report.kept_sections(args.out.read_text()) if args.out.exists() else []
    previous = [] if args.quick else previous_records()
    args.out.write_text(report.render_with_previous(record, previous, kept))
    args.out.with_name("results.json").write_text(json.dumps(record, indent=1, default=str))
    print(text)
    say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
