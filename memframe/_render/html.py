"""HTML primitives: escaping, instants, tables, cards, chips, the page shell.

Every value that may come from a store goes through :func:`esc`: control, line and
paragraph separators and bidirectional overrides are made visible as ``\\uXXXX`` text (the
one :func:`memframe._render.terminal.visible`), then
``html.escape(..., quote=True)`` neutralises markup and attribute breakouts.
"""

from __future__ import annotations

import datetime
import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from memframe._render.terminal import visible
from memframe.text import headline

__all__ = [
    "esc", "visible", "label", "instant", "cell", "header", "html_table", "rows_table", "kv_table",
    "cards", "chips", "fragment", "page", "stylesheet",
]


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


def label(text: str | None, width: int = 40) -> str:
    """A stored text as one short visible line (headline law, then control characters
    made visible). Not escaped: pass the result through :func:`esc` for HTML.

    Examples:
        >>> label("retrieval\\nsecond line")
        'retrieval…'
        >>> label("bell\\x07", 10)
        'bell\\\\u0007'
    """
    if text is None:
        return ""
    return visible(headline(text, width))


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?Z$")


def _instant_text(value: datetime.datetime | datetime.date | str) -> tuple[str, str]:
    """(shown, exact) for an instant: shown is ``YYYY-MM-DD HH:MM:SSZ`` (UTC), exact the
    full text with its fraction."""
    if isinstance(value, str):
        match = _RFC3339.match(value)
        return (f"{match.group(1)} {match.group(2)}Z" if match else value), value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC)
        exact = value.isoformat().replace("+00:00", "Z")
        return value.strftime("%Y-%m-%d %H:%M:%S") + ("Z" if value.tzinfo else ""), exact
    return value.isoformat(), value.isoformat()


def instant(value: datetime.datetime | datetime.date | str | None) -> str:
    """One instant as HTML, in the one format every page uses (UTC, to the second; the
    exact value in the ``datetime`` attribute and the tooltip).

    Examples:
        >>> instant("2026-06-13T08:48:29.335893306Z")
        '<time class="mf-time" datetime="2026-06-13T08:48:29.335893306Z" title="2026-06-13T08:48:29.335893306Z"><span>2026-06-13</span> <span>08:48:29Z</span></time>'
        >>> instant(None)
        ''
    """
    if value is None:
        return ""
    shown, exact = _instant_text(value)
    day, space, clock = shown.partition(" ")
    if space:  # date and time each stay whole; a narrow column breaks between them
        shown_html = f"<span>{esc(day)}</span> <span>{esc(clock)}</span>"
    else:
        shown_html = esc(shown)
    return (f'<time class="mf-time" datetime="{esc(exact)}" title="{esc(exact)}">'
            f"{shown_html}</time>")


_ID_NAMES = {"id", "session_id", "conversation_id", "capsule_id", "last_member_id", "from_id",
             "to_id", "subject", "cursor", "source_key", "hash", "alias", "term"}
_TIME_NAMES = {"at", "created_at", "last_recalled_at", "first_at", "last_at", "started_at",
               "finished_at", "committed_at", "first_seen", "last_seen"}


_LONG = 32  # characters: a text longer than this wraps, and its table fills the width


def cell(name: str, value: Any) -> str:
    """One ``<td>`` for a value of column ``name``: ids never wrap, instants in the one
    format, numbers right-aligned, stored text escaped.

    Examples:
        >>> cell("id", "cap-12")
        '<td class="mf-id">cap-12</td>'
        >>> cell("count", 1234)
        '<td class="mf-num">1,234</td>'
    """
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td>{esc(value)}</td>"
    if isinstance(value, int):
        return f'<td class="mf-num">{value:,}</td>'
    if isinstance(value, float):
        return f'<td class="mf-num">{esc(f"{value:,.4g}")}</td>'
    if isinstance(value, datetime.datetime | datetime.date) or (
        isinstance(value, str) and name in _TIME_NAMES
    ):
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            return f'<td class="mf-time">{esc(value.isoformat())}</td>'
        return f"<td>{instant(value)}</td>"
    if name in _ID_NAMES:
        return f'<td class="mf-id">{esc(value)}</td>'
    # a long text (a headline) wraps in the width its table has; a short one (a kind, a
    # project) stays on one line
    klass = "mf-text mf-long" if len(value) > _LONG else "mf-text"
    return f'<td class="{klass}" title="{esc(value)}">{esc(value)}</td>'


