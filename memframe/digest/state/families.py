"""The digest's store-wide values, kept per family of source tables
(`memframe.digest.families`).

The job keeps each family's values (`encode`; a warm digest reads them back with
`decode`) with marks: the highest ``seq`` of its tables and their row counts. A digest
reuses them while no part of those tables lies above the marks (`is_current`); new
``forgets`` that tombstone no end of a blocks, witnesses or grounded_in edge, and new
``blocks`` edges between ids no earlier row named (`fresh_edges`), leave the graph's
values usable. Rows the digest fails closed on are never kept. Details:
docs/architecture.md ("Kept values, one mechanism").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import job_report
from memframe.derived.kept import KeptValues
from memframe.digest.checks import check_rows, check_tables
from memframe.digest.families import FAMILIES, family_values
from memframe.errors import MemframeError

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit

__all__ = [
    "FAMILIES",
    "MEMO_SCHEMA",
    "encode",
    "decode",
    "table_of",
    "read_valid",
    "is_current",
    "read_values",
    "version_of",
    "kept",
    "stage_cycle",
    "FreshEdges",
    "fresh_edges",
]

#: the stored rows of one family: ``part`` names what a row holds
MEMO_SCHEMA = pl.Schema({"part": pl.String(), "id": pl.String(), "n": pl.Int64(),
                         "text": pl.String()})

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

_DAG_LISTS = ("ready", "blocked", "done")


def table_of(family: str) -> str:
    """The derived table holding ``family``'s values.

    Examples:
        >>> table_of("graph")
        'projections/digest_globals/graph'
    """
    return f"projections/digest_globals/{family}"


def kept(family: str) -> KeptValues:
    """Where ``family``'s values are kept, and the watermark of their marks: ``seq`` (the
    highest ``seq`` of its tables they account for), ``rows`` (each table's row count
    then) and ``version`` (the ``seq`` they were computed at: unlike ``seq`` it does not
    move when new rows leave the values as they were)."""
    tables = (table_of(family),) + (
        (members_table(), endpoints_table(), known_table()) if family == "graph" else ())
    return KeptValues(tables, f"projections/digest/globals/{family}")


def version_of(watermarks: Mapping[str, Any], family: str) -> int | None:
    """The version of ``family``'s kept values (see `kept`): what is computed from them
    (`memframe.digest.state.sections`) is current while it holds."""
    marks = kept(family).marks(watermarks)
    return marks["version"] if marks is not None else None


def _rows(part: str, ids: pl.Series | list[str], n: pl.Series | list[int] | None = None,
          text: pl.Series | list[str] | None = None) -> pl.DataFrame:
    ids = pl.Series("id", ids, dtype=pl.String)
    height = ids.len()
    return pl.DataFrame({
        "part": pl.Series("part", [part] * height, dtype=pl.String),
        "id": ids,
        "n": pl.Series("n", n if n is not None else [None] * height, dtype=pl.Int64),
        "text": pl.Series("text", text if text is not None else [None] * height,
                          dtype=pl.String),
    })


def _json_row(part: str, value: Any) -> pl.DataFrame:
    return _rows(part, [""], text=[json.dumps(value)])


def encode(family: str, values: Mapping[str, Any]) -> pl.DataFrame:
    """A family's values -> the rows stored (`decode` gives them back; the graph's
    ``part_of`` edges go to their own table, `member_rows`).

    Examples:
        >>> encode("lanes", {"lane_overrides_total": 3}).rows()
        [('lane_overrides_total', '', None, '3')]
    """
    if family != "graph":
        return pl.concat([_json_row(key, value) for key, value in values.items()])
    projection, graph = values["dag_projection"], values["mission_graph"]
    efforts = values["effort_graph"]
    pieces = [_rows("relations", [""], [values["relations"]])]
    if projection["status"] == "ok":
        pieces.append(_json_row("dag", {"status": "ok"}))
        for name in _DAG_LISTS:
            ids = projection[name]
            pieces.append(_rows(name, ids, list(range(len(ids)))))
    else:
        pieces.append(_json_row("dag", projection))
    pieces += [
        _json_row("mission_cycle", graph.cycle),
        _rows("grounded_from", graph.grounded_from),
        _rows("children", graph.children.get_column("id"), graph.children.get_column("children")),
        # what the open_efforts board reads of the relations besides the members (and the
        # per-epic member counts, which the digest state folds per capsule)
        _rows("witnessed", efforts.witnessed),
    ]
    return pl.concat(pieces)


#: the ``part_of`` edges, sorted by epic (the board looks up the members of the epics it
#: shows, reading the row groups that hold them)
MEMBERS_SCHEMA = pl.Schema({"epic": pl.String(), "member": pl.String()})
MEMBERS_GROUP_ROWS = 1_024


def members_table() -> str:
    return table_of("graph") + "_members"


def member_rows(values: Mapping[str, Any]) -> pl.DataFrame:
    """The graph's distinct ``part_of`` edges, sorted by epic then member."""
    stats = values["effort_graph"].member_stats
    return (values["effort_graph"].members(stats.get_column("epic"))
            .select(list(MEMBERS_SCHEMA)).sort("epic", "member"))


