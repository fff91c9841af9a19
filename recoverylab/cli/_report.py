"""``recoverylab report``: one self-contained HTML report from the inputs of each protocol.

The command runs the protocol functions on the given inputs (paired forks, policy decisions,
router rules, goal tables, takeover tables), then writes one HTML file that opens with a headline
summary read from those results and has, per result, its table (rates in percentage points,
``n`` beside every rate), its chart, two sentences on how to read it and a provenance block.
``recoverylab demo`` calls :func:`demo_report` to build the same report from the results it has
just written.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoverylab._errors import ParameterError
from recoverylab.cli._common import (
    Progress,
    add_statistics,
    announce_written,
    guard_output,
    read,
    samples_dir,
    split_list,
)

if TYPE_CHECKING:
    import polars as pl

    from recoverylab.cli._judged import Judged
    from recoverylab.report import Input, Provenance, Section

_GOAL_TABLES = ("cases", "resources", "episodes", "steps", "citations")
_TAKEOVER_TABLES = ("states", "attempts")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="one self-contained HTML report (tables, charts, provenance) of every protocol",
        description="Run each protocol whose inputs are given and write one HTML file that "
        "opens with no network: a headline summary read from the results (what helped where, "
        "what harmed, each policy's net gain and clean-touch rate, the gate's verdict), then "
        "per result its table (rates in percentage points, n beside every rate), its chart, "
        "how to read them, and a provenance block (inputs, row counts, exclusions by reason, "
        "seed, each cell's interval method and the resamples it drew, the test, version), and "
        "a glossary. Needs the report extra: pip install 'recoverylab[report]'.",
    )
    paired = parser.add_argument_group("CIR paired forks")
    paired.add_argument("--forks", nargs="+", help="forks table (paths or globs)")
    paired.add_argument(
        "--contrast",
        type=split_list,
        metavar="A,B",
        help="two conditions to contrast (default stale2,clean when the forks have both)",
    )
    paired.add_argument(
        "--overlap", type=split_list, metavar="A,B", help="two methods whose rescues to overlap"
    )
    paired.add_argument("--overlap-forks", nargs="+", help="forks of the overlap (default --forks)")
    paired.add_argument(
        "--cohort",
        choices=("full", "factual_success"),
        default="full",
        help="all tasks (default) or tasks whose factual run succeeded",
    )
    paired.add_argument(
        "--pair-by", type=split_list, default=(), help="extra pairing keys (e.g. model,seed)"
    )
    paired.add_argument(
        "--judge",
        metavar="COL",
        help="judged outcomes: the judge's verdict column of --forks (with --gold): the judge's "
        "agreement and the PPI++ corrected vs judge-only vs gold-only estimates",
    )
    paired.add_argument(
        "--gold", metavar="COL", help="the human label column of --forks (null where unlabelled)"
    )
    paired.add_argument(
        "--policy",
        type=Path,
        help="a release-gate policy (TOML): its verdicts on --forks open the report",
    )
    paired.add_argument("--decisions", nargs="+", help="a policy's decision table")
    paired.add_argument(
        "--policy-forks", nargs="+", help="forks of the decisions (default --forks)"
    )
    router = parser.add_argument_group("CIR router")
    router.add_argument(
        "--rule", type=Path, action="append", help="rule JSON from `router fit` (repeatable)"
    )
    router.add_argument("--decision-points", nargs="+", help="held-out decision points")
    router.add_argument("--router-forks", nargs="+", help="held-out forks (default --forks)")
    goal = parser.add_argument_group("goal preservation (AgentHeal)")
    for name in _GOAL_TABLES:
        goal.add_argument(f"--{name}", nargs="+", help=f"{name} table")
    goal.add_argument(
        "--goal-judge",
        metavar="COL",
        help="judged outcomes: the judge's verdict on success, a column of --episodes (with "
        "--goal-gold): the judge's agreement and PPI++ task success by regime",
    )
    goal.add_argument(
        "--goal-gold", metavar="COL", help="the human label of success (null where unlabelled)"
    )
    takeover = parser.add_argument_group("takeover (CUA-Recovery)")
    takeover.add_argument("--states", nargs="+", help="states table")
    takeover.add_argument("--attempts", nargs="+", help="attempts table")
    takeover.add_argument("--k", type=int, default=3, help="pass@k (default 3)")
    takeover.add_argument(
        "--takeover-judge",
        metavar="COL",
        help="judged outcomes: the judge's verdict column of --attempts (with --takeover-gold): "
        "the judge's agreement and PPI++ pass@1 (or EAR) by agent, and pass@k and pass^k "
        "(--k) of a judge of passed, clustered by workflow",
    )
    takeover.add_argument(
        "--takeover-gold",
        metavar="COL",
        help="the human label column of --attempts (null where unlabelled)",
    )
    takeover.add_argument(
        "--takeover-judge-outcome",
        choices=("passed", "aware"),
        default="passed",
        help="what the takeover judge decided: passed (pass@1, default) or aware (EAR)",
    )
    add_statistics(parser)
    parser.add_argument("--title", default="recoverylab report", help="page title")
    parser.add_argument(
        "--out", type=Path, default=Path("report.html"), help="HTML file (default report.html)"
    )
    parser.set_defaults(func=run)


def _shown(paths: Sequence[str | Path]) -> str:
    """Paths as given, those inside the shipped samples relative to the checkout."""
    shown = []
    for path in paths:
        resolved = Path(path).resolve()
        try:
            shown.append(str(resolved.relative_to(samples_dir().resolve().parent)))
        except (ValueError, ParameterError):
            shown.append(str(path))
    return ", ".join(shown)


def _input(name: str, paths: Sequence[str | Path]) -> Input:
    import polars as pl

    from recoverylab.report import Input

    rows = read([str(p) for p in paths]).select(pl.len()).collect().item()
    return Input(name, _shown(paths), rows)


def _provenance(
    inputs: Sequence[tuple[str, Sequence[str | Path]]],
    *,
    seed: int | None = None,
    n_resamples: int | None = None,
    confidence: float | None = None,
    settings: Sequence[tuple[str, str]] = (),
    excluded: pl.DataFrame | None = None,
) -> Provenance:
    from recoverylab.report import Provenance

    return Provenance(
        inputs=tuple(_input(name, paths) for name, paths in inputs),
        exclusions=() if excluded is None else _rows_by_reason(excluded),
        seed=seed,
        n_resamples=n_resamples,
        confidence=confidence,
        settings=tuple(settings),
    )


def _rows_by_reason(excluded: pl.DataFrame) -> tuple[tuple[str, int], ...]:
    import polars as pl

    reasons = excluded.group_by("reason").agg(pl.col("rows").sum()).sort("reason")
    return tuple(zip(reasons["reason"], reasons["rows"], strict=True))


def _require_together(args: argparse.Namespace, names: Sequence[str], what: str) -> bool:
    """Whether the options of one protocol are given; refuse a partial set."""
    given = [n for n in names if getattr(args, n) is not None]
    if given and len(given) != len(names):
        missing = ", ".join(f"--{n.replace('_', '-')}" for n in names if n not in given)
        raise ParameterError(f"{what} needs {missing} as well.")
    return bool(given)


def run(args: argparse.Namespace) -> None:
    """Run every protocol whose inputs are given and write the report."""
    from recoverylab import report

    _check_extra()  # fail before any work when the report extra is missing
    progress = Progress("report", quiet=args.quiet)
    guard_output(args.out, args)
    if args.out.suffix.lower() not in (".html", ".htm"):
        raise ParameterError(f"`--out` is `{args.out}`; the report is an .html file.")
    stats = {"seed": args.seed, "n_resamples": args.resamples, "confidence": args.confidence}
    sections: list[Section] = []
    found: dict[str, Any] = {}  # the results the headline reads
    if args.forks is not None:
        sections += _paired(args, stats, progress, found)
    elif any(getattr(args, n) for n in ("contrast", "overlap", "overlap_forks")):
        raise ParameterError("`--contrast` and `--overlap` need `--forks`.")
    sections += _judged(args, progress)
    if args.policy is not None:
        sections = [_gate(args, progress, found), *sections]  # the verdicts come first
    if args.decisions is not None:
        sections += _policy(args, stats, progress, found)
    if args.rule is not None or args.decision_points is not None:
        sections += _router(args, stats, progress, found)
    if _require_together(args, ("cases", "resources", "episodes"), "the goal report"):
        sections += _goal(args, stats, progress, found)
    if _require_together(args, _TAKEOVER_TABLES, "the takeover report"):
        sections += _takeover(args, stats, progress, found)
    if not sections:
        raise ParameterError(
            "give the inputs of at least one protocol: --forks, --decisions, --rule with "
            "--decision-points, --cases/--resources/--episodes, or --states/--attempts."
        )
    sections = [*_headline(found, args.confidence, sections), *sections]
    progress(f"writing {len(sections)} sections to {args.out}")
    report.write_report(args.out, sections, title=args.title)
    announce_written(f"wrote {args.out} ({len(sections)} sections)")


def _headline(
    found: dict[str, Any], confidence: float, sections: Sequence[Section]
) -> list[Section]:
    """Return the headline section when a result it reads was computed.

    Its provenance lists the inputs of the sections whose results it reads.
    """
    from recoverylab import report

    if not found:
        return []
    read = (
        "paired-effect",
        "paired-policy",
        "router-policies",
        "gate",
        "goal-drop",
        "takeover-funnel",
    )
    inputs = {(i.name, i.source): i for s in sections if s.key in read for i in s.provenance.inputs}
    provenance = report.Provenance(
        inputs=tuple(inputs.values()),
        confidence=confidence,
        settings=(("read from", "the results of the sections below, as their tables show them"),),
    )
    return [report.headline_section(**found, confidence=confidence, provenance=provenance)]


def _check_extra() -> None:
    from recoverylab import report

    report.check_extra()


def _paired(
    args: argparse.Namespace, stats: dict[str, Any], progress: Progress, found: dict[str, Any]
) -> list[Section]:
    from recoverylab import paired, report

    forks = read(args.forks)
    keys = {"pair_by": args.pair_by, "cohort": args.cohort}
    cohort = [("cohort", args.cohort), ("pair_by", ", ".join(args.pair_by) or "none")]
    provenance = _provenance([("forks", args.forks)], **stats, settings=cohort)
    progress("paired: rescue and harm per cell")
    summary = paired.summarize(forks, **keys, **stats)
    found["effects"] = summary
    sections = [
        report.rescue_harm_section(summary, provenance),
        report.effect_section(summary, provenance),
    ]
    pair = args.contrast
    if pair is None and {"stale2", "clean"} <= set(summary["condition"].to_list()):
        pair = ("stale2", "clean")
    if pair:
        if len(pair) != 2:
            raise ParameterError(f"`--contrast` is {','.join(pair)!r}; give two conditions.")
        progress(f"paired: contrast {pair[0]} - {pair[1]}")
        contrast = paired.contrast(forks, pair[0], pair[1], **keys, **stats)
        if _has_rows(contrast, "the contrast", progress):
            sections.append(report.contrast_section(contrast, provenance))
    if args.overlap:
        if len(args.overlap) != 2:
            raise ParameterError(f"`--overlap` is {','.join(args.overlap)!r}; give two methods.")
        source = args.overlap_forks or args.forks
        progress(f"paired: rescue overlap of {args.overlap[0]} and {args.overlap[1]}")
        overlap = paired.rescue_overlap(read(source), args.overlap[0], args.overlap[1], **keys)
        excluded = paired.exclusions(read(source), **keys).collect()
        overlap_provenance = _provenance([("forks", source)], settings=cohort, excluded=excluded)
        if _has_rows(overlap, "the rescue overlap", progress):
            sections.append(report.overlap_section(overlap, overlap_provenance))
    return sections


#: Per protocol: the judged sections' key prefix, their heading's subject and input names.
_JUDGED_NAMES = {
    "paired": ("judged", "Paired forks"),
    "takeover": ("takeover-judged", "Takeover"),
    "goal": ("goal-judged", "Goal preservation"),
}


def _judged_sections(protocol: str, judged: Judged, provenance: Provenance) -> list[Section]:
    """Return the judge's agreement and the corrected estimates of one protocol as sections."""
    from recoverylab import report

    prefix, subject = _JUDGED_NAMES[protocol]
    pass_k = []
    if judged.pass_k is not None:
        pass_k = [
            report.judged_estimates_section(
                judged.pass_k,
                provenance,
                cluster=judged.cluster,
                key=f"{prefix}-pass-k",
                title=f"{subject}: pass@k and pass^k, corrected (PPI++) vs judge-only vs gold-only",
            )
        ]
    return [
        report.judge_agreement_section(
            judged.agreement,
            provenance,
            cluster=judged.cluster,
            key=f"{prefix}-agreement",
            title=f"{subject}: the judge against the gold labels "
            "(sensitivity, specificity, agreement)",
        ),
        report.judged_estimates_section(
            judged.estimates,
            provenance,
            cluster=judged.cluster,
            key=f"{prefix}-estimates",
            title=f"{subject}: corrected (PPI++) vs judge-only vs gold-only",
        ),
        *pass_k,
    ]


