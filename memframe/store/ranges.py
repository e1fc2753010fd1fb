"""The rows of a generation, one range of capsule numbers at a time.

Every row a capsule's state folds names its capsule number, so the state of a range of
numbers depends only on the rows naming them. A path that reads every capsule's state
(the cold digest, ``verify="full"``, the rebuild, the audits) reads it a range at a time:
the other tables narrowed once to the columns the fold reads, sorted by number (a range
is then a slice), and the ``capsules`` rows read from the partitions whose numbers meet
the range. The range size comes from the memory budget (`memframe.budget`), so the peak
follows a range, not the store.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import polars as pl

from memframe import budget, progress
from memframe.frames import slice_between
from memframe.ids import capsule_number_expr
from memframe.state import KEY, SOURCE_KEY, SOURCES, fold_terms

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView

__all__ = ["FOLD_RANGE", "range_size", "range_sources"]


#: capsules per range with no memory budget (benchmarks/bench_digest.py --cold-warm, 10M)
FOLD_RANGE = 500_000


def range_size(view: StoreView, default: int | None = None) -> int:
    """Capsules per range at ``view``: ``default`` (`FOLD_RANGE`), or fewer under a memory
    budget."""
    narrow = sum(p.rows for name in SOURCES if name != "capsules" for p in view.partitions(name))
    return budget.fold_range(FOLD_RANGE if default is None else default, narrow,
                             sum(p.rows for p in view.partitions("capsules")))


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


def range_sources(view: StoreView, names: Sequence[str],
                  capsule_columns: Sequence[str | pl.Expr], default: int | None = None
                  ) -> Iterator[tuple[dict[str, pl.LazyFrame | pl.DataFrame], int]]:
    """The rows of sources ``names`` at ``view`` that name one range of capsule numbers
    (`range_size` of ``default``), range by range, with the Parquet rows read for it:
    every other table narrowed once to the fold's columns and sliced, the ``capsules``
    rows (as ``capsule_columns``) read from the partitions meeting the range. The first
    range's count includes the narrowing pass and the ``id`` pass. A bar per
    range (`memframe.progress`)."""
    bounds, spans = _capsule_spans(view, range_size(view, default))
    visited = sum(p.rows for p in view.partitions("capsules"))  # the ``id`` pass
    narrow: dict[str, pl.DataFrame] = {}
    for name in names:
        if name != "capsules" and view.partitions(name):
            visited += sum(p.rows for p in view.partitions(name))
            narrow[name] = _narrow(view, name)
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
                                   .select(*capsule_columns))
        yield sources, visited
        visited = 0
        bar.update()
    bar.close()