class MemberIndex:
    """`EffortGraph.members` over the kept edges: reads only the row groups that can hold
    the epics asked (``rows_visited`` counts them)."""

    def __init__(self, view: StoreView) -> None:
        self.view = view
        self.rows_visited = 0

    def __call__(self, epics: pl.Series) -> pl.DataFrame:
        rows, n = self.view.read_matching(members_table(), MEMBERS_SCHEMA, "epic",
                                          [e for e in epics.to_list() if e is not None])
        self.rows_visited += n
        return rows


def decode(family: str, rows: pl.DataFrame, view: StoreView | None = None) -> dict[str, Any]:
    """Stored rows -> the family's values (as `family_values` computed them), except the
    graph's ``effort_graph``: it comes back as its ``witnessed`` ids and a `MemberIndex`
    over ``view`` (``_reads``), and the digest completes it with the member counts its
    state rows carry (`memframe.digest.state.capsules`: ``members``,
    ``newest_member``). The mission graph's ``dead`` set, which no section reads, is not
    kept.
    """
    if family != "graph":
        return {part: json.loads(text) for part, text in
                rows.select("part", "text").iter_rows()}
    from memframe.graph import MissionGraph

    # rows are stored part by part: one slice each
    bounds = rows.with_row_index("_i").group_by("part", maintain_order=True).agg(
        pl.col("_i").first().alias("start"), pl.len().alias("len"))
    spans = {p: (int(a), int(b)) for p, a, b in bounds.iter_rows()}

    def part(name: str) -> pl.DataFrame:
        start, length = spans.get(name, (0, 0))
        return rows.slice(start, length)

    dag = json.loads(part("dag").get_column("text").item())
    if dag["status"] == "ok":
        for name in _DAG_LISTS:
            dag[name] = part(name).sort("n").get_column("id").to_list()
    children = part("children").select(
        pl.col("id"), pl.col("n").alias("children")).sort("id")
    graph = MissionGraph(dead=None, grounded_from=part("grounded_from").get_column("id"),
                         children=children,
                         cycle=json.loads(part("mission_cycle").get_column("text").item()))
    return {
        "relations": int(part("relations").get_column("n").item()),
        "dag_projection": dag,
        "mission_graph": graph,
        # the board's graph is completed by the digest: member counts from the state's
        # rows, members looked up here
        "witnessed": part("witnessed").get_column("id"),
        "_reads": MemberIndex(view) if view is not None else None,
    }


# -- reading and keeping ----------------------------------------------------------------------