def _judged(args: argparse.Namespace, progress: Progress) -> list[Section]:
    """Return the judged-outcome sections of every protocol whose judge and gold are given.

    ``--judge``/``--gold`` on ``--forks``, ``--takeover-judge``/``--takeover-gold`` on
    ``--attempts``, ``--goal-judge``/``--goal-gold`` on ``--episodes``; none without them; one
    clear error for a judge without its gold (or the reverse) or without its protocol's inputs.
    The statistics' warnings (cells on the gold-only interval) go to stderr unless ``--quiet``.
    """
    sections: list[Section] = []
    for protocol, compute in (
        ("paired", _judged_paired),
        ("takeover", _judged_takeover),
        ("goal", _judged_goal),
    ):
        result = compute(args, progress)
        if result is None:
            continue
        judged, provenance = result
        sections += _judged_sections(protocol, judged, provenance)
        if not args.quiet:
            for message in judged.warnings:
                print(f"recoverylab report: warning: {message}", file=sys.stderr)
    return sections


def _judged_paired(
    args: argparse.Namespace, progress: Progress
) -> tuple[Judged, Provenance] | None:
    """Judged paired cells of ``--forks`` (``--judge``, ``--gold``), or None without them."""
    from recoverylab.cli._judged import paired_judged

    if not _require_together(args, ("judge", "gold"), "the judged report"):
        return None
    if args.forks is None:
        raise ParameterError("`--judge` and `--gold` need `--forks`.")
    progress("judged outcomes (paired): the judge against the gold labels, PPI++ per cell")
    keys = {"pair_by": args.pair_by, "cohort": args.cohort}
    judged = paired_judged(
        read(args.forks), judge=args.judge, gold=args.gold, **keys, confidence=args.confidence
    )
    settings = [
        ("judge", args.judge),
        ("gold", args.gold),
        ("cohort", args.cohort),
        ("pair_by", ", ".join(args.pair_by) or "none"),
    ]
    return judged, _provenance(
        [("forks", args.forks)], confidence=args.confidence, settings=settings
    )


