"""``recoverylab router fit|decide|evaluate``: the CIR router (ARCHITECTURE §3.2)."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoverylab._errors import ParameterError
from recoverylab.cli import _engine as spark_cli
from recoverylab.cli._common import (
    Progress,
    add_printing,
    add_statistics,
    announce_written,
    emit,
    emit_many,
    guard_output,
    headline,
    printing,
    read,
    samples_dir,
    source,
    split_list,
    write_output,
)

if TYPE_CHECKING:
    import polars as pl

#: Features of the shipped router sample (see data_samples/router/README.md).
SAMPLE_FEATURES = (
    "repetition",
    "noops",
    "obs_novelty",
    "consistency",
    "progress",
    "context_used",
)

_POLICIES = ("router", "anomaly", "rate_matched")
#: Task resamples of the demo's uplift evaluation.
UPLIFT_DEMO_RESAMPLES = 2_000

#: The files ``recoverylab demo`` writes for the router (the report's demo sections read them).
DEMO_FILES = {
    "rule": "router_rule.json",
    "decisions": "router_decisions.parquet",
    "evaluation": "router_evaluation.parquet",
    "uplift": "router_uplift.parquet",
    "toc": "router_toc.parquet",
}


def _delays(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in split_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid delays {text!r}; give integers separated by commas, e.g. 1,2,4"
        ) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``router`` subcommand group (fit, decide, evaluate)."""
    parser = subparsers.add_parser(
        "router",
        help="learn, apply and evaluate a selective recovery rule (CIR router)",
        description="Causal Intervention Router: learn when a refresh helps from paired forks, "
        "export the rule as JSON, apply it, and evaluate it on held-out tasks.",
    )
    actions = parser.add_subparsers(dest="router_command", metavar="ACTION", required=True)

    fit = actions.add_parser(
        "fit",
        help="fit a rule on training decision points and forks; write it as JSON",
        description="Fit the router (or a baseline) on training tasks and write the rule JSON. "
        "Prints the out-of-fold fit report.",
    )
    fit.add_argument("--decision-points", nargs="+", required=True, help="training points")
    fit.add_argument("--forks", nargs="+", required=True, help="training forks")
    fit.add_argument(
        "--features", type=split_list, required=True, help="feature columns, comma separated"
    )
    fit.add_argument("--out", type=Path, required=True, help="rule JSON file to write")
    fit.add_argument(
        "--policy",
        choices=_POLICIES,
        default="router",
        help="router (default), anomaly (p_err only) or rate_matched (p_err at the router's "
        "training intervention rate)",
    )
    fit.add_argument("--C", type=float, default=0.1, help="inverse L2 strength (default 0.1)")
    fit.add_argument("--lam", type=float, default=2.0, help="harm weight lambda (default 2)")
    fit.add_argument("--eps", type=float, default=0.02, help="clean-harm limit (default 0.02)")
    fit.add_argument("--delays", type=_delays, default=(1, 2, 4), help="default 1,2,4")
    fit.add_argument("--folds", type=int, default=5, help="OOF folds by task (default 5)")
    fit.add_argument("--clean-label", default="clean", help="clean condition (default clean)")
    fit.add_argument("--method", default="refresh", help="recovery method (default refresh)")
    fit.add_argument("--pair-by", type=split_list, default=(), help="extra episode keys")
    fit.add_argument("--seed", type=int, default=0, help="fold seed (default 0)")
    fit.set_defaults(func=run_fit)

    decide = actions.add_parser(
        "decide",
        help="apply a rule: one row per episode with the chosen delay (or null)",
        description="Apply a rule JSON to decision points; write task_id, condition, *pair_by, "
        "delay (null = no refresh).",
    )
    decide.add_argument("--rule", type=Path, required=True, help="rule JSON from `router fit`")
    decide.add_argument("--decision-points", nargs="+", required=True)
    decide.add_argument("--out", type=Path, help="parquet file to write (default: print)")
    decide.set_defaults(func=run_decide)

    evaluate = _add_evaluate(actions)
    for action in (fit, decide, evaluate):
        add_printing(action)
        # the global flags work after the action too
        action.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
        action.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS)


