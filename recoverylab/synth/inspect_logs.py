"""Genuine inspect_ai evaluation logs made offline, with known outcomes (tests, tour, benchmarks).

:func:`write_inspect_logs` runs a small recovery experiment through inspect_ai itself, the mock
model (``mockllm/model``) scripted to answer every generation: one eval per (condition, arm), an
arm being the no-recovery continuation (``method="none"``, no delay) or a method at a delay. Task
arguments carry ``condition``, ``method`` and ``delay``; samples are task instances with stable
``id``s; epochs are repeated runs.

A sample's outcome is a deterministic function of (sample, condition, arm, epoch): a known ground
truth. Recovery fires only while the run goes on (``perturb_action + delay < turns``); an arm whose
recovery never fired ends like the no-recovery run (the store key ``recovery_applied`` says which;
a fired recovery also leaves an info event with source ``recovery``). Samples in ``errors`` raise
in every arm of their condition, so inspect records them as errored.

Nothing reaches the network: every scripted output carries a ``usage`` (else inspect fetches a
tokenizer to count tokens); inspect sends telemetry only when ``INSPECT_TELEMETRY`` names a hook.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recoverylab._errors import MissingDependencyError, ParameterError

__all__ = ["outcome", "write_inspect_logs"]

#: The scorer name the logs carry (inspect names a scorer after its function).
SCORER = "recovered"


def outcome(sample: int, condition: str, method: str, delay: int | None, epoch: int) -> bool:
    """Return the scripted success of one sample run (the ground truth of the logs).

    A recovery run whose recovery never fired (``perturb_action(sample) + delay >= turns(sample)``)
    ends like the no-recovery run; otherwise its outcome is drawn from a hash with a higher
    success probability than the no-recovery run.
    """
    if method != "none" and delay is not None and not fires(sample, delay):
        return outcome(sample, condition, "none", None, epoch)
    key = f"{sample}|{condition}|{method}|{delay}|{epoch}".encode()
    draw = int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big") / 2**32
    return draw < (0.35 if method == "none" else 0.6)


def turns(sample: int) -> int:
    """Model generations (environment actions) of one sample's run: 2 to 5."""
    return 2 + sample % 4


def perturb_action(sample: int) -> int:
    """Environment action at which the observation was perturbed: 0 or 1."""
    return sample % 2


def fires(sample: int, delay: int) -> bool:
    """Whether recovery at ``delay`` applies before the run of ``sample`` ends."""
    return perturb_action(sample) + delay < turns(sample)


def write_inspect_logs(
    out_dir: str | os.PathLike[str],
    *,
    samples: int = 6,
    epochs: int = 2,
    conditions: Sequence[str] = ("clean", "stale"),
    methods: Sequence[str] = ("retry",),
    delays: Sequence[int] = (1, 3),
    errors: dict[str, Sequence[int]] | None = None,
    log_format: str = "eval",
    max_samples: int | None = None,
) -> list[Path]:
    """Run the recovery experiment through inspect_ai with the mock model; return the log paths.

    Parameters
    ----------
    out_dir
        Directory that receives one log per (condition, arm).
    samples
        Task instances (sample ids ``1..samples``).
    epochs
        Runs per sample and arm.
    conditions, methods, delays
        The grid: per condition a ``none`` arm plus every method at every delay.
    errors
        Condition -> sample ids that raise (in every arm and epoch of that condition).
    log_format
        ``"eval"`` or ``"json"``.
    max_samples
        Samples inspect runs concurrently (default: inspect's).

    Returns
    -------
    list[Path]
        The written log files, one per eval.

    Raises
    ------
    MissingDependencyError
        inspect_ai is not installed (``pip install 'recoverylab[inspect]'``).
    """
    if log_format not in ("eval", "json"):
        raise ParameterError(
            f"parameter `log_format` is {log_format!r}; it must be 'eval' or 'json'."
        )
    run_eval, recovery, model = _inspect()
    errors = {k: list(v) for k, v in (errors or {}).items()}
    arms: list[tuple[str, int | None]] = [("none", None)]
    arms += [(m, d) for m in methods for d in delays]
    tasks = [
        recovery(condition=c, method=m, delay=d, samples=samples, failing=errors.get(c, []))
        for c in conditions
        for m, d in arms
    ]
    with warnings.catch_warnings():
        # inspect's own retry setup trips a tenacity deprecation (not ours to fix); under
        # warnings-as-errors it would turn every sample into an error.
        warnings.filterwarnings("ignore", message="The 'initial' parameter is deprecated")
        logs = run_eval(
            tasks,
            model=model,
            epochs=epochs,
            log_dir=os.fspath(out_dir),
            log_format=log_format,
            display="none",
            fail_on_error=False,
            max_samples=max_samples,
            score_display=False,
        )
    return [Path(log.location) for log in logs]


def _inspect() -> tuple[Any, Any, Any]:
    """Return inspect's ``eval``, the task and the mock model (inspect_ai imported lazily)."""
    try:
        from inspect_ai import Task, eval, task
        from inspect_ai.dataset import Sample
        from inspect_ai.log import transcript
        from inspect_ai.model import ModelOutput, ModelUsage, get_model
        from inspect_ai.scorer import Score, Target, accuracy, scorer
        from inspect_ai.solver import Generate, TaskState, solver
        from inspect_ai.util import store
    except ImportError as exc:
        raise MissingDependencyError(
            "writing inspect logs needs inspect_ai. Hint: pip install 'recoverylab[inspect]'."
        ) from exc

    def answer(*_: object) -> ModelOutput:
        out = ModelOutput.from_content(model="mockllm/model", content="ok")
        out.usage = ModelUsage(input_tokens=3, output_tokens=1, total_tokens=4)
        return out

    @solver
    def run(condition: str, method: str, delay: int | None, failing: list[int]) -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            sample = int(state.sample_id)
            if sample in failing:
                raise RuntimeError(f"scripted failure of sample {sample}")
            for _ in range(turns(sample)):
                state = await generate(state)
            if method != "none" and delay is not None:
                store().set("recovery_applied", fires(sample, delay))
                if fires(sample, delay):
                    transcript().info({"delay": delay}, source="recovery")
            return state

        return solve

    @scorer(metrics=[accuracy()], name=SCORER)
    def recovered(condition: str, method: str, delay: int | None) -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            ok = outcome(int(state.sample_id), condition, method, delay, state.epoch)
            return Score(value="C" if ok else "I")

        return score

    @task
    def recovery(
        condition: str, method: str, delay: int | None, samples: int, failing: list[int]
    ) -> Task:
        dataset = [
            Sample(
                id=i, input=f"task {i}", target="ok", metadata={"perturb_action": perturb_action(i)}
            )
            for i in range(1, samples + 1)
        ]
        return Task(
            dataset=dataset,
            solver=run(condition, method, delay, failing),
            scorer=recovered(condition, method, delay),
            name="recovery",
        )

    return eval, recovery, get_model("mockllm/model", custom_outputs=answer)
