"""One current row per key, kept as sorted runs: the newest version of a key wins.

A projection whose rows are replaced whole (a cycle reads a key's current row, folds the
new source rows into it and writes the result) is kept as the append-only runs of
`memframe.derived.runs`: each write stamps its rows with a *version* (the highest
source ``seq`` folded, which only grows) and appends them as a run; a key's current row is
its row of the highest version, wherever it lies. Nothing stored is rewritten to write a
row, and the runs merge (keeping each key's newest row) a budgeted amount per cycle, so a
cycle's reads follow its rows, never the projection's size nor how many cycles ran.

Versions may repeat across runs only for the same row (a merge input and the merged run
holding the same row until the merge lands), so the newest row of a key is well defined
whatever a reader sees of a merge in progress.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived.runs import Budget, SortedRuns
from memframe.schema import empty_of

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView
    from memframe.store.capture import Commit
    from memframe.store.spill import SpilledRows

__all__ = ["VERSION", "KeyedRuns", "newest_rows"]

#: the column carrying a stored row's version (dropped by every reader)
VERSION = "_version"


def newest_rows(rows: pl.DataFrame, key: str) -> pl.DataFrame:
    """Each key's row of the highest ``VERSION`` (rows of several runs, in any order).

    Examples:
        >>> rows = pl.DataFrame({"k": [1, 1, 2], "v": ["old", "new", "x"],
        ...                      VERSION: [3, 7, 1]})
        >>> newest_rows(rows, "k").sort("k").rows()
        [(1, 'new', 7), (2, 'x', 1)]
    """
    if rows.height <= 1 or rows.get_column(key).is_unique().all():
        return rows  # one row per key already (a single run, or runs of other keys)
    # the newest row's position per key, found on two columns; then one gather
    at = (rows.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_at"), key, VERSION)
          .sort(VERSION, descending=True).unique(key, keep="first")
          .get_column("_at").sort())
    return rows[at]


@dataclasses.dataclass(frozen=True)
class KeyedRuns:
    """A projection of one current row per ``key``, kept as versioned sorted runs.

    Attributes:
        prefix: derived-table prefix of the runs (tier ``k`` is ``<prefix>/T<k>``).
        schema: the projection's row (without the version column).
        key: the key column (an integer or text column with min/max statistics).
        row_group_rows: rows per Parquet row group (a lookup reads whole groups).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> schema = pl.Schema({"k": pl.Int64(), "v": pl.String()})
        >>> p = KeyedRuns("projections/example", schema, "k")
        >>> def put(keys, values, version):
        ...     rows = pl.DataFrame({"k": keys, "v": values})
        ...     return lambda c: p.stage_put(c, c.view, rows, version)
        >>> _ = store.commit(put([1, 2], ["a", "b"], 1), operation="example")
        >>> _ = store.commit(put([2], ["c"], 2), operation="example")
        >>> rows, _visited = p.read_keys(store.pinned(), [2])
        >>> rows.rows()
        [(2, 'c')]
    """

    prefix: str
    schema: pl.Schema
    key: str
    row_group_rows: int = 64

    @property
    def runs(self) -> SortedRuns:
        return SortedRuns(self.prefix, pl.Schema({**self.schema, VERSION: pl.Int64()}),
                          (self.key, VERSION), row_group_rows=self.row_group_rows,
                          combine=functools.partial(newest_rows, key=self.key))

    def _current(self, rows: pl.DataFrame) -> pl.DataFrame:
        return newest_rows(rows, self.key).select(list(self.schema))

    # -- reading ------------------------------------------------------------------------------
    def read_keys(self, view: StoreView, values: Sequence[Any]) -> tuple[pl.DataFrame, int]:
        """The current rows of ``values`` (absent keys have none) and the Parquet rows read
        (only the row groups whose statistics can hold one of them)."""
        if not values:
            return empty_of(self.schema), 0
        rows, visited = self.runs.lookup(view, values)
        return self._current(rows), visited

    def read_all(self, view: StoreView) -> tuple[pl.DataFrame, int]:
        """Every current row (one per key, in no particular order) and the rows read."""
        rows, visited = self.runs.read_all(view)
        return self._current(rows), visited

    def partitions(self, view: StoreView) -> list[Partition]:
        """Every stored partition (a reader of row groups takes each key's newest row)."""
        return self.runs.runs(view)

    # -- writing ------------------------------------------------------------------------------
    def stage_put(self, commit: Commit, view: StoreView, rows: pl.DataFrame, version: int,
                  budget: Budget | None = None) -> int:
        """Stage ``rows`` (one per key) as the keys' current rows, at ``version`` (above
        every stored version), and advance the merges within ``budget``. Rows read."""
        return self.runs.stage_append(commit, view, self._stamped(rows, version), budget)

    def stage_replace(self, commit: Commit, view: StoreView, rows: pl.DataFrame | SpilledRows,
                      version: int) -> None:
        """Stage ``rows`` as the whole projection (one run; the other runs dropped)."""
        self.runs.stage_replace(commit, view, self._stamped(rows, version))

    def _stamped(self, rows: Any, version: int) -> Any:  # a DataFrame, or spilled rows
        return rows.select(*self.schema, pl.lit(version, dtype=pl.Int64).alias(VERSION))
