"""Stop signals: SIGTERM, SIGHUP and SIGPIPE stop a run like SIGINT, and nothing is half-written.

Issue 26: SIGTERM (what batch schedulers and Kubernetes send) during ``paired --pairs-out`` left
``.pairs.parquet.<host>-<pid>.<rand>.tmp`` behind, and only kill -9 and SIGINT were handled. A
stopped run must leave every target absent or at its previous version, no temporaries, and an
exit status that says it was stopped (128 + the signal's number, one line on stderr; a closed
stdout pipe ends the run quietly).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from recoverylab import _signals
from recoverylab._outputs import OutputSet, atomic_file
from recoverylab._signals import Stopped, held, stopping_on_signals
from tests.conftest import REPO, SAMPLES

FORKS = SAMPLES / "paired" / "main_forks.parquet"
PREVIOUS = b"previous version"


def _start(*args: object, cwd: Path, stdout: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "recoverylab", "--quiet", *map(str, args)],
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


def _finish(process: subprocess.Popen[bytes]) -> tuple[int, bytes]:
    """Wait for ``process``; return its exit status and what it wrote on stderr."""
    _, err = process.communicate()
    return process.returncode, err


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*") if p.name.endswith((".tmp", ".old"))]


def _big_forks(path: Path, copies: int = 30) -> Path:
    """The sample forks many times over, some `none` rows dropped so exclusions are written."""
    forks = pl.read_parquet(FORKS)
    big = pl.concat([forks.with_columns(pl.col("task_id") + f"-{i}") for i in range(copies)])
    big = big.filter(~((pl.col("method") == "none") & pl.col("task_id").str.ends_with("-7")))
    big.write_parquet(path)
    return path


def _state(outs: dict[str, Path]) -> dict[str, bytes | None]:
    return {name: p.read_bytes() if p.exists() else None for name, p in outs.items()}


# --- the mechanism, in-process ------------------------------------------------------------------


def _signal_in_a_held_block(steps: list[str]) -> None:
    with held():
        os.kill(os.getpid(), signal.SIGTERM)
        steps.append("after the signal")  # still runs: the signal waits


def test_a_signal_in_a_held_block_waits_for_its_end() -> None:
    with stopping_on_signals():
        steps: list[str] = []
        with pytest.raises(Stopped) as stopped:
            _signal_in_a_held_block(steps)
        assert steps == ["after the signal"]
        assert stopped.value.signum == signal.SIGTERM
        assert stopped.value.exit_status == 143
        assert stopped.value.name == "SIGTERM"


def test_handlers_are_put_back_after_the_run() -> None:
    before = {s: signal.getsignal(s) for s in _signals.STOP_SIGNALS}
    with stopping_on_signals():
        assert all(signal.getsignal(s) is not before[s] for s in _signals.STOP_SIGNALS)
    assert {s: signal.getsignal(s) for s in _signals.STOP_SIGNALS} == before


def _write_two_outputs_and_signal(root: Path, signum: int) -> None:
    with OutputSet() as outputs:
        outputs.stage_file(root / "a.txt").write_text("new a")
        with outputs.activate(), atomic_file(root / "b.txt") as out:
            out.write(b"new b")
            os.kill(os.getpid(), signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGINT])
def test_a_signal_during_a_write_removes_the_staged_outputs(tmp_path: Path, signum: int) -> None:
    (tmp_path / "a.txt").write_bytes(PREVIOUS)
    with stopping_on_signals(), pytest.raises(Stopped) as stopped:
        _write_two_outputs_and_signal(tmp_path, signum)
    assert stopped.value.signum == signum
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    assert (tmp_path / "a.txt").read_bytes() == PREVIOUS


@pytest.mark.parametrize("hit", [0, 1, 2])
def test_a_signal_during_the_commit_puts_every_output_back(tmp_path, monkeypatch, hit) -> None:
    """The renames are not cut in two: the signal waits, then every output is put back."""
    names = ("a.txt", "b.txt", "c.txt")
    (tmp_path / "a.txt").write_bytes(PREVIOUS)
    (tmp_path / "c.txt").write_bytes(PREVIOUS)
    replace = os.replace
    calls: list[str] = []

    def replace_then_signal(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        replace(src, dst)
        calls.append(str(dst))
        if len(calls) == hit + 1:
            os.kill(os.getpid(), signal.SIGTERM)

    outputs = OutputSet()
    for name in names:
        outputs.stage_file(tmp_path / name).write_text(f"new {name}")
    monkeypatch.setattr(os, "replace", replace_then_signal)
    with stopping_on_signals(), pytest.raises(Stopped):
        outputs.commit()
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "c.txt"]
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "c.txt").read_bytes() == PREVIOUS


def test_a_signal_after_the_final_commit_changes_nothing(tmp_path: Path) -> None:
    with stopping_on_signals():
        outputs = OutputSet()
        outputs.stage_file(tmp_path / "a.txt").write_text("new a")
        outputs.commit(final=True)
        os.kill(os.getpid(), signal.SIGTERM)  # ignored: the work is done
        time.sleep(0.01)
    assert (tmp_path / "a.txt").read_text() == "new a"


@pytest.mark.parametrize(
    "surfaced",
    [
        pl.exceptions.ComputeError("the query failed while reading a file"),
        pl.exceptions.PanicException("a Python error inside a polars callback"),
    ],
)
def test_a_stop_that_the_engine_turned_into_an_error_still_says_stopped(
    cli, tmp_path, monkeypatch, surfaced
) -> None:
    """CI found it: SIGTERM inside a polars call came back as a PanicException (exit 2)."""
    from recoverylab.cli import _paired

    def stopped_inside_the_engine(args: object) -> None:
        with atomic_file(tmp_path / "cells.parquet") as out:
            out.write(b"half")
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)
            except Stopped:  # what an engine does with an exception raised inside its call
                raise surfaced from None

    monkeypatch.setattr(_paired, "run_paired", stopped_inside_the_engine)
    result = cli("paired", FORKS, "--out", tmp_path / "cells.parquet")
    assert (result.code, result.err) == (143, "recoverylab paired: stopped by SIGTERM\n")
    assert list(tmp_path.iterdir()) == []


class _StoppedInDel:
    """Receives SIGTERM in ``__del__``, where Python cannot raise it (as in a native callback)."""

    def __del__(self) -> None:
        _signals._on_signal(signal.SIGTERM, None)


def test_a_stop_python_could_not_raise_is_not_printed(capsys) -> None:
    with stopping_on_signals():
        _StoppedInDel()  # "Exception ignored in ..." without the hook
        assert _signals._STATE.received == signal.SIGTERM  # remembered
    assert capsys.readouterr().err == ""


def test_an_unexpected_error_after_a_swallowed_stop_says_stopped(
    cli, tmp_path, monkeypatch
) -> None:
    """CI found it: a stop lost in a polars callback, then a crash, exited 1 with a traceback."""
    from recoverylab.cli import _paired

    def crashed_after_the_stop(args: object) -> None:
        with atomic_file(tmp_path / "cells.parquet") as out:
            out.write(b"half")
            _StoppedInDel()
            raise RuntimeError("native code gave up after the lost exception")

    monkeypatch.setattr(_paired, "run_paired", crashed_after_the_stop)
    result = cli("paired", FORKS, "--out", tmp_path / "cells.parquet")
    assert (result.code, result.err) == (143, "recoverylab paired: stopped by SIGTERM\n")
    assert list(tmp_path.iterdir()) == []


def test_main_says_the_run_was_stopped(cli, tmp_path, monkeypatch) -> None:
    from recoverylab.cli import _paired

    def stopped_run(args: object) -> None:
        with atomic_file(tmp_path / "cells.parquet") as out:
            out.write(b"half")
            os.kill(os.getpid(), signal.SIGHUP)

    monkeypatch.setattr(_paired, "run_paired", stopped_run)  # registered when main builds
    result = cli("paired", FORKS, "--out", tmp_path / "cells.parquet")
    assert (result.code, result.err) == (129, "recoverylab paired: stopped by SIGHUP\n")
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL  # put back after the run


# --- timed kills of real runs ---------------------------------------------------------------------


def _kill_server() -> None:
    """Run in a subprocess: fork the command once per delay and SIGTERM it; print JSON results.

    The command runs as it does from the shell (``main`` in a fresh child, its own handlers),
    but the interpreter, polars and recoverylab are imported once, before the forks (none of
    them has started a thread pool yet), so 20 timed kills cost seconds rather than a minute.
    """
    config = json.loads(sys.stdin.read())
    import recoverylab.paired  # noqa: F401 - imported once here, not in every child
    from recoverylab.cli import main

    outs = {name: Path(path) for name, path in config["outs"].items()}
    root, errors = Path(config["root"]), Path(config["root"]) / "stderr.txt"

    def run(delay: float | None) -> tuple[int, bytes]:
        sys.stdout.flush()
        errors.write_bytes(b"")
        pid = os.fork()
        if pid == 0:  # the child: the command, with stderr kept for the parent
            code = 1
            try:
                os.dup2(os.open(errors, os.O_WRONLY), 2)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                code = main(config["argv"])
            finally:
                os._exit(code)
        if delay is not None:
            time.sleep(delay)
            os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status), errors.read_bytes()

    start = time.monotonic()
    code, err = run(None)
    duration = time.monotonic() - start
    new = _state(outs)
    print(json.dumps({"code": code, "err": err.decode(), "duration": duration}), flush=True)
    rng = random.Random(config["seed"])
    for _ in range(config["kills"]):
        for path in outs.values():
            path.write_bytes(PREVIOUS)
        code, err = run(rng.uniform(0.02, 1.0) * duration)
        state = _state(outs)
        labels = {
            name: "previous" if state[name] == PREVIOUS else "new" if state[name] == new[name]
            else "other"
            for name in outs
        }  # fmt: skip
        temporaries = [p.name for p in _temporaries(root)]
        record = {"code": code, "err": err.decode(), "state": labels, "temporaries": temporaries}
        print(json.dumps(record), flush=True)


def test_sigterm_at_random_moments_of_a_multi_output_run(tmp_path: Path) -> None:
    """20 seeded, timed SIGTERMs: each leaves every target previous (or, after the commit, new)."""
    big = _big_forks(tmp_path / "forks.parquet")
    outs = {name: tmp_path / f"{name}.parquet" for name in ("pairs", "exclusions", "cells")}
    argv = ["--quiet", "paired", str(big), "--pairs-out", str(outs["pairs"]), "--exclusions-out",
            str(outs["exclusions"]), "--out", str(outs["cells"]), "--resamples", "200"]  # fmt: skip
    config = {"outs": {k: str(v) for k, v in outs.items()}, "root": str(tmp_path), "argv": argv,
              "seed": 26, "kills": 20}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", "from tests.test_signals import _kill_server; _kill_server()"],
        input=json.dumps(config).encode(),
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    reference, *kills = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert (reference["code"], reference["err"]) == (0, "")
    assert len(kills) == 20
    stopped = 0
    for kill in kills:
        assert kill["temporaries"] == [], kill
        if kill["code"] == 143:  # stopped by our handler: one line, nothing written
            stopped += 1
            # one line; a kill before the arguments are parsed cannot name the command yet
            assert kill["err"] in (
                f"recoverylab{c}: stopped by SIGTERM\n" for c in (" paired", "")
            ), kill
            assert set(kill["state"].values()) == {"previous"}, kill
        elif kill["code"] == -signal.SIGTERM:  # before main installed the handlers: nothing staged
            assert (kill["err"], set(kill["state"].values())) == ("", {"previous"}), kill
        else:  # the signal came after the commit: the complete new result
            assert kill["code"] == 0, kill
            assert set(kill["state"].values()) == {"new"}, kill
    # most kills land while the command works (the reference run's duration is only a guide on
    # a loaded machine, so a few may land before the handlers or after the commit)
    assert stopped >= 6


def test_a_closed_stdout_pipe_ends_the_run_quietly_and_writes_nothing(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.parquet"
    process = _start("paired", FORKS, "--pairs-out", pairs, "--resamples", "50",
                     cwd=tmp_path, stdout=subprocess.PIPE)  # fmt: skip
    process.stdout.close()  # type: ignore[union-attr]  # the reader went away (`| head` ended)
    assert _finish(process) == (128 + signal.SIGPIPE, b"")  # no traceback, no line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("signum", "said"),
    [
        (signal.SIGTERM, b"recoverylab synth: stopped by SIGTERM\n"),
        (signal.SIGHUP, b"recoverylab synth: stopped by SIGHUP\n"),
        (signal.SIGPIPE, b""),  # like any Unix tool whose reader went away: quiet
    ],
)
def test_a_signal_during_synth_keeps_the_previous_dataset(tmp_path, signum, said) -> None:
    """synth renames each dataset into place whole; stopped, it leaves the previous one."""
    out = tmp_path / "out"
    assert _finish(_start("synth", "forks", "--tasks", 200, "--out", out, cwd=tmp_path))[0] == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    process = _start("synth", "forks", "--tasks", 300_000, "--chunk-tasks", 2_000,
                     "--seed", 1, "--out", out, cwd=tmp_path)  # fmt: skip
    _wait_for_temporaries(process, tmp_path)
    process.send_signal(signum)
    assert _finish(process) == (128 + signum, said)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not _temporaries(tmp_path)


def _wait_for_temporaries(process: subprocess.Popen[bytes], root: Path) -> None:
    """Return once the run has staged an output (it is mid-work), or fail if it ended first."""
    deadline = time.monotonic() + 30
    while not _temporaries(root):
        assert process.poll() is None, "the run ended before it staged anything"
        assert time.monotonic() < deadline
        time.sleep(0.005)