def _judged_takeover(
    args: argparse.Namespace, progress: Progress
) -> tuple[Judged, Provenance] | None:
    """Judged attempt rates by agent (``--takeover-judge``, ``--takeover-gold``), or None."""
    from recoverylab.cli._judged import takeover_judged

    names = ("takeover_judge", "takeover_gold")
    if not _require_together(args, names, "the judged takeover report"):
        return None
    if args.states is None or args.attempts is None:
        raise ParameterError(
            "`--takeover-judge` and `--takeover-gold` need `--states` and `--attempts`."
        )
    outcome = args.takeover_judge_outcome
    progress(f"judged outcomes (takeover): the judge of {outcome} against the gold labels")
    judged = takeover_judged(
        read(args.states),
        read(args.attempts),
        judges=[(outcome, args.takeover_judge, args.takeover_gold)],
        k=args.k,
        confidence=args.confidence,
    )
    settings = [
        ("judge", f"{args.takeover_judge} (decides {outcome})"),
        ("gold", args.takeover_gold),
        ("by", "agent"),
        *([("k", str(args.k))] if outcome == "passed" else []),
    ]
    inputs = [("states", args.states), ("attempts", args.attempts)]
    return judged, _provenance(inputs, confidence=args.confidence, settings=settings)


def _judged_goal(args: argparse.Namespace, progress: Progress) -> tuple[Judged, Provenance] | None:
    """Judged task success by regime (``--goal-judge``, ``--goal-gold``), or None."""
    from recoverylab import goal
    from recoverylab.cli._judged import goal_judged

    if not _require_together(args, ("goal_judge", "goal_gold"), "the judged goal report"):
        return None
    if any(getattr(args, name) is None for name in ("cases", "resources", "episodes")):
        raise ParameterError(
            "`--goal-judge` and `--goal-gold` need `--cases`, `--resources` and `--episodes`."
        )
    progress("judged outcomes (goal): the judge of success against the gold labels")
    tables = (read(p) if p else None for p in (getattr(args, t) for t in _GOAL_TABLES))
    judged = goal_judged(
        goal.score(*tables), judge=args.goal_judge, gold=args.goal_gold, confidence=args.confidence
    )
    given = [(name, getattr(args, name)) for name in _GOAL_TABLES if getattr(args, name)]
    settings = [("judge", args.goal_judge), ("gold", args.goal_gold), ("by", "regime")]
    return judged, _provenance(given, confidence=args.confidence, settings=settings)


