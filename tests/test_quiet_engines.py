"""Quiet engines: the JVM's console output goes to a log file, never to stderr.

Issue 26: ``--engine spark`` printed eight JVM/Spark log lines on stderr before our one-line
error. The JVM pyspark launches inherits file descriptors 1 and 2; ``session(log=...)`` points
them at a log file while the JVM starts, so everything it ever prints lands there. The command
line names that file with ``--debug`` and removes it otherwise. One real Spark run (slow: a JVM
starts) checks the whole path; the rest runs without Java.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from recoverylab import engines
from recoverylab.cli import _engine
from recoverylab.engines import _spark
from tests.conftest import REPO


def test_console_output_of_a_child_goes_to_the_log(tmp_path: Path, capfd) -> None:
    log = tmp_path / "jvm.log"
    with _spark._console_to(log):
        subprocess.run(["sh", "-c", "echo child-out; echo child-err >&2"], check=True)
        os.write(2, b"native-err\n")
    print("python-out")
    captured = capfd.readouterr()
    assert "child" not in captured.err + captured.out
    assert "native-err" not in captured.err
    assert captured.out == "python-out\n"  # the streams are restored after
    assert log.read_text().split() == ["child-out", "child-err", "native-err"]


def _fake_spark(monkeypatch: pytest.MonkeyPatch, scratch: Path) -> list[Path]:
    """Replace session() with one that 'starts a JVM' writing a warning to its log."""
    started: list[Path] = []
    monkeypatch.setattr(_engine.tempfile, "gettempdir", lambda: str(scratch))

    def session(master: object, *, log: Path) -> object:
        log.write_text("WARN Utils: Your hostname resolves to a loopback address\n")
        started.append(log)
        monkeypatch.setattr(_spark, "_JVM_LOG", [log])
        return SimpleNamespace(sparkContext=SimpleNamespace(setLogLevel=lambda level: None))

    no_active = SimpleNamespace(SparkSession=SimpleNamespace(getActiveSession=lambda: None))
    monkeypatch.setattr(engines, "session", session)
    monkeypatch.setattr(engines, "require_pyspark", lambda: no_active)
    monkeypatch.setattr(_engine.atexit, "register", lambda f, **kw: started.append(kw))
    return started


@pytest.mark.parametrize("debug", [True, False])
def test_debug_names_the_spark_log_and_otherwise_it_is_removed(
    monkeypatch, capsys, tmp_path, debug
) -> None:
    started = _fake_spark(monkeypatch, tmp_path)
    args = argparse.Namespace(engine="spark", spark_master=None, debug=debug, command="paired")
    _engine.engine_from(args)
    log = started[0]
    assert log.parent == tmp_path
    err = capsys.readouterr().err
    if debug:
        assert err == f"recoverylab paired: Spark log: {log}\n"
        assert started == [log]
    else:
        assert err == ""
        assert started == [log, {"missing_ok": True}]  # unlinked when the process ends


@pytest.mark.slow
def test_spark_with_a_bad_input_prints_one_line(tmp_path: Path) -> None:
    """A real JVM starts (10-40 s): its eight log lines must not reach stderr."""
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed (pip install 'recoverylab[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime: Spark needs Java 17+")
    bad = tmp_path / "forks.csv"
    bad.write_text("a,b\n1,2\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(REPO)}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    done = subprocess.run(
        [sys.executable, "-m", "recoverylab", "--quiet", "paired", str(bad), "--engine", "spark",
         "--spark-master", "local[1]"],
        capture_output=True, env=env, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith("recoverylab paired: error: ")
    assert "`task_id`" in err
    assert not list(scratch.glob("recoverylab-spark-*.log"))  # removed without --debug
