"""Values computed from other tables, kept with the marks they were computed under.

A *kept value* is one or more derived tables replaced whole, plus one watermark holding the
**marks** the values were computed under: a small JSON-able dict that a reader can compute
again from the generation it reads (the highest ``seq`` of the source tables, their row
counts, the version of other kept values...). A reader serves the values only while the
marks it would record now are the recorded ones; otherwise it computes the answer from the
source rows. The writer stages the tables and the marks in one commit, so a crash keeps the
old values with their old marks, and `KeptValues.drop` removes both.

What code wrote the values is the store's concern, not the marks': every commit that writes
derived state records the code's identity, and a view hides derived state other code wrote
(`memframe.store.derived`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit

__all__ = ["KeptValues"]


@dataclasses.dataclass(frozen=True)
class KeptValues:
    """Where a kept value lives: its derived tables (the first holds the values, any others
    are lookups beside them) and the watermark holding its marks.

    Examples:
        >>> kept = KeptValues(("projections/example",), "projections/example/marks")
        >>> kept.marks({"projections/example/marks": {"seq": 4}})
        {'seq': 4}
        >>> kept.marks({}) is None
        True
    """

    tables: tuple[str, ...]
    mark: str

    def marks(self, watermarks: Mapping[str, Any]) -> Any:
        """The marks the kept values were computed under, or None (nothing kept)."""
        return watermarks.get(self.mark)

    def holds(self, view: StoreView, marks: Any) -> bool:
        """Are the kept values at ``view`` the ones computed under ``marks``?"""
        return self.marks(view.watermarks) == marks and bool(view.partitions(self.tables[0]))

    def stage(self, commit: Commit, rows: Mapping[str, pl.DataFrame], marks: Any, *,
              row_group_rows: Mapping[str, int] | None = None) -> int:
        """Replace the tables with ``rows`` (table -> rows) and record ``marks``, on
        ``commit``; the rows written."""
        groups = row_group_rows or {}
        written = 0
        for table in self.tables:
            commit.write_derived(table, rows[table], replace=True,
                                 row_group_rows=groups.get(table))
            written += rows[table].height
        commit.set_watermark(self.mark, marks)
        return written

    def remark(self, commit: Commit, marks: Any) -> None:
        """Record new marks for the values as they are (nothing they depend on changed)."""
        commit.set_watermark(self.mark, marks)

    def drop(self, commit: Commit, view: StoreView) -> None:
        """Drop the values and their marks on ``commit`` (a reader then computes them)."""
        for table in self.tables:
            if view.partitions(table):
                commit.write_derived(table, pl.DataFrame(), replace=True)
        commit.watermarks.pop(self.mark, None)
