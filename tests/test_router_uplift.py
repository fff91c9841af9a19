"""Router evaluation as uplift (recoverylab/router/_uplift.py) against direct sorting (grf)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoverylab import router
from recoverylab._errors import ParameterError
from recoverylab.router import Never


def direct_rate(tau: list[float], score: list[float]) -> tuple[list[float], float, float]:
    """grf's estimators written out with plain loops: sort, average ties, mean of the top i."""
    n = len(tau)
    order = sorted(range(n), key=lambda i: -score[i])
    smoothed = [0.0] * n
    for position, i in enumerate(order):
        tied = [j for j in range(n) if score[j] == score[i]]
        smoothed[position] = sum(tau[j] for j in tied) / len(tied)
    ate = sum(tau) / n
    toc = [sum(smoothed[: i + 1]) / (i + 1) - ate for i in range(n)]
    autoc = sum(toc) / n
    qini = sum((i + 1) / n * toc[i] for i in range(n)) / n
    return toc, autoc, qini


points = st.lists(
    st.tuples(st.sampled_from([-1.0, 0.0, 1.0]), st.integers(0, 4)), min_size=1, max_size=25
)


@settings(max_examples=80, deadline=None)
@given(points)
def test_toc_autoc_qini_equal_direct_sorting_with_ties(rows):
    tau = [t for t, _ in rows]
    score = [float(s) for _, s in rows]
    n = len(tau)
    toc, autoc, qini = direct_rate(tau, score)
    grid = [i / n for i in range(1, n + 1)]
    out = router.rate_statistics(tau, score, q=grid)
    assert out["autoc"] == pytest.approx(autoc, abs=1e-12)
    assert out["qini"] == pytest.approx(qini, abs=1e-12)
    assert out["toc"] == pytest.approx(toc, abs=1e-12)
    assert out["ate"] == pytest.approx(sum(tau) / n)


def test_by_hand_no_ties():
    out = router.rate_statistics([1, 0, 0, -1], [4, 3, 2, 1], q=[0.25, 0.5, 1.0])
    # top 1: 1, top 2: 1/2, top 3: 1/3, all: 0
    assert out["toc"].tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert out["autoc"] == pytest.approx((1 + 0.5 + 1 / 3 + 0) / 4)
    assert out["qini"] == pytest.approx((0.25 * 1 + 0.5 * 0.5 + 0.75 / 3) / 4)
    # A constant score ranks nothing: its TOC is 0 everywhere.
    flat = router.rate_statistics([1, 0, 0, -1], [0, 0, 0, 0])
    assert flat["autoc"] == 0
    assert np.all(flat["toc"] == 0)


@settings(max_examples=40, deadline=None)
@given(points, st.lists(st.integers(0, 3), min_size=25, max_size=25))
def test_integer_weights_equal_replicated_points(rows, counts):
    tau = np.array([t for t, _ in rows])
    score = np.array([float(s) for _, s in rows])
    w = np.array(counts[: len(rows)], dtype=float)
    if w.sum() == 0:
        w[0] = 1.0
    weighted = router.rate_statistics(tau, score, weights=w)
    replicated = router.rate_statistics(
        np.repeat(tau, w.astype(int)), np.repeat(score, w.astype(int))
    )
    assert weighted["autoc"] == pytest.approx(replicated["autoc"], abs=1e-12)
    assert weighted["qini"] == pytest.approx(replicated["qini"], abs=1e-12)


def own_rows(res: router.Uplift, policy: str, metric: str) -> pl.DataFrame:
    return res.metrics.filter(pl.col("reference").is_null(), policy=policy, metric=metric)


def tables() -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(2)
    tasks = [f"t{i:02d}" for i in range(80)]
    rows, forks = [], []
    for task in tasks:
        for condition in ("clean", "stale2"):
            y0 = bool(rng.random() < 0.5)
            forks.append((task, condition, "none", None, y0))
            for delay in (1, 2):
                signal = rng.normal()
                helps = condition == "stale2" and signal > 0
                y1 = True if helps else (y0 if rng.random() < 0.95 else not y0)
                forks.append((task, condition, "refresh", delay, y1))
                rows.append((task, condition, delay, signal, rng.normal()))
    points = pl.DataFrame(
        rows, schema=["task_id", "condition", "delay", "signal", "noise"], orient="row"
    )
    fork_frame = pl.DataFrame(
        forks,
        schema={
            "task_id": pl.String,
            "condition": pl.String,
            "method": pl.String,
            "delay": pl.Int64,
            "success": pl.Boolean,
        },
        orient="row",
    )
    return points, fork_frame


