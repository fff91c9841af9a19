"""Tests of the charts of recoverylab.report: fields, marks, denominators, inputs, errors.

Every chart is built from a frame a protocol function returned on the shipped samples (or on a
tiny hand-made table whose numbers are computed by hand), then checked on its encoded fields and
on the number of marks Vega actually draws (the scenegraph from vl-convert, no browser).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoverylab import goal, paired, report, synth, takeover
from recoverylab._errors import InputError, ParameterError, SchemaError
from tests.conftest import SAMPLES

vl_convert = pytest.importorskip("vl_convert")
pytest.importorskip("altair")

RESAMPLES = 200
PAIRED = SAMPLES / "paired"
GOAL = SAMPLES / "goal" / "synthetic"
TAKEOVER = SAMPLES / "takeover"

# ------------------------------------------------------------------------------------------------
# Helpers: what a chart encodes, and what Vega draws
# ------------------------------------------------------------------------------------------------


_SPECS: dict[int, tuple[Any, dict]] = {}


def spec_of(chart: Any) -> dict:
    """The chart's Vega-Lite specification, computed once per chart (validation is tested apart)."""
    if isinstance(chart, dict):
        return chart
    if id(chart) not in _SPECS:
        _SPECS[id(chart)] = (
            chart,
            chart.to_dict(validate=False),
        )  # keep the chart: ids stay unique
    return _SPECS[id(chart)][1]


def units(spec: Any) -> Iterator[dict]:
    """Every unit spec (a mark with its encoding) inside a chart specification."""
    if isinstance(spec, dict):
        if "mark" in spec:
            yield spec
        for key, value in spec.items():
            if key not in ("datasets", "data"):
                yield from units(value)
    elif isinstance(spec, list):
        for item in spec:
            yield from units(item)


def mark_type(unit: dict) -> str:
    mark = unit["mark"]
    return mark["type"] if isinstance(mark, dict) else mark


def encoded(chart: Any) -> set[tuple[str, str, str]]:
    """(mark, channel, field) of every encoded field (tooltips excluded)."""
    found = set()
    for unit in units(spec_of(chart)):
        for channel, definition in unit.get("encoding", {}).items():
            if isinstance(definition, dict) and "field" in definition:
                found.add((mark_type(unit), channel, definition["field"]))
    return found


