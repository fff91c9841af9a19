"""The CIR router (recoverylab.router): search, rule, estimators, export, compare, acceptance."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from itertools import product
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoverylab import paired, synth
from recoverylab._errors import (
    InputError,
    MissingDependencyError,
    NotFittedError,
    ParameterError,
    SchemaError,
    SourceError,
)
from recoverylab.router import (
    NEVER,
    AnomalyRouter,
    FitReport,
    Never,
    RateMatchedAnomaly,
    RecoveryLabWarning,
    Router,
    Thresholds,
    _search,
    apply_rule,
    compare,
    load_rule,
)
from recoverylab.router._models import task_folds

FEATURES = ["repetition", "noops", "obs_novelty", "consistency", "progress", "context_used"]
KEYS = ["task_id", "condition"]


# ------------------------------------------------------------------------------------------------
# fixtures
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def train() -> dict[str, pl.DataFrame]:
    return synth.generate("decision_points", 300, seed=5, prefix="tr")


@pytest.fixture(scope="module")
def test_set() -> dict[str, pl.DataFrame]:
    return synth.generate("decision_points", 300, seed=6, prefix="te")


@pytest.fixture(scope="module")
def router(train) -> Router:
    return Router().fit(train["decision_points"], train["forks"], FEATURES)


def tiny_tables(**overrides) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Eight tasks, clean and stale2, one delay: hand-sized data for error paths."""
    tasks = [f"t{i}" for i in range(8)]
    rows = [(t, c) for t in tasks for c in ("clean", "stale2")]
    points = pl.DataFrame(
        {
            "task_id": [t for t, _ in rows],
            "condition": [c for _, c in rows],
            "delay": [1] * len(rows),
            "x": [float(i % 5) + (2.0 if c == "stale2" else 0.0) for i, (_, c) in enumerate(rows)],
            "z": [float((i * 7) % 3) for i in range(len(rows))],
        }
    )
    y0 = [i % 3 != 0 for i in range(len(rows))]
    y1 = [i % 2 == 0 for i in range(len(rows))]
    forks = pl.concat(
        [
            pl.DataFrame(
                {
                    "task_id": [t for t, _ in rows],
                    "condition": [c for _, c in rows],
                    "method": "none",
                    "delay": pl.Series([None] * len(rows), dtype=pl.Int64),
                    "success": y0,
                }
            ),
            pl.DataFrame(
                {
                    "task_id": [t for t, _ in rows],
                    "condition": [c for _, c in rows],
                    "method": "refresh",
                    "delay": [1] * len(rows),
                    "success": y1,
                }
            ),
        ]
    )
    for name, value in overrides.items():
        points = points.with_columns(pl.Series(name, value))
    return points, forks


# ------------------------------------------------------------------------------------------------
# the vectorised threshold search
# ------------------------------------------------------------------------------------------------


def random_arrays(seed: int, episodes: int, delays: int) -> _search.EpisodeArrays:
    rng = np.random.default_rng(seed)
    shape = (episodes, delays)
    return _search.EpisodeArrays(
        available=rng.random(shape) < 0.85,
        p_err=rng.integers(0, 6, shape) / 5,  # coarse values: many ties with the grid
        not_p0=rng.integers(0, 6, shape) / 5,
        utility=rng.integers(-3, 4, shape) / 3,
        y0=rng.random(shape) < 0.5,
        y1=rng.random(shape) < 0.5,
        clean=rng.random(episodes) < 0.3,
    )


def brute_force(arrays: _search.EpisodeArrays, grids) -> dict[str, np.ndarray]:
    out = {
        name: np.zeros(tuple(len(g) for g in grids), dtype=np.int64) for name in _search.STATISTICS
    }
    for index in product(*(range(len(g)) for g in grids)):
        values = [g[i] for g, i in zip(grids, index, strict=True)]
        chosen = _search.first_delay(arrays, *values)
        for name, count in _search.rule_counts(arrays, chosen).items():
            out[name][index] = count
    return out


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    episodes=st.integers(1, 40),
    delays=st.integers(1, 4),
    sizes=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)),
)
def test_grid_counts_equal_the_rule_applied_triple_by_triple(seed, episodes, delays, sizes):
    arrays = random_arrays(seed, episodes, delays)
    rng = np.random.default_rng(seed + 1)
    grids = (
        np.unique(rng.integers(0, 6, sizes[0]) / 5),
        np.unique(rng.integers(0, 6, sizes[1]) / 5),
        np.unique(rng.integers(-3, 4, sizes[2]) / 3),
    )
    counts = _search.grid_counts(arrays, grids)
    expected = brute_force(arrays, grids)
    for name in _search.STATISTICS:
        np.testing.assert_array_equal(counts.counts[name], expected[name], err_msg=name)


