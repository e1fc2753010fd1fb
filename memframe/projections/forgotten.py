"""Forgotten members per conversation: what lets a door count live members by key.

``live_count`` is not an exact fold term (a later forget shrinks it), so it is never in a
session row (spec 000, rule 3): the door computes it at read time. Doing that from the
``forgets`` table alone would read every forget and look their capsules up by id. Two
derived indexes keep that lookup bounded by the keys a door names:

* **members** (``projections/session/members/T<k>``): one row per capsule that has a
  conversation, ``(num, conversation_id)`` where ``num`` is the capsule number of
  ``cap-<num>``. Runs are sorted by ``num`` and written with small row groups, so a lookup
  of a few capsule numbers reads only the row groups whose integer statistics hold them.
  New runs land in tier 0; a tier with more than ``TIER_RUNS`` runs is merged into one run
  of the next tier (size-tiered: each row is rewritten a logarithmic number of times).
* **forgotten** (``projections/session_forgotten/L<k>``, the same key-sorted levels as the
  session projection): per conversation, how many of its members are forgotten. Each
  capsule counts once, at its first forget; a count only grows, so it is an exact sum.

Both are advanced by the cycle from one watermark (``projections/session/forgotten``:
the highest ``seq`` of the capsule and forget rows folded, and the session watermark it
was advanced with) and rebuilt by the rebuild door. A door uses them only when that
watermark was advanced with the session projection's own; otherwise it falls back to the
exact read of every forget.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import polars as pl

from memframe import schema as S
from memframe.ids import capsule_number_expr
from memframe.projections import levels
from memframe.store import tables

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit
    from memframe.store.log import Part

__all__ = ["WATERMARK", "NAME", "MEMBERS", "FORGOTTEN_SCHEMA", "MEMBER_SCHEMA",
           "stage_cycle", "stage_rebuild", "forgotten_counts", "usable"]

KEY = "conversation_id"
NAME = "session_forgotten"
MEMBERS = "projections/session/members"
WATERMARK = "projections/session/forgotten"
MEMBER_ROW_GROUP_ROWS = 64
TIER_RUNS = 8

FORGOTTEN_SCHEMA = pl.Schema({KEY: pl.String(), "forgotten": pl.Int64()})
MEMBER_SCHEMA = pl.Schema({"num": pl.Int64(), KEY: pl.String()})
_FORGET_COLUMNS = ["seq", "capsule_id", "mode"]


def _num(expr: pl.Expr) -> pl.Expr:
    return capsule_number_expr(expr)


def tier_table(k: int) -> str:
    return f"{MEMBERS}/T{k}"


def _tiers(view: StoreView) -> list[int]:
    prefix = f"{MEMBERS}/T"
    return sorted(int(t[len(prefix):]) for t, parts in view.snapshot.tables.items()
                  if t.startswith(prefix) and parts and t[len(prefix):].isdigit())


def watermark_of(view: StoreView) -> dict[str, int] | None:
    mark = view.watermarks.get(WATERMARK)
    return {k: int(v) for k, v in mark.items()} if isinstance(mark, dict) else None


def usable(view: StoreView, session_mark: int) -> bool:
    """Were the indexes advanced with the session projection's watermark?"""
    mark = watermark_of(view)
    return mark is not None and mark["session"] == session_mark


# -- reading ---------------------------------------------------------------------------------

def member_conversations(view: StoreView, nums: list[int]) -> tuple[pl.DataFrame, int]:
    """``(num, conversation_id)`` of the given capsule numbers found in the members index."""
    frames, visited = [], 0
    for k in _tiers(view):
        rows, n = read_ints(view, tier_table(k), MEMBER_SCHEMA, "num", nums)
        frames.append(rows)
        visited += n
    if not frames:
        return pl.DataFrame(schema=MEMBER_SCHEMA), visited
    return pl.concat(frames).unique("num"), visited