def _add_evaluate(actions: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``router evaluate`` (its statistics and ``--engine``)."""
    evaluate = actions.add_parser(
        "evaluate",
        help="score rules on held-out forks against never recovering",
        description="Score one or more rules on held-out decision points and forks: per rule "
        "and condition (and overall) the success rate without and with the rule, the gain with "
        "its task-level CI and sign-flip p, rescue, harm, intervention and clean-touch rates; "
        "and the paired margin of the first rule over each other one.",
    )
    evaluate.add_argument(
        "--rule", type=Path, action="append", required=True, help="rule JSON (repeatable)"
    )
    evaluate.add_argument("--decision-points", nargs="+", required=True)
    evaluate.add_argument("--forks", nargs="+", required=True)
    evaluate.add_argument("--out", type=Path, help="parquet file to write (default: print)")
    evaluate.add_argument(
        "--uplift-out", type=Path, help="write the RATE / uplift@k metrics to this parquet file"
    )
    evaluate.add_argument(
        "--toc-out", type=Path, help="write the TOC and Qini curves to this parquet file"
    )
    evaluate.add_argument(
        "--no-uplift", action="store_true", help="skip the uplift evaluation (TOC, RATE)"
    )
    add_statistics(evaluate)
    spark_cli.add_engine(evaluate)
    evaluate.set_defaults(func=run_evaluate)
    return evaluate


def _fit_policy(args: argparse.Namespace, progress: Progress):
    """Fit the policy ``--policy`` names on the training tables of ``args``."""
    from recoverylab.router import AnomalyRouter, RateMatchedAnomaly, Router

    names = ("C", "lam", "eps", "delays", "folds", "clean_label", "seed", "method", "pair_by")
    params = {name: getattr(args, name) for name in names}
    data = (read(args.decision_points), read(args.forks), args.features)
    if args.policy == "anomaly":
        del params["lam"]
        progress("fitting the anomaly baseline (out-of-fold, then all tasks)")
        return AnomalyRouter(**params).fit(*data)
    progress("fitting the router (out-of-fold, then all tasks)")
    router = Router(**params).fit(*data)
    if args.policy == "router":
        return router
    progress("fitting the rate-matched baseline")
    return RateMatchedAnomaly.matching(router).fit(*data)


def _report_frames(policy: object) -> dict[str, pl.DataFrame]:
    """Return the fit report as two (field, value) tables, one unit each.

    The out-of-fold rates in percentage points (``value pp``), then every other field as the
    fit computed it (counts, AUCs, thresholds, settings): a column never mixes pp and fractions.
    """
    import polars as pl

    report = policy.fit_report_.to_dict()  # type: ignore[attr-defined]
    rates = {name: v for name, v in report.items() if _pp(name, v)}
    other = {name: v for name, v in report.items() if name not in rates}
    schema = {"field": pl.String, "value": pl.String}
    return {
        "out-of-fold rates (pp)": pl.DataFrame(
            {"field": list(rates), "value pp": [_show(v, pp=True) for v in rates.values()]},
            schema={"field": pl.String, "value pp": pl.String},
        ),
        "counts, scores and settings": pl.DataFrame(
            {"field": list(other), "value": [_show(v) for v in other.values()]}, schema=schema
        ),
    }


def _pp(name: str, value: object) -> bool:
    from recoverylab._display import is_rate

    return isinstance(value, float) and (is_rate(name) or "_rate_" in name or "_gain_" in name)


def _show(value: object, *, pp: bool = False) -> str:
    if isinstance(value, float):
        return f"{value * 100:.1f}" if pp else f"{value:.4g}"
    if isinstance(value, list):
        return "x".join(map(str, value))
    return "—" if value is None else str(value)


def run_fit(args: argparse.Namespace) -> None:
    """Fit a rule and write it as JSON; print the fit report."""
    import polars as pl

    from recoverylab.cli._table import render, render_many

    progress = Progress("router fit", quiet=args.quiet)
    guard_output(args.out, args)
    policy = _fit_policy(args, progress)
    policy.to_json(args.out)
    announce_written(f"wrote {args.out}")
    fmt, wide = printing(args)
    if fmt in ("csv", "json"):  # machine-readable: the report's own fields and values
        report = policy.fit_report_.to_dict()
        frame = pl.DataFrame({"field": list(report), "value": [str(v) for v in report.values()]})
        print(render(frame, fmt))
        return
    if headline(fmt):
        print("fit report (out-of-fold)")
    print(render_many(_report_frames(policy), fmt, wide=wide))


def run_decide(args: argparse.Namespace) -> None:
    """Apply a rule to decision points."""
    from recoverylab.router import load_rule

    policy = load_rule(args.rule)
    decisions = policy.decide(read(args.decision_points)).collect()
    emit(decisions, args.out, args)


def _load_named(paths: list[Path]) -> dict:
    from recoverylab.router import load_rule

    policies = [load_rule(path) for path in paths]
    kinds = [p.kind for p in policies]
    if len(set(kinds)) == len(kinds):
        return dict(zip(kinds, policies, strict=True))
    stems = [path.stem for path in paths]
    if len(set(stems)) != len(stems):
        raise ParameterError(
            "`--rule` names rules of the same kind with the same file name; rename the files "
            "so the results can tell them apart."
        )
    return dict(zip(stems, policies, strict=True))


def run_evaluate(args: argparse.Namespace) -> None:
    """Score rules on held-out forks."""
    import polars as pl

    from recoverylab.router import compare

    progress = Progress("router evaluate", quiet=args.quiet)
    named = _load_named(args.rule)
    engine = spark_cli.engine_from(args)
    # on Spark the paths go as they are: Spark reads the forks (and the points it scores)
    points = source(args.decision_points, engine)
    forks = source(args.forks, engine)
    options = {"confidence": args.confidence, "n_resamples": args.resamples, "seed": args.seed}
    progress(f"deciding and scoring {len(named)} rule(s)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = compare(named, points, forks, engine=engine, **options)
    for warning in caught:
        print(f"recoverylab router: warning: {warning.message}", file=sys.stderr)
    if args.no_uplift:
        emit(table, args.out, args, face="router.evaluation")
        return
    for target in (args.out, args.uplift_out, args.toc_out):
        if target is not None:
            guard_output(target, args)
    progress("uplift: TOC, RATE (AUTOC, QINI) and uplift@k by task-clustered bootstrap")
    result = evaluate_uplift(named, points, forks, engine=engine, **options)
    curves = result.curves.filter(((pl.col("q") * 100).round(0) % 10) == 0)
    results = (
        ("evaluation", table, args.out),
        ("uplift", result.metrics, args.uplift_out),  # RATE, uplift@10%, paired differences
        ("toc", result.curves if args.toc_out else curves, args.toc_out),  # every 10% printed
    )
    printed = {name: frame for name, frame, out in results if out is None}
    for _, frame, out in results:
        if out is not None:
            write_output(frame, out, args)
    if printed:
        emit_many(printed, None, args, faces={n: f"router.{n}" for n in printed})


def evaluate_uplift(
    named: dict,
    points: object,
    forks: object,
    *,
    confidence: float,
    n_resamples: int,
    seed: int,
    engine: object = "polars",
) -> Any:
    """Run :func:`recoverylab.router.uplift` with the labelling settings of the first rule."""
    from recoverylab.router import uplift

    first = next(iter(named.values()))  # a setting it lacks keeps uplift's default
    labelling = ("delays", "method", "clean_label", "pair_by")
    settings: dict[str, Any] = {n: getattr(first, n) for n in labelling if hasattr(first, n)}
    settings.update(confidence=confidence, n_resamples=n_resamples, seed=seed, engine=engine)
    return uplift(named, points, forks, **settings)


def demo(out_dir: Path, progress: Progress) -> list[Path]:
    """Fit the router and both anomaly baselines on the train sample; evaluate on the test sample.

    Writes ``router_rule.json`` (the exported rule), ``router_decisions.parquet`` (the router's
    test decisions), ``router_evaluation.parquet`` (:func:`recoverylab.router.compare` of router,
    anomaly, rate-matched and never on the held-out test tasks), ``router_uplift.parquet`` and
    ``router_toc.parquet`` (:func:`recoverylab.router.uplift`: RATE metrics and TOC/Qini curves,
    2,000 task resamples).
    """
    from recoverylab.io import write_parquet
    from recoverylab.router import (
        AnomalyRouter,
        BreakEven,
        Never,
        RateMatchedAnomaly,
        Router,
        compare,
        uplift,
    )

    sample = samples_dir() / "router"
    train_points, train_forks, test_points, test_forks = (
        read(str(sample / part / f"{table}.parquet"))
        for part in ("train", "test")
        for table in ("decision_points", "forks")
    )
    features = list(SAMPLE_FEATURES)

    progress("router: fitting the router and the anomaly baselines on the train sample")
    router = Router().fit(train_points, train_forks, features)
    anomaly = AnomalyRouter().fit(train_points, train_forks, features)
    matched = RateMatchedAnomaly.matching(router).fit(train_points, train_forks, features)
    rule = router.to_json(out_dir / DEMO_FILES["rule"])
    progress("router: deciding and evaluating on the held-out test sample")
    decisions = write_parquet(router.decide(test_points), out_dir / DEMO_FILES["decisions"])
    table = compare([router, anomaly, matched, Never()], test_points, test_forks)
    evaluation = write_parquet(table, out_dir / DEMO_FILES["evaluation"])
    progress("router: uplift (TOC, RATE) of the router and the anomaly baselines")
    lift = uplift(
        {
            "router": router,
            "anomaly": anomaly,
            "rate_matched": matched,
            "break_even": BreakEven(router).fit(train_forks),
        },
        test_points,
        test_forks,
        n_resamples=UPLIFT_DEMO_RESAMPLES,
    )
    metrics = write_parquet(lift.metrics, out_dir / DEMO_FILES["uplift"])
    curves = write_parquet(lift.curves, out_dir / DEMO_FILES["toc"])
    return [rule, decisions, evaluation, metrics, curves]
