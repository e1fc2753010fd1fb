"""Keeping the digest's store-wide values, and knowing when they are current.

The job keeps each family's values (`family_codec`) with marks: the highest ``seq`` of its
tables and their row counts (`stage_cycle`). A digest reuses them while no part of those
tables lies above the marks (`is_current`); new ``forgets`` that tombstone no
end of a blocks, witnesses or grounded_in edge leave the graph's values usable, and so do a
session's new ``blocks`` edges between ids no earlier row named (`fresh_edges`: the
blocks-DAG gains them as ready or blocked nodes, every other value stays as kept). Rows the
digest fails closed on are never kept, and a family that cannot be kept is dropped with a
note.
"""

from __future__ import annotations

import graphlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import job_report, read_whole
from memframe.digest.checks import check_rows, check_tables
from memframe.digest.families import FAMILIES, family_values
from memframe.digest.state import digest_capsules, family_codec
from memframe.errors import MemframeError

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit


#: the columns each family reads from its tables
_COLUMNS: dict[str, tuple[str, ...]] = {
    "relations": ("seq", "kind", "from_id", "to_id"),
    "forgets": ("seq", "capsule_id"),
    "source_cursors": ("seq", "at", "source_key", "cursor"),
    "corroborations": ("seq", "capsule_id", "source", "kind", "ref", "verdict"),
    "recall_misses": ("seq", "at", "term", "outcome"),
    "lane_overrides": ("seq", "at", "forced", "auto_pick"),
    "brackets": ("seq", "at", "session_id", "event"),
}


#: tables whose new rows leave a family current unless they name one of its ids: a forget
#: changes the graph only when it tombstones an endpoint of a blocks, witnesses or
#: grounded_in edge (the ids kept in `ENDPOINTS_TABLE`)
_TOLERANT: dict[str, str] = {"graph": "forgets"}


def _top(view: StoreView, family: str) -> int:
    return max((p.seq_hi or 0 for name in FAMILIES[family] for p in view.partitions(name)),
               default=0)


def _current(view: StoreView, family: str) -> tuple[bool, int, bool]:
    """Are the kept values current at ``view``? Also the Parquet rows read to find out,
    and whether the tolerant table has new rows (none of which touch the family).

    Current: a watermark of this layout; no part of a strict table above it and its row
    count the one recorded; the tolerant table's rows above it (read) counted onto the
    recorded count give the log's, and none names a kept endpoint.
    """
    marks = family_codec.kept(family).marks(view.watermarks)
    if marks is None:
        return False, 0, False
    mark, counts = marks["seq"], marks["rows"]
    tolerant = _TOLERANT.get(family)
    for name in FAMILIES[family]:
        recorded = counts.get(name)
        if recorded is None:
            return False, 0, False
        if name != tolerant:
            if any((p.seq_hi or 0) > mark for p in view.partitions(name)) or \
                    int(recorded) != view.row_count(name):
                return False, 0, False
    if tolerant is None:
        return True, 0, False
    new, visited = rows_above(view, tolerant, mark)
    if not visited:
        return int(counts[tolerant]) == view.row_count(tolerant), 0, False
    if int(counts[tolerant]) + new.height != view.row_count(tolerant):
        return False, visited, True
    ids = [i for i in new.get_column("capsule_id").unique().to_list() if i is not None]
    hit, n = _names_any(view, family_codec.ENDPOINTS_TABLE, ids)
    return not hit, visited + n, True


def _names_any(view: StoreView, table: str, ids: list[str]) -> tuple[bool, int]:
    """Does a kept lookup of the graph's ids (`ENDPOINTS_TABLE`, `KNOWN_TABLE`) hold one
    of ``ids``? Also the Parquet rows read (the row groups that can hold them)."""
    hit, n = view.read_matching(table, family_codec.ENDPOINTS_SCHEMA, "id", ids)
    return hit.height > 0, n


def rows_above(view: StoreView, name: str, mark: int) -> tuple[pl.DataFrame, int]:
    """A family table's rows above ``mark`` (the columns it reads), and the rows read."""
    return digest_capsules.rows_above(view, name, mark, _COLUMNS[name])


def is_current(view: StoreView, family: str) -> tuple[bool, int]:
    """Are the family's kept values current at ``view`` (see `_current`), and the Parquet
    rows read to find out (the values themselves are not read)."""
    current, visited, _new = _current(view, family)
    return current and bool(view.partitions(family_codec.table_of(family))), visited


def read_values(view: StoreView, family: str) -> tuple[dict[str, Any], int]:
    """The family's stored values (`decode`) and the Parquet rows read; call it once
    `is_current` said they are current."""
    rows, visited = read_whole(view, family_codec.table_of(family), family_codec.MEMO_SCHEMA)
    return family_codec.decode(family, rows, view), visited


