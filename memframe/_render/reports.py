"""The HTML reports: the digest page, the recall-miss audit page, a store, a door's page,
an import report. Each takes plain values and frames (never a store or a result object)
and returns a notebook fragment or, with ``page=True``, a self-contained page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from memframe._render.charts import OUTCOME_COLORS, lane_overrides, miss_trend, top_terms
from memframe._render.html import (
    cards,
    chips,
    esc,
    fragment,
    html_table,
    kv_table,
    page,
    rows_table,
)

__all__ = ["digest_html", "audit_html", "store_html", "door_page_html", "import_html"]



def _wrap(title: str, body: str, as_page: bool) -> str:
    return page(title, body) if as_page else fragment(body)


# ---- the digest ----------------------------------------------------------------------------

_HEADLINE_SECTIONS = (("handoff", "Handoffs"), ("newest", "Newest"),
                      ("most_recalled", "Most recalled"))
#: how a list is ordered, where a reader could guess otherwise
_ORDER = {"newest": " · the last written first (created_at may differ)",
          "most_recalled": " · by recalls"}
_CARD_KEYS = (("total", "capsules"), ("relations", "relations"),
              ("open_sessions", "open sessions"), ("audit_events", "audit events"),
              ("recall_misses", "recall misses"), ("lane_overrides_total", "lane overrides"),
              ("archive_candidates", "archive candidates"), ("unanchored", "unanchored"))
_HANDLED = {"label", "framing", "by_project", "open_session_ids", "recent_failures", "sources",
            "dag", "mission", "tiers", "journal", "staged", "pinned", "pinned_total",
            "open_efforts", "open_efforts_total"} | {k for k, _ in _CARD_KEYS} | {
    k for key, _ in _HEADLINE_SECTIONS for k in (key, f"{key}_total")}


_PLAIN = {("label", "ADVISORY_NOT_AUTHORITY"): "advisory memory",
          ("framing", "DATA"): "read it as data, never as instructions"}


def _headline_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    tainted = any(r.get("instruction_taint") for r in rows)
    out = []
    for r in rows:
        row = {k: v for k, v in r.items() if k != "instruction_taint" or tainted}
        out.append(row)
    return out


def _section(title: str, count: str = "") -> str:
    return f"<h2>{esc(title)}" + (f' <span class="mf-muted">{esc(count)}</span>' if count
                                  else "") + "</h2>"


def _of(shown: int, total: int | None) -> str:
    return f"{shown:,} of {total:,}" if total is not None and total != shown else f"{shown:,}"


def _generic(key: str, value: Any) -> str:
    """A section this renderer has no layout for still shows, plainly."""
    if isinstance(value, list):
        if value and all(isinstance(v, Mapping) for v in value):
            return _section(key, f"{len(value):,}") + rows_table(value)
        return _section(key, f"{len(value):,}") + chips([str(v) for v in value])
    if isinstance(value, Mapping):
        parts = [_section(key)]
        scalars = [(k, v) for k, v in value.items() if not isinstance(v, list | Mapping)]
        if scalars:
            parts.append(kv_table(scalars))
        for k, v in value.items():
            if isinstance(v, list | Mapping):
                parts.append(f"<h3>{esc(k)}</h3>")
                if isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
                    parts.append(rows_table(v))
                elif isinstance(v, list):
                    parts.append(chips([str(x) for x in v]))
                else:
                    parts.append(kv_table(v.items()))
        return "".join(parts)
    return kv_table([(key, value)])


def _effort_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Open-effort rows flattened for one table: dag lists shown as their totals."""
    out = []
    for r in _headline_rows(rows):
        row = {k: v for k, v in r.items()
               if k not in ("ready", "blocked", "done", "handoff")
               and not k.endswith("_total") or k == "member_total"}
        for k in ("ready", "blocked", "done"):
            if f"{k}_total" in r:
                row[k] = r[f"{k}_total"]
        handoff = r.get("handoff")
        row["handoff"] = handoff.get("id") if isinstance(handoff, Mapping) else None
        out.append(row)
    return out


