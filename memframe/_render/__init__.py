"""The one rendering module of memframe: HTML pages and fragments, terminal text, inline SVG.

A leaf: it takes frames and plain values and knows nothing of the store, the digest, the
audit or the graph code. Result objects (``Store``, ``Digest``, ``Page``, ``MissAudit``,
``ImportReport``) and the command line call down into it; one stylesheet
(``style.css`` beside this file) styles every HTML output.
"""

from memframe._render.html import (
    cards,
    chips,
    esc,
    fragment,
    html_table,
    instant,
    kv_table,
    label,
    page,
    rows_table,
    stylesheet,
    visible,
)
from memframe._render.reports import (
    OUTCOME_COLORS,
    audit_html,
    digest_html,
    door_page_html,
    import_html,
    store_html,
)
from memframe._render.svg import svg_bars
from memframe._render.text import audit_summary, audit_text, audit_window, digest_text, plural

__all__ = [
    "OUTCOME_COLORS", "audit_html", "audit_summary", "audit_text", "audit_window", "cards",
    "chips", "digest_html", "digest_text", "door_page_html", "esc", "fragment", "html_table",
    "import_html", "instant", "kv_table", "label", "page", "plural", "rows_table",
    "store_html", "stylesheet", "svg_bars", "visible",
]
