"""The incremental `memframe.digest.source.DigestSource`: the digest job's kept state plus
the rows above its watermark, never every capsule row.

Totals, tiers, coverage misses and archive candidates come from the aggregates; the
subset sections from the reference section functions over the subset (or as the job kept
them); ``newest`` and ``most_recalled`` from the leaders or the state's row groups; a
store-wide family from its kept values when they are current. The answers are the
reference's (`memframe.digest.source.TableSource`): the conformance test compares them
method by method.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from memframe.digest import families
from memframe.digest.capsules import RECALL_EXTRA, headline_rows
from memframe.digest.efforts import EffortGraph
from memframe.digest.families import FAMILIES
from memframe.digest.scope import SCOPE, fence, fence_expr, population
from memframe.digest.source import MemberLookup, TableSource
from memframe.digest.state import digest_aggregates, digest_capsules, family_codec, kept_families
from memframe.digest.state.warm_reader import TopRequest, WarmState
from memframe.schema import TIERS
from memframe.state import KEY, population_expr, state_columns, state_frame

__all__ = ["KeptSource", "KeptGraph", "read_kept_families", "top_requests"]


class KeptGraph:
    """The graph family's kept values, read on first use: a digest answered from the kept
    sections (`memframe.digest.state.sections`) never reads them."""

    def __init__(self, view: Any, fresh: kept_families.FreshEdges | None = None) -> None:
        self.view = view
        #: blocks edges written since, between ids the kept values never named
        self.fresh = fresh
        self._values: dict[str, Any] | None = None
        self._read = 0

    def values(self) -> dict[str, Any]:
        if self._values is None:
            self._values, self._read = kept_families.read_values(self.view, "graph")
            if self.fresh is not None:
                self._values = self.fresh.values(self._values)
        return self._values

    @property
    def rows_visited(self) -> int:
        """Parquet rows read: the values, and the board's member lookups since."""
        reads = self._values.get("_reads") if self._values is not None else None
        return self._read + (reads.rows_visited if reads is not None else 0)


