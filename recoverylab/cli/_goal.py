"""``recoverylab goal``: goal preservation, compliance and TS by regime (AgentHeal, §3.3)."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoverylab._errors import ParameterError, RecoveryLabWarning
from recoverylab._outputs import scratch_dir
from recoverylab.cli import _engine as spark_cli
from recoverylab.cli._common import (
    Progress,
    add_grouping,
    add_printing,
    add_statistics,
    emit,
    guard_output,
    read,
    samples_dir,
    split_list,
    write_output,
)

if TYPE_CHECKING:
    import polars as pl

TABLES = ("cases", "resources", "episodes", "steps", "citations")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``goal`` subcommand."""
    parser = subparsers.add_parser(
        "goal",
        help="goal-preserving recovery: GP, compliance and TS by regime (AgentHeal)",
        description="Score every episode for goal preservation (the requested work, or an "
        "acknowledged other version, or an honest diagnosis of the barrier) and policy "
        "compliance (no prohibited step), and summarise TS, compliance, step costs and "
        "failure reasons per group. "
        "Without --steps/--citations the episodes must carry the nested list columns "
        "`visited`, `citations` and optionally `prohibited_steps`.",
    )
    parser.add_argument("--cases", nargs="+", required=True, help="cases table (paths or globs)")
    parser.add_argument("--resources", nargs="+", required=True, help="resources table")
    parser.add_argument("--episodes", nargs="+", required=True, help="episodes table")
    parser.add_argument("--steps", nargs="+", help="steps table (omit for nested episodes)")
    parser.add_argument("--citations", nargs="+", help="citations table (omit for nested episodes)")
    add_grouping(
        parser,
        by_help="grouping columns, comma separated (default: regime; e.g. model,regime)",
    )
    parser.add_argument(
        "--cluster",
        help="resampling unit of the TS interval (default goal_id when present, else case_id)",
    )
    add_statistics(parser)
    spark_cli.add_engine(parser)
    for option, text in (
        ("--out", "write the summary to this parquet file (default: print it)"),
        ("--episodes-out", "also write the scored episodes to this parquet file"),
        (
            "--drop-out",
            "also write the barrier drop (TS without minus with barriers, paired by goal, "
            "grouped by model when present) to this parquet file",
        ),
    ):
        # --episodes-out is a file with polars and a parquet directory with --engine spark
        metavar = "PATH" if option == "--episodes-out" else None
        parser.add_argument(option, type=Path, metavar=metavar, help=text)
    add_printing(parser)
    group = parser.add_argument_group(
        "judged outcomes",
        "when an LLM judge decided an episode's outcome: its rate per group, PPI++ from human "
        "labels on a random subset or Rogan-Gladen from the judge's known error rates",
    )
    group.add_argument("--judge", metavar="COL", help="the judge's verdict (an episodes column)")
    group.add_argument("--gold", metavar="COL", help="the human label (null where not labelled)")
    group.add_argument(
        "--gold-strata", type=split_list, default=(), metavar="COLS", help="gold design strata"
    )
    for flag in ("--judge-sensitivity", "--judge-specificity"):
        group.add_argument(flag, type=float, help="the judge's known error rate (Rogan-Gladen)")
    group.add_argument("--judged-out", type=Path, help="write the judged rates to this file")
    parser.set_defaults(func=run)


def _judged(args: argparse.Namespace, by: tuple[str, ...], progress: Progress) -> Any:
    """Return the judged rate per group (PPI++ or Rogan–Gladen), or None without ``--judge``."""
    if args.judge is None:
        rates = (args.judge_sensitivity, args.judge_specificity)
        if args.gold is not None or args.judged_out is not None or rates != (None, None):
            raise ParameterError(
                "`--gold`, `--judged-out` and the judge's error rates need `--judge COL`."
            )
        return None
    from recoverylab import goal

    engine = spark_cli.engine_from(args)
    progress(f"judged outcome ({args.judge}): scoring the episodes for their groups")
    sources = [getattr(args, t) for t in TABLES]
    if engine == "polars":
        scored = goal.score(*(read(p) if p else None for p in sources))
    else:  # scored on Spark, lazily: the judged partials are computed there too
        scored = goal.score(*(list(p) if p else None for p in sources), engine=engine)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecoveryLabWarning)
        judged = goal.summarize_judged(
            scored,
            judge=args.judge,
            gold=args.gold,
            by=by,
            cluster=args.cluster,
            gold_strata=args.gold_strata,
            judge_sensitivity=args.judge_sensitivity,
            judge_specificity=args.judge_specificity,
            confidence=args.confidence,
            engine=engine,
        )
    if not args.quiet:
        for warning in caught:
            print(f"recoverylab goal: warning: {warning.message}", file=sys.stderr)
    return judged


def run(args: argparse.Namespace) -> None:
    """Score, summarise and write (or print) the results."""
    progress = Progress("goal", quiet=args.quiet)
    for target in (args.out, args.episodes_out, args.drop_out):
        if target is not None:
            guard_output(target, args)
    if (args.steps is None) != (args.citations is None):
        raise ParameterError(
            "give both --steps and --citations, or neither (episodes in the nested form)."
        )
    by = tuple(args.by) if args.by is not None else ("regime",)
    if args.judged_out is not None:
        guard_output(args.judged_out, args)
    judged = _judged(args, by, progress)
    engine = spark_cli.engine_from(args)
    if engine != "polars":
        sources = [getattr(args, t) for t in TABLES]
        summary, drop = spark_cli.goal(args, engine, sources, by, progress)
    else:
        summary, drop = _score_and_summarise(args, by, progress)
    if drop is not None:
        emit(drop, args.drop_out, args, face="goal.drop")
    title = "goal preservation by " + (", ".join(by) or "all episodes")
    emit(summary, args.out, args, title=title, face="goal.summary")
    if judged is not None:
        title = f"judged {args.judge} by " + (", ".join(by) or "all episodes")
        emit(judged, args.judged_out, args, title=title, face="goal.judged")