def _gate(args: argparse.Namespace, progress: Progress, found: dict[str, Any]) -> Section:
    """Return the release gate's verdicts on ``--forks`` (and ``--decisions``) as a section."""
    from recoverylab import paired, report

    if args.forks is None:
        raise ParameterError("`--policy` needs `--forks`.")
    policy = paired.read_policy(args.policy)
    progress(f"gate: {len(policy.claims)} claims of {args.policy}")
    decisions = read(args.decisions) if args.decisions else None
    result = paired.gate(read(args.forks), policy, decisions=decisions)
    found["gate"] = result
    inputs = [("forks", args.forks), *([("decisions", args.decisions)] if args.decisions else [])]
    settings = [("policy", _shown([args.policy])), ("adjust", policy.adjust)]
    return report.gate_section(result, _provenance(inputs, settings=settings))


def _has_rows(frame: pl.DataFrame, what: str, progress: Progress) -> bool:
    """Whether a result has rows; a result without any has no section (and says so)."""
    if frame.height:
        return True
    progress(f"{what} has no rows; its section is left out")
    return False


def _policy(
    args: argparse.Namespace, stats: dict[str, Any], progress: Progress, found: dict[str, Any]
) -> list[Section]:
    from recoverylab import paired, report

    source = args.policy_forks or args.forks
    if source is None:
        raise ParameterError("`--decisions` needs `--policy-forks` (or `--forks`).")
    progress("paired: the policy's decisions against never recovering")
    evaluation = paired.evaluate_policy(
        read(args.decisions), read(source), pair_by=args.pair_by, **stats
    )
    provenance = _provenance([("decisions", args.decisions), ("forks", source)], **stats)
    found["policy"] = evaluation
    return [report.policy_section(evaluation, provenance)]


