"""Execute the notebooks and render them, outputs included, to ``docs/notebooks/*.html``.

The notebooks are committed without outputs (so a diff shows only what a person changed);
the rendered pages are what a reader browses (GitHub shows them as source; open them in a
browser, or read them where the docs are served). ``tests/test_notebooks.py`` re-executes
every notebook and fails when a page here no longer matches what it shows, timings and
temporary paths aside: run this script then.

    python3 scripts/render_notebooks.py          # from the checkout's root
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OUT = ROOT / "docs" / "notebooks"

#: what changes from one execution to the next and says nothing about the notebook:
#: temporary directories, durations, the instants of "now"
VOLATILE = (
    (re.compile(r"/tmp/[\w./-]*?(?=[\s'\"<&)\]]|$)"), "/tmp/…"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|µs|us)\b"), "… s"),
)


def normalise(text: str) -> str:
    """The rendered page with its volatile parts replaced, for comparing two runs."""
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def execute(path: Path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), before]))
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = before
    return nb


def render(nb) -> str:
    """An executed notebook as one self-contained HTML page (nothing fetched)."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    exporter.mathjax_url = ""
    exporter.require_js_url = ""
    for cell in nb.cells:  # execution metadata holds timestamps
        cell.metadata.pop("execution", None)
        # a print arrives in one stream message or several, as the kernel flushes it:
        # join neighbouring chunks of one stream, as a notebook shows them
        merged: list = []
        for out in cell.get("outputs", []):
            if (merged and out.get("output_type") == "stream"
                    and merged[-1].get("output_type") == "stream"
                    and merged[-1].get("name") == out.get("name")):
                merged[-1]["text"] += out["text"]
            else:
                merged.append(out)
        if "outputs" in cell:
            cell["outputs"] = merged
    body, _ = exporter.from_notebook_node(nbformat.from_dict(nb))
    # the checkout's own path (the sample store's) is the reader's, not this machine's
    return body.replace(str(ROOT), "…")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        target = OUT / f"{path.stem}.html"
        target.write_text(render(execute(path)), encoding="utf-8")
        print(f"wrote {target.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
