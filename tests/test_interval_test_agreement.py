"""Every interval is reported beside the p-value of the test it inverts; no bound is moved.

Issue 38, point 1 (ARCHITECTURE §4): each printed bound is the bound the named method computed
(checked against the interval function called directly), and zero lies outside the interval
exactly when ``p_value < 1 − confidence`` -- on generated families of cells (one pair per task:
Fay–Lumbard; several: the cluster meld), one-sided alternatives, arbitrary integer partials, the
shipped samples, the monitor's confidence sequences and the gate's verdicts.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoverylab import ParameterError, paired, stats
from recoverylab.stats import sequences

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data_samples" / "paired"


# ------------------------------------------------------------------------------------------
# A generator of cells: 15-120 tasks, one pair or 2-4 pairs each, various rescue/harm rates
# ------------------------------------------------------------------------------------------


def generated_cells(n_cells: int, *, seed: int, one_pair: bool) -> pl.DataFrame:
    """Return per-cell task types (cell, d, n, count), drawn in one vectorised pass.

    Per cell a base discordance, a shift towards rescue or harm and a task-level spread of
    the rates (so tasks differ, as real clusters do); per task 1 or 2-4 pairs.
    """
    rng = np.random.default_rng(seed)
    tasks = rng.integers(15, 121, n_cells)
    cell = np.repeat(np.arange(n_cells), tasks)
    base = rng.uniform(0.02, 0.4, n_cells)
    shift = rng.uniform(-0.15, 0.25, n_cells)
    harm_scale = rng.uniform(0.1, 1.0, n_cells)
    spread = rng.uniform(0.5, 1.5, cell.size)
    rescue_p = np.clip((base + np.maximum(shift, 0.0))[cell] * spread, 0.0, 0.9)
    harm_p = np.clip((base + np.maximum(-shift, 0.0))[cell] * harm_scale[cell] * spread, 0, 0.9)
    harm_p = np.minimum(harm_p, 0.99 - rescue_p)
    pairs = np.ones(cell.size, dtype=np.int64) if one_pair else rng.integers(2, 5, cell.size)
    rescue = rng.binomial(pairs, rescue_p)
    harm = rng.binomial(pairs - rescue, np.clip(harm_p / (1.0 - rescue_p), 0.0, 1.0))
    frame = pl.DataFrame({"cell": cell, "d": rescue - harm, "n": pairs})
    return (
        frame.group_by("cell", "d", "n")
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .sort("cell", "d", "n")
    )


def assert_bounds_are_the_methods_own(
    types: pl.DataFrame,
    out: pl.DataFrame,
    cells: list[str],
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> None:
    """Each bound equals the named interval function's output; zero outside iff p rejects."""
    agree = stats.interval_agrees_with_test(
        out["ci_low"].to_numpy(),
        out["ci_high"].to_numpy(),
        out["p_value"].to_numpy(),
        confidence=confidence,
        alternative=alternative,
    )
    assert agree.all(), out.filter(pl.Series(~agree))
    assert out["ci_inverts_test"].all()
    assert (out["test"] == out["ci_method"]).all()
    assert set(out["ci_method"].unique()) <= {"fay-lumbard", "cluster-melded", "sign-flip"}
    options = {"confidence": confidence, "alternative": alternative}
    one_pair = out.filter(pl.col("ci_method") == "fay-lumbard")
    if one_pair.height:
        counts = (
            types.join(one_pair.select(cells), on=cells, how="semi", nulls_equal=True)
            .group_by(cells)
            .agg(
                pl.col("count").filter(pl.col("d") == 1).sum().alias("rescue"),
                pl.col("count").filter(pl.col("d") == -1).sum().alias("harm"),
                pl.col("count").sum().alias("pairs"),
            )
        )
        rows = one_pair.join(counts, on=cells, how="left", nulls_equal=True, maintain_order="left")
        ci = stats.fay_lumbard_interval(
            rows["rescue"].to_numpy(), rows["harm"].to_numpy(), rows["pairs"].to_numpy(), **options
        )
        assert np.array_equal(ci.low, rows["ci_low"].to_numpy())
        assert np.array_equal(ci.high, rows["ci_high"].to_numpy())
    for row in out.filter(pl.col("ci_method") != "fay-lumbard").iter_rows(named=True):
        cell = types.filter(*(pl.col(c).eq_missing(row[c]) for c in cells)).sort("d", "n")
        interval = {
            "cluster-melded": stats.cluster_melded_interval,
            "sign-flip": stats.sign_flip_interval,
        }[row["ci_method"]]
        ci = interval(cell.select("d", "n").to_numpy(), cell["count"].to_numpy(), **options)
        assert (row["ci_low"], row["ci_high"]) == (float(ci.low), float(ci.high)), row


