"""Notebook rendering: escaped HTML, inline SVG charts, and pictures with altair.

Three layers, all safe for hostile stored text (every term, id and headline goes through
:func:`esc`: control, separator and bidi characters made visible as ``\\uXXXX``, then
HTML-escaped with quotes):

* **HTML helpers** (base install): :func:`esc`, :func:`visible`, :func:`html_table`.
* **Inline SVG charts** (base install, no script, no network): :func:`svg_bars`, used by
  the self-contained HTML report of the recall-miss audit (:func:`audit_html`).
* **Pictures** (the ``memframe[plot]`` extra, altair imported on first use):
  :func:`miss_trend_chart`, :func:`lane_override_chart`, :func:`top_terms_chart`,
  :func:`recall_distribution_chart`, :func:`dag_chart`, :func:`mission_chart`. Their
  node/edge frames come from :func:`dag_frames` and :func:`mission_frames`, which apply
  the digest's graph rules (reference 4.10, 4.11) through :mod:`memframe.graph`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import networkx as nx
import polars as pl

from memframe import graph as _graph
from memframe.digest.html import esc, visible
from memframe.errors import MemframeError
from memframe.schema import MISS_OUTCOMES
from memframe.text import headline

if TYPE_CHECKING:  # pragma: no cover
    from memframe.audit.misses import MissAudit

__all__ = [
    "esc",
    "visible",
    "label",
    "html_table",
    "svg_bars",
    "audit_text",
    "audit_html",
    "dag_frames",
    "mission_frames",
    "miss_trend_chart",
    "lane_override_chart",
    "top_terms_chart",
    "recall_distribution_chart",
    "dag_chart",
    "mission_chart",
    "OUTCOME_COLORS",
    "DAG_COLORS",
    "MISSION_COLORS",
]

OUTCOME_COLORS: dict[str, str] = {"abstain": "#4c78a8", "missing_evidence": "#f58518"}
DAG_COLORS: dict[str, str] = {
    "ready": "#54a24b", "blocked": "#f58518", "done": "#9d9d9d", "cycle": "#e45756",
}
MISSION_COLORS: dict[str, str] = {
    "root": "#4c78a8", "child": "#54a24b", "parent": "#b279a2", "cycle": "#e45756",
}
_LANE_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d9d9d")


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


# ---- HTML ----------------------------------------------------------------------------------

def _cell(value: Any) -> str:
    if isinstance(value, float):
        return esc(f"{value:g}")
    return esc(value)


def html_table(frame: pl.DataFrame, *, caption: str | None = None, limit: int | None = None,
               numeric_right: bool = True) -> str:
    """A Polars frame as an escaped HTML table (dates and datetimes as ISO text).

    Args:
        frame: the rows to show.
        caption: an optional caption (escaped).
        limit: show at most this many rows and say how many were left out.
        numeric_right: right-align numeric columns.

    Examples:
        >>> import polars as pl
        >>> html_table(pl.DataFrame({"term": ["<b>"], "misses": [2]}))
        '<table class="memframe"><thead><tr><th>term</th><th>misses</th></tr></thead><tbody><tr><td>&lt;b&gt;</td><td style="text-align:right">2</td></tr></tbody></table>'
    """
    shown = frame if limit is None else frame.head(limit)
    right = {
        name for name, dtype in frame.schema.items() if numeric_right and dtype.is_numeric()
    }
    head = "".join(f"<th>{esc(name)}</th>" for name in frame.columns)
    rows = []
    for row in shown.iter_rows():
        cells = []
        for name, value in zip(frame.columns, row, strict=True):
            style = ' style="text-align:right"' if name in right else ""
            text = value.isoformat() if hasattr(value, "isoformat") else value
            cells.append(f"<td{style}>{_cell(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    more = ""
    if limit is not None and frame.height > limit:
        more = f"<p class=\"memframe-more\">{frame.height - limit:,} more rows not shown</p>"
    return (f'<table class="memframe">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>{more}")


# ---- inline SVG ----------------------------------------------------------------------------

# Presentation attributes on every text (not only CSS classes), so an SVG copied out of the
# page on its own still renders its labels.
_FONT = 'font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"'
_LBL = f'class="lbl" {_FONT} font-size="11" fill="#333"'
_VAL = f'class="val" {_FONT} font-size="11" fill="#666"'
_TTL = f'class="ttl" {_FONT} font-size="12" font-weight="600" fill="#222"'


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def svg_bars(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[int], str]],
    *,
    title: str,
    horizontal: bool = False,
    width: int = 640,
    height: int | None = None,
) -> str:
    """A small stacked bar chart as inline SVG (no script, no external reference).

    Args:
        categories: one label per bar (stored text is fine: it is escaped).
        series: ``(name, values, colour)`` stacked in order; ``values`` align with
            ``categories``.
        title: the chart's title (escaped).
        horizontal: bars grow to the right, one row per category (for term rankings).
        width: the SVG width in pixels.
        height: the SVG height (default depends on the orientation).

    Examples:
        >>> svg = svg_bars(["a<b", "c"], [("misses", [2, 1], "#4c78a8")], title="t")
        >>> svg.startswith("<svg") and "a&lt;b" in svg and "<script" not in svg
        True
    """
    n = len(categories)
    totals = [sum(int(values[i]) for _, values, _ in series) for i in range(n)]
    top = max(totals, default=0) or 1
    parts: list[str] = []
    legend_y = 36
    if horizontal:
        bar, gap, left, head = 16, 4, 180, 48
        height = height or head + n * (bar + gap) + 24
        plot_w = width - left - 50
        for i, cat in enumerate(categories):
            y = head + i * (bar + gap)
            parts.append(f'<text x="{left - 6}" y="{y + bar - 4}" text-anchor="end" '
                         f'{_LBL}>{esc(label(cat, 28))}</text>')
            x = float(left)
            for name, values, colour in series:
                w = plot_w * int(values[i]) / top
                if w > 0:
                    parts.append(
                        f'<rect x="{_num(x)}" y="{y}" width="{_num(w)}" height="{bar}" '
                        f'fill="{colour}"><title>{esc(label(cat, 80))}: {esc(name)} '
                        f'{int(values[i])}</title></rect>')
                x += w
            parts.append(f'<text x="{_num(x + 4)}" y="{y + bar - 4}" {_VAL}>'
                         f"{totals[i]}</text>")
    else:
        left, head, foot = 40, 48, 24
        height = height or 240
        plot_w, plot_h = width - left - 30, height - head - foot
        step = plot_w / max(n, 1)
        bar = max(step * 0.8, 1.0)
        every = max(1, math.ceil(n * 70 / plot_w))  # date labels at least 70 px apart
        parts.append(f'<line x1="{left}" y1="{head + plot_h}" x2="{left + plot_w}" '
                     f'y2="{head + plot_h}" stroke="#888"/>')
        parts.append(f'<text x="{left - 4}" y="{head + 8}" text-anchor="end" {_VAL}>'
                     f"{top}</text>")
        for i, cat in enumerate(categories):
            x = left + i * step + (step - bar) / 2
            y = float(head + plot_h)
            for name, values, colour in series:
                h = plot_h * int(values[i]) / top
                if h > 0:
                    y -= h
                    parts.append(
                        f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(bar)}" '
                        f'height="{_num(h)}" fill="{colour}"><title>{esc(label(cat, 80))}: '
                        f"{esc(name)} {int(values[i])}</title></rect>")
            if i % every == 0:
                parts.append(f'<text x="{_num(x + bar / 2)}" y="{head + plot_h + 14}" '
                             f'text-anchor="middle" {_LBL}>{esc(label(cat, 12))}</text>')
    legend = []
    lx = 10
    for name, _, colour in series:
        legend.append(f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" '
                      f'fill="{colour}"/><text x="{lx + 14}" y="{legend_y}" {_LBL}>'
                      f"{esc(name)}</text>")
        lx += 24 + 7 * len(name)
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)}"><title>{esc(title)}</title>'
        f'<text x="10" y="16" {_TTL}>{esc(title)}'
        f"</text>{''.join(legend)}{''.join(parts)}</svg>"
    )


# ---- the recall-miss audit as text and HTML -----------------------------------------------

def _window_text(audit: MissAudit) -> str:
    from memframe.text import rfc3339_text

    if audit.since is None and audit.until is None:
        return "all time"
    since = rfc3339_text(audit.since) if audit.since else "the beginning"
    until = rfc3339_text(audit.until) if audit.until else "now"
    return f"from {since} until {until} (exclusive)"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _summary_line(audit: MissAudit) -> str:
    t = audit.totals
    return (f"recall-miss audit, generation {audit.generation}: {_plural(t['misses'], 'miss')}"
            .replace("misss", "misses")
            + f" of {_plural(t['terms'], 'term')} on {_plural(t['days_with_misses'], 'day')}")


def audit_text(audit: MissAudit, *, limit: int = 20) -> str:
    """The audit as a plain-text report (stored text with control characters made visible,
    so a hostile term cannot drive the terminal).

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> print(audit_text(mf.audit.recall_misses(store)))
        recall-miss audit, generation 0: 0 misses of 0 terms on 0 days
        window: all time
        no recall misses recorded
    """
    t = audit.totals
    lines = [_summary_line(audit), f"window: {_window_text(audit)}"]
    if t["misses"] == 0 and t["lane_overrides"] == 0:
        lines.append("no recall misses recorded")
        return "\n".join(lines)
    lines.append(f"outcomes: abstain {t['abstain']:,}, missing_evidence "
                 f"{t['missing_evidence']:,}")
    lines.append(f"recurring terms (missed on {audit.recurring_days}+ days): "
                 f"{t['recurring_terms']:,}; terms the store's vocabulary lacks: "
                 f"{t['unknown_terms']:,} ({t['terms_with_alias']:,} with an alias proposal)")
    lines.append(f"lane overrides: {t['lane_overrides']:,}")
    if audit.terms.height:
        lines += ["", f"top missed terms ({min(limit, audit.terms.height)} of "
                  f"{audit.terms.height:,})",
                  f"  {'misses':>6} {'abstain':>7} {'missing':>7} {'days':>4}  "
                  f"{'first seen':<10} {'last seen':<10}  term"]
        for row in audit.terms.head(limit).iter_rows(named=True):
            flags = []
            if row["recurring"]:
                flags.append("recurring")
            if row["alias"] is not None:
                flags.append(f"-> {label(row['alias'], 40)}")
            elif not row["in_vocabulary"]:
                flags.append("not in vocabulary")
            lines.append(
                f"  {row['misses']:>6,} {row['abstain']:>7,} {row['missing_evidence']:>7,} "
                f"{row['days']:>4}  {row['first_seen']:%Y-%m-%d} {row['last_seen']:%Y-%m-%d}  "
                f"{label(row['term'], 40)}" + (f"  [{', '.join(flags)}]" if flags else ""))
    if audit.aliases.height:
        lines += ["", "alias proposals (missed term -> vocabulary term: distance, capsules)"]
        for row in audit.aliases.head(limit * audit.rules.per_term).iter_rows(named=True):
            lines.append(f"  {label(row['term'], 40)} -> {label(row['alias'], 40)}: "
                         f"{row['distance']}, {_plural(row['capsules'], 'capsule')}")
    if audit.daily.height:
        lines += ["", "misses per day (UTC)"]
        top = max(audit.daily.get_column("misses").max() or 1, 1)  # type: ignore[operator]
        for row in audit.daily.iter_rows(named=True):
            bar = "#" * max(0, round(40 * row["misses"] / top))
            lines.append(f"  {row['day']:%Y-%m-%d} {row['misses']:>6,} {bar}")
    if t["lane_overrides"]:
        lines += ["", "lane overrides (forced -> auto pick)"]
        for forced, auto, count in audit.lane_totals().iter_rows():
            lines.append(f"  {label(forced, 20)} -> {label(auto, 20)}: {count:,}")
    return "\n".join(lines)


_CSS = """
.memframe-audit{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:14px;
color:#222;max-width:960px}
.memframe-audit h2{font-size:20px}.memframe-audit h3{font-size:16px;margin-top:1.4em}
.memframe-audit table.memframe{border-collapse:collapse;margin:.4em 0}
.memframe-audit table.memframe th,.memframe-audit table.memframe td{border-bottom:1px solid #ddd;
padding:2px 8px;text-align:left;font-variant-numeric:tabular-nums}
.memframe-audit svg .lbl{font-size:11px;fill:#333}.memframe-audit svg .val{font-size:11px;fill:#666}
.memframe-audit svg .ttl{font-size:12px;font-weight:600;fill:#222}
.memframe-audit .memframe-more{color:#666;font-size:12px}
"""


def _audit_charts(audit: MissAudit, limit: int) -> list[str]:
    charts = []
    daily = audit.daily
    if daily.height:
        charts.append(svg_bars(
            [d.isoformat() for d in daily.get_column("day").to_list()],
            [(o, daily.get_column(o).to_list(), OUTCOME_COLORS[o]) for o in MISS_OUTCOMES],
            title="misses per day (UTC)",
        ))
    terms = audit.terms.head(min(limit, 25))
    if terms.height:
        charts.append(svg_bars(
            terms.get_column("term").to_list(),
            [(o, terms.get_column(o).to_list(), OUTCOME_COLORS[o]) for o in MISS_OUTCOMES],
            title="top missed terms", horizontal=True,
        ))
    lanes = audit.lane_daily
    if lanes.height:
        days = lanes.get_column("day").unique().sort()
        pairs = lanes.select("forced", "auto_pick").unique(maintain_order=True).rows()
        series = []
        for i, (forced, auto) in enumerate(pairs):
            counts = dict(lanes.filter((pl.col("forced") == forced)
                                       & (pl.col("auto_pick") == auto))
                          .select("day", "overrides").iter_rows())
            series.append((f"{forced}->{auto}", [counts.get(d, 0) for d in days],
                           _LANE_COLORS[i % len(_LANE_COLORS)]))
        charts.append(svg_bars([d.isoformat() for d in days.to_list()], series,
                               title="lane overrides per day (forced->auto)"))
    return charts


def audit_html(audit: MissAudit, *, limit: int = 50, page: bool = True) -> str:
    """The audit as HTML: a self-contained page (``page=True``) or a notebook fragment.

    The page has inline CSS and inline SVG charts only: no script, no stylesheet or
    font link, nothing fetched at view time. Every stored text is escaped.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> html = audit_html(mf.audit.recall_misses(store))
        >>> html.startswith("<!DOCTYPE html>") and "<script" not in html
        True
    """
    t = audit.totals
    body = [f'<div class="memframe-audit"><h2>{esc(_summary_line(audit))}</h2>',
            f"<p>window: {esc(_window_text(audit))}; vocabulary: "
            f"{audit.vocabulary_size:,} distinct terms of live capsules</p>",
            html_table(pl.DataFrame([t]), caption="totals")]
    if t["misses"] == 0 and t["lane_overrides"] == 0:
        body.append("<p>no recall misses recorded</p>")
    body += _audit_charts(audit, limit)
    sections = [
        ("missed terms", audit.terms),
        ("alias proposals", audit.aliases),
        ("misses per day (UTC)", audit.daily),
        ("lane overrides per day", audit.lane_daily),
    ]
    for caption, frame in sections:
        if frame.height:
            body.append(f"<h3>{esc(caption)}</h3>")
            body.append(html_table(frame, limit=limit))
    body.append("</div>")
    fragment = "".join(body)
    if not page:
        return f"<style>{_CSS}</style>{fragment}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(_summary_line(audit))}</title><style>{_CSS}</style></head>"
        f"<body>{fragment}</body></html>\n"
    )


# ---- graph frames (the digest's graph rules, with positions) -------------------------------

_NODE_SCHEMA = {
    "id": pl.String, "status": pl.String, "layer": pl.Int64, "position": pl.Int64,
    "headline": pl.String, "kind": pl.String,
}
_EDGE_SCHEMA = {
    "from_id": pl.String, "to_id": pl.String, "live": pl.Boolean,
    "x": pl.Int64, "y": pl.Int64, "x2": pl.Int64, "y2": pl.Int64,
}


def _pinned_graph_inputs(store: Any) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    view = store.pinned()
    relations = view.table("relations").select("kind", "from_id", "to_id").collect()
    state = view.capsule_state().select("id", "content", "kind", "status").collect()
    tombstoned = state.filter(pl.col("status") == "tombstoned").get_column("id")
    return relations, state, tombstoned


def _layered(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """Layer = topological generation of the node's strongly connected component (so a
    cycle sits in one layer). Position = rank inside the layer by the mean position of the
    node's predecessors in earlier layers (children gather near their parents), ties and
    the first layer by byte-wise id."""
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    condensed = nx.condensation(g)
    layer_of: dict[str, int] = {}
    for depth, generation in enumerate(nx.topological_generations(condensed)):
        for component in generation:
            for node in condensed.nodes[component]["members"]:
                layer_of[node] = depth
    placed: dict[str, tuple[int, int]] = {}
    by_layer: dict[int, list[str]] = {}
    for node, depth in layer_of.items():
        by_layer.setdefault(depth, []).append(node)
    for depth in sorted(by_layer):
        def key(node: str, depth: int = depth) -> tuple[float, str]:
            ranks = [placed[p][1] for p in g.predecessors(node)
                     if p in placed and placed[p][0] < depth]
            return (sum(ranks) / len(ranks) if ranks else -1.0, node)

        for position, node in enumerate(sorted(by_layer[depth], key=key)):
            placed[node] = (depth, position)
    return placed


def _frames(status: dict[str, str], edges: list[tuple[str, str, bool]],
            state: pl.DataFrame, max_nodes: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    placed = _layered(list(status), [(a, b) for a, b, _ in edges])
    order = sorted(placed, key=lambda n: (placed[n][0], placed[n][1], n))[:max_nodes]
    keep = set(order)
    info = {
        row[0]: (row[1], row[2])
        for row in state.filter(pl.col("id").is_in(list(keep)))
        .select("id", "content", "kind").iter_rows()
    }
    nodes = pl.DataFrame(
        [(n, status[n], placed[n][0], placed[n][1], headline(info.get(n, (None,))[0] or "", 60),
          info.get(n, (None, None))[1]) for n in order],
        schema=_NODE_SCHEMA, orient="row",
    )
    edge_rows = [
        (a, b, live, placed[a][0], placed[a][1], placed[b][0], placed[b][1])
        for a, b, live in sorted(edges) if a in keep and b in keep
    ]
    return nodes, pl.DataFrame(edge_rows, schema=_EDGE_SCHEMA, orient="row")


def dag_frames(store: Any, *, max_nodes: int = 400) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes and edges of the blocks-DAG, with the digest's readiness (reference 4.10).

    Nodes are the live ``blocks`` participants (tombstoned and superseded ids are dead
    and left out); ``status`` is ``done`` (witnessed), ``cycle`` (entangled in or
    downstream of a live blocks-cycle), ``blocked`` (a live, not-done blocker) or
    ``ready``. ``layer``/``position`` place each node: a blocker sits left of what it
    blocks. Edges carry ``live`` (both ends neither dead nor done: the edge gates).

    Args:
        store: a store or a frozen view (pinned once).
        max_nodes: draw at most this many nodes (the first layers first).

    Returns:
        ``(nodes, edges)`` Polars frames.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b, c = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "abc"])
        >>> store.relate(a, b, "blocks"); store.relate(c, a, "witnesses")
        >>> nodes, edges = dag_frames(store)
        >>> nodes.select("id", "status", "layer").rows()
        [('cap-1', 'done', 0), ('cap-2', 'ready', 1)]
    """
    relations, state, tombstoned = _pinned_graph_inputs(store)
    dead = set(_graph.dead_ids(relations, tombstoned).to_list())
    blocks = set(relations.filter(pl.col("kind") == "blocks")
                 .select("from_id", "to_id").iter_rows())
    universe = {n for edge in blocks for n in edge} - dead
    done = set(relations.filter(pl.col("kind") == "witnesses").get_column("to_id")) & universe
    active = universe - done
    live = [(a, b) for a, b in blocks if a in active and b in active]
    g = nx.DiGraph()
    g.add_nodes_from(active)
    g.add_edges_from(live)
    leftover = _graph.kahn_leftover(g)
    status = {}
    for node in universe:
        if node in done:
            status[node] = "done"
        elif node in leftover:
            status[node] = "cycle"
        elif g.in_degree(node) > 0:
            status[node] = "blocked"
        else:
            status[node] = "ready"
    edges = [(a, b, a in active and b in active) for a, b in blocks
             if a in universe and b in universe]
    return _frames(status, edges, state, max_nodes)


def mission_frames(store: Any, *, max_nodes: int = 400) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes and edges of the mission tree over live ``grounded_in`` edges (reference 4.11).

    Edges run child -> parent (``from_id`` grounded in ``to_id``), both ends live.
    ``status`` is ``root`` (a mission root: a live epic no live parent anchors),
    ``cycle`` (entangled in a live grounded_in cycle), ``child`` (anchored by a live
    parent) or ``parent`` (an unanchored non-epic that anchors others). Parents sit
    left of their children (roots in layer 0).

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> epic, task = store.ingest([{"content": "ship v1", "source": "s", "anchor": "e",
        ...                             "kind": "epic"},
        ...                            {"content": "write docs", "source": "s", "anchor": "t",
        ...                             "kind": "task"}])
        >>> store.relate(task, epic, "grounded_in")
        >>> mission_frames(store)[0].select("id", "status", "layer").rows()
        [('cap-1', 'root', 0), ('cap-2', 'child', 1)]
    """
    relations, state, tombstoned = _pinned_graph_inputs(store)
    mg = _graph.mission_graph(relations, tombstoned)
    dead = set(mg.dead.to_list())
    anchored = set(mg.grounded_from.to_list())
    grounded = set(relations.filter(pl.col("kind") == "grounded_in")
                   .select("from_id", "to_id").iter_rows())
    live = sorted((a, b) for a, b in grounded if a not in dead and b not in dead)
    roots = set(
        state.filter((pl.col("status") == "live") & (pl.col("kind") == "epic").fill_null(False))
        .get_column("id").to_list()
    ) - anchored
    g = nx.DiGraph()
    g.add_edges_from(live)
    leftover = _graph.kahn_leftover(g)
    status: dict[str, str] = {}
    for node in set(g.nodes) | roots:
        if node in leftover:
            status[node] = "cycle"
        elif node in roots:
            status[node] = "root"
        elif node in anchored:
            status[node] = "child"
        else:
            status[node] = "parent"
    # Lay out parent-first: reverse each edge for the layering only.
    nodes, edges = _frames(status, [(b, a, True) for a, b in live], state, max_nodes)
    edges = edges.rename({"from_id": "to_id", "to_id": "from_id"}).select(list(_EDGE_SCHEMA))
    return nodes, edges.sort("from_id", "to_id")


# ---- pictures (altair, the plot extra) -----------------------------------------------------

def _altair() -> Any:
    try:
        import altair as alt
    except ImportError as exc:  # pragma: no cover - exercised through a patched import
        raise MemframeError(
            'pictures need the plot extra, which is not installed: pip install "memframe[plot]"'
        ) from exc
    return alt


def _values(frame: pl.DataFrame) -> list[dict[str, Any]]:
    out = frame.with_columns(
        [pl.col(n).dt.strftime("%Y-%m-%d") for n, d in frame.schema.items() if d == pl.Date]
        + [pl.col(n).dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ")
           for n, d in frame.schema.items() if isinstance(d, pl.Datetime)]
    )
    return out.to_dicts()


def miss_trend_chart(audit: MissAudit) -> Any:
    """Misses per UTC day, stacked by outcome (an altair chart).

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.record_miss(["retreival"], "abstain")
        >>> spec = miss_trend_chart(mf.audit.recall_misses(store)).to_dict()
        >>> spec["mark"]["type"], spec["encoding"]["y"]["field"]
        ('bar', 'misses')
    """
    alt = _altair()
    long = audit.daily.select("day", *MISS_OUTCOMES).unpivot(
        index="day", on=list(MISS_OUTCOMES), variable_name="outcome", value_name="misses"
    )
    domain = list(MISS_OUTCOMES)
    return (
        alt.Chart(alt.Data(values=_values(long)), title="Recall misses per day (UTC)")
        .mark_bar()
        .encode(
            x=alt.X("day:T", title="day", timeUnit="utcyearmonthdate"),
            y=alt.Y("misses:Q", title="misses", stack="zero"),
            color=alt.Color("outcome:N", scale=alt.Scale(
                domain=domain, range=[OUTCOME_COLORS[o] for o in domain])),
            tooltip=["day:T", "outcome:N", "misses:Q"],
        )
    )


def lane_override_chart(audit: MissAudit) -> Any:
    """Lane overrides per UTC day, one line per (forced -> auto_pick) pair."""
    alt = _altair()
    frame = audit.lane_daily.with_columns(
        (pl.col("forced") + "->" + pl.col("auto_pick")).alias("pair")
    )
    return (
        alt.Chart(alt.Data(values=_values(frame)), title="Lane overrides per day (UTC)")
        .mark_line(point=True)
        .encode(
            x=alt.X("day:T", title="day", timeUnit="utcyearmonthdate"),
            y=alt.Y("overrides:Q", title="overrides"),
            color=alt.Color("pair:N", title="forced->auto"),
            tooltip=["day:T", "pair:N", "overrides:Q"],
        )
    )


def top_terms_chart(audit: MissAudit, n: int = 15) -> Any:
    """The ``n`` most-missed terms as horizontal bars (recurring terms highlighted)."""
    alt = _altair()
    frame = audit.terms.head(n).with_columns(
        pl.col("term").map_elements(lambda t: label(t, 40), return_dtype=pl.String)
        .alias("label"),
        pl.when(pl.col("recurring")).then(pl.lit("recurring")).otherwise(pl.lit("one day"))
        .alias("seen"),
    ).select("label", "term", "misses", "abstain", "missing_evidence", "days", "seen", "alias")
    order = frame.get_column("label").to_list()
    return (
        alt.Chart(alt.Data(values=_values(frame)), title=f"Top {frame.height} missed terms")
        .mark_bar()
        .encode(
            x=alt.X("misses:Q", title="misses"),
            y=alt.Y("label:N", title=None, sort=order),
            color=alt.Color("seen:N", scale=alt.Scale(
                domain=["recurring", "one day"], range=["#e45756", "#4c78a8"])),
            tooltip=["label:N", "misses:Q", "abstain:Q", "missing_evidence:Q", "days:Q",
                     "alias:N"],
        )
    )


def recall_distribution_chart(store: Any, n: int | None = None) -> Any:
    """Recall counts of live capsules by rank: the most-recalled head and its long tail.

    Capsules never recalled are left out (as in the digest's ``most_recalled``); ranks
    follow the digest's order: recall_count desc, last recall desc, append order.
    """
    alt = _altair()
    view = store.pinned()
    ranked = (
        view.capsule_state()
        .filter((pl.col("status") == "live") & (pl.col("recall_count") > 0))
        .sort(["recall_count", "last_recalled_at", "seq"], descending=[True, True, False])
        .select("id", "content", "recall_count")
        .collect()
    )
    if n is not None:
        ranked = ranked.head(n)
    frame = ranked.with_row_index("rank", offset=1).with_columns(
        pl.col("rank").cast(pl.Int64),
        pl.col("content").map_elements(lambda t: label(t, 60), return_dtype=pl.String)
        .alias("headline"),
    ).drop("content")
    total = int(frame.get_column("recall_count").sum() or 0)
    head = int(frame.head(max(1, frame.height // 10)).get_column("recall_count").sum() or 0)
    share = f"top 10% of recalled capsules hold {100 * head / total:.0f}% of recalls" \
        if total else "no capsule was ever recalled"
    return (
        alt.Chart(alt.Data(values=_values(frame)),
                  title=alt.Title("Recall distribution (live capsules)", subtitle=share))
        .mark_bar()
        .encode(
            x=alt.X("rank:Q", title="rank (most recalled first)"),
            y=alt.Y("recall_count:Q", title="recall_count"),
            tooltip=["rank:Q", "id:N", "recall_count:Q", "headline:N"],
        )
    )


def _graph_chart(nodes: pl.DataFrame, edges: pl.DataFrame, colors: dict[str, str],
                 title: str) -> Any:
    alt = _altair()
    nodes = nodes.with_columns(
        pl.col("headline").map_elements(lambda t: label(t, 60), return_dtype=pl.String)
    )
    x = alt.X("layer:Q", axis=None)
    y = alt.Y("position:Q", axis=None, scale=alt.Scale(reverse=True))
    domain = list(colors)
    edge_layer = alt.Chart(alt.Data(values=_values(edges))).mark_rule(color="#999").encode(
        x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None, scale=alt.Scale(reverse=True)),
        x2="x2:Q", y2="y2:Q",
        strokeDash=alt.condition("datum.live", alt.value([1, 0]), alt.value([4, 3])),
    )
    node_layer = alt.Chart(alt.Data(values=_values(nodes))).mark_circle(size=220).encode(
        x=x, y=y,
        color=alt.Color("status:N", scale=alt.Scale(domain=domain,
                                                    range=[colors[s] for s in domain])),
        tooltip=["id:N", "status:N", "kind:N", "headline:N"],
    )
    text_layer = alt.Chart(alt.Data(values=_values(nodes))).mark_text(
        dy=-14, fontSize=10).encode(x=x, y=y, text="id:N")
    return alt.layer(edge_layer, node_layer, text_layer, title=title).properties(
        view=alt.ViewBackground(stroke=None),
        width=max(200, 140 * (int(nodes.get_column("layer").max() or 0) + 1)),
        height=max(120, 40 * (int(nodes.get_column("position").max() or 0) + 1)),
    )


def _count_title(prefix: str, nodes: pl.DataFrame, order: Sequence[str]) -> str:
    counts = dict(nodes.group_by("status").len().iter_rows())
    return prefix + ": " + ", ".join(f"{counts.get(s, 0)} {s}" for s in order)


def dag_chart(store: Any, *, max_nodes: int = 400) -> Any:
    """The blocks-DAG as a node-link picture, coloured ready / blocked / done / cycle.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "ab"])
        >>> store.relate(a, b, "blocks")
        >>> dag_chart(store).to_dict()["title"]
        'blocks-DAG: 1 ready, 1 blocked, 0 done, 0 cycle'
    """
    nodes, edges = dag_frames(store, max_nodes=max_nodes)
    return _graph_chart(nodes, edges, DAG_COLORS,
                        _count_title("blocks-DAG", nodes, list(DAG_COLORS)))


def mission_chart(store: Any, *, max_nodes: int = 400) -> Any:
    """The mission tree (grounded_in), coloured root / child / parent / cycle."""
    nodes, edges = mission_frames(store, max_nodes=max_nodes)
    return _graph_chart(nodes, edges, MISSION_COLORS,
                        _count_title("mission tree", nodes, list(MISSION_COLORS)))
