"""OSWorld result trees as its runner writes them, with known outcomes (for tests and docs).

:func:`write_osworld_runs` lays out what OSWorld's ``run_single_example`` (``lib_run_single.py``)
leaves under ``--result_dir``: ``{action_space}/{observation_type}/{model}/{domain}/{example_id}/``
holding ``step_0.png``, ``instruction.txt``, one ``step_N_TIMESTAMP.png`` per action,
``traj.jsonl`` (one JSON line per step: ``step_num``, ``action_timestamp``, ``action``,
``reward``, ``done``, ``info``, ``screenshot_file`` and the agent's response), ``runtime.log``,
and, once ``env.evaluate()`` has run, ``result.txt`` (the score and a line break) and
``recording.mp4``; the runner's ``args.json`` sits beside the domains (not an example file).

The draws hold what a reader must tell apart: successes, failures and partial scores, examples
left *unfinished* (no ``result.txt``: a run stopped mid-trajectory, a crash whose traj ends in
OSWorld's ``{"Error": ...}`` line, or a directory a resume emptied and never refilled), two
models, and a *rerun into the same tree*: OSWorld's resume clears an unfinished example's files
and runs it again (written in that order here).
Example ids repeat across domains (``000a-...`` in chrome and in os) so that the domain scope of
the task-identity rule is exercised. :func:`plan_osworld_runs` returns the drawn truth.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

__all__ = ["plan_osworld_runs", "write_osworld_runs"]

#: Kinds of unfinished example and the cumulative chance of each: stopped mid-trajectory, crashed
#: (traj ends in OSWorld's Error line), cleared by a resume that then stopped (empty directory).
_UNFINISHED = (("stopped", 0.05), ("crashed", 0.10), ("cleared", 0.13))
_PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)


def _example_id(index: int) -> str:
    return f"{index:04x}a1b2-0000-4000-8000-{index:012x}"


def plan_osworld_runs(
    *,
    models: Sequence[str] = ("gpt-4o", "agent-s2"),
    domains: Sequence[str] = ("chrome", "gimp", "os"),
    examples: int = 6,
    repeats: int = 1,
    seed: int = 0,
) -> pl.DataFrame:
    """Draw the truth: one row per (repeat, model, domain, example_id).

    Columns: ``score`` (null: unfinished), ``unfinished`` (``stopped``, ``crashed``,
    ``cleared`` or null), ``aware`` and ``marker_step`` (the step whose response names the
    recovery marker, when the writer is given one),
    ``steps`` and ``rerun`` (the example was unfinished once and rerun into the same tree).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for repeat in range(repeats):
        for model in models:
            skill = 0.3 + 0.3 * (model == models[-1])
            for domain in domains:
                for index in range(examples):
                    draw = rng.random()
                    unfinished = next((kind for kind, edge in _UNFINISHED if draw < edge), None)
                    score = None
                    if unfinished is None:
                        score = 1.0 if rng.random() < skill else float(rng.choice([0.0, 0.0, 0.5]))
                    rows.append(
                        {
                            "repeat": repeat,
                            "model": model,
                            "domain": domain,
                            "example_id": _example_id(index),
                            "score": score,
                            "unfinished": unfinished,
                            "steps": int(rng.integers(1, 6)),
                            "rerun": bool(unfinished is None and rng.random() < 0.15),
                        }
                    )
    plan = pl.DataFrame(rows)
    marks = np.random.default_rng([seed, 41])  # its own stream: the draws above stay as they are
    aware = marks.random(plan.height) < 0.5
    step = np.minimum(marks.integers(1, 6, plan.height), plan["steps"].to_numpy())
    return plan.with_columns(
        aware=pl.Series(aware),
        marker_step=pl.when(pl.Series(aware)).then(pl.Series(step, dtype=pl.Int64)),
    )


