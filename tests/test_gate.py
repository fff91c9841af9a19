"""The release gate: verdicts per claim kind, family adjustment, exit statuses, bad policies."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from recoverylab import paired, stats
from recoverylab._errors import ParameterError, SchemaError
from recoverylab.paired import _gate as gate_module

SAMPLES = Path(__file__).resolve().parents[1] / "data_samples" / "paired"
POLICY = SAMPLES / "gate_policy.toml"
MAIN = SAMPLES / "main_forks.parquet"

#: (y0, y1) of one pair by outcome.
OUTCOME = {
    "rescue": (False, True),
    "harm": (True, False),
    "kept": (True, True),
    "none": (False, False),
}


def forks_of(
    cells: dict[tuple[str, int], Sequence[str]], *, seeds: int = 1, prefix: str = "t"
) -> pl.DataFrame:
    """Forks with one task per outcome listed, per (condition, delay) cell and seed.

    ``cells[(condition, delay)]`` lists each task's outcome; with ``seeds`` > 1 every task has
    that many pairs (``seed`` a pair_by key), all with the same outcome.
    """
    rows = []
    for (condition, delay), outcomes in cells.items():
        for i, outcome in enumerate(outcomes):
            y0, y1 = OUTCOME[outcome]
            for seed in range(seeds):
                base = {"task_id": f"{prefix}{i:03}", "condition": condition, "seed": str(seed)}
                rows.append({**base, "method": "none", "delay": None, "success": y0})
                rows.append({**base, "method": "refresh", "delay": delay, "success": y1})
    frame = pl.DataFrame(rows, schema_overrides={"delay": pl.Int64})
    # a shared none row per (task, condition, seed): drop the repeats of several delays
    return frame.unique(["task_id", "condition", "seed", "method", "delay"], maintain_order=True)


def claim(kind: str, margin: float, **extra: object) -> dict:
    return {"kind": kind, "margin": margin, **extra}


def policy(*claims: dict, adjust: str = "none", **top: object) -> dict:
    return {"adjust": adjust, "claim": list(claims), **top}


def binom_tail_ge(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) >= k), by hand."""
    return sum(math.comb(n, j) for j in range(k, n + 1)) / 2**n


# --- one claim, hand-computed -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rescue", "harm", "verdict"),
    [(9, 1, "PASS"), (1, 9, "FAIL"), (3, 2, "INCONCLUSIVE")],
)
def test_superiority_at_zero_is_the_exact_mcnemar_test(
    rescue: int, harm: int, verdict: str
) -> None:
    outcomes = ["rescue"] * rescue + ["harm"] * harm + ["none"] * 10
    result = paired.gate(forks_of({("stale2", 1): outcomes}), policy(claim("superiority", 0.0)))
    row = result.claims.row(0, named=True)
    # one pair per task: the sign-flip test is McNemar's, P(Bin(r + h, 1/2) >= r)
    assert row["p_value"] == pytest.approx(binom_tail_ge(rescue, rescue + harm), rel=1e-9)
    assert row["verdict"] == verdict
    assert result.verdict == verdict
    assert result.exit_status == {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3}[verdict]
    assert row["estimate"] == pytest.approx((rescue - harm) / (rescue + harm + 10))
    assert row["n_tasks"] == rescue + harm + 10
    # the interval agrees with the verdict
    if verdict == "PASS":
        assert row["ci_low"] > 0
    elif verdict == "FAIL":
        assert row["ci_high"] < 0
    else:
        assert row["ci_low"] <= 0 <= row["ci_high"]


@pytest.mark.parametrize("kind", ["superiority", "non_inferiority"])
@pytest.mark.parametrize("margin", [0.02, 0.1, 0.3])
def test_effect_p_value_inverts_the_test_compatible_interval(kind: str, margin: float) -> None:
    outcomes = ["rescue"] * 30 + ["harm"] * 8 + ["kept"] * 40 + ["none"] * 22
    result = paired.gate(forks_of({("stale2", 1): outcomes}), policy(claim(kind, margin)))
    row = result.claims.row(0, named=True)
    threshold = margin if kind == "superiority" else -margin
    assert row["threshold"] == threshold
    p = row["p_value"]
    bound = stats.fay_lumbard_interval(30, 8, 100, confidence=1 - p, alternative="greater")
    if 1e-12 < p < 0.49:
        # the one-sided Fay–Lumbard bound at confidence 1 - p sits on the threshold
        assert bound.low == pytest.approx(threshold, abs=2e-3)
    elif p <= 1e-12:  # beyond what the inversion resolves: the bound is still above
        assert bound.low > threshold
    # verdict and bound agree at the claim's level (no adjustment: one claim)
    assert (row["verdict"] == "PASS") == (row["ci_low"] > threshold) == (p < 0.05)