#: column names as people read them; the column's own name stays in the header's tooltip
_HEADERS = {"project_id": "project", "created_at": "created", "recall_count": "recalls",
            "last_recalled_at": "last recalled", "instruction_taint": "taint",
            "member_total": "members", "newest_id": "newest", "ready_total": "ready",
            "blocked_total": "blocked", "done_total": "done", "handoff_id": "handoff",
            "source_key": "source", "session_id": "session", "conversation_id": "conversation",
            "capsule_id": "capsule", "first_seen": "first seen", "last_seen": "last seen",
            "in_vocabulary": "in vocabulary", "misses_explained": "misses explained",
            "auto_pick": "auto pick", "missing_evidence": "missing evidence",
            "memory_count": "memories", "live_count": "live", "last_at": "last activity",
            "first_at": "first activity", "rows_visited": "rows read"}


def header(name: str) -> str:
    """A column's header in words (``project_id`` -> ``project``, else underscores as
    spaces).

    Examples:
        >>> header("project_id"), header("archive_candidates"), header("id")
        ('project', 'archive candidates', 'id')
    """
    return _HEADERS.get(name, name.replace("_", " "))


def _head(name: str, numeric: bool) -> str:
    """One ``<th>``: the header in words, the column's name in its tooltip."""
    klass = ' class="mf-num"' if numeric else ""
    return f'<th{klass} title="{esc(name)}">{esc(header(name))}</th>'


def _scroll(table: str, caption: str | None) -> str:
    """A table inside its own box: a table wider than the page scrolls there (shadows at
    the box's edges show there is more), never the page. The box can take keyboard focus
    so that it can be scrolled without a mouse."""
    name = esc(caption) if caption else "table"
    return (f'<div class="mf-scroll" role="region" tabindex="0" aria-label="{name}">'
            f"{table}</div>")


def _table_class(text_columns: bool) -> str:
    # a table with a text column takes the width available, and its text wraps in it
    return "mf-table mf-fill" if text_columns else "mf-table"


def rows_table(rows: Sequence[Mapping[str, Any]], *, caption: str | None = None,
               columns: Sequence[str] | None = None, more: int = 0) -> str:
    """Plain rows (dicts) as one escaped table; ``more`` says how many were left out.

    Examples:
        >>> rows_table([{"id": "cap-1", "n": 2}])
        '<div class="mf-scroll" role="region" tabindex="0" aria-label="table"><table class="mf-table"><thead><tr><th title="id">id</th><th class="mf-num" title="n">n</th></tr></thead><tbody><tr><td class="mf-id">cap-1</td><td class="mf-num">2</td></tr></tbody></table></div>'
    """
    if columns is None:
        columns = []
        for row in rows:
            columns += [k for k in row if k not in columns]
        # a column with no value in any row says nothing: leave it out
        columns = [c for c in columns if any(r.get(c) is not None for r in rows)] or columns
    numeric = {c for c in columns
               if rows and all(isinstance(r.get(c), int | float) and not isinstance(r.get(c), bool)
                               for r in rows if r.get(c) is not None)
               and any(r.get(c) is not None for r in rows)}
    head = "".join(_head(c, c in numeric) for c in columns)
    cells = [[cell(c, r.get(c)) for c in columns] for r in rows]
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in cells)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    tail = f'<p class="mf-more">{more:,} more not shown</p>' if more > 0 else ""
    fill = any("mf-long" in c for row in cells for c in row)
    return _scroll(f'<table class="{_table_class(fill)}">{cap}<thead><tr>{head}</tr></thead>'
                   f"<tbody>{body}</tbody></table>", caption) + tail