#: tables whose new rows leave a family current unless they name one of its ids: a forget
#: changes the graph only when it tombstones an endpoint of a blocks, witnesses or
#: grounded_in edge (the ids kept in `endpoints_table`)
_TOLERANT: dict[str, str] = {"graph": "forgets"}
ENDPOINTS_SCHEMA = pl.Schema({"id": pl.String()})


def endpoints_table() -> str:
    return table_of("graph") + "_endpoints"


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
    marks = kept(family).marks(view.watermarks)
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
    new, visited = _rows_above(view, tolerant, mark)
    if not visited:
        return int(counts[tolerant]) == view.row_count(tolerant), 0, False
    if int(counts[tolerant]) + new.height != view.row_count(tolerant):
        return False, visited, True
    ids = [i for i in new.get_column("capsule_id").unique().to_list() if i is not None]
    hit, n = view.read_matching(endpoints_table(), ENDPOINTS_SCHEMA, "id", ids)
    return hit.height == 0, visited + n, True


def _rows_above(view: StoreView, name: str, mark: int) -> tuple[pl.DataFrame, int]:
    """A family table's rows above ``mark`` (the columns the family reads), and the
    Parquet rows read: those of its parts that reach above it (none: nothing read)."""
    parts = [p for p in view.partitions(name) if (p.seq_hi or 0) > mark]
    if not parts:
        return _empty(name), 0
    rows = (view.scan_partitions(name, parts).select(_COLUMNS[name])
            .filter(pl.col("seq") > mark).collect(engine="in-memory"))
    return rows, sum(p.rows for p in parts)


def is_current(view: StoreView, family: str) -> tuple[bool, int]:
    """Are the family's kept values current at ``view`` (see `_current`), and the Parquet
    rows read to find out (the values themselves are not read)."""
    current, visited, _new = _current(view, family)
    return current and bool(view.partitions(table_of(family))), visited


def read_values(view: StoreView, family: str) -> tuple[dict[str, Any], int]:
    """The family's stored values (`decode`) and the Parquet rows read; call it once
    `is_current` said they are current."""
    rows = view.derived(table_of(family), MEMO_SCHEMA).collect(engine="in-memory")
    return decode(family, rows, view), view.row_count(table_of(family))


def read_valid(view: StoreView, family: str) -> tuple[dict[str, Any], int] | None:
    """The family's stored values and the Parquet rows read, when they are current at
    ``view`` (see `_current`); None otherwise (the digest then reads the tables)."""
    current, visited = is_current(view, family)
    if not current:
        return None
    values, n = read_values(view, family)
    return values, visited + n


def _read_tables(view: StoreView, family: str) -> tuple[dict[str, pl.DataFrame], int]:
    out, visited = {}, 0
    for name in FAMILIES[family]:
        parts = view.partitions(name)
        out[name] = view.scan_partitions(name, parts).select(_COLUMNS[name]).collect(
            engine="streaming") if parts else _empty(name)
        visited += sum(p.rows for p in parts)
    return out, visited


def _empty(name: str) -> pl.DataFrame:
    from memframe.schema import empty_frame

    return empty_frame(name).select(_COLUMNS[name])


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
                kept(family).remark(commit, _marks(view, family,
                                                   version_of(view.watermarks, family)))
            return job_report(visited)
    if not any(view.partitions(name) for name in FAMILIES[family]):
        return job_report()  # nothing to keep
    try:
        tables, visited = _read_tables(view, family)
    except UNREADABLE as exc:  # the digest reads the table itself (and fails, or not)
        notes.append(f"digest_globals: {family} not kept: a table cannot be read "
                     f"({type(exc).__name__}: {exc})")
        _drop_family(commit, view, family)
        return job_report()
    problem = check_tables(tables)
    if problem:  # the digest fails closed on these rows: never keep values computed over them
        notes.append(f"digest_globals: {family} not kept: the digest fails closed on "
                     f"its rows ({problem})")
        _drop_family(commit, view, family)
        return job_report(visited)
    values = family_values(family, tables)
    rows = {table_of(family): encode(family, values)}
    if family == "graph":
        rows[members_table()] = member_rows(values)
        rows[endpoints_table()] = endpoint_rows(tables["relations"])
        rows[known_table()] = known_rows(tables["relations"], tables["forgets"])
    groups = {members_table(): MEMBERS_GROUP_ROWS, endpoints_table(): MEMBERS_GROUP_ROWS,
              known_table(): MEMBERS_GROUP_ROWS}
    written = kept(family).stage(commit, rows, _marks(view, family), row_group_rows=groups)
    return job_report(visited, visited, written)