# ------------------------------------------------------------------------------------------
# Generated families
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_many_multi_pair_cells_report_the_methods_own_bounds() -> None:
    # the 2,000 cells take minutes (benchmarks/interval_agreement.py runs them all);
    # the suite checks the first 200 of the same family
    types = generated_cells(2000, seed=38, one_pair=False).filter(pl.col("cell") < 200)
    out = stats.paired_effect_cells(types, cells=["cell"])
    assert out.height == 200
    assert (out["ci_method"] == "cluster-melded").all()
    assert_bounds_are_the_methods_own(types, out, ["cell"])


def test_multi_pair_cells_report_the_methods_own_bounds() -> None:
    types = generated_cells(15, seed=380, one_pair=False)
    out = stats.paired_effect_cells(types, cells=["cell"])
    assert (out["ci_method"] == "cluster-melded").all()
    assert_bounds_are_the_methods_own(types, out, ["cell"])
    # the hull's own p-value is never below its sign-flip part's (the second test, named)
    assert (out["p_value"] >= out["p_sign_flip"] - 1e-12).all()


@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_one_sided_multi_pair_cells(alternative: str) -> None:
    types = generated_cells(8, seed=381, one_pair=False)
    out = stats.paired_effect_cells(types, cells=["cell"], alternative=alternative)
    assert_bounds_are_the_methods_own(types, out, ["cell"], alternative=alternative)


@pytest.mark.parametrize(
    ("cells", "alternative", "confidence"),
    [
        (2000, "two-sided", 0.95),
        (300, "greater", 0.95),
        (300, "less", 0.95),
        (300, "two-sided", 0.8),
    ],
)
def test_one_pair_cells_are_fay_lumbard_with_its_own_p(
    cells: int, alternative: str, confidence: float
) -> None:
    types = generated_cells(cells, seed=39, one_pair=True)
    out = stats.paired_effect_cells(
        types, cells=["cell"], alternative=alternative, confidence=confidence
    )
    assert (out["ci_method"] == "fay-lumbard").all()
    assert_bounds_are_the_methods_own(
        types, out, ["cell"], confidence=confidence, alternative=alternative
    )
    # one pair per task: the meld's curve at zero is the exact McNemar (sign-flip) p-value
    assert np.allclose(out["p_value"], out["p_sign_flip"], rtol=1e-9, atol=1e-15)


def test_sign_flip_inversion_reports_its_own_curve() -> None:
    types = generated_cells(12, seed=382, one_pair=False)
    out = stats.paired_effect_cells(types, cells=["cell"], ci_method="sign-flip")
    assert (out["ci_method"] == "sign-flip").all()
    assert_bounds_are_the_methods_own(types, out, ["cell"])
    # the inversion's curve at zero is the exact sign-flip p-value
    assert np.allclose(out["p_value"], out["p_sign_flip"], rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("ci_method", ["percentile", "bca"])
def test_bootstrap_says_it_inverts_no_test(ci_method: str) -> None:
    types = generated_cells(6, seed=383, one_pair=False)
    out = stats.paired_effect_cells(types, cells=["cell"], ci_method=ci_method, n_resamples=300)
    assert (out["ci_method"] == ci_method).all()
    assert (out["test"] == "sign-flip").all()
    assert not out["ci_inverts_test"].any()
    assert out["p_value"].to_list() == out["p_sign_flip"].to_list()


# ------------------------------------------------------------------------------------------
# Arbitrary integer partials
# ------------------------------------------------------------------------------------------


@st.composite
def integer_partials(draw: st.DrawFn) -> pl.DataFrame:
    size = draw(st.integers(1, 5))
    rows = []
    for _ in range(size):
        n = draw(st.integers(1, 4))
        rows.append((draw(st.integers(-n, n)), n, draw(st.integers(1, 25))))
    frame = pl.DataFrame(rows, schema=["d", "n", "count"], orient="row")
    return frame.group_by("d", "n").agg(pl.col("count").sum()).sort("d", "n")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    types=integer_partials(),
    ci_method=st.sampled_from(["auto", "sign-flip"]),
    alternative=st.sampled_from(["two-sided", "greater", "less"]),
    confidence=st.sampled_from([0.9, 0.95, 0.75]),
)
def test_agreement_holds_for_arbitrary_integer_partials(
    types: pl.DataFrame, ci_method: str, alternative: str, confidence: float
) -> None:
    types = types.with_columns(pl.lit("x").alias("cell"))
    out = stats.paired_effect_cells(
        types, cells=["cell"], ci_method=ci_method, alternative=alternative, confidence=confidence
    )
    assert_bounds_are_the_methods_own(
        types, out, ["cell"], confidence=confidence, alternative=alternative
    )


