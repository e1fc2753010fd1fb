"""The leaders: the first rows of the newest and most-recalled lists, kept.

Per list, the ``LEADERS_K`` qualifying rows ranking first and a *floor* ranking at least
as high as every row left out (none: the list is complete), in
``projections/text/digest_leaders`` with the text of their entries. A digest replaces the
entries touched since the watermark by their current rows and takes the first N when the
N-th ranks above the floor (`leaders_first`); else it reads the state's row groups. The
job keeps the table from the changed rows (`update_leaders`) and refills it from every row
when a list runs low (`leaders_of`). The lists' orders and the ranking of rows in them
(`ORDERS`, `first_rows`) live here too.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import read_whole
from memframe.state import KEY, STATE_SCHEMA, TEXT, population_expr

if TYPE_CHECKING:
    from memframe.store import StoreView


#: (the leaders keep the text of their entries, which a digest emits as they are: under
#: the text prefix, so an erasure writes them again without the erased capsules' rows,
#: which the digest reads as touched rows anyway)
LEADERS = "projections/text/digest_leaders"
#: rows kept per list (a digest with N above it reads the state's row groups instead)
LEADERS_K = 256
LEADERS_SCHEMA = pl.Schema({**STATE_SCHEMA, "list": pl.String(), "floor": pl.Boolean()})
#: rows in a list's first row group: a digest reads a list's first groups, until its first
#: N are certain; the next groups double (16, 16, 32, 64...), so a full list (`LEADERS_K`
#: rows and its floor) is 6 groups, not 17, to write every cycle and to read whole
LEADERS_GROUP_ROWS = 16
ORDERS: dict[str, tuple[list[str], list[bool]]] = {
    "newest": (["seq"], [True]),
    "recalled": (["recall_count", "last_recalled_at", "seq"], [True, True, False]),
}


def first_rows(rows: pl.DataFrame, n: int, order: str, keep: pl.Expr | None = None
           ) -> pl.DataFrame:
    """The first ``n`` rows (satisfying ``keep``) in ``order`` (every key is total: seq
    is unique). Only the ordering columns of the candidates are ranked and the rows
    gathered at the end: a cold range's rows are wide, and filtering them would copy
    them (measured: +110 MiB at the 10M cold digest's peak)."""
    by, descending = ORDERS[order]
    top = (rows.lazy().select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_i"), *by,
                              (keep if keep is not None else pl.lit(True)).alias("_keep"))
           .filter(pl.col("_keep")).top_k(n, by=by, reverse=[not d for d in descending])
           .sort(by, descending=descending).collect(engine="in-memory"))  # one query
    return rows[top.get_column("_i").to_list()] if top.height else rows.clear()


@functools.cache
def qualifies_expr(order: str) -> pl.Expr:
    """Can a state row appear in list ``order`` (before any fence)?"""
    keep = population_expr()
    return keep & pl.col("last_recalled_at").is_not_null() if order == "recalled" else keep


def _ranks_above(order: str, floor: Mapping[str, Any]) -> pl.Expr:
    """Does a row rank strictly before ``floor`` in list ``order``?"""
    by, descending = ORDERS[order]
    above = pl.lit(False)
    tied = pl.lit(True)
    for column, desc in zip(by, descending, strict=True):
        value = pl.lit(floor[column], dtype=STATE_SCHEMA[column])
        better = pl.col(column) > value if desc else pl.col(column) < value
        above = above | (tied & better.fill_null(False))
        tied = tied & (pl.col(column) == value).fill_null(False)
    return above


def _ranked(rows: pl.DataFrame, order: str) -> pl.DataFrame:
    by, descending = ORDERS[order]
    return rows.sort(by, descending=descending, nulls_last=True)


def _list_rows(rows: pl.DataFrame, order: str, floor: pl.DataFrame) -> pl.DataFrame:
    # a floor is never emitted: it keeps no text (and none an erasure would have to
    # remove), and names no capsule: it stands for a rank (its order's columns), so the
    # erasure of the capsule it was taken from, which drops that capsule's rows, keeps it
    tagged = pl.concat([
        rows.select(list(STATE_SCHEMA)).with_columns(pl.lit(False).alias("floor")),
        floor.select(list(STATE_SCHEMA)).with_columns(
            [pl.lit(None, dtype=pl.String).alias(c) for c in TEXT]).with_columns(
            pl.lit(None, dtype=pl.Int64).alias(KEY), pl.lit(True).alias("floor")),
    ], how="vertical")
    return tagged.select(pl.lit(order).alias("list"), pl.all()).select(list(LEADERS_SCHEMA))