def test_non_inferiority_passes_a_small_harm_and_fails_a_large_one() -> None:
    small = ["harm"] * 2 + ["kept"] * 98
    large = ["harm"] * 40 + ["kept"] * 60
    data = pl.concat(
        [
            forks_of({("clean", 1): small}, prefix="a"),
            forks_of({("clean", 2): large}, prefix="b"),
        ]
    )
    result = paired.gate(data, policy(claim("non_inferiority", 0.1, condition="clean")))
    verdicts = dict(zip(result.claims["delay"], result.claims["verdict"], strict=True))
    assert verdicts == {1: "PASS", 2: "FAIL"}
    assert result.verdict == "FAIL"
    assert result.exit_status == 1


@pytest.mark.parametrize(
    ("harm", "margin", "verdict"),
    [(2, 0.10, "PASS"), (25, 0.10, "FAIL"), (8, 0.10, "INCONCLUSIVE")],
)
def test_max_harm_rate_is_the_exact_binomial_test(harm: int, margin: float, verdict: str) -> None:
    outcomes = ["harm"] * harm + ["kept"] * (100 - harm)
    result = paired.gate(forks_of({("clean", 1): outcomes}), policy(claim("max_harm_rate", margin)))
    row = result.claims.row(0, named=True)
    below = sum(math.comb(100, k) * margin**k * (1 - margin) ** (100 - k) for k in range(harm + 1))
    assert row["p_value"] == pytest.approx(below, rel=1e-7)  # P(X <= harm | rate = margin)
    assert row["estimate"] == harm / 100
    # Clopper–Pearson upper bound at 95 %
    assert row["ci_high"] == pytest.approx(sps.beta.ppf(0.95, harm + 1, 100 - harm), rel=1e-9)
    assert row["verdict"] == verdict


def test_max_harm_rate_with_several_pairs_per_task_is_wider() -> None:
    # the same pair counts, in 25 tasks of 4 identical pairs: a design effect of 4
    one = paired.gate(
        forks_of({("clean", 1): ["harm"] * 8 + ["kept"] * 92}),
        policy(claim("max_harm_rate", 0.2)),
    )
    four = paired.gate(
        forks_of({("clean", 1): ["harm"] * 2 + ["kept"] * 23}, seeds=4),
        policy(claim("max_harm_rate", 0.2), pair_by=["seed"]),
    )
    assert one.claims["n"].item() == four.claims["n"].item() == 100
    assert four.claims["ci_high"].item() > one.claims["ci_high"].item()
    assert four.claims["p_value"].item() > one.claims["p_value"].item()


def _decisions(touched: int, clean: int, other: int = 5) -> pl.DataFrame:
    rows = [
        {"task_id": f"t{i:03}", "condition": "clean", "delay": 1 if i < touched else None}
        for i in range(clean)
    ]
    rows += [{"task_id": f"t{i:03}", "condition": "stale2", "delay": 1} for i in range(other)]
    return pl.DataFrame(rows, schema_overrides={"delay": pl.Int64})


@pytest.mark.parametrize(("touched", "verdict"), [(0, "PASS"), (15, "FAIL"), (3, "INCONCLUSIVE")])
def test_max_clean_touch_reads_the_decisions(touched: int, verdict: str) -> None:
    data = forks_of({("clean", 1): ["kept"] * 20, ("stale2", 1): ["rescue"] * 20})
    result = paired.gate(
        data, policy(claim("max_clean_touch", 0.2)), decisions=_decisions(touched, 20)
    )
    row = result.claims.row(0, named=True)
    assert row["n"] == 20  # the clean episodes only
    assert row["estimate"] == touched / 20
    below = sum(math.comb(20, k) * 0.2**k * 0.8 ** (20 - k) for k in range(touched + 1))
    assert row["p_value"] == pytest.approx(below, rel=1e-7)
    assert row["verdict"] == verdict


