"""Capsule state at a generation: one row per capsule, derived by exact folds.

The reference engine keeps mutable side tables (usage, classifications, tiers,
tombstones); memframe appends events and folds them here: recall_count is a sum,
last_recalled_at a max, kind and tier the latest row by seq, and any forget row
tombstones its capsule.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

__all__ = ["capsule_state", "latest_by_seq", "STATUSES"]

STATUSES = ("live", "superseded", "tombstoned")


def latest_by_seq(frame: pl.LazyFrame, *keys: str) -> pl.LazyFrame:
    """Keep, per key, the row with the highest ``seq`` (the "latest row wins" fold).

    Examples:
        >>> import polars as pl
        >>> f = pl.LazyFrame({"seq": [1, 2, 3], "k": ["a", "a", "b"], "v": [10, 20, 30]})
        >>> latest_by_seq(f, "k").sort("k").collect()["v"].to_list()
        [20, 30]
    """
    return frame.filter(pl.col("seq") == pl.col("seq").max().over(list(keys)))


def capsule_state(tables: Mapping[str, pl.LazyFrame]) -> pl.LazyFrame:
    """One row per capsule: its columns plus status, usage, kind and effective tier.

    Args:
        tables: the canonical tables at one generation (name -> LazyFrame), as
            ``Store.tables()`` returns them.

    Returns:
        A LazyFrame in ``seq`` order with the capsule columns and ``status``
        (live / superseded / tombstoned), ``superseded`` (bool, also for
        tombstoned capsules), ``forget_mode``, ``recall_count``,
        ``last_recalled_at``, ``kind``, ``scope`` and ``tier``.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([
        ...     {"content": "old", "source": "note", "anchor": "a"},
        ...     {"content": "new", "source": "note", "anchor": "a"}])
        >>> store.relate(b, a, "supersedes")
        >>> store.capsule_state().select("id", "status").collect().rows()
        [('cap-1', 'superseded'), ('cap-2', 'live')]
    """
    capsules = tables["capsules"]
    superseded = (
        tables["relations"]
        .filter(pl.col("kind") == "supersedes")
        .select(pl.col("to_id").alias("id"))
        .unique()
        .with_columns(pl.lit(True).alias("superseded"))
    )
    forgets = (
        latest_by_seq(tables["forgets"], "capsule_id")
        .select(pl.col("capsule_id").alias("id"), pl.col("mode").alias("forget_mode"))
    )
    usage = (
        tables["recalls"]
        .group_by("capsule_id")
        .agg(
            pl.col("count").sum().alias("recall_count"),
            pl.col("at").max().alias("last_recalled_at"),
        )
        .rename({"capsule_id": "id"})
    )
    kinds = (
        latest_by_seq(tables["classifications"], "capsule_id")
        .select(pl.col("capsule_id").alias("id"), "kind", "scope")
    )
    tiers = (
        latest_by_seq(tables["tiers"], "capsule_id")
        .select(pl.col("capsule_id").alias("id"), "tier")
    )
    return (
        capsules.join(superseded, on="id", how="left")
        .join(forgets, on="id", how="left")
        .join(usage, on="id", how="left")
        .join(kinds, on="id", how="left")
        .join(tiers, on="id", how="left")
        .with_columns(
            pl.col("superseded").fill_null(False),
            pl.col("recall_count").fill_null(0),
            pl.col("tier").fill_null("active"),
        )
        .with_columns(
            pl.when(pl.col("forget_mode").is_not_null())
            .then(pl.lit("tombstoned"))
            .when(pl.col("superseded"))
            .then(pl.lit("superseded"))
            .otherwise(pl.lit("live"))
            .alias("status")
        )
        .sort("seq")
    )
