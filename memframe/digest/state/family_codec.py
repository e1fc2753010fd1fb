"""The digest's store-wide values as kept: where each family's values live, and their rows.

The values of a family of source tables (`memframe.digest.families`: the graph, the git
witness, the recall misses, the lane overrides, the open sessions) are kept as rows of
`MEMO_SCHEMA` under ``projections/digest_globals/<family>`` (`encode`; a warm digest reads
them back with `decode`), with marks in the watermark ``projections/digest/globals/<family>``
(`kept`). The graph keeps three lookup tables beside them: its ``part_of`` edges by epic
(`MEMBERS_TABLE`, read through `MemberIndex`), the ends of the edges a tombstone can change
(`ENDPOINTS_TABLE`) and every id its tables name (`KNOWN_TABLE`). Details:
docs/architecture.md ("Kept values, one mechanism").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived.kept import KeptValues
from memframe.digest.efforts import DAG_LISTS

if TYPE_CHECKING:
    from memframe.store import StoreView


#: the stored rows of one family: ``part`` names what a row holds
MEMO_SCHEMA = pl.Schema({"part": pl.String(), "id": pl.String(), "n": pl.Int64(),
                         "text": pl.String()})


def table_of(family: str) -> str:
    """The derived table holding ``family``'s values.

    Examples:
        >>> table_of("graph")
        'projections/digest_globals/graph'
    """
    return f"projections/digest_globals/{family}"


#: the graph's lookup tables (see the module docstring)
MEMBERS_TABLE = table_of("graph") + "_members"
ENDPOINTS_TABLE = table_of("graph") + "_endpoints"
KNOWN_TABLE = table_of("graph") + "_known"
LOOKUP_TABLES = (MEMBERS_TABLE, ENDPOINTS_TABLE, KNOWN_TABLE)


def kept(family: str) -> KeptValues:
    """Where ``family``'s values are kept, and the watermark of their marks: ``seq`` (the
    highest ``seq`` of its tables they account for), ``rows`` (each table's row count
    then) and ``version`` (the ``seq`` they were computed at: unlike ``seq`` it does not
    move when new rows leave the values as they were)."""
    tables = (table_of(family),) + (LOOKUP_TABLES if family == "graph" else ())
    return KeptValues(tables, f"projections/digest/globals/{family}")


def version_of(watermarks: Mapping[str, Any], family: str) -> int | None:
    """The version of ``family``'s kept values (see `kept`): what is computed from them
    (`memframe.digest.state.sections`) is current while it holds."""
    marks = kept(family).marks(watermarks)
    return marks["version"] if marks is not None else None


def _rows(part: str, ids: pl.Series | list[str], n: pl.Series | list[int] | None = None,
          text: pl.Series | list[str] | None = None) -> pl.DataFrame:
    height = len(ids)
    return pl.DataFrame({"part": [part] * height, "id": ids,
                         "n": n if n is not None else [None] * height,
                         "text": text if text is not None else [None] * height},
                        schema=MEMO_SCHEMA)


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
        for name in DAG_LISTS:
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
        rows, n = self.view.read_matching(MEMBERS_TABLE, MEMBERS_SCHEMA, "epic",
                                          [e for e in epics.to_list() if e is not None])
        self.rows_visited += n
        return rows


def decode(family: str, rows: pl.DataFrame, view: StoreView | None = None) -> dict[str, Any]:
    """Stored rows -> the family's values (as `family_values` computed them), except the
    graph's ``effort_graph``: it comes back as its ``witnessed`` ids and a `MemberIndex`
    over ``view`` (``_reads``), and the digest completes it with the member counts its
    state rows carry (`memframe.digest.state.digest_capsules`: ``members``,
    ``newest_member``). The mission graph's ``dead`` set, which no section reads, is not
    kept.
    """
    if family != "graph":
        return {part: json.loads(text) for part, text in zip(  # columns: no query
            rows.get_column("part").to_list(), rows.get_column("text").to_list(), strict=True)}
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
        for name in DAG_LISTS:
            dag[name] = part(name).sort("n").get_column("id").to_list()
    children = part("children").select("id", pl.col("n").alias("children")).sort("id")
    graph = MissionGraph(dead=None, grounded_from=part("grounded_from").get_column("id"),
                         children=children,
                         cycle=json.loads(part("mission_cycle").get_column("text").item()))
    # the board's graph is completed by the digest: member counts from the state's rows,
    # members looked up here
    return {"relations": int(part("relations").get_column("n").item()), "dag_projection": dag,
            "mission_graph": graph, "witnessed": part("witnessed").get_column("id"),
            "_reads": MemberIndex(view) if view is not None else None}


ENDPOINTS_SCHEMA = pl.Schema({"id": pl.String()})


def endpoint_rows(relations: pl.DataFrame) -> pl.DataFrame:
    """The ids whose tombstone can change the graph's values: both ends of every
    ``blocks``, ``witnesses`` and ``grounded_in`` edge, sorted."""
    edges = relations.filter(pl.col("kind").is_in(["blocks", "witnesses", "grounded_in"]))
    return _ids(edges.get_column("from_id"), edges.get_column("to_id"))


def known_rows(relations: pl.DataFrame, forgets: pl.DataFrame) -> pl.DataFrame:
    """Every id the graph's tables name (either end of any relation, any forgotten
    capsule), sorted: a ``blocks`` edge between two ids outside it touches nothing the
    graph's values were computed from (`fresh_edges`)."""
    return _ids(relations.get_column("from_id"), relations.get_column("to_id"),
                forgets.get_column("capsule_id"))


def _ids(*columns: pl.Series) -> pl.DataFrame:
    return pl.concat(columns).drop_nulls().unique().sort().alias("id").to_frame()