def _router(
    args: argparse.Namespace, stats: dict[str, Any], progress: Progress, found: dict[str, Any]
) -> list[Section]:
    from recoverylab import report
    from recoverylab.cli._router import _load_named, evaluate_uplift
    from recoverylab.router import Never, compare

    source = args.router_forks or args.forks
    if args.rule is None or args.decision_points is None or source is None:
        raise ParameterError(
            "the router report needs --rule, --decision-points and --router-forks (or --forks)."
        )
    named = _load_named(args.rule)
    named.setdefault("never", Never())
    progress(f"router: scoring {len(named)} policies on the held-out tasks")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluation = compare(named, read(args.decision_points), read(source), **stats)
    for warning in caught:
        print(f"recoverylab report: warning: {warning.message}", file=sys.stderr)
    found["router"] = evaluation
    provenance = _provenance(
        [("decision_points", args.decision_points), ("forks", source)],
        **stats,
        settings=[("rules", _shown(args.rule))],
    )
    progress("router: uplift (TOC, RATE) on the held-out tasks")
    scored = {name: policy for name, policy in named.items() if name != "never"}
    lift = evaluate_uplift(scored, read(args.decision_points), read(source), **stats)
    return [
        report.router_policies_section(evaluation, provenance),
        report.toc_section(lift.curves, lift.metrics, provenance),
    ]


def _goal(
    args: argparse.Namespace, stats: dict[str, Any], progress: Progress, found: dict[str, Any]
) -> list[Section]:
    from recoverylab import goal, report

    if (args.steps is None) != (args.citations is None):
        raise ParameterError(
            "give both --steps and --citations, or neither (episodes in the nested form)."
        )
    given = [(name, getattr(args, name)) for name in _GOAL_TABLES if getattr(args, name)]
    progress("goal: scoring episodes")
    tables = (read(p) if p else None for p in (getattr(args, t) for t in _GOAL_TABLES))
    scored = goal.score(*tables).collect()
    provenance = _provenance(given, **stats)
    progress("goal: task success by regime")
    by_regime = goal.summarize(scored, by=("regime",), **stats)
    by_model = by_regime
    if "model" in scored.columns:
        by_model = goal.summarize(scored, by=("model", "regime"), **stats)
    sections = [
        report.ts_section(by_model, provenance),
        report.reasons_section(by_regime, provenance),
    ]
    if "goal_id" in scored.columns:
        progress("goal: barrier drop paired by goal")
        models = [c for c in scored.columns if c == "model"]  # per model when there are models
        drop = goal.barrier_drop(scored, by=models, **stats)
        if _has_rows(drop, "the barrier drop (no goal has both sides)", progress):
            found["drop"] = drop
            sections.append(report.drop_section(drop, provenance))
    return sections


