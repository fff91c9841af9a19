"""Anytime-valid monitoring: confidence sequences per cell, coverage, arrival order, CLI."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import paired
from recoverylab._errors import ParameterError
from recoverylab.stats import sequences

SAMPLES = Path(__file__).resolve().parents[1] / "data_samples" / "paired"
POLICY = SAMPLES / "gate_policy.toml"


def random_forks(
    n_tasks: int, *, seed: int, p10: float = 0.3, p01: float = 0.1, seeds: int = 1
) -> pl.DataFrame:
    """Forks of ``n_tasks`` tasks in two conditions, ``seeds`` pairs each, with a finish time."""
    rng = np.random.default_rng(seed)
    rows = []
    finish = rng.permutation(n_tasks)
    for i in range(n_tasks):
        for condition in ("clean", "stale2"):
            for s in range(seeds):
                u = rng.random()
                y0, y1 = (
                    (False, True)
                    if u < p10
                    else (True, False)
                    if u < p10 + p01
                    else ((True, True) if u < 0.7 else (False, False))
                )
                base = {"task_id": f"t{i:04}", "condition": condition, "seed": str(s)}
                base["finished"] = int(finish[i])
                rows.append({**base, "method": "none", "delay": None, "success": y0})
                rows.append({**base, "method": "refresh", "delay": 1, "success": y1})
    return pl.DataFrame(rows, schema_overrides={"delay": pl.Int64})


# --- the sequences ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p10", "p01", "pairs"),
    [(0.3, 0.1, 1), (0.02, 0.01, 1), (0.25, 0.15, 3)],
    ids=["common", "rare", "clustered"],
)
def test_time_uniform_coverage_when_peeking_after_every_task(
    p10: float, p01: float, pairs: int
) -> None:
    """P(the true effect leaves the sequence at some task) <= alpha (fast property check)."""
    rng = np.random.default_rng(7)
    replicates, tasks, alpha = 400, 150, 0.05
    u = rng.random((replicates, tasks, pairs))
    x = ((u < p10).astype(np.int64) - ((u >= p10) & (u < p10 + p01))).sum(axis=-1)
    m = np.full_like(x, pairs)
    theta = np.full(replicates, p10 - p01)
    missed = np.zeros(replicates, dtype=bool)
    for side in ("greater", "less"):
        log_k = sequences.capital(x, m, theta, side=side, max_pairs=pairs)
        missed |= sequences.first_crossing(log_k, alpha / 2) > 0
    # binomial noise of 400 replicates at 5 %: a 3-sigma slack
    assert missed.mean() <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / replicates)


def test_peeking_at_a_fixed_n_test_inflates_its_error() -> None:
    """The contrast the sequences exist for: a z-test looked at after every task."""
    rng = np.random.default_rng(11)
    u = rng.random((400, 150))
    x = (u < 0.2).astype(float) - (u >= 0.8)  # effect 0, 40 % discordant
    z = np.cumsum(x, axis=1) / np.sqrt(np.cumsum(x**2, axis=1).clip(min=1))
    peeked = (np.abs(z[:, 9:]) > 1.96).any(axis=1).mean()
    log_k = np.maximum(
        sequences.capital(x, np.ones_like(x), np.zeros(400), side="greater"),
        sequences.capital(x, np.ones_like(x), np.zeros(400), side="less"),
    )
    sequential = (sequences.first_crossing(log_k, 0.025) > 0).mean()
    assert peeked > 0.12  # several times alpha
    assert sequential <= 0.05


def test_sequence_bounds_invert_the_capital() -> None:
    rng = np.random.default_rng(5)
    x = rng.choice([-1, 0, 1], p=[0.1, 0.6, 0.3], size=120)
    m = np.ones(120)
    cs = sequences.confidence_sequence(x, m, alpha=0.025)
    assert (np.diff(cs.low) >= -1e-12).all()  # a running intersection only narrows
    assert (np.diff(cs.high) <= 1e-12).all()
    assert (cs.low <= cs.high).all()
    for t in (20, 60, 119):
        for theta in np.linspace(-0.5, 0.6, 12):
            plus = sequences.capital(x[: t + 1], m[: t + 1], theta, side="greater")
            if plus.max() < math.log(1 / 0.025):  # not rejected: inside the lower bound
                assert cs.low[t] <= theta + 1e-12


def test_capital_rejects_bad_input() -> None:
    with pytest.raises(ParameterError, match="`side`"):
        sequences.capital(np.ones(3), np.ones(3), 0.0, side="both")
    with pytest.raises(ParameterError, match="more than `max_pairs`"):
        sequences.capital(np.ones(3), np.full(3, 2.0), 0.0, side="less")
    with pytest.raises(ParameterError, match="must lie in"):
        sequences.capital(np.full(3, 2.0), np.ones(3), 0.0, side="less")
    with pytest.raises(ParameterError, match="shapes"):
        sequences.capital(np.ones(3), np.ones(4), 0.0, side="less")
    with pytest.raises(ParameterError, match="`alpha`"):
        sequences.confidence_sequence(np.ones(3), np.ones(3), alpha=1.5)
    with pytest.raises(ParameterError, match="shapes"):  # was numpy's broadcast ValueError
        sequences.confidence_sequence(np.ones(3), np.ones(4), alpha=0.05)
    with pytest.raises(ParameterError, match="`alternative`"):
        sequences.confidence_sequence(np.ones(3), np.ones(3), alpha=0.05, alternative="up")


@pytest.mark.parametrize("seed", range(4))
def test_a_one_sided_sequence_is_that_side_of_the_two_sided_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 3, size=200).astype(float)
    x = np.minimum(rng.binomial(m.astype(int), 0.4), m) - rng.binomial(m.astype(int), 0.2)
    x = np.clip(x, -m, m)
    options = {"alpha": 0.05, "lo": -1.0, "hi": 1.0, "max_pairs": 2.0}
    both = sequences.confidence_sequence(x, m, **options)
    lower = sequences.confidence_sequence(x, m, alternative="greater", **options)
    upper = sequences.confidence_sequence(x, m, alternative="less", **options)
    assert lower.low.tolist() == both.low.tolist()
    assert upper.high.tolist() == both.high.tolist()
    assert (lower.high == 1.0).all()
    assert (upper.low == -1.0).all()


# --- the verb ---------------------------------------------------------------------------------


def test_monitor_follows_each_cell() -> None:
    forks = random_forks(80, seed=1)
    result = paired.monitor(forks, order="finished")
    summary = result.summary
    assert summary.height == 2
    assert summary["n_tasks"].to_list() == [80, 80]
    fixed = paired.summarize(forks, n_resamples=100)
    assert summary["effect"].to_list() == pytest.approx(fixed["effect"].to_list())
    seq = result.sequences
    assert seq.group_by("condition").len().sort("condition")["len"].to_list() == [80, 80]
    # p-value and interval agree: zero is outside exactly when p < 1 - confidence
    outside = (seq["ci_low"] > 0) | (seq["ci_high"] < 0)
    assert (outside == (seq["p_value"] < 0.05)).all()
    # the anytime p-value only falls
    rises = seq.group_by("condition").agg(pl.col("p_value").diff().max())["p_value"]
    assert (rises <= 1e-12).all()


def test_monitor_with_several_pairs_per_task_estimates_the_pooled_effect() -> None:
    forks = random_forks(60, seed=2, seeds=3)
    result = paired.monitor(forks, pair_by="seed", order="finished")
    fixed = paired.summarize(forks, pair_by="seed", n_resamples=100)
    assert result.summary["n"].to_list() == fixed["n"].to_list() == [180, 180]
    assert result.summary["effect"].to_list() == pytest.approx(fixed["effect"].to_list())
    with pytest.raises(ParameterError, match="more than `max_pairs`"):
        paired.monitor(forks, pair_by="seed", max_pairs=2)


@pytest.mark.parametrize("seed", range(4))
def test_results_depend_on_the_arrival_order_not_on_the_files(seed: int, tmp_path: Path) -> None:
    forks = random_forks(40, seed=10 + seed)
    whole = paired.monitor(forks, order="finished")
    rng = np.random.default_rng(seed)
    shuffled = forks.sample(fraction=1.0, shuffle=True, seed=seed)
    pieces = np.array_split(np.arange(shuffled.height), rng.integers(2, 6))
    for i, rows in enumerate(pieces):
        shuffled[rows].write_parquet(tmp_path / f"part-{i}.parquet")
    split = paired.monitor(tmp_path, order="finished")
    assert_frame_equal(whole.sequences, split.sequences)
    # without an order column, the arrival is file then row order: it may differ
    by_file = paired.monitor(tmp_path)
    assert by_file.summary["effect"].to_list() == pytest.approx(whole.summary["effect"].to_list())


def test_default_arrival_is_file_then_row_order(tmp_path: Path) -> None:
    forks = random_forks(30, seed=3)
    first = forks.filter(pl.col("task_id") >= "t0015")
    second = forks.filter(pl.col("task_id") < "t0015")
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    first.write_parquet(paths[0])
    second.write_parquet(paths[1])
    seq = paired.monitor([str(p) for p in paths]).sequences.filter(pl.col("condition") == "clean")
    assert seq["task_id"].to_list()[:15] == [f"t{i:04}" for i in range(15, 30)]
    assert seq["task"].to_list() == list(range(1, 31))


def test_monitor_decides_the_policy_claims() -> None:
    forks = random_forks(120, seed=4, p10=0.4, p01=0.02)
    policy = {
        "adjust": "holm",
        "claim": [{"name": "helps", "kind": "superiority", "margin": 0.0, "condition": "stale2"}],
    }
    result = paired.monitor(forks, order="finished", policy=policy)
    assert result.claims is not None
    row = result.claims.claims.row(0, named=True)
    assert row["verdict"] == "PASS"
    # the claim is decided at the task where its sequential p-value first falls below alpha
    seq = result.sequences.filter(pl.col("condition") == "stale2")
    assert 1 <= row["decided_at"] <= seq["task"].max()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": 1.2}, "`confidence`"),
        ({"max_pairs": 0}, "`max_pairs`"),
        ({"order": "finish_time"}, "no such column"),
        ({"by": "model"}, "`model`"),
    ],
)
def test_monitor_rejects_bad_parameters(kwargs: dict, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        paired.monitor(random_forks(5, seed=0), **kwargs)


def test_order_column_with_nulls_is_an_error() -> None:
    forks = random_forks(5, seed=0).with_columns(
        pl.when(pl.col("task_id") == "t0002")
        .then(None)
        .otherwise(pl.col("finished"))
        .alias("finished")
    )
    with pytest.raises(ParameterError, match="null on every row of task t0002"):
        paired.monitor(forks, order="finished")


# --- command line -----------------------------------------------------------------------------


def test_monitor_command(cli: Callable, tmp_path: Path) -> None:
    forks = tmp_path / "forks.parquet"
    random_forks(60, seed=5).write_parquet(forks)
    out = tmp_path / "sequences.parquet"
    run = cli("monitor", forks, "--order", "finished", "--out", out, "--quiet")
    assert run.code == 0, run.err
    assert "confidence sequences" in run.out
    assert pl.read_parquet(out).height == 120
    policy = tmp_path / "p.toml"
    policy.write_text('[[claim]]\nkind = "superiority"\nmargin = 0.0\ncondition = "stale2"\n')
    gated = cli("monitor", forks, "--policy", policy, "--quiet")
    assert gated.code in (0, 3)
    assert "gate:" in gated.out
    as_json = cli("monitor", forks, "--policy", policy, "--format", "json", "--quiet")
    body = json.loads(as_json.out)
    assert len(body["cells"]) == 2
    assert body["gate"]["exit_status"] == as_json.code
    bad = cli("monitor", forks, "--order", "nope", "--quiet")
    assert bad.code == 2
    assert bad.err.strip().startswith("recoverylab monitor: error: parameter `order`")


def test_growing_directory_of_forks(cli: Callable, tmp_path: Path) -> None:
    """The README's loop: batches land in a directory; the sequential gate runs after each."""
    forks = random_forks(90, seed=6, p10=0.45, p01=0.02).sort("finished")
    batches = tmp_path / "forks"
    batches.mkdir()
    policy = tmp_path / "p.toml"
    policy.write_text('[[claim]]\nkind = "superiority"\nmargin = 0.0\ncondition = "stale2"\n')
    codes = []
    tasks = forks["task_id"].unique(maintain_order=True).to_list()
    for start in range(0, 90, 30):
        batch = forks.filter(pl.col("task_id").is_in(tasks[start : start + 30]))
        batch.write_parquet(batches / f"batch-{start:03}.parquet")
        run = cli("gate", policy, batches, "--sequential", "--order", "finished", "--quiet")
        codes.append(run.code)
    assert codes[-1] == 0
    assert set(codes) <= {0, 3}


