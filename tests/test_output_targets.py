"""Output targets: a trailing slash names a directory; special files are never replaced.

Issue 26: ``--out cells_dir/`` wrote a *file* named ``cells_dir``, and ``--out`` onto a character
device (a copy of ``/dev/full``) replaced the device node with a regular file. Now a file output
given with a trailing slash, and any target that is neither a regular file nor a directory, is
refused with one line before any work (the command's inputs are not even read), and the target
is left as it was. Every output option of every command is checked through its parser.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from recoverylab._errors import OutputError
from recoverylab.cli import build_parser
from recoverylab.cli._common import RefusedTarget, is_output_option
from recoverylab.cli._import import FORMATS as IMPORT_FORMATS
from recoverylab.io import write_parquet, write_table
from tests.conftest import SAMPLES

FORKS = SAMPLES / "paired" / "main_forks.parquet"
TAKEOVER = SAMPLES / "takeover"


def _output_actions(
    parser: argparse.ArgumentParser, command: str = ""
) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _output_actions(sub, f"{command} {name}".strip())
        elif is_output_option(action.dest) and action.option_strings:
            yield command, action


def test_every_output_option_checks_its_target() -> None:
    actions = list(_output_actions(build_parser()))
    assert len(actions) >= 15  # every command's outputs, router's subcommands included
    directories = {(c, a.option_strings[0]) for c, a in actions if a.metavar == "DIR"}
    assert directories == {
        ("demo", "--out"),
        *((f"import {name}", "--out") for name in IMPORT_FORMATS),
        ("synth", "--out"),
        ("takeover", "--out-dir"),
    }
    either = {(c, a.option_strings[0]) for c, a in actions if a.metavar == "PATH"}
    assert either == {("goal", "--episodes-out")}  # a parquet directory with --engine spark
    for command, action in actions:
        assert callable(action.type), (command, action.option_strings)
        given = action.type("results/")
        if action.metavar in ("DIR", "PATH"):
            assert given == Path("results"), command
        else:
            assert isinstance(given, RefusedTarget), (command, action.option_strings)
            assert "ends with a slash" in given.message
            assert f"`{action.option_strings[0]}` is one file" in given.message
        assert action.type("results/x.parquet") == Path("results/x.parquet")


def test_a_trailing_slash_on_a_file_output_is_refused_before_any_work(cli, tmp_path) -> None:
    target = tmp_path / "cells_dir"
    result = cli("paired", tmp_path / "missing.parquet", "--out", f"{target}/", "--quiet")
    assert result.code == 2
    assert result.err == (
        f"recoverylab paired: error: `{target}/` ends with a slash, which names a directory, "
        f"but `--out` is one file. Hint: name the file, e.g. `{target}/result.parquet`.\n"
    )  # the missing input was never read: the target is checked first
    assert list(tmp_path.iterdir()) == []


def test_a_trailing_slash_on_a_directory_output_is_that_directory(cli, tmp_path) -> None:
    result = cli("takeover", "--states", TAKEOVER / "states.parquet", "--attempts",
                 TAKEOVER / "attempts.parquet", "--resamples", "20", "--quiet",
                 "--out-dir", f"{tmp_path / 'tables'}/")  # fmt: skip
    assert result.code == 0, result.err
    assert (tmp_path / "tables" / "summary.parquet").is_file()


def _special_files(root: Path) -> Iterator[tuple[str, Path]]:
    """A FIFO, a socket, a link to a character device and (as root) a copy of /dev/full."""
    fifo = root / "fifo.parquet"
    os.mkfifo(fifo)
    yield "a FIFO (named pipe)", fifo
    sock = root / "socket.parquet"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    try:
        yield "a socket", sock
    finally:
        server.close()
    link = root / "null.parquet"
    link.symlink_to(os.devnull)
    yield "a character device", link
    device = root / "full.parquet"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.stat("/dev/full").st_rdev)
    except (PermissionError, FileNotFoundError):
        return  # not root: the link above covers a device
    yield "a character device", device


def _snapshot(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_mode, info.st_ino


def test_a_special_file_is_refused_with_one_line_and_never_replaced(cli, tmp_path) -> None:
    seen = 0
    for kind, target in _special_files(tmp_path):
        seen += 1
        before = _snapshot(target)
        result = cli("paired", tmp_path / "missing.parquet", "--out", target, "--quiet")
        assert result.code == 2
        assert result.err == (
            f"recoverylab paired: error: `{target}` is {kind}, not a regular file; outputs "
            "replace only files and directories.\n"
        )
        assert _snapshot(target) == before
        for write in (write_parquet, write_table):  # the Python API refuses it too
            with pytest.raises(OutputError, match=re.escape(f"is {kind}, not a regular file")):
                write(pl.DataFrame({"a": [1]}), target)
            assert _snapshot(target) == before
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries
    assert seen >= 3


def test_a_special_file_as_a_directory_output_is_refused(cli, tmp_path) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    result = cli("synth", "forks", "--tasks", "10", "--out", fifo, "--quiet")
    assert result.code == 2
    assert "is a FIFO (named pipe), not a regular file" in result.err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_the_python_api_refuses_a_trailing_slash(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"ends with a slash, which names a directory"):
        write_parquet(pl.DataFrame({"a": [1]}), f"{tmp_path / 'cells_dir'}/")
    assert list(tmp_path.iterdir()) == []