def _write_example(
    folder: Path, row: dict, *, finished: bool, crashed: bool, marker: str | None = None
) -> None:
    """One example's files as ``run_single_example`` writes them (``finished``: evaluated)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step_0.png").write_bytes(_PNG)
    (folder / "instruction.txt").write_text(f"Do task {row['example_id']}", encoding="utf-8")
    (folder / "runtime.log").write_text("", encoding="utf-8")
    steps = row["steps"] if finished else max(1, row["steps"] // 2)
    lines: list[dict[str, object]] = []
    for step in range(1, steps + 1):
        stamp = f"20250301@1200{step:02d}"
        shot = f"step_{step}_{stamp}.png"
        (folder / shot).write_bytes(_PNG)
        done = finished and step == steps
        lines.append(
            {
                "response": (
                    f"{marker} the dialog from the previous step is still open; closing it"
                    if marker and step == row["marker_step"]
                    else f"thinking about step {step}"
                ),
                "step_num": step,
                "action_timestamp": stamp,
                "action": "DONE" if done else f"pyautogui.click({100 + step}, 200)",
                "reward": 0,
                "done": done,
                "info": {},
                "screenshot_file": shot,
            }
        )
    if crashed:
        lines.append({"Error": f"Time limit exceeded in {row['domain']}/{row['example_id']}"})
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    (folder / "traj.jsonl").write_text(text, encoding="utf-8")
    if finished:
        (folder / "result.txt").write_text(f"{row['score']}\n", encoding="utf-8")
        (folder / "recording.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")


def write_osworld_runs(
    out: str | Path,
    *,
    models: Sequence[str] = ("gpt-4o", "agent-s2"),
    domains: Sequence[str] = ("chrome", "gimp", "os"),
    examples: int = 6,
    repeats: int = 1,
    action_space: str = "pyautogui",
    observation_type: str = "screenshot",
    seed: int = 0,
    recovery_marker: str | None = None,
) -> Path | list[Path]:
    """Write the drawn runs as OSWorld results directories; return the directory (or one each).

    With ``repeats`` > 1 each repeat is a results directory of its own, ``out/repeat-N/``
    (the list is returned), as separate OSWorld runs would be. Other parameters are those of
    :func:`plan_osworld_runs` (the same draws). With ``recovery_marker``, the response of the
    drawn ``marker_step`` of each aware example opens with it (a takeover run whose agent says
    it recognised the error).

    Examples
    --------
    >>> import tempfile
    >>> root = write_osworld_runs(tempfile.mkdtemp(), examples=1, domains=("os",))
    >>> sorted(p.name for p in (root / "pyautogui/screenshot/gpt-4o/os").iterdir())
    ['0000a1b2-0000-4000-8000-000000000000']
    """
    plan = plan_osworld_runs(
        models=models, domains=domains, examples=examples, repeats=repeats, seed=seed
    )
    base = Path(out)
    roots = [base / f"repeat-{r}" for r in range(repeats)] if repeats > 1 else [base]
    for row in plan.iter_rows(named=True):
        root = roots[row["repeat"]]
        top = root / action_space / observation_type / row["model"]
        top.mkdir(parents=True, exist_ok=True)
        args = {
            "action_space": action_space,
            "observation_type": observation_type,
            "model": row["model"],
            "result_dir": str(root),
        }
        (top / "args.json").write_text(json.dumps(args, indent=2) + "\n", encoding="utf-8")
        folder = top / row["domain"] / row["example_id"]
        if row["rerun"]:  # the first, unfinished run; resume clears it and runs it again
            _write_example(folder, row, finished=False, crashed=False)
            shutil.rmtree(folder)
        if row["unfinished"] == "cleared":
            folder.mkdir(parents=True, exist_ok=True)
            continue
        finished = row["unfinished"] is None
        crashed = row["unfinished"] == "crashed"
        _write_example(folder, row, finished=finished, crashed=crashed, marker=recovery_marker)
    return roots if repeats > 1 else roots[0]
