"""Harbor job directories made offline, with known outcomes (tests, README tour, benchmarks).

:func:`write_harbor_jobs` writes what Harbor writes for a recovery experiment run as Harbor jobs: a
job directory with its ``config.json`` (``JobConfig``) and ``result.json`` (``JobResult``), and one
directory per trial (``TASK__`` and 7 random characters) holding the trial's ``config.json``
(``TrialConfig``) and ``result.json`` (``TrialResult``), every field named as in Harbor's pydantic
models (Harbor 0.26.0), computed fields (``reward_valid``, ``ExceptionInfo.policy``) included as
Harbor dumps them. Each arm of the experiment (condition, method, delay) is one agent configuration
whose ``kwargs`` carry the arm; Harbor runs ``n_attempts`` trials of each (task, agent).

The layouts: ``"one_job"`` (every arm an agent of one job), ``"job_per_arm"`` (one job per arm,
under nested directories with odd names), ``"metadata"`` (arms also reported in
``agent_result.metadata``). Each trial's fate is drawn from the seed: a reward (binary ``reward``
and, with ``reward_keys`` of two, a fractional ``partial``), or an exception whose reward Harbor
keeps (agent timeouts, non-zero exits) or voids (sandbox, API and verifier errors), some with a
per-trial ``policy_override``, or no verifier result at all. With ``resumed=True`` a snapshot of
the first job taken before ``harbor jobs resume`` is written beside it (the cancelled trials and
the ones that were complete), and one trial retried in place leaves its failed first run in the
snapshot: the duplicates the adapter must resolve. :class:`HarborTrial` records the truth.

:func:`write_harbor_datasets` writes the same experiment run on several datasets (Harbor's
``source``) whose task names coincide -- the ids a task-identity rule must tell apart.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from recoverylab._errors import ParameterError

__all__ = ["ARMS", "HarborTrial", "write_harbor_datasets", "write_harbor_jobs"]

#: The default arms: (condition, method, delay); ``none`` is the no-recovery run.
ARMS: tuple[tuple[str, str, int | None], ...] = (
    ("clean", "none", None),
    ("stale", "none", None),
    ("stale", "refresh", 1),
    ("stale", "refresh", 3),
)
_Policy = tuple[bool, bool, bool]  # Harbor's (should_retry, should_grade, has_valid_reward)
#: Fates: (exception type, Harbor's policy for it after the override, policy_override, verified).
#: The policies are written out from Harbor's error_policy.py table, by hand.
_FATES: tuple[tuple[str | None, _Policy | None, dict[str, bool] | None, bool], ...] = (
    (None, None, None, True),
    ("AgentTimeoutError", (False, True, True), None, True),
    ("NonZeroAgentExitCodeError", (False, True, True), None, True),
    ("SandboxBuildFailedError", (True, False, False), None, False),
    ("ApiRateLimitError", (True, True, False), None, True),
    ("VerifierTimeoutError", (False, True, False), None, True),
    ("ApiRateLimitError", (True, True, True), {"has_valid_reward": True}, True),
    (
        "AgentTimeoutError",
        (True, True, False),
        {"has_valid_reward": False, "should_retry": True},
        True,
    ),
    ("SomeNewHarnessError", (True, True, True), None, True),  # unknown: Harbor's default policy
    (None, None, None, False),
)
_CANCELLED: _Policy = (False, False, False)
_WEIGHTS = (70, 5, 3, 3, 3, 2, 2, 2, 2, 2)
_LAYOUTS = ("one_job", "job_per_arm", "metadata")
_T0 = datetime(2026, 11, 30, 8, 0, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class HarborTrial:
    """The truth about one written trial (what the adapter should make of it)."""

    file: str
    trial_id: str
    task: str
    condition: str
    method: str
    delay: int | None
    exception_type: str | None
    valid: bool
    reward: float | None
    partial: float | None
    reason: str | None
    superseded: bool = False


def write_harbor_jobs(
    root: str | os.PathLike[str],
    *,
    tasks: int = 6,
    attempts: int = 2,
    arms: Sequence[tuple[str, str, int | None]] = ARMS,
    layout: str = "one_job",
    reward_keys: int = 1,
    funnel: bool = False,
    resumed: bool = False,
    failures: bool = True,
    seed: int = 0,
) -> list[HarborTrial]:
    """Write Harbor job directories under ``root``; return the truth of every trial written.

    Parameters
    ----------
    root
        Directory to write into (created); the jobs lie under it.
    tasks, attempts
        Tasks of the dataset and ``n_attempts`` of each job.
    arms
        (condition, method, delay) of each arm (``method="none"``: no recovery, delay None).
    layout
        ``"one_job"``, ``"job_per_arm"`` or ``"metadata"`` (see the module docstring).
    reward_keys
        1 (``reward``) or 2 (``reward`` and ``partial``).
    funnel
        Add the takeover funnel as binary reward keys (``aware``, ``root_cause_fixed``,
        ``derived_fixed``; each implies the previous).
    resumed
        Also write a pre-resume snapshot of the first job (duplicates to resolve).
    failures
        Draw exceptions and missing verifier results (else every trial gets a reward).
    seed
        Seed of every draw. A trial's draws depend only on (seed, task, arm, attempt), so every
        layout holds the same trials (same outcomes, ids and times).
    """
    if layout not in _LAYOUTS or reward_keys not in (1, 2) or tasks < 1 or attempts < 1:
        raise ParameterError(
            f"write_harbor_jobs: layout must be one of {', '.join(_LAYOUTS)}, reward_keys 1 or 2, "
            "tasks and attempts at least 1."
        )
    rng = random.Random(seed)
    names = [_task_name(i) for i in range(tasks)]
    groups = [list(arms)] if layout != "job_per_arm" else [[arm] for arm in arms]
    out: list[HarborTrial] = []
    for j, group in enumerate(groups):
        job_dir = Path(root) / _job_path(layout, j, group)
        plan = [(t, arm, a) for a in range(attempts) for t in names for arm in group]
        job_id = str(uuid.UUID(int=rng.getrandbits(128)))
        job = _Job(job_dir, job_id, attempts, group, layout, seed, (reward_keys, funnel))
        out += job.write(plan, failures, snapshot=resumed and j == 0)
    return out


def write_harbor_datasets(
    root: str | os.PathLike[str],
    datasets: Sequence[str] = ("recovery-bench", "recovery-bench-hard"),
    *,
    seed: int = 0,
    **options: Any,
) -> dict[str, list[HarborTrial]]:
    """Write one set of jobs per dataset under ``root/<i>/``; task names repeat across datasets.

    Harbor names tasks per dataset (``TrialResult.source``), so two datasets may both hold
    ``fix-git``. Each dataset's jobs are :func:`write_harbor_jobs` with ``options`` and a seed of
    its own (distinct trial and job ids), every ``source`` (the trial's and its config's) set to
    the dataset's name. Returns the truth of every trial, by dataset.
    """
    if len(set(datasets)) != len(datasets) or not datasets:
        raise ParameterError("write_harbor_datasets: give one or more distinct dataset names.")
    out: dict[str, list[HarborTrial]] = {}
    for i, name in enumerate(datasets):
        trials = write_harbor_jobs(Path(root) / str(i), seed=seed * 1000 + i, **options)
        for path in sorted((Path(root) / str(i)).rglob("*.json")):
            document = json.loads(path.read_text(encoding="utf-8"))
            if "source" in document:  # a TrialResult: its source and its config's
                document["source"] = name
                document["config"]["task"]["source"] = name
            elif "trial_name" in document and "task" in document:  # a TrialConfig
                document["task"]["source"] = name
            else:
                continue
            _dump(path, document)
        out[name] = trials
    return out


def _task_name(i: int) -> str:
    odd = ["fix-git", "näive csv parse", "build_cache--", "org/hello-world", "sqlite.recover"]
    return f"{odd[i % len(odd)]}-{i}" if i >= len(odd) else odd[i]


def _job_path(layout: str, j: int, group: list[tuple[str, str, int | None]]) -> str:
    if layout != "job_per_arm":
        return "jobs/2026-11-30__08-00-00"
    condition, method, delay = group[0]
    return f"runs/{condition} arms/{method}.d{delay}/job #{j} (é)"


@dataclass
class _Job:
    """One Harbor job being written."""

    path: Path
    job_id: str
    attempts: int
    arms: list[tuple[str, str, int | None]]
    layout: str
    seed: int
    rewards: tuple[int, bool]

    def write(
        self,
        plan: list[tuple[str, tuple[str, str, int | None], int]],
        failures: bool,
        snapshot: bool,
    ) -> list[HarborTrial]:
        self.path.mkdir(parents=True, exist_ok=True)
        _dump(self.path / "config.json", _job_config(self))
        out: list[HarborTrial] = []
        pending: list[tuple[str, tuple[str, str, int | None], int]] = []
        first = True
        for task, arm, attempt in plan:
            rng = random.Random(f"{self.seed}|{task}|{arm}|{attempt}")
            clock = _T0 + timedelta(days=attempt, seconds=rng.randint(0, 80_000))
            fate = rng.choices(range(len(_FATES)), _WEIGHTS)[0] if failures else 0
            if snapshot and first and fate == 0:  # one trial retried in place (Harbor's retry)
                first = False
                out += self._retried(task, arm, clock, rng)
                continue
            if snapshot and rng.random() < 0.15:  # interrupted: cancelled, re-run on resume
                out.append(self._trial(task, arm, clock, rng, 0, cancelled=True))
                pending.append((task, arm, attempt))
                continue
            out.append(self._trial(task, arm, clock, rng, fate))
        for task, arm, attempt in pending:  # the resumed run, after every first run
            rng = random.Random(f"{self.seed}|{task}|{arm}|{attempt}|resumed")
            clock = _T0 + timedelta(days=self.attempts + 1, seconds=rng.randint(0, 80_000))
            out.append(self._trial(task, arm, clock, rng, 0))
        if snapshot:
            out = self._snapshot(out)
        _dump(self.path / "result.json", _job_result(self, len(plan)))
        return out

    def _retried(
        self, task: str, arm: tuple[str, str, int | None], clock: datetime, rng: random.Random
    ) -> list[HarborTrial]:
        name = _trial_name(task, rng)
        early = self._trial(task, arm, clock, rng, 4, name=name)  # ApiRateLimitError
        stale = Path(early.file)
        moved = stale.parent.parent.with_name(stale.parent.parent.name + " before retry")
        (moved / stale.parent.name).mkdir(parents=True, exist_ok=True)
        stale.replace(moved / stale.parent.name / "result.json")
        late = self._trial(task, arm, clock + timedelta(minutes=5), rng, 0, name=name)
        return [
            replace(early, file=str(moved / stale.parent.name / "result.json"), superseded=True),
            late,
        ]

    def _snapshot(self, trials: list[HarborTrial]) -> list[HarborTrial]:
        """Copy the job as it was before the resume; the cancelled trials leave the live job."""
        snap = self.path.with_name(self.path.name + " (snapshot)")
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").write_bytes((self.path / "config.json").read_bytes())
        out = []
        for t in trials:
            src = Path(t.file)
            if src.parent.parent != self.path:
                out.append(t)
                continue
            target = snap / src.parent.name
            target.mkdir()
            if t.exception_type == "CancelledError":  # removed from the job by the resume
                src.replace(target / "result.json")
                (src.parent / "config.json").unlink()
                src.parent.rmdir()
                out.append(replace(t, file=str(target / "result.json"), superseded=True))
                continue
            (target / "result.json").write_bytes(src.read_bytes())  # the same trial, copied
            out += [t, replace(t, file=str(target / "result.json"), superseded=True)]
        return out

    def _trial(
        self,
        task: str,
        arm: tuple[str, str, int | None],
        clock: datetime,
        rng: random.Random,
        fate: int,
        *,
        cancelled: bool = False,
        name: str | None = None,
    ) -> HarborTrial:
        exception, policy, override, verified = _FATES[fate]
        if cancelled:
            exception, policy, override, verified = "CancelledError", _CANCELLED, None, False
        kept = policy is None or policy[2]
        trial_name = name or _trial_name(task, rng)
        trial_id = str(uuid.UUID(int=rng.getrandbits(128)))
        chance = 0.35 if arm[1] == "none" else 0.6
        reward = float(rng.random() < chance)
        partial = round(rng.random(), 3)
        reward_keys, funnel = self.rewards
        rewards = {"reward": reward} if reward_keys == 1 else {"reward": reward, "partial": partial}
        if funnel:
            aware = rng.random() < 0.7
            fixed = aware and rng.random() < 0.7
            derived = fixed and rng.random() < 0.8
            rewards |= {"aware": aware, "root_cause_fixed": fixed, "derived_fixed": derived}
            rewards = {k: float(v) for k, v in rewards.items()}
        trial_dir = self.path / trial_name
        trial_dir.mkdir(parents=True, exist_ok=True)
        config = _trial_config(self, task, arm, trial_name)
        _dump(trial_dir / "config.json", config)
        doc = _trial_result(
            trial_id,
            task,
            trial_name,
            trial_dir,
            config,
            arm,
            clock,
            rewards if verified else None,
            (exception, policy, override),
            self.layout,
        )
        _dump(trial_dir / "result.json", doc)
        valid = verified and kept
        reason = None if valid else exception if exception is not None and not kept else "no_reward"
        return HarborTrial(
            str(trial_dir / "result.json"),
            trial_id,
            task,
            *arm,
            exception,
            valid,
            reward if verified else None,
            partial if verified and reward_keys == 2 else None,
            reason,
        )


def _job_config(job: _Job) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "job_name": job.path.name,
        "jobs_dir": str(job.path.parent),
        "n_attempts": job.attempts,
        "install_only": False,
        "skip_credential_checks": False,
        "timeout_multiplier": 1.0,
        "agent_timeout_multiplier": None,
        "verifier_timeout_multiplier": None,
        "agent_setup_timeout_multiplier": None,
        "environment_build_timeout_multiplier": None,
        "debug": False,
        "n_concurrent_trials": 4,
        "quiet": False,
        "retry": {
            "max_retries": 1,
            "include_exceptions": None,
            "exclude_exceptions": ["CancelledError", "VerifierTimeoutError"],
            "wait_multiplier": 1.0,
            "min_wait_sec": 1.0,
            "max_wait_sec": 60.0,
        },
        "override_error_policy": {},
        "environment": _environment(),
        "verifier": _verifier(),
        "metrics": [],
        "agents": [_agent(arm) for arm in job.arms],
        "user_agent": None,
        "datasets": [],
        "tasks": [],
        "artifacts": [],
        "extra_instruction_paths": [],
        "extra_instructions": [],
        "source_jobs": [],
    }


def _job_result(job: _Job, total: int) -> dict[str, Any]:
    stamp = _T0.isoformat().replace("+00:00", "Z")
    return {
        "schema_version": 1,
        "id": job.job_id,
        "started_at": stamp,
        "updated_at": stamp,
        "finished_at": stamp,
        "n_total_trials": total,
        "stats": {"n_completed_trials": total, "n_errored_trials": 0, "evals": {}},
    }


def _trial_config(
    job: _Job, task: str, arm: tuple[str, str, int | None], name: str
) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "task": {
            "path": f"tasks/{task}",
            "git_url": None,
            "git_commit_id": None,
            "name": None,
            "ref": None,
            "overwrite": False,
            "download_dir": None,
            "source": "recovery-bench",
        },
        "trial_name": name,
        "trials_dir": str(job.path),
        "install_only": False,
        "timeout_multiplier": 1.0,
        "agent_timeout_multiplier": None,
        "verifier_timeout_multiplier": None,
        "agent_setup_timeout_multiplier": None,
        "environment_build_timeout_multiplier": None,
        "agent": _agent(arm),
        "user_agent": None,
        "environment": _environment(),
        "verifier": _verifier(),
        "override_error_policy": {},
        "artifacts": [],
        "extra_instruction_paths": [],
        "extra_instructions": [],
        "job_id": job.job_id,
        "source_trial": None,
    }


def _trial_name(task: str, rng: random.Random) -> str:
    alphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    short = task.rsplit("/", maxsplit=1)[-1][:32].rstrip("_-")
    return f"{short}__{''.join(rng.choice(alphabet) for _ in range(7))}"


def _agent(arm: tuple[str, str, int | None]) -> dict[str, Any]:
    condition, method, delay = arm
    return {
        "name": "terminus-2",
        "import_path": None,
        "model_name": "openai/gpt-5-mini",
        "base_url": None,
        "model_api_key_name": None,
        "model_api_format": None,
        "skip_model_parsing": False,
        "n_concurrent": None,
        "concurrency_group": None,
        "skills": [],
        "override_timeout_sec": None,
        "override_setup_timeout_sec": None,
        "max_timeout_sec": None,
        "resume_trajectory": False,
        "load_trajectory": None,
        "extra_allowed_hosts": [],
        "kwargs": {"condition": condition, "method": method, "delay": delay, "temperature": 0.7},
        "mcp_servers": [],
    }


def _environment() -> dict[str, Any]:
    return {
        "type": "docker",
        "import_path": None,
        "force_build": False,
        "delete": True,
        "stream": False,
        "cpu_enforcement_policy": "auto",
        "memory_enforcement_policy": "auto",
        "override_cpus": None,
        "override_memory_mb": None,
        "override_storage_mb": None,
        "override_gpus": None,
        "override_tpu": None,
        "mounts": None,
        "extra_docker_compose": [],
        "kwargs": {},
        "extra_allowed_hosts": [],
    }


def _verifier() -> dict[str, Any]:
    return {"override_timeout_sec": None, "max_timeout_sec": None, "disable": False}


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _timing(start: datetime, seconds: float) -> dict[str, str]:
    return {"started_at": _stamp(start), "finished_at": _stamp(start + timedelta(seconds=seconds))}


def _trial_result(
    trial_id: str,
    task: str,
    trial_name: str,
    trial_dir: Path,
    config: dict[str, Any],
    arm: tuple[str, str, int | None],
    clock: datetime,
    rewards: dict[str, float] | None,
    failure: tuple[str | None, _Policy | None, dict[str, bool] | None],
    layout: str,
) -> dict[str, Any]:
    exception, policy, override = failure
    info: dict[str, Any] | None = None
    if exception is not None:
        info = {
            "exception_type": exception,
            "exception_message": f"{exception} while running {task}",
            "exception_traceback": f"Traceback (most recent call last):\n{exception}\n",
            "occurred_at": _stamp(clock + timedelta(seconds=50)),
        }
        if override is not None:
            info["policy_override"] = override
        if policy is not None:  # a computed field: Harbor writes it
            names = ("should_retry", "should_grade", "has_valid_reward")
            info["policy"] = dict(zip(names, policy, strict=True))
    metadata = (
        {"condition": arm[0], "method": arm[1], "delay": arm[2]} if layout == "metadata" else None
    )
    return {
        "schema_version": 1,
        "id": trial_id,
        "task_name": task,
        "trial_name": trial_name,
        "trial_uri": Path(os.path.abspath(trial_dir)).as_uri(),
        "task_id": {"path": f"tasks/{task}"},
        "source": "recovery-bench",
        "task_checksum": f"{abs(hash(task)) % 16**12:012x}",
        "config": config,
        "agent_info": {
            "name": "terminus-2",
            "version": "2.0.0",
            "model_info": {"name": "gpt-5-mini", "provider": "openai"},
        },
        "agent_result": {
            "n_input_tokens": 12000,
            "n_cache_tokens": 3000,
            "n_output_tokens": 800,
            "cost_usd": 0.0123,
            "model_usage": None,
            "rollout_details": None,
            "metadata": metadata,
        },
        "verifier_result": None if rewards is None else {"rewards": rewards},
        "verifier_environment_mode": "shared",
        "exception_info": info,
        "started_at": _stamp(clock),
        "finished_at": _stamp(clock + timedelta(seconds=70)),
        "environment_setup": _timing(clock, 5),
        "agent_setup": _timing(clock + timedelta(seconds=5), 5),
        "agent_execution": _timing(clock + timedelta(seconds=10), 45),
        "verifier": _timing(clock + timedelta(seconds=55), 10),
        "step_results": None,
        "reward_valid": bool(rewards) and (policy is None or policy[2]),  # a computed field
    }


def _dump(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(value, indent=4, ensure_ascii=False), encoding="utf-8")
