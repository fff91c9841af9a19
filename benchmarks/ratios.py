"""The acceptance ratios against DuckDB in one run: ``python benchmarks/run.py --ratios``.

Issue 28 asks for every protocol to beat DuckDB at the large sizes, in bounded memory, measured
in one run on one machine. This module measures exactly those ratios, each workload in a fresh
:mod:`worker` process (imports excluded from the clock), ours and DuckDB's back to back and the
order swapped every round, and renders one markdown section with the data shape, the CPU and
wall seconds (medians of the rounds), the peak RSS (largest of the rounds), the ratio, the target
and whether it is met:

* ``paired.summarize`` (exact p-values, default intervals) against DuckDB's pairing + counts, on
  every data shape of the forks (grouped as generated, integer ids, shuffled within files,
  scattered across 4 files, both id types) at each ``--ratio-tasks`` size: 100,000 tasks is
  5,033,488 rows, 1,040,000 tasks is 52,366,034 rows;
* ``goal.score`` + ``goal.summarize`` (every check) against DuckDB's same counts, ~10M steps;
* ``takeover.summarize`` (10,000-resample intervals) and the takeover counts alone against
  DuckDB's counts, ~5M attempts;
* ``recoverylab --help`` against ``python -c "import polars"``, median wall of 10 runs.

CPU time (user + system of all threads) is the measure compared: on a machine shared with other
jobs it is disturbed far less than wall time. Missing data is generated first with the same
generators as the full benchmark (``run.generate``/``run.reshape``; the 52M-row forks take
minutes and ~10 GB of RAM for the shuffle across files).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

#: Heading of the section this module writes (``run.py --ratios`` replaces it in RESULTS.md).
HEADING = "## Acceptance ratios against DuckDB in one run (issue 28)"
#: Every shape of the paired data, in table order (``grouped`` is the forks as generated).
PAIRED_SHAPES = (
    "grouped",
    "grouped_int",
    "shuffled_within",
    "shuffled_across",
    "shuffled_across_int",
)
#: (label, our workload, DuckDB's workload, CPU ratio target, peak RSS target in GB or None).
PROTOCOL_PAIRS = (
    ("goal: score + summarize, every check", "goal", "goal_duckdb", 1.0, 1.5),
    (
        "takeover: summarize with 10,000-resample intervals",
        "takeover",
        "takeover_duckdb",
        2.0,
        None,
    ),
    ("takeover: counts alone", "takeover_counts", "takeover_duckdb", 1.0, None),
)
#: Peak RSS target of the paired summary at the default memory budget, in GB.
PAIRED_PEAK_GB = 1.5


def paired_data(data_dir: Path, tasks: int, seed: int, say: Callable[[str], None]) -> dict:
    """Generate (when missing) the forks of ``tasks`` tasks and their shapes; return the folders."""
    import run

    folder = data_dir / f"forks_{tasks}_seed{seed}"
    say(f"forks of {tasks:,} tasks and their shapes in {folder} (skipped when present)")
    run.generate("forks", tasks, seed, folder, max(1, -(-tasks // 10)))
    shapes = {"grouped": folder / "forks"}
    for shape in PAIRED_SHAPES[1:]:
        run.reshape(folder / "forks", shape, seed)
        shapes[shape] = folder / f"{folder.name}_{shape}"
    return shapes


def protocol_data(data_dir: Path, protocol: str, units: int, seed: int) -> Path:
    """Generate (when missing) the goal or takeover tables of ``units`` units; return the folder."""
    import run

    folder = data_dir / f"{protocol}_{units}_seed{seed}"
    run.generate(protocol, units, seed, folder, max(1, -(-units // 10)))
    return folder


def _rows(folder: Path) -> int:
    """Rows of the parquet files under ``folder`` (from their footers)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(folder.rglob("*.parquet")))


def measure_pairs(
    measure: Callable[[str, Path, Path], dict],
    pairs: list[tuple[str, str, str, Path]],
    rounds: int,
    work: Path,
    say: Callable[[str], None],
) -> dict[str, dict[str, list[dict]]]:
    """Measure every (key, ours, DuckDB's, data) pair ``rounds`` times, back to back.

    Within a pair the order alternates from round to round (ours first in odd rounds), so that
    a machine that grows busier or quieter during the run does not favour one side.
    """
    found: dict[str, dict[str, list[dict]]] = {}
    for r in range(rounds):
        for key, ours, theirs, data in pairs:
            order = (ours, theirs) if r % 2 == 0 else (theirs, ours)
            for workload in order:
                name = f"{key}_{workload}".replace(" ", "_").replace(":", "")
                result = measure(workload, data, work / f"{name}_r{r}")
                found.setdefault(key, {}).setdefault(workload, []).append(result)
                say(
                    f"round {r + 1}: {key} {workload}: {result['cpu_seconds']:.2f} s CPU, "
                    f"{result['seconds']:.2f} s wall, {result['peak_rss_bytes'] / 1e9:.2f} GB"
                )
    return found


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(x[key] for x in runs)


def _peak(runs: list[dict]) -> float:
    return max(x["peak_rss_bytes"] for x in runs) / 1e9


