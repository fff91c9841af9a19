"""The tour notebook (data_samples/tour.ipynb): stored without outputs, runs end to end."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("altair")
pytest.importorskip("vl_convert")

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


def test_tour_runs_end_to_end() -> None:
    notebook = nbformat.read(TOUR, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(SAMPLES)}},  # the notebook runs next to the samples
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    rich = [
        o.get("data", {}) for o in outputs if o.output_type in ("execute_result", "display_data")
    ]
    html = [data["text/html"] for data in rich if "text/html" in data]
    # Frames, charts (Vega-Lite specifications), the section with its static SVG, result objects.
    assert any('class="dataframe"' in h for h in html), "no polars frame shown"
    assert sum("vega" in h.lower() for h in html) >= 12, "charts missing"
    assert any("<svg" in h and 'class="provenance"' in h for h in html), "no report section"
    assert any("<caption>SignFlipResult</caption>" in h for h in html), "no result object"
    assert any("fit report" in h for h in html), "no router fit report"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "tour_report.html" in printed
    assert "depth_rates.svg" in printed
