"""Notebook rendering of a digest: sections as HTML tables, every stored text escaped.

Every value that came from the store (content headlines, project ids, miss terms,
session ids, cursors, ...) goes through :func:`esc`: control characters, line and
paragraph separators and bidirectional overrides are first made visible as ``\\uXXXX``
text, then ``html.escape(..., quote=True)`` neutralises markup and attribute breakouts.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["esc", "visible", "render_html"]

_INVISIBLE = (
    list(range(0x00, 0x20))
    + list(range(0x7F, 0xA0))
    + [0x200E, 0x200F, 0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E]
    + [0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF]
)
_VISIBLE = str.maketrans({code: f"\\u{code:04x}" for code in _INVISIBLE})


def visible(text: str) -> str:
    """Make control, separator and bidi-override characters visible as ``\\uXXXX``.

    Examples:
        >>> visible("a\\nb\\u202ec")
        'a\\\\u000ab\\\\u202ec'
    """
    return text.translate(_VISIBLE)


def esc(value: Any) -> str:
    """Stored value -> safe HTML text (visible control characters, escaped markup).

    Examples:
        >>> esc('<script>alert("x")</script>')
        '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
        >>> esc(True), esc(None)
        ('true', '')
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
    return html.escape(visible(value), quote=True)


def _table(rows: Sequence[Mapping[str, Any]], caption: str, total: int | None = None) -> str:
    head = f"{esc(caption)}" + (f" ({len(rows)} of {total})" if total is not None else "")
    if not rows:
        return f"<h4>{head}</h4><p><em>none</em></p>"
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    header = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(row.get(c))}</td>" for c in columns) + "</tr>" for row in rows
    )
    return f"<h4>{head}</h4><table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def _ids(ids: Sequence[str], caption: str, total: int | None = None) -> str:
    return _table([{"id": i} for i in ids], caption, total)


def render_html(body: Mapping[str, Any], *, title: str = "memframe digest") -> str:
    """Render a digest body (``Digest.to_dict()``) as one HTML fragment."""
    if body.get("unchanged"):
        return f"<div><h3>{esc(title)}</h3><p>unchanged (hash <code>{esc(body.get('hash'))}</code>)</p></div>"
    parts = [f"<div class='memframe-digest'><h3>{esc(title)}</h3>"]
    scalars = {
        k: v
        for k, v in body.items()
        if not isinstance(v, dict | list) and not k.endswith("_total")
    }
    parts.append(_table([scalars], "summary"))
    parts.append(_table(body.get("by_project", []), "by_project"))
    for key in ("handoff", "newest", "most_recalled"):
        if key in body or f"{key}_total" in body:
            parts.append(_table(body.get(key, []), key, body.get(f"{key}_total")))
    parts.append(_ids(body.get("open_session_ids", []), "open_session_ids", body.get("open_sessions")))
    if "recent_failures" in body:
        parts.append(_table(body["recent_failures"]["recall_misses"], "recent_failures"))
    if "lane_overrides_total" in body:
        parts.append(_table([{"lane_overrides_total": body["lane_overrides_total"]}], "lane overrides"))
    if "sources" in body:
        parts.append(_table(body["sources"]["sources"], "sources"))
    dag = body.get("dag", {})
    if dag.get("status") == "cycle":
        parts.append(_ids(dag["cycle"], "dag: cycle", dag["entangled_total"]))
    elif dag:
        for key in ("ready", "blocked", "done"):
            parts.append(_ids(dag[key], f"dag: {key}", dag[f"{key}_total"]))
    mission = body.get("mission")
    if mission and mission.get("status") == "cycle":
        parts.append(_ids(mission["cycle"], "mission: cycle", mission["entangled_total"]))
    elif mission:
        parts.append(_table(mission["roots"], "mission roots"))
    if "unanchored" in body:
        parts.append(_table([{"unanchored": body["unanchored"]}], "unanchored"))
    for key in ("tiers", "journal", "staged"):
        if key in body:
            parts.append(_table([body[key]], key))
    for key in ("pinned", "open_efforts"):
        if key in body or f"{key}_total" in body:
            parts.append(_table(body.get(key, []), key, body.get(f"{key}_total")))
    parts.append("</div>")
    return "".join(parts)
