"""The ``open_efforts`` board (reference 4.17): one row per open epic the fence admits.

An epic is **open** when it is not tombstoned, its latest kind is ``epic``, and no
``witnesses`` or ``supersedes`` edge names it. nMEMORY 0.3.0 admits an open epic to a
scope's board when the scope's population (fenced, not tombstoned, not staged) holds the
epic **or any of its** ``part_of`` **members**; the row is then read from the unfenced live
map (staged included), so it is the epic's own headline with its own ``project_id``, even
outside the fence (reference 4.17, and section 10's reading: a staged epic rides through
a member the scope holds). Everything about the members is graph truth, counted
store-wide:

* ``member_total``: distinct ``part_of`` from-ids into the epic, dead members included;
* ``newest_id``: the highest capsule number among the epic and its members;
* ``ready``/``blocked``/``done`` (+ ``*_total``): the store-global blocks-DAG lists
  intersected with members and the epic, capped at N (all six omitted on a cycle);
* ``handoff``: the newest member that is not superseded, not tombstoned (staged is fine)
  and whose source is ``memory_session_finish``, as a headline row.

Rows sort by ``newest_id`` number descending, then epic seq descending, capped at N;
``open_efforts_total`` is the exact count.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from memframe.digest.capsules import headline_rows
from memframe.digest.scope import HANDOFF_SOURCE, SCOPE, per_scope, top_per_scope
from memframe.ids import capsule_number_expr

__all__ = ["DAG_LISTS", "EffortGraph", "effort_graph", "effort_board", "open_epics",
           "open_efforts_sections"]

DAG_LISTS = ("ready", "blocked", "done")


def _number(column: str) -> pl.Expr:
    # cap-<n> -> n (the capsule's append position); anything else -> null
    return capsule_number_expr(column)


@dataclass(frozen=True)
class EffortGraph:
    """What the board reads of the relations (store-wide, never fenced).

    Attributes:
        witnessed: the ``to_id`` of every ``witnesses`` edge.
        member_stats: one row per ``part_of`` target (``epic``): ``member_total`` (distinct
            from-ids), ``newest_member`` (the member with the highest capsule number, null
            when no member has one) and ``newest_member_number``.
        members: epic ids -> their distinct ``(epic, member)`` edges (asked for the epics
            shown only).
    """

    witnessed: pl.Series
    member_stats: pl.DataFrame
    members: Callable[[pl.Series], pl.DataFrame]


def member_stats(part_of: pl.DataFrame) -> pl.DataFrame:
    """Distinct ``(epic, member)`` edges -> `EffortGraph.member_stats`."""
    return (
        part_of.with_columns(_number("member").alias("number"))
        .group_by("epic")
        .agg(
            pl.len().cast(pl.Int64).alias("member_total"),
            pl.col("member").filter(pl.col("number").is_not_null())
            .sort_by(pl.col("number").filter(pl.col("number").is_not_null()),
                     descending=True).first().alias("newest_member"),
            pl.col("number").max().alias("newest_member_number"),
        )
        .sort("epic")
    )


def effort_graph(relations: pl.DataFrame) -> EffortGraph:
    """The board's `EffortGraph` from every relation row (``kind``, ``from_id``, ``to_id``).

    Examples:
        >>> rel = pl.DataFrame({"kind": ["part_of", "part_of", "witnesses"],
        ...                     "from_id": ["cap-2", "cap-3", "cap-4"],
        ...                     "to_id": ["cap-1", "cap-1", "cap-3"]})
        >>> g = effort_graph(rel)
        >>> g.member_stats.rows(), g.witnessed.to_list()
        ([('cap-1', 2, 'cap-3', 3)], ['cap-3'])
    """
    edges = relations.select("kind", "from_id", "to_id")
    witnessed = edges.filter(pl.col("kind") == "witnesses").get_column("to_id").unique().sort()
    part_of = (edges.filter(pl.col("kind") == "part_of")
               .select(pl.col("to_id").alias("epic"), pl.col("from_id").alias("member"))
               .unique())
    return EffortGraph(
        witnessed=witnessed,
        member_stats=member_stats(part_of),
        members=lambda ids: part_of.filter(pl.col("epic").is_in(ids.implode())),
    )


def _dag_slices(
    belongs: pl.DataFrame, projection: dict, n: int
) -> dict[str, dict[str, list[str] | int]]:
    """epic -> the six dag fields (global lists intersected with members and the epic)."""
    rows = [
        (name, position, cid)
        for name in DAG_LISTS
        for position, cid in enumerate(projection[name])
    ]
    listed = pl.DataFrame(
        rows, schema={"list": pl.String, "position": pl.Int64, "id": pl.String}, orient="row"
    )
    hits = (
        belongs.join(listed, left_on="member", right_on="id", how="inner")
        .sort("epic", "list", "position")
        .group_by("epic", "list", maintain_order=True)
        .agg(pl.col("member").alias("ids"))
    )
    out: dict[str, dict] = {}
    for epic, name, found in hits.iter_rows():
        out.setdefault(epic, {})[name] = found
    slices: dict[str, dict] = {}
    for epic in belongs.get_column("epic").unique().to_list():
        found = out.get(epic, {})
        fields: dict = {}
        for name in DAG_LISTS:
            ids = found.get(name, [])
            fields[name] = ids[:n]
            fields[f"{name}_total"] = len(ids)
        slices[epic] = fields
    return slices


def _admitted(scoped: pl.DataFrame, open_epics: pl.DataFrame, graph: EffortGraph,
              member_scopes: Callable[[pl.Series], pl.DataFrame] | None) -> pl.DataFrame:
    """``(id, _scope)``: each open epic once per scope whose population holds the epic or
    any of its ``part_of`` members."""
    ids = open_epics.get_column("id")
    direct = scoped.filter(pl.col("id").is_in(ids.implode())).select("id", SCOPE)
    with_members = graph.member_stats.filter(pl.col("epic").is_in(ids.implode()))
    if with_members.height == 0:
        return direct.unique()
    edges = graph.members(with_members.get_column("epic")).select("epic", "member")
    members = edges.get_column("member").unique()
    if member_scopes is None:
        held = scoped.filter(pl.col("id").is_in(members.implode())).select("id", SCOPE)
    else:
        held = member_scopes(members).select("id", SCOPE)
    via = edges.join(held, left_on="member", right_on="id", how="inner").select(
        pl.col("epic").alias("id"), SCOPE)
    return pl.concat([direct, via]).unique()


def open_epics(alive: pl.DataFrame, graph: EffortGraph) -> pl.DataFrame:
    """The open epics of ``alive`` (not tombstoned): kind ``epic``, neither superseded nor
    witnessed."""
    return alive.filter(
        (pl.col("kind") == "epic").fill_null(False)
        & ~pl.col("superseded")
        & ~pl.col("id").is_in(graph.witnessed.implode())
    )


def effort_board(scoped: pl.DataFrame, alive: pl.DataFrame, graph: EffortGraph,
                 member_scopes: Callable[[pl.Series], pl.DataFrame] | None = None
                 ) -> pl.DataFrame:
    """Every open epic admitted to a scope, once per scope, in the board's order before the
    cap: ``newest_id`` number descending, then epic seq descending (reference 4.17)."""
    epics = open_epics(alive, graph)
    if epics.height:
        epics = epics.join(_admitted(scoped, epics, graph, member_scopes), on="id",
                           how="inner")
    # the epic belongs to its own effort: newest_id is the epic unless a member is newer
    epic_number = _number("id")
    stats = graph.member_stats
    # the state's own member columns (when it carries them) are what ``stats`` was made of
    epics = epics.drop([c for c in stats.columns if c in epics.columns and c != "epic"])
    return (
        epics.join(stats, left_on="id", right_on="epic", how="left")
        .with_columns(pl.col("member_total").fill_null(0), epic_number.alias("_own"))
        .with_columns(
            pl.when(pl.col("newest_member_number").fill_null(-1) > pl.col("_own").fill_null(-1))
            .then(pl.col("newest_member")).otherwise(pl.col("id")).alias("newest_id"),
            pl.max_horizontal("newest_member_number", "_own").alias("newest_number"),
        )
        .drop("newest_member", "newest_member_number", "_own")
        .sort(["newest_number", "seq"], descending=[True, True])
    )


def open_efforts_sections(
    scoped: pl.DataFrame,
    alive: pl.DataFrame,
    relations: pl.DataFrame | EffortGraph,
    projection: dict,
    scopes: Sequence[str],
    n: int,
    now: _dt.datetime,
    attach: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    member_scopes: Callable[[pl.Series], pl.DataFrame] | None = None,
) -> dict[str, dict]:
    """``{"open_efforts": [...], "open_efforts_total": k}`` per scope (omitted when empty).

    Args:
        scoped: the scope-tagged population (fenced, tombstoned and staged excluded).
        alive: every non-tombstoned capsule, unfenced, staged included (the epics' rows,
            members and handoffs are resolved against it; it holds every epic).
        relations: all relation rows (``kind``, ``from_id``, ``to_id``), or what the board
            reads of them (`EffortGraph`).
        projection: the uncapped blocks-DAG projection
            (:func:`memframe.graph.blocks_projection`).
        scopes: the scopes to answer.
        n: the headline cap (rows and each dag list).
        now: the digest's instant (``expired`` flags).
        member_scopes: capsule ids -> ``(id, _scope)`` for those of them the scoped
            population holds (a capsule once per scope); None: they are looked up in
            ``scoped`` (which then must hold every capsule of the population, not a
            subset).
    """
    empty: dict[str, dict] = {scope: {} for scope in scopes}
    graph = relations if isinstance(relations, EffortGraph) else effort_graph(relations)
    board = effort_board(scoped, alive, graph, member_scopes)
    if board.height == 0:
        return empty
    totals = dict(board.group_by(SCOPE).len().iter_rows())
    top = top_per_scope(board, n)
    # the per-row work (dag slices, handoffs) follows the rows shown, not every open epic
    shown_ids = top.get_column("id").unique()
    shown_members = graph.members(shown_ids).unique(["epic", "member"])
    # member_total counts distinct members, from the edges themselves: a relation row
    # written twice (a source whose relations lost their key) is one member
    counted = shown_members.group_by("epic").agg(
        pl.col("member").n_unique().cast(pl.Int64).alias("member_total"))
    top = (top.drop("member_total")
           .join(counted, left_on="id", right_on="epic", how="left", maintain_order="left")
           .with_columns(pl.col("member_total").fill_null(0)))
    belongs = pl.concat(
        [shown_members.select("epic", "member"),
         pl.DataFrame({"epic": shown_ids, "member": shown_ids})]
    ).unique()
    handoff_source = alive.filter(
        (pl.col("source") == HANDOFF_SOURCE).fill_null(False) & ~pl.col("superseded")
    )
    handoffs = (
        shown_members.join(handoff_source, left_on="member", right_on="id", how="inner")
        .sort("seq", descending=True)
        .group_by("epic", maintain_order=True)
        .first()
        .select("epic", pl.col("member").alias("handoff_id"))
    )
    handoff_rows = alive.filter(pl.col("id").is_in(handoffs.get_column("handoff_id").implode()))
    handoff_lines = {row["id"]: row for row in headline_rows(handoff_rows, now, attach=attach)}
    slices = _dag_slices(belongs, projection, n) if projection["status"] == "ok" else {}
    top = top.join(handoffs, left_on="id", right_on="epic", how="left", maintain_order="left")
    out: dict[str, dict] = {}
    shown = per_scope(top)
    for scope in scopes:
        part = shown.get(scope)
        section: dict = {}
        if part is not None and part.height:
            rows = headline_rows(
                part,
                now,
                extra=(("member_total", pl.col("member_total")),
                       ("newest_id", pl.col("newest_id"))),
                attach=attach,
            )
            for row, handoff_id in zip(rows, part.get_column("handoff_id").to_list(),
                                       strict=True):
                if projection["status"] == "ok":
                    row.update(slices[row["id"]])
                if handoff_id is not None:
                    row["handoff"] = handoff_lines[handoff_id]
            section["open_efforts"] = rows
        if totals.get(scope, 0):
            section["open_efforts_total"] = int(totals[scope])
        out[scope] = section
    return out
