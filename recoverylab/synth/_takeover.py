"""Synthetic CUA-Recovery takeover logs with planted truth (generator ``"takeover"``).

The unit is a *workflow*. Each workflow holds a few controlled root causes (failures of one of
the source agents' own policies). Every root cause has a failure annotation — the step where the
root cause happened, the step where it surfaced (or never) and the final step — and is replayed
at depths 0, 5, ..., 25 steps after the root cause, as far as its trajectory went: a state at
depth d exists only if d < final_step − root_cause_step, so deeper depths have fewer states, as in
the seed. A small share of states fails the replay check or lacks expected values (rejected).
Every agent attempts every eligible state ``repeats`` times, except a small share of
(state, agent) units that never ran. Each workflow's verifier is mutation-tested.

Shape quotas are exact per block of units (see :data:`~recoverylab.synth.BLOCK`), so 100
workflows give the published test split's annotations exactly: 619 root causes, 602 surfaced,
361 (60.0 %) of them at the final step, median latency 17 steps.

Planted truth, per attempt (independent across repeats given the state and agent)::

    u        ~ N(0, 1)                                      state difficulty (planted_difficulty)
    aware    ~ Bern(σ(a_j + AWARE_DEPTH·d + AWARE_U·u))      planted_p_aware
    fixed    ~ Bern(σ(f_j + FIX_DEPTH·d − FIX_U·u + FIX_AWARE·aware))
    derived  ~ Bern(σ(DERIVED_BASE + DERIVED_DEPTH·d − DERIVED_U·u))  if fixed, else false
    passed   ~ Bern(PASS_REPAIRED)  if derived, else Bern(PASS_UNREPAIRED)

with agent parameters a_j, f_j from :func:`agent_parameters` (first agent most aware, fixing
skill spread independently). ``planted_p_pass`` is the exact marginal P(passed) of that model, so
E[pass@1] = mean planted_p_pass and E[pass@k] = mean over units of 1 − (1 − p)^k. Awareness rises
and repair falls with depth (the seed's 20 → 25 observation: EAR up, Pass@3 down).
Mutations: a workflow catches each executed mutation with its ``planted_catch_rate`` ~ Beta(8, 2).
With several ``splits`` and ``leak_rate`` > 0, a share of workflows has one root cause's states
relabelled to another split (``planted_leak``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError
from recoverylab.synth import Generator, Tables, register

__all__ = ["DEPTHS", "agent_names", "agent_parameters", "block"]

DEPTHS = (0, 5, 10, 15, 20, 25)
#: Published shape of the failure annotations: 619 annotated, 602 surfaced, 60 % of the surfaced
#: at the final step, median latency 17 steps (seed, CUA-Recovery).
ROOT_CAUSES_PER_WORKFLOW = 6.19
SURFACED_SHARE = 602 / 619
FINAL_STEP_SHARE = 0.6
MEDIAN_LATENCY = 17

AWARE_DEPTH = 0.012
AWARE_U = 0.0
FIX_DEPTH = -0.02
FIX_U = 2.0
FIX_AWARE = 0.55
DERIVED_BASE = 1.4
DERIVED_DEPTH = -0.025
DERIVED_U = 0.5
PASS_REPAIRED = 0.85
PASS_UNREPAIRED = 0.015


def agent_names(n: int) -> tuple[str, ...]:
    """Agent names: ``agent_a``, ``agent_b``, ... (then ``agent_07``, ... beyond 26)."""
    if n <= 26:
        return tuple(f"agent_{chr(ord('a') + j)}" for j in range(n))
    return tuple(f"agent_{j + 1:02d}" for j in range(n))


def agent_parameters(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Planted logits (a_j awareness, f_j root-cause fixing) of ``n`` agents.

    Awareness falls evenly from the first agent to the last; fixing skill follows a different
    order (agents that notice more do not always repair more).
    """
    rank = np.linspace(0.0, 1.0, n) if n > 1 else np.zeros(1)
    aware = -0.6 - 1.3 * rank
    fix = -2.4 - 1.2 * ((rank * 2.7) % 1.0)
    return aware, fix


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _exact_subset(rng: np.random.Generator, n: int, share: float) -> np.ndarray:
    """Return a boolean mask with exactly round(share · n) randomly placed trues."""
    mask = np.zeros(n, dtype=bool)
    mask[rng.permutation(n)[: round(share * n)]] = True
    return mask


