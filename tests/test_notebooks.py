"""The notebooks in notebooks/ run from a clean checkout, top to bottom, without error, and
their outputs need no network: no chart loads a script, no output names a URL to fetch.

Each is executed once per test session with nbclient (kernel python3, cwd notebooks/, 120 s
budget per cell); ``tests/test_browser.py`` opens the same executed notebooks, exported to
HTML, in a real browser. They read the bundled sample store or make small synthetic stores
in temporary directories; nothing outside the repository and no network.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
EXPECTED = ["01-explore-a-store.ipynb", "02-digest.ipynb", "03-recall-miss-audit.ipynb",
            "04-sessions.ipynb", "05-what-changed.ipynb"]
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
_EXECUTED: dict[Path, nbformat.NotebookNode] = {}
# executed once per worker process: this module and tests/test_browser.py (which opens the
# same executed notebooks) keep to one pytest worker, so each notebook runs once per session
pytestmark = pytest.mark.xdist_group("notebooks")


def executed(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, executed once per test session."""
    if path not in _EXECUTED:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(NOTEBOOKS)}})
        # the kernel imports this checkout's memframe, whatever else is installed
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(NOTEBOOKS.parent), before]))
        try:
            client.execute()  # raises CellExecutionError on the first failing cell
        finally:
            if before is None:
                os.environ.pop("PYTHONPATH")
            else:
                os.environ["PYTHONPATH"] = before
        _EXECUTED[path] = nb
    return _EXECUTED[path]


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
    nb = executed(path)
    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert not errors


_URL = re.compile(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", re.I)


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_outputs_need_no_network(path):
    nb = executed(path)
    charts = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            assert not any("vegalite" in kind or "javascript" in kind for kind in data), \
                "a chart left to a script"
            for kind, value in data.items():
                text = value if isinstance(value, str) else json.dumps(value)
                if kind == "image/svg+xml":
                    charts += 1
                    text = text.replace("http://www.w3.org/", "")  # XML namespaces, not fetched
                assert "<script" not in text.lower() or kind == "text/plain"
                assert not _URL.search(text), (kind, _URL.search(text).group(0))
    drawn = {"02-digest": 2, "03-recall-miss-audit": 4}.get(path.stem, 0)
    assert charts == drawn


def test_notebook_04_starts_with_a_real_first_cycle():
    nb = executed(NOTEBOOKS / "04-sessions.ipynb")
    first_cycle = next(c for c in nb.cells if c.cell_type == "code"
                       and "report = store.memory.run_cycle()" in c.source)
    (result,) = [o for o in first_cycle.outputs if o.output_type == "execute_result"]
    # the report shows as a table per maintained state, and as one line of words
    import re

    assert "session" in result["data"]["text/html"]
    found = re.search(r"folded ([\d,]+) rows, wrote ([\d,]+) session",
                      result["data"]["text/plain"])
    folded, written = (int(n.replace(",", "")) for n in found.groups())
    assert folded > 0 and written > 0
    # a tutorial shows its results; it does not assert them
    assert not any("assert " in c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_the_rendered_pages_under_docs_are_current(path):
    """docs/notebooks/<name>.html is the notebook with its outputs, as this code executes it
    (timings and temporary paths aside): after changing a notebook or what it shows, run
    `python3 scripts/render_notebooks.py`."""
    import copy
    import sys

    sys.path.insert(0, str(NOTEBOOKS.parent / "scripts"))
    try:
        from render_notebooks import normalise, render
    finally:
        sys.path.pop(0)
    page = NOTEBOOKS.parent / "docs" / "notebooks" / f"{path.stem}.html"
    assert page.is_file(), f"{page} is missing: run python3 scripts/render_notebooks.py"
    fresh = normalise(render(copy.deepcopy(executed(path))))
    committed = normalise(page.read_text(encoding="utf-8"))
    assert fresh == committed, (
        f"{page.name} is stale: run python3 scripts/render_notebooks.py and commit it")
    # it holds the outputs: every code cell that prints shows it
    assert committed.count('class="jp-OutputArea-child') >= 5
