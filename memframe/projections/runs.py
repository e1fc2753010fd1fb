"""Append-only sorted runs, size-tiered: the layout of the live-count indexes.

An index kept as runs is a few derived tables ``<prefix>/T<k>`` (tiers ``k = 0, 1, ...``),
each holding one or more partitions ("runs"). A run is sorted by the index's columns and
written with small row groups, so the min/max statistics of its lookup column (the first
sort column) are tight and a lookup of a few values reads only the row groups that can
hold them. Rows are never changed, only added:

* a cycle appends its new rows as one run of tier 0 (nothing read); an index of partial
  counts (``combine``) adds them up per key when runs merge, and a reader adds them up
  across runs (merge-on-read: no old row is read to write a new one);
* a tier that would hold more than ``TIER_RUNS`` runs is merged, with the new run, into one
  run of the next tier (each row is rewritten a logarithmic number of times, and a merge
  reads only the runs of the tiers it merges);
* the rebuild door writes every row as one run, in the tier that run's size belongs to
  (``BASE_RUN * TIER_RUNS**k`` rows), so later cycles never merge it into a small tier.

A lookup is planned from the footers before any row is read (`SortedRuns.plan`), so a
caller that has two ways to answer can take the one that reads fewer rows.

Reading goes through a pinned ``StoreView`` and writing through a ``Commit``; this module
does no I/O of its own beyond the partitions the view names.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.store import tables

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit
    from memframe.store.log import Part

__all__ = ["BASE_RUN", "TIER_RUNS", "Plan", "SortedRuns", "stage_append_together"]

TIER_RUNS = 8  # runs a tier may hold before it is merged into the next one
BASE_RUN = 4_096  # rows a tier-0 run is sized for; tier k runs are BASE_RUN * TIER_RUNS**k


@dataclasses.dataclass(frozen=True)
class Plan:
    """The row groups a lookup will read, per partition, and their row count.

    Attributes:
        groups: ``(partition, row group numbers)`` for every partition with a group to read.
        rows: the Parquet rows those groups hold (what the lookup will add to rows_visited).
    """

    groups: tuple[tuple[Part, tuple[int, ...]], ...]
    rows: int


@dataclasses.dataclass(frozen=True)
class SortedRuns:
    """One index kept as size-tiered sorted runs.

    Attributes:
        prefix: derived-table prefix; tier ``k`` is the table ``<prefix>/T<k>``.
        schema: the stored columns.
        order: the sort columns; the first one is the lookup column.
        row_group_rows: rows per Parquet row group (small: a lookup reads whole groups).
        combine: applied to the rows of runs being merged (for example a sum per key, for
            an index of exact partial counts); None keeps every row.

    Examples:
        >>> import polars as pl
        >>> idx = SortedRuns("projections/x/nums", pl.Schema({"num": pl.Int64()}), ("num",))
        >>> idx.table(2)
        'projections/x/nums/T2'
        >>> idx.tier_for(1_000_000)  # a rebuild's run of a million rows lands in tier 3
        3
    """

    prefix: str
    schema: pl.Schema
    order: tuple[str, ...]
    row_group_rows: int = 64
    combine: Callable[[pl.DataFrame], pl.DataFrame] | None = None

    @property
    def column(self) -> str:
        return self.order[0]

    def table(self, k: int) -> str:
        return f"{self.prefix}/T{k}"

    def tiers(self, view: StoreView) -> list[int]:
        """The tiers that hold at least one run at ``view``'s generation, ascending."""
        head = f"{self.prefix}/T"
        return sorted(int(t[len(head):]) for t, parts in view.snapshot.tables.items()
                      if t.startswith(head) and parts and t[len(head):].isdigit())

    def runs(self, view: StoreView) -> list[Part]:
        """Every run, lowest tier first."""
        return [p for k in self.tiers(view) for p in view.snapshot.parts(self.table(k))]

    @staticmethod
    def tier_for(rows: int) -> int:
        """The tier a run of ``rows`` rows belongs to."""
        k = 0
        while BASE_RUN * TIER_RUNS**k < rows:
            k += 1
        return k

    # -- reading ------------------------------------------------------------------------------
    def plan(self, view: StoreView, values: Sequence[Any]) -> Plan:
        """The row groups that can hold any of ``values`` (read from the footers only)."""
        wanted = sorted(set(values))
        out: list[tuple[Part, tuple[int, ...]]] = []
        total = 0
        if not wanted:
            return Plan((), 0)
        for part in self.runs(view):
            _meta, mins, maxs, counts = tables.row_group_ranges(view.path / part.path,
                                                                self.column)
            groups = []
            for g, (lo, hi) in enumerate(zip(mins, maxs, strict=True)):
                if lo is not None and hi is not None:
                    i = bisect.bisect_left(wanted, lo)  # the first wanted value >= min
                    if i == len(wanted) or wanted[i] > hi:
                        continue
                groups.append(g)
            if groups:
                out.append((part, tuple(groups)))
                total += sum(counts[g] for g in groups)
        return Plan(tuple(out), total)

    def read(self, view: StoreView, plan: Plan, values: Sequence[Any]) -> pl.DataFrame:
        """The rows whose lookup column is in ``values``, reading exactly ``plan``'s groups."""
        pieces = [tables.read_row_groups(view.path, part, groups, self.schema)
                  for part, groups in plan.groups]
        if not pieces:
            return pl.DataFrame(schema=self.schema)
        wanted = pl.Series(sorted(set(values)), dtype=self.schema[self.column])
        return pl.concat(pieces).filter(pl.col(self.column).is_in(wanted.implode()))

    def lookup(self, view: StoreView, values: Sequence[Any]) -> tuple[pl.DataFrame, int]:
        """Rows whose lookup column is in ``values`` and the Parquet rows read."""
        plan = self.plan(view, values)
        return self.read(view, plan, values), plan.rows

    # -- writing ------------------------------------------------------------------------------
    def stage_append(self, commit: Commit, view: StoreView, rows: pl.DataFrame) -> int:
        """Add ``rows`` as a new tier-0 run, merging full tiers upward. Rows read."""
        return stage_append_together(commit, view, (self,), rows)

    def shape(self, view: StoreView) -> tuple[tuple[int, int, int], ...]:
        """Per tier: its number, its run count and its rows (from the log, nothing read)."""
        return tuple((k, len(parts), sum(p.rows for p in parts))
                     for k in self.tiers(view)
                     for parts in [view.snapshot.parts(self.table(k))])

    def stage_replace(self, commit: Commit, view: StoreView, rows: pl.DataFrame) -> None:
        """Replace the whole index by ``rows``: one run, in the tier its size belongs to."""
        target = self.tier_for(rows.height)
        for k in self.tiers(view):
            if k != target:
                commit.write_derived(self.table(k), rows.clear(), replace=True)
        commit.write_derived(self.table(target), rows.select(list(self.schema))
                             .sort(list(self.order)), replace=True,
                             row_group_rows=self.row_group_rows)


