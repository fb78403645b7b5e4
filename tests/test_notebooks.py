"""The notebooks run top to bottom on the data shipped in the repo."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any(o.get("output_type") in ("execute_result", "display_data", "stream") for o in outputs)


def test_both_notebooks_exist() -> None:
    assert [p.name for p in NOTEBOOKS] == ["sweep-analysis.ipynb", "topology.ipynb"]