def test_grid_counts_by_hand():
    # Episode 0 (stale): delay 0 has p_err 0.5, delay 1 has p_err 0.9; refresh rescues only at
    # delay 1. Episode 1 (clean): p_err 0.6 at delay 0, harmed by the refresh.
    arrays = _search.EpisodeArrays(
        available=np.array([[True, True], [True, False]]),
        p_err=np.array([[0.5, 0.9], [0.6, 0.0]]),
        not_p0=np.ones((2, 2)),
        utility=np.ones((2, 2)),
        y0=np.array([[False, False], [True, True]]),
        y1=np.array([[False, True], [False, True]]),
        clean=np.array([False, True]),
    )
    off = np.array([-np.inf])
    counts = _search.grid_counts(arrays, (np.array([0.5, 0.6, 0.9]), off, off)).counts
    # alpha 0.5: both episodes refresh at delay 0 -> no rescue, clean harm 1.
    # alpha 0.6: episode 0 waits to delay 1 (rescue), episode 1 refreshes (harm).
    # alpha 0.9: only episode 0, rescued at delay 1.
    assert counts["gain_nonclean"][:, 0, 0].tolist() == [0, 1, 1]
    assert counts["clean_harm"][:, 0, 0].tolist() == [1, 1, 0]
    assert counts["interventions"][:, 0, 0].tolist() == [2, 2, 1]
    best, feasible = _search.choose(
        _search.GridCounts((np.array([0.5, 0.6, 0.9]), off, off), counts), eps=0.0, n_clean=1
    )
    assert best == (2, 0, 0)
    assert feasible[:, 0, 0].tolist() == [False, False, True]


def test_choose_breaks_ties_by_fewer_interventions_then_larger_thresholds():
    gain = np.array([[[3]], [[3]], [[3]]])
    counts = _search.GridCounts(
        (np.array([0.1, 0.2, 0.3]), np.array([0.0]), np.array([0.0])),
        {
            "gain_nonclean": gain,
            "clean_harm": np.zeros_like(gain),
            "interventions": np.array([[[9]], [[5]], [[5]]]),
        },
    )
    assert _search.choose(counts, eps=0.0, n_clean=10)[0] == (2, 0, 0)


def test_choose_returns_none_without_a_positive_feasible_gain():
    gain = np.array([[[0]], [[-2]]])
    counts = _search.GridCounts(
        (np.array([0.1, 0.2]), np.array([0.0]), np.array([0.0])),
        {"gain_nonclean": gain, "clean_harm": np.zeros_like(gain), "interventions": gain},
    )
    assert _search.choose(counts, eps=0.02, n_clean=10)[0] is None


def test_quantile_grid_uses_observed_values_and_adds_zero_in_range():
    values = np.array([-0.5, 0.25, 0.75, 0.75])
    grid = _search.quantile_grid(values, 3, extra=(0.0, 5.0))
    assert grid.tolist() == [-0.5, 0.0, 0.25, 0.75]


def test_task_folds_keep_tasks_together_and_balance():
    task_index = np.array([0, 0, 1, 2, 2, 2, 3, 4, 5, 6])
    fold = task_folds(task_index, 7, 3, seed=0)
    for task in range(7):
        assert len(set(fold[task_index == task])) == 1
    per_fold = np.bincount([fold[task_index == t][0] for t in range(7)], minlength=3)
    assert sorted(per_fold.tolist()) == [2, 2, 3]
    np.testing.assert_array_equal(fold, task_folds(task_index, 7, 3, seed=0))


# ------------------------------------------------------------------------------------------------
# apply_rule: plain Python
# ------------------------------------------------------------------------------------------------


def hand_rule(**thresholds) -> dict:
    return {
        "format": "recoverylab.router",
        "version": 1,
        "features": ["x"],
        "scaling": {"mean": [1.0], "scale": [2.0]},
        "delays": [1, 2, 4],
        "lam": 2.0,
        "models": {
            "p_err": {"intercept": 0.0, "coef": [1.0]},
            "p0": {"intercept": 0.0, "coef": [-1.0]},
            "p1": {"intercept": 1.0, "coef": [0.0]},
        },
        "thresholds": {"alpha": 0.5, "beta": None, "gamma": None, **thresholds},
    }


def test_apply_rule_refreshes_at_the_first_qualifying_delay():
    # x = 1 -> standardised 0 -> p_err 0.5 (qualifies at alpha 0.5); x = 0 -> p_err < 0.5.
    rule = hand_rule()
    assert apply_rule(rule, {1: {"x": 0.0}, 2: {"x": 1.0}, 4: {"x": 9.0}}) == 2
    assert apply_rule(rule, {1: {"x": 0.0}, 4: {"x": 3.0}}) == 4
    assert apply_rule(rule, {1: {"x": 0.0}, 2: {"x": -5.0}}) is None
    assert apply_rule(rule, {}) is None
    assert apply_rule(rule, {3: {"x": 9.0}}) is None  # not a candidate delay


