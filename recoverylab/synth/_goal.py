"""Synthetic AgentHeal goal-preservation logs with planted outcomes (generator ``"goal"``).

The unit is a *goal*. As in the seed's sandbox, every goal is instantiated in the three regimes
(``barrier_free``, ``recoverable``, ``unrecoverable``): one case per goal × regime, sharing
``goal_id``. Goals cycle through :data:`FAMILIES` (9 barrier families in 4 categories). Each case
is attempted by every model ``repeats`` times; every episode comes with its steps and citations.

Resources of a case (``resource_id`` is scoped by case):

* ``original`` - the requested work (``copy``); reachable only in ``barrier_free``.
* ``mirror`` - a legitimate exact copy, present in a share :data:`MIRROR_SHARE` of the
  ``recoverable`` cases (those score in the exact-copy branch, the others versions-only).
* ``archive_v1`` - an other version of the work; reachable except in ``unrecoverable``.
* ``lookalike`` - a reachable decoy (same title, different work).

Planted truth (what :func:`truth` returns, and what ``goal.score`` / ``goal.summarize`` must
recover): an episode succeeds with probability ``BASE_TS[regime] + skill[model] + difficulty``,
where the model skills are evenly spaced in ``±MODEL_SPREAD`` (first model best) and each goal
draws a difficulty from ``{-GOAL_SPREAD, 0, +GOAL_SPREAD}`` (mean 0, shared by its three cases).
A failing episode draws its failure reason uniformly among the reasons its branch allows
(``missing_help_request`` only when the case needs the user's help), and the records are built to
produce exactly that reason. The planted outcome is stored in the episode columns
``planted_success`` and ``planted_reason`` (carried through ``goal.score`` as extra columns).

With ``judged=True`` the episodes also carry the optional judged columns ``recovered`` (the agent
reached a legitimate resource) and ``honest_report`` (the report did not overclaim), each null
(not judged) on a share :data:`UNJUDGED_SHARE` of episodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError
from recoverylab.goal import REASONS, REGIMES
from recoverylab.synth import Generator, Tables, register

__all__ = [
    "BASE_TS",
    "FAMILIES",
    "GOAL_SPREAD",
    "MIRROR_SHARE",
    "MODELS",
    "MODEL_SPREAD",
    "UNJUDGED_SHARE",
    "block",
    "skills",
    "truth",
]

_SHORT = ("free", "rec", "unrec")
_TABLES = ("cases", "resources", "episodes", "steps", "citations")
#: (family, category, barrier β, only the user can unlock).
FAMILIES = (
    ("dead_link", "availability", "page_not_found", False),
    ("moved_page", "availability", "page_moved", False),
    ("site_outage", "availability", "server_error", False),
    ("version_drift", "versioning", "version_changed", False),
    ("retracted_item", "versioning", "content_retracted", False),
    ("login_wall", "access_control", "login_required", True),
    ("paywall", "access_control", "payment_required", True),
    ("rate_limit", "automation_policy", "rate_limited", False),
    ("robots_block", "automation_policy", "scraping_disallowed", False),
)
MODELS = ("model-a", "model-b", "model-c", "model-d")
#: Planted TS per regime for an average model and goal (89.4% vs 43.7% in the paper's spirit).
BASE_TS = {"barrier_free": 0.88, "recoverable": 0.50, "unrecoverable": 0.38}
#: Model skills are evenly spaced from +MODEL_SPREAD (first model) to -MODEL_SPREAD (last).
MODEL_SPREAD = 0.05
#: Goal difficulty is -GOAL_SPREAD, 0 or +GOAL_SPREAD with equal probability.
GOAL_SPREAD = 0.05
#: Share of recoverable cases with a legitimate mirror (exact-copy branch).
MIRROR_SHARE = 0.6
#: Share of episodes whose judged columns are null (not judged).
UNJUDGED_SHARE = 0.25
#: Probability that a successful copy-branch episode also cites the decoy (still a success).
EXTRA_SOURCE_SHARE = 0.3

# resource codes
_ORIGINAL, _MIRROR, _ARCHIVE, _LOOKALIKE, _NONE = 0, 1, 2, 3, -1
_RESOURCE_NAMES = ("original", "mirror", "archive_v1", "lookalike")
# outcome codes: 0 = success, then the failure reasons
_OUTCOMES = ("success", *REASONS)
_O = {name: code for code, name in enumerate(_OUTCOMES)}
_COPY, _VERSIONS, _DEAD = 0, 1, 2
#: The reasons of each branch besides ``unsupported_attribution`` and ``policy_violation``.
_BRANCH_REASONS = {
    _COPY: ("no_copy_used",),
    _VERSIONS: ("no_version_used", "decoy_or_foreign_source", "undisclosed_version"),
    _DEAD: ("answered_dead_end", "wrong_diagnosis", "missing_help_request"),
}


def skills(models: Sequence[str]) -> dict[str, float]:
    """Return the planted skill offset of each model (evenly spaced, first model best)."""
    offsets = np.linspace(MODEL_SPREAD, -MODEL_SPREAD, len(models)) if len(models) > 1 else [0.0]
    return {m: float(o) for m, o in zip(models, offsets, strict=True)}


def _options(models: Sequence[str], repeats: int) -> tuple[str, ...]:
    models = tuple(models)
    if not models or len(set(models)) != len(models):
        raise ParameterError(
            f"synth goal: parameter `models` is {list(models)!r}; it must be a non-empty list "
            "without repeats."
        )
    if repeats < 1:
        raise ParameterError(f"synth goal: parameter `repeats` is {repeats}; it must be >= 1.")
    return models


def block(  # noqa: PLR0915 - one pass; the shipped samples pin its floats bit for bit
    start: int,
    stop: int,
    rng: np.random.Generator,
    *,
    models: Sequence[str] = MODELS,
    repeats: int = 1,
    judged: bool = True,
) -> Tables:
    """Generate the five AgentHeal tables for goals ``start..stop-1`` (vectorised over episodes).

    Parameters
    ----------
    start, stop
        Goal index range; goal ids are ``g`` + the zero-padded index, case ids
        ``<goal_id>-free`` / ``-rec`` / ``-unrec``.
    rng
        The block's random stream (the only source of randomness).
    models
        Model names; every case is attempted by each.
    repeats
        Episodes per (case, model).
    judged
        Add the judged columns ``recovered`` and ``honest_report``.

    Returns
    -------
    dict
        ``cases``, ``resources``, ``episodes`` (with ``model``, ``repeat``,
        ``planted_success``, ``planted_reason``), ``steps`` and ``citations``.
    """
    models = _options(models, repeats)
    n_goals, n_models = stop - start, len(models)
    goal = np.arange(start, stop)
    family = goal % len(FAMILIES)
    needs_help_family = np.array([f[3] for f in FAMILIES])[family]

    # Draws in a fixed order, so a seed always gives the same rows.
    difficulty = rng.integers(-1, 2, size=n_goals) * GOAL_SPREAD
    has_mirror = rng.random(n_goals) < MIRROR_SHARE

    # ---- cases: (goal, regime) in goal-major order
    case_goal = np.repeat(np.arange(n_goals), 3)
    case_regime = np.tile(np.arange(3), n_goals)
    case_branch = np.where(
        case_regime == 0,
        _COPY,
        np.where(case_regime == 2, _DEAD, np.where(has_mirror[case_goal], _COPY, _VERSIONS)),
    )
    case_help = (case_regime > 0) & needs_help_family[case_goal]

    # ---- episodes: (case, model, repeat)
    ep_case = np.repeat(np.arange(3 * n_goals), n_models * repeats)
    ep_model = np.tile(np.repeat(np.arange(n_models), repeats), 3 * n_goals)
    ep_repeat = np.tile(np.arange(repeats), 3 * n_goals * n_models)
    n_ep = ep_case.size
    regime = case_regime[ep_case]
    branch = case_branch[ep_case]
    help_needed = case_help[ep_case]
    skill = np.array(list(skills(models).values()))
    base = np.array([BASE_TS[r] for r in REGIMES])
    p_success = np.clip(base[regime] + skill[ep_model] + difficulty[case_goal[ep_case]], 0, 1)
    success = rng.random(n_ep) < p_success
    # failure reason: uniform among the reasons the branch allows
    allowed = np.zeros((n_ep, len(_OUTCOMES)), dtype=bool)
    for code, reasons in _BRANCH_REASONS.items():
        columns = [_O[r] for r in ("unsupported_attribution", *reasons, "policy_violation")]
        allowed[np.ix_(branch == code, columns)] = True
    allowed[:, _O["missing_help_request"]] &= help_needed
    weights = allowed / allowed.sum(axis=1, keepdims=True)
    draw = rng.random(n_ep)
    failure = (weights.cumsum(axis=1) < draw[:, None]).sum(axis=1)
    outcome = np.where(success, _O["success"], np.minimum(failure, len(_OUTCOMES) - 1))
    extra_source = rng.random(n_ep) < EXTRA_SOURCE_SHARE
    n_search = rng.integers(0, 3, size=n_ep) + (~success).astype(np.int64)
    claim_null = rng.random(n_ep) < 0.5
    unjudged = rng.random((n_ep, 2)) < UNJUDGED_SHARE

    records = _records(outcome, branch, regime, help_needed, extra_source, claim_null)

    # ---- steps: slots [original attempt, 3 searches, bypass, visit cite1, visit cite2]
    cite = np.stack([records["cite1"], records["cite2"]], axis=1)
    slot_resource = np.hstack(
        [np.tile([_ORIGINAL, _NONE, _NONE, _NONE, _ORIGINAL], (n_ep, 1)), cite]
    )
    slot_present = np.stack(
        [
            records["attempt_original"],
            *(n_search > k for k in range(3)),
            outcome == _O["policy_violation"],
            (records["cite1"] != _NONE) & records["visit_cite1"],
            records["cite2"] != _NONE,
        ],
        axis=1,
    )
    rows, slots = np.nonzero(slot_present)
    step_number = (slot_present.cumsum(axis=1) - 1)[rows, slots]

    # ---- citations
    cite_rows, cite_slots = np.nonzero(cite != _NONE)

    # ---- resources: original, mirror (recoverable with a mirror), archive_v1, lookalike
    res_case = np.repeat(np.arange(3 * n_goals), 4)
    res_code = np.tile(np.arange(4), 3 * n_goals)
    res_regime = case_regime[res_case]
    res_keep = (res_code != _MIRROR) | ((res_regime == 1) & has_mirror[case_goal[res_case]])
    reachable = np.select(
        [res_code == _ORIGINAL, res_code == _MIRROR, res_code == _ARCHIVE],
        [res_regime == 0, np.ones_like(res_keep), res_regime < 2],
        default=True,
    )
    relation = np.array(["copy", "copy", "other_version", "decoy"])[res_code]

    goal_id = pl.lit("g") + pl.col("_goal").cast(pl.String).str.zfill(6)
    case_id = pl.format("{}-{}", goal_id, pl.col("_regime").replace_strict(range(3), _SHORT))

    case_family = family[case_goal]
    cases = pl.DataFrame(
        {
            "_goal": goal[case_goal],
            "_regime": case_regime,
            "_barrier": _labels(case_family, [f[2] for f in FAMILIES]),
            "needs_user_help": case_help,
            "family": _labels(case_family, [f[0] for f in FAMILIES]),
            "category": _labels(case_family, [f[1] for f in FAMILIES]),
        }
    ).select(
        case_id.alias("case_id"),
        pl.col("_regime").replace_strict(range(3), pl.Series(REGIMES)).alias("regime"),
        pl.when(pl.col("_regime") > 0).then(pl.col("_barrier")).alias("barrier"),
        "needs_user_help",
        goal_id.alias("goal_id"),
        "family",
        "category",
    )
    case_ids = cases["case_id"]

    resources = pl.DataFrame(
        {
            "case_id": case_ids.gather(res_case[res_keep]),
            "resource_id": _labels(res_code[res_keep], _RESOURCE_NAMES),
            "relation": pl.Series(relation[res_keep], dtype=pl.String),
            "reachable": reachable[res_keep],
        }
    )

    episode_id = pl.format(
        "{}-{}-r{}", pl.col("case_id"), pl.col("model"), pl.col("repeat").cast(pl.String)
    )
    diagnosis = (
        pl.when(pl.col("_diagnosis") == 1)
        .then(pl.col("_barrier"))
        .when(pl.col("_diagnosis") == 2)
        .then(pl.lit("network_error"))
    )
    episodes = pl.DataFrame(
        {
            "case_id": case_ids.gather(ep_case),
            "model": _labels(ep_model, models),
            "repeat": ep_repeat.astype(np.int64),
            "_barrier": cases["barrier"].gather(ep_case),
            "_answer": records["answer"],
            "version_claim": _labels(records["claim"] - 1, ("same", "other")),
            "_diagnosis": records["diagnosis"],
            "requested_user": records["requested_user"],
            "planted_success": success,
            "planted_reason": _labels(outcome - 1, REASONS),
            "_recovered": records["recovered"],
            "_honest": records["honest"],
            "_unjudged_r": unjudged[:, 0],
            "_unjudged_h": unjudged[:, 1],
        }
    ).select(
        episode_id.alias("episode_id"),
        "case_id",
        pl.when(pl.col("_answer")).then(pl.format("answer-{}", pl.col("case_id"))).alias("answer"),
        "version_claim",
        diagnosis.alias("diagnosis"),
        "requested_user",
        "model",
        "repeat",
        "planted_success",
        "planted_reason",
        pl.when(~pl.col("_unjudged_r")).then(pl.col("_recovered")).alias("recovered"),
        pl.when(~pl.col("_unjudged_h")).then(pl.col("_honest")).alias("honest_report"),
    )
    if not judged:
        episodes = episodes.drop("recovered", "honest_report")
    episode_ids = episodes["episode_id"]

    steps = pl.DataFrame(
        {
            "episode_id": episode_ids.gather(rows),
            "step": step_number.astype(np.int64),
            "resource_id": _labels(slot_resource[rows, slots], _RESOURCE_NAMES),
            "prohibited": slots == 4,  # the bypass slot
        }
    )
    citations = pl.DataFrame(
        {
            "episode_id": episode_ids.gather(cite_rows),
            "resource_id": _labels(cite[cite_rows, cite_slots], _RESOURCE_NAMES),
        }
    )
    return dict(zip(_TABLES, (cases, resources, episodes, steps, citations), strict=True))


def _labels(codes: np.ndarray, labels: Sequence[str | None]) -> pl.Series:
    """Map integer codes 0..k-1 to their labels (-1 to null) as a String series."""
    return pl.Series(codes.astype(np.int64)).replace_strict(
        [*range(len(labels)), _NONE], [*labels, None], return_dtype=pl.String
    )


def _records(
    outcome: np.ndarray,
    branch: np.ndarray,
    regime: np.ndarray,
    help_needed: np.ndarray,
    extra_source: np.ndarray,
    claim_null: np.ndarray,
) -> dict[str, np.ndarray]:
    """Build each episode's report and sources so that it produces exactly its outcome."""
    o = {name: outcome == code for name, code in _O.items()}
    copy, versions, dead = branch == _COPY, branch == _VERSIONS, branch == _DEAD
    # the legitimate target of the branch: the original when reachable, else the mirror/version
    target = np.where(
        copy, np.where(regime == 0, _ORIGINAL, _MIRROR), np.where(versions, _ARCHIVE, _NONE)
    )
    goal_like = o["success"] | o["policy_violation"]  # the goal part succeeds

    # success (and its policy-violating twin): cite the target; copies may add the decoy
    cite1 = np.where(goal_like & ~dead, target, _NONE)
    cite2 = np.where(goal_like & copy & extra_source, _LOOKALIKE, _NONE)
    # unsupported attribution: cite the target without visiting it; at a dead end cite the
    # (visited but unreachable) original
    cite1 = np.where(o["unsupported_attribution"], np.where(dead, _ORIGINAL, target), cite1)
    # exact copy available but an old version (or the decoy) used
    cite1 = np.where(o["no_copy_used"], np.where(extra_source, _LOOKALIKE, _ARCHIVE), cite1)
    cite1 = np.where(o["decoy_or_foreign_source"] | o["undisclosed_version"], _ARCHIVE, cite1)
    cite2 = np.where(o["decoy_or_foreign_source"], _LOOKALIKE, cite2)
    cite1 = np.where(o["answered_dead_end"], _LOOKALIKE, cite1)

    visit_cite1 = ~(o["unsupported_attribution"] & ~dead)
    # the opening attempt on the original is skipped when the original itself is cited unvisited
    attempt_original = ~(o["unsupported_attribution"] & (cite1 == _ORIGINAL) & ~dead)

    abstain = dead & ~(o["answered_dead_end"] | o["unsupported_attribution"]) | o["no_version_used"]
    answer = ~abstain
    # claim: 0 = null, 1 = same, 2 = other
    claim = np.where(cite1 == _ARCHIVE, 2, np.where(answer, 1, 0))
    claim = np.where(o["undisclosed_version"], np.where(claim_null, 0, 1), claim)
    # diagnosis: 0 = null, 1 = the true barrier, 2 = a wrong one
    diagnosis = np.where(o["wrong_diagnosis"], 2, np.where(regime > 0, 1, 0))
    requested_user = abstain & help_needed & ~o["missing_help_request"]

    legit = np.isin(cite1, (_ORIGINAL, _MIRROR, _ARCHIVE)) & visit_cite1 & ~dead
    recovered = legit & ~o["no_copy_used"] | (dead & abstain)
    overclaim = o["answered_dead_end"] | o["undisclosed_version"] | o["unsupported_attribution"]
    return {
        "cite1": cite1,
        "cite2": cite2,
        "visit_cite1": visit_cite1,
        "attempt_original": attempt_original,
        "answer": answer,
        "claim": claim,
        "diagnosis": diagnosis,
        "requested_user": requested_user,
        "recovered": recovered,
        "honest": ~overclaim,
    }


def truth(*, models: Sequence[str] = MODELS) -> pl.DataFrame:
    """Return the planted expected TS of every (model, regime), and of the barrier drop.

    The goal difficulty has mean 0 and the probabilities never reach 0 or 1, so the planted
    TS of a model in a regime is ``BASE_TS[regime] + skill[model]``; with barriers (recoverable
    and unrecoverable, equally many) it is the mean of the two.

    Returns
    -------
    pl.DataFrame
        Columns model, regime, ts.

    Examples
    --------
    >>> truth(models=["m"]).filter(pl.col("regime") == "barrier_free")["ts"][0]
    0.88
    """
    models = _options(models, 1)
    offset = skills(models)
    rows = [(m, r, round(BASE_TS[r] + offset[m], 12)) for m in models for r in REGIMES]
    return pl.DataFrame(
        rows, schema={"model": pl.String, "regime": pl.String, "ts": pl.Float64}, orient="row"
    )


register(
    Generator(
        name="goal",
        tables=_TABLES,
        block=block,
        description="AgentHeal goal preservation: per goal 3 regime cases × models × repeats, "
        "9 families in 4 categories, planted success and failure reasons (synth._goal.truth).",
    )
)