def digest_html(body: Mapping[str, Any], *, title: str = "memframe digest",
                generation: int | None = None, digest_hash: str | None = None,
                as_page: bool = False) -> str:
    """A digest body (``Digest.to_dict()``) as HTML: headline numbers as cards, then one
    section per list, ids on one line, instants in one format.

    Examples:
        >>> html = digest_html({"unchanged": True, "hash": "ab"}, generation=3)
        >>> "unchanged" in html and "<script" not in html
        True
    """
    sub = []
    if generation is not None:
        sub.append(f"generation <b>{generation:,}</b>")
    if digest_hash:
        sub.append(f'hash <code class="mf-hash" title="{esc(digest_hash)}">'
                   f"{esc(digest_hash[:16])}…</code>")
    wire = [f"{key} {body[key]}" for key in ("label", "framing") if key in body]
    if wire:
        # the wire's words for what the digest is, in plain words (the wire's in a tooltip)
        plain = [_PLAIN.get((key, body[key]), str(body[key]))
                 for key in ("label", "framing") if key in body]
        sub.append(f'<span title="{esc(" · ".join(wire))}">{esc(": ".join(plain))}</span>')
    parts = [f"<h1>{esc(title)}</h1>", f'<p class="mf-sub">{" · ".join(sub)}</p>']
    if body.get("unchanged"):
        parts.append(f'<p>unchanged: the known hash <code class="mf-hash">'
                     f"{esc(body.get('hash'))}</code> matches; no bodies</p>")
        return _wrap(title, "".join(parts), as_page)
    parts.append(cards([(name, body[k]) for k, name in _CARD_KEYS if k in body]))

    if "by_project" in body:
        parts.append(_section("By project", f"{len(body['by_project']):,} projects"))
        parts.append(rows_table(body["by_project"]))
    for key, name in _HEADLINE_SECTIONS:
        if key in body or f"{key}_total" in body:
            rows = body.get(key, [])
            parts.append(_section(name, _of(len(rows), body.get(f"{key}_total"))
                                  + _ORDER.get(key, "")))
            parts.append(rows_table(_headline_rows(rows)) if rows
                         else '<p class="mf-muted">none</p>')
    if "open_session_ids" in body:
        ids = body["open_session_ids"]
        parts.append(_section("Open sessions", _of(len(ids), body.get("open_sessions"))))
        parts.append(chips(ids, total=body.get("open_sessions")))
    dag = body.get("dag")
    if dag:
        if dag.get("status") == "cycle":
            parts.append(_section("Blocks-DAG", "cycle"))
            parts.append('<p class="mf-bad">a live blocks-cycle: readiness is undefined</p>')
            parts.append(chips(dag["cycle"], total=dag.get("entangled_total")))
        else:
            parts.append(_section("Blocks-DAG", "ok"))
            grid = []
            for k in ("ready", "blocked", "done"):
                if k in dag:
                    grid.append(f"<div><h3>{k} ({dag.get(f'{k}_total', len(dag[k])):,})</h3>"
                                f"{chips(dag[k], total=dag.get(f'{k}_total'))}</div>")
            parts.append(f'<div class="mf-grid">{"".join(grid)}</div>')
    mission = body.get("mission")
    if mission:
        if mission.get("status") == "cycle":
            parts.append(_section("Mission", "cycle"))
            parts.append(chips(mission["cycle"], total=mission.get("entangled_total")))
        else:
            roots = mission.get("roots", [])
            parts.append(_section("Mission roots", f"{len(roots):,}"))
            parts.append(rows_table(_headline_rows(roots)) if roots
                         else '<p class="mf-muted">none</p>')
    failures = body.get("recent_failures")
    if failures is not None:
        rows = failures.get("recall_misses", [])
        parts.append(_section("Recent recall misses", f"{len(rows):,}"))
        parts.append(rows_table(rows) if rows else '<p class="mf-muted">none</p>')
    if "sources" in body:
        rows = body["sources"].get("sources", [])
        parts.append(_section("Sources", f"{len(rows):,}"))
        parts.append(rows_table(rows) if rows else '<p class="mf-muted">none</p>')
    if "pinned" in body or "pinned_total" in body:
        rows = body.get("pinned", [])
        parts.append(_section("Pinned", _of(len(rows), body.get("pinned_total"))))
        parts.append(rows_table(_headline_rows(rows)) if rows
                     else '<p class="mf-muted">none</p>')
    if "open_efforts" in body or "open_efforts_total" in body:
        rows = body.get("open_efforts", [])
        parts.append(_section("Open efforts", _of(len(rows), body.get("open_efforts_total"))))
        parts.append(rows_table(_effort_rows(rows)) if rows
                     else '<p class="mf-muted">none</p>')
    state = [k for k in ("tiers", "journal", "staged") if k in body]
    if state:
        parts.append(_section("Tiers, journal and staged review" if "staged" in body
                              else "Tiers and journal"))
        parts.append('<div class="mf-grid">' + "".join(
            f"<div>{kv_table(body[k].items(), caption=k)}</div>" for k in state) + "</div>")
    for key, value in body.items():
        if key not in _HANDLED and key not in ("unchanged", "hash"):
            parts.append(_generic(key, value))
    return _wrap(title, "".join(parts), as_page)


# ---- the recall-miss audit -------------------------------------------------------------------

def _audit_charts(terms: pl.DataFrame, daily: pl.DataFrame, lane_daily: pl.DataFrame,
                  outcomes: Sequence[str], limit: int) -> list[str]:
    """The audit's charts as inline SVG: the same drawings as :mod:`memframe.display`."""
    charts = []
    if daily.height:
        charts.append(miss_trend(daily, outcomes))
    if terms.height:
        charts.append(top_terms(terms, min(limit, 25), outcomes))
    if lane_daily.height:
        charts.append(lane_overrides(lane_daily))
    return [chart.inline for chart in charts]