def test_apply_rule_checks_beta_and_utility():
    # At x = 3 the standardised feature is 1: p_err = sigmoid(1), p0 = sigmoid(-1) = 0.2689,
    # p1 = sigmoid(1) = 0.7311, so u = 0.7311^2 - 2 * 0.2689^2 = 0.3898.
    p0, p1 = 1 / (1 + math.exp(1)), 1 / (1 + math.exp(-1))
    u = (1 - p0) * p1 - 2.0 * p0 * (1 - p1)
    point = {1: {"x": 3.0}}
    assert apply_rule(hand_rule(beta=1 - p0), point) == 1
    assert apply_rule(hand_rule(beta=1 - p0 + 1e-9), point) is None
    assert apply_rule(hand_rule(gamma=u), point) == 1
    assert apply_rule(hand_rule(gamma=u + 1e-9), point) is None
    assert u == pytest.approx(0.3898, abs=1e-4)


def test_apply_rule_is_stable_for_extreme_logits():
    assert apply_rule(hand_rule(alpha=0.0), {1: {"x": -1e6}}) == 1  # exp would overflow
    assert apply_rule(hand_rule(alpha=1.0), {1: {"x": 1e6}}) == 1


def test_apply_rule_errors():
    with pytest.raises(ValueError, match=r"not a recoverylab\.router rule of version 1"):
        apply_rule({"format": "other"}, {})
    with pytest.raises(ValueError, match="feature 'x' is missing at delay 1"):
        apply_rule(hand_rule(), {1: {"y": 1.0}})
    with pytest.raises(ValueError, match="feature 'x' is nan at delay 2; need a number"):
        apply_rule(hand_rule(), {1: {"x": 0.0}, 2: {"x": float("nan")}})


def test_rule_module_imports_only_the_standard_library():
    from recoverylab.router import _rule

    source = Path(_rule.__file__).read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    modules = {line.split()[1].split(".")[0] for line in imports}
    assert modules <= {"__future__", "math", "collections", "typing"}
    assert modules <= set(sys.stdlib_module_names)


# ------------------------------------------------------------------------------------------------
# fitting
# ------------------------------------------------------------------------------------------------


def test_fit_learns_state_and_report(router, train):
    assert router.features_ == tuple(FEATURES)
    assert set(router.models_) == {"p_err", "p0", "p1"}
    assert len(router.scaler_.mean) == len(FEATURES)
    assert isinstance(router.thresholds_, Thresholds)
    report = router.fit_report_
    assert isinstance(report, FitReport)
    assert report.policy == "router"
    assert report.n_tasks == 300
    assert report.n_episodes == 1200
    assert (report.n_clean, report.n_nonclean) == (300, 900)
    assert report.n_points == train["decision_points"].height
    assert report.n_ignored_points == 0
    assert report.auc_err > 0.75
    assert report.auc_p0 > 0.6
    assert report.auc_p1 > 0.6
    assert (report.alpha, report.beta, report.gamma) == tuple(router.thresholds_)
    assert report.oof_clean_harm_rate <= router.eps
    assert report.oof_gain > 0
    assert report.oof_intervention_rate == report.interventions / report.n_episodes
    assert report.rescue > report.harm
    assert report.clean_harm == round(report.oof_clean_harm_rate * report.n_clean)
    assert "router fit report" in report._repr_html_()
    with pytest.raises(AttributeError):
        report.alpha = 0.0  # frozen


def test_init_stores_parameters_only():
    router = Router(C=1.0, delays=(1, 2))
    assert router.get_params()["C"] == 1.0
    assert not any(name.endswith("_") for name in vars(router))
    assert repr(router).startswith("Router(C=1.0, lam=2.0, eps=0.02, delays=(1, 2)")


def test_same_seed_same_thresholds_and_decisions(router, train, test_set):
    again = Router().fit(train["decision_points"], train["forks"], FEATURES)
    assert again.thresholds_ == router.thresholds_
    assert again.models_ == router.models_
    assert (
        again.decide(test_set["decision_points"])
        .collect()
        .equals(router.decide(test_set["decision_points"]).collect())
    )


def test_fit_does_not_depend_on_row_order_or_input_kind(router, train, frame_kind):
    points = train["decision_points"].sample(fraction=1.0, shuffle=True, seed=3)
    forks = train["forks"].sample(fraction=1.0, shuffle=True, seed=4)
    shuffled = Router().fit(frame_kind(points), frame_kind(forks), FEATURES)
    assert shuffled.thresholds_ == router.thresholds_
    assert shuffled.fit_report_ == router.fit_report_


def test_fit_does_not_mutate_inputs(train):
    points = train["decision_points"].clone()
    Router(folds=2).fit(points, train["forks"], FEATURES[:3])
    assert points.equals(train["decision_points"])


