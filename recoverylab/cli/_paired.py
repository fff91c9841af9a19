"""``recoverylab paired | contrast | policy``: paired recovery evaluation (CIR, §3.1)."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recoverylab._errors import ParameterError, RecoveryLabWarning
from recoverylab.cli import _engine as spark_cli
from recoverylab.cli._common import (
    Progress,
    add_grouping,
    add_printing,
    add_statistics,
    emit,
    guard_output,
    samples_dir,
    source,
    split_list,
    write_output,
)


def _add_common(parser: argparse.ArgumentParser, *, cohort: bool = True) -> None:
    add_grouping(parser, by_help="extra grouping columns, comma separated (e.g. model,split)")
    parser.add_argument(
        "--pair-by",
        type=split_list,
        default=(),
        help="extra keys a recovery branch and its no-recovery branch share (e.g. model,seed)",
    )
    if cohort:
        parser.add_argument(
            "--cohort",
            choices=("full", "factual_success"),
            default="full",
            help="all tasks (default) or tasks whose factual run succeeded",
        )
    add_statistics(parser)
    parser.add_argument(
        "--ci-method",
        choices=("auto", "fay-lumbard", "cluster-melded", "sign-flip", "percentile", "bca"),
        default="auto",
        help="interval method (default auto: exact in sparse cells, shown with the p-value of "
        "the test it inverts; percentile or bca for the bootstrap)",
    )
    parser.add_argument(
        "--alternative",
        choices=("two-sided", "greater", "less"),
        default="two-sided",
        help="one-sided p-values and intervals: greater = recovery helps (default two-sided)",
    )
    parser.add_argument(
        "--adjust",
        choices=("holm", "bh"),
        default=None,
        help="add p_adjusted over the cells of the result (Holm or Benjamini-Hochberg)",
    )
    spark_cli.add_engine(parser)
    parser.add_argument(
        "--out", type=Path, help="write the result to this parquet file (default: print it)"
    )
    add_printing(parser)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``paired``, ``contrast`` and ``policy`` subcommands."""
    parser = subparsers.add_parser(
        "paired",
        help="rescue and harm per condition × delay × method (CIR paired forks)",
        description="Pair every recovery branch with the no-recovery branch forked from the same "
        "state and count rescues and harms per (condition, delay, method), with an interval "
        "of the effect and the p-value of the test it inverts (the exact Fay-Lumbard "
        "interval, or the cluster meld where a task has several pairs; --ci-method "
        "percentile or bca for a task-level bootstrap, shown with the sign-flip p-value); the "
        "ci_method and test columns name each cell's. Rates are printed in percentage points.",
    )
    parser.add_argument("forks", nargs="+", help="forks table (paths, globs or directories)")
    _add_common(parser)
    parser.add_argument(
        "--overlap",
        type=split_list,
        metavar="A,B",
        help="also show which episodes methods A and B rescue, and how many both do",
    )
    parser.add_argument("--overlap-out", type=Path, help="write the overlap to this parquet file")
    parser.add_argument(
        "--break-even",
        action="store_true",
        help="add the break-even failure probability p* = d / (r + d) per cell, with its CI",
    )
    parser.add_argument(
        "--memory",
        type=float,
        metavar="GB",
        help="memory budget of the per-task pass in GB (default a quarter of the machine's "
        "memory, at most 4); a larger input is hash-partitioned into temporary files in the "
        "same single read",
    )
    parser.add_argument(
        "--pairs-out", type=Path, help="also write every pair (one row per branch) to this file"
    )
    parser.add_argument(
        "--exclusions-out",
        type=Path,
        help="also write the keys of the excluded recovery rows (unpaired, prefix_mismatch)",
    )
    _add_judged(parser)
    parser.set_defaults(func=_paired_command)

    parser = subparsers.add_parser(
        "contrast",
        help="effect of condition A minus effect of condition B (CIR paired forks)",
        description="At every (delay, method), the recovery effect under condition A minus the "
        "effect under B, with one bootstrap of tasks serving both conditions and a sign-flip "
        "p-value of the per-task difference.",
    )
    parser.add_argument("forks", nargs="+", help="forks table (paths, globs or directories)")
    parser.add_argument("--a", required=True, help="first condition, e.g. stale2")
    parser.add_argument("--b", required=True, help="second condition, e.g. clean")
    _add_common(parser)
    parser.set_defaults(func=run_contrast)

    parser = subparsers.add_parser(
        "policy",
        help="score a recovery policy's decisions against never recovering",
        description="Score a decision table (task_id, condition, delay or null) against the "
        "forks: success without and with the policy, gain, rescues, harms, interventions and "
        "the clean-touch rate, per condition and overall.",
    )
    parser.add_argument(
        "--decisions", nargs="+", required=True, help="decision table (paths or globs)"
    )
    parser.add_argument("--forks", nargs="+", required=True, help="forks table (paths or globs)")
    parser.add_argument(
        "--method", default=None, help="recovery method the policy applies (default: the only one)"
    )
    parser.add_argument(
        "--clean-label", default="clean", help="condition of correct observations (default clean)"
    )
    _add_common(parser, cohort=False)
    parser.set_defaults(func=run_policy)


