"""The cold fold: a `WarmState` from every source row, trusting nothing stored.

`fold_warm` folds the rows of one range of capsule numbers at a time (`range_size`: every
partial is keyed by its number, so a range's state rows depend only on the rows naming
its numbers) and reduces each range to what the digest reads before folding the next:
the peak follows a range, not the store. The rebuild (`capsule_job.stage_rebuild`) and
``verify="full"`` fold the same way.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from memframe import budget, progress
from memframe.digest.state import (
    digest_aggregates,
    digest_capsules,
    digest_leaders,
    digest_subset,
    warm_reader,
)
from memframe.frames import own, slice_between
from memframe.ids import capsule_number_expr
from memframe.schema import empty_of
from memframe.state import KEY, SOURCE_KEY, SOURCES, STATE_SCHEMA, fold_state, fold_terms

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView


#: capsules per range with no memory budget (benchmarks/bench_digest.py --cold-warm, 10M)
FOLD_RANGE = 500_000


def range_size(view: StoreView) -> int:
    """Capsules per range at ``view``: ``FOLD_RANGE``, or fewer under a memory budget."""
    narrow = sum(p.rows for name in SOURCES if name != "capsules" for p in view.partitions(name))
    return budget.fold_range(FOLD_RANGE, narrow, sum(p.rows for p in view.partitions("capsules")))


def _fold_inputs(name: str) -> list[str]:
    """The columns of source ``name`` the fold reads, beside its key column."""
    columns, keep, _terms, _has = fold_terms()[name]
    names = {n for expr in [*columns.values(), keep] for n in expr.meta.root_names()}
    return sorted(names - {SOURCE_KEY.get(name, "capsule_id")})


def _narrow(view: StoreView, name: str) -> pl.DataFrame:
    """Every row of source ``name`` that the fold keeps, narrowed to its capsule number
    and the columns the fold reads (one streaming pass), sorted by number (a range of
    numbers is then a slice); their text columns (kinds, tiers, modes, actions, verdicts:
    a few values each; not ids) held as categoricals, which the fold's partials cast
    back to text."""
    _columns, keep, _terms, _has = fold_terms()[name]
    key = SOURCE_KEY.get(name, "capsule_id")
    scan = view.scan_partitions(name, view.partitions(name))
    schema = scan.collect_schema()
    # ids (a part_of edge's from-id: read as text by the fold) stay text: nearly every
    # value is distinct, and the fold parses them
    inputs = [pl.col(c).cast(pl.Categorical)
              if schema[c] == pl.String and not c.endswith("_id") else pl.col(c)
              for c in _fold_inputs(name)]
    return (scan.filter(keep).select(capsule_number_expr(key).alias(KEY), *inputs)
            .filter(pl.col(KEY).is_not_null()).sort(KEY).collect(engine="streaming"))


def _capsule_spans(view: StoreView, size: int
                   ) -> tuple[list[int], list[tuple[Partition, int, int]]]:
    """The first capsule number of each range after the first (every ``size``-th
    number of the capsules table, sorted) and the span of numbers of each ``capsules``
    partition (a range reads only the partitions whose span meets it). One pass over the
    ``id`` column."""
    parts = list(view.partitions("capsules"))
    if not parts:
        return [], []
    # the in-memory engine: the rows in the order of the files, as the spans read them
    nums = (view.scan_partitions("capsules", parts).select(capsule_number_expr("id").alias(KEY))
            .collect(engine="in-memory").get_column(KEY))
    spans: list[tuple[Partition, int, int]] = []
    if nums.len() == sum(p.rows for p in parts):  # the files' rows, in the log's order
        offset = 0
        for part in parts:
            piece = nums.slice(offset, part.rows).drop_nulls()
            offset += part.rows
            if piece.len():
                spans.append((part, int(piece.min()), int(piece.max())))  # type: ignore[arg-type]
    else:  # not what the log says: every range reads every partition
        spans = [(part, -(2**63), 2**63 - 1) for part in parts]
    ordered = nums.drop_nulls().sort()
    bounds = ordered.gather_every(size).slice(1).unique(maintain_order=True).to_list()
    return bounds, spans


def fold_ranges(view: StoreView, tops: tuple[warm_reader.TopRequest, ...] | None,
                keep: Callable[[pl.DataFrame], None] | None = None
                ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """Fold every source row range by range of capsule numbers (the module docstring) and
    keep of each range its aggregates, its subset rows and, given ``tops``, the first N
    rows of each request (the first N of the whole are among them); ``keep`` is handed each
    range's state rows; with neither, every state row is kept. Returns the aggregates, the
    subset, the rows kept and the Parquet rows read (a bar per range: `memframe.progress`)."""
    bounds, spans = _capsule_spans(view, range_size(view))
    visited = sum(p.rows for p in view.partitions("capsules"))  # the ``id`` pass
    narrow: dict[str, pl.DataFrame] = {}
    for name in SOURCES:
        if name != "capsules" and view.partitions(name):
            visited += sum(p.rows for p in view.partitions(name))
            narrow[name] = _narrow(view, name)
    aggregates: list[pl.DataFrame] = []
    subset: list[pl.DataFrame] = []
    kept: list[pl.DataFrame] = []
    edges: list[int | None] = [None, *bounds, None]
    bar = progress.bar(len(edges) - 1, "fold", "range")
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sources: dict[str, pl.LazyFrame | pl.DataFrame] = {
            name: slice_between(frame, KEY, lo, hi) for name, frame in narrow.items()}
        parts = [p for p, first, last in spans
                 if (lo is None or last >= lo) and (hi is None or first < hi)]
        if parts:
            visited += sum(p.rows for p in parts)
            sources["capsules"] = (view.scan_partitions("capsules", parts)
                                   .filter(capsule_number_expr("id").is_between(
                                       -(2**63) if lo is None else lo,
                                       2**63 - 1 if hi is None else hi, closed="left"))
                                   .select(digest_capsules.source_columns("capsules")))
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
        bar.update()
    bar.close()
    merged = pl.concat(kept, how="vertical") if kept else empty_of(STATE_SCHEMA)
    if tops is not None:  # a row may be a candidate of several requests
        merged = merged.unique(KEY, keep="first", maintain_order=True)
    return (digest_aggregates.merge_aggregates(*aggregates), pl.concat(subset, how="vertical"),
            merged, visited)


def fold_warm(view: StoreView, tops: tuple[warm_reader.TopRequest, ...] | None = None
              ) -> tuple[warm_reader.WarmState, dict[str, pl.LazyFrame]]:
    """A `WarmState` folded now from every source row at ``view``, trusting nothing
    stored (the cold digest): `fold_state` folds the rows of one range of ``FOLD_RANGE``
    capsule numbers at a time (the streaming engine over narrow column groups), and each
    range is reduced to its aggregates, its subset rows and the candidates of the top-N
    requests ``tops`` (`WarmState.top_rows`; None keeps every state row) before the next
    is folded. Also returns the source rows (lazily) for the digest's fail-closed checks.

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
    aggregates, subset, merged, visited = fold_ranges(view, tops)
    return (warm_reader.WarmState(view, aggregates, subset, pl.Series(KEY, [], dtype=pl.Int64),
                                  merged, visited, in_memory=True, tops=tops), sources)