def test_decisions_are_one_per_episode_at_candidate_delays(router, test_set, frame_kind):
    decided = router.decide(frame_kind(test_set["decision_points"]))
    assert isinstance(decided, pl.LazyFrame)
    frame = decided.collect()
    assert frame.columns == ["task_id", "condition", "delay"]
    assert frame.height == 1200
    assert frame.select(pl.struct(KEYS).is_unique().all()).item()
    assert set(frame["delay"].drop_nulls().unique().to_list()) <= {1, 2, 4}


def test_decide_ignores_extra_columns_and_other_delays(router, test_set):
    points = test_set["decision_points"]
    extra = pl.concat(
        [points, points.filter(pl.col("delay") == 1).with_columns(delay=pl.lit(3, pl.Int64))]
    ).with_columns(note=pl.lit("x"))
    assert router.decide(extra).collect().equals(router.decide(points).collect())


def test_score_columns(router, test_set):
    scores = router.score(test_set["decision_points"]).collect()
    assert scores.columns == [
        "task_id",
        "condition",
        "delay",
        "p_err",
        "p0",
        "p1",
        "s_rescue",
        "s_harm",
        "utility",
    ]
    check = scores.select(
        (pl.col("utility") - (pl.col("s_rescue") - 2.0 * pl.col("s_harm"))).abs().max()
    )
    assert check.item() < 1e-12


def test_decide_before_fit_raises():
    message = (
        r"this Router is not fitted yet; call `fit\(decision_points, forks, features=\[...\]\)` "
        r"or load a rule with `Router.from_json` before `decide`."
    )
    with pytest.raises(NotFittedError, match=message):
        Router().decide(pl.DataFrame({"task_id": ["t"], "condition": ["c"], "delay": [1]}))
    with pytest.raises(NotFittedError, match="before `score`"):
        AnomalyRouter().score(pl.DataFrame())
    with pytest.raises(NotFittedError, match="before `to_rule`"):
        Router().to_json("never-written.json")
    with pytest.raises(NotFittedError, match=r"before `RateMatchedAnomaly\.matching`"):
        RateMatchedAnomaly.matching(Router())


def test_pair_by_keys_are_episode_keys(train):
    points = pl.concat([train["decision_points"].with_columns(model=pl.lit(m)) for m in ("a", "b")])
    forks = pl.concat([train["forks"].with_columns(model=pl.lit(m)) for m in ("a", "b")])
    fitted = Router(pair_by=("model",), folds=3).fit(points, forks, FEATURES)
    assert fitted.fit_report_.n_episodes == 2400
    decided = fitted.decide(points).collect()
    assert decided.columns == ["task_id", "condition", "model", "delay"]
    assert decided.height == 2400


def test_carried_forward_points_are_labelled():
    points, forks = tiny_tables()
    # Task t0 ended before delay 1 on its clean episode: no refresh row, carried forward.
    forks = forks.filter(
        ~(
            (pl.col("task_id") == "t0")
            & (pl.col("condition") == "clean")
            & (pl.col("method") == "refresh")
        )
    ).with_columns(
        perturb_action=pl.when(pl.col("method") == "none").then(5),
        end_action=pl.when(pl.col("method") == "none").then(
            pl.when((pl.col("task_id") == "t0") & (pl.col("condition") == "clean"))
            .then(6)
            .otherwise(20)
        ),
    )
    fitted = Router(folds=2, n_grid=5).fit(points, forks, ["x", "z"])
    assert fitted.fit_report_.n_points == points.height


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------


def test_nan_feature_is_an_error():
    points, forks = tiny_tables(x=[float("nan")] + [1.0] * 15)
    with pytest.raises(
        SchemaError,
        match=(
            r"^decision_points: feature `x` has 1 value that is null, NaN or infinite "
            r"\(task_id/condition/delay t0/clean/1\); features must be finite numbers. "
            r"Hint: impute or drop those decision points.$"
        ),
    ):
        Router(folds=2).fit(points, forks, ["x", "z"])


def test_infinite_and_null_features_are_errors():
    points, forks = tiny_tables(z=[math.inf, -math.inf] + [None] * 2 + [1.0, 2.0] * 6)
    with pytest.raises(
        SchemaError,
        match=(
            r"^decision_points: feature `z` has 4 values that are null, NaN or infinite "
            r"\(task_id/condition/delay t0/clean/1, t0/stale2/1, t1/clean/1, t1/stale2/1\)"
        ),
    ):
        Router(folds=2).fit(points, forks, ["x", "z"])


def test_nan_feature_at_decide_time_is_an_error(router, test_set):
    points = test_set["decision_points"].with_columns(
        progress=pl.when(pl.col("task_id") == "te000007")
        .then(float("nan"))
        .otherwise(pl.col("progress"))
    )
    with pytest.raises(SchemaError, match=r"feature `progress` has \d+ values? that"):
        router.decide(points.lazy())