class KeptSource(TableSource):
    """The incremental `DigestSource` (see the module docstring).

    Args:
        args, kwargs: `TableSource`'s: the tables read in full (those of no current kept
            family) and the subset's state rows (empty with ``kept``).
        warm: the aggregates, the subset and the top-N readers.
        kept_families: family -> its kept values (the graph's as a `KeptGraph`), for the
            families that were current; their tables were not read.
        kept: the unfenced subset sections as the job kept them, for this digest's cap and
            instant, when current.
    """

    def __init__(self, *args: Any, warm: WarmState, kept_families: dict[str, Any],
                 kept: dict | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.warm, self.families, self.kept = warm, kept_families, kept

    def rows_visited(self) -> int:
        graph = self.families.get("graph")
        return self.visited + self.warm.rows_visited + (graph.rows_visited if graph else 0)

    def graph(self, n: int) -> dict[str, Any]:
        if self.kept is not None:  # the sections that read the graph were kept
            return {"relations": self.kept["relations"], "dag": self.kept["dag"],
                    "mission_graph": None, "dag_projection": None, "efforts": None}
        return super().graph(n)

    def graph_values(self) -> dict[str, Any]:
        """The graph's kept values (read on first use) when current, else the tables'."""
        graph = self.families.get("graph")
        if graph is None:
            return super().graph_values()
        values = graph.values()
        return {**values, "effort_graph": self._kept_efforts(values)}

    def _kept_efforts(self, kept: dict) -> EffortGraph:
        """The board's graph from kept values: witnessed ids and member lookups from the
        job, member counts from the state rows of the epics (the subset holds them)."""
        epics = self.state().filter((pl.col("kind") == "epic").fill_null(False))
        stats = epics.select(
            pl.col("id").alias("epic"),
            pl.col("member_total"),
            pl.format("cap-{}", pl.col("newest_member")).alias("newest_member"),
            pl.col("newest_member").alias("newest_member_number"),
        ).filter(pl.col("member_total") > 0).sort("epic")
        return EffortGraph(witnessed=kept["witnessed"], member_stats=stats,
                           members=kept["_reads"])

    def open_sessions(self, n: int) -> tuple[int, list[str]]:
        sessions = self.families.get("sessions")
        if sessions is None:
            return super().open_sessions(n)
        return sessions["open_sessions"], sessions["open_session_ids"][:n]

    def fail_open(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for family in ("misses", "lanes", "sources"):
            kept = self.families.get(family)
            out.update(kept if kept is not None else
                       families.family_values(family, self.optional))
        return out

    def ledger(self) -> dict[str, Any]:
        sums = self.warm.sums
        return {"tiers": {tier: sums.get(("tier", tier), 0) for tier in TIERS},
                "journal": {**self.chain, "out_of_band": sums.get(("oob", ""), 0)},
                "archive_candidates": self._archive()}

    def _archive(self) -> int:
        """The candidates whose instant is at or before ``now`` (the quarantine guard was
        applied when each capsule was folded): the stored running total at ``now`` plus
        the changes of the rows above the watermark."""
        from memframe.schema import TIMESTAMP

        warm = self.warm
        now = pl.lit(self.now).cast(TIMESTAMP)
        timed = warm.aggregates.filter((pl.col("metric") == "archive") & (pl.col("at") <= now))
        stored = 0
        if not warm.in_memory:
            stored, read = digest_aggregates.archive_at(warm.view, self.now)
            warm.rows_visited += read
        return stored + int(timed["n"].sum() or 0)

    def capsule_sections(self, scoped: pl.DataFrame, scopes: Sequence[str], n: int
                         ) -> dict[str, dict]:
        """One scope's sections from the aggregates and the top-N readers."""
        [scope] = scopes
        prefix = scope or None
        sums = self.warm.sums
        projects = sorted({key for metric, key in sums
                           if metric in ("count", "live", "recalled")})
        if prefix is not None:
            projects = pl.Series("project_id", projects, dtype=pl.String).to_frame().filter(
                fence_expr(prefix)).get_column("project_id").to_list()
        table = [(p, sums.get(("count", p), 0), sums.get(("live", p), 0),
                  sums.get(("recalled", p), 0)) for p in projects]
        total = sum(row[1] for row in table)
        recalled_total = sum(row[3] for row in table)
        (_n, _newest, keep), (_n, _recalled, recalled_keep) = top_requests(n, prefix)
        # the aggregates say how many rows qualify: a reader stops once it has them all
        newest = self.warm.top_rows(keep, n, "newest", total).select(state_columns())
        recalled = self.warm.top_rows(recalled_keep, n, "recalled", recalled_total
                                      ).select(state_columns())
        section: dict = {"total": total, "by_project": [
            {"project_id": p, "count": c, "live": live} for p, c, live, _r in table if c > 0]}
        section["newest"] = headline_rows(newest, self.now, attach=self.attach)
        if total:
            section["newest_total"] = total
        section["most_recalled"] = headline_rows(recalled, self.now, RECALL_EXTRA,
                                                 attach=self.attach)
        if recalled_total:
            section["most_recalled_total"] = recalled_total
        return {scope: section}

    def kept_sections(self) -> dict | None:
        return self.kept

    def member_scopes(self, prefix: str | None) -> MemberLookup | None:
        """The state rows of the capsules asked (stored rows by capsule number, the rows
        touched since the watermark as folded now), fenced as the digest's population. A
        cold fold that kept only the top-N candidates reads what the population needs of
        them (project, forget, latest review) from their source rows."""
        warm = self.warm

        def lookup(ids: pl.Series) -> pl.DataFrame:
            from memframe.ids import capsule_number_expr

            nums = (ids.to_frame("id").select(capsule_number_expr("id").alias(KEY))
                    .get_column(KEY).drop_nulls().unique().sort())
            if warm.in_memory and warm.tops is not None:
                return _population_of(warm.view, ids, prefix)
            # the population needs no text: the stored rows' text columns stay unknown
            rows = warm.merged.filter(pl.col(KEY).is_in(nums.implode()))
            if not warm.in_memory:  # the numbers not touched: their stored rows
                stored, read = digest_capsules.read_stored(
                    warm.view, nums.filter(~nums.is_in(warm.touched.implode())).to_list())
                warm.rows_visited += read
                rows = pl.concat([stored, rows], how="vertical")
            return fence(population(state_frame(rows)), prefix).select("id", SCOPE)

        return lookup


def read_kept_families(view: Any) -> tuple[dict[str, Any], int]:
    """The store-wide values the digest job kept and that are current at ``view`` (the
    graph's as a `KeptGraph`, read on first use; the others read in one collect)."""
    kept: dict[str, Any] = {}
    visited = 0
    current: list[str] = []
    for family in FAMILIES:
        try:
            ok, n = kept_families.is_current(view, family)
        except kept_families.UNREADABLE:  # unreadable kept values: read the tables instead
            continue
        visited += n
        if ok and family == "graph":
            kept[family] = KeptGraph(view)
        elif family == "graph":  # a session's new blocks edges leave the rest as kept
            try:
                fresh = kept_families.fresh_edges(view)
            except kept_families.UNREADABLE:  # unreadable kept ids: read the tables
                fresh = None
            if fresh is not None:
                kept[family] = KeptGraph(view, fresh)
                visited += fresh.rows_visited
        elif ok:
            current.append(family)
    try:
        frames = pl.collect_all([
            view.derived(family_codec.table_of(f), family_codec.MEMO_SCHEMA)
            for f in current], engine="in-memory") if current else []
    except kept_families.UNREADABLE:  # unreadable kept values: read the tables instead
        return kept, visited
    for family, rows in zip(current, frames, strict=True):
        kept[family] = family_codec.decode(family, rows, view)
        visited += view.row_count(family_codec.table_of(family))
    return kept, visited


def top_requests(n: int, prefix: str | None) -> tuple[TopRequest, ...]:
    """The top-N requests of `KeptSource.capsule_sections` (``newest``,
    ``most_recalled``) for the list cap ``n`` and the fence ``prefix``: what a cold fold
    keeps candidates of.

    Examples:
        >>> [order for _n, order, _keep in top_requests(3, "team")]
        ['newest', 'recalled']
    """
    keep = population_expr()
    if prefix is not None:
        keep = keep & fence_expr(prefix)
    return ((n, "newest", keep),
            (n, "recalled", keep & pl.col("last_recalled_at").is_not_null()))


def _population_of(view: Any, ids: pl.Series, prefix: str | None) -> pl.DataFrame:
    """``(id, _scope)`` of those of ``ids`` in the fenced population, from source rows."""
    from memframe.digest.staged import latest_reviews

    wanted = ids.implode()
    caps = (view.table("capsules").filter(pl.col("id").is_in(wanted))
            .select("seq", "id", "project_id").collect())
    forgotten = (view.table("forgets").filter(pl.col("capsule_id").is_in(wanted))
                 .select("capsule_id").collect().get_column("capsule_id"))
    reviews = (view.table("reviews").filter(pl.col("capsule_id").is_in(wanted))
               .select("seq", "at", "capsule_id", "verdict").collect())
    staged = latest_reviews(reviews).filter(pl.col("staged")).get_column("capsule_id")
    held = caps.filter(~pl.col("id").is_in(forgotten.implode())
                       & ~pl.col("id").is_in(staged.implode()))
    return fence(held, prefix).select("id", SCOPE)