def _latencies(rng: np.random.Generator, n: int, median: int) -> np.ndarray:
    """Draw n latencies (>= 1 step) whose median is exactly ``median``, in random order.

    The middle one (odd n) or two (even n) values equal the median; the rest are split evenly
    below (skewed towards short latencies) and above (a long geometric tail).
    """
    middle = 1 if n % 2 else 2
    side = (n - middle) // 2
    low = 1 + np.floor((median - 1) * rng.random(side) ** 1.25).astype(np.int64)
    high = median + rng.geometric(1 / 7, side) - 1
    values = np.concatenate([low, np.full(middle, median, dtype=np.int64), high])
    return values[rng.permutation(n)] if n else values


def _ids(prefix: str, numbers: np.ndarray, width: int) -> pl.Series:
    """``prefix`` + zero-padded numbers, e.g. ``w000042``."""
    digits = pl.Series("n", numbers, dtype=pl.Int64).cast(pl.String).str.zfill(width)
    return pl.select(pl.concat_str(pl.lit(prefix), pl.lit(digits))).to_series()


def block(  # noqa: PLR0915 - one pass; the shipped samples pin its floats bit for bit
    start: int,
    stop: int,
    rng: np.random.Generator,
    *,
    agents: int = 6,
    repeats: int = 3,
    depths: Sequence[int] = DEPTHS,
    root_causes_per_workflow: float = ROOT_CAUSES_PER_WORKFLOW,
    surfaced_share: float = SURFACED_SHARE,
    final_step_share: float = FINAL_STEP_SHARE,
    median_latency: int = MEDIAN_LATENCY,
    replay_mismatch_rate: float = 0.006,
    missing_expected_rate: float = 0.003,
    missing_unit_rate: float = 0.01,
    splits: Sequence[str] = ("test",),
    leak_rate: float = 0.0,
) -> Tables:
    """Generate states, attempts, failures and mutations for workflows ``start..stop-1``.

    Parameters
    ----------
    start, stop
        Unit (workflow) range; ids are ``w000000``-style from the unit index.
    rng
        The block's random stream (the only source of randomness).
    agents, repeats, depths
        Agents (``agent_a``, ...), repeats per (state, agent), replay depths.
    root_causes_per_workflow, surfaced_share, final_step_share, median_latency
        Shape quotas, met exactly per block (rounded).
    replay_mismatch_rate, missing_expected_rate
        Share of states rejected by the replay check / for missing expected values.
    missing_unit_rate
        Share of (eligible state, agent) units with no attempts at all.
    splits, leak_rate
        Split labels drawn per workflow, and the share of workflows with a planted leak.

    Returns
    -------
    dict
        ``states``, ``attempts``, ``failures``, ``mutations`` as polars DataFrames.
    """
    _check(agents, repeats, depths, median_latency, splits, leak_rate)
    names = agent_names(agents)
    depth_arr = np.asarray(sorted(set(depths)), dtype=np.int64)
    n_wf = stop - start
    wf = np.arange(start, stop, dtype=np.int64)

    # Root causes: an exact total per block, spread as evenly as possible over workflows.
    total = round(root_causes_per_workflow * n_wf)
    base, extra = divmod(total, n_wf)
    per_wf = base + (rng.permutation(n_wf) < extra)
    rc_wf = np.repeat(wf, per_wf)
    rc_index = np.arange(total) - np.repeat(np.cumsum(per_wf) - per_wf, per_wf)
    source = rng.integers(0, agents, total)

    # Failure annotations with exact quotas.
    root_step = rng.integers(1, 41, total)
    surfaced = _exact_subset(rng, total, surfaced_share)
    n_surfaced = int(surfaced.sum())
    latency = np.zeros(total, dtype=np.int64)
    latency[surfaced] = _latencies(rng, n_surfaced, median_latency)
    at_final = np.zeros(total, dtype=bool)
    at_final[surfaced] = _exact_subset(rng, n_surfaced, final_step_share)
    tail = rng.geometric(1 / 5, total)
    silent = 5 + rng.geometric(1 / 12, total)
    surfaced_step = root_step + latency
    final_step = np.where(
        surfaced, np.where(at_final, surfaced_step, surfaced_step + tail), root_step + silent
    )
    remaining = final_step - root_step

    # States: one per (root cause, depth) reached by the original trajectory.
    reach = depth_arr[np.newaxis, :] < remaining[:, np.newaxis]
    st_rc, st_depth_i = np.nonzero(reach)
    st_depth = depth_arr[st_depth_i]
    n_states = st_rc.size
    depth_scale = 1.0 + st_depth / 25.0
    replay_ok = rng.random(n_states) >= replay_mismatch_rate * depth_scale
    expected_ok = rng.random(n_states) >= missing_expected_rate
    difficulty = rng.normal(0.0, 1.0, n_states)
    wf_split = rng.integers(0, len(splits), n_wf)
    leak_wf = (rng.random(n_wf) < leak_rate) if len(splits) > 1 else np.zeros(n_wf, dtype=bool)
    st_wf_local = rc_wf[st_rc] - start
    split_code = wf_split[st_wf_local]
    # A leaking workflow moves the states of its first root cause to the next split.
    leaks = leak_wf[st_wf_local] & (rc_index[st_rc] == 0)
    split_code = np.where(leaks, (split_code + 1) % len(splits), split_code)

    wf_ids = _ids("w", rc_wf, 6)
    rc_ids = pl.select(
        pl.format("{}-r{}", pl.lit(wf_ids), pl.lit(pl.Series(rc_index, dtype=pl.Int64)))
    ).to_series()
    state_rc_ids = rc_ids.gather(st_rc)
    state_ids = pl.select(
        pl.format(
            "{}-d{}",
            pl.lit(state_rc_ids),
            pl.lit(pl.Series(st_depth, dtype=pl.Int64)).cast(pl.String).str.zfill(2),
        )
    ).to_series()
    states = pl.DataFrame(
        {
            "state_id": state_ids,
            "workflow_id": wf_ids.gather(st_rc),
            "root_cause_id": state_rc_ids,
            "depth": st_depth,
            "replay_ok": replay_ok,
            "expected_ok": expected_ok,
            "split": pl.Series(np.asarray(splits, dtype=object)[split_code], dtype=pl.String),
            "prefix_version": ["repaired"] * n_states,
            "action_space": ["gui+cli"] * n_states,
            "context_window": np.full(n_states, 20, dtype=np.int64),
            "verifier_version": ["v1"] * n_states,
            "budget": np.full(n_states, 100, dtype=np.int64),
            "source_agent": pl.Series(np.asarray(names, dtype=object)[source[st_rc]]),
            "planted_difficulty": difficulty,
            "planted_leak": leak_wf[st_wf_local],
        }
    )

    # Units: every eligible state × agent, minus a few that never ran.
    eligible = np.flatnonzero(replay_ok & expected_ok)
    unit_state = np.repeat(eligible, agents)
    unit_agent = np.tile(np.arange(agents), eligible.size)
    ran = rng.random(unit_state.size) >= missing_unit_rate
    unit_state, unit_agent = unit_state[ran], unit_agent[ran]
    a_logit, f_logit = agent_parameters(agents)
    d = st_depth[unit_state].astype(np.float64)
    u = difficulty[unit_state]
    p_aware = _sigmoid(a_logit[unit_agent] + AWARE_DEPTH * d + AWARE_U * u)
    fix_logit = f_logit[unit_agent] + FIX_DEPTH * d - FIX_U * u
    p_fix_aware = _sigmoid(fix_logit + FIX_AWARE)
    p_fix_unaware = _sigmoid(fix_logit)
    p_derived = _sigmoid(DERIVED_BASE + DERIVED_DEPTH * d - DERIVED_U * u)
    p_repaired = (p_aware * p_fix_aware + (1 - p_aware) * p_fix_unaware) * p_derived
    p_pass = p_repaired * PASS_REPAIRED + (1 - p_repaired) * PASS_UNREPAIRED

    # Attempts: repeats of every unit, outcomes drawn along the funnel.
    at_unit = np.repeat(np.arange(unit_state.size), repeats)
    at_repeat = np.tile(np.arange(repeats), unit_state.size)
    n_at = at_unit.size
    aware = rng.random(n_at) < p_aware[at_unit]
    fixed = rng.random(n_at) < np.where(aware, p_fix_aware[at_unit], p_fix_unaware[at_unit])
    derived = fixed & (rng.random(n_at) < p_derived[at_unit])
    passed = rng.random(n_at) < np.where(derived, PASS_REPAIRED, PASS_UNREPAIRED)
    steps = np.where(passed, rng.integers(8, 90, n_at), rng.integers(30, 101, n_at))
    attempts = pl.DataFrame(
        {
            "state_id": state_ids.gather(unit_state[at_unit]),
            "agent": pl.Series(np.asarray(names, dtype=object)[unit_agent[at_unit]]),
            "repeat": at_repeat.astype(np.int64),
            "aware": aware,
            "root_cause_fixed": fixed,
            "derived_fixed": derived,
            "passed": passed,
            "steps": steps.astype(np.int64),
            "cost": np.round(steps * rng.uniform(0.01, 0.03, n_at), 4),
            "seconds": np.round(steps * rng.uniform(8.0, 25.0, n_at), 1),
            "planted_p_aware": p_aware[at_unit],
            "planted_p_pass": p_pass[at_unit],
        }
    )

    failures = pl.DataFrame(
        {
            "root_cause_id": rc_ids,
            "root_cause_step": root_step.astype(np.int64),
            "surfaced_step": pl.select(
                pl.when(pl.lit(pl.Series(surfaced))).then(pl.lit(pl.Series(surfaced_step)))
            ).to_series(),
            "final_step": final_step.astype(np.int64),
            "source_agent": pl.Series(np.asarray(names, dtype=object)[source]),
        }
    )

    # Mutation tests of every workflow's verifier.
    n_mut = 8 + rng.integers(0, 5, n_wf)
    catch_rate = rng.beta(8.0, 2.0, n_wf)
    mut_wf = np.repeat(np.arange(n_wf), n_mut)
    mut_index = np.arange(n_mut.sum()) - np.repeat(np.cumsum(n_mut) - n_mut, n_mut)
    executed = rng.random(mut_wf.size) < 0.9
    caught = executed & (rng.random(mut_wf.size) < catch_rate[mut_wf])
    mutations = pl.DataFrame(
        {
            "workflow_id": _ids("w", wf[mut_wf], 6),
            "mutation_id": _ids("m", mut_index, 2),
            "executed": executed,
            "caught": caught,
            "planted_catch_rate": catch_rate[mut_wf],
        }
    )
    return {"states": states, "attempts": attempts, "failures": failures, "mutations": mutations}


def _check(
    agents: int,
    repeats: int,
    depths: Sequence[int],
    median_latency: int,
    splits: Sequence[str],
    leak_rate: float,
) -> None:
    for name, value in (("agents", agents), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError(f"parameter `{name}` is {value!r}; it must be a positive integer.")
    if not depths or any(not isinstance(x, int) or x < 0 for x in depths):
        raise ParameterError(f"parameter `depths` is {depths!r}; it must be non-negative integers.")
    if not isinstance(median_latency, int) or median_latency < 1:
        raise ParameterError(
            f"parameter `median_latency` is {median_latency!r}; it must be an integer >= 1."
        )
    if isinstance(splits, str) or not splits:
        raise ParameterError(f"parameter `splits` is {splits!r}; it must be a list of labels.")
    if not 0 <= leak_rate <= 1:
        raise ParameterError(f"parameter `leak_rate` is {leak_rate!r}; it must be in [0, 1].")


register(
    Generator(
        name="takeover",
        tables=("states", "attempts", "failures", "mutations"),
        block=block,
        description="CUA-Recovery takeover: replayed error states, attempts by several agents, "
        "failure annotations and verifier mutation tests; unit = workflow.",
    )
)