def read_ints(view: StoreView, table: str, schema: pl.Schema, column: str,
              values: list[int]) -> tuple[pl.DataFrame, int]:
    """Rows whose integer ``column`` is in ``values``, pruning row groups by statistics."""
    wanted = sorted(set(values))
    empty = pl.DataFrame(schema=schema)
    if not wanted:
        return empty, 0
    pieces, visited = [], 0
    for part in view.snapshot.parts(table):
        _meta, mins, maxs, counts = tables.row_group_ranges(view.path / part.path, column)
        groups = []
        for g, (gmin, gmax) in enumerate(zip(mins, maxs, strict=True)):
            if gmin is not None:
                i = bisect.bisect_left(wanted, gmin)
                if i == len(wanted) or wanted[i] > gmax:
                    continue
            groups.append(g)
        if groups:
            visited += sum(counts[g] for g in groups)
            pieces.append(tables.read_row_groups(view.path, part, groups, schema))
    if not pieces:
        return empty, visited
    return pl.concat(pieces).filter(pl.col(column).is_in(wanted)), visited


def _new_forgets(view: StoreView, after: int) -> tuple[pl.DataFrame, int]:
    """First forgets (seq > after) of capsules not forgotten at or below ``after``."""
    parts = [p for p in view.snapshot.parts("forgets") if (p.seq_hi or 0) > after]
    visited = sum(p.rows for p in parts)
    if not parts:
        return pl.DataFrame(schema={"seq": pl.Int64, "capsule_id": pl.String,
                                    "num": pl.Int64}), 0
    rows = (tables.read(view.path, parts, S.table_schema("forgets"), _FORGET_COLUMNS)
            .filter(pl.col("seq") > after).sort("seq")
            .unique("capsule_id", keep="first", maintain_order=True))
    # only an erasing forget can follow an earlier forget of the same capsule
    again = rows.filter(pl.col("mode") != "tombstone")["capsule_id"].to_list()
    if again and after > 0:
        old = [p for p in view.snapshot.parts("forgets") if (p.seq_lo or 0) <= after]
        earlier, n = tables.read_matching(view.path, old, S.table_schema("forgets"),
                                          "capsule_id", again, ["seq", "capsule_id"])
        visited += n
        gone = earlier.filter(pl.col("seq") <= after)["capsule_id"]
        rows = rows.filter(~pl.col("capsule_id").is_in(gone.implode()))
    return rows.select("seq", "capsule_id", _num(pl.col("capsule_id")).alias("num")), visited


def forgotten_counts(view: StoreView, session_mark: int, keys: list[str] | None
                     ) -> tuple[pl.DataFrame, int]:
    """Per conversation, members at or below ``session_mark`` forgotten now.

    Reads the forgotten counts of ``keys`` (all conversations when None) and maps the
    forgets written since the indexes' watermark through the members index.
    """
    mark = watermark_of(view)
    assert mark is not None and mark["session"] == session_mark, "check usable() first"
    if keys is None:
        stored, visited = levels.read_all(view, NAME, FORGOTTEN_SCHEMA, KEY)
    else:
        stored, visited, _ = levels.read_keys(view, NAME, FORGOTTEN_SCHEMA, KEY, keys)
    fresh, n = _new_forgets(view, mark["seq"])
    visited += n
    if fresh.height:
        members, n = member_conversations(view, fresh["num"].drop_nulls().to_list())
        visited += n
        extra = members.group_by(KEY).agg(pl.len().cast(pl.Int64).alias("forgotten"))
        if keys is not None:
            extra = extra.filter(pl.col(KEY).is_in(keys))
        stored = pl.concat([stored.select(list(FORGOTTEN_SCHEMA)), extra]).group_by(KEY).agg(
            pl.col("forgotten").sum())
    return stored.select(list(FORGOTTEN_SCHEMA)), visited


# -- writing ---------------------------------------------------------------------------------

def _stage_members(commit: Commit, view: StoreView, rows: pl.DataFrame) -> int:
    """Append a sorted run to tier 0; merge a tier that has too many runs. Rows read."""
    if rows.height == 0:
        return 0
    visited = 0
    carry = rows.sort("num")
    k = 0
    while True:
        table = tier_table(k)
        runs = list(view.snapshot.parts(table))
        if len(runs) + 1 <= TIER_RUNS:
            commit.write_derived(table, carry, replace=False,
                                 row_group_rows=MEMBER_ROW_GROUP_ROWS)
            return visited
        old = tables.read(view.path, runs, MEMBER_SCHEMA)
        visited += sum(p.rows for p in runs)
        carry = pl.concat([old, carry]).sort("num")
        commit.write_derived(table, carry.clear(), replace=True)
        k += 1


def _parts_above(view: StoreView, table: str, mark: int) -> list[Part]:
    return [p for p in view.snapshot.parts(table) if (p.seq_hi or 0) > mark]