def _takeover(
    args: argparse.Namespace, stats: dict[str, Any], progress: Progress, found: dict[str, Any]
) -> list[Section]:
    from recoverylab import report, takeover

    states, attempts = read(args.states), read(args.attempts)
    provenance = _provenance(
        [("states", args.states), ("attempts", args.attempts)],
        **stats,
        settings=[("k", str(args.k))],
    )
    progress("takeover: EAR and pass@k by agent and depth")
    by_depth = takeover.summarize(states, attempts, by=("agent", "depth"), k=args.k, **stats)
    progress("takeover: repair funnel by agent")
    pooled = takeover.summarize(states, attempts, by=("agent",), k=args.k, **stats)
    found["takeover"] = pooled
    progress("takeover: pass^k, flip rate and ICC of repeats by agent and depth")
    reliability = takeover.reliability(states, attempts, by=("agent", "depth"), k=args.k, **stats)
    return [
        report.depth_section(by_depth, provenance),
        report.funnel_section(pooled, provenance),
        report.reliability_section(reliability, provenance),
    ]


#: Resampling settings of each protocol's demo (see the ``demo`` functions of the CLI modules).
DEMO_SETTINGS: dict[str, dict[str, Any]] = {
    "paired": {"seed": 0, "n_resamples": 10_000, "confidence": 0.95},
    "router": {"seed": 0, "n_resamples": 10_000, "confidence": 0.95},
    "goal": {"seed": 0, "n_resamples": 2_000, "confidence": 0.95},
    "takeover": {"seed": 0, "n_resamples": 2_000, "confidence": 0.95},
}


def _with_cohort(frame: pl.DataFrame, cohort: str, before: str) -> pl.DataFrame:
    """Insert a ``cohort`` key column before the first result column."""
    import polars as pl

    at = frame.columns.index(before)
    return frame.select(*frame.columns[:at], pl.lit(cohort).alias("cohort"), *frame.columns[at:])