# --- the family -------------------------------------------------------------------------------


def _family_forks() -> pl.DataFrame:
    cells = {
        ("stale2", 1): ["rescue"] * 14 + ["harm"] * 3 + ["none"] * 30,
        ("stale2", 2): ["rescue"] * 9 + ["harm"] * 4 + ["none"] * 34,
        ("stale2", 4): ["rescue"] * 6 + ["harm"] * 5 + ["none"] * 36,
        ("clean", 1): ["harm"] * 3 + ["kept"] * 44,
        ("clean", 2): ["harm"] * 6 + ["kept"] * 41,
    }
    return forks_of(cells)


@functools.cache
def _family(adjust: str) -> paired.GateResult:
    """The gate of the family example (computed once per adjustment)."""
    return paired.gate(_family_forks(), _family_policy(adjust))


def _family_policy(adjust: str) -> dict:
    return policy(
        claim("superiority", 0.0, condition="stale2", name="helps"),
        claim("non_inferiority", 0.05, condition="clean", name="no cost"),
        claim("max_harm_rate", 0.2, condition="clean", name="harm cap"),
        adjust=adjust,
    )


@pytest.mark.parametrize(("adjust", "method"), [("holm", "holm"), ("bh", "fdr_bh")])
def test_family_adjustment_equals_statsmodels(adjust: str, method: str) -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    result = _family(adjust)
    claims = result.claims
    assert claims.height == 7
    expected = multitest.multipletests(claims["p_value"].to_numpy(), method=method)[1]
    np.testing.assert_allclose(claims["p_adjusted"].to_numpy(), expected, rtol=1e-12)
    # a row passes exactly when its adjusted p-value is below its α, and its bound agrees
    passed = claims["verdict"] == "PASS"
    assert (passed == (claims["p_adjusted"] < 0.05)).all()
    effect = claims.filter(pl.col("kind") != "max_harm_rate")
    assert ((effect["verdict"] == "PASS") == (effect["ci_low"] > effect["threshold"])).all()


def test_no_adjustment_keeps_the_p_values() -> None:
    result = _family("none")
    assert result.claims["p_adjusted"].to_list() == result.claims["p_value"].to_list()


def test_holm_never_passes_more_than_no_adjustment() -> None:
    none = _family("none").claims
    holm = _family("holm").claims
    assert (holm["verdict"] == "PASS").sum() <= (none["verdict"] == "PASS").sum()
    # Holm's bounds are at a stricter level: never tighter
    assert (holm["ci_low"] <= none["ci_low"] + 1e-12).all()


# --- sequential -------------------------------------------------------------------------------


def test_sequential_gate_decides_a_clear_effect_and_says_when() -> None:
    outcomes = ["rescue"] * 60 + ["none"] * 20
    order = np.random.default_rng(3).permutation(80)
    data = forks_of({("stale2", 1): [outcomes[i] for i in order]})
    result = paired.gate(data, policy(claim("superiority", 0.0)), sequential=True)
    row = result.claims.row(0, named=True)
    assert row["verdict"] == "PASS"
    assert 1 <= row["decided_at"] <= 80
    assert row["ci_low"] > 0
    # the anytime-valid p-value is never below the fixed-n one here (it pays for peeking)
    fixed = paired.gate(data, policy(claim("superiority", 0.0))).claims["p_value"].item()
    assert row["p_value"] >= fixed


def test_sequential_gate_is_inconclusive_on_noise() -> None:
    data = forks_of({("stale2", 1): ["rescue", "harm", "none", "kept"] * 10})
    result = paired.gate(data, policy(claim("superiority", 0.0)), sequential=True)
    assert result.verdict == "INCONCLUSIVE"
    assert result.claims["decided_at"].item() is None


# --- output -----------------------------------------------------------------------------------


def test_markdown_is_a_job_summary() -> None:
    result = _family("holm")
    text = result.to_markdown()
    lines = text.splitlines()
    assert lines[0] == f"### Release gate: **{result.verdict}**"
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + result.claims.height
    assert all(line.count("|") == table[0].count("|") for line in table)
    assert "✅ PASS" in text
    assert "holm" in text