def html_table(frame: pl.DataFrame, *, caption: str | None = None, limit: int | None = None,
               numeric_right: bool = True) -> str:
    """A Polars frame as an escaped HTML table (instants in the one format).

    Args:
        frame: the rows to show.
        caption: an optional caption (escaped).
        limit: show at most this many rows and say how many were left out.
        numeric_right: right-align numeric columns.

    Examples:
        >>> import polars as pl
        >>> html_table(pl.DataFrame({"term": ["<b>"], "misses": [2]}))
        '<div class="mf-scroll" role="region" tabindex="0" aria-label="table"><table class="mf-table"><thead><tr><th title="term">term</th><th class="mf-num" title="misses">misses</th></tr></thead><tbody><tr><td class="mf-id">&lt;b&gt;</td><td class="mf-num">2</td></tr></tbody></table></div>'
    """
    shown = frame if limit is None else frame.head(limit)
    numeric = {n for n, d in frame.schema.items() if numeric_right and d.is_numeric()}
    head = "".join(_head(n, n in numeric) for n in frame.columns)
    rows = []
    for row in shown.iter_rows():
        rows.append("<tr>" + "".join(
            cell(n, v) if (n in numeric or not isinstance(v, int | float) or isinstance(v, bool))
            else f"<td>{esc(v)}</td>"
            for n, v in zip(frame.columns, row, strict=True)) + "</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    more = ""
    if limit is not None and frame.height > limit:
        more = f'<p class="mf-more">{frame.height - limit:,} more rows not shown</p>'
    fill = any("mf-long" in row for row in rows)
    return _scroll(f'<table class="{_table_class(fill)}">{cap}<thead><tr>{head}</tr></thead>'
                   f"<tbody>{''.join(rows)}</tbody></table>", caption) + more


def kv_table(pairs: Iterable[tuple[str, Any]], *, caption: str | None = None) -> str:
    """Name/value pairs as a two-column table.

    Examples:
        >>> kv_table([("out_of_band", 0)])
        '<div class="mf-scroll" role="region" tabindex="0" aria-label="table"><table class="mf-table mf-kv"><tbody><tr><th title="out_of_band">out of band</th><td class="mf-num">0</td></tr></tbody></table></div>'
    """
    body = "".join(f'<tr><th title="{esc(k)}">{esc(header(k))}</th>{cell(k, v)}</tr>'
                   for k, v in pairs)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return _scroll(f'<table class="mf-table mf-kv">{cap}<tbody>{body}</tbody></table>', caption)


def cards(pairs: Iterable[tuple[str, Any]]) -> str:
    """Headline numbers as a row of small cards (value above, name below).

    Examples:
        >>> cards([("recurring_terms", 3000)])
        '<div class="mf-cards"><div class="mf-card"><b>3,000</b><span title="recurring_terms">recurring terms</span></div></div>'
    """
    items = []
    for name, value in pairs:
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else esc(value)
        items.append(f'<div class="mf-card"><b>{shown}</b><span title="{esc(name)}">'
                     f"{esc(header(name))}</span></div>")
    return f'<div class="mf-cards">{"".join(items)}</div>'


def chips(ids: Sequence[str], *, total: int | None = None) -> str:
    """Ids as a wrapping row of chips (each id on one line); says how many are not shown.

    Examples:
        >>> chips(["cap-1", "cap-2"], total=5)
        '<ul class="mf-chips"><li class="mf-id">cap-1</li><li class="mf-id">cap-2</li><li class="mf-muted">and 3 more</li></ul>'
        >>> chips([])
        '<p class="mf-muted">none</p>'
    """
    if not ids:
        return '<p class="mf-muted">none</p>'
    items = "".join(f'<li class="mf-id">{esc(i)}</li>' for i in ids)
    if total is not None and total > len(ids):
        items += f'<li class="mf-muted">and {total - len(ids):,} more</li>'
    return f'<ul class="mf-chips">{items}</ul>'


@cache
def stylesheet() -> str:
    """The one stylesheet (``memframe/_render/style.css``), as text.

    Examples:
        >>> ".mf-id" in stylesheet()
        True
    """
    return resources.files(__package__).joinpath("style.css").read_text(encoding="utf-8")


def fragment(body: str) -> str:
    """A notebook fragment: the stylesheet and ``body`` inside one ``.mf`` block.

    Examples:
        >>> fragment("<p>x</p>").endswith('<div class="mf"><p>x</p></div>')
        True
    """
    return f"<style>{stylesheet()}</style><div class=\"mf\">{body}</div>"


def page(title: str, body: str) -> str:
    """A self-contained HTML page: inline stylesheet, no script, nothing fetched.

    Examples:
        >>> html = page("t <x>", "<p>hi</p>")
        >>> html.startswith("<!DOCTYPE html>") and "<title>t &lt;x&gt;</title>" in html
        True
    """
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{esc(title)}</title><style>{stylesheet()}</style></head>"
        f'<body><main class="mf mf-page">{body}</main></body></html>\n'
    )