def _bounds_on_the_whole_grid(x, m, alpha, lo, max_pairs, grid_points):
    """The reference: every grid θ's capital path at once, the ends of what is kept."""
    grid = np.linspace(lo, 1.0, grid_points)
    step = grid[1] - grid[0]
    threshold = math.log(1 / alpha)
    ends = []
    for side in ("greater", "less"):
        kept = np.array(
            [
                np.maximum.accumulate(
                    sequences.capital(x, m, theta, side=side, lo=lo, max_pairs=max_pairs)
                )
                < threshold
                for theta in grid
            ]
        )
        ends.append(kept)
    plus, minus = ends
    low = np.where(plus.any(0), np.maximum(grid[plus.argmax(0)] - step, lo), 1.0)
    high = np.where(minus.any(0), np.minimum(grid[::-1][minus[::-1].argmax(0)] + step, 1.0), lo)
    return low, high


@settings(max_examples=25, deadline=None)
@given(
    tasks=st.integers(1, 60),
    max_pairs=st.integers(1, 3),
    rate=st.booleans(),
    grid_points=st.integers(3, 41),
    block_values=st.sampled_from([1, 50, 1 << 21]),
    seed=st.integers(0, 2**32 - 1),
)
def test_sequence_bounds_equal_the_whole_grid_reference(
    tasks, max_pairs, rate, grid_points, block_values, seed
) -> None:
    rng = np.random.default_rng(seed)
    m = rng.integers(0, max_pairs + 1, size=tasks)
    x = rng.binomial(m, rng.random())
    if not rate:
        x = x - rng.binomial(m - x, rng.random())
    lo = 0.0 if rate else -1.0
    alpha = float(rng.uniform(0.01, 0.3))
    low, high = _bounds_on_the_whole_grid(x, m, alpha, lo, max_pairs, grid_points)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sequences, "_BLOCK_VALUES", block_values)
        cs = sequences.confidence_sequence(
            x, m, alpha=alpha, lo=lo, max_pairs=max_pairs, grid_points=grid_points
        )
    assert cs.low.tolist() == low.tolist()
    assert cs.high.tolist() == high.tolist()