def test_constant_feature_is_an_error():
    points, forks = tiny_tables(z=[0.5] * 16)
    with pytest.raises(
        SchemaError,
        match=(
            r"^decision_points: feature `z` is constant \(every training point has 0.5\); a "
            r"constant feature carries no signal and cannot be standardised. Hint: leave it out "
            r"of `features`.$"
        ),
    ):
        Router(folds=2).fit(points, forks, ["x", "z"])


def test_unknown_feature_names_are_an_error():
    points, forks = tiny_tables()
    with pytest.raises(
        ParameterError,
        match=(
            r"^parameter `features` names 2 unknown features \(speed, size\) that decision_points "
            r"does not have as columns; its numeric columns are: x, z.$"
        ),
    ):
        Router(folds=2).fit(points, forks, ["x", "speed", "size"])


@pytest.mark.parametrize(
    ("features", "error", "message"),
    [
        ([], ParameterError, r"parameter `features` is \[\]; give a list of feature columns"),
        ("x", ParameterError, r"parameter `features` is 'x'; give a list"),
        (["x", "x"], ParameterError, r"parameter `features` names x more than once."),
        (["x", "delay"], ParameterError, r"includes the key column `delay`; features must"),
        (["x", "label"], SchemaError, r"feature `label` has type String; features must be"),
    ],
)
def test_bad_feature_lists(features, error, message):
    points, forks = tiny_tables(label=["a"] * 16)
    with pytest.raises(error, match=message):
        Router(folds=2).fit(points, forks, features)


def test_missing_label_rows_are_an_error():
    points, forks = tiny_tables()
    forks = forks.filter(~((pl.col("task_id") == "t3") & (pl.col("method") == "refresh")))
    with pytest.raises(
        InputError,
        match=(
            r"^decision_points: 2 decision points have no paired `refresh` outcome in forks "
            r"\(task_id/condition/delay t3/clean/1, t3/stale2/1\); every candidate point needs its "
            r"`none` row and its `refresh` row at that delay \(or a carried-forward outcome\)."
        ),
    ):
        Router(folds=2).fit(points, forks, ["x", "z"])


def test_unpaired_refresh_rows_leave_points_unlabelled():
    points, forks = tiny_tables()
    forks = forks.filter(
        ~(
            (pl.col("task_id") == "t5")
            & (pl.col("condition") == "clean")
            & (pl.col("method") == "none")
        )
    )
    with pytest.raises(InputError, match=r"1 decision point has no paired `refresh` outcome"):
        Router(folds=2).fit(points, forks, ["x", "z"])


def test_training_data_needs_clean_and_non_clean_episodes():
    points, forks = tiny_tables()
    with pytest.raises(
        InputError,
        match=(r"^decision_points: the training data has no clean episodes \(clean label 'base'\)"),
    ):
        Router(folds=2, clean_label="base").fit(points, forks, ["x", "z"])


def test_single_class_labels_are_an_error():
    points, forks = tiny_tables()
    forks = forks.with_columns(success=pl.lit(True))
    with pytest.raises(
        InputError,
        match=(
            r"^decision_points: label `y0` is true on every training point; the `p0` model needs "
            r"both outcomes.$"
        ),
    ):
        Router(folds=2).fit(points, forks, ["x", "z"])


def test_more_folds_than_tasks_is_an_error():
    points, forks = tiny_tables()
    with pytest.raises(
        ParameterError,
        match=(
            r"^Router: parameter `folds` is 9 but the training data has 8 tasks; folds are grouped "
            r"by task, so use at most that many.$"
        ),
    ):
        Router(folds=9).fit(points, forks, ["x", "z"])


def test_no_point_at_a_candidate_delay_is_an_error():
    points, forks = tiny_tables()
    with pytest.raises(InputError, match=r"no decision point is at a candidate delay \(2, 4\)"):
        Router(folds=2, delays=(2, 4)).fit(points, forks, ["x", "z"])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"C": 0}, r"^Router: parameter `C` is 0; it must be a number > 0.$"),
        ({"lam": -1.0}, r"parameter `lam` is -1.0; it must be a number >= 0."),
        ({"eps": 1.5}, r"parameter `eps` is 1.5; it must be a fraction between 0 and 1."),
        ({"delays": (2, 1)}, r"parameter `delays` is \(2, 1\); it must be a non-empty, strictly"),
        ({"delays": ()}, r"parameter `delays` is \(\); it must be a non-empty"),
        ({"folds": 1}, r"parameter `folds` is 1; it must be an integer >= 2."),
        ({"seed": -1}, r"parameter `seed` is -1; it must be an integer >= 0."),
        ({"n_grid": 1}, r"parameter `n_grid` is 1; it must be an integer >= 2."),
        ({"clean_label": ""}, r"parameter `clean_label` is ''; it must be a non-empty string."),
    ],
)
def test_bad_parameters(params, message):
    points, forks = tiny_tables()
    with pytest.raises(ParameterError, match=message):
        Router(**params).fit(points, forks, ["x"])