def _drop_family(commit: Commit, view: StoreView, family: str) -> None:
    """Drop what was kept of ``family`` (its tables and marks): values kept before its
    tables became unreadable, or took rows the digest fails closed on, must not be served
    (the digest reads the tables itself)."""
    kept(family).drop(commit, view)


def endpoint_rows(relations: pl.DataFrame) -> pl.DataFrame:
    """The ids whose tombstone can change the graph's values: both ends of every
    ``blocks``, ``witnesses`` and ``grounded_in`` edge, sorted."""
    edges = relations.filter(pl.col("kind").is_in(["blocks", "witnesses", "grounded_in"]))
    return (pl.concat([edges.get_column("from_id"), edges.get_column("to_id")])
            .drop_nulls().unique().sort().alias("id").to_frame())


# -- a session's new blocks edges ------------------------------------------------------------

def known_table() -> str:
    return table_of("graph") + "_known"


def known_rows(relations: pl.DataFrame, forgets: pl.DataFrame) -> pl.DataFrame:
    """Every id the graph's tables name (either end of any relation, any forgotten
    capsule), sorted: a ``blocks`` edge between two ids outside it touches nothing the
    graph's values were computed from (`fresh_edges`)."""
    return (pl.concat([relations.get_column("from_id"), relations.get_column("to_id"),
                       forgets.get_column("capsule_id")])
            .drop_nulls().unique().sort().alias("id").to_frame())


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
    """Kahn's sweep over a few edges (not `memframe.graph.cycle_status`: a warm digest
    process never loads networkx)."""
    successors: dict[str, list[str]] = {}
    indegree: dict[str, int] = {}
    for a, b in edges:
        successors.setdefault(a, []).append(b)
        indegree[b] = indegree.get(b, 0) + 1
        indegree.setdefault(a, 0)
    ready = [node for node, d in indegree.items() if d == 0]
    removed = 0
    while ready:
        removed += 1
        for b in successors.get(ready.pop(), ()):
            indegree[b] -= 1
            if indegree[b] == 0:
                ready.append(b)
    return removed == len(indegree)


def fresh_edges(view: StoreView) -> FreshEdges | None:
    """The graph's new rows as `FreshEdges`, when they are that (None otherwise: the
    digest then reads the graph's tables). Reads the rows above the kept values'
    watermark and looks their ids up in the kept ids (`known_table`); a new forget
    must leave the graph as the tolerant check says (`_current`) and name no new node."""
    marks = kept("graph").marks(view.watermarks)
    if marks is None or not view.partitions(known_table()):
        return None
    mark, counts = marks["seq"], marks["rows"]
    new: dict[str, pl.DataFrame] = {}
    visited = 0
    for name in FAMILIES["graph"]:
        new[name], n = _rows_above(view, name, mark)
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
    hit, n = view.read_matching(known_table(), ENDPOINTS_SCHEMA, "id", ids)
    visited += n
    if hit.height:
        return None
    if forgotten:
        hit, n = view.read_matching(endpoints_table(), ENDPOINTS_SCHEMA, "id", forgotten)
        visited += n
        if hit.height:
            return None
    targets = sorted({b for _a, b in edges})
    ready = [i for i in ids if i not in set(targets)]
    return FreshEdges(relations.height, pl.Series("id", ready, dtype=pl.String),
                      pl.Series("id", targets, dtype=pl.String), visited)


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