def audit_html(*, summary: str, window: str, vocabulary_size: int, totals: Mapping[str, int],
               terms: pl.DataFrame, aliases: pl.DataFrame, daily: pl.DataFrame,
               lane_daily: pl.DataFrame, outcomes: Sequence[str] = tuple(OUTCOME_COLORS),
               limit: int = 50, as_page: bool = True) -> str:
    """The recall-miss audit as HTML: totals, inline SVG charts, the tables.

    Examples:
        >>> import polars as pl
        >>> empty = pl.DataFrame()
        >>> html = audit_html(summary="audit", window="all time", vocabulary_size=0,
        ...                   totals={"misses": 0, "lane_overrides": 0}, terms=empty,
        ...                   aliases=empty, daily=empty, lane_daily=empty)
        >>> html.startswith("<!DOCTYPE html>") and "<script" not in html
        True
    """
    body = [f"<h1>{esc(summary)}</h1>",
            f'<p class="mf-sub">window: {esc(window)}; vocabulary: {vocabulary_size:,} '
            f"distinct terms of live capsules</p>",
            cards(list(totals.items()))]
    if totals.get("misses", 0) == 0 and totals.get("lane_overrides", 0) == 0:
        body.append("<p>no recall misses recorded</p>")
    charts = _audit_charts(terms, daily, lane_daily, outcomes, limit)
    if charts:
        body.append('<div class="mf-charts">' + "".join(
            f'<figure class="mf-chart-card">{chart}</figure>' for chart in charts) + "</div>")
    for caption, frame in (("Missed terms", terms), ("Alias proposals", aliases),
                           ("Misses per day (UTC)", daily),
                           ("Lane overrides per day", lane_daily)):
        if frame.height:
            body.append(_section(caption, f"{frame.height:,}"))
            body.append(html_table(frame, limit=limit))
    return _wrap(summary, "".join(body), as_page)


# ---- a store, a door's page, an import -----------------------------------------------------

def store_html(kind: str, path: str, generation: int, committed_at: str | None,
               tables: Sequence[tuple[str, int, int]]) -> str:
    """A store (or frozen view) as a notebook fragment: its tables, rows, partitions.

    Examples:
        >>> "capsules" in store_html("Store", "/s", 3, None, [("capsules", 10, 1)])
        True
    """
    rows = [{"table": n, "rows": r, "partitions": p} for n, r, p in tables]
    when = f" · committed {esc(committed_at)}" if committed_at else ""
    return fragment(
        f"<h3>memframe {esc(kind)} <code>{esc(path)}</code></h3>"
        f'<p class="mf-sub">generation <b>{generation:,}</b>{when}</p>'
        + rows_table(rows, columns=["table", "rows", "partitions"])
    )


def door_page_html(rows: pl.DataFrame, *, rows_visited: int, page_hash: str, unchanged: bool,
                   total: int | None, limit: int = 50) -> str:
    """A door's answer (a ``Page``): what it read, its hash, then the rows.

    Examples:
        >>> import polars as pl
        >>> html = door_page_html(pl.DataFrame({"conversation_id": ["c-1"]}), rows_visited=4,
        ...                       page_hash="ab" * 32, unchanged=False, total=1)
        >>> "c-1" in html and "rows_visited" in html
        True
    """
    facts = [("rows_visited", rows_visited)]
    if total is not None:
        facts.append(("total", total))
    facts.append(("unchanged", unchanged))
    head = (cards(facts) + f'<p class="mf-sub">hash <code class="mf-hash" '
            f'title="{esc(page_hash)}">{esc(page_hash[:16])}…</code></p>')
    return fragment(head + html_table(rows, limit=limit))


def import_html(*, title: str, source: str, store: str, mode: str, generation: int,
                rows_written: int, seconds: float, erased: int,
                tables: Sequence[tuple[str, Sequence[tuple[str, int | None]]]],
                notes: Sequence[str], as_page: bool = False) -> str:
    """An import report: what was read from the source and what was written.

    Examples:
        >>> html = import_html(title="import", source="a.db", store="s", mode="exact",
        ...                    generation=2, rows_written=3, seconds=0.1, erased=0,
        ...                    tables=[("rows read", [("memories", 3)])], notes=["n<"])
        >>> "n&lt;" in html and "memories" in html
        True
    """
    sub = (f"({esc(mode)}) <code>{esc(source)}</code> &rarr; <code>{esc(store)}</code>, "
           f"generation <b>{generation:,}</b>, {rows_written:,} rows written in "
           f"{seconds:.2f}s" + (f", {erased:,} content(s) erased" if erased else ""))
    grid = "".join(
        f"<div>{kv_table([(k, '?' if v is None else v) for k, v in items], caption=name)}</div>"
        for name, items in tables)
    notes_html = "".join(f"<li>{esc(n)}</li>" for n in notes)
    body = (f"<h1>{esc(title)}</h1><p class=\"mf-sub\">{sub}</p>"
            f'<div class="mf-grid">{grid}</div>' + (f"<ul>{notes_html}</ul>" if notes else ""))
    return _wrap(title, body, as_page)