def ratio_row(
    label: str, data: str, ours: list[dict], theirs: list[dict], target: float, peak: float | None
) -> dict:
    """One table row: medians, ratios and the verdicts against the targets.

    ``met``: the ratio of the medians and the peak are within the targets (the issue's test).
    ``every_round``: so is each round's own ratio (ours and DuckDB's ran back to back): a
    target met on the medians but not in every round is on the line.
    """
    cpu, their_cpu = _median(ours, "cpu_seconds"), _median(theirs, "cpu_seconds")
    wall, their_wall = _median(ours, "seconds"), _median(theirs, "seconds")
    small = peak is None or _peak(ours) <= peak
    met = cpu / their_cpu <= target and small
    rounds = [a["cpu_seconds"] / b["cpu_seconds"] for a, b in zip(ours, theirs, strict=True)]
    return {
        "label": label,
        "data": data,
        "rounds": len(ours),
        "cpu": cpu,
        "their_cpu": their_cpu,
        "cpu_ratio": cpu / their_cpu,
        "wall_ratio": wall / their_wall,
        "peak": _peak(ours),
        "their_peak": _peak(theirs),
        "target": f"≤ {target:g}" + (f", peak ≤ {peak:g} GB" if peak is not None else ""),
        "met": met,
        "round_ratios": (min(rounds), max(rounds)),
        "every_round": met and max(rounds) <= target,
        "others": max(x.get("others_during", 0.0) for x in (*ours, *theirs)),
    }


def startup_row(runs: int) -> dict:
    """``recoverylab --help`` against ``python -c "import polars"``: median wall of ``runs``."""
    import startup

    record = startup.main(["--runs", str(runs)])
    timings, ratio = record["timings"], record["ratios"]
    ours, theirs = timings["recoverylab --help"], timings["python -c 'import polars'"]
    return {
        "label": "`recoverylab --help` (whole process)",
        "data": f"median of {runs} runs ({ours['tool']})",
        "rounds": runs,
        "cpu": ours["cpu"],
        "their_cpu": theirs["cpu"],
        "cpu_ratio": ratio["help_over_import_polars_cpu"],
        "wall_ratio": ratio["help_over_import_polars_wall"],
        "peak": None,
        "their_peak": None,
        "target": "wall ≤ 1 × `import polars`",
        "met": ratio["help_over_import_polars_wall"] <= 1.0,
        "round_ratios": None,
        "every_round": ratio["help_over_import_polars_wall"] <= 1.0,
        "others": 0.0,
    }