def _add_judged(parser: argparse.ArgumentParser) -> None:
    """Add the options of a judged outcome (ARCHITECTURE §10; issue 40)."""
    group = parser.add_argument_group(
        "judged outcomes",
        "when an LLM judge decided the outcome: prediction-powered (PPI++) rescue, harm and "
        "effect from the judge on every branch and human labels on a random subset",
    )
    group.add_argument("--judge", metavar="COL", help="the judge's verdict (every branch)")
    group.add_argument(
        "--gold", metavar="COL", help="the human label (0/1; null where not labelled)"
    )
    group.add_argument(
        "--gold-strata",
        type=split_list,
        default=(),
        metavar="COLS",
        help="columns within which gold labels were drawn at random (stratified PPI)",
    )
    group.add_argument(
        "--judge-out", type=Path, help="also write the judge's sensitivity and specificity here"
    )
    for flag in ("--judge-sensitivity", "--judge-specificity"):
        group.add_argument(
            flag,
            type=float,
            help="the judge's known error rate: without --gold, the effect is corrected "
            "(Rogan-Gladen)",
        )


def _paired_command(args: argparse.Namespace) -> None:
    """Run ``paired``: the judged summary when a judge column is named, else :func:`run_paired`."""
    judged = (
        args.gold,
        args.judge_out,
        args.judge_sensitivity,
        args.judge_specificity,
        args.gold_strata or None,
    )
    if args.judge is None and all(v is None for v in judged):
        run_paired(args)
        return
    if args.judge is None:
        raise ParameterError(
            "`--gold`, `--judge-out`, `--gold-strata` and the judge's error rates need "
            "`--judge COL`, the judge's verdict."
        )
    _run_judged(args)


def _refuse_unjudged_options(args: argparse.Namespace) -> None:
    """Raise for ``paired`` options that mean nothing for a judged summary."""
    unsupported = [
        f"--{name.replace('_', '-')}"
        for name in ("overlap", "pairs_out", "exclusions_out", "break_even", "adjust")
        if getattr(args, name, None)
    ]
    if args.ci_method != "auto" or args.alternative != "two-sided":
        unsupported.append("--ci-method/--alternative")
    if unsupported:
        raise ParameterError(
            f"{', '.join(f'`{u}`' for u in unsupported)} cannot be used with `--judge`; a "
            "judged summary is two-sided PPI++ (ci_method ppi++-cp for rescue and harm, mover "
            "for the effect)."
        )


