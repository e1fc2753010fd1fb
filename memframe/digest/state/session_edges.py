"""A session's new ``blocks`` edges, taken into the graph's kept values.

New ``blocks`` edges between ids no earlier row named (`fresh_edges`) leave the graph's
kept values usable: the blocks-DAG gains them as ready or blocked nodes, and every other
value stays as kept (`FreshEdges`).
"""

from __future__ import annotations

import graphlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.digest.checks import check_rows
from memframe.digest.families import FAMILIES
from memframe.digest.state import family_codec, kept_families

if TYPE_CHECKING:
    from memframe.store import StoreView


@dataclass(frozen=True)
class FreshEdges:
    """The relation rows written since the graph's values were kept, when they are
    ``blocks`` edges that only join ids the graph's tables never named (what a session
    does when it orders the work it just captured): each such id is alive, unwitnessed
    and in no epic, and the new edges are acyclic, so the blocks-DAG gains them as ready
    or blocked nodes and every other value of the graph stays as kept, the relation count
    aside. ``rows_visited``: the Parquet rows read to find out."""

    relations: int
    ready: pl.Series
    blocked: pl.Series
    rows_visited: int

    def dag(self, dag: dict, cap: int | None = None) -> dict:
        """A kept ``dag`` projection (uncapped, or capped at ``cap`` with its totals) with
        the new nodes; a cycle report stays as it is (the new nodes lie on no cycle)."""
        if dag.get("status") != "ok":
            return dag
        out = dict(dag)
        for name, new in (("ready", self.ready), ("blocked", self.blocked)):
            merged = pl.concat([pl.Series(dag[name], dtype=pl.String), new]).sort()
            out[name] = (merged if cap is None else merged.head(cap)).to_list()
            if cap is not None:
                out[f"{name}_total"] = dag[f"{name}_total"] + new.len()
        return out

    def values(self, values: dict[str, Any]) -> dict[str, Any]:
        """The graph family's kept (decoded) values with the new edges."""
        return {**values, "relations": values["relations"] + self.relations,
                "dag_projection": self.dag(values["dag_projection"])}


def _acyclic(edges: list[tuple[str, str]]) -> bool:
    """Whether a few edges form no cycle (the standard library's sorter, not
    `memframe.graph.cycle_status`: a warm digest process never loads networkx)."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for a, b in edges:
        sorter.add(b, a)
    try:
        sorter.prepare()
    except graphlib.CycleError:
        return False
    return True


def fresh_edges(view: StoreView) -> FreshEdges | None:
    """The graph's new rows as `FreshEdges`, when they are that (None otherwise: the
    digest then reads the graph's tables). Reads the rows above the kept values'
    watermark and looks their ids up in the kept ids (`KNOWN_TABLE`); a new forget
    must leave the graph as the tolerant check says (`kept_families.is_current`) and name no new node."""
    marks = family_codec.kept("graph").marks(view.watermarks)
    if marks is None or not view.partitions(family_codec.KNOWN_TABLE):
        return None
    mark, counts = marks["seq"], marks["rows"]
    new: dict[str, pl.DataFrame] = {}
    visited = 0
    for name in FAMILIES["graph"]:
        new[name], n = kept_families.rows_above(view, name, mark)
        visited += n
        if counts.get(name) is None or int(counts[name]) + new[name].height != \
                view.row_count(name):
            return None
    relations = new["relations"]
    if relations.height == 0 or check_rows("relations", relations):
        return None
    # a session's few rows: plain Python (each Polars call here would cost more than it)
    rows = relations.select("kind", "from_id", "to_id").rows()
    edges = sorted({(a, b) for _kind, a, b in rows})
    if any(kind != "blocks" or a is None or b is None or a == b for kind, a, b in rows):
        return None
    ids = sorted({x for edge in edges for x in edge})
    forgotten = [i for i in set(new["forgets"].get_column("capsule_id").to_list()) if i]
    if set(ids) & set(forgotten) or not _acyclic(edges):
        return None
    hit, n = view.read_matching(family_codec.KNOWN_TABLE, family_codec.ENDPOINTS_SCHEMA,
                                "id", ids)
    visited += n
    if hit.height:
        return None
    if forgotten:
        hit, n = view.read_matching(family_codec.ENDPOINTS_TABLE,
                                    family_codec.ENDPOINTS_SCHEMA, "id", forgotten)
        visited += n
        if hit.height:
            return None
    targets = sorted({b for _a, b in edges})
    ready = [i for i in ids if i not in set(targets)]
    return FreshEdges(relations.height, pl.Series("id", ready, dtype=pl.String),
                      pl.Series("id", targets, dtype=pl.String), visited)