# ------------------------------------------------------------------------------------------
# The shipped samples, through the public verbs
# ------------------------------------------------------------------------------------------


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[tuple[pl.DataFrame, list[str], dict]]:
    """Record every call of ``stats.paired_effect_cells`` (the types the verbs hand it)."""
    calls: list[tuple[pl.DataFrame, list[str], dict]] = []
    original: Callable[..., pl.DataFrame] = stats.paired_effect_cells

    def record(types: pl.DataFrame, *, cells: list[str], **options: object) -> pl.DataFrame:
        calls.append((pl.DataFrame(types), list(cells), options))
        return original(types, cells=cells, **options)

    monkeypatch.setattr(stats, "paired_effect_cells", record)
    return calls


@pytest.mark.parametrize("name", ["main_forks", "mechanism_forks", "policy_forks"])
def test_shipped_summaries_report_the_methods_own_bounds(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _recording(monkeypatch)
    got = paired.summarize(SAMPLES / f"{name}.parquet")
    ((types, cells, _),) = calls
    assert_bounds_are_the_methods_own(types, got.filter(pl.col("n") > 0), cells)


def test_shipped_policy_rows_report_the_methods_own_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _recording(monkeypatch)
    got = paired.evaluate_policy(
        SAMPLES / "policy_decisions.parquet", SAMPLES / "policy_forks.parquet", method="refresh"
    )
    ((types, cells, _),) = calls
    assert_bounds_are_the_methods_own(types, got, cells)
    pooled = got.filter(pl.col("condition").is_null()).row(0, named=True)
    # the pooled row (tasks with several episodes): the cluster meld, with its own p-value;
    # the exact sign-flip test of the same differences in a column of its own
    assert pooled["ci_method"] == pooled["test"] == "cluster-melded"
    assert pooled["ci_low"] < 0 < pooled["ci_high"]  # a bound no method moved
    assert pooled["p_value"] >= 0.05 > pooled["p_sign_flip"]


# ------------------------------------------------------------------------------------------
# Monitor and gate
# ------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    tasks=st.integers(1, 60),
    lean=st.floats(-0.6, 0.6),
    theta=st.floats(-0.9, 0.9),
    alpha=st.sampled_from([0.025, 0.05, 0.2]),
)
def test_sequence_bounds_and_p_values_are_one_computation(
    seed: int, tasks: int, lean: float, theta: float, alpha: float
) -> None:
    rng = np.random.default_rng(seed)
    m = rng.integers(1, 4, tasks).astype(np.float64)
    up = rng.binomial(m.astype(np.int64), 0.3 + max(lean, 0.0))
    down = rng.binomial((m - up).astype(np.int64), 0.3 + max(-lean, 0.0))
    x = (up - down).astype(np.float64)
    found = sequences.sequence_test(x, m, theta, alpha=alpha, max_pairs=3.0, grid_points=81)
    assert np.array_equal(found.low > theta, found.p_greater < alpha)
    assert np.array_equal(found.high < theta, found.p_less < alpha)
    # anytime p-values only fall, and are never below the capital's 1 / max K at theta
    assert (np.diff(found.p_greater) <= 0).all()
    assert (np.diff(found.p_less) <= 0).all()
    plus = sequences.capital(x, m, theta, side="greater", max_pairs=3.0)
    at_theta = np.minimum(1.0, np.exp(-np.maximum.accumulate(plus)))
    assert (found.p_greater >= at_theta - 1e-15).all()
    bounds = sequences.confidence_sequence(x, m, alpha=alpha, max_pairs=3.0, grid_points=81)
    assert np.array_equal(bounds.low, found.low)
    assert np.array_equal(bounds.high, found.high)


