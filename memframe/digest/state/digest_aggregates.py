"""The digest's aggregates and archive instants, kept beside the state.

Each capsule *contributes* rows to the aggregates (per-project counts, tier counts,
coverage misses, archive instants: ``projections/digest_aggregates``); a change subtracts
the old row's contribution and adds the new one's, so the sums stay exact. The archive
candidates are kept by the instant each becomes one, with a running total
(``projections/digest_archive``), so any ``now`` is answered from the one row group
holding it (`archive_at`).
"""

from __future__ import annotations

import bisect
import functools
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.schema import STALE_AFTER_NS, TIMESTAMP, empty_of
from memframe.state import KEY, alive_expr, has_base, population_expr

if TYPE_CHECKING:
    from memframe.store import StoreView


AGG_TABLE = "projections/digest_aggregates"
AGG_SCHEMA = pl.Schema({"metric": pl.String(), "key": pl.String(), "at": TIMESTAMP,
                        "n": pl.Int64()})
_I64_MAX = 2**63 - 1


def _plus_ns(column: str, ns: int) -> pl.Expr:
    """``column + ns`` as an instant, or null where the sum is past the last instant a
    nanosecond timestamp holds (no ``now`` ever reaches it: never, rather than a wrapped
    instant in 1677)."""
    epoch = pl.col(column).dt.epoch("ns")
    return pl.when(epoch <= _I64_MAX - ns).then(epoch + ns).cast(TIMESTAMP)


@functools.cache
def _archive_instant() -> pl.Expr:
    """When a superseded, active, unpinned, non-suspect capsule becomes an archive
    candidate: ``valid_to < now`` from ``valid_to + 1ns``, ``now - created_at >= 181 days``
    with no recall from ``created_at + 181 days`` (the earlier of the two; null when both
    are past the instant range: never)."""
    expired = _plus_ns("valid_to", 1)
    stale = pl.when(pl.col("recall_count").fill_null(0) == 0).then(
        _plus_ns("created_at", STALE_AFTER_NS))
    return pl.min_horizontal(expired, stale).cast(TIMESTAMP)


def contributions(rows: pl.DataFrame | pl.LazyFrame, sign: int = 1) -> pl.LazyFrame:
    """What state rows add to the aggregates (``sign=-1``: what removing them takes away).

    Examples:
        >>> import datetime as dt, polars as pl
        >>> from memframe.state import STATE_SCHEMA
        >>> t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> rows = pl.DataFrame({"num": [1], "seq": [1], "project_id": ["p"],
        ...     "created_at": [t], "superseded": [False], "named": [True]},
        ...     schema_overrides={}).select(
        ...     [pl.col(c) if c in ("num", "seq", "project_id", "created_at", "superseded",
        ...      "named") else pl.lit(None).cast(d).alias(c) for c, d in STATE_SCHEMA.items()])
        >>> contributions(rows).collect().sort("metric").select("metric", "key", "n").rows()
        [('count', 'p', 1), ('live', 'p', 1), ('tier', 'active', 1)]
    """
    return pl.concat(_metric_pieces(rows.lazy(), sign), how="vertical")


def _metric_pieces(frame: pl.LazyFrame, sign: int) -> list[pl.LazyFrame]:
    # (a column rides along: a select of literals alone would not follow the filter)
    return [frame.filter(when).select(pl.col(KEY), key, at)
            .group_by("key", "at").agg((pl.len().cast(pl.Int64) * sign).alias("n"))
            .select(pl.lit(name).alias("metric"), "key", "at", "n")
            for name, key, when, at in _metrics()]


@functools.cache
def _metrics() -> tuple[tuple[str, pl.Expr, pl.Expr, pl.Expr], ...]:
    """The aggregates' metrics: (name, key, which state rows count, at), built once."""
    alive, pop = alive_expr(), population_expr()
    superseded = pl.col("superseded").fill_null(False)
    tier = pl.col("tier").fill_null("active")
    none = pl.lit(None, dtype=TIMESTAMP)
    archive = (alive & superseded & ~pl.col("pinned").fill_null(False) & (tier == "active")
               & ~pl.col("guarded").fill_null(False))
    return tuple((name, key.cast(pl.String).alias("key"), when.fill_null(False),
                  at.cast(TIMESTAMP).alias("at")) for name, key, when, at in (
        ("count", pl.col("project_id"), pop, none),
        ("live", pl.col("project_id"), pop & ~superseded, none),
        ("recalled", pl.col("project_id"), pop & pl.col("last_recalled_at").is_not_null(), none),
        ("tier", tier, alive, none),
        ("oob", pl.lit(""), has_base() & (
            (alive & ~pl.col("named").fill_null(False))
            | (~alive & ~pl.col("forget_named").fill_null(False))), none),
        ("archive", pl.lit(""), archive & _archive_instant().is_not_null(),
         _archive_instant()),
    ))


