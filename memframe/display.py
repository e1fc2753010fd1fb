"""Pictures for notebooks and the graph frames they draw, on the base install.

HTML, text and SVG rendering live in the one rendering module, :mod:`memframe._render`
(re-exported here: :func:`esc`, :func:`visible`, :func:`label`, :func:`html_table`,
:class:`Chart`). This module adds:

* **Graph frames**: :func:`dag_frames` and :func:`mission_frames` apply the digest's graph
  rules (reference 4.10, 4.11) through :mod:`memframe.graph` and place each node in a
  layered layout.
* **Pictures**: :func:`miss_trend_chart`, :func:`lane_override_chart`,
  :func:`top_terms_chart`, :func:`recall_distribution_chart`, :func:`dag_chart`,
  :func:`mission_chart`. Each returns a :class:`Chart`: a standalone SVG document drawn by
  memframe itself (no script, nothing fetched) with alt text that gives its figures. It
  shows itself in a notebook; ``chart.svg`` is the file to keep. The audit page and
  ``MissAudit`` in a notebook draw the same charts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import networkx as nx
import polars as pl

from memframe import graph as _graph
from memframe._render import charts as _charts
from memframe._render import svg as _svg
from memframe._render.charts import OUTCOME_COLORS
from memframe._render.html import esc, html_table, label, visible
from memframe._render.svg import Chart
from memframe._scalars import as_int
from memframe.text import headline

if TYPE_CHECKING:  # pragma: no cover
    from memframe.audit.misses import MissAudit

__all__ = [
    "esc",
    "visible",
    "label",
    "html_table",
    "Chart",
    "audit_text",
    "audit_html",
    "dag_frames",
    "mission_frames",
    "miss_trend_chart",
    "lane_override_chart",
    "top_terms_chart",
    "recall_distribution_chart",
    "recall_ranking",
    "dag_chart",
    "mission_chart",
    "OUTCOME_COLORS",
    "DAG_COLORS",
    "MISSION_COLORS",
]

DAG_COLORS: dict[str, str] = {
    "ready": "#54a24b", "blocked": "#f58518", "done": "#9d9d9d", "cycle": "#e45756",
}
MISSION_COLORS: dict[str, str] = {
    "root": "#4c78a8", "child": "#54a24b", "parent": "#b279a2", "cycle": "#e45756",
}


def audit_text(audit: MissAudit, *, limit: int = 20) -> str:
    """The audit as a plain-text report (same as ``audit.to_text(limit)``)."""
    return audit.to_text(limit=limit)


def audit_html(audit: MissAudit, *, limit: int = 50, page: bool = True) -> str:
    """The audit as a self-contained page (``page=True``) or a notebook fragment."""
    return audit.to_html(limit=limit) if page else audit._repr_html_()


# ---- graph frames (the digest's graph rules, with positions) -------------------------------

_NODE_SCHEMA = {
    "id": pl.String, "status": pl.String, "layer": pl.Int64, "position": pl.Float64,
    "headline": pl.String, "kind": pl.String,
}
_EDGE_SCHEMA = {
    "from_id": pl.String, "to_id": pl.String, "live": pl.Boolean,
    "x": pl.Int64, "y": pl.Float64, "x2": pl.Int64, "y2": pl.Float64,
}


def _pinned_graph_inputs(store: Any) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    view = store.pinned()
    relations = view.table("relations").select("kind", "from_id", "to_id").collect()
    state = view.capsule_state().select("id", "content", "kind", "status").collect()
    tombstoned = state.filter(pl.col("status") == "tombstoned").get_column("id")
    return relations, state, tombstoned


def _layered(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, tuple[int, float]]:
    """A layered tree layout. Layer = topological generation of the node's strongly
    connected component (so a cycle sits in one layer). Position: walking depth-first from
    the first layer (byte-wise id order), each leaf takes the next slot and each node sits
    at the mean slot of the children it reached first, so a subtree stays together and a
    parent sits beside its children."""
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    condensed = nx.condensation(g)
    layer_of: dict[str, int] = {}
    for depth, generation in enumerate(nx.topological_generations(condensed)):
        for component in generation:
            for node in condensed.nodes[component]["members"]:
                layer_of[node] = depth
    slot: dict[str, float] = {}
    next_slot = 0

    def place(root: str) -> None:
        nonlocal next_slot
        # iterative depth-first walk: (node, children still to visit, placed children)
        stack: list[tuple[str, list[str], list[str]]] = []
        slot[root] = -1.0
        stack.append((root, sorted(c for c in g.successors(root)
                                   if layer_of[c] > layer_of[root]), []))
        while stack:
            node, todo, done = stack[-1]
            while todo and todo[0] in slot:
                todo.pop(0)
            if todo:
                child = todo.pop(0)
                done.append(child)
                slot[child] = -1.0
                stack.append((child, sorted(c for c in g.successors(child)
                                            if layer_of[c] > layer_of[child]), []))
                continue
            stack.pop()
            if done:
                slot[node] = sum(slot[c] for c in done) / len(done)
            else:
                slot[node] = float(next_slot)
                next_slot += 1

    for node in sorted(layer_of, key=lambda n: (layer_of[n], n)):
        if node not in slot:
            place(node)
    return {node: (layer_of[node], slot[node]) for node in layer_of}


COLLAPSED_COLOR = "#bab0ac"


def _collapse(status: dict[str, str], edges: list[tuple[str, str, bool]], max_children: int
              ) -> tuple[dict[str, str], list[tuple[str, str, bool]], dict[str, str]]:
    """Keep the first ``max_children`` children of each node (byte-wise id order) and fold
    the rest into one ``collapsed`` node named ``<parent> +<n>``; what only the folded
    children reached is folded with them."""
    kids: dict[str, list[str]] = {}
    for a, b, _ in edges:
        kids.setdefault(a, []).append(b)
    dropped: set[tuple[str, str]] = set()
    extra: dict[str, str] = {}
    new_edges: list[tuple[str, str, bool]] = []
    for parent, children in kids.items():
        children = sorted(set(children))
        if len(children) > max_children:
            folded = children[max_children:]
            dropped |= {(parent, c) for c in folded}
            more = f"{parent} +{len(folded)}"
            extra[more] = f"{len(folded)} more children of {parent}: " + ", ".join(folded[:8]) \
                + ("…" if len(folded) > 8 else "")
            new_edges.append((parent, more, True))
    kept = [e for e in edges if (e[0], e[1]) not in dropped] + new_edges
    targets = {b for _, b, _ in edges}
    sources = [n for n in status if n not in targets]
    g = nx.DiGraph()
    g.add_nodes_from(list(status) + list(extra))
    g.add_edges_from((a, b) for a, b, _ in kept)
    # a cycle with no source outside it stays whole, and so does what hangs below it
    starts = set(sources) | {n for n in status if status[n] == "cycle"}
    reach = set(starts)
    for start in starts:
        reach |= nx.descendants(g, start)
    new_status = {n: st for n, st in status.items() if n in reach}
    new_status.update({n: "collapsed" for n in extra if n in reach})
    return new_status, [e for e in kept if e[0] in new_status and e[1] in new_status], extra


def _frames(status: dict[str, str], edges: list[tuple[str, str, bool]],
            state: pl.DataFrame, max_nodes: int, max_children: int | None = None
            ) -> tuple[pl.DataFrame, pl.DataFrame]:
    notes: dict[str, str] = {}
    if max_children is not None:
        status, edges, notes = _collapse(status, edges, max_children)
    placed = _layered(list(status), [(a, b) for a, b, _ in edges])
    order = sorted(placed, key=lambda n: (placed[n][0], placed[n][1], n))[:max_nodes]
    keep = set(order)
    info = {
        row[0]: (row[1], row[2])
        for row in state.filter(pl.col("id").is_in(list(keep)))
        .select("id", "content", "kind").iter_rows()
    }
    nodes = pl.DataFrame(
        [(n, status[n], placed[n][0], placed[n][1],
          notes.get(n) or headline(info.get(n, (None,))[0] or "", 60),
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


def mission_frames(store: Any, *, max_nodes: int = 400, max_children: int | None = None
                   ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes and edges of the mission tree over live ``grounded_in`` edges (reference 4.11).

    Edges run child -> parent (``from_id`` grounded in ``to_id``), both ends live.
    ``status`` is ``root`` (a mission root: a live epic no live parent anchors),
    ``cycle`` (entangled in a live grounded_in cycle), ``child`` (anchored by a live
    parent) or ``parent`` (an unanchored non-epic that anchors others). Parents sit
    left of their children (roots in layer 0).

    Args:
        store: a store or a frozen view (pinned once).
        max_nodes: draw at most this many nodes (the first layers first).
        max_children: show at most this many children per node; the rest fold into one
            ``collapsed`` node ``<parent> +<n>`` (None: every child).

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
    assert mg.dead is not None  # computed here (only a graph read back lacks it)
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
    nodes, edges = _frames(status, [(b, a, True) for a, b in live], state, max_nodes,
                           max_children)
    edges = edges.rename({"from_id": "to_id", "to_id": "from_id"}).select(list(_EDGE_SCHEMA))
    return nodes, edges.sort("from_id", "to_id")


# ---- pictures (memframe's own SVG, the base install) ----------------------------------------

def miss_trend_chart(audit: MissAudit) -> Chart:
    """Misses per UTC day, stacked by outcome: a bar per day, or per week (month) when the
    window is too long for daily bars to be more than hairlines. The audit page draws the
    same chart.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.record_miss(["retreival"], "abstain")
        >>> chart = miss_trend_chart(mf.audit.recall_misses(store))
        >>> chart.svg.startswith("<svg") and "1 in all" in chart.alt
        True
    """
    return _charts.miss_trend(audit.daily)


def lane_override_chart(audit: MissAudit) -> Chart:
    """Lane overrides per UTC day (week, month), stacked by ``forced->auto_pick`` pair.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.record_lane_override("vector", "fused")
        >>> lane_override_chart(mf.audit.recall_misses(store)).alt[:56]
        'Lane overrides per day (UTC, forced->auto): 1 bar from 2'
    """
    return _charts.lane_overrides(audit.lane_daily)


def top_terms_chart(audit: MissAudit, n: int = 15) -> Chart:
    """The ``n`` most-missed terms as horizontal bars stacked by outcome (the outcome
    colours of every other chart and of the audit page); a recurring term's label ends in
    ``↻`` (missed on two days or more).

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.record_miss(["retreival", "kafka"], "abstain")
        >>> top_terms_chart(mf.audit.recall_misses(store)).title
        'Top 2 missed terms'
    """
    return _charts.top_terms(audit.terms, n)


def recall_distribution_chart(store: Any, n: int | None = None) -> Chart:
    """Recall counts of live capsules by rank, on a log scale: the most-recalled head and
    its long tail.

    Capsules never recalled are left out (as in the digest's ``most_recalled``); ranks
    follow the digest's order: recall_count desc, last recall desc, append order.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "ab"])
        >>> _ = store.record_recall([a, a, b])
        >>> recall_distribution_chart(store).alt[:82]
        'Recall distribution (live capsules): 2 ranks, from 2 recalls (rank 1) down to 1; 3'
    """
    ranked = recall_ranking(store)
    return _charts.recall_ranks(ranked if n is None else ranked.head(n))


def recall_ranking(store: Any) -> pl.DataFrame:
    """Live capsules recalled at least once, most recalled first (the digest's
    ``most_recalled`` order: recall_count desc, last recall desc, append order), with
    ``rank`` (from 1), ``id``, ``recall_count`` and a one-line ``headline``.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "ab"])
        >>> _ = store.record_recall([b, b, a])
        >>> recall_ranking(store).select("rank", "id", "recall_count").rows()
        [(1, 'cap-2', 2), (2, 'cap-1', 1)]
    """
    view = store.pinned()
    ranked = (
        view.capsule_state()
        .filter((pl.col("status") == "live") & (pl.col("recall_count") > 0))
        .sort(["recall_count", "last_recalled_at", "seq"], descending=[True, True, False])
        .select("id", "content", "recall_count")
        .collect()
    )
    return ranked.with_row_index("rank", offset=1).with_columns(
        pl.col("rank").cast(pl.Int64),
        pl.col("content").map_elements(lambda t: label(t, 60), return_dtype=pl.String)
        .alias("headline"),
    ).drop("content")


def _count_title(prefix: str, nodes: pl.DataFrame, order: Sequence[str]) -> str:
    counts = dict(nodes.group_by("status").len().iter_rows())
    text = prefix + ": " + ", ".join(f"{counts.get(s, 0)} {s}" for s in order)
    if counts.get("collapsed"):
        text += f" (children past the first few folded into {counts['collapsed']} node(s))"
    return text


def _graph_chart(nodes: pl.DataFrame, edges: pl.DataFrame, colors: dict[str, str],
                 prefix: str, edge_words: str) -> Chart:
    colors = dict(colors)
    if "collapsed" in set(nodes.get_column("status").to_list()):
        colors["collapsed"] = COLLAPSED_COLOR
    title = _count_title(prefix, nodes, list(colors))
    live = int(edges.get_column("live").sum() or 0)
    alt = (f"{title}; {edges.height:,} edges ({live:,} {edge_words}), "
           f"{as_int(nodes.get_column('layer').max() or 0) + 1 if nodes.height else 0} layers")
    return _svg.graph_chart(nodes, edges, colors, title=title, alt=alt)


def dag_chart(store: Any, *, max_nodes: int = 400) -> Chart:
    """The blocks-DAG as a node-link picture, coloured ready / blocked / done / cycle: each
    blocker left of what it blocks, dashed edges no longer gate (their blocker is done).

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "ab"])
        >>> store.relate(a, b, "blocks")
        >>> dag_chart(store).title
        'blocks-DAG: 1 ready, 1 blocked, 0 done, 0 cycle'
    """
    nodes, edges = dag_frames(store, max_nodes=max_nodes)
    return _graph_chart(nodes, edges, DAG_COLORS, "blocks-DAG", "gating")


def mission_chart(store: Any, *, max_nodes: int = 400, max_children: int | None = 4) -> Chart:
    """The mission tree (grounded_in) as a layered tree, coloured root / child / parent /
    cycle; past ``max_children`` children per node the rest fold into one grey
    ``collapsed`` node (its tooltip names them), so a big tree stays readable.

    Examples:
        >>> import os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> ids = store.ingest([{"content": f"t{i}", "source": "s", "anchor": f"t{i}",
        ...                      "kind": "epic" if i == 0 else "task"} for i in range(4)])
        >>> for child in ids[1:]:
        ...     store.relate(child, ids[0], "grounded_in")
        >>> mission_chart(store, max_children=2).title[:39]
        'mission tree: 1 root, 2 child, 0 parent'
    """
    nodes, edges = mission_frames(store, max_nodes=max_nodes, max_children=max_children)
    return _graph_chart(nodes, edges, MISSION_COLORS, "mission tree", "live")