def test_json_round_trips() -> None:
    result = _family("bh")
    body = json.loads(result.to_json())
    assert body["verdict"] == result.verdict
    assert body["exit_status"] == result.exit_status
    assert [c["p_adjusted"] for c in body["claims"]] == result.claims["p_adjusted"].to_list()


# --- command line -----------------------------------------------------------------------------


def _write_policy(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        (["rescue"] * 12 + ["none"] * 8, 0),
        (["harm"] * 12 + ["none"] * 8, 1),
        (["rescue", "harm"] * 5, 3),
    ],
)
def test_exit_status_from_the_command_line(
    cli: Callable, tmp_path: Path, outcomes: list[str], code: int
) -> None:
    forks = tmp_path / "forks.parquet"
    forks_of({("stale2", 1): outcomes}).write_parquet(forks)
    toml = _write_policy(
        tmp_path / "p.toml", '[[claim]]\nname = "helps"\nkind = "superiority"\nmargin = 0.0\n'
    )
    run = cli("gate", toml, forks, "--quiet")
    assert run.code == code, run.err
    assert run.out.startswith(f"gate: {['PASS', 'FAIL', '', 'INCONCLUSIVE'][code]}")
    markdown = cli("gate", toml, forks, "--format", "markdown", "--quiet")
    assert markdown.code == code
    assert markdown.out.startswith("### Release gate:")
    sequential = cli("gate", toml, forks, "--sequential", "--format", "json", "--quiet")
    assert json.loads(sequential.out)["sequential"] is True


def test_gate_on_the_shipped_samples(cli: Callable, tmp_path: Path) -> None:
    out = tmp_path / "verdicts.parquet"
    run = cli("gate", POLICY, MAIN, "--out", out, "--quiet")
    verdicts = pl.read_parquet(out)
    assert verdicts.columns[:3] == ["claim", "kind", "cell"]
    assert set(verdicts["claim"]) == {c.name for c in paired.read_policy(POLICY).claims}
    worst = set(verdicts["verdict"])
    expected = 1 if "FAIL" in worst else 3 if "INCONCLUSIVE" in worst else 0
    assert run.code == expected
    inconclusive = verdicts.filter(pl.col("verdict") == "INCONCLUSIVE")
    assert (inconclusive["more_tasks"].drop_nulls() >= 0).all()


