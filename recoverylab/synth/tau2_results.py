"""tau2-bench results files made offline, with known outcomes (tests, README, benchmarks).

tau2-bench (sierra-research/tau2-bench) writes one results file per run of (domain, agent, user
simulator): a ``Results`` document (``src/tau2/data_model/simulation.py``) with ``info``
(``num_trials``, ``seed``, ``agent_info``/``user_info`` with ``implementation`` and ``llm``,
``environment_info.domain_name``), ``tasks`` and ``simulations`` (``SimulationRun``: ``id``,
``task_id``, ``trial``, ``seed``, ``termination_reason``, ``reward_info.reward``, costs,
durations). Its newer *directory* layout keeps the same document without ``simulations`` in
``results.json``, adds a ``simulation_index`` (``SimulationIndexEntry``: id, task_id, trial,
reward, termination_reason, agent_cost, duration) and writes each simulation to
``simulations/<id>.json``. :func:`write_tau2_results` writes either layout with the field names
of those models (mirrored from the published source, not imported: tau2-bench is not on PyPI).

Each simulation's termination and reward are a seeded function of (domain, agent, task, trial):
every ``TerminationReason`` occurs, rewards are partial (0, 0.5, 1; tau2 counts only a reward of
1 as a success), and runs that ended early get reward 0 as tau2's evaluator gives them. With
``resumed=True`` a run was stopped and resumed the way tau2's checkpoint resume works
(``runner/checkpoint.py``: infrastructure errors are re-run, every other simulation is kept): the
file given holds an infrastructure-error simulation *and* its retry for some (task, trial), and a
copy of the checkpoint taken before the resume is written to
``checkpoints/<name>.checkpoint.json`` (json layout).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recoverylab._errors import ParameterError
from recoverylab.adapters.tau2 import TERMINATION_REASONS  # the values tau2-bench declares

__all__ = ["TERMINATION_REASONS", "results_document", "write_tau2_results"]

#: How often each termination occurs (the two normal stops dominate).
_TERMINATION_WEIGHTS = (0.35, 0.35, 0.05, 0.04, 0.03, 0.03, 0.03, 0.06, 0.04, 0.02)
_NORMAL_STOPS = ("user_stop", "agent_stop")

#: Default experiment grid: domains x (agent implementation, agent llm).
DOMAINS = ("airline", "retail", "telecom")
AGENTS = (("llm_agent", "gpt-4.1"), ("llm_agent", "o4-mini"))
USER_LLM = "gpt-4.1"


def _simulation(
    rng: np.random.Generator, task_id: str, trial: int, seed: int, run: str
) -> dict[str, Any]:
    """One ``SimulationRun`` (messages left empty: the adapter never reads them)."""
    reason = TERMINATION_REASONS[int(rng.choice(len(TERMINATION_REASONS), p=_TERMINATION_WEIGHTS))]
    if reason in _NORMAL_STOPS:
        reward = float(rng.choice([0.0, 0.5, 1.0], p=[0.3, 0.15, 0.55]))
    else:
        reward = 0.0  # tau2's evaluator: a run that ended prematurely scores 0
    infra = reason == "infrastructure_error"
    duration = round(float(rng.uniform(5, 120)), 3)
    reward_info = {
        "reward": reward,
        "db_check": None,
        "env_assertions": None,
        "action_checks": None,
        "nl_assertions": None,
        "communicate_checks": None,
        "reward_basis": ["DB"] if reason in _NORMAL_STOPS else None,
        "reward_breakdown": {"DB": reward} if reason in _NORMAL_STOPS else None,
        "info": None
        if reason in _NORMAL_STOPS
        else {"note": f"Simulation terminated prematurely. Termination reason: {reason}"},
    }
    return {
        "id": f"{run}-{task_id}-{trial}-{int(rng.integers(1 << 30)):08x}",
        "task_id": task_id,
        "timestamp": "2026-01-01T00:00:00",
        "start_time": "2026-01-01T00:00:00",
        "end_time": "2026-01-01T00:01:00",
        "duration": duration,
        "termination_reason": reason,
        "agent_cost": None if infra else round(float(rng.uniform(0, 0.2)), 5),
        "user_cost": None if infra else round(float(rng.uniform(0, 0.05)), 5),
        "reward_info": reward_info,
        "messages": [],
        "trial": trial,
        "seed": seed,
        "mode": "half_duplex",
        "info": None,
        "hallucination_retries_used": 0,
    }


def results_document(
    domain: str,
    agent: tuple[str, str],
    *,
    tasks: int = 6,
    trials: int = 4,
    seed: int = 0,
    resumed: bool = False,
) -> dict[str, Any]:
    """Return one tau2-bench ``Results`` document (json layout) as plain JSON values.

    Parameters
    ----------
    domain, agent
        ``environment_info.domain_name`` and (``agent_info.implementation``, ``agent_info.llm``).
    tasks, trials
        Tasks (ids ``"0"``, ``"1"``, ...) and ``info.num_trials``.
    seed
        Seeds the outcomes (and ``info.seed``; trial t runs with seed ``seed + t`` as tau2 does).
    resumed
        Keep, for about one (task, trial) in six, an infrastructure-error simulation beside its
        successful retry, as a resumed run's file holds them when the checkpoint was appended to.
    """
    name = f"{agent[1]}_{domain}"
    mix = [ord(c) for c in f"{domain}|{agent[0]}|{agent[1]}"]
    rng = np.random.default_rng([seed, *mix])
    simulations: list[dict[str, Any]] = []
    for trial in range(trials):
        for task in range(tasks):
            sim = _simulation(rng, str(task), trial, seed + trial, name)
            if resumed and rng.random() < 1 / 6:
                failed = {**_simulation(rng, str(task), trial, seed + trial, name)}
                failed.update(
                    termination_reason="infrastructure_error",
                    agent_cost=None,
                    user_cost=None,
                    reward_info=None,
                )
                simulations.append(failed)
                if sim["termination_reason"] == "infrastructure_error":
                    sim["termination_reason"] = "agent_stop"
            simulations.append(sim)
    info = {
        "git_commit": "0" * 40,
        "num_trials": trials,
        "max_steps": 200,
        "max_errors": 10,
        "user_info": {
            "implementation": "user_simulator",
            "llm": USER_LLM,
            "llm_args": {"temperature": 0.0},
            "global_simulation_guidelines": None,
        },
        "agent_info": {"implementation": agent[0], "llm": agent[1], "llm_args": {}},
        "environment_info": {"domain_name": domain, "policy": "(policy)", "tool_defs": None},
        "seed": seed,
    }
    task_list = [
        {"id": str(t), "description": None, "user_scenario": {"instructions": f"task {t}"}}
        for t in range(tasks)
    ]
    return {
        "timestamp": "2026-01-01T00:00:00",
        "info": info,
        "tasks": task_list,
        "simulations": simulations,
    }


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _index_entry(sim: dict[str, Any]) -> dict[str, Any]:
    reward = sim["reward_info"]["reward"] if sim["reward_info"] else None
    keys = ("id", "task_id", "trial", "termination_reason", "agent_cost", "duration")
    return {**{k: sim[k] for k in keys}, "reward": reward}


def _write_dir(root: Path, document: dict[str, Any]) -> Path:
    """Write the dir layout: ``results.json`` (an index, no simulations) + ``simulations/``."""
    meta = {k: v for k, v in document.items() if k != "simulations"}
    meta["simulation_index"] = [_index_entry(s) for s in document["simulations"]]
    _write_json(root / "results.json", meta)
    for sim in document["simulations"]:
        _write_json(root / "simulations" / f"{sim['id']}.json", sim)
    return root


def write_tau2_results(
    out_dir: str | Path,
    *,
    domains: Sequence[str] = DOMAINS,
    agents: Sequence[tuple[str, str]] = AGENTS,
    tasks: int = 6,
    trials: int = 4,
    seed: int = 0,
    layout: str = "json",
    resumed: bool = False,
) -> list[Path]:
    """Write one tau2-bench results file (or directory) per (domain, agent); return their paths.

    Parameters
    ----------
    out_dir
        Directory to write into (created).
    domains, agents, tasks, trials, seed, resumed
        As in :func:`results_document`.
    layout
        ``"json"``: ``<llm>_<domain>.json`` files holding the whole document; ``"dir"``: a
        directory ``<llm>_<domain>/`` with ``results.json`` (index) and ``simulations/``.

    Returns
    -------
    list[pathlib.Path]
        The results files (json layout) or directories (dir layout), sorted.

    Examples
    --------
    >>> import tempfile
    >>> paths = write_tau2_results(tempfile.mkdtemp(), domains=("retail",), tasks=2, trials=2)
    >>> [p.name for p in paths]
    ['gpt-4.1_retail.json', 'o4-mini_retail.json']
    """
    if layout not in ("json", "dir"):
        raise ParameterError(f"parameter `layout` is {layout!r}; it must be 'json' or 'dir'.")
    out = Path(out_dir)
    written = []
    for domain in domains:
        for agent in agents:
            document = results_document(
                domain, agent, tasks=tasks, trials=trials, seed=seed, resumed=resumed
            )
            stem = f"{agent[1]}_{domain}"
            if layout == "dir":
                written.append(_write_dir(out / stem, document))
                continue
            path = out / f"{stem}.json"
            _write_json(path, document)
            written.append(path)
            if resumed:  # the checkpoint as it was before the resume: no retries yet
                before = {**document, "simulations": _before_resume(document["simulations"])}
                _write_json(out / "checkpoints" / f"{stem}.checkpoint.json", before)
    return sorted(written)


def _before_resume(simulations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return what the checkpoint held before the resume: a retried key's failed run only."""
    failed = {
        (s["task_id"], s["trial"])
        for s in simulations
        if s["termination_reason"] == "infrastructure_error"
    }
    kept: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    for sim in simulations:
        key = (sim["task_id"], sim["trial"])
        if key in failed and key in seen:
            continue  # the retry came after the resume
        seen.add(key)
        kept.append(sim)
    return kept
