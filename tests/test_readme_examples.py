"""The README's examples for planning, pass^k, uplift and break-even run on the shipped samples."""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import REPO

SECTION = "## Planning, reliability, uplift and break-even"


def python_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```python\n(.*?)```", text[start:end], re.DOTALL)


def test_the_section_has_an_example_per_feature():
    assert len(python_blocks()) == 4


@pytest.mark.parametrize("index", range(4))
def test_readme_example_runs(index: int) -> None:
    if index == 2:
        pytest.importorskip("sklearn")
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        exec(compile(python_blocks()[index], f"README.md[{index}]", "exec"), {})
    finally:
        os.chdir(cwd)