def _run_judged(args: argparse.Namespace) -> None:
    """Judged rescue, harm and effect (PPI++), and the judge's agreement with the gold."""
    from recoverylab import paired

    _refuse_unjudged_options(args)
    progress = Progress("paired", quiet=args.quiet)
    for target in (args.out, args.judge_out):
        if target is not None:
            guard_output(target, args)
    engine = spark_cli.engine_from(args)
    forks = source(args.forks, engine)
    rates = (args.judge_sensitivity, args.judge_specificity)
    if args.gold is not None and rates != (None, None):
        raise ParameterError(
            "give `--gold` or the judge's sensitivity and specificity, not both: with gold "
            "labels the judge's error rates are estimated (PPI++)."
        )
    if args.gold is None and None not in rates and args.judge_out is None:
        progress("judged effect corrected by the judge's known error rates (Rogan-Gladen)")
        corrected = paired.rogan_gladen_effect(
            forks,
            judge=args.judge,
            sensitivity=args.judge_sensitivity,
            specificity=args.judge_specificity,
            by=args.by,
            pair_by=args.pair_by,
            cohort=args.cohort,
            confidence=args.confidence,
            engine=engine,
        )
        title = "effect corrected for the judge's error rates (Rogan-Gladen)"
        emit(corrected, args.out, args, title=title, face="paired.judged")
        return
    if args.gold is None:
        raise ParameterError(
            "`--judge` needs `--gold COL` (human labels on a random subset of branches), or "
            "`--judge-sensitivity` and `--judge-specificity` (Rogan-Gladen)."
        )
    progress("judged outcomes: pairing the judge's verdicts, the gold labels and PPI++")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecoveryLabWarning)
        summary = paired.summarize_judged(
            forks,
            judge=args.judge,
            gold=args.gold,
            by=args.by,
            pair_by=args.pair_by,
            cohort=args.cohort,
            gold_strata=args.gold_strata,
            confidence=args.confidence,
            engine=engine,
        )
        agreement = None
        if args.judge_out is not None:
            agreement = paired.judge_agreement(
                forks, judge=args.judge, gold=args.gold, engine=engine
            )
    if not args.quiet:
        for warning in caught:
            print(f"recoverylab paired: warning: {warning.message}", file=sys.stderr)
    emit(
        summary,
        args.out,
        args,
        title="judged rescue, harm and effect (PPI++: judge on every branch, gold on a subset)",
        face="paired.judged",
    )
    if agreement is not None:
        emit(agreement, args.judge_out, args, face="judge.agreement")


def _statistics(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "confidence": args.confidence,
        "n_resamples": args.resamples,
        "seed": args.seed,
        "ci_method": args.ci_method,
        "alternative": args.alternative,
        "adjust": args.adjust,
    }


def run_paired(args: argparse.Namespace) -> None:
    """Summarise the forks (and optionally write pairs, exclusions and the overlap)."""
    from recoverylab import paired  # imported when the command runs, not at --help

    progress = Progress("paired", quiet=args.quiet)
    for target in (args.out, args.overlap_out, args.pairs_out, args.exclusions_out):
        if target is not None:
            guard_output(target, args)
    if args.overlap_out is not None and not args.overlap:
        raise ParameterError("`--overlap-out` needs `--overlap A,B` (the two methods).")
    if args.overlap is not None and len(args.overlap) != 2:
        raise ParameterError(
            f"`--overlap` is {','.join(args.overlap)!r}; it must name two methods, e.g. "
            "refresh,content_ablated."
        )
    engine = spark_cli.engine_from(args)
    if engine != "polars":
        spark_cli.refuse(args, ("overlap", "pairs_out", "exclusions_out"))
    forks = source(args.forks, engine)
    keys: dict[str, Any] = {"by": args.by, "pair_by": args.pair_by, "cohort": args.cohort}
    summary = paired.summarize(
        forks,
        **keys,
        **_statistics(args),
        progress=progress,
        engine=engine,
        break_even=args.break_even,
        memory=args.memory,
    )
    # every result is computed before the first is written: a bad option (say an unknown
    # overlap method) must leave no output behind
    excluded = overlap = None
    if args.exclusions_out is not None:
        excluded = paired.exclusions(forks, **keys, keys=True).collect(engine="streaming")
    if args.overlap:
        progress(f"rescue overlap of {args.overlap[0]} and {args.overlap[1]}")
        overlap = paired.rescue_overlap(forks, *args.overlap, **keys)
    if args.pairs_out is not None:
        progress(f"writing pairs to {args.pairs_out}")
        pairs = paired.pairs(forks, pair_by=args.pair_by, cohort=args.cohort)
        write_output(pairs, args.pairs_out, args)
    if excluded is not None:
        emit(excluded, args.exclusions_out, args, face="paired.exclusions")
    cohort = "" if args.cohort == "full" else f" ({args.cohort} cohort)"
    emit(
        summary,
        args.out,
        args,
        title=f"rescue and harm by condition, delay, method{cohort}",
        face="paired.summary",
    )
    if overlap is not None:
        if args.out is None and args.overlap_out is None:
            print()
        emit(overlap, args.overlap_out, args, title="rescue overlap", face="paired.overlap")


