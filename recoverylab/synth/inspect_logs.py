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

:func:`relabel_datasets` writes the same logs again, with inspect's own writer, as runs of
several named datasets whose sample ids coincide (the ids a task-identity rule must tell apart).

Nothing reaches the network: every scripted output carries a ``usage`` (else inspect fetches a
tokenizer to count tokens); inspect sends telemetry only when ``INSPECT_TELEMETRY`` names a hook.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from recoverylab._errors import MissingDependencyError, ParameterError

__all__ = [
    "LAYOUTS",
    "Experiment",
    "layout_mapping",
    "outcome",
    "relabel_datasets",
    "restyle",
    "write_inspect_logs",
    "write_layout",
]

#: The scorer name the logs carry (inspect names a scorer after its function).
SCORER = "recovered"
DEFAULT_MODEL = "mockllm/model"
#: The layouts :func:`write_layout` writes the same runs in.
LAYOUTS = (
    "task_args",
    "eval_metadata",
    "task_metadata",
    "task_names",
    "split_dirs",
    "json",
    "retry",
    "models_in_one_call",
)
#: Runs that fail once, then succeed when inspect retries them (the ``retry`` layout).
_FAIL_ONCE: set[tuple[Any, ...]] = set()
Arm = tuple[str, str, int | None]


@dataclass(frozen=True)
class Experiment:
    """One simulated recovery experiment, whatever layout its logs are written in.

    Per condition a ``none`` arm plus every method at every delay, run by every model for
    ``epochs`` epochs over samples ``1..samples``. Samples in ``errors[condition]`` raise in
    every arm of that condition; samples in ``limits`` hit a message limit in every arm. ``scores``
    is ``letter`` (one scorer, ``C``/``I``), ``dict`` (one scorer writing ``{"success": letter,
    "turns": n}``) or ``two`` (a second scorer ``turns``).
    """

    samples: int = 4
    epochs: int = 2
    conditions: tuple[str, ...] = ("clean", "stale")
    methods: tuple[str, ...] = ("retry",)
    delays: tuple[int, ...] = (1,)
    models: tuple[str, ...] = ("scripted/model",)
    errors: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    limits: tuple[int, ...] = ()
    scores: str = "letter"

    @property
    def arms(self) -> list[Arm]:
        """Every (condition, method, delay), the ``none`` arm first in each condition."""
        per = [("none", None), *((m, d) for m in self.methods for d in self.delays)]
        return [(c, m, d) for c in self.conditions for m, d in per]

    def task_kwargs(self, arm: Arm) -> dict[str, Any]:
        """Return the scripted task keyword arguments for one arm (besides the arm itself)."""
        return {
            "samples": self.samples,
            "failing": list(self.errors.get(arm[0], ())),
            "limited": list(self.limits),
            "style": self.scores,
        }


def outcome(
    sample: int,
    condition: str,
    method: str,
    delay: int | None,
    epoch: int,
    *,
    model: str = "mockllm/model",
) -> bool:
    """Return the scripted success of one sample run (the ground truth of the logs).

    A recovery run whose recovery never fired (``perturb_action(sample) + delay >= turns(sample)``)
    ends like the no-recovery run; otherwise its outcome is drawn from a hash with a higher
    success probability than the no-recovery run. Models other than ``mockllm/model`` draw
    their own outcomes.
    """
    if method != "none" and delay is not None and not fires(sample, delay):
        return outcome(sample, condition, "none", None, epoch, model=model)
    tail = "" if model == DEFAULT_MODEL else f"|{model}"
    key = f"{sample}|{condition}|{method}|{delay}|{epoch}{tail}".encode()
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
    with _quiet():
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
    kit = _kit()
    return kit.eval, kit.recovery, kit.model(DEFAULT_MODEL)


class _Kit(NamedTuple):
    """inspect's entry points and the experiment's scripted task, solver and scorer factories."""

    eval: Any
    eval_retry: Any
    recovery: Any
    recovery_arm: Any
    arm_task: Callable[..., Any]
    model: Callable[[str], Any]


def _require() -> None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "writing inspect logs needs inspect_ai. Hint: pip install 'recoverylab[inspect]'."
        ) from exc


