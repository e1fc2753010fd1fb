"""The digest's subset: the state rows the handoff, mission, unanchored, pinned and
open-effort sections can name, kept so that a warm digest never reads the bulk of the rows.

Versioned runs like the state's (``projections/digest_subset/T<k>``; ``member = false``: a
former member, read as absent), holding no text; the members' labels and headlines live in
a table of their own (``projections/text/digest_subset``). ``projections/digest/subset`` is
the watermark of the last cycle that changed the subset: what is kept from the subset
(`memframe.digest.state.sections`) is current while it holds.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import polars as pl

from memframe.derived import keyed, read_whole
from memframe.digest.state import digest_capsules
from memframe.state import KEY, STATE_SCHEMA, STORED_SCHEMA, TEXT, has_base

if TYPE_CHECKING:
    from memframe.store import StoreView


#: the watermark of the last cycle that changed the subset (wrote a subset row): what is
#: kept from the subset (`memframe.digest.state.sections`) is current while it holds
SUBSET_MARK = "projections/digest/subset"
SUBSET = "digest_subset"
SUBSET_SCHEMA = pl.Schema({**STORED_SCHEMA, "member": pl.Boolean()})


#: the subset members' text (`TEXT`), in a table of its own: appended to as capsules join
#: the subset; an erasure writes it again without the erased capsules' rows (keyed by
#: `KEY`: `memframe.store.derived.TEXT_KEY`), so a member may have no row (unknown text)
SUBSET_TEXT = "projections/text/digest_subset"
TEXT_SCHEMA = pl.Schema({KEY: pl.Int64(), **{c: pl.String() for c in TEXT}})
#: parts the text table may hold before a cycle writes it again as one
TEXT_PARTS = 16


@functools.cache
def subset_expr() -> pl.Expr:
    """Is a state row in the subset (see above)?"""
    return has_base() & (
        pl.col("bracket").fill_null(False)
        | (pl.col("threaded").fill_null(False) & ~pl.col("erased").fill_null(False))
        | pl.col("kind").is_in(["epic", "task"]).fill_null(False)
        | pl.col("pinned").fill_null(False)
    )


def subset_runs() -> keyed.KeyedRuns:
    """Where the subset rows live (``member`` False: a former member, read as absent);
    no text, as the state's runs."""
    return keyed.KeyedRuns(f"projections/{SUBSET}", SUBSET_SCHEMA, KEY,
                           row_group_rows=digest_capsules.ROW_GROUP_ROWS)


def read_subset(view: StoreView) -> tuple[pl.DataFrame, int]:
    """The stored subset rows (members only) with their text where it is kept (unknown,
    null, after an erasure dropped it), and the Parquet rows read."""
    rows, visited = subset_runs().read_all(view)
    rows = rows.filter(pl.col("member")).select(list(STORED_SCHEMA))
    if not view.partitions(SUBSET_TEXT) or not rows.height:
        return digest_capsules.with_text(rows), visited
    text, n = read_whole(view, SUBSET_TEXT, TEXT_SCHEMA)
    return (rows.join(text.unique(KEY, keep="last"), on=KEY, how="left", maintain_order="left")
            .select(*STATE_SCHEMA), visited + n)


def subset_changes(rows: pl.DataFrame, old: pl.DataFrame | None) -> pl.DataFrame:
    """Subset rows to write for changed state rows: members, and former members leaving."""
    now_in = rows.with_columns(subset_expr().alias("member"))
    if old is not None and old.height:
        was = old.filter(subset_expr()).select(KEY)
        now_in = now_in.filter(pl.col("member") | pl.col(KEY).is_in(was[KEY].implode()))
    else:
        now_in = now_in.filter(pl.col("member"))
    return now_in.select(list(SUBSET_SCHEMA))