def test_monitor_rows_agree_with_their_p_values() -> None:
    rng = np.random.default_rng(5)
    tasks = 80
    success = np.stack([rng.random(tasks) < 0.3, rng.random(tasks) < 0.85], axis=1).ravel()
    forks = pl.DataFrame(
        {
            "task_id": [f"t{i:03}" for i in range(tasks) for _ in (0, 1)],
            "condition": ["stale2"] * (2 * tasks),
            "method": ["none", "refresh"] * tasks,
            "delay": [None, 1] * tasks,
            "success": success,
        }
    )
    for confidence in (0.95, 0.8):
        seq = paired.monitor(forks, confidence=confidence).sequences
        agree = stats.interval_agrees_with_test(
            seq["ci_low"].to_numpy(),
            seq["ci_high"].to_numpy(),
            seq["p_value"].to_numpy(),
            confidence=confidence,
        )
        assert agree.all()
        assert (seq["ci_low"] > 0).any()  # the data decide: the check is not vacuous
        assert set(seq["ci_method"]) == set(seq["test"]) == {"betting-sequence"}


@pytest.mark.parametrize("sequential", [False, True])
def test_gate_verdicts_are_read_off_the_shown_bounds(sequential: bool) -> None:
    result = paired.gate(
        SAMPLES / "main_forks.parquet", SAMPLES / "gate_policy.toml", sequential=sequential
    )
    claims = result.claims
    assert claims.height > 0
    for row in claims.iter_rows(named=True):
        upper = row["kind"] in ("max_harm_rate", "max_clean_touch")
        low_beyond, high_beyond = (
            row["ci_low"] > row["threshold"],
            row["ci_high"] < row["threshold"],
        )
        passed, failed = (high_beyond, low_beyond) if upper else (low_beyond, high_beyond)
        expected = "PASS" if passed else "FAIL" if failed else "INCONCLUSIVE"
        assert row["verdict"] == expected, row
        assert row["ci_method"] == row["test"]
        assert row["ci_method"] is not None


# ------------------------------------------------------------------------------------------
# Nothing moves a bound
# ------------------------------------------------------------------------------------------


def test_no_code_moves_a_bound_to_the_smallest_float() -> None:
    pattern = re.compile(r"nextafter\(0(\.0)?, *[-+]?1")
    hits = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "recoverylab").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_agree_with_test_is_deprecated_and_moves_nothing() -> None:
    message = "agree_with_test is deprecated and returns the bounds unchanged"
    with pytest.warns(DeprecationWarning, match=message):
        ci = stats.agree_with_test(np.array([-0.032]), np.array([0.525]), np.array([0.047]))
    assert (float(ci.low[0]), float(ci.high[0])) == (-0.032, 0.525)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ParameterError, match="parameter `confidence`"):
            stats.agree_with_test(np.array([0.0]), np.array([1.0]), np.array([0.5]), confidence=2.0)


def test_interval_agrees_with_test_checks_each_side() -> None:
    low = np.array([0.01, -0.2, -0.2, -0.2, np.nan])
    high = np.array([0.3, -0.01, 0.3, 0.3, np.nan])
    p = np.array([0.01, 0.02, 0.01, 0.5, 0.5])
    assert stats.interval_agrees_with_test(low, high, p).tolist() == [
        True,
        True,
        False,
        True,
        True,
    ]
    # one-sided: only the bounded side counts
    assert not stats.interval_agrees_with_test(-0.1, -0.01, 0.01, alternative="greater")
    assert stats.interval_agrees_with_test(-0.1, -0.01, 0.01, alternative="less")
