"""Forgotten members per conversation: what lets a door count live members by key.

``live_count`` is not an exact fold term (a later forget shrinks it), so it is never in a
session row (spec 000, rule 3): the door computes it at read time. Doing that from the
``forgets`` table alone would read every forget and look their capsules up by id. Derived
indexes keep that lookup bounded by the keys a door names and the forgets written since
the indexes last advanced, whatever the store's size:

* **forgotten** (``projections/session_forgotten/T<k>``): per conversation, how many of its
  members are forgotten. Each capsule counts once, at its first forget; a count only
  grows, so it is an exact sum, kept as partial counts: a cycle appends the counts of the
  forgets it folds without reading the stored ones, merged runs add them up per key, and
  a reader adds up the partials of the keys it asks about.
* **members** (``projections/session/members/T<k>``): one row per capsule that has a
  conversation, ``(num, conversation_id)``, where ``num`` is the capsule number of
  ``cap-<num>``, sorted by ``num``: maps a forgotten capsule to its conversation.
* **members by conversation** (``projections/session/members_by_conversation/T<k>``): the
  same rows sorted by ``(conversation_id, num)``: the members of a few conversations.
* **forgotten members** (``projections/session/forgotten_members/T<k>``): the numbers of
  the members counted in **forgotten**; tells whether an erasing forget (the only kind
  that can follow an earlier forget of the same capsule) is that capsule's first.

All four are append-only sorted runs with small row groups (`SortedRuns`): a lookup
of a few integers or keys reads only the row groups whose statistics can hold them.

All four advance in the cycle from one watermark (``projections/session/forgotten``: the
highest ``seq`` of the capsule and forget rows folded, the session watermark it was
advanced with) and are rebuilt by the rebuild door. A door
answers from **forgotten** plus the forgets above that watermark (merge-on-read): it maps
those forgets to the conversations it was asked about either through **members** (one
lookup per forgotten capsule) or through **members by conversation** (one lookup per
conversation asked), whichever the footers say reads fewer rows. The door uses the
indexes only when their watermark was advanced with the session projection's own;
otherwise it falls back to the exact read of every forget (and the next
cycle rebuilds the indexes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from memframe import schema as S
from memframe.derived.runs import Plan, SortedRuns, merge_budget, stage_append_together
from memframe.ids import capsule_number_expr

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView
    from memframe.store.capture import Commit

__all__ = ["WATERMARK", "NAME", "FORGOTTEN_SCHEMA", "MEMBER_SCHEMA", "FORGOTTEN", "MEMBERS",
           "MEMBERS_BY_CONVERSATION", "FORGOTTEN_MEMBERS", "stage_cycle", "stage_rebuild",
           "forgotten_counts", "usable"]

KEY = "conversation_id"
NAME = "session_forgotten"
WATERMARK = "projections/session/forgotten"

FORGOTTEN_SCHEMA = pl.Schema({KEY: pl.String(), "forgotten": pl.Int64()})
MEMBER_SCHEMA = pl.Schema({"num": pl.Int64(), KEY: pl.String()})

# capsule numbers grow with the store: the members' runs never overlap, so only the
# cycles' small runs merge (into larger partitions); members by conversation overlap
# everywhere (random keys): every tier merges, with a fan-in that halves the merge reads
MEMBERS = SortedRuns("projections/session/members", MEMBER_SCHEMA, ("num",), fan_in=2,
                     merge_tiers=1)
MEMBERS_BY_CONVERSATION = SortedRuns("projections/session/members_by_conversation",
                                     pl.Schema({KEY: pl.String(), "num": pl.Int64()}),
                                     (KEY, "num"), fan_in=2)
FORGOTTEN_MEMBERS = SortedRuns("projections/session/forgotten_members",
                               pl.Schema({"num": pl.Int64()}), ("num",))

_FORGET_COLUMNS = ["seq", "capsule_id", "mode"]
_FRESH_SCHEMA = pl.Schema({"seq": pl.Int64(), "capsule_id": pl.String(), "mode": pl.String(),
                           "num": pl.Int64()})


def _sum_by_key(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.group_by(KEY).agg(pl.col("forgotten").sum())


FORGOTTEN = SortedRuns(f"projections/{NAME}", FORGOTTEN_SCHEMA, (KEY,), combine=_sum_by_key)


def _num(expr: pl.Expr) -> pl.Expr:
    return capsule_number_expr(expr)


def watermark_of(view: StoreView) -> dict[str, int] | None:
    mark = view.watermarks.get(WATERMARK)
    return {k: int(v) for k, v in mark.items()} if isinstance(mark, dict) else None


def _current(mark: dict[str, int] | None) -> bool:
    return mark is not None


def usable(view: StoreView, session_mark: int) -> bool:
    """Were the indexes advanced with the session projection's watermark?"""
    mark = watermark_of(view)
    return _current(mark) and mark is not None and mark["session"] == session_mark


def _set_watermark(commit: Commit, seq: int, session_mark: int) -> None:
    commit.set_watermark(WATERMARK, {"seq": seq, "session": session_mark})