def run_contrast(args: argparse.Namespace) -> None:
    """Contrast two conditions."""
    from recoverylab import paired  # imported when the command runs, not at --help

    progress = Progress("contrast", quiet=args.quiet)
    if args.out is not None:
        guard_output(args.out, args)
    engine = spark_cli.engine_from(args)
    result = paired.contrast(
        source(args.forks, engine),
        args.a,
        args.b,
        by=args.by,
        pair_by=args.pair_by,
        cohort=args.cohort,
        **_statistics(args),
        progress=progress,
        engine=engine,
    )
    cohort = "" if args.cohort == "full" else f" ({args.cohort} cohort)"
    title = f"effect of {args.a} minus effect of {args.b}{cohort}"
    emit(result, args.out, args, title=title, face="paired.contrast")


def run_policy(args: argparse.Namespace) -> None:
    """Evaluate a policy's decisions."""
    from recoverylab import paired  # imported when the command runs, not at --help

    progress = Progress("policy", quiet=args.quiet)
    if args.out is not None:
        guard_output(args.out, args)
    engine = spark_cli.engine_from(args)
    result = paired.evaluate_policy(
        source(args.decisions, engine),
        source(args.forks, engine),
        pair_by=args.pair_by,
        by=args.by,
        method=args.method,
        clean_label=args.clean_label,
        **_statistics(args),
        progress=progress,
        engine=engine,
    )
    emit(
        result,
        args.out,
        args,
        title="policy against never recovering (per condition, and all conditions)",
        face="paired.policy",
    )


def demo(out_dir: Path, progress: Callable[[str], None]) -> list[Path]:
    """Run the paired protocol on ``data_samples/paired`` and write its results.

    Writes into ``out_dir/paired/``: the main cohort's cells and stale2 - clean contrast for the
    full and the factual-success cohort, the mechanism cohort's cells, exclusions and rescue
    overlap of refresh and content-ablated, the policy test table's evaluation, and the judged
    forks' PPI++ cells and the judge's agreement (``judged_summary``, ``judged_agreement``).
    """
    from recoverylab import paired  # imported when the command runs, not at --help
    from recoverylab.cli._judged import DEMO_FILES, paired_judged
    from recoverylab.io import write_parquet

    samples = samples_dir() / "paired"
    out = out_dir / "paired"
    main = samples / "main_forks.parquet"
    mechanism = samples / "mechanism_forks.parquet"
    written: list[Path] = []

    def write(frame: object, name: str) -> None:
        written.append(write_parquet(frame, out / f"{name}.parquet"))  # type: ignore[arg-type]

    cohorts: tuple[tuple[paired.Cohort, str], ...] = (
        ("full", "full"),
        ("factual_success", "factual"),
    )
    for cohort, tag in cohorts:
        progress(f"paired: main cohort, {cohort}")
        write(paired.summarize(main, cohort=cohort), f"main_{tag}_summary")
        write(paired.contrast(main, "stale2", "clean", cohort=cohort), f"main_{tag}_contrast")
    progress("paired: mechanism cohort")
    write(paired.summarize(mechanism), "mechanism_summary")
    write(paired.exclusions(mechanism).collect(), "mechanism_exclusions")
    write(paired.rescue_overlap(mechanism, "refresh", "content_ablated"), "mechanism_overlap")
    progress("paired: policy test table")
    write(
        paired.evaluate_policy(
            samples / "policy_decisions.parquet", samples / "policy_forks.parquet"
        ),
        "policy_summary",
    )
    progress("paired: judged forks (a judge of known error, gold labels on 30 % of tasks)")
    judged = paired_judged(samples / "judged_forks.parquet", judge="judge", gold="gold")
    for message in judged.warnings:
        progress(f"paired: warning: {message}")
    for frame, name in zip((judged.estimates, judged.agreement), DEMO_FILES["paired"], strict=True):
        written.append(write_parquet(frame, out_dir / name))
    return written
