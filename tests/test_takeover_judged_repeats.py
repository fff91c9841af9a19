"""Tests of ``takeover.reliability_judged`` (issue 40): judged pass@k and pass^k by PPI++."""

from __future__ import annotations

import math
import re
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import engines, stats, synth, takeover
from recoverylab._errors import InputError, ParameterError, RecoveryLabWarning, SchemaError

#: Hand-made units of three attempts: (copies, judge verdicts, gold labels or None).
#: pass@2 of three attempts with c passes: 0, 2/3, 1, 1; pass^2: 0, 0, 1/3, 1.
HAND_UNITS = (
    (12, (1, 0, 0), (1, 1, 0)),  # pass@2 judge 2/3, gold 1; pass^2 judge 0, gold 1/3
    (8, (0, 0, 0), (0, 0, 0)),  # 0 and 0 for both
    (6, (1, 1, 1), (0, 0, 0)),  # judge 1, gold 0 for both
    (4, (1, 1, 1), (1, 1, 1)),  # 1 and 1 for both
    (7, (0, 1, 0), None),  # unlabelled: pass@2 2/3, pass^2 0
    (3, (1, 1, 1), None),  # unlabelled: 1 and 1
)


def hand_tables(units: tuple = HAND_UNITS) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One workflow per unit (one state, agent ``a``, depth 0), three attempts each."""
    states, attempts = [], []
    i = 0
    for copies, judge, gold in units:
        for _ in range(copies):
            states.append(
                {
                    "state_id": f"s{i:02d}",
                    "workflow_id": f"w{i:02d}",
                    "root_cause_id": f"r{i:02d}",
                    "depth": 0,
                    "replay_ok": True,
                    "expected_ok": True,
                }
            )
            for repeat, verdict in enumerate(judge):
                attempts.append(
                    {
                        "state_id": f"s{i:02d}",
                        "agent": "a",
                        "repeat": repeat,
                        "aware": False,
                        "root_cause_fixed": False,
                        "derived_fixed": False,
                        "passed": bool(verdict),
                        "judge": verdict,
                        "gold": None if gold is None else gold[repeat],
                    }
                )
            i += 1
    schema = {"judge": pl.Int8, "gold": pl.Int8}
    return pl.DataFrame(states), pl.DataFrame(attempts, schema_overrides=schema)


def test_pass_at_2_and_pass_hat_2_by_hand() -> None:
    states, attempts = hand_tables()
    # labelled (30): gold pass@2 sum 12 + 4 = 16, judge 12·2/3 + 6 + 4 = 18; unlabelled (10):
    # judge 7·2/3 + 3 = 23/3. pass^2: gold 12/3 + 4 = 8, judge 6 + 4 = 10; unlabelled 3.
    expected = {
        ("pass@k", 1.0): 16 / 30 - 18 / 30 + (23 / 3) / 10,
        ("pass@k", 0.5): 16 / 30 - 0.5 * 18 / 30 + 0.5 * (23 / 3) / 10,
        ("pass@k", 0.0): 16 / 30,
        ("pass^k", 1.0): 8 / 30 - 10 / 30 + 3 / 10,
        ("pass^k", 0.5): 8 / 30 - 0.5 * 10 / 30 + 0.5 * 3 / 10,
        ("pass^k", 0.0): 8 / 30,
    }
    for lam in (0.0, 0.5, 1.0):
        out = takeover.reliability_judged(
            states, attempts, judge="judge", gold="gold", k=2, lam=lam
        )
        assert out.select("agent", "depth", "metric", "k").rows() == [
            ("a", 0, "pass@k", 2),
            ("a", 0, "pass^k", 2),
        ]
        for row in out.iter_rows(named=True):
            assert row["estimate"] == pytest.approx(expected[row["metric"], lam], abs=1e-12)
            assert row["lam"] == lam
            assert (row["n"], row["n_labelled"], row["n_clusters"]) == (40, 30, 40)
            assert row["std_error"] is not None  # PPI++, not the gold-only fallback
    judge_only = {"pass@k": (18 + 23 / 3) / 40, "pass^k": (10 + 3) / 40}
    gold_only = {"pass@k": 16 / 30, "pass^k": 8 / 30}
    for row in out.iter_rows(named=True):
        assert row["judge_estimate"] == pytest.approx(judge_only[row["metric"]], abs=1e-12)
        assert row["gold_estimate"] == pytest.approx(gold_only[row["metric"]], abs=1e-12)
        assert row["labelled_share"] == 0.75


def unit_table(states: pl.DataFrame, attempts: pl.DataFrame, k: int) -> pl.DataFrame:
    """Brute force: per scored unit, n, judge and gold passes, pass@k and pass^k by math.comb."""
    ok = states.filter(pl.col("replay_ok") & pl.col("expected_ok")).select(
        "state_id", "workflow_id"
    )
    units = (
        attempts.join(ok, on="state_id")
        .group_by("state_id", "agent", "workflow_id")
        .agg(
            pl.len().alias("n"),
            pl.col("judge").cast(pl.Int64).sum().alias("cf"),
            pl.col("gold").cast(pl.Int64).sum().alias("cy"),
            pl.col("gold").is_null().any().alias("unlabelled"),
        )
    )
    rows = units.rows(named=True)

    def at_k(n: int, c: int) -> float:
        return 1.0 - math.comb(n - c, k) / math.comb(n, k)

    def hat_k(n: int, c: int) -> float:
        return math.comb(c, k) / math.comb(n, k)

    return pl.DataFrame(
        {
            "agent": [r["agent"] for r in rows],
            "workflow_id": [r["workflow_id"] for r in rows],
            "labelled": [not r["unlabelled"] for r in rows],
            "f_at": [at_k(r["n"], r["cf"]) for r in rows],
            "y_at": [at_k(r["n"], r["cy"]) if not r["unlabelled"] else None for r in rows],
            "f_hat": [hat_k(r["n"], r["cf"]) for r in rows],
            "y_hat": [hat_k(r["n"], r["cy"]) if not r["unlabelled"] else None for r in rows],
        }
    )


def brute_ppi(units: pl.DataFrame, f: str, y: str, lam: float) -> tuple[float, float]:
    """Plain PPI with a fixed λ: the estimate and, for one unit per cluster, ppi_py's s.e."""
    labelled = units.filter(pl.col("labelled"))
    unlabelled = units.filter(~pl.col("labelled"))
    yl, fl = labelled[y].to_numpy(), labelled[f].to_numpy()
    fu = unlabelled[f].to_numpy()
    estimate = yl.mean() - lam * fl.mean() + lam * fu.mean()
    se = math.sqrt(np.var(yl - lam * fl) / yl.size + lam**2 * np.var(fu) / fu.size)
    return estimate, se


