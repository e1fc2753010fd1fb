"""The cold fold: a `WarmState` from every source row, trusting nothing stored.

`fold_warm` folds the rows of one range of capsule numbers at a time
(`memframe.store.ranges`: every partial is keyed by its number, so a range's state rows
depend only on the rows naming its numbers) and reduces each range to what the digest
reads before folding the next: the peak follows a range, not the store. The rebuild
(`capsule_job.stage_rebuild`) and ``verify="full"`` fold the same way.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from memframe.digest.state import (
    digest_aggregates,
    digest_capsules,
    digest_leaders,
    digest_subset,
    warm_reader,
)
from memframe.frames import own
from memframe.schema import empty_of
from memframe.state import KEY, SOURCES, STATE_SCHEMA, fold_state
from memframe.store.ranges import range_size, range_sources

if TYPE_CHECKING:
    from memframe.store import StoreView

__all__ = ["range_size", "fold_ranges", "fold_warm", "DIGEST_RANGE"]

#: capsules per range of the digest's own fold with no budget: it keeps only each range's
#: aggregates and candidates, so it takes larger ranges than `FOLD_RANGE`, which the
#: rebuild (a range's stored rows, spilled) and the audits (a range's content) keep
#: (10M: 49 s and 1.3 GB, against 55 s and 1.1 GB in ranges of 500,000)
DIGEST_RANGE = 1_000_000


def fold_ranges(view: StoreView, tops: tuple[warm_reader.TopRequest, ...] | None,
                keep: Callable[[pl.DataFrame], None] | None = None, default: int | None = None
                ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """Fold every source row range by range of capsule numbers (`range_sources`) and
    keep of each range its aggregates, its subset rows and, given ``tops``, the first N
    rows of each request (the first N of the whole are among them); ``keep`` is handed each
    range's state rows; with neither, every state row is kept. ``default``: the range
    size with no budget (`FOLD_RANGE`). Returns the aggregates, the subset, the rows kept
    and the Parquet rows read."""
    aggregates: list[pl.DataFrame] = []
    subset: list[pl.DataFrame] = []
    kept: list[pl.DataFrame] = []
    visited = 0
    for sources, read in range_sources(view, list(SOURCES),
                                       digest_capsules.source_columns("capsules"), default):
        visited += read
        rows = fold_state(sources, engine="streaming")
        del sources
        aggregates.append(own(digest_aggregates.aggregates_of(rows)))
        subset.append(own(rows.filter(digest_subset.subset_expr())))
        if keep is not None:
            keep(rows)
        if tops is None and keep is None:
            kept.append(rows)
        elif tops is not None:
            kept.extend(own(digest_leaders.first_rows(rows, n, order, where))
                        for n, order, where in tops if n > 0)
        del rows
    merged = pl.concat(kept, how="vertical") if kept else empty_of(STATE_SCHEMA)
    if tops is not None:  # a row may be a candidate of several requests
        merged = merged.unique(KEY, keep="first", maintain_order=True)
    return (digest_aggregates.merge_aggregates(*aggregates), pl.concat(subset, how="vertical"),
            merged, visited)


def fold_warm(view: StoreView, tops: tuple[warm_reader.TopRequest, ...] | None = None
              ) -> tuple[warm_reader.WarmState, dict[str, pl.LazyFrame]]:
    """A `WarmState` folded now from every source row at ``view``, trusting nothing
    stored (the cold digest): `fold_state` folds the rows of one range of `DIGEST_RANGE`
    capsule numbers (fewer under a budget) at a time (the streaming engine over narrow
    column groups), and each range is reduced to its aggregates, its subset rows and the
    candidates of the top-N requests ``tops`` (`WarmState.top_rows`; None keeps every
    state row) before the next is folded. Also returns the source rows (lazily) for the digest's fail-closed checks.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> from memframe.state import population_expr
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"}
        ...                   for i in range(3)])
        >>> newest = (1, "newest", population_expr())
        >>> warm, _sources = fold_warm(store.pinned(), (newest,))
        >>> warm.top_rows(population_expr(), 1, "newest").get_column("num").to_list()
        [3]
    """
    sources, _visited, _top = digest_capsules.scan_all(view)
    aggregates, subset, merged, visited = fold_ranges(view, tops, default=DIGEST_RANGE)
    return (warm_reader.WarmState(view, aggregates, subset, pl.Series(KEY, [], dtype=pl.Int64),
                                  merged, visited, in_memory=True, tops=tops), sources)