# -- the forgets above the watermark ----------------------------------------------------------

def _fresh_forgets(view: StoreView, after: int) -> tuple[pl.DataFrame, int]:
    """The first forget (seq > after) of each capsule, with its capsule number.

    Reads the partitions written since ``after`` (of a partition that also holds older
    rows, after a compaction, only the row groups whose ``seq`` can be above it). An
    erasing forget among them may follow a forget at or below ``after`` (it is then not the
    capsule's first): `_first_forgets` settles that for the capsules that matter.
    """
    schema = S.table_schema("forgets")
    sub = pl.Schema({c: schema[c] for c in _FORGET_COLUMNS})
    whole, pieces, visited = [], [], 0
    for part in view.partitions("forgets"):
        if (part.seq_hi or 0) <= after:
            continue
        if part.seq_lo is not None and part.seq_lo > after:
            whole.append(part)
            visited += part.rows
            continue
        _mins, maxs, counts = view.row_group_ranges(part, "seq")
        groups = [g for g, hi in enumerate(maxs) if hi is None or hi > after]
        if groups:
            visited += sum(counts[g] for g in groups)
            pieces.append(view.read_row_groups(part, groups, sub))
    if whole:
        pieces.append(view.read_partitions("forgets", whole, _FORGET_COLUMNS))
    if not pieces:
        return pl.DataFrame(schema=_FRESH_SCHEMA), 0
    rows = (pl.concat(pieces).filter(pl.col("seq") > after).sort("seq")
            .unique("capsule_id", keep="first", maintain_order=True))
    return (rows.with_columns(_num(pl.col("capsule_id")).alias("num")).select(list(_FRESH_SCHEMA)),
            visited)


def _first_forgets(view: StoreView, hits: pl.DataFrame, fresh: pl.DataFrame
                   ) -> tuple[pl.DataFrame, int]:
    """``hits`` (members forgotten above the watermark, as of the watermark's members) less
    those whose capsule was already forgotten at or below it.

    Only an erasing forget can follow an earlier forget of the same capsule, so only the
    erasing ones are looked up in the forgotten-members index.
    """
    erasing = fresh.filter(pl.col("mode") != "tombstone")["num"].drop_nulls()
    check = hits.filter(pl.col("num").is_in(erasing.implode()))["num"].to_list()
    if not check:
        return hits, 0
    before, visited = FORGOTTEN_MEMBERS.lookup(view, check)
    return hits.filter(~pl.col("num").is_in(before["num"].implode())), visited


def _by_keys(by_key: Plan, by_num: Plan | None) -> bool:
    """Read the members of the keys rather than look every forgotten number up?

    ``by_num`` is None when it was not planned: looking a number up reads about one row
    group, so when the keys' members cost no more than that per number, the members
    index's footers are not even parsed.
    """
    return by_num is None or by_key.rows < by_num.rows


def _hits_for_keys(view: StoreView, nums: list[int], keys: list[str]
                   ) -> tuple[pl.DataFrame, int]:
    """``(num, conversation_id)`` of the members among ``nums`` in the conversations ``keys``.

    Two exact ways: look every number up in the members index, or read the members of
    every key from the members-by-conversation index. The footers say which reads fewer
    rows before either reads one.
    """
    by_key = MEMBERS_BY_CONVERSATION.plan(view, keys)
    by_num = (None if by_key.rows <= len(nums) * MEMBERS.row_group_rows
              else MEMBERS.plan(view, nums))
    if _by_keys(by_key, by_num):
        wanted = pl.Series(nums, dtype=pl.Int64).implode()
        rows = MEMBERS_BY_CONVERSATION.read(view, by_key, keys)
        return rows.filter(pl.col("num").is_in(wanted)).select(list(MEMBER_SCHEMA)), by_key.rows
    by_num = by_num if by_num is not None else MEMBERS.plan(view, nums)
    rows = MEMBERS.read(view, by_num, nums)
    return rows.filter(pl.col(KEY).is_in(keys)), by_num.rows


def forgotten_counts(view: StoreView, session_mark: int, keys: list[str] | None
                     ) -> tuple[pl.DataFrame, int]:
    """Per conversation, members at or below ``session_mark`` forgotten now.

    Reads the forgotten counts of ``keys`` (all conversations when None) and adds the
    first forgets written since the indexes' watermark, mapped to the conversations
    asked about.
    """
    mark = watermark_of(view)
    assert mark is not None and usable(view, session_mark), "check usable() first"
    if keys is None:
        stored, visited = FORGOTTEN.read_all(view)
    else:
        stored, visited = FORGOTTEN.lookup(view, keys)
    fresh, n = _fresh_forgets(view, mark["seq"])
    visited += n
    nums = fresh["num"].drop_nulls().to_list()
    if nums and (keys is None or keys):
        if keys is None:
            hits, n = MEMBERS.lookup(view, nums)
        else:
            hits, n = _hits_for_keys(view, nums, keys)
        visited += n
        hits, n = _first_forgets(view, hits, fresh)
        visited += n
        extra = hits.group_by(KEY).agg(pl.len().cast(pl.Int64).alias("forgotten"))
        stored = pl.concat([stored.select(list(FORGOTTEN_SCHEMA)), extra])
    return _sum_by_key(stored).select(list(FORGOTTEN_SCHEMA)), visited