def marks(chart: Any) -> dict[str, int]:
    """How many items of each mark type Vega draws (axes and legends excluded)."""
    counts: dict[str, int] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("role") == "mark" and node.get("marktype") != "group":
                kind = node["marktype"]
                counts[kind] = counts.get(kind, 0) + len(node.get("items", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(vl_convert.vegalite_to_scenegraph(spec_of(chart)))
    return counts


def dataset(chart: Any) -> pl.DataFrame:
    """The (single) inline dataset of a chart."""
    datasets = spec_of(chart)["datasets"]
    assert len(datasets) == 1
    return pl.DataFrame(next(iter(datasets.values())))


def datasets(chart: Any) -> list[pl.DataFrame]:
    return [pl.DataFrame(rows) for rows in spec_of(chart).get("datasets", {}).values()]


def assert_rates_have_n(chart: Any) -> None:
    """Every mark drawing a rate (a ``*_pp`` position) has a denominator ``n (...)`` tooltip."""
    checked = 0
    for unit in units(spec_of(chart)):
        encoding = unit.get("encoding", {})
        positions = [
            d
            for channel, d in encoding.items()
            if channel in ("x", "y", "x2", "y2") and isinstance(d, dict) and "field" in d
        ]
        if not any(d["field"].endswith("_pp") for d in positions):
            continue
        titles = [t.get("title", "") for t in encoding.get("tooltip", [])]
        assert any(title.startswith("n (") for title in titles), (mark_type(unit), titles)
        checked += 1
    assert checked > 0


# ------------------------------------------------------------------------------------------------
# Result frames of the shipped samples
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def main_summary() -> pl.DataFrame:
    return paired.summarize(PAIRED / "main_forks.parquet", n_resamples=RESAMPLES)


@pytest.fixture(scope="module")
def mechanism_summary() -> pl.DataFrame:
    return paired.summarize(PAIRED / "mechanism_forks.parquet", n_resamples=RESAMPLES)


@pytest.fixture(scope="module")
def main_contrast() -> pl.DataFrame:
    return paired.contrast(PAIRED / "main_forks.parquet", "stale2", "clean", n_resamples=RESAMPLES)


@pytest.fixture(scope="module")
def overlap() -> pl.DataFrame:
    return paired.rescue_overlap(PAIRED / "mechanism_forks.parquet", "refresh", "content_ablated")


@pytest.fixture(scope="module")
def policy() -> pl.DataFrame:
    return paired.evaluate_policy(
        PAIRED / "policy_decisions.parquet",
        PAIRED / "policy_forks.parquet",
        n_resamples=RESAMPLES,
    )


class FixedDelay:
    """A policy for router.compare that recovers every episode at one delay (no fitting)."""

    pair_by = ()
    clean_label = "clean"
    method = "refresh"

    def __init__(self, delay: int) -> None:
        self.delay = delay

    def decide(self, decision_points: pl.LazyFrame) -> pl.LazyFrame:
        return decision_points.filter(pl.col("delay") == self.delay).select(
            "task_id", "condition", "delay"
        )


@pytest.fixture(scope="module")
def comparison() -> pl.DataFrame:
    """A real router.compare table: two fixed-delay policies and never, with margins."""
    from recoverylab.router import Never, compare

    test = synth.generate("decision_points", 150, seed=2, prefix="b")
    policies = {"early": FixedDelay(1), "late": FixedDelay(4), "never": Never()}
    return compare(policies, test["decision_points"], test["forks"], n_resamples=RESAMPLES)


@pytest.fixture(scope="module")
def scored() -> pl.DataFrame:
    tables = ("cases", "resources", "episodes", "steps", "citations")
    return goal.score(*(GOAL / name for name in tables)).collect()


@pytest.fixture(scope="module")
def goal_by_regime(scored: pl.DataFrame) -> pl.DataFrame:
    return goal.summarize(scored, n_resamples=RESAMPLES)


@pytest.fixture(scope="module")
def goal_by_model(scored: pl.DataFrame) -> pl.DataFrame:
    return goal.summarize(scored, by=("model", "regime"), n_resamples=RESAMPLES)


@pytest.fixture(scope="module")
def drop(scored: pl.DataFrame) -> pl.DataFrame:
    return goal.barrier_drop(scored, by=("model",), n_resamples=RESAMPLES)


@pytest.fixture(scope="module")
def by_depth() -> pl.DataFrame:
    return takeover.summarize(
        TAKEOVER / "states.parquet", TAKEOVER / "attempts.parquet", interval="wilson"
    )


@pytest.fixture(scope="module")
def reliability() -> pl.DataFrame:
    return takeover.reliability(
        TAKEOVER / "states.parquet", TAKEOVER / "attempts.parquet", n_resamples=RESAMPLES
    )


@pytest.fixture(scope="module")
def toc() -> pl.DataFrame:
    from recoverylab import router

    test = SAMPLES / "router" / "test"
    return router.uplift(
        {"novelty": "obs_novelty", "progress": "progress"},
        test / "decision_points.parquet",
        test / "forks.parquet",
        n_resamples=RESAMPLES,
    ).curves


@pytest.fixture(scope="module")
def pooled() -> pl.DataFrame:
    return takeover.summarize(
        TAKEOVER / "states.parquet",
        TAKEOVER / "attempts.parquet",
        by=("agent",),
        interval="wilson",
    )


# ------------------------------------------------------------------------------------------------
# Paired
# ------------------------------------------------------------------------------------------------


def test_rescue_harm_on_the_main_sample(main_summary: pl.DataFrame) -> None:
    chart = report.rescue_harm(main_summary)
    assert {
        ("bar", "x", "delay"),
        ("bar", "y", "share_pp"),
        ("bar", "color", "outcome"),
        ("tick", "y", "effect_pp"),
    } <= encoded(chart)
    spec = spec_of(chart)
    assert spec["facet"]["column"]["field"] == "condition"
    assert "row" not in spec["facet"]  # one method: no rows of panels
    # 8 cells: a rescue bar, a harm bar and an effect tick each (ticks are drawn as rects).
    assert marks(chart) == {"rect": 8 * 3}
    assert_rates_have_n(chart)


def test_rescue_harm_shares_are_counts_over_n_by_hand() -> None:
    # clean: 4 tasks, recovery harms t1 and rescues t2 -> rescue 25 pp, harm -25 pp, effect 0.
    # stale2: 2 tasks, recovery rescues both -> rescue 100 pp, harm 0 pp, effect +100.
    forks = pl.DataFrame(
        {
            "task_id": ["t1", "t1", "t2", "t2", "t3", "t3", "t4", "t4", "t5", "t5", "t6", "t6"],
            "condition": ["clean"] * 8 + ["stale2"] * 4,
            "method": ["none", "refresh"] * 6,
            "delay": [None, 0] * 6,
            "success": [True, False, False, True, True, True, False, False] + [False, True] * 2,
        }
    )
    summary = paired.summarize(forks, n_resamples=50)
    chart = report.rescue_harm(summary)
    shares = dataset(chart).select("condition", "outcome", "count", "n", "share_pp", "effect_pp")
    assert sorted(shares.rows()) == [
        ("clean", "harm", 1, 4, -25.0, 0.0),
        ("clean", "rescue", 1, 4, 25.0, 0.0),
        ("stale2", "harm", 0, 2, 0.0, 100.0),
        ("stale2", "rescue", 2, 2, 100.0, 100.0),
    ]
    assert marks(chart) == {"rect": 6}


def test_rescue_harm_draws_no_cell_without_pairs(main_summary: pl.DataFrame) -> None:
    empty_cell = main_summary.head(1).with_columns(
        pl.lit(0, dtype=pl.Int64).alias("n"),
        pl.lit(None, dtype=pl.Float64).alias("effect"),
        pl.lit(4, dtype=pl.Int64).alias("delay"),
        pl.lit("missing").alias("condition"),
    )
    chart = report.rescue_harm(pl.concat([main_summary, empty_cell]))
    assert marks(chart) == {"rect": 24}
    only_empty = report.rescue_harm  # a frame whose every cell is empty has nothing to draw
    with pytest.raises(InputError, match=r"report\.rescue_harm: the frame has no rows"):
        only_empty(empty_cell)


def test_rescue_harm_extra_by_keys_become_rows(mechanism_summary: pl.DataFrame) -> None:
    chart = report.rescue_harm(mechanism_summary)
    assert spec_of(chart)["facet"]["row"]["field"] == "panel"
    assert marks(chart) == {"rect": 6 * 3}
    by_cohort = paired.summarize(
        PAIRED / "main_forks.parquet", by="factual_success", n_resamples=50
    )
    chart = report.rescue_harm(by_cohort)
    panels = dataset(chart)["panel"].unique().sort().to_list()
    # the labels read as values, the key names are the facet's title (as in every legend)
    assert panels == ["refresh · false", "refresh · true"]
    assert spec_of(chart)["facet"]["row"]["title"] == "method · factual_success"
    assert spec_of(chart)["facet"]["row"]["header"]["labelAngle"] == 0


def test_effect(mechanism_summary: pl.DataFrame) -> None:
    chart = report.effect(mechanism_summary)
    assert {
        ("rule", "y", "ci_low_pp"),
        ("rule", "y2", "ci_high_pp"),
        ("point", "y", "effect_pp"),
        ("point", "xOffset", "series"),
        ("point", "color", "series"),
    } <= encoded(chart)
    assert marks(chart) == {"rule": 6, "symbol": 6}
    data = dataset(chart).sort("condition", "method")
    expected = mechanism_summary.sort("condition", "method")
    assert data["effect_pp"].to_list() == pytest.approx((expected["effect"] * 100).to_list())
    assert_rates_have_n(chart)


def test_contrast(main_contrast: pl.DataFrame) -> None:
    chart = report.contrast(main_contrast)
    assert {
        ("point", "y", "difference_pp"),
        ("rule", "y", "ci_low_pp"),
        ("rule", "y2", "ci_high_pp"),
        ("point", "x", "delay"),
    } <= encoded(chart)
    assert marks(chart) == {"rule": 4, "symbol": 4}
    assert spec_of(chart)["title"] == "Contrast of effects: stale2 − clean"
    assert_rates_have_n(chart)


def test_rescue_overlap(overlap: pl.DataFrame) -> None:
    chart = report.rescue_overlap(overlap)
    assert {("bar", "x", "episodes"), ("bar", "y", "cell"), ("bar", "color", "segment")} <= (
        encoded(chart)
    )
    # clean/0: only refresh 1, both 0 (not drawn), only content_ablated 1;
    # stale2/4: only refresh 2, both 8, only content_ablated 1.
    segments = dataset(chart).select("cell", "segment", "episodes").sort("cell", "segment")
    assert segments.rows() == [
        ("clean · delay 0", "only content_ablated", 1),
        ("clean · delay 0", "only refresh", 1),
        ("stale2 · delay 4", "both", 8),
        ("stale2 · delay 4", "only content_ablated", 1),
        ("stale2 · delay 4", "only refresh", 2),
    ]
    assert marks(chart) == {"rect": 5}
    titles = [t["title"] for t in next(units(spec_of(chart)))["encoding"]["tooltip"]]
    assert "n (episodes paired under both)" in titles


# ------------------------------------------------------------------------------------------------
# Policies
# ------------------------------------------------------------------------------------------------


def test_policy_success_of_one_policy(policy: pl.DataFrame) -> None:
    chart = report.policy_success(policy)
    assert {("bar", "y", "rate_pp"), ("bar", "xOffset", "series"), ("bar", "x", "cond")} <= (
        encoded(chart)
    )
    assert marks(chart) == {"rect": 5 * 2}  # 4 conditions and "all", without and with
    data = dataset(chart)
    overall = data.filter(pl.col("cond") == "all").sort("order")["rate_pp"].to_list()
    expected = policy.filter(pl.col("condition").is_null()).row(0, named=True)
    assert overall == pytest.approx([expected["base_rate"] * 100, expected["policy_rate"] * 100])
    assert_rates_have_n(chart)


def test_policy_charts_of_a_router_comparison(comparison: pl.DataFrame) -> None:
    own = comparison.filter(pl.col("reference") == "never")
    policies = own["policy"].n_unique()
    rows = own.height
    assert marks(report.policy_success(comparison)) == {"rect": rows * 2}
    assert marks(report.policy_gain(comparison)) == {"rule": rows, "symbol": rows}
    # One intervention bar per policy, one clean-touch bar per policy with clean episodes,
    # each with its value written on it (a zero rate has no visible bar).
    assert marks(report.policy_rates(comparison)) == {"rect": policies * 2, "text": policies * 2}
    margins = comparison.filter(pl.col("reference") == "late")
    assert margins.height == 5
    chart = report.policy_gain(comparison, reference="late")
    assert marks(chart) == {"rule": margins.height, "symbol": margins.height}
    assert spec_of(chart)["title"] == "Paired margin over late, with its CI"
    for make in (report.policy_success, report.policy_gain, report.policy_rates):
        assert_rates_have_n(make(comparison))


def test_policy_rates_reads_each_rate_with_its_own_denominator(policy: pl.DataFrame) -> None:
    chart = report.policy_rates(policy)
    assert {("bar", "y", "rate_pp"), ("bar", "xOffset", "measure")} <= encoded(chart)
    data = dataset(chart).sort("order").select("measure", "rate_pp", "n", "interventions")
    overall = policy.filter(pl.col("condition").is_null()).row(0, named=True)
    clean = policy.filter(pl.col("condition") == "clean").row(0, named=True)
    assert data.rows() == [
        (
            "intervention rate (all episodes)",
            pytest.approx(overall["intervention_rate"] * 100),
            overall["n"],
            overall["interventions"],
        ),
        ("clean-touch rate (clean episodes)", 0.0, clean["n"], 0),
    ]


def test_policy_gain_unknown_reference(policy: pl.DataFrame) -> None:
    with pytest.raises(
        ParameterError,
        match=r"report\.policy_gain: parameter `reference` is 'router', which has no rows; "
        r"the frame's references are: never\.",
    ):
        report.policy_gain(policy, reference="router")


# ------------------------------------------------------------------------------------------------
# Goal
# ------------------------------------------------------------------------------------------------


def test_ts_by_regime(goal_by_regime: pl.DataFrame, goal_by_model: pl.DataFrame) -> None:
    chart = report.ts_by_regime(goal_by_regime)
    assert {("point", "y", "ts_pp"), ("rule", "y", "ci_low_pp"), ("rule", "y2", "ci_high_pp")} <= (
        encoded(chart)
    )
    assert marks(chart) == {"rule": 3, "symbol": 3}
    assert spec_of(chart)["layer"][0]["encoding"]["x"]["sort"] == list(goal.REGIMES)
    by_model = report.ts_by_regime(goal_by_model)
    assert ("point", "color", "group") in encoded(by_model)
    assert marks(by_model) == {"rule": 12, "symbol": 12}
    assert_rates_have_n(chart)
    assert_rates_have_n(by_model)


def test_failure_reasons(goal_by_regime: pl.DataFrame, goal_by_model: pl.DataFrame) -> None:
    chart = report.failure_reasons(goal_by_regime)
    assert {("bar", "y", "share_pp"), ("bar", "color", "reason"), ("bar", "x", "regime")} <= (
        encoded(chart)
    )
    counts = goal_by_regime.select(f"fail_{r}" for r in goal.REASONS)
    nonzero = sum(int((counts[c] > 0).sum()) for c in counts.columns)
    assert marks(chart) == {"rect": nonzero}
    # The stack of a regime is its failed share: 100 - TS.
    data = dataset(chart).group_by("regime").agg(pl.col("share_pp").sum()).sort("regime")
    expected = goal_by_regime.sort("regime").select((1 - pl.col("ts")) * 100).to_series()
    assert data["share_pp"].to_list() == pytest.approx(expected.to_list())
    faceted = report.failure_reasons(goal_by_model)
    assert spec_of(faceted)["facet"]["column"]["field"] == "group"
    assert_rates_have_n(chart)


def test_barrier_drop(drop: pl.DataFrame) -> None:
    chart = report.barrier_drop(drop)
    assert {
        ("rule", "x", "ts_with_pp"),
        ("rule", "x2", "ts_without_pp"),
        ("point", "x", "drop_pp"),
        ("rule", "x", "ci_low_pp"),
    } <= encoded(chart)
    # 4 models: a span and two points on the left, a CI rule and a point on the right.
    assert marks(chart) == {"rule": 4 + 4, "symbol": 4 * 2 + 4}
    assert_rates_have_n(chart)


# ------------------------------------------------------------------------------------------------
# Takeover
# ------------------------------------------------------------------------------------------------


def test_depth_rates_show_each_depths_denominator(by_depth: pl.DataFrame) -> None:
    chart = report.depth_rates(by_depth)
    fields = encoded(chart)
    assert {
        ("point", "y", "rate_pp"),
        ("line", "y", "rate_pp"),
        ("rule", "y", "low_pp"),
        ("bar", "y", "eligible_states"),
        ("text", "text", "eligible_states"),
    } <= fields
    rows, depths = by_depth.height, by_depth["depth"].n_unique()
    # Per metric: a point, a CI rule and a line vertex per row; a labelled bar per depth.
    assert marks(chart) == {
        "symbol": 2 * rows,
        "rule": 2 * rows,
        "line": 2 * rows,
        "rect": 2 * depths,
        "text": 2 * depths,
    }
    labels = [frame for frame in datasets(chart) if frame.width <= 6]
    assert labels, "no denominator dataset"
    eligible = dict(by_depth.select("depth", "eligible_states").unique().iter_rows())
    shown = dict(labels[0].select("depth", "eligible_states").iter_rows())
    assert shown == eligible == {0: 614, 5: 525, 10: 421, 15: 344, 20: 196, 25: 106}
    assert_rates_have_n(chart)
    assert "pass@3" in json.dumps(spec_of(chart))


def test_depth_rates_denominator_per_series_when_it_differs(by_depth: pl.DataFrame) -> None:
    # Two agents seeing different state counts at a depth: one bar per (depth, agent).
    changed = by_depth.with_columns(
        pl.when(pl.col("agent") == "agent_a")
        .then(pl.col("eligible_states") - 1)
        .otherwise(pl.col("eligible_states"))
        .alias("eligible_states")
    )
    chart = report.depth_rates(changed, metrics=("ear",))
    rows = by_depth.height
    assert marks(chart) == {"symbol": rows, "rule": rows, "line": rows, "rect": rows, "text": rows}


def test_depth_rates_unknown_metric(by_depth: pl.DataFrame) -> None:
    with pytest.raises(ParameterError, match=r"parameter `metrics` is \['speed'\]; each must be"):
        report.depth_rates(by_depth, metrics=("speed",))


def test_repair_funnel(pooled: pl.DataFrame) -> None:
    chart = report.repair_funnel(pooled)
    assert {("bar", "y", "rate_pp"), ("rule", "y", "low_pp"), ("bar", "x", "stage")} <= (
        encoded(chart)
    )
    agents = pooled.height
    # both panels: a bar per (layer, agent); CI rules on the conditional panel only
    assert marks(chart) == {"rect": 2 * 4 * agents, "rule": 4 * agents}
    nested, conditional = datasets(chart)
    row = pooled.filter(pl.col("agent") == "agent_a").row(0, named=True)
    fixed = conditional.filter(
        (pl.col("series") == "agent_a") & (pl.col("stage") == "root cause fixed, of aware")
    )
    assert fixed.select("rate_pp", "count", "n").row(0) == (
        pytest.approx(row["fixed_given_aware_rate"] * 100),
        row["aware_fixed"],
        row["n_aware"],
    )
    # the nested layers: attempts that reached this layer and every one above, of all attempts
    layers = nested.filter(pl.col("series") == "agent_a")
    assert layers["stage"].to_list() == [
        "aware",
        "+ root cause fixed",
        "+ derived fixed",
        "+ passed",
    ]
    counts = [row[c] for c in ("n_aware", "aware_fixed", "aware_fixed_derived")]
    counts.append(row["aware_fixed_derived_passed"])
    assert layers["count"].to_list() == counts
    assert layers["rate_pp"].to_list() == pytest.approx([100 * c / row["attempts"] for c in counts])
    for _, shares in nested.group_by("series", maintain_order=True):
        assert shares["rate_pp"].to_list() == sorted(shares["rate_pp"], reverse=True)
    assert_rates_have_n(chart)


# ------------------------------------------------------------------------------------------------
# Every chart: eager and lazy input, wrong frames
# ------------------------------------------------------------------------------------------------

CHART_INPUTS = {
    "rescue_harm": "main_summary",
    "effect": "main_summary",
    "contrast": "main_contrast",
    "rescue_overlap": "overlap",
    "policy_success": "policy",
    "policy_gain": "policy",
    "policy_rates": "policy",
    "ts_by_regime": "goal_by_model",
    "failure_reasons": "goal_by_regime",
    "barrier_drop": "drop",
    "depth_rates": "by_depth",
    "repair_funnel": "pooled",
    "toc_curves": "toc",
    "pass_hat_k_by_depth": "reliability",
}


def test_every_chart_is_listed() -> None:
    assert set(CHART_INPUTS) == set(report.CHARTS)


@pytest.mark.parametrize("name", sorted(CHART_INPUTS))
def test_valid_spec_same_for_lazy_input_and_extra_columns(
    name: str, request: pytest.FixtureRequest
) -> None:
    frame = request.getfixturevalue(CHART_INPUTS[name])
    chart = getattr(report, name)
    spec = chart(frame).to_dict()  # validates against the Vega-Lite schema
    # Lazy input, and an extra column the chart does not use, give the very same chart.
    assert spec_of(chart(frame.lazy())) == spec
    assert spec_of(chart(frame.with_columns(pl.lit("note").alias("zz_comment")))) == spec
    # Only the columns the chart uses are inlined, and every encoded field is one of them.
    columns = set().union(*(set(rows[0]) for rows in spec["datasets"].values()))
    used = set()
    for unit in units(spec):
        for definition in unit.get("encoding", {}).values():
            for item in definition if isinstance(definition, list) else [definition]:
                if isinstance(item, dict) and "field" in item:
                    used.add(item["field"])
    assert used <= columns, used - columns
    assert "zz_comment" not in columns


@pytest.mark.parametrize("name", sorted(CHART_INPUTS))
def test_wrong_frame_names_the_missing_columns(name: str) -> None:
    with pytest.raises(SchemaError, match=rf"^report\.{name}: the frame has no column `"):
        getattr(report, name)(pl.DataFrame({"something": [1]}))


@pytest.mark.parametrize("name", sorted(CHART_INPUTS))
def test_empty_frame_has_nothing_to_chart(name: str, request: pytest.FixtureRequest) -> None:
    frame = request.getfixturevalue(CHART_INPUTS[name]).clear()
    with pytest.raises(InputError, match=rf"^report\.{name}: the frame has no rows"):
        getattr(report, name)(frame)


def test_not_a_frame() -> None:
    with pytest.raises(
        ParameterError, match=r"report\.effect: expected a polars DataFrame or LazyFrame, got dict"
    ):
        report.effect({"n": [1]})


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(order=st.permutations(list(range(8))))
def test_row_order_does_not_change_the_chart(order: list[int], main_summary: pl.DataFrame) -> None:
    shuffled = main_summary[order]
    for make in (report.rescue_harm, report.effect):
        assert spec_of(make(shuffled)) == spec_of(make(main_summary))


def test_nan_rates_are_drawn_as_missing(main_contrast: pl.DataFrame) -> None:
    with_nan = main_contrast.with_columns(pl.lit(float("nan")).alias("ci_low"))
    data = dataset(report.contrast(with_nan))
    assert data["ci_low_pp"].null_count() == data.height


def test_charts_export_to_svg_without_a_browser(goal_by_regime: pl.DataFrame, tmp_path) -> None:
    target = tmp_path / "ts.svg"
    report.ts_by_regime(goal_by_regime).save(target)
    assert target.read_text().lstrip().startswith("<svg")
    png = tmp_path / "ts.png"
    report.ts_by_regime(goal_by_regime).save(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------------
# Lazy import and the missing extra
# ------------------------------------------------------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_lazy_import_and_the_missing_extra() -> None:
    # One interpreter: importing recoverylab (and its report and cli packages) imports neither
    # altair nor vl-convert; then, with altair made unimportable, a chart names the extra.
    result = run_python(
        "import sys, recoverylab, recoverylab.report, recoverylab.cli\n"
        "print('altair' in sys.modules, 'vl_convert' in sys.modules)\n"
        "sys.modules['altair'] = None  # as if it were not installed\n"
        "import polars as pl\n"
        "from recoverylab import MissingDependencyError, report\n"
        "try:\n"
        "    report.ts_by_regime(pl.DataFrame({'regime': ['x']}))\n"
        "except MissingDependencyError as exc:\n"
        "    print(exc)\n"
    )
    assert result.returncode == 0, result.stderr
    imported, message = result.stdout.strip().split("\n")
    assert imported == "False False"
    assert message == (
        "the optional package `altair` is needed for charts but is not installed. "
        "Hint: pip install 'recoverylab[report]'"
    )


def test_charts_switch_altair_to_the_offline_svg_renderer() -> None:
    code = (
        "import altair as alt\n"
        "from recoverylab import paired, report\n"
        "print(alt.renderers.active)\n"
        "policy = paired.evaluate_policy('FOLDER/policy_decisions.parquet',\n"
        "                                'FOLDER/policy_forks.parquet', n_resamples=100)\n"
        "chart = report.policy_success(policy)\n"
        "bundle = chart._repr_mimebundle_()\n"
        "print(alt.renderers.active, sorted(bundle[0] if isinstance(bundle, tuple) else bundle))\n"
        "report.chart_renderer('default')\n"
        "report.policy_success(policy)\n"
        "print(alt.renderers.active)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code.replace("FOLDER", str(PAIRED))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["default", "svg ['image/svg+xml']", "default"]


def test_show_renders_result_frames_in_percentage_points() -> None:
    frame = pl.DataFrame(
        {
            "condition": ["clean", None],
            "n": [75, 300],
            "base_rate": [0.8133, 0.7033],
            "gain": [0.0, 0.03],
            "ci_low": [0.0, 0.0067],
            "ci_high": [0.0, 0.0533],
            "p_value": [1.0, 0.0329],
            "rescue": [0, 12],
        }
    )
    table = report.show(frame)
    html = table.to_html()
    assert table.frame is frame
    assert '<td class="key">all</td>' in html
    assert "+3.0 [0.7, 5.3]" in html
    assert ">81.3<" in html
    assert ">0.033<" in html
    assert "rescue" not in html  # main columns only
    assert "rescue" in report.show(frame, wide=True).to_html()
    assert '<th class="value">gain pp [CI]</th>' in html