def stage_append_together(commit: Commit, view: StoreView, indexes: Sequence[SortedRuns],
                          rows: pl.DataFrame) -> int:
    """Append the same rows to indexes that hold the same rows in different orders.

    Indexes appended and replaced together have the same tiers, runs and row counts, so
    a merge reads the runs of the first index only and writes the merged run of every one
    (a merge costs one read of the rows, not one per index). Indexes whose shapes differ
    (never the case when they are only written together) are appended one by one. Returns
    the Parquet rows read.
    """
    if rows.height == 0:
        return 0
    lead = indexes[0]
    if len(indexes) > 1 and (lead.combine is not None
                             or any(ix.shape(view) != lead.shape(view) for ix in indexes[1:])):
        return sum(stage_append_together(commit, view, (ix,), rows) for ix in indexes)
    visited = 0
    carry = rows.select(list(lead.schema))
    k = 0
    while True:
        runs = list(view.snapshot.parts(lead.table(k)))
        if len(runs) + 1 <= TIER_RUNS:
            for ix in indexes:
                commit.write_derived(ix.table(k), carry.select(list(ix.schema))
                                     .sort(list(ix.order)), replace=False,
                                     row_group_rows=ix.row_group_rows)
            return visited
        old = tables.read(view.path, runs, lead.schema)
        visited += sum(p.rows for p in runs)
        carry = pl.concat([old, carry])
        if lead.combine is not None:
            carry = lead.combine(carry).select(list(lead.schema))
        for ix in indexes:
            commit.write_derived(ix.table(k), carry.clear().select(list(ix.schema)),
                                 replace=True)
        k += 1