def _model_factory() -> Callable[[str], Any]:
    """Return a maker of mock models whose every answer carries a usage (nothing goes online).

    ``mockllm/NAME`` is inspect's mock model given scripted outputs; ``scripted/NAME`` is the
    same mock registered as a model API, so that ``eval_retry`` (which re-creates a log's model
    from its name alone) gets it back too.
    """
    from inspect_ai.model import ModelAPI, ModelOutput, ModelUsage, get_model, modelapi

    def answer(*_: object) -> ModelOutput:
        out = ModelOutput.from_content(model=DEFAULT_MODEL, content="ok")
        out.usage = ModelUsage(input_tokens=3, output_tokens=1, total_tokens=4)
        return out

    @modelapi(name="scripted")
    class Scripted(ModelAPI):
        async def generate(self, *_: Any, **__: Any) -> ModelOutput:
            return answer()

    def model(name: str) -> Any:
        if name.startswith("mockllm/"):
            return get_model(name, custom_outputs=answer)
        return get_model(name)

    return model


def _scorers() -> tuple[Any, Any]:
    """Return inspect scorers: the scripted outcome (letter or dict-valued), and turns."""
    from inspect_ai.scorer import Score, Target, accuracy, scorer
    from inspect_ai.solver import TaskState

    def scored(state: TaskState, arm: tuple[str, str, int | None]) -> bool:
        return outcome(int(state.sample_id), *arm, state.epoch, model=str(state.model))

    @scorer(metrics=[accuracy()], name=SCORER)
    def recovered(condition: str, method: str, delay: int | None, style: str = "letter") -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            letter = "C" if scored(state, (condition, method, delay)) else "I"
            if style == "dict":  # one scorer, several values: pick the key
                return Score(value={"success": letter, "turns": turns(int(state.sample_id))})
            return Score(value=letter)

        return score

    @scorer(metrics=[accuracy()], name="turns")
    def turn_count() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            return Score(value=turns(int(state.sample_id)))

        return score

    return recovered, turn_count


def _arm_solver() -> Any:
    """Return the scripted solver of one arm: errors, limits, turns and the recovery marker."""
    from inspect_ai.log import transcript
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.util import message_limit, store

    @solver
    def run(
        condition: str, method: str, delay: int | None, failing: list[int], limited: list[int]
    ) -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            sample = int(state.sample_id)
            if sample in failing:
                raise RuntimeError(f"scripted failure of sample {sample}")
            once = (condition, method, delay, sample, state.epoch)
            if once in _FAIL_ONCE:  # a transient failure: the retry runs it again
                _FAIL_ONCE.discard(once)
                raise RuntimeError(f"transient failure of sample {sample}")
            if sample in limited:
                with message_limit(2):
                    for _ in range(turns(sample) + 2):
                        state = await generate(state)
            for _ in range(turns(sample)):
                state = await generate(state)
            if method != "none" and delay is not None:
                store().set("recovery_applied", fires(sample, delay))
                if fires(sample, delay):
                    transcript().info({"delay": delay}, source="recovery")
            return state

        return solve

    return run


def _kit() -> _Kit:
    """Build the scripted experiment with inspect_ai (imported lazily)."""
    _require()
    from inspect_ai import Task, eval, eval_retry, task
    from inspect_ai.dataset import Sample

    recovered, turn_count = _scorers()
    run = _arm_solver()

    def parts(
        arm: tuple[str, str, int | None],
        samples: int,
        failing: list[int],
        limited: list[int],
        style: str,
    ) -> dict[str, Any]:
        dataset = [
            Sample(
                id=i, input=f"task {i}", target="ok", metadata={"perturb_action": perturb_action(i)}
            )
            for i in range(1, samples + 1)
        ]
        scorers = [recovered(*arm, style=style)] + ([turn_count()] if style == "two" else [])
        return {"dataset": dataset, "solver": run(*arm, failing, limited), "scorer": scorers}

    @task
    def recovery(
        condition: str, method: str, delay: int | None, samples: int, failing: list[int]
    ) -> Task:
        made = parts((condition, method, delay), samples, failing, [], "letter")
        return Task(**made, name="recovery")

    @task
    def recovery_arm(
        condition: str,
        method: str,
        delay: int | None,
        samples: int,
        failing: list[int],
        limited: list[int],
        style: str,
    ) -> Task:  # the layouts' task: also limit-hit samples and a score style
        made = parts((condition, method, delay), samples, failing, limited, style)
        return Task(**made, name="recovery")

    def arm_task(
        arm: tuple[str, str, int | None], *, name: str, metadata: dict[str, Any] | None, **kw: Any
    ) -> Task:
        # a Task built directly: no task arguments; the arm lives where the layout puts it
        return Task(**parts(arm, **kw), name=name, metadata=metadata)

    return _Kit(eval, eval_retry, recovery, recovery_arm, arm_task, _model_factory())


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        # inspect's own retry setup trips a tenacity deprecation (not ours to fix); under
        # warnings-as-errors it would turn every sample into an error.
        warnings.filterwarnings("ignore", message="The 'initial' parameter is deprecated")
        yield


