"""The tour notebook (data_samples/tour.ipynb): stored without outputs, runs end to end offline.

The kernel runs with the network unavailable: a ``sitecustomize`` module put first on the
kernel's ``PYTHONPATH`` refuses every name lookup and connection that does not stay on this
machine (the kernel's own ZeroMQ channels are loopback and C-level, so they keep working). Any
output that still points at a CDN, or a chart without an image, fails the test; so does a
temporary directory left behind (the kernel's ``TMPDIR`` is a directory of the test's own).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("altair")
pytest.importorskip("vl_convert")

from recoverylab.report import CHARTS  # noqa: E402  (after the skips: needs the report extra)

TOUR = SAMPLES / "tour.ipynb"


def test_tour_is_stored_without_outputs() -> None:
    notebook = nbformat.read(TOUR, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, "the tour has no code"
    for cell in code:
        assert cell.outputs == []
        assert cell.execution_count is None
    assert "widgets" not in notebook.metadata


#: Put first on the kernel's path: no name lookup or connection leaves this machine.
NO_NETWORK = """
import socket

_LOCAL = ("localhost", "127.0.0.1", "::1", "0.0.0.0", "", None)


def _refuse(host):
    raise OSError(f"network disabled for this test (tried to reach {host!r})")


_getaddrinfo = socket.getaddrinfo


def getaddrinfo(host, *args, **kwargs):
    if host not in _LOCAL and not str(host).startswith("127."):
        _refuse(host)
    return _getaddrinfo(host, *args, **kwargs)


_connect = socket.socket.connect


def connect(self, address):
    host = address[0] if isinstance(address, tuple) else None
    if host is not None and host not in _LOCAL and not str(host).startswith("127."):
        _refuse(host)
    return _connect(self, address)


socket.getaddrinfo = getaddrinfo
socket.socket.connect = connect
"""

#: What a chart that needs the web leaves in an output.
CDN = re.compile(r"cdn\.jsdelivr|unpkg\.com|cdnjs|https?://[^\"' ]*vega", re.I)


def chart_name(source: str) -> str | None:
    """The chart function a cell ends with (``report.effect(summary)`` -> ``effect``)."""
    lines = source.strip().splitlines()
    found = re.match(r"report\.(\w+)\(", lines[-1]) if lines else None
    return found.group(1) if found else None


def offline_kernel_env(tmp_path: Path) -> dict[str, str]:
    """The kernel's environment: no network, and a temporary directory of the test's own."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_NETWORK)
    temp = tmp_path / "tmp"
    temp.mkdir()
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "TMPDIR": str(temp)}


def test_the_kernel_has_no_network(tmp_path: Path) -> None:
    probe = nbformat.v4.new_notebook()
    probe.cells = [
        nbformat.v4.new_code_cell(
            "import socket, urllib.request\n"
            "for call in (lambda: socket.getaddrinfo('cdn.jsdelivr.net', 443),\n"
            "             lambda: urllib.request.urlopen('https://cdn.jsdelivr.net/npm/vega@6')):\n"
            "    try:\n"
            "        call()\n"
            "    except OSError as exc:\n"
            "        print('refused:', exc)\n"
            "print(len(socket.getaddrinfo('localhost', 80)) > 0)"
        )
    ]
    nbclient.NotebookClient(probe, timeout=120, kernel_name="python3").execute(
        env=offline_kernel_env(tmp_path)
    )
    printed = "".join(o.get("text", "") for o in probe.cells[0].outputs)
    assert printed.count("refused: ") == 2, printed
    assert "network disabled for this test" in printed
    assert printed.endswith("True\n")


def test_tour_runs_end_to_end_offline(tmp_path: Path) -> None:
    notebook = nbformat.read(TOUR, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(SAMPLES)}},  # the notebook runs next to the samples
    )
    env = offline_kernel_env(tmp_path)
    client.execute(env=env)  # raises CellExecutionError on the first failing cell
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    rich = [
        o.get("data", {}) for o in outputs if o.output_type in ("execute_result", "display_data")
    ]
    html = [data["text/html"] for data in rich if "text/html" in data]
    # no output needs the web: every chart is an image drawn in the kernel
    for data in rich:
        for mime, content in data.items():
            assert not CDN.search(str(content)), (mime, CDN.search(str(content)))
    charts = [cell for cell in notebook.cells if chart_name(cell.source) in CHARTS]
    assert len(charts) >= 11
    for cell in charts:
        data = [o.get("data", {}) for o in cell.outputs if "data" in o]
        assert any("image/svg+xml" in d or "image/png" in d for d in data), cell.source
    # result frames as tables in pp with n; the section with its static SVG; result objects
    assert any('class="recoverylab-table"' in h and "pp" in h for h in html), "no result table"
    assert any("<svg" in h and 'class="provenance"' in h for h in html), "no report section"
    assert any("<caption>SignFlipResult</caption>" in h for h in html), "no result object"
    assert any("fit report" in h for h in html), "no router fit report"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "tour_report.html" in printed
    assert "depth_rates.svg" in printed
    assert list((tmp_path / "tmp").iterdir()) == []  # the tour leaves no temporary directory