class _Demo:
    """The demo outputs under one directory: which exist, and reading them."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.samples = samples_dir()

    def have(self, *names: str) -> bool:
        return all((self.out_dir / name).is_file() for name in names)

    def load(self, name: str) -> pl.DataFrame:
        import polars as pl

        return pl.read_parquet(self.out_dir / name)


def demo_sections(out_dir: Path, progress: Callable[[str], None]) -> list[Section]:
    """Report sections of the results the demos wrote into ``out_dir`` (missing ones skipped)."""
    demo = _Demo(out_dir)
    found: dict[str, Any] = {}  # the results the headline reads
    sections = [
        *_demo_paired(demo, progress, found),
        *_demo_overlap_and_policy(demo, found),
        *_demo_router(demo, progress, found),
        *_demo_goal(demo, progress, found),
        *_demo_takeover(demo, progress, found),
        *_demo_judged(demo, progress),
    ]
    confidence = DEMO_SETTINGS["paired"]["confidence"]
    return [*_headline(found, confidence, sections), *sections]


def _demo_paired(
    demo: _Demo, progress: Callable[[str], None], found: dict[str, Any]
) -> list[Section]:
    """Rescue/harm, effect and contrast sections of both cohorts of the main forks."""
    from recoverylab import report

    if not demo.have("paired/main_full_summary.parquet", "paired/main_factual_summary.parquet"):
        return []
    progress("report: paired sections")
    provenance = _provenance(
        [("forks", [demo.samples / "paired" / "main_forks.parquet"])],
        **DEMO_SETTINGS["paired"],
        settings=[("cohort", "full and factual_success (both shown)")],
    )

    def both_cohorts(kind: str, before: str) -> pl.DataFrame:
        import polars as pl

        return pl.concat(
            [
                _with_cohort(demo.load(f"paired/main_{tag}_{kind}.parquet"), cohort, before)
                for tag, cohort in (("full", "full"), ("factual", "factual_success"))
            ]
        )

    summary = both_cohorts("summary", "n")
    found["effects"] = summary
    sections = [
        report.rescue_harm_section(summary, provenance),
        report.effect_section(summary, provenance),
    ]
    if demo.have("paired/main_full_contrast.parquet", "paired/main_factual_contrast.parquet"):
        contrasts = both_cohorts("contrast", "n_tasks")
        sections.append(report.contrast_section(contrasts, provenance))
    return sections


def _demo_overlap_and_policy(demo: _Demo, found: dict[str, Any]) -> list[Section]:
    """Build the mechanism overlap (with its exclusions) and the policy sections."""
    from recoverylab import report

    paired_dir = demo.samples / "paired"
    sections = []
    if demo.have("paired/mechanism_overlap.parquet", "paired/mechanism_exclusions.parquet"):
        excluded = demo.load("paired/mechanism_exclusions.parquet")
        provenance = _provenance(
            [("forks", [paired_dir / "mechanism_forks.parquet"])], excluded=excluded
        )
        overlap = demo.load("paired/mechanism_overlap.parquet")
        sections.append(report.overlap_section(overlap, provenance))
    if demo.have("paired/policy_summary.parquet"):
        provenance = _provenance(
            [
                ("decisions", [paired_dir / "policy_decisions.parquet"]),
                ("forks", [paired_dir / "policy_forks.parquet"]),
            ],
            **DEMO_SETTINGS["paired"],
        )
        policy = demo.load("paired/policy_summary.parquet")
        found["policy"] = policy
        sections.append(report.policy_section(policy, provenance))
    return sections


def _demo_router(
    demo: _Demo, progress: Callable[[str], None], found: dict[str, Any]
) -> list[Section]:
    """Build the router evaluation and, when written, its uplift (TOC) section."""
    from recoverylab import report
    from recoverylab.cli._router import DEMO_FILES, UPLIFT_DEMO_RESAMPLES

    if not demo.have(DEMO_FILES["evaluation"]):
        return []
    progress("report: router section")
    router_dir = demo.samples / "router"
    provenance = _provenance(
        [
            ("decision_points", [router_dir / "test" / "decision_points.parquet"]),
            ("forks", [router_dir / "test" / "forks.parquet"]),
        ],
        **DEMO_SETTINGS["router"],
        settings=[
            ("fitted on", _shown([router_dir / "train"])),
            ("rule", f"{DEMO_FILES['rule']} (written by the demo)"),
        ],
    )
    evaluation = demo.load(DEMO_FILES["evaluation"])
    found["router"] = evaluation
    sections = [report.router_policies_section(evaluation, provenance)]
    if demo.have(DEMO_FILES["toc"], DEMO_FILES["uplift"]):
        uplift_provenance = replace(provenance, n_resamples=UPLIFT_DEMO_RESAMPLES)
        curves, metrics = demo.load(DEMO_FILES["toc"]), demo.load(DEMO_FILES["uplift"])
        sections.append(report.toc_section(curves, metrics, uplift_provenance))
    return sections


def _demo_goal(
    demo: _Demo, progress: Callable[[str], None], found: dict[str, Any]
) -> list[Section]:
    """Task success by model, failure reasons and the barrier drop of the synthetic set."""
    from recoverylab import report

    if not demo.have("goal/synthetic_by_model.parquet", "goal/synthetic_summary.parquet"):
        return []
    progress("report: goal sections")
    goal_dir = demo.samples / "goal" / "synthetic"
    provenance = _provenance(
        [(name, [goal_dir / name]) for name in _GOAL_TABLES], **DEMO_SETTINGS["goal"]
    )
    sections = [
        report.ts_section(demo.load("goal/synthetic_by_model.parquet"), provenance),
        report.reasons_section(demo.load("goal/synthetic_summary.parquet"), provenance),
    ]
    if demo.have("goal/synthetic_drop.parquet"):
        found["drop"] = demo.load("goal/synthetic_drop.parquet")
        sections.append(report.drop_section(found["drop"], provenance))
    return sections


def _demo_takeover(
    demo: _Demo, progress: Callable[[str], None], found: dict[str, Any]
) -> list[Section]:
    """Depth, funnel and (when written) reliability sections of the takeover sample."""
    from recoverylab import report

    if not demo.have("takeover/summary.parquet", "takeover/summary_by_agent.parquet"):
        return []
    progress("report: takeover sections")
    takeover_dir = demo.samples / "takeover"
    provenance = _provenance(
        [(name, [takeover_dir / f"{name}.parquet"]) for name in _TAKEOVER_TABLES],
        **DEMO_SETTINGS["takeover"],
        settings=[("k", "3")],
    )
    found["takeover"] = demo.load("takeover/summary_by_agent.parquet")
    sections = [
        report.depth_section(demo.load("takeover/summary.parquet"), provenance),
        report.funnel_section(found["takeover"], provenance),
    ]
    if demo.have("takeover/reliability.parquet"):
        reliability = demo.load("takeover/reliability.parquet")
        sections.append(report.reliability_section(reliability, provenance))
    return sections


def _demo_judged(demo: _Demo, progress: Callable[[str], None]) -> list[Section]:
    """Judged outcomes of the judged samples, per protocol whose demo wrote both files.

    The tables are the files the demos wrote (``cli._judged.DEMO_FILES``), on the samples and
    with the judge and gold columns the demos used (``cli._judged``'s demo constants).
    """
    from recoverylab.cli._judged import (
        CLUSTERS,
        DEMO_FILES,
        DEMO_K,
        DEMO_PASS_K,
        GOAL_DEMO_JUDGE,
        TAKEOVER_DEMO_JUDGES,
        Judged,
    )

    samples = demo.samples
    goal_tables = [(name, [samples / "goal" / "synthetic" / name]) for name in _GOAL_TABLES]
    goal_tables[_GOAL_TABLES.index("episodes")] = (
        "episodes",
        [samples / "goal" / "judged_episodes.parquet"],
    )
    takeover_judges = ", ".join(f"{j} (decides {o})" for o, j, _ in TAKEOVER_DEMO_JUDGES)
    takeover_golds = ", ".join(g for _, _, g in TAKEOVER_DEMO_JUDGES)
    goal_judge, goal_gold = GOAL_DEMO_JUDGE
    inputs: dict[str, tuple[list[tuple[str, list[Path]]], list[tuple[str, str]]]] = {
        "paired": (
            [("forks", [samples / "paired" / "judged_forks.parquet"])],
            [("judge", "judge"), ("gold", "gold"), ("cohort", "full"), ("pair_by", "none")],
        ),
        "takeover": (
            [
                ("states", [samples / "takeover" / "states.parquet"]),
                ("attempts", [samples / "takeover" / "judged_attempts.parquet"]),
            ],
            [
                ("judge", takeover_judges),
                ("gold", takeover_golds),
                ("by", "agent"),
                ("k", str(DEMO_K)),
            ],
        ),
        "goal": (goal_tables, [("judge", goal_judge), ("gold", goal_gold), ("by", "regime")]),
    }
    sections: list[Section] = []
    for protocol, (given, settings) in inputs.items():
        estimates, agreement = DEMO_FILES[protocol]
        if not demo.have(estimates, agreement):
            continue
        progress(f"report: judged outcomes ({protocol})")
        pass_k = (
            demo.load(DEMO_PASS_K) if protocol == "takeover" and demo.have(DEMO_PASS_K) else None
        )
        frames = demo.load(estimates), demo.load(agreement)
        judged = Judged(*frames, CLUSTERS[protocol], pass_k=pass_k)
        confidence = DEMO_SETTINGS[protocol]["confidence"]
        provenance = _provenance(given, confidence=confidence, settings=settings)
        sections += _judged_sections(protocol, judged, provenance)
    return sections


def demo_report(out_dir: Path, progress: Callable[[str], None]) -> Path | None:
    """Write ``out_dir/report.html`` from the demo results; ``None`` without the report extra."""
    from recoverylab._errors import MissingDependencyError
    from recoverylab.report import write_report

    try:
        _check_extra()
    except MissingDependencyError as exc:
        print(f"recoverylab demo: report.html skipped: {exc}", file=sys.stderr)
        return None
    sections = demo_sections(out_dir, progress)
    if not sections:
        return None
    progress(f"report: writing {len(sections)} sections")
    return write_report(
        out_dir / "report.html", sections, title="recoverylab demo report (shipped samples)"
    )
