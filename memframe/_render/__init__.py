"""The one rendering module of memframe: HTML pages and fragments, terminal text, inline SVG.

A leaf: it takes frames and plain values and knows nothing of the store, the digest, the
audit or the graph code. Result objects (``Store``, ``Digest``, ``Page``, ``MissAudit``,
``ImportReport``) and the command line call down into it; one stylesheet
(``style.css`` beside this file) styles every HTML output.
"""

import importlib
from typing import Any

# name -> the module defining it; loaded on first use, so the command line's text and JSON
# (memframe._render.terminal) never load the HTML and SVG renderers
_WHERE = {
    **dict.fromkeys(("cards", "chips", "esc", "fragment", "html_table", "instant",
                     "kv_table", "label", "page", "rows_table", "stylesheet", "visible"), "html"),
    **dict.fromkeys(("audit_html", "digest_html", "door_page_html",
                     "import_html", "store_html"), "reports"),
    **dict.fromkeys(("Chart", "bar_chart", "graph_chart", "hbar_chart", "rank_chart",
                     "time_bar_chart", "time_bins", "ticks"), "svg"),
    **dict.fromkeys(("LANE_COLORS", "OUTCOME_COLORS", "lane_overrides", "miss_trend", "recall_ranks",
                     "top_terms"), "charts"),
    **dict.fromkeys(("audit_summary", "audit_text", "audit_window", "digest_text", "plural"),
                    "text"),
    **dict.fromkeys(("age_text", "fleet_html", "fleet_text"), "fleet"),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'memframe._render' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"memframe._render.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
