"""The README's code blocks run as written on the shipped samples.

Every fenced ``bash``/``sh``/``shell`` and ``python`` block of README.md is extracted and run, in
order, from a scratch directory that holds a link to ``data_samples/`` (so the blocks read the
shipped samples by the README's relative paths and write nowhere in the checkout), with this
environment's ``recoverylab`` first on the PATH. A block preceded by the line
``<!-- readme-test: skip (reason) -->`` is not run (it needs a cluster, a new environment or a
long run); the test names the skipped blocks and keeps them few. Whatever the blocks write must be
ignored by git, so running the README from the repository root leaves ``git status`` clean.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLES

README = REPO / "README.md"
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
SHELLS = ("bash", "sh", "shell", "console")
#: Most blocks the README may mark to skip (they must stay few).
MAX_SKIPPED = 5


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README."""

    line: int
    lang: str
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"README.md:{self.line} ({self.lang})"


def blocks(text: str) -> list[Block]:
    """Every fenced block with its language, its first line number and its skip reason."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        previous = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = SKIP.match(previous.strip())
        found.append(
            Block(
                start + 1,
                fence["lang"],
                "\n".join(body) + "\n",
                marker["reason"] if marker else None,
            )
        )
        i += 1
    return found


def runnable() -> list[Block]:
    return [b for b in blocks(README.read_text("utf-8")) if b.lang in (*SHELLS, "python")]


def test_blocks_are_found_and_few_are_skipped() -> None:
    found = runnable()
    assert sum(b.lang in SHELLS for b in found) >= 2
    assert sum(b.lang == "python" for b in found) >= 1
    skipped = [b for b in found if b.skip is not None]
    assert len(skipped) <= MAX_SKIPPED, [b.name for b in skipped]
    assert all(b.skip.strip() for b in skipped)  # every skip says why
    # the extractor itself: a marker applies to the next block only
    text = "<!-- readme-test: skip (x) -->\n```bash\necho a\n```\n\n```python\nprint(1)\n```\n"
    assert [(b.lang, b.skip, b.code) for b in blocks(text)] == [
        ("bash", "x", "echo a\n"),
        ("python", None, "print(1)\n"),
    ]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory like the repository root: ``data_samples`` is there (a link)."""
    work = tmp_path_factory.mktemp("readme")
    (work / "data_samples").symlink_to(SAMPLES, target_is_directory=True)
    return work


def environment() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
        "COLUMNS": "100",
    }


@pytest.mark.parametrize("block", runnable(), ids=lambda b: b.name)
def test_readme_block_runs_as_written(block: Block, scratch: Path) -> None:
    if block.skip is not None:
        pytest.skip(f"marked in the README: {block.skip}")
    if block.lang == "python":
        command = [sys.executable, "-c", block.code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", block.code]
    done = subprocess.run(
        command,
        cwd=scratch,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


def test_readme_outputs_are_ignored_by_git(scratch: Path) -> None:
    """What the blocks wrote (run before this test, in file order) is in .gitignore."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    written = sorted(
        p.name + ("/" if p.is_dir() else "") for p in scratch.iterdir() if p.name != "data_samples"
    )
    if not written:
        pytest.skip("no README block wrote anything (run with the block tests)")
    done = subprocess.run(
        [git, "check-ignore", "--no-index", "--verbose", "--non-matching", *written],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    unignored = [line.split("\t")[-1] for line in done.stdout.splitlines() if line.startswith("::")]
    assert unignored == [], f"README outputs not ignored by git: {unignored}"