def test_uplift_estimates_match_direct_sorting_and_differences_are_paired():
    points, forks = tables()
    res = router.uplift(
        {"signal": "signal", "noise": "noise", "never": Never()},
        points,
        pl.LazyFrame(forks),
        delays=[1, 2],
        n_resamples=500,
    )
    pairs = (
        points.join(
            forks.filter(method="refresh").select("task_id", "condition", "delay", "success"),
            on=["task_id", "condition", "delay"],
        )
        .join(
            forks.filter(method="none").select(
                "task_id", "condition", pl.col("success").alias("y0")
            ),
            on=["task_id", "condition"],
        )
        .with_columns((pl.col("success").cast(int) - pl.col("y0").cast(int)).alias("tau"))
    )
    for name in ("signal", "noise"):
        _, autoc, qini = direct_rate(pairs["tau"].to_list(), pairs[name].to_list())
        own = own_rows(res, name, "autoc")
        assert own["estimate"].item() == pytest.approx(autoc)
        assert own["ci_low"].item() <= autoc <= own["ci_high"].item()
        assert own_rows(res, name, "qini")["estimate"].item() == pytest.approx(qini)
    never = own_rows(res, "never", "autoc")
    assert never["estimate"].item() == 0
    assert never["ci_low"].item() == 0
    diff = res.metrics.filter(policy="signal", reference="noise", metric="autoc")
    signal = own_rows(res, "signal", "autoc")["estimate"]
    noise = own_rows(res, "noise", "autoc")["estimate"]
    assert diff["estimate"].item() == pytest.approx(signal.item() - noise.item())
    assert diff["ci_low"].item() > 0  # the informative score ranks better, significantly
    assert res.curves.filter(policy="signal", q=1.0)["toc"].item() == pytest.approx(0.0)
    assert res.curves.height == 3 * 20
    again = router.uplift(
        {"signal": "signal", "noise": "noise", "never": Never()},
        points.sample(fraction=1.0, shuffle=True, seed=3),
        forks.sample(fraction=1.0, shuffle=True, seed=4),
        delays=[1, 2],
        n_resamples=500,
    )
    assert again.metrics.equals(res.metrics)


def test_uplift_with_fitted_policies_on_the_sample():
    pytest.importorskip("sklearn")
    from tests.conftest import SAMPLES

    sample = SAMPLES / "router"
    features = ["repetition", "noops", "obs_novelty", "consistency", "progress", "context_used"]
    train = [sample / "train" / f for f in ("decision_points.parquet", "forks.parquet")]
    fitted = router.Router().fit(pl.scan_parquet(train[0]), pl.scan_parquet(train[1]), features)
    res = router.uplift(
        {"router": fitted, "never": Never()},
        pl.scan_parquet(sample / "test" / "decision_points.parquet"),
        pl.scan_parquet(sample / "test" / "forks.parquet"),
        n_resamples=200,
    )
    autoc = own_rows(res, "router", "autoc")
    assert autoc["ci_low"].item() > 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"q": [0.0, 1.0]}, "`q`"),
        ({"at": 2.0}, "`at`"),
        ({"n_resamples": 0}, "`n_resamples`"),
        ({"scores": {"x": "missing"}}, "`missing`"),
        ({"scores": {"x": 3}}, "give a fitted Router"),
        ({"scores": {}}, "non-empty"),
    ],
)
def test_uplift_parameter_errors(kwargs, match):
    points, forks = tables()
    options = {"scores": {"s": "signal"}, "delays": [1, 2], **kwargs}
    scores = options.pop("scores")
    with pytest.raises(ParameterError, match=match):
        router.uplift(scores, points, forks, **options)