def layout_mapping(layout: str) -> dict[str, Any]:
    """Where ``condition``, ``method`` and ``delay`` are in a layout (the ``forks`` sources)."""
    if layout in ("eval_metadata", "task_metadata"):  # task metadata lands in eval metadata
        return {k: f"eval_metadata:{k}" for k in ("condition", "method", "delay")}
    if layout == "task_names":
        return {
            "condition": lambda v: v["task"].split("--")[1],
            "method": lambda v: v["task"].split("--")[2],
            "delay": lambda v: (
                None if v["task"].split("--")[3] == "x" else v["task"].split("--")[3]
            ),
        }
    return {k: f"task_arg:{k}" for k in ("condition", "method", "delay")}


def write_layout(
    out_dir: str | os.PathLike[str], layout: str, experiment: Experiment | None = None
) -> list[Path]:
    """Write ``experiment``'s runs through inspect_ai in one of :data:`LAYOUTS`.

    Every layout holds the same sample runs with the same outcomes; only where the arm is
    recorded, how the evals are grouped into ``eval()`` calls, the files and the directories
    differ:

    ``task_args``: one ``eval()`` per model, the arm in task arguments. ``eval_metadata``: one
    ``eval(metadata=arm)`` per arm, task arguments alike. ``task_metadata``: ``Task(metadata=arm)``.
    ``task_names``: one task name per arm (``recovery--COND--METHOD--DELAY``). ``split_dirs``: one
    log directory per condition. ``json``: ``.json`` logs. ``retry``: the first arm's first run
    fails, and ``eval_retry`` writes its successful retry (both logs kept).
    ``models_in_one_call``: every model in one ``eval()`` call.

    Returns
    -------
    list[Path]
        The log directories to read (several for ``split_dirs``).
    """
    if layout not in LAYOUTS:
        raise ParameterError(f"parameter `layout` is {layout!r}; it must be one of {LAYOUTS}.")
    exp = experiment or Experiment()
    kit = _kit()
    out = Path(out_dir)
    common = {"epochs": exp.epochs, "display": "none", "fail_on_error": False}
    common["score_display"] = False
    models = [kit.model(m) for m in exp.models]
    args_tasks = [kit.recovery_arm(*arm, **exp.task_kwargs(arm)) for arm in exp.arms]
    with _quiet():
        if layout in ("task_args", "json"):
            fmt = "json" if layout == "json" else "eval"
            for model in models:
                kit.eval(args_tasks, model=model, log_dir=str(out), log_format=fmt, **common)
        elif layout == "models_in_one_call":
            kit.eval(args_tasks, model=models, log_dir=str(out), **common)
        elif layout == "split_dirs":
            for condition in exp.conditions:
                tasks = [t for t, a in zip(args_tasks, exp.arms, strict=True) if a[0] == condition]
                kit.eval(tasks, model=models, log_dir=str(out / condition), **common)
            return [out / c for c in exp.conditions]
        elif layout == "retry":
            _write_retry(kit, exp, out, models, common)
        else:
            _write_unargued(kit, exp, layout, out, models, common)
    return [out]


def _write_unargued(
    kit: _Kit, exp: Experiment, layout: str, out: Path, models: list[Any], common: dict[str, Any]
) -> None:
    """Write the layouts whose tasks take no arguments (the arm in metadata or task name)."""
    tasks = []
    for arm in exp.arms:
        condition, method, delay = arm
        meta = {"condition": condition, "method": method, "delay": delay}
        name = f"recovery--{condition}--{method}--{'x' if delay is None else delay}"
        made = kit.arm_task(
            arm,
            name="recovery" if layout != "task_names" else name,
            metadata=meta if layout == "task_metadata" else None,
            **exp.task_kwargs(arm),
        )
        if layout == "eval_metadata":
            kit.eval(made, model=models, log_dir=str(out), metadata=meta, **common)
        tasks.append(made)
    if layout != "eval_metadata":
        kit.eval(tasks, model=models, log_dir=str(out), **common)