def stage_cycle(commit: Commit, view: StoreView, session_mark: int, *,
                capsules: tuple[int, pl.DataFrame | None] | None = None) -> dict[str, int]:
    """Fold the capsules and forgets written since the watermark into both indexes.

    ``capsules`` is ``(mark, rows)``: capsule rows with a conversation and ``seq > mark``
    that the caller already read (``seq``, ``id``, ``conversation_id``), reused when the
    indexes' watermark is that same mark.
    """
    mark = watermark_of(view)
    if mark is None and (view.snapshot.parts("capsules") or view.snapshot.parts("forgets")):
        return stage_rebuild(commit, view, session_mark)  # first cycle: build from scratch
    after = mark["seq"] if mark is not None else 0
    cap_parts = _parts_above(view, "capsules", after)
    forget_parts = _parts_above(view, "forgets", after)
    if not cap_parts and not forget_parts:
        if mark is not None and mark["session"] != session_mark:
            commit.set_watermark(WATERMARK, {"seq": after, "session": session_mark})
        return {"rows_visited": 0, "rows_folded": 0, "rows_written": 0}
    visited = 0
    if capsules is not None and capsules[0] <= after and capsules[1] is not None:
        read = capsules[1]
    else:
        visited += sum(p.rows for p in cap_parts)
        read = tables.read(view.path, cap_parts, S.table_schema("capsules"), ["seq", "id", KEY])
    new_members = (read.filter((pl.col("seq") > after) & pl.col(KEY).is_not_null())
                   .select(_num(pl.col("id")).alias("num"), KEY))
    fresh, n = _new_forgets(view, after)
    visited += n
    nums = fresh["num"].drop_nulls().to_list()
    in_batch = new_members.filter(pl.col("num").is_in(nums))
    older = [x for x in nums if x not in set(in_batch["num"].to_list())]
    found, n = member_conversations(view, older)
    visited += n
    counts = (pl.concat([in_batch, found]).group_by(KEY)
              .agg(pl.len().cast(pl.Int64).alias("forgotten")))
    written = 0
    if counts.height:
        existing, n, level0 = levels.read_keys(view, NAME, FORGOTTEN_SCHEMA, KEY,
                                               counts[KEY].to_list(), full_level0=True)
        visited += n
        merged = (pl.concat([existing.select(list(FORGOTTEN_SCHEMA)), counts])
                  .group_by(KEY).agg(pl.col("forgotten").sum()))
        visited += levels.stage_merge(commit, view, NAME, FORGOTTEN_SCHEMA, KEY, merged, level0)
        written = merged.height
    visited += _stage_members(commit, view, new_members)
    top = max(p.seq_hi or 0 for p in [*cap_parts, *forget_parts])
    commit.set_watermark(WATERMARK, {"seq": top, "session": session_mark})
    return {"rows_visited": visited, "rows_folded": new_members.height + fresh.height,
            "rows_written": written + new_members.height}


def stage_rebuild(commit: Commit, view: StoreView, session_mark: int) -> dict[str, int]:
    """Both indexes from every capsule and forget (the rebuild door)."""
    cap_parts = list(view.snapshot.parts("capsules"))
    forget_parts = list(view.snapshot.parts("forgets"))
    members = (tables.scan(view.path, cap_parts, S.table_schema("capsules"))
               .filter(pl.col(KEY).is_not_null())
               .select(_num(pl.col("id")).alias("num"), KEY).collect())
    gone = (tables.scan(view.path, forget_parts, S.table_schema("forgets"))
            .select(_num(pl.col("capsule_id")).alias("num")).unique().collect())
    counts = (members.join(gone, on="num", how="semi").group_by(KEY)
              .agg(pl.len().cast(pl.Int64).alias("forgotten")))
    levels.stage_replace(commit, NAME, counts, KEY)
    for k in _tiers(view):
        commit.write_derived(tier_table(k), members.clear(), replace=True)
    commit.write_derived(tier_table(0), members.sort("num"), replace=True,
                         row_group_rows=MEMBER_ROW_GROUP_ROWS)
    top = max((p.seq_hi or 0 for p in [*cap_parts, *forget_parts]), default=0)
    commit.set_watermark(WATERMARK, {"seq": top, "session": session_mark})
    visited = sum(p.rows for p in cap_parts) + sum(p.rows for p in forget_parts)
    return {"rows_visited": visited, "rows_folded": members.height + gone.height,
            "rows_written": counts.height + members.height}