@pytest.fixture(scope="module")
def drawn() -> dict[str, pl.DataFrame]:
    """Synthetic takeover tables with a 0/1 judge (85 % right) and gold on half of the units."""
    found = synth.generate("takeover", 80, seed=7)
    attempts = found["attempts"]
    rng = np.random.default_rng(7)
    right = pl.Series(rng.random(attempts.height) < 0.85)
    keys = attempts.select("state_id", "agent").unique().sort("state_id", "agent")
    keys = keys.with_columns(__label=pl.Series(rng.random(keys.height) < 0.5))
    found["attempts"] = (
        attempts.join(keys, on=["state_id", "agent"])
        .with_columns(
            judge=pl.when(right).then(pl.col("passed")).otherwise(~pl.col("passed")).cast(pl.Int8),
            gold=pl.when(pl.col("__label")).then(pl.col("passed").cast(pl.Int8)),
        )
        .drop("__label")
    )
    return found


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_clustered_estimates_equal_a_brute_force_ppi(drawn: dict, lam: float) -> None:
    units = unit_table(drawn["states"], drawn["attempts"], k=2)
    out = takeover.reliability_judged(
        drawn["states"], drawn["attempts"], judge="judge", gold="gold", k=2, by="agent", lam=lam
    )
    assert out["std_error"].null_count() == 0  # no cell fell back to the gold-only interval
    for row in out.iter_rows(named=True):
        cell = units.filter(pl.col("agent") == row["agent"])
        f, y = ("f_at", "y_at") if row["metric"] == "pass@k" else ("f_hat", "y_hat")
        estimate, _ = brute_ppi(cell, f, y, lam)
        assert row["estimate"] == pytest.approx(estimate, abs=1e-12)
        assert row["judge_estimate"] == pytest.approx(cell[f].mean(), abs=1e-12)
        assert row["n"] == cell.height
        assert row["n_labelled"] == cell["labelled"].sum()
        assert row["n_clusters"] == cell["workflow_id"].n_unique()


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_one_unit_per_cluster_standard_error_is_ppi_pys(lam: float) -> None:
    states, attempts = hand_tables()
    units = unit_table(states, attempts, k=2)
    out = takeover.reliability_judged(
        states, attempts, judge="judge", gold="gold", k=2, lam=lam, ci_method="ppi++"
    )
    z = 1.959963984540054
    for row in out.iter_rows(named=True):
        f, y = ("f_at", "y_at") if row["metric"] == "pass@k" else ("f_hat", "y_hat")
        estimate, se = brute_ppi(units, f, y, lam)
        assert row["estimate"] == pytest.approx(estimate, abs=1e-12)
        assert row["std_error"] == pytest.approx(se, rel=1e-9)
        assert row["ci_low"] == pytest.approx(estimate - z * se, abs=1e-9)
        assert row["ci_high"] == pytest.approx(estimate + z * se, abs=1e-9)