def test_missing_scikit_learn_names_the_extra(monkeypatch):
    points, forks = tiny_tables()
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)
    with pytest.raises(
        MissingDependencyError,
        match=(
            r"^fitting a router needs scikit-learn, which is not installed; install it with "
            r"`pip install 'recoverylab\[router\]'`.$"
        ),
    ):
        Router(folds=2).fit(points, forks, ["x", "z"])


def test_importing_recoverylab_does_not_import_sklearn():
    code = (
        "import sys, recoverylab, recoverylab.router; "
        "print('sklearn' in sys.modules, 'scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# ------------------------------------------------------------------------------------------------
# baselines
# ------------------------------------------------------------------------------------------------


def test_never_decides_no_refresh(test_set, frame_kind):
    decided = Never().fit().decide(frame_kind(test_set["decision_points"])).collect()
    assert decided.height == 1200
    assert decided["delay"].null_count() == 1200


def test_anomaly_baseline_uses_alpha_only(router, train):
    anomaly = AnomalyRouter().fit(train["decision_points"], train["forks"], FEATURES)
    assert anomaly.thresholds_.beta is None
    assert anomaly.thresholds_.gamma is None
    assert set(anomaly.models_) == {"p_err"}
    assert anomaly.models_["p_err"] == router.models_["p_err"]  # same error model
    assert anomaly.fit_report_.auc_p0 is None
    assert anomaly.fit_report_.oof_clean_harm_rate <= anomaly.eps
    assert anomaly.fit_report_.grid_size[0] <= 201


def test_rate_matched_baseline_matches_the_router_rate(router, train):
    matched = RateMatchedAnomaly.matching(router).fit(
        train["decision_points"], train["forks"], FEATURES
    )
    report = matched.fit_report_
    assert report.target_rate == router.fit_report_.oof_intervention_rate
    assert abs(report.oof_intervention_rate - report.target_rate) < 0.02
    assert report.oof_clean_harm_rate <= matched.eps
    assert matched.get_params()["folds"] == router.folds


def test_never_refresh_when_nothing_gains():
    points, forks = tiny_tables()
    # The refresh never rescues and harms the odd tasks: no rule can gain.
    none = forks.filter(method="none").select(*KEYS, y0="success")
    forks = (
        forks.join(none, on=KEYS)
        .with_columns(
            success=pl.when(pl.col("method") == "none")
            .then(pl.col("success"))
            .otherwise(pl.col("y0") & pl.col("task_id").is_in(["t0", "t2", "t4", "t6"]))
        )
        .drop("y0")
    )
    fitted = Router(folds=2, eps=0.0).fit(points, forks, ["x", "z"])
    assert fitted.thresholds_ == Thresholds(NEVER, NEVER, NEVER)
    assert fitted.fit_report_.never
    assert fitted.fit_report_.interventions == 0
    assert fitted.decide(points).collect()["delay"].null_count() == 8 * 2


# ------------------------------------------------------------------------------------------------
# export
# ------------------------------------------------------------------------------------------------


def test_json_round_trip(router, test_set, tmp_path):
    path = router.to_json(tmp_path / "rule.json")
    rule = json.loads(path.read_text())
    assert rule["format"] == "recoverylab.router"
    assert rule["version"] == 1
    assert rule["policy"] == "router"
    assert rule["features"] == FEATURES
    assert rule["delays"] == [1, 2, 4]
    assert set(rule["models"]) == {"p_err", "p0", "p1"}
    assert len(rule["models"]["p1"]["coef"]) == len(FEATURES)
    assert rule["thresholds"] == dict(
        zip(["alpha", "beta", "gamma"], router.thresholds_, strict=True)
    )
    assert len(rule["train_tasks"]) == 300
    loaded = Router.from_json(path)
    assert loaded.thresholds_ == router.thresholds_
    assert loaded.models_ == router.models_
    assert loaded.fit_report_ == router.fit_report_
    assert loaded.get_params() == router.get_params()
    assert (
        loaded.decide(test_set["decision_points"])
        .collect()
        .equals(router.decide(test_set["decision_points"]).collect())
    )
    assert "train_tasks" not in router.to_rule(include_tasks=False)


def test_apply_rule_equals_decide_on_10000_points(router, tmp_path):
    points = synth.generate("decision_points", 900, seed=9, prefix="p")["decision_points"]
    points = points.head(10_000)
    assert points.height == 10_000
    rule = json.loads(router.to_json(tmp_path / "rule.json").read_text())
    decided = router.decide(points).collect()
    grouped = points.group_by(KEYS).agg(pl.col("delay"), *(pl.col(f) for f in FEATURES))
    harness = {}
    for row in grouped.iter_rows(named=True):  # the harness side: one episode at a time
        by_delay = {delay: {f: row[f][i] for f in FEATURES} for i, delay in enumerate(row["delay"])}
        harness[(row["task_id"], row["condition"])] = apply_rule(rule, by_delay)
    expected = {(t, c): d for t, c, d in decided.iter_rows()}
    assert harness == expected
    assert sum(d is not None for d in harness.values()) > 100


def test_baselines_export_and_load_by_kind(router, train, tmp_path):
    anomaly = AnomalyRouter().fit(train["decision_points"], train["forks"], FEATURES)
    path = anomaly.to_json(tmp_path / "anomaly.json")
    loaded = load_rule(path)
    assert type(loaded) is AnomalyRouter
    assert loaded.thresholds_ == anomaly.thresholds_
    assert type(load_rule(router.to_json(tmp_path / "r.json"))) is Router
    with pytest.raises(
        SourceError,
        match=(
            r"the rule is a 'anomaly' policy, not 'router'; load it with "
            r"`recoverylab.router.load_rule`."
        ),
    ):
        Router.from_json(path)


def test_bad_rule_files(tmp_path):
    with pytest.raises(SourceError, match=r"cannot read the rule `.*absent.json`"):
        load_rule(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SourceError, match=r"`.*bad.json` is not a JSON rule \(Expecting"):
        load_rule(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(SourceError, match=r"is not a JSON rule \(it holds a list\)"):
        load_rule(tmp_path / "list.json")
    (tmp_path / "other.json").write_text('{"format": "x", "version": 1}')
    with pytest.raises(SourceError, match=r"not a recoverylab.router rule of version 1"):
        load_rule(tmp_path / "other.json")


# ------------------------------------------------------------------------------------------------
# compare
# ------------------------------------------------------------------------------------------------


def test_compare_columns_and_rows(router, test_set, frame_kind):
    table = compare(
        {"cir": router, "never": Never()},
        frame_kind(test_set["decision_points"]),
        frame_kind(test_set["forks"]),
        n_resamples=500,
    )
    assert tuple(table.columns) == (
        "policy",
        "reference",
        "condition",
        "n",
        "base_rate",
        "policy_rate",
        "gain",
        "rescue",
        "harm",
        "interventions",
        "intervention_rate",
        "clean_touch_rate",
        "ci_low",
        "ci_high",
        "p_value",
        "ci_method",
        "sparse",
        "test",
        "ci_inverts_test",
        "p_sign_flip",
        *paired.POLICY_RATE_COLUMNS,
    )
    assert table["policy"].to_list() == ["cir"] * 5 + ["never"] * 5
    # the rates' intervals belong to the policies' own rows, like the rates
    own = table.filter(pl.col("reference") == "never")
    assert own["intervention_rate_ci_method"].null_count() == 0
    assert table.filter(pl.col("condition").is_null())["n"].to_list() == [1200, 1200]
    never = table.filter(policy="never")
    assert never["gain"].to_list() == [0.0] * 5


def test_compare_margin_equals_difference_of_gains(router, train, test_set):
    anomaly = AnomalyRouter().fit(train["decision_points"], train["forks"], FEATURES)
    table = compare(
        [router, anomaly], test_set["decision_points"], test_set["forks"], n_resamples=500
    )
    margin = table.filter(policy="router", reference="anomaly")
    assert margin.height == 5
    own = table.filter(reference="never").select("policy", "condition", "gain", "policy_rate")
    r = own.filter(policy="router")
    a = own.filter(policy="anomaly")
    np.testing.assert_allclose(margin["gain"], r["gain"] - a["gain"], atol=1e-12)
    np.testing.assert_allclose(margin["policy_rate"], r["policy_rate"])
    np.testing.assert_allclose(margin["base_rate"], a["policy_rate"])
    assert margin["interventions"].null_count() == 5
    assert (margin["ci_low"] <= margin["gain"]).all()


def test_compare_warns_when_tasks_overlap(router, train):
    with pytest.warns(
        RecoveryLabWarning,
        match=(
            r"compare: 300 of the evaluated tasks were also used to fit policy 'router' "
            r"\(task_id tr000000, tr000001, tr000002, tr000003, tr000004 and 295 more\); its "
            r"results are not a held-out evaluation."
        ),
    ):
        compare([router], train["decision_points"], train["forks"], n_resamples=200)


def test_compare_errors(router, test_set):
    points, forks = test_set["decision_points"], test_set["forks"]
    with pytest.raises(ParameterError, match=r"parameter `policies` is empty"):
        compare([], points, forks)
    with pytest.raises(ParameterError, match=r"has two 'router' policies; pass a mapping"):
        compare([router, router], points, forks)
    with pytest.raises(ParameterError, match=r"the policies disagree on `pair_by`"):
        compare({"a": router, "b": Never(pair_by=("model",))}, points, forks)
    with pytest.raises(ParameterError, match=r"parameter `margins` has \('router', 'x'\)"):
        compare([router, Never()], points, forks, margins=[("router", "x")])
    with pytest.raises(ParameterError, match=r"'x' is a str, which has no `decide` method"):
        compare({"x": "router"}, points, forks)


# ------------------------------------------------------------------------------------------------
# acceptance (issue 4): planted signal, 2,000 held-out tasks
# ------------------------------------------------------------------------------------------------


def test_acceptance_on_planted_data():
    train = synth.generate("decision_points", 2000, seed=1, prefix="a")
    held_out = synth.generate("decision_points", 2000, seed=2, prefix="b")
    points, forks = train["decision_points"], train["forks"]
    router = Router().fit(points, forks, FEATURES)
    anomaly = AnomalyRouter().fit(points, forks, FEATURES)
    matched = RateMatchedAnomaly.matching(router).fit(points, forks, FEATURES)
    assert router.fit_report_.oof_clean_harm_rate <= router.eps
    table = compare(
        [router, anomaly, matched],
        held_out["decision_points"],
        held_out["forks"],
        n_resamples=2000,
    )
    overall = {
        row["policy"]: row
        for row in table.filter(pl.col("condition").is_null(), reference="never").iter_rows(
            named=True
        )
    }
    assert overall["router"]["n"] == held_out["forks"].filter(method="none").height
    assert overall["router"]["gain"] > 0
    assert overall["router"]["ci_low"] > 0
    assert overall["router"]["p_value"] < 0.001
    assert overall["router"]["rescue"] > overall["anomaly"]["rescue"]
    assert overall["router"]["gain"] > overall["anomaly"]["gain"]
    margin = table.filter(pl.col("condition").is_null(), policy="router", reference="anomaly").row(
        0, named=True
    )
    assert margin["ci_low"] > 0


def test_categorical_keys(router, train, test_set):
    categorical = pl.Categorical()
    points = pl.concat(
        [train["decision_points"].with_columns(model=pl.lit(m)) for m in ("a", "b")]
    ).with_columns(pl.col("condition", "model").cast(categorical))
    forks = pl.concat([train["forks"].with_columns(model=pl.lit(m)) for m in ("a", "b")])
    forks = forks.with_columns(pl.col("task_id", "model").cast(categorical))
    fitted = Router(pair_by=("model",), folds=3).fit(points, forks, FEATURES)
    decided = fitted.decide(points).collect()
    assert decided.schema["model"] == pl.String
    assert decided.schema["condition"] == pl.String
    plain = router.decide(test_set["decision_points"]).collect()
    as_categorical = router.decide(
        test_set["decision_points"].with_columns(pl.col("task_id").cast(categorical))
    ).collect()
    assert as_categorical.equals(plain)
    with pytest.warns(RecoveryLabWarning):
        table = compare(
            [fitted, Never(pair_by=("model",))],
            points,
            forks,
            margins=[("router", "never")],
            n_resamples=200,
        )
    margin = table.filter(pl.col("condition").is_null(), policy="router")
    assert margin["gain"].n_unique() == 1  # the margin over never is the gain


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), split=st.integers(1, 4771))
def test_decide_does_not_depend_on_row_order_or_file_split(router, tmp_path_factory, seed, split):
    points = synth.generate("decision_points", 400, seed=8, prefix="h")["decision_points"]
    expected = router.decide(points).collect()
    shuffled = points.sample(fraction=1.0, shuffle=True, seed=seed)
    split = min(split, shuffled.height - 1)
    folder = tmp_path_factory.mktemp("split")
    shuffled.head(split).write_parquet(folder / "a.parquet")
    shuffled.tail(shuffled.height - split).write_parquet(folder / "b.parquet")
    from_files = router.decide([folder / "a.parquet", folder / "b.parquet"]).collect()
    assert from_files.equals(expected)


def test_compare_alternative_and_adjust(router, test_set):
    from recoverylab import stats

    table = compare(
        [router, Never()],
        test_set["decision_points"],
        test_set["forks"],
        n_resamples=200,
        alternative="greater",
        adjust="bh",
    )
    assert table.schema["ci_method"] == pl.String
    assert table.schema["sparse"] == pl.Boolean
    assert table["p_adjusted"].to_list() == pytest.approx(
        stats.adjust_p_values(table["p_value"].to_numpy(), "bh").tolist(), nan_ok=True
    )
    assert (table["ci_high"] == 1.0).all()
    with pytest.raises(ParameterError, match=r"parameter `adjust` is 'x'"):
        compare([router, Never()], test_set["decision_points"], test_set["forks"], adjust="x")
