"""The capsule state of a whole generation, one range of capsule numbers at a time.

An audit that reads every capsule's state (the vocabulary of live content, the capsules
never recalled) takes it range by range, as the cold digest folds (`memframe.store.ranges`):
the events of a capsule name its number, so a range's state depends only on the rows
naming its numbers, and the peak follows a range (its size set by the memory budget), not
the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import polars as pl

from memframe.schema import table_schema
from memframe.state import STATE_SOURCES, capsule_state
from memframe.store.ranges import range_size, range_sources

__all__ = ["capsule_state_ranges"]


def capsule_state_ranges(view: Any, columns: Sequence[str], where: pl.Expr | None = None
                         ) -> Iterator[pl.DataFrame]:
    """``view.capsule_state()``'s rows that match ``where``, as ``columns``, one frame per
    range of capsule numbers (ranges in number order, rows in ``seq`` order within one).

    Only the capsule columns named (and ``id``, ``seq``) are read. A memory budget
    (`memframe.budget`) sizes the ranges; one the smallest range cannot fit raises
    `MemoryBudgetError` at the call, before anything is read.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([{"content": t, "source": "s", "anchor": "a"}
        ...                      for t in ("old", "new")])
        >>> store.relate(b, a, "supersedes")
        >>> live = pl.col("status") == "live"
        >>> [f.rows() for f in capsule_state_ranges(store.pinned(), ["id", "content"], live)]
        [[('cap-2', 'new')]]
    """
    range_size(view)  # a budget the smallest range cannot fit is refused now, before a read
    return _ranges(view, columns, where)


def _ranges(view: Any, columns: Sequence[str], where: pl.Expr | None
            ) -> Iterator[pl.DataFrame]:
    stored = table_schema("capsules")
    named = set(columns) | (set(where.meta.root_names()) if where is not None else set())
    read = ["id", "seq", *sorted(c for c in named if c in stored and c not in ("id", "seq"))]
    for sources, _read in range_sources(view, STATE_SOURCES, read):
        if "capsules" not in sources:
            continue  # events of numbers no capsule has: no state row
        tables = {name: sources.get(name, view.table(name)) for name in STATE_SOURCES}
        state = capsule_state(tables)
        yield (state if where is None else state.filter(where)).select(columns).collect()