def _read_tables(view: StoreView, family: str) -> tuple[dict[str, pl.DataFrame], int]:
    out, visited = {}, 0
    for name in FAMILIES[family]:
        parts = view.partitions(name)
        out[name] = view.scan_partitions(name, parts).select(_COLUMNS[name]).collect(
            engine="streaming") if parts else rows_above(view, name, 0)[0]  # no part: no row
        visited += sum(p.rows for p in parts)
    return out, visited


def _marks(view: StoreView, family: str, version: int | None = None) -> dict[str, Any]:
    """The marks of ``family``'s values at ``view``; ``version``: the values' own (None:
    computed at ``view``)."""
    top = _top(view, family)
    return {"seq": top, "rows": {name: view.row_count(name) for name in FAMILIES[family]},
            "version": top if version is None else version}


#: what a job cannot keep and says so: an unreadable table (a damaged or vacuumed part,
#: a file Polars cannot read); anything else is a bug and fails the job
UNREADABLE = (MemframeError, OSError, pl.exceptions.PolarsError)


def _stage_family(commit: Commit, view: StoreView, family: str, full: bool,
                  notes: list[str]) -> dict[str, int]:
    if not full:
        current, visited, new = _current(view, family)
        if current:  # nothing it depends on changed: at most its marks move
            if new:
                version = family_codec.version_of(view.watermarks, family)
                family_codec.kept(family).remark(commit, _marks(view, family, version))
            return job_report(visited)
    if not any(view.partitions(name) for name in FAMILIES[family]):
        return job_report()  # nothing to keep
    try:
        tables, visited = _read_tables(view, family)
    except UNREADABLE as exc:  # the digest reads the table itself (and fails, or not)
        notes.append(f"digest_globals: {family} not kept: a table cannot be read "
                     f"({type(exc).__name__}: {exc})")
        # values kept before must not be served: the digest reads the tables itself
        family_codec.kept(family).drop(commit, view)
        return job_report()
    problem = check_tables(tables)
    if problem:  # the digest fails closed on these rows: never keep values computed over them
        notes.append(f"digest_globals: {family} not kept: the digest fails closed on "
                     f"its rows ({problem})")
        family_codec.kept(family).drop(commit, view)
        return job_report(visited)
    values = family_values(family, tables)
    rows = {family_codec.table_of(family): family_codec.encode(family, values)}
    if family == "graph":
        rows[family_codec.MEMBERS_TABLE] = family_codec.member_rows(values)
        rows[family_codec.ENDPOINTS_TABLE] = family_codec.endpoint_rows(tables["relations"])
        rows[family_codec.KNOWN_TABLE] = family_codec.known_rows(tables["relations"],
                                                                   tables["forgets"])
    groups = dict.fromkeys(family_codec.LOOKUP_TABLES, family_codec.MEMBERS_GROUP_ROWS)
    written = family_codec.kept(family).stage(commit, rows, _marks(view, family),
                                              row_group_rows=groups)
    return job_report(visited, visited, written)


def stage_cycle(commit: Commit, view: StoreView, *, full: bool = False,
                notes: list[str] | None = None) -> dict[str, int]:
    """Recompute, on ``commit``, every family whose tables were written since its
    watermark (the others are left as they are; a virgin store writes nothing); with
    ``full`` (the rebuild door), every family that has rows. A family that cannot be
    kept (a table cannot be read, rows the digest fails closed on) is named in ``notes``
    with why; a digest then computes it from the tables."""
    total = job_report()
    notes = notes if notes is not None else []
    for family in FAMILIES:
        report = _stage_family(commit, view, family, full, notes)
        total = {k: total[k] + report[k] for k in total}
    return total


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
    must leave the graph as the tolerant check says (`is_current`) and name no new node."""
    marks = family_codec.kept("graph").marks(view.watermarks)
    if marks is None or not view.partitions(family_codec.KNOWN_TABLE):
        return None
    mark, counts = marks["seq"], marks["rows"]
    new: dict[str, pl.DataFrame] = {}
    visited = 0
    for name in FAMILIES["graph"]:
        new[name], n = rows_above(view, name, mark)
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
    # no new node is an id the graph named, no new forget an end of an edge it counts
    for table, wanted in ((family_codec.KNOWN_TABLE, ids),
                          (family_codec.ENDPOINTS_TABLE, forgotten)):
        hit, n = _names_any(view, table, wanted) if wanted else (False, 0)
        visited += n
        if hit:
            return None
    targets = sorted({b for _a, b in edges})
    ready = [i for i in ids if i not in set(targets)]
    return FreshEdges(relations.height, pl.Series("id", ready, dtype=pl.String),
                      pl.Series("id", targets, dtype=pl.String), visited)
