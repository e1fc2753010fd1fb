"""The earlier layout of the projections: key-sorted levels, newest level first.

The session projection and the digest's state now live in sorted runs
(`memframe.projections.session_rows`, `memframe.projections.keyed`): a level merge read
the next level whole, so a cycle's cost grew with the store every few cycles. This module
stays to read a store written in the level layout until its next cycle or rebuild moves
the rows, and to drop the levels then.

A projection is stored as a few derived tables ``projections/<name>/L<k>`` (k = 0, 1, ...).
Each level is one partition sorted by the projection's key, written with modest row groups
so that a lookup by key reads only the row groups whose min/max statistics can hold it.
A key may have rows in several levels; the row of the lowest level is the current one
(lower levels are always newer). A cycle writes its changed rows into level 0 (rewriting
that small level); when a level outgrows its cap, it is merged into the next one, so a
cycle's cost follows what it changed, with merges amortised geometrically (an LSM tree).
The rebuild door writes the whole projection into one level and drops the others.

Reading goes through a pinned ``StoreView``; writing through a ``Commit``: this module
does no I/O of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit

__all__ = [
    "BASE_CAP",
    "FACTOR",
    "ROW_GROUP_ROWS",
    "level_table",
    "levels",
    "read_all",
    "read_keys",
    "stage_drop",
    "stage_merge",
    "stage_replace",
]

BASE_CAP = 4_096  # rows level 0 may hold; level k holds BASE_CAP * FACTOR**k
FACTOR = 8
ROW_GROUP_ROWS = 64  # a lookup by key reads at most ~this many rows per level and key

_LEVEL = re.compile(r"/L(\d+)$")


def level_table(name: str, k: int) -> str:
    """The derived table of level ``k`` of projection ``name``.

    Examples:
        >>> level_table("session", 0)
        'projections/session/L0'
    """
    return f"projections/{name}/L{k}"


def cap(k: int) -> int:
    return BASE_CAP * FACTOR**k


def levels(view: StoreView, name: str) -> list[int]:
    """The levels of projection ``name`` that hold partitions at ``view``, ascending."""
    prefix = f"projections/{name}/L"
    out = []
    for table in view.derived_names(prefix):
        m = _LEVEL.search(table)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def _newest_wins(frames: Sequence[pl.DataFrame], key: str) -> pl.DataFrame:
    """Rows of several levels (lowest level first) -> one row per key, the lowest level's."""
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames, how="vertical").unique(key, keep="first", maintain_order=True)


def read_level(view: StoreView, name: str, k: int, schema: pl.Schema) -> tuple[pl.DataFrame, int]:
    """Every row of one level and the Parquet rows read (the whole level)."""
    table = level_table(name, k)
    frame = view.derived(table, schema).collect(engine="in-memory")
    return frame, view.row_count(table)


def read_all(view: StoreView, name: str, schema: pl.Schema, key: str) -> tuple[pl.DataFrame, int]:
    """The current rows of the projection (one per key) and the Parquet rows read."""
    frames, visited = [], 0
    for k in levels(view, name):
        frame, n = read_level(view, name, k, schema)
        frames.append(frame)
        visited += n
    out = _newest_wins(frames, key)
    return (out if out.width else pl.DataFrame(schema=schema)), visited


def read_keys(view: StoreView, name: str, schema: pl.Schema, key: str, values: Sequence[str],
              *, full_level0: bool = False) -> tuple[pl.DataFrame, int, pl.DataFrame | None]:
    """The current rows of the given keys, reading only row groups that can hold them.

    Returns the rows, the Parquet rows read and, with ``full_level0``, the whole of
    level 0 (which a cycle rewrites anyway, so it is read once, in full).
    """
    frames, visited, level0 = [], 0, None
    wanted = sorted(set(values))
    for k in levels(view, name):
        if k == 0 and full_level0:
            level0, n = read_level(view, name, 0, schema)
            frames.append(level0.filter(pl.col(key).is_in(wanted)))
        else:
            rows, n = view.read_matching(level_table(name, k), schema, key, wanted)
            frames.append(rows)
        visited += n
    out = _newest_wins(frames, key)
    return (out if out.width else pl.DataFrame(schema=schema)), visited, level0


def stage_drop(commit: Commit, view: StoreView, name: str) -> None:
    """Stage the removal of every level of projection ``name`` (a store moving to runs)."""
    for k in levels(view, name):
        commit.write_derived(level_table(name, k), pl.DataFrame(), replace=True)


def stage_replace(commit: Commit, name: str, rows: pl.DataFrame, key: str, *,
                  row_group_rows: int = ROW_GROUP_ROWS) -> None:
    """Stage ``rows`` as the whole projection (the rebuild): one level, the others dropped."""
    target = 0
    while cap(target) < rows.height:
        target += 1
    for k in levels(commit.view, name):
        if k != target:
            commit.write_derived(level_table(name, k), rows.clear(), replace=True)
    commit.write_derived(level_table(name, target), rows.sort(key), replace=True,
                         row_group_rows=row_group_rows)


def stage_merge(commit: Commit, view: StoreView, name: str, schema: pl.Schema, key: str,
                changed: pl.DataFrame, level0: pl.DataFrame | None, *,
                row_group_rows: int = ROW_GROUP_ROWS) -> int:
    """Stage ``changed`` rows over the projection: into level 0, cascading when full.

    Args:
        commit: the commit to stage on (pinned to ``view``'s generation).
        view: the pinned view the rows were read from.
        name: the projection name.
        schema: the stored row schema.
        key: the key column.
        changed: new or changed rows (one per key), newer than anything stored.
        level0: level 0 as already read (None if it was not read).
        row_group_rows: rows per Parquet row group of the levels written.

    Returns:
        The Parquet rows read to merge (levels read here in full).
    """
    present = set(levels(commit.view, name))
    carry = changed
    visited = 0
    k = 0
    while True:
        if k == 0 and level0 is not None:
            existing = level0
        elif k in present:
            existing, n = read_level(view, name, k, schema)
            visited += n
        else:
            existing = pl.DataFrame(schema=schema)
        merged = _newest_wins([carry, existing], key)
        if merged.height <= cap(k) or k > max(present, default=-1):
            target = k
            while cap(target) < merged.height:  # past the stored levels: the level that fits
                target += 1
            commit.write_derived(level_table(name, target), merged.sort(key), replace=True,
                                 row_group_rows=row_group_rows)
            return visited
        if k in present:
            commit.write_derived(level_table(name, k), merged.clear(), replace=True)
        carry = merged
        k += 1
