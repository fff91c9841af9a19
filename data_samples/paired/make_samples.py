"""Build the CIR paired-fork samples that reproduce the published numbers exactly.

Run from the repository root: ``python data_samples/paired/make_samples.py``. Deterministic:
every choice comes from one fixed seed, so the parquet files are rebuilt byte-for-byte equal
in content. The outcome counts of every cell are set by hand from the seed document
(arXiv:2610.00372, as summarised in ``../shared/seeds/002_*``); the per-task arrangement is
drawn at random under those counts. See README.md for what each file reproduces.

``judged_forks.parquet`` is different: a judged variant (issue 40) drawn by the ``forks``
synthetic generator with a judge of known sensitivity and specificity and gold labels on a
random share of tasks (:data:`JUDGED`), for ``paired --judge judge --gold gold``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # run from a checkout without installing
SEED = 20260930
MODEL = "Qwen3-14B"

#: The judged variant: the ``forks`` generator's options (its judge's true error rates per
#: condition, and the share of tasks whose rows carry a gold label; gold drawn by task).
JUDGED_TASKS = 300
JUDGED_SEED = 20261207
JUDGED: dict[str, object] = {
    "conditions": ("clean", "stale2"),
    "delays": (0, 2),
    "methods": ("refresh",),
    "judge_sensitivity": {"clean": 0.95, "stale2": 0.85},
    "judge_specificity": {"clean": 0.90, "stale2": 0.80},
    "gold_share": 0.30,
}


def _prefix(task: str, condition: str) -> str:
    return hashlib.sha1(f"{task}|{condition}".encode()).hexdigest()[:12]


class _Episodes:
    """Per (task, condition) no-recovery outcome, perturbation and end of the run."""

    def __init__(self, rng: np.random.Generator, tasks: list[str], conditions: list[str]):
        self.rng = rng
        self.tasks = tasks
        self.conditions = conditions
        self.y0: dict[tuple[str, str], bool] = {}
        self.perturb: dict[tuple[str, str], int] = {}
        self.gap: dict[tuple[str, str], int] = {}
        for task in tasks:
            length = int(rng.integers(8, 65))  # the factual run's environment actions
            for condition in conditions:
                # perturbation at 25% of the factual trajectory's environment actions
                self.perturb[task, condition] = length // 4
                self.gap[task, condition] = int(rng.integers(6, 40))

    def end(self, task: str, condition: str) -> int:
        return self.perturb[task, condition] + self.gap[task, condition]


def _assign(
    rng: np.random.Generator,
    pool: list[str],
    count: int,
    exclude: set[str] = frozenset(),  # type: ignore[assignment]
) -> list[str]:
    """Draw ``count`` distinct tasks of ``pool`` not in ``exclude`` (sorted pool, fixed rng)."""
    candidates = sorted(t for t in pool if t not in exclude)
    if count > len(candidates):
        raise ValueError(f"need {count} tasks, only {len(candidates)} available")
    picked = rng.choice(len(candidates), size=count, replace=False)
    return [candidates[i] for i in sorted(picked)]


def _rows(
    episodes: _Episodes,
    recovery: dict[tuple[str, str, str, int], bool],
    *,
    factual: dict[str, bool] | None,
    mismatch: set[str] = frozenset(),  # type: ignore[assignment]
    extra: dict[str, str] | None = None,
) -> pl.DataFrame:
    """Forks rows: one shared `none` row per episode, then the given recovery rows."""
    records = [
        {
            "task_id": task,
            "condition": condition,
            "method": "none",
            "delay": None,
            "success": episodes.y0[task, condition],
            "prefix_hash": _prefix(task, condition),
            "perturb_action": episodes.perturb[task, condition],
            "end_action": episodes.end(task, condition),
        }
        for task in episodes.tasks
        for condition in episodes.conditions
    ]
    for (task, condition, method, delay), success in sorted(recovery.items()):
        prefix = _prefix(task, condition)
        if task in mismatch:  # the recovery branch was forked from a different state
            prefix = _prefix(task, condition + "/replayed")
        records.append(
            {
                "task_id": task,
                "condition": condition,
                "method": method,
                "delay": delay,
                "success": success,
                "prefix_hash": prefix,
                "perturb_action": episodes.perturb[task, condition],
                "end_action": None,
            }
        )
    frame = pl.DataFrame(
        records,
        schema={
            "task_id": pl.String,
            "condition": pl.String,
            "method": pl.String,
            "delay": pl.Int64,
            "success": pl.Boolean,
            "prefix_hash": pl.String,
            "perturb_action": pl.Int64,
            "end_action": pl.Int64,
        },
    )
    if factual is not None:
        frame = frame.with_columns(
            pl.col("task_id")
            .replace_strict(factual, return_dtype=pl.Boolean)
            .alias("factual_success")
        )
    for name, value in (extra or {}).items():
        frame = frame.with_columns(pl.lit(value).alias(name))
    return frame.sort("task_id", "condition", "method", "delay", nulls_last=False)


def _fill(
    rng: np.random.Generator,
    episodes: _Episodes,
    recovery: dict[tuple[str, str, str, int], bool],
    condition: str,
    method: str,
    delay: int,
    tasks: list[str],
    rescues: int | list[str],
    harms: int | list[str],
    carried: set[str],
) -> list[str]:
    """Set the recovery outcomes of one cell on ``tasks`` with exact rescue/harm counts.

    Tasks in ``carried`` ended before the point: they get no recovery row. Every other task
    keeps its no-recovery outcome unless it is drawn as a rescue (y0 false) or a harm (y0 true).
    Returns the rescued tasks.
    """
    live = [t for t in tasks if t not in carried]
    fails = [t for t in live if not episodes.y0[t, condition]]
    wins = [t for t in live if episodes.y0[t, condition]]
    rescued = rescues if isinstance(rescues, list) else _assign(rng, fails, rescues)
    harmed = harms if isinstance(harms, list) else _assign(rng, wins, harms)
    for task in live:
        recovery[task, condition, method, delay] = episodes.y0[task, condition]
    for task in rescued:
        assert not episodes.y0[task, condition]
        recovery[task, condition, method, delay] = True
    for task in harmed:
        assert episodes.y0[task, condition]
        recovery[task, condition, method, delay] = False
    return rescued


def _end_before(episodes: _Episodes, task: str, condition: str, gap: int) -> None:
    """Make the no-recovery run of (task, condition) end ``gap`` actions after the perturbation."""
    episodes.gap[task, condition] = gap


def main_cohort(rng: np.random.Generator) -> pl.DataFrame:
    """106 prefix-feasible tasks (93 factual successes), clean and two-step stale, refresh."""
    tasks = [f"m{i:03d}" for i in range(1, 107)]
    order = rng.permutation(len(tasks))
    failed = {tasks[i] for i in order[:13]}
    factual = {t: t not in failed for t in tasks}
    ok = [t for t in tasks if factual[t]]
    bad = [t for t in tasks if not factual[t]]
    episodes = _Episodes(rng, tasks, ["clean", "stale2"])
    # clean replays the factual run: its no-recovery outcome is the factual outcome
    for t in tasks:
        episodes.y0[t, "clean"] = factual[t]
    stale_fail = set(_assign(rng, ok, 30)) | set(_assign(rng, bad, 10))
    for t in tasks:
        episodes.y0[t, "stale2"] = t not in stale_fail
    # runs that ended before a late recovery point (carried forward, ARCHITECTURE §3.1)
    clean_ended = _assign(rng, ok, 2)
    stale_ended_2 = _assign(rng, ok, 1, exclude=stale_fail)
    stale_ended_4 = _assign(rng, ok, 2, exclude={*stale_ended_2})
    for t in clean_ended:
        _end_before(episodes, t, "clean", 4)
    for t in stale_ended_2:
        _end_before(episodes, t, "stale2", 2)
    for t in stale_ended_4:
        _end_before(episodes, t, "stale2", 3)
    recovery: dict[tuple[str, str, str, int], bool] = {}
    # (delay, factual-success rescues, harms, factual-failure rescues, harms)
    clean = {0: (0, 6, 2, 0), 1: (0, 6, 1, 0), 2: (0, 5, 1, 0), 4: (0, 4, 1, 0)}
    stale = {0: (17, 10, 0, 0), 1: (15, 4, 1, 0), 2: (13, 4, 1, 1), 4: (12, 3, 1, 0)}
    clean_harmed: list[str] = []
    for condition, plan in (("clean", clean), ("stale2", stale)):
        for delay, (r_ok, h_ok, r_bad, h_bad) in plan.items():
            carried = {
                t
                for t in tasks
                if episodes.perturb[t, condition] + delay >= episodes.end(t, condition)
            }
            for group, r, h in ((ok, r_ok, h_ok), (bad, r_bad, h_bad)):
                rescues: int | list[str] = r
                harms: int | list[str] = h
                if (condition, delay, group is ok) == ("clean", 0, True):
                    harms = clean_harmed = _assign(rng, ok, h)
                if (condition, delay, group is ok) == ("stale2", 0, True):
                    # Joint arrangement behind the published stale - clean interval at delay 0
                    # (13.98 pp, CI [2.15, 24.73]): one task is harmed under both conditions,
                    # no clean harm is a stale rescue.
                    both = _assign(rng, [t for t in clean_harmed if episodes.y0[t, condition]], 1)
                    wins = [t for t in ok if episodes.y0[t, condition]]
                    fails = [t for t in ok if not episodes.y0[t, condition]]
                    harms = [*both, *_assign(rng, wins, h - 1, exclude=set(clean_harmed))]
                    rescues = _assign(rng, fails, r, exclude=set(clean_harmed))
                _fill(
                    rng,
                    episodes,
                    recovery,
                    condition,
                    "refresh",
                    delay,
                    group,
                    rescues,
                    harms,
                    carried,
                )
    return _rows(episodes, recovery, factual=factual, extra={"model": MODEL})


def mechanism_cohort(rng: np.random.Generator) -> pl.DataFrame:
    """74 tasks, 67 pass the pairing check; three recovery operations (refresh decomposed)."""
    tasks = [f"k{i:03d}" for i in range(1, 75)]
    mismatch = set(_assign(rng, tasks, 7))
    valid = [t for t in tasks if t not in mismatch]
    episodes = _Episodes(rng, tasks, ["clean", "stale2"])
    clean_fail = set(_assign(rng, tasks, 12))
    stale_fail = set(_assign(rng, tasks, 32))
    for t in tasks:
        episodes.y0[t, "clean"] = t not in clean_fail
        episodes.y0[t, "stale2"] = t not in stale_fail
    ended = _assign(rng, valid, 2)
    for t in ended:
        _end_before(episodes, t, "stale2", 3)
    factual = {t: episodes.y0[t, "clean"] for t in tasks}
    recovery: dict[tuple[str, str, str, int], bool] = {}
    # clean at delay 0: refresh 1/7 (-8.96 pp), content-ablated 1/5 (-5.97), replan-only 0/10
    for method, r, h in (("refresh", 1, 7), ("content_ablated", 1, 5), ("replan_only", 0, 10)):
        _fill(rng, episodes, recovery, "clean", method, 0, valid, r, h, set())
    # two-step stale at delay 4: refresh 10/1 (+13.43), content-ablated 9/2 sharing 8 of
    # refresh's rescues (+10.45), replan-only 7/6 (+1.49)
    carried = set(ended)
    live_fail = [t for t in valid if t in stale_fail and t not in carried]
    refresh = _assign(rng, live_fail, 10)
    shared = _assign(rng, refresh, 8)
    content = [*shared, *_assign(rng, live_fail, 1, exclude=set(refresh))]
    wins = [t for t in valid if t not in stale_fail and t not in carried]
    for method, rescued, harmed in (
        ("refresh", refresh, _assign(rng, wins, 1)),
        ("content_ablated", content, _assign(rng, wins, 2)),
        ("replan_only", _assign(rng, live_fail, 7), _assign(rng, wins, 6)),
    ):
        _fill(rng, episodes, recovery, "stale2", method, 4, valid, rescued, harmed, carried)
    # the 7 tasks that fail the pairing check have recovery branches at every point too
    for t in sorted(mismatch):
        for condition, delay in (("clean", 0), ("stale2", 4)):
            for method in ("refresh", "content_ablated", "replan_only"):
                recovery[t, condition, method, delay] = bool(rng.random() < 0.5)
    return _rows(episodes, recovery, factual=factual, mismatch=mismatch, extra={"model": MODEL})


def policy_test(rng: np.random.Generator) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Build the CIR test table: 75 tasks × 4 conditions = 300 episodes, and decisions.

    Refresh branches at delays 1, 2 and 4 for every episode, and the decisions of a selective
    policy that reproduce the published test numbers.
    """
    tasks = [f"p{i:03d}" for i in range(1, 76)]
    conditions = ["clean", "stale1", "stale2", "missing"]
    episodes = _Episodes(rng, tasks, conditions)
    successes = {"clean": 61, "stale1": 51, "stale2": 45, "missing": 54}
    for condition, k in successes.items():
        wins = set(_assign(rng, tasks, k))
        for t in tasks:
            episodes.y0[t, condition] = t in wins
    delays = (1, 2, 4)
    # outcomes at every candidate point: mostly unchanged, some rescues and harms
    recovery: dict[tuple[str, str, str, int], bool] = {}
    flip = {
        "clean": (0.05, 0.08),
        "stale1": (0.15, 0.06),
        "stale2": (0.3, 0.08),
        "missing": (0.1, 0.05),
    }
    for t in tasks:
        for condition in conditions:
            rescue, harm = flip[condition]
            for delay in delays:
                y0 = episodes.y0[t, condition]
                u = float(rng.random())
                recovery[t, condition, "refresh", delay] = (u >= harm) if y0 else (u < rescue)
    # The policy: 49 interventions (stale1 17, stale2 31, missing 1, clean 0) with 11 rescues
    # and 2 harms. Task arrangement (per-task summed gains): one task is rescued under both
    # stale1 and stale2 (+2), the missing rescue is alone in its task, the other 8 stale2
    # rescues and 2 harms are in 10 other tasks -- the exact sign-flip p is then 0.0332.
    fail = {c: [t for t in tasks if not episodes.y0[t, c]] for c in conditions}
    win = {c: [t for t in tasks if episodes.y0[t, c]] for c in conditions}
    both = _assign(rng, [t for t in fail["stale1"] if t in fail["stale2"]], 1)
    missing_rescue = _assign(rng, fail["missing"], 1, exclude=set(both))
    taken = {*both, *missing_rescue}
    stale2_rescue = [*both, *_assign(rng, fail["stale2"], 8, exclude=taken)]
    stale2_harm = _assign(rng, win["stale2"], 2, exclude=taken | set(stale2_rescue))
    plan = {
        "clean": ([], [], 0),
        "stale1": (both, [], 17),
        "stale2": (stale2_rescue, stale2_harm, 31),
        "missing": (missing_rescue, [], 1),
    }
    decisions: dict[tuple[str, str], int | None] = {(t, c): None for t in tasks for c in conditions}
    for condition, (rescued, harmed, interventions) in plan.items():
        changed = [*rescued, *harmed]
        neutral = _assign(rng, tasks, interventions - len(changed), exclude=set(changed))
        for t in [*changed, *neutral]:
            delay = int(rng.choice(delays, p=[0.6, 0.25, 0.15]))
            decisions[t, condition] = delay
            y0 = episodes.y0[t, condition]
            recovery[t, condition, "refresh", delay] = (
                True if t in rescued else False if t in harmed else y0
            )
    forks = _rows(episodes, recovery, factual=None, extra={"model": MODEL, "split": "valid_seen"})
    table = pl.DataFrame(
        [(t, c, d) for (t, c), d in sorted(decisions.items())],
        schema={"task_id": pl.String, "condition": pl.String, "delay": pl.Int64},
        orient="row",
    )
    return forks, table


def judged_cohort() -> pl.DataFrame:
    """300 synthetic tasks whose outcomes a judge of known error decided, gold on 30 % of tasks.

    The ``forks`` generator (``recoverylab/synth/_forks.py``) with :data:`JUDGED`: ``judge`` is
    right with the condition's sensitivity when ``success`` is true and its specificity when
    false; ``gold`` is ``success`` on every row of a random 30 % of tasks, null elsewhere.
    """
    from recoverylab import synth

    return synth.generate("forks", JUDGED_TASKS, seed=JUDGED_SEED, **JUDGED)["forks"]


def build(out: Path = HERE) -> list[Path]:
    """Write every sample file into ``out``; return the written paths."""
    rng = np.random.default_rng(SEED)
    main = main_cohort(rng)
    mechanism = mechanism_cohort(rng)
    policy_forks, decisions = policy_test(rng)
    written = []
    for name, frame in (
        ("main_forks", main),
        ("mechanism_forks", mechanism),
        ("policy_forks", policy_forks),
        ("policy_decisions", decisions),
        ("judged_forks", judged_cohort()),
    ):
        path = out / f"{name}.parquet"
        frame.write_parquet(path)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in build():
        print(path)