BAD_POLICIES = {
    "unknown top-level key": (
        "colour = 'red'\n[[claim]]\nkind='superiority'\nmargin=0.0\n",
        "unknown key `colour`",
    ),
    "unknown claim key": (
        "[[claim]]\nkind='superiority'\nmargin=0.0\nmethods='refresh'\n",
        "unknown key `methods`",
    ),
    "margin above 1": ("[[claim]]\nkind='superiority'\nmargin=2\n", "`margin` is 2"),
    "negative margin": ("[[claim]]\nkind='superiority'\nmargin=-0.1\n", "`margin` is -0.1"),
    "unknown kind": ("[[claim]]\nkind='better'\nmargin=0.1\n", "`kind` is 'better'"),
    "no margin": ("[[claim]]\nkind='superiority'\n", "`margin` is missing"),
    "no claims": ("adjust = 'holm'\n", "has no claims"),
    "bad adjust": (
        "adjust='sidak'\n[[claim]]\nkind='superiority'\nmargin=0.0\n",
        "`adjust` is 'sidak'",
    ),
    "bad confidence": (
        "confidence=95\n[[claim]]\nkind='superiority'\nmargin=0.0\n",
        "`confidence` is 95",
    ),
    "twice the same name": (
        "[[claim]]\nname='a'\nkind='superiority'\nmargin=0.0\n[[claim]]\nname='a'\nkind='superiority'\nmargin=0.1\n",
        "two claims are named 'a'",
    ),
    "bad TOML": ("[[claim]]\nkind = superiority\n", "line 2"),
    "filter matching no cell": (
        "[[claim]]\nkind='superiority'\nmargin=0.0\ncondition='stale9'\n",
        "no cell with data",
    ),
    "missing by column": (
        "[[claim]]\nkind='superiority'\nmargin=0.0\nby=['model']\n",
        "`by` names `model`",
    ),
    "clean touch without decisions": (
        "[[claim]]\nkind='max_clean_touch'\nmargin=0.1\n",
        "needs the policy's decision table",
    ),
    "delay of the wrong type": (
        "[[claim]]\nkind='superiority'\nmargin=0.0\ndelay='one'\n",
        "`delay` is 'one'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_POLICIES))
def test_bad_policies_are_one_line_and_exit_2(cli: Callable, tmp_path: Path, case: str) -> None:
    text, expected = BAD_POLICIES[case]
    forks = tmp_path / "forks.parquet"
    forks_of({("stale2", 1): ["rescue"] * 5}).write_parquet(forks)
    toml = _write_policy(tmp_path / "p.toml", text)
    out = tmp_path / "v.parquet"
    run = cli("gate", toml, forks, "--out", out, "--quiet")
    assert run.code == 2
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("recoverylab gate: error: ")
    assert expected in lines[0]
    assert not out.exists()
    with pytest.raises(ParameterError, match=r"policy|claim"):
        paired.gate(forks, toml)


def test_a_claim_whose_cells_are_all_excluded_has_no_data() -> None:
    # recovery rows without a none row: unpaired, so the cell has no pair
    data = pl.DataFrame(
        {
            "task_id": ["t1", "t2"],
            "condition": ["stale2"] * 2,
            "method": ["refresh"] * 2,
            "delay": [1, 1],
            "success": [True, False],
        }
    )
    with pytest.raises(ParameterError, match="no cell with data"):
        paired.gate(data, policy(claim("superiority", 0.0)))


def test_missing_policy_file(cli: Callable, tmp_path: Path) -> None:
    forks = tmp_path / "forks.parquet"
    forks_of({("stale2", 1): ["rescue"] * 5}).write_parquet(forks)
    run = cli("gate", tmp_path / "nope.toml", forks)
    assert run.code == 2
    assert "does not exist" in run.err


def test_policy_as_python_objects() -> None:
    checked = paired.read_policy(POLICY)
    assert paired.read_policy(checked) is checked
    assert checked.adjust == "holm"
    assert checked.claims[0].kind == "superiority"
    with pytest.raises(ParameterError, match="give a TOML file path"):
        paired.read_policy(42)
    with pytest.raises(ParameterError, match="max_clean_touch claim is about the policy"):
        paired.read_policy(policy(claim("max_clean_touch", 0.1, method="refresh")))


# --- bad data ---------------------------------------------------------------------------------

_GOOD = forks_of({("stale2", 1): ["rescue", "harm", "none"]})
BAD_FORKS = {
    "missing column": (_GOOD.drop("task_id"), "missing required column `task_id`"),
    "empty table": (_GOOD.clear(), "the table is empty"),
    "null success": (
        _GOOD.with_columns(
            pl.when(pl.col("method") == "refresh")
            .then(None)
            .otherwise(pl.col("success"))
            .alias("success")
        ),
        "column `success` has 3 nulls",
    ),
    "duplicate key": (pl.concat([_GOOD, _GOOD.tail(1)]), "appears more than once"),
    "wrong type": (_GOOD.with_columns(pl.col("success").cast(pl.String)), "must be Boolean"),
}


@pytest.mark.parametrize("case", sorted(BAD_FORKS))
@pytest.mark.parametrize("sequential", [False, True])
def test_bad_forks_raise_our_errors(case: str, sequential: bool) -> None:
    frame, message = BAD_FORKS[case]
    with pytest.raises(SchemaError, match=message):
        paired.gate(frame, policy(claim("superiority", 0.0)), sequential=sequential)


def test_bad_forks_on_the_command_line(cli: Callable, tmp_path: Path) -> None:
    forks = tmp_path / "forks.parquet"
    BAD_FORKS["null success"][0].write_parquet(forks)
    toml = _write_policy(tmp_path / "p.toml", "[[claim]]\nkind='superiority'\nmargin=0.0\n")
    run = cli("gate", toml, forks, "--quiet")
    assert run.code == 2
    assert run.err.strip().startswith("recoverylab gate: error: forks: column `success`")


def test_decisions_must_name_tasks_of_the_forks() -> None:
    data = forks_of({("clean", 1): ["kept"] * 3})
    extra = _decisions(0, 5)  # t003 and t004 have no forks
    with pytest.raises(ParameterError, match="tasks that forks does not"):
        paired.gate(data, policy(claim("max_clean_touch", 0.2)), decisions=extra)
    with pytest.raises(ParameterError, match="column `delay` is missing"):
        paired.gate(data, policy(claim("max_clean_touch", 0.2)), decisions=extra.drop("delay"))


def test_decisions_path_is_relative_to_the_policy_file(tmp_path: Path) -> None:
    data = forks_of({("clean", 1): ["kept"] * 20})
    _decisions(0, 20, other=0).write_parquet(tmp_path / "decisions.parquet")
    toml = _write_policy(
        tmp_path / "p.toml",
        'decisions = "decisions.parquet"\n[[claim]]\nkind="max_clean_touch"\nmargin=0.2\n',
    )
    assert paired.gate(data, toml).claims["verdict"].item() == "PASS"


def test_report_opens_with_the_verdicts(cli: Callable, tmp_path: Path) -> None:
    pytest.importorskip("altair")
    pytest.importorskip("vl_convert")
    out = tmp_path / "report.html"
    forks = tmp_path / "forks.parquet"
    forks_of({("stale2", 1): ["rescue"] * 12 + ["none"] * 8}).write_parquet(forks)
    toml = _write_policy(
        tmp_path / "p.toml", '[[claim]]\nname = "helps"\nkind = "superiority"\nmargin = 0.0\n'
    )
    run = cli("report", "--forks", forks, "--policy", toml, "--resamples", 200, "--out", out)
    assert run.code == 0, run.err
    html = out.read_text(encoding="utf-8")
    first = html.index('id="gate"')
    assert first < html.index('id="paired-rescue-harm"')
    assert "Release gate: PASS (exit status 0)" in html
    lonely = cli("report", "--policy", POLICY, "--out", tmp_path / "r.html")
    assert lonely.code == 2
    assert "`--policy` needs `--forks`" in lonely.err


def test_by_judges_the_claim_in_each_group() -> None:
    good = forks_of({("stale2", 1): ["rescue"] * 12 + ["none"] * 8}, prefix="a")
    bad = forks_of({("stale2", 1): ["harm"] * 12 + ["none"] * 8}, prefix="b")
    data = pl.concat(
        [
            good.with_columns(pl.lit("m1").alias("model")),
            bad.with_columns(pl.lit("m2").alias("model")),
        ]
    )
    result = paired.gate(data, policy(claim("superiority", 0.0, by=["model"])))
    assert result.claims["cell"].to_list() == [
        "stale2 · delay 1 · refresh · model=m1",
        "stale2 · delay 1 · refresh · model=m2",
    ]
    assert result.claims["verdict"].to_list() == ["PASS", "FAIL"]
    pooled = paired.gate(data, policy(claim("superiority", 0.0)))
    assert pooled.claims.height == 1
    assert pooled.claims["n_tasks"].item() == 40


def _first_decided_one_step_at_a_time(family, adjust, alpha):
    """The reference: adjust the family after each arriving task, as the gate once did."""
    rows, horizon = family.shape
    first = np.full(rows, horizon)
    for t in range(horizon):
        column = family[:, t]
        p_adj = column.copy() if adjust == "none" else stats.adjust_p_values(column, adjust)
        for i in np.flatnonzero(p_adj < alpha):
            first[i] = min(first[i], t)
    return first


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6),
    horizon=st.integers(1, 120),
    adjust=st.sampled_from(["none", "holm", "bh"]),
    seed=st.integers(0, 2**32 - 1),
    block=st.sampled_from([1, 7, 1 << 16]),
)
def test_decision_steps_equal_adjusting_after_each_task(rows, horizon, adjust, seed, block):
    rng = np.random.default_rng(seed)
    # anytime p-values: non-increasing paths from 1 down; about half the rows decide, at
    # arrival steps spread over the horizon
    drops = rng.random((rows, horizon)) ** rng.uniform(0.02, 2, size=(rows, 1))
    family = np.minimum.accumulate(np.concatenate([np.ones((rows, 1)), drops], axis=1), axis=1)
    family = family[:, 1:]
    alpha = rng.uniform(0.01, 0.2, size=rows)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gate_module, "_TASKS_PER_BLOCK", block)
        got = gate_module._first_decided(family, adjust, alpha)
    assert got.tolist() == _first_decided_one_step_at_a_time(family, adjust, alpha).tolist()