def aggregates_of(rows: pl.DataFrame) -> pl.DataFrame:
    """The aggregates of state rows, one metric at a time (bounded memory)."""
    return merge_aggregates(*(piece.collect(engine="streaming")
                              for piece in _metric_pieces(rows.lazy(), 1)))


def merge_aggregates(*frames: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """Sum aggregate rows by (metric, key, at); rows summing to zero are dropped."""
    lazy = [f.lazy() for f in frames]
    if not lazy:
        return empty_of(AGG_SCHEMA)
    return (pl.concat(lazy, how="vertical").group_by("metric", "key", "at")
            .agg(pl.col("n").sum()).filter(pl.col("n") != 0)
            .sort("metric", "key", "at", nulls_last=False)
            .select(list(AGG_SCHEMA)).collect(engine="in-memory"))


#: the archive candidates by instant: one row per instant at which some become candidates,
#: sorted by instant, with the running total, so "how many at ``now``" reads one row group
ARCHIVE_TABLE = "projections/digest_archive"
ARCHIVE_SCHEMA = pl.Schema({"at": TIMESTAMP, "n": pl.Int64(), "cum": pl.Int64()})
ARCHIVE_GROUP_ROWS = 64


def archive_rows(stored: pl.DataFrame | None, changes: pl.DataFrame) -> pl.DataFrame:
    """Stored archive rows plus aggregate ``archive`` rows (unsummed changes) -> the
    archive table: summed by instant, zero sums dropped, sorted, with the running total.

    Examples:
        >>> import datetime as dt
        >>> t = [dt.datetime(2026, 1, d, tzinfo=dt.UTC) for d in (1, 2)]
        >>> ch = pl.DataFrame({"metric": ["archive"] * 3, "key": [""] * 3,
        ...                    "at": [t[1], t[0], t[1]], "n": [1, 2, 1]},
        ...                   schema_overrides={"at": TIMESTAMP})
        >>> archive_rows(None, ch).select("n", "cum").rows()
        [(2, 2), (2, 4)]
    """
    pieces = [changes.select("at", "n")]
    if stored is not None and stored.height:
        pieces.append(stored.select("at", "n"))
    return (pl.concat(pieces, how="vertical").group_by("at").agg(pl.col("n").sum())
            .filter(pl.col("n") != 0).sort("at")
            .with_columns(pl.col("n").cum_sum().alias("cum")).select(list(ARCHIVE_SCHEMA)))


def archive_at(view: StoreView, now: Any) -> tuple[int, int]:
    """The stored archive candidates at ``now`` (instant at or before it) and the Parquet
    rows read: the running total of the last instant at or before ``now``, read from the
    one row group holding it (found by bisecting the row groups' first instants: the
    rows were sorted before they were split)."""
    now_ns = pl.Series([now]).cast(TIMESTAMP).cast(pl.Int64).item()
    read = 0
    for part in reversed(view.partitions(ARCHIVE_TABLE)):
        mins, _maxs, counts = view.row_group_ranges(part, "at", physical=True)
        if None in mins:  # no statistics: every group, last first
            candidates = list(range(len(mins) - 1, -1, -1))
        else:  # the last group starting at or before now
            last = bisect.bisect_right(mins, now_ns) - 1
            candidates = [last] if last >= 0 else []
        for g in candidates:
            read += counts[g]
            rows = view.read_row_groups(part, [g], ARCHIVE_SCHEMA).filter(
                pl.col("at") <= pl.lit(now).cast(TIMESTAMP))
            if rows.height:
                return int(rows.get_column("cum").tail(1).item()), read
    return 0, read
