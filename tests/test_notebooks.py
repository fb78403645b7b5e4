"""The notebooks run top to bottom on the data shipped in the repo, match their generator, use the public API."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any(o.get("output_type") in ("execute_result", "display_data", "stream") for o in outputs)
    for cell in nb.cells:
        if cell.cell_type == "code" and _PLOTS.search(cell.source):
            images = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
            assert images, f"{path.name}: a plotting cell shows no figure:\n{cell.source}"


_PLOTS = re.compile(r"\b(busbw_vs_size|gain_heatmap|draw_png|plt\.subplots|imshow)\(")
"""Cells that build a figure: each must display at least one image."""


def test_both_notebooks_exist() -> None:
    assert [p.name for p in NOTEBOOKS] == ["sweep-analysis.ipynb", "topology.ipynb"]


def _generator():
    return load_script("make_notebooks")


def test_notebooks_match_their_generator() -> None:
    for name, text in _generator().render().items():
        assert (ROOT / "notebooks" / name).read_text() == text, (
            f"notebooks/{name} differs from scripts/make_notebooks.py: run `python scripts/make_notebooks.py`")


def _collscope_imports(source: str) -> list[str]:
    modules = []
    code = "\n".join("" if line.lstrip().startswith("%") else line for line in source.splitlines())  # magics
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "collscope":
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules += [a.name for a in node.names if a.name.split(".")[0] == "collscope"]
    return modules


def _is_package(module: str) -> bool:
    return ROOT.joinpath(*module.split("."), "__init__.py").is_file()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_import_the_public_api_only(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    imported = [m for cell in nb.cells if cell.cell_type == "code" for m in _collscope_imports(cell.source)]
    assert imported, "the notebook should use collscope"
    deep = [m for m in imported if not _is_package(m)]
    assert not deep, f"{path.name} imports modules, not packages' public API: {deep}"
