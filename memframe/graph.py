"""Relation graphs of the digest: the blocks-DAG (reference 4.10) and the mission
graph over ``grounded_in`` edges (reference 4.11).

Inputs are Polars frames of relation rows (``kind``, ``from_id``, ``to_id``) and the
set of tombstoned ids; outputs are plain dicts and lists ready for the wire. Set
arithmetic is done in Polars, graph work (strongly connected components, reachability)
with networkx. The algorithm of the reference is the contract:

* Kahn's sweep leaves exactly the nodes that sit on a cycle or downstream of one; that
  *leftover* set is computed here as the non-trivial strongly connected components (or
  self-loops) plus everything reachable from them, which is the same set.
* ``find_cycle`` starts at the byte-wise smallest leftover id, repeatedly steps to the
  smallest predecessor (blocker) that is also leftover until a node repeats, emits that
  loop in forward edge direction and rotates it so its smallest id comes first.

All id orderings are byte-wise (``cap-10`` sorts before ``cap-2``), which for Python
strings equals code-point order and for Polars string sorting equals byte order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # imported where used: loading it costs a warm digest more than its work
    import networkx as nx

__all__ = [
    "find_cycle",
    "kahn_leftover",
    "cycle_status",
    "dead_ids",
    "blocks_dag",
    "blocks_projection",
    "cap_projection",
    "MissionGraph",
    "mission_graph",
]

_EDGE_SCHEMA = {"kind": pl.String, "from_id": pl.String, "to_id": pl.String}


def _edges(relations: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    frame = relations.select("kind", "from_id", "to_id")
    if isinstance(frame, pl.LazyFrame):
        frame = frame.collect()
    return frame.cast(_EDGE_SCHEMA)  # type: ignore[arg-type]


def _id_series(ids: Iterable[str] | pl.Series | None) -> pl.Series:
    if ids is None:
        return pl.Series("id", [], dtype=pl.String)
    if isinstance(ids, pl.Series):
        return ids.cast(pl.String).rename("id")
    return pl.Series("id", list(ids), dtype=pl.String)


def kahn_leftover(graph: nx.DiGraph) -> set[str]:
    """The nodes Kahn's sweep cannot remove: those on a cycle or downstream of one.

    Examples:
        >>> import networkx as nx
        >>> g = nx.DiGraph([("a", "b"), ("b", "a"), ("b", "c"), ("x", "a")])
        >>> sorted(kahn_leftover(g))
        ['a', 'b', 'c']
    """
    seeds: set[str] = set()
    import networkx as nx  # on use: a digest answered from kept values never needs it
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            seeds |= component
    seeds.update(node for node, _ in nx.selfloop_edges(graph))
    if not seeds:
        return set()
    leftover = set(seeds)
    stack = list(seeds)
    while stack:
        for successor in graph.successors(stack.pop()):
            if successor not in leftover:
                leftover.add(successor)
                stack.append(successor)
    return leftover


def find_cycle(leftover: set[str], graph: nx.DiGraph) -> list[str]:
    """One concrete cycle among ``leftover``, in forward edge direction, smallest id first.

    Walks backwards from the smallest leftover id, always to the smallest predecessor
    that is itself leftover, until a node repeats (reference 4.10 ``find_cycle``).

    Examples:
        >>> import networkx as nx
        >>> g = nx.DiGraph([("cap-2", "cap-3"), ("cap-3", "cap-4"), ("cap-4", "cap-2")])
        >>> find_cycle({"cap-2", "cap-3", "cap-4"}, g)
        ['cap-2', 'cap-3', 'cap-4']
    """
    current = min(leftover)
    position: dict[str, int] = {}
    walk: list[str] = []
    while current not in position:
        position[current] = len(walk)
        walk.append(current)
        current = min(p for p in graph.predecessors(current) if p in leftover)
    loop = walk[position[current] :]
    loop.reverse()  # the walk followed edges backwards; each element now precedes the next
    start = loop.index(min(loop))
    return loop[start:] + loop[:start]


def cycle_status(graph: nx.DiGraph) -> dict | None:
    """``{"status": "cycle", "cycle": [...], "entangled_total": n}`` or None if acyclic.

    Examples:
        >>> import networkx as nx
        >>> cycle_status(nx.DiGraph([("cap-1", "cap-2"), ("cap-2", "cap-1")]))
        {'status': 'cycle', 'cycle': ['cap-1', 'cap-2'], 'entangled_total': 2}
        >>> cycle_status(nx.DiGraph([("cap-1", "cap-2")])) is None
        True
    """
    leftover = kahn_leftover(graph)
    if not leftover:
        return None
    return {
        "status": "cycle",
        "cycle": find_cycle(leftover, graph),
        "entangled_total": len(leftover),
    }


def dead_ids(relations: pl.DataFrame | pl.LazyFrame, tombstoned: Iterable[str] | pl.Series) -> pl.Series:
    """Tombstoned ids plus every ``supersedes`` target (the graphs' notion of dead).

    Examples:
        >>> import polars as pl
        >>> rel = pl.DataFrame({"kind": ["supersedes"], "from_id": ["cap-2"], "to_id": ["cap-1"]})
        >>> sorted(dead_ids(rel, ["cap-9"]).to_list())
        ['cap-1', 'cap-9']
    """
    edges = _edges(relations)
    superseded = edges.filter(pl.col("kind") == "supersedes").get_column("to_id")
    return pl.concat([_id_series(tombstoned), superseded.rename("id")]).unique().sort()


def blocks_projection(
    relations: pl.DataFrame | pl.LazyFrame,
    tombstoned: Iterable[str] | pl.Series,
) -> dict:
    """The blocks-DAG projection with uncapped id lists (one per digest call).

    Returns ``{"status": "ok", "ready", "blocked", "done"}`` with every id of each set,
    byte-wise sorted, or the ``{"status": "cycle", "cycle", "entangled_total"}`` report.
    :func:`blocks_dag` caps it for the ``dag`` section; the ``open_efforts`` rows
    intersect the same full lists with each effort's members.

    Examples:
        >>> import polars as pl
        >>> rel = pl.DataFrame({"kind": ["blocks"] * 3, "from_id": ["cap-1", "cap-1", "cap-3"],
        ...                     "to_id": ["cap-2", "cap-10", "cap-2"]})
        >>> blocks_projection(rel, [])
        {'status': 'ok', 'ready': ['cap-1', 'cap-3'], 'blocked': ['cap-10', 'cap-2'], 'done': []}
    """
    edges = _edges(relations)
    dead = dead_ids(edges, tombstoned)
    blocks = edges.filter(pl.col("kind") == "blocks").select("from_id", "to_id").unique()
    universe = pl.concat([blocks.get_column("from_id"), blocks.get_column("to_id")]).unique()
    universe = universe.filter(~universe.is_in(dead.implode()))  # the live participants
    done = (
        edges.filter(pl.col("kind") == "witnesses")
        .get_column("to_id")
        .unique()
    )
    done = done.filter(done.is_in(universe.implode()))
    active = universe.filter(~universe.is_in(done.implode()))
    live_blocks = blocks.filter(
        pl.col("from_id").is_in(active.implode()) & pl.col("to_id").is_in(active.implode())
    )
    import networkx as nx  # on use: a digest answered from kept values never needs it
    graph = nx.DiGraph()
    graph.add_nodes_from(active.to_list())
    graph.add_edges_from(live_blocks.iter_rows())
    cycle = cycle_status(graph)
    if cycle is not None:
        return cycle
    blocked_ids = live_blocks.get_column("to_id").unique()
    ready_ids = active.filter(~active.is_in(blocked_ids.implode()))
    return {
        "status": "ok",
        "ready": ready_ids.unique().sort().to_list(),
        "blocked": blocked_ids.unique().sort().to_list(),
        "done": done.unique().sort().to_list(),
    }


def cap_projection(projection: dict, n: int) -> dict:
    """The ``dag`` section of a :func:`blocks_projection`: lists capped at ``n``, exact totals.

    Examples:
        >>> cap_projection({"status": "ok", "ready": ["cap-1", "cap-2"], "blocked": [],
        ...                 "done": []}, 1)
        {'status': 'ok', 'ready': ['cap-1'], 'ready_total': 2, 'blocked': [], 'blocked_total': 0, 'done': [], 'done_total': 0}
    """
    if projection["status"] != "ok":
        return dict(projection)
    out: dict = {"status": "ok"}
    for key in ("ready", "blocked", "done"):
        out[key] = list(projection[key][:n])
        out[f"{key}_total"] = len(projection[key])
    return out


def blocks_dag(
    relations: pl.DataFrame | pl.LazyFrame,
    tombstoned: Iterable[str] | pl.Series,
    n: int,
) -> dict:
    """The ``dag`` section: readiness of ``blocks`` participants, or one cycle.

    Args:
        relations: relation rows with ``kind``, ``from_id``, ``to_id`` (all kinds; only
            ``blocks``, ``witnesses`` and ``supersedes`` matter here).
        tombstoned: ids of tombstoned capsules.
        n: the list cap; totals stay exact.

    Returns:
        ``{"status": "ok", "ready", "ready_total", "blocked", "blocked_total", "done",
        "done_total"}`` with byte-wise sorted id lists capped at ``n``, or
        ``{"status": "cycle", "cycle", "entangled_total"}`` when a live blocks-cycle
        remains among the non-done participants.

    Examples:
        >>> import polars as pl
        >>> rel = pl.DataFrame({"kind": ["blocks", "witnesses"],
        ...                     "from_id": ["cap-1", "cap-3"], "to_id": ["cap-2", "cap-1"]})
        >>> blocks_dag(rel, [], 10)
        {'status': 'ok', 'ready': ['cap-2'], 'ready_total': 1, 'blocked': [], 'blocked_total': 0, 'done': ['cap-1'], 'done_total': 1}
    """
    return cap_projection(blocks_projection(relations, tombstoned), n)


@dataclass(frozen=True)
class MissionGraph:
    """The store-global pieces of the mission section (reference 4.11).

    Attributes:
        dead: tombstoned ids plus superseded ids (None when read back from the digest's
            kept values, `memframe.digest.state.kept_families`: no section reads it).
        grounded_from: children anchored by at least one ``grounded_in`` edge whose
            parent (``to_id``) is live (the live-parent anchoring rule).
        children: ``id`` (a parent) -> ``children``: the number of ``grounded_in`` edges
            naming it as parent whose child is live; store-wide, never fenced.
        cycle: the cycle report over the live ``grounded_in`` subgraph, or None.
    """

    dead: pl.Series | None
    grounded_from: pl.Series
    children: pl.DataFrame
    cycle: dict | None


def mission_graph(
    relations: pl.DataFrame | pl.LazyFrame,
    tombstoned: Iterable[str] | pl.Series,
) -> MissionGraph:
    """Anchoring, child counts and the store-global cycle check over ``grounded_in``.

    The cycle check runs over the ``grounded_in`` edges minus every edge with a dead
    endpoint, forward direction child -> parent.

    Examples:
        >>> import polars as pl
        >>> rel = pl.DataFrame({"kind": ["grounded_in", "grounded_in"],
        ...                     "from_id": ["cap-2", "cap-3"], "to_id": ["cap-1", "cap-1"]})
        >>> g = mission_graph(rel, [])
        >>> g.children.rows(), g.cycle
        ([('cap-1', 2)], None)
    """
    edges = _edges(relations)
    dead = dead_ids(edges, tombstoned)
    dead_list = dead.implode()
    grounded = edges.filter(pl.col("kind") == "grounded_in").select("from_id", "to_id").unique()
    grounded_from = (
        grounded.filter(~pl.col("to_id").is_in(dead_list)).get_column("from_id").unique().sort()
    )
    children = (
        grounded.filter(~pl.col("from_id").is_in(dead_list))
        .group_by("to_id")
        .agg(pl.col("from_id").n_unique().cast(pl.Int64).alias("children"))
        .rename({"to_id": "id"})
        .sort("id")
    )
    live = grounded.filter(~pl.col("from_id").is_in(dead_list) & ~pl.col("to_id").is_in(dead_list))
    import networkx as nx  # on use: a digest answered from kept values never needs it
    graph = nx.DiGraph()
    graph.add_edges_from(live.iter_rows())
    return MissionGraph(
        dead=dead,
        grounded_from=grounded_from.rename("id"),
        children=children,
        cycle=cycle_status(graph),
    )