def _write_retry(
    kit: _Kit, exp: Experiment, out: Path, models: list[Any], common: dict[str, Any]
) -> None:
    """Run every arm; the first arm's first run fails, and ``eval_retry`` completes it."""
    first, *rest = (kit.recovery_arm(*arm, **exp.task_kwargs(arm)) for arm in exp.arms)
    _FAIL_ONCE.update((*exp.arms[0], 1, e) for e in range(1, exp.epochs + 1))
    try:
        failed = kit.eval(
            first, model=models, log_dir=str(out), **{**common, "fail_on_error": True}
        )
    finally:
        _FAIL_ONCE.clear()
    kit.eval(rest, model=models, log_dir=str(out), **common)
    retry = [log for log in failed if log.status != "success"]
    if not retry:
        raise ParameterError("the retry layout's scripted failure did not fail its eval.")
    kit.eval_retry(retry, log_dir=str(out), fail_on_error=False, score_display=False)


def restyle(
    source: str | os.PathLike[str], out_dir: str | os.PathLike[str], layout: str
) -> list[Path]:
    """Rewrite the logs in ``source`` with inspect's own writer as ``json`` or ``split_dirs``.

    The same genuine logs, written again by ``inspect_ai.log.write_eval_log``: ``json`` as
    ``.json`` files, ``split_dirs`` alternately into the directories ``part-0`` and ``part-1``.
    Much faster than running the evals again. Returns the directories to read.
    """
    if layout not in ("json", "split_dirs"):
        raise ParameterError(
            f"parameter `layout` is {layout!r}; it must be 'json' or 'split_dirs'."
        )
    _require()
    from inspect_ai.log import list_eval_logs, read_eval_log, write_eval_log

    out = Path(out_dir)
    logs = sorted(info.name.removeprefix("file://") for info in list_eval_logs(os.fspath(source)))
    dirs = [out] if layout == "json" else [out / "part-0", out / "part-1"]
    for k, location in enumerate(logs):
        target = dirs[k % len(dirs)]
        target.mkdir(parents=True, exist_ok=True)
        name = Path(location).name
        if layout == "json":
            name = Path(name).with_suffix(".json").name
        write_eval_log(
            read_eval_log(location),
            str(target / name),
            format="json" if layout == "json" else "eval",
        )
    return dirs


def relabel_datasets(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    datasets: Sequence[str] = ("recovery-a", "recovery-b"),
) -> list[Path]:
    """Write every log in ``source`` once per dataset, as runs of that named dataset.

    inspect numbers samples per dataset, so two datasets may both hold sample ``1``. Each copy
    is the genuine log read and written by ``inspect_ai.log`` with ``eval.dataset.name`` set to
    the dataset and its own ``task_id``, ``eval_id`` and ``run_id`` (a different task, as
    inspect would record it; derived from the dataset and the original ids, so reruns agree).
    Returns one directory per dataset, ``out_dir/<i>``.
    """
    if not datasets or len(set(datasets)) != len(datasets):
        raise ParameterError("relabel_datasets: give one or more distinct dataset names.")
    _require()
    from inspect_ai.log import list_eval_logs, read_eval_log, write_eval_log

    logs = sorted(info.name.removeprefix("file://") for info in list_eval_logs(os.fspath(source)))
    dirs = []
    for i, name in enumerate(datasets):
        target = Path(out_dir) / str(i)
        target.mkdir(parents=True, exist_ok=True)
        for location in logs:
            log = read_eval_log(location)
            spec = log.eval
            ids = {
                key: hashlib.sha256(f"{name}:{getattr(spec, key)}".encode()).hexdigest()[:22]
                for key in ("task_id", "eval_id", "run_id")
            }
            dataset = spec.dataset.model_copy(update={"name": name})
            log = log.model_copy(
                update={"eval": spec.model_copy(update={**ids, "dataset": dataset})}
            )
            write_eval_log(log, str(target / Path(location).name), format="eval")
        dirs.append(target)
    return dirs
