"""``recoverylab import harbor JOB_DIR...``: Harbor (Terminal-Bench) job directories."""

from __future__ import annotations

import argparse

from recoverylab._errors import ParameterError
from recoverylab.adapters import Imported

HELP = "Harbor / Terminal-Bench job directories (trials with result.json)"
DESCRIPTION = (
    "Read Harbor job directories (each trial's result.json, by the field names of Harbor's "
    "TrialResult; no harbor package needed) and write our tables plus excluded.parquet (trials "
    "whose reward Harbor's error policy voids, by exception type; trials with no reward; "
    "unfinished trials) into --out DIR. Sources: task, agent, model, source, job, "
    "agent_kwarg:NAME, agent_metadata:NAME, config:PATH, job_config:PATH, literal:VALUE. Task "
    "names are per dataset: task_id is SOURCE/TASK (the name as written in raw_task_id)."
)
TARGETS = ("forks", "takeover", "trials")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options that say where each of our columns comes from in a Harbor trial."""
    parser.add_argument("--condition", help="forks/trials: where condition comes from")
    parser.add_argument("--method", help="forks/trials: where method comes from")
    parser.add_argument("--delay", help="forks/trials: where delay comes from")
    parser.add_argument("--none-label", default="none", help="method of the no-recovery arm")
    parser.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="trials: another mapped column (repeatable)",
    )
    parser.add_argument("--task-id", default="task", help="where task_id comes from")
    parser.add_argument("--reward", help="reward key read for success (default: the only one)")
    parser.add_argument(
        "--success", type=float, help="success threshold for non-binary rewards (reward >= T)"
    )
    parser.add_argument("--state", default="task", help="takeover: where the state key comes from")
    parser.add_argument("--agent", default="agent", help="takeover: where the agent comes from")
    parser.add_argument("--workflow", help="takeover: where workflow_id comes from")
    parser.add_argument("--root-cause", help="takeover: where root_cause_id comes from")
    parser.add_argument("--depth", default="literal:0", help="takeover: where depth comes from")


def convert(args: argparse.Namespace) -> Imported:
    """Read the jobs with :mod:`recoverylab.adapters.harbor`."""
    from recoverylab.adapters import harbor

    common = {"reward": args.reward, "success": args.success}
    if args.to == "forks":
        missing = [f"--{n}" for n in ("condition", "method", "delay") if not getattr(args, n)]
        if missing:
            raise ParameterError(f"import harbor --to forks needs {', '.join(missing)}.")
        return harbor.forks(
            args.logs,
            condition=args.condition,
            method=args.method,
            delay=args.delay,
            none_label=args.none_label,
            task_id=args.task_id,
            **common,
        )
    if args.to == "takeover":
        return harbor.takeover(
            args.logs,
            state=args.state,
            agent=args.agent,
            workflow=args.workflow,
            root_cause=args.root_cause,
            depth=args.depth,
            **common,
        )
    columns = {n: getattr(args, n) for n in ("condition", "method", "delay") if getattr(args, n)}
    for item in args.column:
        name, eq, source = item.partition("=")
        if not eq or not name or not source:
            raise ParameterError(f"import harbor: --column is {item!r}; write NAME=SOURCE.")
        columns[name] = source
    return harbor.trials(args.logs, columns=columns, task_id=args.task_id, **common)
