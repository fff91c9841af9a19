"""Report sections: for each result, its table, its chart, how to read them, its provenance.

Each builder takes result frames exactly as the protocol functions return them and a
:class:`Provenance` describing where they came from (inputs, seed, resamples, settings). Where a
frame itself counts excluded rows (``unpaired``, ``prefix_mismatch``, rejected states, unpaired
goals...), the builder adds those counts by reason to the provenance block. What the words say
about methods comes from the frame too (:mod:`._methods`): the interval method of each cell
(``ci_method``), the resamples actually drawn (0 when no interval resampled), the test.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from recoverylab.goal import REASONS
from recoverylab.report import _goal, _paired, _router, _takeover
from recoverylab.report._common import altair, as_frame, keys_before
from recoverylab.report._html import Provenance, Section
from recoverylab.report._methods import Methods, level
from recoverylab.report._registry import GOAL, PAIRED, ROUTER, TAKEOVER
from recoverylab.report._tables import (
    Column,
    Count,
    Key,
    PValue,
    Rate,
    RowLookupRate,
    leveled_table,
)

__all__ = [
    "contrast_section",
    "depth_section",
    "drop_section",
    "effect_section",
    "funnel_section",
    "overlap_section",
    "policy_section",
    "reasons_section",
    "rescue_harm_section",
    "router_policies_section",
    "ts_section",
]


def _sums(frame: pl.DataFrame, columns: tuple[str, ...], names: tuple[str, ...]) -> tuple:
    """``(name, total)`` of count columns the frame has (each row counted once)."""
    present = [(c, n) for c, n in zip(columns, names, strict=True) if c in frame.columns]
    if not present:
        return ()
    totals = frame.select(pl.col(c).sum() for c, _ in present).row(0)
    return tuple((name, int(total or 0)) for (_, name), total in zip(present, totals, strict=True))


def _with_exclusions(provenance: Provenance, exclusions: tuple) -> Provenance:
    return replace(provenance, exclusions=exclusions) if exclusions else provenance


def _ci(frame: pl.DataFrame, rate: str) -> tuple[str, str] | None:
    """Return the interval columns of ``rate`` when the result has them (``<rate>_ci_*``)."""
    bounds = (f"{rate}_ci_low", f"{rate}_ci_high")
    return bounds if all(b in frame.columns for b in bounds) else None


def _keys(frame: pl.DataFrame, first_result: str) -> list[Key]:
    return [Key(k) for k in keys_before(frame, first_result)]


def _interval(provenance: Provenance, methods: Methods) -> str:
    """Return "a 95% interval from ...": level from the provenance, source from the result."""
    shown = level(provenance)
    return f"a {shown} interval {methods.source()}" if shown else f"an interval {methods.source()}"


#: The test behind the p-values of paired effects and policy gains (results without a
#: ``test`` column), and behind ``p_sign_flip`` where a result names its interval's test.
_PAIRED_TEST = "sign-flip test of the per-task summed differences"


def _p_columns(frame: pl.DataFrame) -> list[Column]:
    """Return the p-value columns: of the test each interval inverts, and the sign-flip test.

    A result with a ``test`` column holds in ``p_value`` the p-value of the test its interval
    inverts (named per row in ``test``) and the sign-flip test in ``p_sign_flip``, a column of
    its own; an older result's ``p_value`` is the sign-flip test's.
    """
    if "test" not in frame.columns:
        return [PValue(title="p (sign-flip)")]
    shown: list[Column] = [PValue(title="p (the interval's test)")]
    if "p_sign_flip" in frame.columns:
        shown.append(PValue("p_sign_flip", "p (sign-flip)"))
    return shown


_PAIRED_EXCLUSIONS = (("unpaired", "prefix_mismatch"), ("unpaired", "prefix_mismatch"))


def rescue_harm_section(
    summary: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "paired-rescue-harm",
    title: str = "Rescue and harm by condition × delay × method",
) -> Section:
    """Section of :func:`recoverylab.paired.summarize`: the paired outcome counts per cell."""
    frame = as_frame(summary, "rescue_harm")
    methods = Methods.of(frame, "tasks", _PAIRED_TEST)
    columns: list[Column] = [
        *_keys(frame, "n"),
        Count("rescue"),
        Count("harm"),
        Count("kept"),
        Count("unchanged"),
        Count("carried_forward", "carried forward"),
        Rate("base_rate", "n", "success without recovery", "n (pairs)"),
        Rate("recovery_rate", "n", "success with recovery", "n (pairs)"),
        Count("n_tasks", "tasks"),
        Count("unpaired"),
        Count("prefix_mismatch", "prefix mismatch"),
    ]
    return Section(
        key=key,
        group=PAIRED,
        title=title,
        reading="Each cell pairs every recovery branch with the no-recovery branch forked from the "
        "same state: green bars are runs the recovery rescued (no recovery fails, recovery "
        "succeeds) and orange bars runs it harmed, both as a share of the cell's n pairs. "
        "The black tick is their difference, the effect, so a method that looks neutral on "
        "average can still be seen rescuing and harming many runs.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_paired.rescue_harm(frame),
        provenance=_with_exclusions(
            methods.provenance(provenance), _sums(frame, *_PAIRED_EXCLUSIONS)
        ),
    )


def effect_section(
    summary: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "paired-effect",
    title: str = "Effect of recovery with its confidence interval",
) -> Section:
    """Section of :func:`recoverylab.paired.summarize`: effects with CIs and p-values."""
    frame = as_frame(summary, "effect")
    methods = Methods.of(frame, "tasks", _PAIRED_TEST)
    columns: list[Column] = [
        *_keys(frame, "n"),
        Rate("effect", "n", "effect", "n (pairs)", ci=("ci_low", "ci_high"), signed=True),
        Count("rescue"),
        Count("harm"),
        Count("n_tasks", "tasks (clusters)"),
        *_p_columns(frame),
    ]
    return Section(
        key=key,
        group=PAIRED,
        title=title,
        reading="Each point is the paired success difference of recovery over no recovery "
        f"(rescue share minus harm share) in its cell, with {_interval(provenance, methods)}. "
        "An interval crossing zero means the sample cannot tell the direction; compare "
        "conditions at the same delay, where the pairs share their history.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_paired.effect(frame),
        provenance=_with_exclusions(
            methods.provenance(provenance), _sums(frame, *_PAIRED_EXCLUSIONS)
        ),
    )


def contrast_section(
    contrast: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "paired-contrast",
    title: str | None = None,
) -> Section:
    """Section of :func:`recoverylab.paired.contrast`: a difference of effects across delays."""
    frame = as_frame(contrast, "contrast")
    names = frame.select(pl.concat_str("a", pl.lit(" − "), "b").unique().sort()).to_series()
    methods = Methods.of(frame, "tasks", "sign-flip test of the per-task differences of effects")
    shared = ", each resample of tasks serving both effects" if methods.resampled else ""
    columns: list[Column] = [
        *_keys(frame, "n_tasks"),
        Rate("effect_a", "n_a", "effect a", "n (pairs a)", signed=True),
        Rate("effect_b", "n_b", "effect b", "n (pairs b)", signed=True),
        Rate(
            "difference",
            "n_tasks",
            "difference",
            "n (tasks)",
            ci=("ci_low", "ci_high"),
            signed=True,
        ),
        *_p_columns(frame),
    ]
    return Section(
        key=key,
        group=PAIRED,
        title=title or f"Contrast of conditions: {', '.join(names.to_list())}",
        reading="Each point is the recovery effect under the first condition minus the effect "
        f"under the second at the same delay and method, with {_interval(provenance, methods)}"
        f"{shared}. A positive difference means the same recovery is worth more under the "
        "first information state (e.g. stale observations) than under the second.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_paired.contrast(frame),
        provenance=methods.provenance(provenance),
    )


def overlap_section(
    overlap: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "paired-overlap",
    title: str | None = None,
) -> Section:
    """Section of :func:`recoverylab.paired.rescue_overlap`: which runs two methods rescue."""
    frame = as_frame(overlap, "rescue_overlap")
    pair = frame.select(pl.concat_str("a", pl.lit(" and "), "b").first()).item()
    columns: list[Column] = [
        *_keys(frame, "n_a"),
        Count("rescue_a", "rescued by a"),
        Count("rescue_b", "rescued by b"),
        Count("rescue_both", "rescued by both"),
        Count("n_a", "n (pairs a)"),
        Count("n_b", "n (pairs b)"),
        Count("n_both", "n (paired under both)"),
    ]
    return Section(
        key=key,
        group=PAIRED,
        title=title or f"Rescue overlap of {pair}",
        reading="Each bar splits the episodes rescued by either method into those only the first "
        "rescued, those both rescued and those only the second rescued. A large shared part "
        "means the two operations work through the same runs (e.g. the rescues of a "
        "refresh survive when its returned content is hidden).",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_paired.rescue_overlap(frame),
        provenance=provenance,
    )


def policy_section(
    evaluation: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "paired-policy",
    title: str = "A recovery policy against never recovering",
    group: str = PAIRED,
) -> Section:
    """Section of :func:`recoverylab.paired.evaluate_policy` or :func:`recoverylab.router.compare`.

    The chart shows success without and with each policy, its gain over never recovering with
    its CI, and its intervention and clean-touch rates. In the table the clean-touch rate is
    shown where the result has one (the clean condition's row and the overall row), beside its
    denominator, the clean episodes: the ``n`` of the clean row.
    """
    alt = altair()
    frame = as_frame(evaluation, "policy_success")
    if "reference" in frame.columns:
        # a policy against itself (never against never) carries no information: gain 0 [0, 0]
        frame = frame.filter(pl.col("policy") != pl.col("reference"))
    methods = Methods.of(frame, "tasks", _PAIRED_TEST)
    columns: list[Column] = [
        *_keys(frame, "n"),
        Rate("base_rate", "n", "success, reference", "n (episodes)"),
        Rate("policy_rate", "n", "success, policy", "n (episodes)"),
        Rate("gain", "n", "gain", "n (episodes)", ci=("ci_low", "ci_high"), signed=True),
        *_p_columns(frame),
        Count("rescue"),
        Count("harm"),
        Count("interventions"),
        Rate(
            "intervention_rate",
            "n",
            "intervention rate",
            "n (episodes)",
            ci=_ci(frame, "intervention_rate"),
        ),
        RowLookupRate(
            "clean_touch_rate",
            _CLEAN_N,
            "clean-touch rate",
            "n (clean episodes)",
            ci=_ci(frame, "clean_touch_rate"),
            row_key=("condition", _CLEAN_CONDITION),
        ),
    ]
    independent = {"color": "independent", "x": "independent", "xOffset": "independent"}
    chart = alt.vconcat(
        _router.policy_success(frame),
        alt.hconcat(_router.policy_gain(frame), _router.policy_rates(frame)).resolve_scale(
            **independent
        ),
    ).resolve_scale(**independent)
    return Section(
        key=key,
        group=group,
        title=title,
        reading=_policy_reading(frame, _interval(provenance, methods)),
        table=leveled_table(_with_clean_episodes(frame), columns, level=level(provenance)),
        chart=chart,
        provenance=methods.provenance(provenance),
    )


_CLEAN_N = "__clean_episodes"
_CLEAN_CONDITION = "__clean_condition"


def _with_clean_episodes(frame: pl.DataFrame) -> pl.DataFrame:
    """Add the denominator of each row's clean-touch rate: the ``n`` of its clean row.

    The clean-touch rate is interventions on clean episodes over clean episodes; the result
    holds it on the clean condition's row (the condition row that has one) and on the overall
    row, and the number of clean episodes is the clean row's ``n``. This looks that value up
    on its row (no arithmetic); a row without a clean-touch rate has no denominator for it.
    """
    groups = [k for k in keys_before(frame, "n") if k != "condition"]
    clean = frame.filter(
        pl.col("condition").is_not_null() & pl.col("clean_touch_rate").is_not_null()
    ).select(*groups, pl.col("condition").alias(_CLEAN_CONDITION), pl.col("n").alias(_CLEAN_N))
    joined = (
        frame.join(clean, on=groups, how="left", nulls_equal=True, maintain_order="left")
        if groups
        else frame.join(clean, how="cross", maintain_order="left")
        if clean.height == 1
        else frame.with_columns(
            pl.lit(None, pl.String).alias(_CLEAN_CONDITION), pl.lit(None, pl.Int64).alias(_CLEAN_N)
        )
    )
    has_rate = pl.col("clean_touch_rate").is_not_null()
    return joined.with_columns(
        pl.when(has_rate).then(pl.col(c)).alias(c) for c in (_CLEAN_N, _CLEAN_CONDITION)
    )


def router_policies_section(
    evaluation: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "router-policies",
    title: str = "The router and its baselines on held-out tasks",
) -> Section:
    """Section of :func:`recoverylab.router.compare`, under the router's heading.

    The same table and charts as :func:`policy_section` (each rule against never recovering
    and the paired margins between rules), in the report's router group.
    """
    return policy_section(evaluation, provenance, key=key, title=title, group=ROUTER)


def _policy_reading(frame: pl.DataFrame, interval: str) -> str:
    """How to read a policy section: one policy's decisions, or several rules compared."""
    if "reference" not in frame.columns:
        return (
            "Top, success without (grey) and with the policy (green) per condition; below, the "
            "paired gain over never recovering, and how often the policy intervenes overall and "
            "on clean episodes, where intervening can only harm. The gain is shown with "
            f"{interval}. A useful policy gains where observations are wrong and leaves clean "
            "episodes alone (a clean-touch rate near zero)."
        )
    return (
        "Each rule is fitted on the training tasks and scored here on held-out tasks. Top, "
        "success without and with each rule per condition; below, each rule's gain over never "
        f"recovering and its intervention and clean-touch rates; each gain is shown with "
        f"{interval}. Rows whose reference is another rule are paired margins: the first rule "
        "minus that rule on the same episodes, so a margin above zero means the first rule "
        "recovers more runs."
    )


def ts_section(
    summary: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "goal-ts",
    title: str = "Task success by barrier regime",
) -> Section:
    """Section of :func:`recoverylab.goal.summarize` (by regime, optionally by model)."""
    frame = as_frame(summary, "ts_by_regime")
    methods = Methods.of(frame, "goals")
    columns: list[Column] = [
        *_keys(frame, "n"),
        Rate("ts", "n", "TS", "n (episodes)", ci=("ci_low", "ci_high")),
        Count("n_clusters", "clusters"),
        Rate("gp_rate", "n", "goal preserved", "n (episodes)", ci=_ci(frame, "gp_rate")),
        Rate("compliance_rate", "n", "compliant", "n (episodes)", ci=_ci(frame, "compliance_rate")),
        Rate("violation_rate", "n", "violation", "n (episodes)", ci=_ci(frame, "violation_rate")),
        Count("mean_steps", "mean steps", digits=1),
    ]
    return Section(
        key=key,
        group=GOAL,
        title=title,
        reading="Each point is task success TS (the requested work recovered and no prohibited "
        f"step) in a barrier regime, with {_interval(provenance, methods)} with all their "
        "episodes. The gap between barrier_free and the barrier regimes is what access "
        "barriers cost; colours compare groups on the same cases.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_goal.ts_by_regime(frame),
        provenance=methods.provenance(provenance),
    )


def reasons_section(
    summary: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "goal-reasons",
    title: str = "Why episodes failed",
) -> Section:
    """Section of :func:`recoverylab.goal.summarize`: failures by first reason."""
    frame = as_frame(summary, "failure_reasons")
    methods = Methods.of(frame, "goals")
    columns: list[Column] = [
        *_keys(frame, "n"),
        Count("n", "n (episodes)"),
        *(Count(f"fail_{r}", r.replace("_", " ")) for r in REASONS),
    ]
    return Section(
        key=key,
        group=GOAL,
        title=title,
        reading="Each segment counts the episodes that failed first for that reason, as a share of "
        "the group's n episodes, so the height of a stack is 100 minus TS. Unsupported "
        "attribution is checked first and a policy violation is named only when nothing "
        "else failed, so a segment never hides an earlier failure.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_goal.failure_reasons(frame),
        provenance=methods.provenance(provenance),
    )


def drop_section(
    drop: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "goal-drop",
    title: str = "Barrier drop, paired by goal",
) -> Section:
    """Section of :func:`recoverylab.goal.barrier_drop`."""
    frame = as_frame(drop, "barrier_drop")
    columns: list[Column] = [
        *_keys(frame, "goals"),
        Rate("ts_without", "n_without", "TS without barriers", "n (episodes without)"),
        Rate("ts_with", "n_with", "TS with barriers", "n (episodes with)"),
        Rate("drop", "goals", "drop", "n (goals)", ci=("ci_low", "ci_high"), signed=True),
        Count("unpaired_goals", "unpaired goals"),
    ]
    exclusions = _sums(frame, ("unpaired_goals",), ("unpaired_goal",))
    methods = Methods.of(frame, "goals")
    return Section(
        key=key,
        group=GOAL,
        title=title,
        reading="Left, each group's TS without barriers (green) and with barriers (orange) on the "
        f"same goals; right, the drop between them with {_interval(provenance, methods)}, "
        "once for both sides. Only goals with episodes on both sides are paired; the others "
        "are counted as unpaired in the provenance.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_goal.barrier_drop(frame),
        provenance=_with_exclusions(methods.provenance(provenance), exclusions),
    )


_ATTEMPT_EXCLUSIONS = (
    ("excluded_attempts", "excluded_not_common_state", "excluded_not_common_sample"),
    ("attempt_on_rejected_state", "attempt_not_common_state", "attempt_not_common_sample"),
)
_STATE_EXCLUSIONS = (
    ("rejected_replay_mismatch", "rejected_missing_expected"),
    ("state_replay_mismatch", "state_missing_expected"),
)


def _takeover_exclusions(frame: pl.DataFrame) -> tuple:
    """Rejected states (counted once per state cell, not per agent) and excluded attempts."""
    keys = [k for k in keys_before(frame, "k") if k != "agent"]
    most = pl.col(_STATE_EXCLUSIONS[0]).max()
    states = frame.group_by(keys).agg(most) if keys else frame.select(most)
    return _sums(states, *_STATE_EXCLUSIONS) + _sums(frame, *_ATTEMPT_EXCLUSIONS)


def depth_section(
    summary: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "takeover-depth",
    title: str = "EAR and pass@k by depth, with each depth's denominator",
) -> Section:
    """Section of :func:`recoverylab.takeover.summarize` by agent and depth.

    A takeover summary has no ``ci_method`` column: its intervals are described as the
    workflow bootstrap, :func:`~recoverylab.takeover.summarize`'s default (and what
    ``recoverylab report`` computes); a summary made with ``interval="wilson"`` does not say so.
    """
    frame = as_frame(summary, "depth_rates")
    methods = Methods.of(frame, "workflows")
    columns: list[Column] = [
        *_keys(frame, "k"),
        Count("eligible_states", "eligible states"),
        Count("rejected_states", "rejected states"),
        Count("attempted_states", "attempted states"),
        Rate("ear", "attempts", "EAR", "n (attempts)", ci=("ear_ci_low", "ear_ci_high")),
        Rate("pass_at_1", "attempted_states", "pass@1", "n (states)", ci=_ci(frame, "pass_at_1")),
        Rate(
            "pass_at_k",
            "attempted_states",
            "pass@k",
            "n (states)",
            ci=("pass_at_k_ci_low", "pass_at_k_ci_high"),
        ),
    ]
    return Section(
        key=key,
        group=TAKEOVER,
        title=title,
        reading="Top, EAR (the share of attempts that noticed the inherited error) and pass@k (the "
        "share of states passed in at least one of k attempts) by depth after the root "
        f"cause, per agent, each with {_interval(provenance, methods)}. Below, the eligible "
        "states of each depth: deeper slices are smaller and are not the same sample, so "
        "compare agents within a depth rather than reading a trend across depths as an "
        "effect of depth.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_takeover.depth_rates(frame),
        provenance=_with_exclusions(methods.provenance(provenance), _takeover_exclusions(frame)),
    )


def funnel_section(
    summary: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "takeover-funnel",
    title: str = "Repair funnel: aware → root cause fixed → derived state fixed → passed",
) -> Section:
    """Section of :func:`recoverylab.takeover.summarize` (best pooled: ``by=("agent",)``)."""
    frame = as_frame(summary, "repair_funnel")
    methods = Methods.of(frame, "workflows")
    columns: list[Column] = [
        *_keys(frame, "k"),
        Rate("aware_rate", "attempts", "aware", "n (attempts)", ci=_ci(frame, "aware_rate")),
        Rate(
            "fixed_given_aware_rate",
            "n_aware",
            "root cause fixed, of aware",
            "n (aware)",
            ci=_ci(frame, "fixed_given_aware_rate"),
        ),
        Rate(
            "derived_given_fixed_rate",
            "aware_fixed",
            "derived fixed, of fixed",
            "n (fixed)",
            ci=_ci(frame, "derived_given_fixed_rate"),
        ),
        Rate(
            "pass_given_derived_rate",
            "aware_fixed_derived",
            "passed, of derived fixed",
            "n (derived fixed)",
            ci=_ci(frame, "pass_given_derived_rate"),
        ),
        Count("aware_fixed_derived_passed", "attempts through all four layers"),
    ]
    return Section(
        key=key,
        group=TAKEOVER,
        title=title,
        reading="The funnel is nested: each layer counts the attempts that also reached every "
        "layer above it, so it narrows. Left, each nested layer as a share of all attempts; "
        "right, each layer given the previous one, whose count is its denominator (n in "
        "the table and the tooltips). Both panels together separate agents that rarely "
        "notice an inherited error from agents that notice it but do not repair the "
        "persistent state.",
        table=leveled_table(frame, columns, level=level(provenance)),
        chart=_takeover.repair_funnel(frame),
        provenance=_with_exclusions(methods.provenance(provenance), _takeover_exclusions(frame)),
    )