def test_break_even_baseline_learns_p_star_and_decides_above_it():
    pytest.importorskip("sklearn")
    from recoverylab import paired, synth

    tables = synth.generate("decision_points", 300, seed=1)
    points, forks = tables["decision_points"], tables["forks"]
    fitted = router.Router(folds=3).fit(points, forks, features=["repetition", "noops", "progress"])
    baseline = router.BreakEven(fitted).fit(forks)
    counts = (
        paired.summarize(forks, n_resamples=10)
        .filter(method="refresh")
        .group_by("delay")
        .agg(pl.col("rescue", "unchanged", "harm", "kept").sum())
    )
    for delay, rescue, unchanged, harm, kept in counts.iter_rows():
        if delay not in baseline.p_star_:
            continue
        r, d = rescue / (rescue + unchanged), harm / (harm + kept)
        assert baseline.p_star_[delay] == pytest.approx(d / (r + d))
    decided = baseline.decide(points).collect()
    scored = baseline.score(points).collect()
    chosen = decided.drop_nulls("delay").join(scored, on=["task_id", "condition", "delay"])
    stars = chosen["delay"].replace_strict(baseline.p_star_, return_dtype=pl.Float64)
    assert (chosen["p_fail"] >= stars).all()
    assert decided.height == points.select("task_id", "condition").unique().height
    with pytest.raises(ParameterError, match="fitted Router"):
        router.BreakEven(Never()).fit(forks)


def test_cli_router_evaluate_writes_uplift_and_toc(cli, tmp_path):
    pytest.importorskip("sklearn")
    from tests.conftest import SAMPLES

    data = SAMPLES / "router"
    rule = tmp_path / "rule.json"
    features = "repetition,noops,obs_novelty,consistency,progress,context_used"
    fitted = cli("router", "fit", "--decision-points", data / "train" / "decision_points.parquet",
                 "--forks", data / "train" / "forks.parquet", "--features", features,
                 "--out", rule, "--quiet")  # fmt: skip
    assert fitted.code == 0, fitted.err
    metrics, curves = tmp_path / "uplift.parquet", tmp_path / "toc.parquet"
    result = cli("router", "evaluate", "--rule", rule,
                 "--decision-points", data / "test" / "decision_points.parquet",
                 "--forks", data / "test" / "forks.parquet", "--resamples", "200",
                 "--uplift-out", metrics, "--toc-out", curves, "--quiet")  # fmt: skip
    assert result.code == 0, result.err
    assert "gain" in result.out
    assert set(pl.read_parquet(metrics)["metric"]) == {"autoc", "qini", "uplift_at_k", "ate"}
    assert pl.read_parquet(curves).columns == list(router.CURVE_COLUMNS)


def test_uplift_scores_may_take_any_name_and_shards_agree():
    from recoverylab.engines import ShardedEngine

    points, forks = tables()
    scores = {"signal": "signal", "y0": "noise", "task_id": Never()}
    res = router.uplift(scores, points, forks, delays=[1, 2], n_resamples=200)
    assert res.metrics["policy"].unique(maintain_order=True).to_list() == list(scores)
    reference = router.uplift(
        {"signal": "signal", "noise": "noise", "never": Never()},
        points,
        forks,
        delays=[1, 2],
        n_resamples=200,
    )
    renamed = {"noise": "y0", "never": "task_id"}
    expected = reference.metrics.with_columns(pl.col("policy", "reference").replace(renamed))
    assert res.metrics.equals(expected)
    sharded = router.uplift(
        scores, points, forks, delays=[1, 2], n_resamples=200, engine=ShardedEngine(k=4)
    )
    assert sharded.metrics.equals(res.metrics)
    assert sharded.curves.equals(res.curves)


def test_uplift_checks_its_parameters_before_reading_data():
    with pytest.raises(ParameterError, match="parameter `seed` is -1"):
        router.uplift({"s": "signal"}, "no/such/points/", "no/such/forks/", seed=-1)
    with pytest.raises(ParameterError, match="give a fitted Router"):
        router.uplift({"s": object()}, "no/such/points/", "no/such/forks/")