def group_sizes(leaders: pl.DataFrame) -> tuple[int, ...]:
    """The row groups of a leaders table (`memframe.store.tables.write_part`): per list,
    in the order stored, ``LEADERS_GROUP_ROWS`` rows, then each group as large as the
    list's groups before it (16, 16, 32, 64...): no group holds rows of two lists, and a
    list's first rows are in its small groups.

    Examples:
        >>> t = pl.DataFrame({"list": ["newest"] * 40 + ["recalled"] * 3})
        >>> group_sizes(t)
        (16, 16, 8, 3)
    """
    sizes: list[int] = []
    for length in leaders.get_column("list").rle().struct.field("len").to_list():
        done = 0
        while done < length:  # each group as large as the list's groups before it
            sizes.append(min(max(LEADERS_GROUP_ROWS, done), length - done))
            done += sizes[-1]
    return tuple(sizes) or (LEADERS_GROUP_ROWS,)


def leaders_of(rows: pl.DataFrame, k: int | None = None) -> pl.DataFrame:
    """The leaders table of every state row (`LEADERS_K` per list, and each floor).

    Examples:
        >>> from memframe.state import STATE_DEFAULTS
        >>> rows = pl.DataFrame([{"num": i, "seq": i} for i in (1, 2, 3)]).select(
        ...     [pl.col(c) if c in ("num", "seq") else pl.lit(STATE_DEFAULTS.get(c)).cast(d).alias(c)
        ...      for c, d in STATE_SCHEMA.items()])
        >>> t = leaders_of(rows, k=2).filter(pl.col("list") == "newest")
        >>> t.select("num", "seq", "floor").rows()  # the floor: the rank of seq 1
        [(3, 3, False), (2, 2, False), (None, 1, True)]
    """
    k = LEADERS_K if k is None else k
    out = []
    for order in ORDERS:
        ranked = _ranked(rows.filter(qualifies_expr(order)), order)
        out.append(_list_rows(ranked.head(k), order, ranked.slice(k, 1)))
    return pl.concat(out, how="vertical")


def update_leaders(stored: pl.DataFrame, changed: pl.DataFrame, k: int | None = None
                   ) -> pl.DataFrame | None:
    """The leaders after ``changed`` state rows (their current rows), or None when a list
    fell below a quarter of ``k`` above its floor (refill it from every state row)."""
    k = LEADERS_K if k is None else k
    gone = changed.get_column(KEY).implode()
    out = []
    for order in ORDERS:
        mine = stored.filter(pl.col("list") == order)
        floor = mine.filter(pl.col("floor"))
        kept = mine.filter(~pl.col("floor") & ~pl.col(KEY).is_in(gone)).select(
            list(STATE_SCHEMA))
        joining = changed.filter(qualifies_expr(order)).select(list(STATE_SCHEMA))
        if floor.height:
            joining = joining.filter(_ranks_above(order, floor.row(0, named=True)))
        ranked = _ranked(pl.concat([kept, joining], how="vertical"), order)
        trimmed = ranked.slice(k, 1)
        if trimmed.height:  # the best row trimmed ranks above any old floor
            floor = trimmed
        if floor.height and ranked.height < max(1, k // 4):
            return None
        out.append(_list_rows(ranked.head(k), order, floor))
    return pl.concat(out, how="vertical")


def leaders_first(leaders: pl.DataFrame, merged: pl.DataFrame, touched: pl.Series,
                  keep: pl.Expr, n: int, order: str) -> pl.DataFrame | None:
    """The first ``n`` rows satisfying ``keep`` in list ``order``, from the leaders and the
    rows touched since the watermark (``merged``), or None when the leaders cannot prove
    them (the caller reads the state's row groups)."""
    floor = leaders.filter(pl.col("floor"))
    entries = leaders.filter(~pl.col("floor") & ~pl.col(KEY).is_in(touched.implode()))
    candidates = pl.concat([entries.select(list(STATE_SCHEMA)), merged], how="vertical")
    first = first_rows(candidates, n, order, keep & qualifies_expr(order))
    if not floor.height:
        return first  # every qualifying row is at hand
    if first.height < n:
        return None
    # does the n-th rank strictly before the floor?
    above = first.tail(1).select(_ranks_above(order, floor.row(0, named=True))).item()
    return first if above else None


def read_leaders(view: StoreView) -> tuple[pl.DataFrame | None, int]:
    if not view.partitions(LEADERS):
        return None, 0
    return read_whole(view, LEADERS, LEADERS_SCHEMA)
