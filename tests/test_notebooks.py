"""The notebooks in notebooks/ run from a clean checkout, top to bottom, without error.

Each is executed with nbclient (kernel python3, cwd notebooks/, 120 s budget). They read
the bundled sample store or make small synthetic stores in temporary directories; nothing
outside the repository and no network.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
EXPECTED = ["01-explore-a-store.ipynb", "02-digest.ipynb", "03-recall-miss-audit.ipynb",
            "04-sessions.ipynb"]
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))


def test_the_notebooks_are_all_there():
    assert [p.name for p in PATHS] == EXPECTED


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_committed_without_outputs_and_teaching(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "strip the outputs"
    # a short markdown cell before each step: every code cell follows prose
    kinds = [cell.cell_type for cell in nb.cells]
    assert kinds[0] == "markdown"
    code_runs = "".join("c" if k == "code" else "m" for k in kinds)
    assert "cc" not in code_runs


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert not errors