# -- writing ---------------------------------------------------------------------------------

def _parts_above(view: StoreView, table: str, mark: int) -> list[Partition]:
    return [p for p in view.partitions(table) if (p.seq_hi or 0) > mark]


def stage_cycle(commit: Commit, view: StoreView, session_mark: int, *,
                capsules: tuple[int, pl.DataFrame | None] | None = None) -> dict[str, int]:
    """Fold the capsules and forgets written since the watermark into the indexes.

    ``capsules`` is ``(mark, rows)``: capsule rows with a conversation and ``seq > mark``
    that the caller already read (``seq``, ``id``, ``conversation_id``), reused when the
    indexes' watermark is that same mark.
    """
    mark = watermark_of(view)
    if not _current(mark):
        if view.partitions("capsules") or view.partitions("forgets"):
            return stage_rebuild(commit, view, session_mark)  # the first cycle
        return {"rows_visited": 0, "rows_folded": 0, "rows_written": 0}
    assert mark is not None
    after = mark["seq"]
    cap_parts = _parts_above(view, "capsules", after)
    forget_parts = _parts_above(view, "forgets", after)
    if not cap_parts and not forget_parts:
        if mark["session"] != session_mark:
            _set_watermark(commit, after, session_mark)
        return {"rows_visited": 0, "rows_folded": 0, "rows_written": 0}
    visited = 0
    if capsules is not None and capsules[0] <= after and capsules[1] is not None:
        read = capsules[1]
    else:
        visited += sum(p.rows for p in cap_parts)
        read = view.read_partitions("capsules", cap_parts, ["seq", "id", KEY])
    new_members = (read.filter((pl.col("seq") > after) & pl.col(KEY).is_not_null())
                   .select(_num(pl.col("id")).alias("num"), KEY))
    fresh, n = _fresh_forgets(view, after)
    visited += n
    nums = fresh["num"].drop_nulls()
    # a capsule written since the watermark cannot have been forgotten at or below it
    in_batch = new_members.filter(pl.col("num").is_in(nums.implode()))
    older = nums.filter(~nums.is_in(in_batch["num"].implode())).to_list()
    found, n = MEMBERS.lookup(view, older)
    visited += n
    found, n = _first_forgets(view, found, fresh)
    visited += n
    hits = pl.concat([in_batch, found.select(list(MEMBER_SCHEMA))])
    counts = hits.group_by(KEY).agg(pl.len().cast(pl.Int64).alias("forgotten"))
    # appends read nothing; the four indexes' merges share one bounded budget of rows,
    # the smallest indexes first
    budget = merge_budget(new_members.height + hits.height + counts.height)
    visited += FORGOTTEN.stage_append(commit, view, counts, budget)  # partial counts
    visited += FORGOTTEN_MEMBERS.stage_append(commit, view, hits.select("num"), budget)
    visited += stage_append_together(commit, view, (MEMBERS_BY_CONVERSATION, MEMBERS),
                                     new_members, budget)
    top = max(p.seq_hi or 0 for p in [*cap_parts, *forget_parts])
    _set_watermark(commit, top, session_mark)
    return {"rows_visited": visited, "rows_folded": new_members.height + fresh.height,
            "rows_written": counts.height + 2 * new_members.height + hits.height}


def stage_rebuild(commit: Commit, view: StoreView, session_mark: int) -> dict[str, int]:
    """Every index from every capsule and forget (the rebuild door)."""
    cap_parts = list(view.partitions("capsules"))
    forget_parts = list(view.partitions("forgets"))
    members = (view.table("capsules")
               .filter(pl.col(KEY).is_not_null())
               .select(_num(pl.col("id")).alias("num"), KEY).collect())
    gone = (view.table("forgets")
            .select(_num(pl.col("capsule_id")).alias("num")).unique().collect())
    dead = members.join(gone, on="num", how="semi")
    counts = dead.group_by(KEY).agg(pl.len().cast(pl.Int64).alias("forgotten"))
    FORGOTTEN.stage_replace(commit, view, counts)
    MEMBERS.stage_replace(commit, view, members)
    MEMBERS_BY_CONVERSATION.stage_replace(commit, view, members)
    FORGOTTEN_MEMBERS.stage_replace(commit, view, dead.select("num"))
    top = max((p.seq_hi or 0 for p in [*cap_parts, *forget_parts]), default=0)
    _set_watermark(commit, top, session_mark)
    visited = sum(p.rows for p in cap_parts) + sum(p.rows for p in forget_parts)
    return {"rows_visited": visited, "rows_folded": members.height + gone.height,
            "rows_written": counts.height + 2 * members.height + dead.height}