def test_partly_labelled_units_count_as_unlabelled() -> None:
    # eight more labelled units than the hand table: 36 stay labelled, enough for PPI++
    states, attempts = hand_tables(((16, (0, 0, 0), (0, 0, 0)), *HAND_UNITS[:1], *HAND_UNITS[2:]))
    # two labelled units lose one gold label each: they become unlabelled
    cut = (pl.col("state_id").is_in(["s00", "s13"])) & (pl.col("repeat") == 1)
    partly = attempts.with_columns(pl.when(cut).then(None).otherwise(pl.col("gold")).alias("gold"))
    none = attempts.with_columns(
        pl.when(pl.col("state_id").is_in(["s00", "s13"]))
        .then(None)
        .otherwise(pl.col("gold"))
        .alias("gold")
    )
    message = (
        "attempts: 2 (state, agent) units have gold labels on some attempts only (s00/a, "
        "s13/a); a unit's gold pass@k and pass^k need a gold label on every attempt, so these "
        "count as unlabelled (their judge value is used, their gold labels are not). Hint: "
        "label every attempt of a unit, or none."
    )
    with pytest.warns(RecoveryLabWarning, match=re.escape(message)):
        got = takeover.reliability_judged(states, partly, judge="judge", gold="gold", k=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = takeover.reliability_judged(states, none, judge="judge", gold="gold", k=2)
    assert_frame_equal(got, expected)
    assert got["std_error"].null_count() == 0
    assert set(got["n_labelled"]) == {36}


def test_probabilities_enter_through_the_expected_passes() -> None:
    states, attempts = hand_tables()
    # a judge giving 0.5 on every attempt of the unlabelled units: Σf = 1.5 of 3
    soft = attempts.with_columns(
        pl.when(pl.col("gold").is_null()).then(0.5).otherwise(pl.col("judge")).alias("judge")
    )
    out = takeover.reliability_judged(states, soft, judge="judge", gold="gold", k=2, lam=1.0)
    # pass@2 at c = 1.5 of 3: 1 − (1.5/3)(0.5/2) = 0.875; pass^2: (1.5/3)(0.5/2) = 0.125
    unit = {"pass@k": 0.875, "pass^k": 0.125}
    labelled = {"pass@k": (16 - 18) / 30, "pass^k": (8 - 10) / 30}
    for row in out.iter_rows(named=True):
        assert row["estimate"] == pytest.approx(labelled[row["metric"]] + unit[row["metric"]])


def outcome(run: Callable[[], pl.DataFrame]) -> tuple[object, list[str]]:
    """The frame (or the error's type and message) and the warnings' messages of one run."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: object = run()
        except (InputError, ParameterError, SchemaError) as exc:
            result = (type(exc).__name__, str(exc))
    return result, sorted(str(w.message) for w in caught)


def same(a: tuple[object, list[str]], b: tuple[object, list[str]]) -> None:
    assert a[1] == b[1]
    if isinstance(a[0], pl.DataFrame):
        assert isinstance(b[0], pl.DataFrame)
        assert_frame_equal(a[0], b[0])
    else:
        assert a[0] == b[0]


@st.composite
def judged_tables(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    n_workflows = draw(st.integers(1, 6))
    states, attempts = [], []
    for w in range(n_workflows):
        for s in range(draw(st.integers(1, 2))):
            sid = f"w{w}s{s}"
            states.append(
                {
                    "state_id": sid,
                    "workflow_id": f"w{w}",
                    "root_cause_id": f"r{w}",
                    "depth": draw(st.sampled_from([0, 5])),
                    "replay_ok": True,
                    "expected_ok": draw(st.booleans()) or s == 0,
                }
            )
            for agent in draw(st.sampled_from([["a"], ["a", "b"]])):
                n = draw(st.integers(2, 4))
                label = draw(st.sampled_from(["all", "none", "some"]))
                for repeat in range(n):
                    verdict = draw(st.integers(0, 1))
                    truth = draw(st.integers(0, 1))
                    given_gold = label == "all" or (label == "some" and repeat > 0)
                    attempts.append(
                        {
                            "state_id": sid,
                            "agent": agent,
                            "repeat": repeat,
                            "aware": False,
                            "root_cause_fixed": False,
                            "derived_fixed": False,
                            "passed": bool(verdict),
                            "judge": verdict,
                            "gold": truth if given_gold else None,
                        }
                    )
    schema = {"judge": pl.Int8, "gold": pl.Int8}
    return pl.DataFrame(states), pl.DataFrame(attempts, schema_overrides=schema)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables=judged_tables(), seed=st.integers(0, 2**16), shards=st.integers(1, 4))
def test_row_order_shards_and_file_split_do_not_change_results(
    tables: tuple[pl.DataFrame, pl.DataFrame], seed: int, shards: int
) -> None:
    states, attempts = tables
    options = {"judge": "judge", "gold": "gold", "k": 2}
    base = outcome(lambda: takeover.reliability_judged(states, attempts, **options))
    shuffled = attempts.sample(fraction=1.0, shuffle=True, seed=seed)
    same(base, outcome(lambda: takeover.reliability_judged(states, shuffled, **options)))
    sharded = engines.ShardedEngine(k=shards)
    same(
        base,
        outcome(lambda: takeover.reliability_judged(states, attempts, engine=sharded, **options)),
    )
    with tempfile.TemporaryDirectory() as folder:
        half = shuffled.height // 2
        paths = [Path(folder) / "a.parquet", Path(folder) / "b.parquet"]
        shuffled[:half].write_parquet(paths[0])
        shuffled[half:].write_parquet(paths[1])
        got = outcome(
            lambda: takeover.reliability_judged(states, [str(p) for p in paths], **options)
        )
    same(base, got)


def test_bad_input() -> None:
    states, attempts = hand_tables()
    run = takeover.reliability_judged
    two = pl.when((pl.col("state_id") == "s00") & (pl.col("repeat") == 0)).then(2)
    bad_gold = attempts.with_columns(gold=two.otherwise(pl.col("gold")))
    message = "attempts: the gold column `gold` has 1 values outside {0, 1} (2)"
    with pytest.raises(SchemaError, match=re.escape(message)):
        run(states, bad_gold, judge="judge", gold="gold")
    with pytest.raises(SchemaError, match="attempts: the gold column `gold` is null on all"):
        run(states, attempts.with_columns(gold=pl.lit(None, pl.Int8)), judge="judge", gold="gold")
    nulls = attempts.with_columns(judge=pl.when(pl.col("repeat") == 0).then(pl.col("judge")))
    with pytest.raises(SchemaError, match="attempts: the judge column `judge` has 80 nulls"):
        run(states, nulls, judge="judge", gold="gold")
    message = (
        "parameter `k` is 4 but 40 (state_id, agent) units on eligible states have fewer repeats "
        "(state_id/agent s00/a, s01/a, s02/a, s03/a, s04/a and 35 more; fewest: 3); pass@k "
        "needs at least k repeats of every scored unit. Hint: lower `k` to 3 or drop those units."
    )
    with pytest.raises(ParameterError, match=re.escape(message)):
        run(states, attempts, judge="judge", gold="gold", k=4)
    with pytest.raises(ParameterError, match=re.escape("parameter `metrics` is 'pass@1'")):
        run(states, attempts, judge="judge", gold="gold", metrics="pass@1")
    with pytest.raises(ParameterError, match=re.escape("parameter `lam` is 2")):
        run(states, attempts, judge="judge", gold="gold", lam=2)
    half = attempts.with_columns(gold=pl.when(pl.col("repeat") == 0).then(pl.col("gold")))
    message = "attempts: no (state, agent) unit has a gold label on every attempt"
    with pytest.raises(InputError, match=re.escape(message)), pytest.warns(RecoveryLabWarning):
        run(states, half, judge="judge", gold="gold")


def test_cli_judged_pass_k_table_and_bad_k(tmp_path: Path, cli: Callable) -> None:
    states, attempts = hand_tables()
    paths = tmp_path / "states.parquet", tmp_path / "attempts.parquet"
    states.write_parquet(paths[0])
    attempts.write_parquet(paths[1])
    common = ("takeover", "--states", paths[0], "--attempts", paths[1], "--interval", "wilson")
    out = tmp_path / "out"
    judged = ("--judge", "judge", "--gold", "gold")
    result = cli(*common, *judged, "--k", "2", "--resamples", "200", "--out-dir", out)
    assert result.code == 0, result.err
    expected = takeover.reliability_judged(states, attempts, judge="judge", gold="gold", k=2)
    assert_frame_equal(pl.read_parquet(out / "judged_pass_k.parquet"), expected)
    result = cli(*common, *judged, "--k", "4", "--out-dir", tmp_path / "bad")
    assert result.code == 2
    errors = [line for line in result.err.splitlines() if not line.startswith("[takeover")]
    assert len(errors) == 1
    assert errors[0].startswith("recoverylab takeover: error: parameter `k` is 4 but 40")
    assert not (tmp_path / "bad").exists()


def test_judged_pass_k_columns_follow_summarize_judged() -> None:
    states, attempts = hand_tables()
    out = takeover.reliability_judged(states, attempts, judge="judge", gold="gold", k=2)
    assert out.columns == ["agent", "depth", "metric", "k", *stats.JUDGED_COLUMNS]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            pl.when(pl.col("state_id") == "s00").then(2).otherwise(pl.col("gold")).alias("gold"),
            "attempts: the gold column `gold` has 3 values outside {0, 1} (2)",
        ),
        (pl.lit(None, pl.Int8).alias("gold"), "attempts: the gold column `gold` is null on all"),
        (
            pl.when(pl.col("repeat") > 0).then(pl.col("judge")).alias("judge"),
            "attempts: the judge column `judge` has 40 nulls",
        ),
        (
            pl.when(pl.col("repeat") == 0).then(pl.col("gold")).alias("gold"),
            "attempts: no (state, agent) unit has a gold label on every attempt",
        ),
    ],
    ids=["gold-outside", "no-gold", "null-judge", "no-whole-unit"],
)
def test_cli_bad_judged_input_is_one_line(
    tmp_path: Path, cli: Callable, change: pl.Expr, said: str
) -> None:
    states, attempts = hand_tables()
    paths = tmp_path / "states.parquet", tmp_path / "attempts.parquet"
    states.write_parquet(paths[0])
    attempts.with_columns(change).write_parquet(paths[1])
    out = tmp_path / "out"
    result = cli(
        "takeover", "--states", paths[0], "--attempts", paths[1], "--judge", "judge",
        "--gold", "gold", "--k", "2", "--quiet", "--out-dir", out,
    )  # fmt: skip
    assert result.code == 2
    assert result.err.splitlines() == [result.err.strip()]
    assert result.err.startswith(f"recoverylab takeover: error: {said}")
    assert not out.exists()