def render(rows: list[dict], header: list[str]) -> str:
    """The markdown section: what was run, the table, and the verdict in one line."""
    lines = [HEADING, "", *header, ""]
    lines += [
        "| workload | data | rounds | ours CPU (s) | DuckDB CPU (s) | CPU ratio | CPU ratio by "
        "round | wall ratio | our peak (GB) | DuckDB peak (GB) | target | met | others' CPUs "
        "(max) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for row in rows:
        peaks = [f"{p:.2f}" if p is not None else "" for p in (row["peak"], row["their_peak"])]
        spread = row.get("round_ratios")
        by_round = f"{spread[0]:.2f}–{spread[1]:.2f}" if spread else ""
        lines.append(
            f"| {row['label']} | {row['data']} | {row['rounds']} | {row['cpu']:.2f} "
            f"| {row['their_cpu']:.2f} | {row['cpu_ratio']:.2f} | {by_round} "
            f"| {row['wall_ratio']:.2f} | {peaks[0]} | {peaks[1]} | {row['target']} "
            f"| {_verdict(row)} | {row['others']:.2f} |"
        )
    missed = [_name(r) for r in rows if not r["met"]]
    on_the_line = [_name(r) for r in rows if r["met"] and not r.get("every_round", True)]
    lines += [
        "",
        'For `recoverylab --help` the DuckDB columns hold `python -c "import polars"`. "On the '
        "line\": met by the ratio of the medians, not by every round's own ratio (ours and "
        "DuckDB's back to back).",
        "",
        f"**{len(rows) - len(missed)} of {len(rows)} targets met.**"
        + (" Missed: " + "; ".join(missed) + "." if missed else "")
        + (" On the line: " + "; ".join(on_the_line) + "." if on_the_line else ""),
    ]
    return "\n".join(lines) + "\n"


def _verdict(row: dict) -> str:
    if not row["met"]:
        return "**no**"
    return "yes" if row.get("every_round", True) else "**on the line**"


def _name(row: dict) -> str:
    return f"{row['label']} ({row['data']})"


def replace_section(text: str, section: str) -> str:
    """``text`` (a RESULTS.md) with its ratios section replaced by ``section``, or one added.

    A new section goes right after the file's first section (the run it describes), so the
    ratios are the first thing a reader finds after the set-up.
    """
    parts = text.split("\n## ")
    head, rest = parts[0], ["## " + p for p in parts[1:]]
    rest = [p for p in rest if not p.startswith(HEADING)]
    pieces = [head.rstrip("\n") + "\n", section, *(p.rstrip("\n") + "\n" for p in rest)]
    return "\n".join(pieces)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the ratios run (``run.py`` parses them with its own)."""
    parser.add_argument(
        "--ratios",
        action="store_true",
        help="measure only the acceptance ratios against DuckDB (issue 28) and write their "
        "section of --out",
    )
    parser.add_argument(
        "--ratio-tasks",
        default="100000,1040000",
        help="forks tasks of the paired ratios, comma separated (100000: 5M rows; "
        "1040000: 52M rows)",
    )
    parser.add_argument(
        "--ratio-rounds", type=int, default=3, help="alternating rounds of each ratio"
    )


def _same_counts(found: dict[str, dict[str, list[dict]]], pairs: list, work: Path) -> list[str]:
    """Differences between the counts ours and DuckDB's wrote in the first round (none = ok)."""
    import polars as pl
    from protocol_baselines import TAKEOVER_FLOATS, compare_frames

    problems = []
    for key, ours, theirs, _ in pairs:
        paths = [
            work / (f"{key}_{w}".replace(" ", "_").replace(":", "") + "_r0.counts.parquet")
            for w in (ours, theirs)
        ]
        if not all(p.exists() for p in paths):
            continue
        floats = TAKEOVER_FLOATS if ours.startswith("takeover") else ()
        problem = compare_frames(*(pl.read_parquet(p) for p in paths), floats)
        if problem:
            problems.append(f"{key}: {ours} and {theirs} differ: {problem}")
    return problems


#: A measured pair: (key, our workload, DuckDB's workload, data folder).
Pair = tuple[str, str, str, Path]
#: What a pair's row says: (label, data described, CPU ratio target, peak target in GB or None).
Label = tuple[str, str, float, "float | None"]
GROUPED = "rows grouped by task (as generated), string ids"


def plan(args: argparse.Namespace, say: Callable[[str], None]) -> tuple[list[Pair], dict]:
    """Generate the data that is missing; return the pairs to measure and their row labels."""
    import run

    pairs: list[Pair] = []
    labels: dict[str, Label] = {}
    for tasks in (int(t) for t in args.ratio_tasks.split(",") if t):
        for shape, folder in paired_data(args.data_dir, tasks, args.seed, say).items():
            key = f"paired {shape} {tasks}"
            pairs.append((key, "recoverylab_stats", "duckdb", folder))
            described = run.SHAPES[shape][0] if shape in run.SHAPES else GROUPED
            data = f"{_rows(folder):,} rows ({tasks:,} tasks), {described}"
            labels[key] = (f"paired: summarize ({shape})", data, 1.0, PAIRED_PEAK_GB)
    for label, ours, theirs, target, peak in PROTOCOL_PAIRS:
        protocol = ours.split("_")[0]
        units = getattr(args, f"{protocol}_units") or run.FULL[f"{protocol}_units"]
        say(f"{protocol} data of {units:,} units (skipped when present)")
        folder = protocol_data(args.data_dir, protocol, units, args.seed)
        table = "steps" if protocol == "goal" else "attempts"
        pairs.append((ours, ours, theirs, folder))
        labels[ours] = (label, f"{_rows(folder / table):,} {table}", target, peak)
    return pairs, labels


def run_ratios(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """Generate what is missing, measure every ratio, write the section into ``args.out``."""
    import datetime as dt
    import os

    import report
    import run

    started = dt.datetime.now(dt.timezone.utc)
    run.WAIT["budget"] = args.wait_budget
    pairs, labels = plan(args, say)
    work = args.data_dir / "out" / "ratios"
    work.mkdir(parents=True, exist_ok=True)
    found = measure_pairs(
        lambda w, d, o: run.measure(args, w, d, o), pairs, args.ratio_rounds, work, say
    )
    problems = _same_counts(found, pairs, work)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print("benchmark: engines disagree on the counts; no report written.", file=sys.stderr)
        return 1
    rows = [
        ratio_row(
            labels[key][0], labels[key][1], found[key][ours], found[key][theirs], *labels[key][2:]
        )
        for key, ours, theirs, _ in pairs
    ]
    if "startup" not in args.skip.split(","):
        say("start-up of the command line")
        rows.append(startup_row(10))
    loads = [x["load1"] for per in found.values() for runs in per.values() for x in runs]
    versions = report.versions()
    header = [
        f"Written by `python benchmarks/run.py --ratios --ratio-tasks {args.ratio_tasks} "
        f"--ratio-rounds {args.ratio_rounds}` on {started:%Y-%m-%d %H:%M} UTC "
        f"(recoverylab {versions.get('recoverylab', '?')}; {os.cpu_count()} CPUs; 1-minute load "
        f"average {min(loads):.1f}–{max(loads):.1f} while measuring). Each workload ran in a "
        "fresh process (imports not timed), ours and DuckDB's back to back with the order "
        "swapped every round; medians of the rounds, peak = the largest of the rounds. Ours and "
        "DuckDB's counts were compared and are identical (floats within 1e-9).",
    ]
    section = render(rows, header)
    text = args.out.read_text() if args.out.exists() else "# Benchmark results\n"
    args.out.write_text(replace_section(text, section))
    print(section)
    say(f"wrote the ratios section of {args.out}")
    return 0