def _score_and_summarise(
    args: argparse.Namespace, by: tuple[str, ...], progress: Progress
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Score with polars (streamed to a parquet file), then summarise from that file.

    The scored episodes go to a scratch file next to ``--episodes-out`` (or in the temporary
    directory without it) and are moved into place only once the summaries are computed, so a
    bad option such as an unknown ``--by`` column leaves no output behind.
    """
    import polars as pl

    from recoverylab import goal  # imported when the command runs, not at --help
    from recoverylab.io import output_format, scan

    progress("checking the tables")
    lazy = goal.score(*(read(p) if p else None for p in (getattr(args, t) for t in TABLES)))
    keep = args.episodes_out
    if keep is not None:  # (run() guarded it)
        output_format(keep)  # an unknown suffix fails before any work
    with scratch_dir(keep) as scratch:
        # the score query runs once and nothing row-level is held in memory; the scratch copy
        # stays unsorted (the summaries ignore row order, and the kept file is sorted when
        # written)
        scratch_file = scratch / "episodes.parquet"
        progress("scoring episodes")
        lazy.sink_parquet(scratch_file)
        scored = scan(scratch_file)
        progress(f"summarising with {args.resamples} bootstrap resamples")
        statistics = {
            "n_resamples": args.resamples,
            "confidence": args.confidence,
            "seed": args.seed,
        }
        summary = goal.summarize(scored, by=by, cluster=args.cluster, **statistics)
        drop = None
        if args.drop_out is not None:
            progress("pairing barrier-free and barrier cases by goal")
            # the drop is per model when the episodes name one (as the report shows it)
            by_model = ("model",) if "model" in scored.collect_schema() else ()
            drop = goal.barrier_drop(scored, by=by_model, **statistics)
        if keep is not None:
            # staged with the command's other outputs: all are committed together, or none
            # episode ids are unique (checked): they alone give the order of every column
            rows = scored.select(pl.len()).collect().item()
            write_output(scored, keep, args, rows=rows, unique_key=("episode_id",))
    return summary, drop


def demo(out_dir: Path, progress: Callable[[str], None]) -> list[Path]:
    """Run the goal protocol on the shipped samples; return the written files.

    Writes into ``out_dir/goal/``: the diagnostic contracts' scored episodes and summary (TS 0.5,
    violation rate 0.25, 1.75 mean steps), and for the synthetic set the scored episodes, the
    summary by regime, by model and regime, by category and regime, and the barrier drop by model;
    from ``judged_episodes.parquet`` the PPI++ task success by regime and the judge's agreement
    (``judged``, ``judged_agreement``).
    """
    from recoverylab import goal  # imported when the command runs, not at --help
    from recoverylab.cli._judged import DEMO_FILES, GOAL_DEMO_JUDGE, goal_judged
    from recoverylab.io import scan, write_parquet

    samples = samples_dir() / "goal"
    out = out_dir / "goal"
    progress("goal: diagnostic contracts")
    scored = goal.score(*(samples / "diagnostic" / f"{name}.csv" for name in TABLES)).collect()
    scored = scored.sort("episode_id")
    written = [
        write_parquet(scored, out / "diagnostic_episodes.parquet"),
        write_parquet(
            goal.summarize(scored, by=(), n_resamples=2_000), out / "diagnostic_summary.parquet"
        ),
    ]
    progress("goal: synthetic set (3 regimes, 9 families, 4 categories, 4 models)")
    lazy = goal.score(*(samples / "synthetic" / name for name in TABLES))
    episodes_path = write_parquet(lazy.sort("episode_id"), out / "synthetic_episodes.parquet")
    written.append(episodes_path)
    scored_lazy = scan(episodes_path)
    for name, by in (
        ("synthetic_summary", ("regime",)),
        ("synthetic_by_model", ("model", "regime")),
        ("synthetic_by_category", ("category", "regime")),
    ):
        progress(f"goal: {name}")
        summary = goal.summarize(scored_lazy, by=by, n_resamples=2_000)
        written.append(write_parquet(summary, out / f"{name}.parquet"))
    progress("goal: barrier drop by model")
    drop = goal.barrier_drop(scored_lazy, by=("model",), n_resamples=2_000)
    written.append(write_parquet(drop, out / "synthetic_drop.parquet"))
    progress("goal: judged task success (a judge of known error, gold on 30 % of goals)")
    tables = [samples / "synthetic" / name for name in TABLES]
    tables[TABLES.index("episodes")] = samples / "judged_episodes.parquet"
    judge, gold = GOAL_DEMO_JUDGE
    judged = goal_judged(goal.score(*tables), judge=judge, gold=gold)
    for message in judged.warnings:
        progress(f"goal: warning: {message}")
    for frame, name in zip((judged.estimates, judged.agreement), DEMO_FILES["goal"], strict=True):
        written.append(write_parquet(frame, out_dir / name))
    return written
