"""The digest's per-capsule state: one row per capsule number, kept under spec 000's laws.

The rows are `memframe.state.fold_state` of the nine per-capsule tables (the one fold every
reader of capsule state runs), stored as versioned sorted runs (`memframe.derived.keyed`)
under ``projections/digest_capsules/T<k>`` with the watermark ``projections/digest/capsules``;
beside them, in the same generation, the aggregates, the archive instants, the subset and
the leaders derived from them. A cycle folds the rows above the watermark with the stored
rows of the numbers they touch; a reader adds those rows at read time (`read_state`,
`read_warm`), so the state is exact at any generation; a store without state folds every
row, one range of capsule numbers at a time (`fold_warm`). The runs hold no text read
from content; rows the digest fails closed on are never folded. The layout, and what
each part buys: docs/architecture.md ("The digest's state").
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from memframe.derived import job_report, keyed
from memframe.derived.runs import Budget, merge_budget
from memframe.digest.checks import check_tables
from memframe.ids import capsule_number_expr
from memframe.schema import (
    STALE_AFTER_NS,
    THREAD_PATTERN,
    TIMESTAMP,
)
from memframe.state import (
    KEY,
    SOURCE_KEY,
    SOURCES,
    STATE_SCHEMA,
    STORED_SCHEMA,
    TEXT,
    alive_expr,
    fold_state,
    fold_terms,
    guarded_expr,
    has_base,
    population_expr,
)
from memframe.text import headline_expr

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView
    from memframe.store.capture import Commit

__all__ = [
    "NAME",
    "WATERMARK",
    "read_state",
    "state_hash",
    "stage_cycle",
    "stage_rebuild",
    "state_door",
]

NAME = "digest_capsules"
#: versioned with the state's columns: a store whose state has other columns rebuilds it
#: (the digest folds every row until then)
WATERMARK = "projections/digest/capsules"
#: the watermark of the last cycle that changed the subset (wrote a subset row): what is
#: kept from the subset (`memframe.digest.state.sections`) is current while it holds
SUBSET_MARK = "projections/digest/subset"
#: rows per row group of the state's runs: a digest reads them whole (large groups read
#: fast), a cycle looks a few capsule numbers up (small groups read little); measured
ROW_GROUP_ROWS = 4_096

def state_hash(rows: pl.DataFrame) -> str:
    """A hash of state rows (order-independent: rows are sorted by number first), over
    the stored columns (the text a row carries is the content's, not the state's).

    Examples:
        >>> state_hash(pl.DataFrame(schema=STATE_SCHEMA)) == state_hash(
        ...     pl.DataFrame(schema=STATE_SCHEMA))
        True
    """
    from memframe.text import sha256_hex

    ordered = rows.select(list(STORED_SCHEMA)).sort(KEY)
    line = pl.concat_str([pl.col(c).cast(pl.String).fill_null("\x00") for c in STORED_SCHEMA],
                         separator="\x1f")
    lines = ordered.select(line.alias("l")).to_series()
    return sha256_hex(pl.Series([lines.str.join("\n").item() if len(lines) else ""])).item()


# -- reading -----------------------------------------------------------------------------------

def watermark_of(view: StoreView) -> int | None:
    mark = view.watermarks.get(WATERMARK)
    return int(mark) if mark is not None else None


@functools.cache
def _columns(name: str) -> tuple[str | pl.Expr, ...]:
    if name == "capsules":
        return (*SOURCES["capsules"],
                pl.col("content").str.extract(THREAD_PATTERN, 1).alias("thread"),
                headline_expr(pl.col("content")).alias("headline"),
                guarded_expr().alias("guarded"))
    return tuple(SOURCES[name])



def _parts_above(view: StoreView, name: str, mark: int) -> list[Partition]:
    return [p for p in view.partitions(name) if (p.seq_hi or 0) > mark]


#: source parts another reader of the same cycle read already: table -> (the parts, every
#: row of them with at least the columns of `shared_columns`)
Shared = Mapping[str, tuple[Sequence["Partition"], pl.DataFrame]]


def shared_columns(name: str, have: Sequence[str]) -> list[str | pl.Expr]:
    """The columns (beside ``have``) a reader sharing its read of source ``name`` with the
    state adds to it (`read_above` then reads nothing more of those parts)."""
    return [c for c in _columns(name) if not (isinstance(c, str) and c in have)]


def read_above(view: StoreView, mark: int, shared: Shared | None = None
               ) -> tuple[dict[str, pl.DataFrame], int, int]:
    """The rows of the six source tables with ``seq > mark``, the Parquet rows read, and
    the highest ``seq`` among the parts read (``mark`` when none). A table whose parts
    above ``mark`` are all among ``shared``'s is taken from there (nothing read)."""
    out: dict[str, pl.DataFrame] = {}
    visited, top = 0, mark
    for name in SOURCES:
        parts = _parts_above(view, name, mark)
        if not parts:
            continue
        top = max(top, *(p.seq_hi or 0 for p in parts))
        names = [c if isinstance(c, str) else c.meta.output_name() for c in _columns(name)]
        pre = (shared or {}).get(name)
        if pre is not None and {p.path for p in parts} <= {p.path for p in pre[0]}:
            out[name] = pre[1].select(names).filter(pl.col("seq") > mark)
            continue
        visited += sum(p.rows for p in parts)
        frame = view.scan_partitions(name, parts).select(_columns(name))
        out[name] = frame.filter(pl.col("seq") > mark).collect(engine="in-memory")
    return out, visited, top


def scan_all(view: StoreView) -> tuple[dict[str, pl.LazyFrame], int, int]:
    """Every row of the six source tables (lazily), the rows they hold and the top seq."""
    out: dict[str, pl.LazyFrame] = {}
    visited, top = 0, 0
    for name in SOURCES:
        parts = list(view.partitions(name))
        if not parts:
            continue
        visited += sum(p.rows for p in parts)
        top = max(top, *(p.seq_hi or 0 for p in parts))
        out[name] = view.scan_partitions(name, parts).select(_columns(name))
    return out, visited, top


def _touched(delta: Mapping[str, pl.DataFrame]) -> list[int]:
    nums = []
    for name, frame in delta.items():
        column = {"capsules": "id", "journal": "subject", "relations": "to_id"}.get(
            name, "capsule_id")
        if name == "relations":
            frame = frame.filter(pl.col("kind").is_in(["supersedes", "part_of"]))
        nums.append(frame.lazy().select(capsule_number_expr(column).alias(KEY)))
    if not nums:
        return []
    return (pl.concat(nums).drop_nulls().unique().sort(KEY).collect(engine="in-memory")
            .get_column(KEY).to_list())


def read_state(view: StoreView) -> tuple[pl.DataFrame, int, dict[str, pl.DataFrame]]:
    """The exact state at ``view``: stored rows plus the rows above the watermark.

    Returns:
        The state rows (one per capsule number, in no particular order), the Parquet rows
        read, and the rows read above the watermark (table -> rows, for the digest's
        fail-closed checks; lazily every source row when there is no state yet).
    """
    mark = watermark_of(view)
    if mark is None:  # no state yet (a virgin store, or the job never ran): fold all
        sources, visited, _top = scan_all(view)
        return fold_state(sources, engine="streaming"), visited, sources  # type: ignore[return-value]
    stored, visited = state_runs().read_all(view)
    stored = with_text(stored)
    delta, n, _top = read_above(view, mark)
    visited += n
    touched = _touched(delta)
    if touched:
        wanted = pl.Series(touched, dtype=pl.Int64).implode()
        merged = fold_state(delta, stored.filter(pl.col(KEY).is_in(wanted)))
        rest = stored.filter(~pl.col(KEY).is_in(wanted))
        stored = pl.concat([rest.select(list(STATE_SCHEMA)), merged], how="vertical")
    # the labels the sections group by: every labelled row is in the subset, which keeps
    # its members' text (other rows' headlines are read for the rows a digest emits)
    subset, n = read_subset(view)
    visited += n
    rows, n = fill_text(view, stored, subset, need=pl.col("threaded"))
    return rows, visited + n, delta


# -- the job ----------------------------------------------------------------------------------

def stage_cycle(commit: Commit, view: StoreView, budget: Budget | None = None,
                shared: Shared | None = None, keep: dict[str, Any] | None = None
                ) -> dict[str, int]:
    """Fold the rows written since the watermark into the state (staged on ``commit``).

    Reads only the parts committed above the watermark and the stored rows of the
    capsule numbers they touch (a new capsule's number lies above every stored run's, so
    it reads nothing), appends the changed rows as runs and advances the runs' merges
    within ``budget`` (`merge_budget` of the rows appended when None); nothing new reads
    and writes nothing. The first cycle of a store without state builds it from scratch
    (`stage_rebuild`, handing its subset rows to ``keep``). Source parts in ``shared``
    (read by another job of the cycle) are not read again.
    """
    mark = watermark_of(view)
    if mark is None:
        if not any(view.partitions(name) for name in SOURCES):
            return job_report(0, 0, 0)  # a virgin store: nothing to fold, nothing written
        return stage_rebuild(commit, view, keep)
    delta, visited, top = read_above(view, mark, shared)
    if top <= mark:
        return job_report(0, 0, 0)
    if check_tables(delta):  # the digest fails closed on these rows: never fold them
        return job_report(visited, 0, 0)
    folded_in = sum(f.height for f in delta.values())
    touched = _touched(delta)
    written = 0
    if touched:
        existing, n = state_runs().read_keys(view, touched)
        visited += n
        existing = with_text(existing)
        merged = fold_state(delta, existing if existing.height else None)
        if existing.height:
            changed = merged.join(existing.select(list(STORED_SCHEMA)),
                                  on=list(STORED_SCHEMA), how="anti", nulls_equal=True)
        else:
            changed = merged
        if changed.height:
            old = existing.filter(pl.col(KEY).is_in(changed[KEY].implode()))
            members = changed.filter(subset_expr())
            if budget is None:
                budget = merge_budget(changed.height + members.height
                                      + old.filter(subset_expr()).height)
            visited += state_runs().stage_put(commit, view, changed, top, budget)
            sub = _subset_rows(changed, old)
            if sub.height:
                visited += subset_runs().stage_put(commit, view, sub, top, budget)
                commit.set_watermark(SUBSET_MARK, top)
            members, n = _stage_subset_text(commit, view, members, old)
            visited += n
            written = changed.height
            visited += _stage_derived(commit, view, changed, old, members)
    commit.set_watermark(WATERMARK, top)
    return job_report(visited, folded_in, written)


def _stage_subset_text(commit: Commit, view: StoreView, members: pl.DataFrame,
                       old: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Append the text of the changed rows that joined the subset (``members``: the
    changed rows that are members; ``old``: the changed rows' stored versions) to the
    subset's text table: a joining capsule's text is at hand when it is new (folded from
    its content), else read from its capsule row. Returns the members with the text known
    and the Parquet rows read."""
    parts = view.partitions(SUBSET_TEXT)
    # a member's text is stored once; an erasure removed the erased members' rows (the
    # fold gives them the text of no content, written again here)
    was = old.filter(subset_expr()).get_column(KEY).implode()
    joining = members.filter(~pl.col(KEY).is_in(was) | pl.col("erased"))
    if not joining.height:
        return members, 0
    joining, visited = fill_text(view, joining)
    # append-only: a capsule's text never changes before its erasure, which removes its
    # row; a table of many small parts is written again as one
    text = joining.select(list(TEXT_SCHEMA))
    replace = len(parts) >= TEXT_PARTS
    if replace:
        stored = view.derived(SUBSET_TEXT, TEXT_SCHEMA).collect(engine="in-memory")
        visited += view.row_count(SUBSET_TEXT)
        text = pl.concat([stored, text], how="vertical").unique(KEY, keep="last").sort(KEY)
    commit.write_derived(SUBSET_TEXT, text, replace=replace, row_group_rows=ROW_GROUP_ROWS)
    known = joining.select(KEY, *TEXT)
    members = members.join(known.rename({c: f"_{c}" for c in TEXT}), on=KEY, how="left",
                           maintain_order="left").with_columns(
        [pl.coalesce(f"_{c}", c).alias(c) for c in TEXT]).drop([f"_{c}" for c in TEXT])
    return members, visited


def _stage_derived(commit: Commit, view: StoreView, changed: pl.DataFrame,
                   old: pl.DataFrame, subset: pl.DataFrame | None = None) -> int:
    """Stage the aggregates, the archive instants and the leaders for state rows that
    changed (``old``: their stored rows, absent for new numbers; ``subset``: the subset
    rows staged, when they changed). Returns the Parquet rows read."""
    stored, visited = _read_aggregates(view)
    aggregates = merge_aggregates(stored, contributions(changed), contributions(old, -1))
    is_archive = pl.col("metric") == "archive"
    commit.write_derived(AGG_TABLE, aggregates.filter(~is_archive), replace=True)
    # the archive instants are rewritten only when their sums changed (a supersedes edge,
    # or an event on a superseded capsule)
    moved = aggregates.filter(is_archive)
    if moved.height:
        archive, n = _read_archive(view)
        visited += n
        commit.write_derived(ARCHIVE_TABLE, archive_rows(archive, moved), replace=True,
                             row_group_rows=ARCHIVE_GROUP_ROWS)
    return visited + _stage_leaders(commit, view, changed, subset)


def _stage_leaders(commit: Commit, view: StoreView, changed: pl.DataFrame,
                   subset: pl.DataFrame | None = None) -> int:
    """Stage the leaders after ``changed`` rows (refilled from every state row when a
    list ran low, or when the store has none yet), the text of their entries filled (a
    digest emits them as they are). Returns the Parquet rows read."""
    stored, visited = _read_leaders(view)
    leaders = update_leaders(stored, changed) if stored is not None else None
    if leaders is None:
        rows, n = state_runs().read_all(view)
        visited += n
        current = pl.concat([with_text(rows)
                             .filter(~pl.col(KEY).is_in(changed.get_column(KEY).implode()))
                             .select(list(STATE_SCHEMA)), changed.select(list(STATE_SCHEMA))],
                            how="vertical")
        leaders = leaders_of(current)
    # the entries' text (a floor keeps none): the changed rows' first (an erased row's is
    # empty), then the stored entries', the subset's, else the capsules'
    index = pl.int_range(pl.len(), dtype=pl.Int64).alias("_i")
    leaders = leaders.with_columns(index)
    entries, n = fill_text(view, leaders.filter(~pl.col("floor")), changed, stored, subset)
    leaders = pl.concat([entries, leaders.filter(pl.col("floor"))], how="vertical").sort(
        "_i").drop("_i")
    commit.write_derived(LEADERS, leaders, replace=True, row_group_rows=LEADERS_GROUP_ROWS)
    return visited + n


def stage_rebuild(commit: Commit, view: StoreView, keep: dict[str, Any] | None = None
                  ) -> dict[str, int]:
    """The whole state from every source row, replacing what is stored (one commit).
    ``keep`` receives the subset's state rows (``"subset"``) for a later job of the
    same commit (`memframe.digest.state.sections`)."""
    sources, visited, top = scan_all(view)
    if check_tables(sources):  # never fold what the digest fails closed on
        return job_report(visited)
    # folded range by range of capsule numbers (as the cold digest): the peak follows a
    # range's source rows, not the store's
    aggregates, subset, rows, _n = _fold_ranges(view, None)
    if keep is not None:
        keep["subset"] = subset
    state_runs().stage_replace(commit, view, rows, top)
    subset_runs().stage_replace(commit, view, subset.with_columns(
        pl.lit(True).alias("member")).select(list(SUBSET_SCHEMA)), top)
    commit.write_derived(SUBSET_TEXT, subset.select(list(TEXT_SCHEMA)).sort(KEY),
                         replace=True, row_group_rows=ROW_GROUP_ROWS)
    is_archive = pl.col("metric") == "archive"
    commit.write_derived(AGG_TABLE, aggregates.filter(~is_archive), replace=True)
    commit.write_derived(ARCHIVE_TABLE, archive_rows(None, aggregates.filter(is_archive)),
                         replace=True, row_group_rows=ARCHIVE_GROUP_ROWS)
    commit.write_derived(LEADERS, leaders_of(rows), replace=True,
                         row_group_rows=LEADERS_GROUP_ROWS)
    commit.set_watermark(WATERMARK, top)
    commit.set_watermark(SUBSET_MARK, top)
    return job_report(visited, visited, rows.height)


def state_door(view: StoreView) -> Any:
    """The digest state's door: the exact state rows at ``view`` as a `Page`. The text
    columns (``thread``, ``headline``) are those of the subset's members and of the rows
    folded now; the state keeps no other text (null: read it from the capsule).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "ACTIVE(t): go", "source": "s", "anchor": "a"})
        >>> state_door(store.pinned()).rows.select("num", "threaded", "thread", "named").rows()
        [(1, True, 't', True)]
    """
    from memframe.projections.doors import Page

    state, visited, _delta = read_state(view)
    return Page(rows=state, rows_visited=visited, hash=state_hash(state))


# -- the aggregates and the subset: what lets a warm digest skip the bulk of the rows -------
#
# Each capsule *contributes* rows to the aggregates (per-project counts, tier counts,
# coverage misses, archive instants); a change subtracts the old row's contribution and
# adds the new one's, so the sums stay exact. The subset holds the state rows the handoff,
# mission, unanchored, pinned and open-effort sections can name (``member = false``: left).

AGG_TABLE = "projections/digest_aggregates"
SUBSET = "digest_subset"
SUBSET_SCHEMA = pl.Schema({**STORED_SCHEMA, "member": pl.Boolean()})
#: the subset members' text (`TEXT`), in a table of its own: appended to as capsules join
#: the subset; an erasure writes it again without the erased capsules' rows (keyed by
#: `KEY`: `memframe.store.derived.TEXT_KEY`), so a member may have no row (unknown text)
SUBSET_TEXT = "projections/text/digest_subset"
TEXT_SCHEMA = pl.Schema({KEY: pl.Int64(), **{c: pl.String() for c in TEXT}})
#: parts the text table may hold before a cycle writes it again as one
TEXT_PARTS = 16
AGG_SCHEMA = pl.Schema({"metric": pl.String(), "key": pl.String(), "at": TIMESTAMP,
                        "n": pl.Int64()})


def state_runs() -> keyed.KeyedRuns:
    """Where the state rows live: ``projections/digest_capsules/T<k>``, one current row
    per capsule number (its newest version), written by `stage_cycle` as runs. The runs
    store no text (`STORED_SCHEMA`): old versions stay in them until a merge, so nothing
    an erasure must remove may be in them."""
    return keyed.KeyedRuns(f"projections/{NAME}", STORED_SCHEMA, KEY,
                           row_group_rows=ROW_GROUP_ROWS)


def with_text(rows: pl.DataFrame) -> pl.DataFrame:
    """Stored state rows (`STORED_SCHEMA`, any extra columns kept) with the text columns
    added as unknown (null), in `STATE_SCHEMA`'s order."""
    missing = [pl.lit(None, dtype=pl.String).alias(c) for c in TEXT if c not in rows.columns]
    if not rows.width:
        return pl.DataFrame(schema=STATE_SCHEMA)
    out = rows.with_columns(missing) if missing else rows
    extra = [c for c in out.columns if c not in STATE_SCHEMA]
    return out.select(*STATE_SCHEMA, *extra)


def subset_runs() -> keyed.KeyedRuns:
    """Where the subset rows live (``member`` False: a former member, read as absent);
    no text, as the state's runs."""
    return keyed.KeyedRuns(f"projections/{SUBSET}", SUBSET_SCHEMA, KEY,
                           row_group_rows=ROW_GROUP_ROWS)


def read_subset(view: StoreView) -> tuple[pl.DataFrame, int]:
    """The stored subset rows (members only) with their text where it is kept (unknown,
    null, after an erasure dropped it), and the Parquet rows read."""
    rows, visited = subset_runs().read_all(view)
    rows = rows.filter(pl.col("member")).select(list(STORED_SCHEMA)) if rows.width else \
        pl.DataFrame(schema=STORED_SCHEMA)
    if not view.partitions(SUBSET_TEXT) or not rows.height:
        return with_text(rows), visited
    text = (view.derived(SUBSET_TEXT, TEXT_SCHEMA).collect(engine="in-memory")
            .unique(KEY, keep="last"))
    return (rows.join(text, on=KEY, how="left", maintain_order="left").select(*STATE_SCHEMA),
            visited + view.row_count(SUBSET_TEXT))


def _text_of(content: pl.Expr) -> list[pl.Expr]:
    return [content.str.extract(THREAD_PATTERN, 1).alias("thread"),
            headline_expr(content).alias("headline")]


def fill_text(view: StoreView, rows: pl.DataFrame, *known: pl.DataFrame | None,
              need: pl.Expr | None = None) -> tuple[pl.DataFrame, int]:
    """``rows`` (state rows) with the text of those whose text is unknown filled in: from
    ``known`` rows of the same numbers that carry it (a capsule's text never changes
    before its erasure, after which the fold gives it none), else read from the canonical
    capsule rows by ``seq`` (only the row groups that can hold them). ``need`` limits the
    rows read from the capsules (the others keep unknown text unless ``known`` has it).
    Returns the rows (order kept) and the Parquet rows read.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "ACTIVE(t): go\\non", "source": "s", "anchor": "a"})
        >>> rows = pl.DataFrame({"num": [1], "seq": [1], "erased": [False], "thread": [None],
        ...                      "headline": [None]}, schema_overrides={"thread": pl.String,
        ...                                                            "headline": pl.String})
        >>> filled, _read = fill_text(store.pinned(), rows)
        >>> filled.select("thread", "headline").rows()
        [('t', 'ACTIVE(t): go…')]
    """
    unknown = (pl.col("headline").is_null() & pl.col("seq").is_not_null()
               & ~pl.col("erased").fill_null(False))
    missing = rows.filter(unknown)
    if not missing.height:
        return rows, 0
    wanted = pl.lit(True) if need is None else need.fill_null(False)
    found = [k.filter(pl.col("headline").is_not_null()).select(KEY, *TEXT)
             for k in known if k is not None and k.height]
    text = (pl.concat(found, how="vertical").unique(KEY, keep="first")
            if found else pl.DataFrame(schema={KEY: pl.Int64, **{c: pl.String for c in TEXT}}))
    text = text.filter(pl.col(KEY).is_in(missing.get_column(KEY).implode()))
    read = 0
    # a capsule can stand in several rows (an entry of both leader lists): read it once,
    # and join one text row per number, so no row is repeated
    left = missing.filter(~pl.col(KEY).is_in(text.get_column(KEY).implode()) & wanted
                          ).unique(KEY, keep="first", maintain_order=True)
    if left.height:
        canonical, read = view.read_by_seq("capsules", left.get_column("seq").to_list(),
                                           ["seq", "content"])
        fetched = left.select(KEY, "seq").join(
            canonical.select("seq", *_text_of(pl.col("content"))), on="seq", how="inner")
        text = pl.concat([text, fetched.select(KEY, *TEXT)], how="vertical").unique(
            KEY, keep="first")
    filled = rows.join(text.rename({c: f"_{c}" for c in TEXT}), on=KEY, how="left",
                       maintain_order="left")
    return filled.with_columns(
        [pl.when(unknown).then(pl.col(f"_{c}")).otherwise(pl.col(c)).alias(c) for c in TEXT]
    ).drop([f"_{c}" for c in TEXT]), read
_TIERS = ("active", "archived", "quarantined")


@functools.cache
def subset_expr() -> pl.Expr:
    """Is a state row in the subset (see above)?"""
    return has_base() & (
        pl.col("bracket").fill_null(False)
        | (pl.col("threaded").fill_null(False) & ~pl.col("erased").fill_null(False))
        | pl.col("kind").is_in(["epic", "task"]).fill_null(False)
        | pl.col("pinned").fill_null(False)
    )


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
    pieces = [piece.collect(engine="streaming")
              for piece in _metric_pieces(rows.lazy(), 1)]
    return merge_aggregates(*pieces)


def merge_aggregates(*frames: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """Sum aggregate rows by (metric, key, at); rows summing to zero are dropped."""
    lazy = [f.lazy() for f in frames]
    if not lazy:
        return pl.DataFrame(schema=AGG_SCHEMA)
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


def _read_archive(view: StoreView) -> tuple[pl.DataFrame | None, int]:
    if not view.partitions(ARCHIVE_TABLE):
        return None, 0
    return (view.derived(ARCHIVE_TABLE, ARCHIVE_SCHEMA).collect(engine="in-memory"),
            view.row_count(ARCHIVE_TABLE))


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


def _subset_rows(rows: pl.DataFrame, old: pl.DataFrame | None) -> pl.DataFrame:
    """Subset rows to write for changed state rows: members, and former members leaving."""
    now_in = rows.with_columns(subset_expr().alias("member"))
    if old is not None and old.height:
        was = old.filter(subset_expr()).select(KEY)
        now_in = now_in.filter(pl.col("member") | pl.col(KEY).is_in(was[KEY].implode()))
    else:
        now_in = now_in.filter(pl.col("member"))
    return now_in.select(list(SUBSET_SCHEMA))


def _read_aggregates(view: StoreView) -> tuple[pl.DataFrame, int]:
    if not view.partitions(AGG_TABLE):
        return pl.DataFrame(schema=AGG_SCHEMA), 0
    return (view.derived(AGG_TABLE, AGG_SCHEMA).collect(engine="in-memory"),
            view.row_count(AGG_TABLE))


@dataclasses.dataclass
class WarmState:
    """What a warm digest reads instead of every state row (see the section above).

    Attributes:
        view: the pinned generation.
        aggregates: aggregate rows whose sums, per (metric, key, at), are the aggregates at
            ``view`` (the stored rows and the changes of the rows above the watermark, not
            summed: readers sum what they select).
        subset_rows: the subset's state rows at ``view`` (members only), or None until
            `subset` reads them.
        touched: capsule numbers whose stored rows are stale (rows above the watermark).
        merged: their current state rows.
        rows_visited: Parquet rows read so far (the top-N readers add theirs).
        in_memory: ``merged`` holds the state rows folded now (nothing stored is read):
            every row, or (``tops``) the candidates of the top-N lists only.
        mark: the state's watermark (every stored row has a lower ``seq``).
        tops: with ``in_memory``, the top-N requests (``(n, order, keep)``) ``merged``
            was reduced to: the first ``n`` rows of each range of capsule numbers in
            ``order`` under ``keep`` (`fold_warm`); a request they cannot answer is
            refused. None: ``merged`` holds every state row.

    ``subset`` (read on first use): the subset's state rows at ``view``, members only.
    ``leaders(order, keep, n)``: the kept first rows of the newest or most-recalled list,
    as far as a request needs them (see `leaders_first`), or None when the job has not
    kept them.
    """

    view: Any
    aggregates: pl.DataFrame
    subset_rows: pl.DataFrame | None
    touched: pl.Series
    merged: pl.DataFrame
    rows_visited: int
    in_memory: bool = False
    mark: int = 0
    tops: tuple[tuple[int, str, pl.Expr], ...] | None = None
    old: pl.DataFrame | None = dataclasses.field(default=None, repr=False)
    _leader_groups: dict = dataclasses.field(default_factory=dict, repr=False)

    @functools.cached_property
    def sums(self) -> dict[tuple[str, str], int]:
        """The aggregates summed per (metric, key), the archive's instants left out."""
        rows = self.aggregates.filter(pl.col("metric") != "archive").group_by(
            "metric", "key").agg(pl.col("n").sum())
        return {(metric, key): int(n) for metric, key, n in rows.rows()}

    @property
    def subset(self) -> pl.DataFrame:
        """The subset's state rows at ``view``: the stored members not touched since the
        watermark and the touched rows that are members now (read on first use, counted
        in ``rows_visited``)."""
        if self.subset_rows is None:
            stored, n = read_subset(self.view)
            self.rows_visited += n
            rows = pl.concat([
                stored.filter(~pl.col(KEY).is_in(self.touched.implode()))
                .select(list(STATE_SCHEMA)),
                self.merged.filter(subset_expr()).select(list(STATE_SCHEMA)),
            ], how="vertical")
            # a touched member's text: the stored member's (text never changes before an
            # erasure, which the fold applies); the labels the sections group by read from
            # the capsules when not kept (after an erasure dropped them: headlines are read
            # for the rows emitted)
            self.subset_rows, n = fill_text(self.view, rows, stored, need=pl.col("threaded"))
            self.rows_visited += n
        return self.subset_rows

    def subset_changed(self) -> bool:
        """Did a row written since the watermark change the subset (a touched capsule that
        is, or was, a member)? Nothing is read: the touched rows' stored versions were."""
        if self.in_memory:
            return True
        return any(rows.height and rows.select(subset_expr().any()).item()
                   for rows in (self.merged, self.old) if rows is not None)

    def leaders(self, order: str, keep: pl.Expr, n: int) -> pl.DataFrame | None:
        """The kept leaders of list ``order`` as far as the first ``n`` rows satisfying
        ``keep`` need them, or None when the job has not kept them. Row groups are read in
        order (a list's rows are stored by rank, its floor last) until the floor, or
        until ``n + 1`` untouched entries satisfy ``keep``: the last entry read then
        stands for the floor (every entry left unread ranks below it). Counted in
        ``rows_visited``."""
        parts = self.view.partitions(LEADERS)
        if not parts:
            return None
        wanted = keep & qualifies_expr(order) & ~pl.col(KEY).is_in(self.touched.implode())
        read: list[pl.DataFrame] = []
        found = 0
        for part in parts:
            mins, maxs, counts = self.view.row_group_ranges(part, "list")
            for g, (lo, hi) in enumerate(zip(mins, maxs, strict=True)):
                if lo is not None and hi is not None and not lo <= order <= hi:
                    continue
                if (part.path, g) not in self._leader_groups:  # a group both lists share
                    self.rows_visited += counts[g]
                    self._leader_groups[part.path, g] = self.view.read_row_groups(
                        part, [g], LEADERS_SCHEMA)
                rows = self._leader_groups[part.path, g]
                if not lo == hi == order:
                    rows = rows.filter(pl.col("list") == order)
                read.append(rows)
                ends, hits = rows.select(pl.col("floor").any(),
                                         (wanted & ~pl.col("floor")).sum()).row(0)
                if ends:
                    return pl.concat(read, how="vertical")  # the whole list
                found += hits
                if found > n:
                    mine = pl.concat(read, how="vertical")
                    last = pl.int_range(pl.len()) == pl.len() - 1
                    return mine.with_columns(last.alias("floor"))
        return pl.concat(read, how="vertical") if read else None

    def top_rows(self, keep: pl.Expr, n: int, order: str, total: int | None = None
                 ) -> pl.DataFrame:
        """The first ``n`` state rows satisfying ``keep``, ``order`` being ``"newest"``
        (seq descending) or ``"recalled"`` (recall count desc, last recall desc, seq asc).

        Row groups of the state runs are read in the order of their statistics (the
        largest ``seq``, or the largest ``recall_count``, first) until no unread group can
        hold a row that would rank among the first ``n``, or until all ``total`` rows
        satisfying ``keep`` (when the caller knows how many there are) have been found.
        """
        if n <= 0:
            return self.merged.clear()
        if self.in_memory:
            if self.tops is not None and not any(
                    n <= m and order == o and keep.meta.eq(k) for m, o, k in self.tops):
                raise ValueError(f"the cold digest state holds the candidates of {self.tops}"
                                 f" only; asked for the first {n} {order!r} rows of {keep}")
            return _first(self.merged, n, order, keep)
        # rows at hand settle the list when they are all the qualifying rows, or (newest)
        # when n of them are new since the watermark (newer than every stored row)
        new = keep & (pl.col("seq") > self.mark)
        at_hand, fresh = self.merged.select(keep.sum().alias("a"), new.sum().alias("b")).row(0)
        if total is not None and at_hand >= total:
            return _first(self.merged, n, order, keep)
        if order == "newest" and fresh >= n:
            return _first(self.merged, n, order, new)
        leaders = self.leaders(order, keep, n)
        if leaders is not None:
            found = leaders_first(leaders, self.merged, self.touched, keep, n, order)
            if found is not None:
                return found
        column = "seq" if order == "newest" else "recall_count"
        runs = state_runs()
        groups = []
        for part in runs.partitions(self.view):
            _mins, maxs, counts = self.view.row_group_ranges(part, column)
            for g, hi in enumerate(maxs):
                groups.append((hi, part, g, counts[g]))
        # a group without statistics could hold anything: read it first
        groups.sort(key=lambda x: (x[0] is not None, -(x[0] or 0)))
        read: list[pl.DataFrame] = []
        stale = self.touched.implode()
        # the rows at hand are current: they rank above every stored version
        pool0 = self.merged.with_columns(pl.lit(2**62, dtype=pl.Int64).alias(keyed.VERSION))
        i = 0
        while True:
            exhausted = i >= len(groups)
            # the current row of each number read (its newest version), then the filter
            rows = pl.concat([pool0, *read], how="vertical") if read else pool0
            if read:
                rows = keyed.newest_rows(rows, KEY)
            rows = rows.filter(keep)
            if total is not None and rows.height >= total:
                exhausted = True  # every row that qualifies is at hand
            final = rows if exhausted else rows.filter(pl.col(column) > groups[i][0])
            if exhausted or final.height >= n:
                return _first(final.drop(keyed.VERSION), n, order)
            batch = groups[i:i + 4]
            i += len(batch)
            for _hi, part, g, count in batch:
                self.rows_visited += count
                frame = with_text(self.view.read_row_groups(part, [g], runs.stored_schema))
                read.append(frame.filter(~pl.col(KEY).is_in(stale)))


def _first(rows: pl.DataFrame, n: int, order: str, keep: pl.Expr | None = None
           ) -> pl.DataFrame:
    """The first ``n`` rows (satisfying ``keep``) in ``order`` (every key is total: seq
    is unique). Only the ordering columns of the candidates are ranked and the rows
    gathered at the end: a cold range's rows are wide, and filtering them would copy
    them (measured: +110 MiB at the 10M cold digest's peak)."""
    by, descending = _ORDERS[order]
    keys = rows.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_i"), *by,
                       (keep if keep is not None else pl.lit(True)).alias("_keep"))
    top = (keys.filter(pl.col("_keep"))
           .top_k(n, by=by, reverse=[not d for d in descending])
           .sort(by, descending=descending))
    return rows[top.get_column("_i").to_list()] if top.height else rows.clear()


#: capsules per range of the cold fold (`fold_warm`): the state rows of one range of
#: capsule numbers are folded, reduced to what the digest reads and let go before the
#: next range is folded, so the peak follows the range, not the store (measured at 10M
#: capsules: benchmarks/bench_digest.py --cold-warm)
FOLD_RANGE = 500_000

#: a top-N request of the digest: (n, order, keep), as `WarmState.top_rows` takes them
TopRequest = tuple[int, str, pl.Expr]


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


def _slice(frame: pl.DataFrame, lo: int | None, hi: int | None) -> pl.DataFrame:
    """The rows of ``frame`` (sorted by number) whose number is in ``[lo, hi)``."""
    numbers = frame.get_column(KEY)
    start = 0 if lo is None else int(numbers.search_sorted(lo, side="left"))
    end = frame.height if hi is None else int(numbers.search_sorted(hi, side="left"))
    return frame.slice(start, max(end - start, 0))


def _capsule_spans(view: StoreView) -> tuple[list[int], list[tuple[Partition, int, int]]]:
    """The first capsule number of each range after the first (every ``FOLD_RANGE``-th
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
    bounds = ordered.gather_every(FOLD_RANGE).slice(1).unique(maintain_order=True).to_list()
    return bounds, spans


def _in_range(expr: pl.Expr, lo: int | None, hi: int | None) -> pl.Expr:
    """``lo <= expr < hi`` (an open end when None)."""
    inside = pl.lit(True)
    if lo is not None:
        inside = inside & (expr >= lo)
    if hi is not None:
        inside = inside & (expr < hi)
    return inside


def _own(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in buffers of its own. A filtered or gathered frame shares the text
    buffers of the frame it was taken from: the few rows kept of a range would keep all
    of that range's text alive."""
    own = cast(pl.DataFrame, pl.from_arrow(frame.to_arrow()))
    return own.cast(dict(frame.schema))


def _fold_ranges(view: StoreView, tops: tuple[TopRequest, ...] | None
                 ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """Fold every source row range by range of capsule numbers (every partial is keyed by
    its number, so a range's state rows depend only on the rows naming its numbers) and
    keep of each range its aggregates, its subset rows and, given ``tops``, the first N
    rows of each request (the first N of the whole are among them); without ``tops``,
    every state row. Returns the aggregates, the subset, the rows kept and the Parquet
    rows read."""
    bounds, spans = _capsule_spans(view)
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
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sources: dict[str, pl.LazyFrame | pl.DataFrame] = {
            name: _slice(frame, lo, hi) for name, frame in narrow.items()}
        parts = [p for p, first, last in spans
                 if (lo is None or last >= lo) and (hi is None or first < hi)]
        if parts:
            visited += sum(p.rows for p in parts)
            sources["capsules"] = (view.scan_partitions("capsules", parts)
                                   .filter(_in_range(capsule_number_expr("id"), lo, hi))
                                   .select(_columns("capsules")))
        rows = fold_state(sources, engine="streaming")
        del sources
        aggregates.append(_own(aggregates_of(rows)))
        subset.append(_own(rows.filter(subset_expr())))
        if tops is None:
            kept.append(rows)
        else:
            kept.extend(_own(_first(rows, n, order, keep)) for n, order, keep in tops if n > 0)
        del rows
    merged = pl.concat(kept, how="vertical") if kept else pl.DataFrame(schema=STATE_SCHEMA)
    if tops is not None:  # a row may be a candidate of several requests
        merged = merged.unique(KEY, keep="first", maintain_order=True)
    return (merge_aggregates(*aggregates), pl.concat(subset, how="vertical"), merged,
            visited)


def fold_warm(view: StoreView, tops: tuple[TopRequest, ...] | None = None
              ) -> tuple[WarmState, dict[str, pl.LazyFrame]]:
    """A `WarmState` folded now from every source row at ``view``, trusting nothing
    stored (the cold digest): `fold_state` folds the rows of one range of ``FOLD_RANGE``
    capsule numbers at a time (the streaming engine over narrow column groups), and each
    range is reduced to its aggregates, its subset rows and the candidates of the top-N
    requests ``tops`` (`WarmState.top_rows`; None keeps every state row) before the next
    is folded. Also returns the source rows (lazily) for the digest's fail-closed checks.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"}
        ...                   for i in range(3)])
        >>> newest = (1, "newest", population_expr())
        >>> warm, _sources = fold_warm(store.pinned(), (newest,))
        >>> warm.top_rows(population_expr(), 1, "newest").get_column("num").to_list()
        [3]
    """
    sources, _visited, _top = scan_all(view)
    aggregates, subset, merged, visited = _fold_ranges(view, tops)
    return (WarmState(view, aggregates, subset, pl.Series(KEY, [], dtype=pl.Int64), merged,
                      visited, in_memory=True, tops=tops), sources)


def read_warm(view: StoreView, shared: Shared | None = None
              ) -> tuple[WarmState, dict[str, pl.DataFrame]] | None:
    """The aggregates at ``view``, with the subset read on first use (and the rows read
    above the watermark, for the digest's fail-closed checks), or None when the job never
    recorded them (the digest then reads every state row). ``shared``: source parts the
    caller read already (the journal parts its chain check walked), as `read_above`."""
    mark = watermark_of(view)
    if mark is None or not view.partitions(AGG_TABLE):
        return None
    delta, visited, _top = read_above(view, mark, shared)
    touched = _touched(delta)
    old, n = state_runs().read_keys(view, touched)
    old = with_text(old)
    visited += n
    merged = fold_state(delta, old if old.height else None) if delta else \
        pl.DataFrame(schema=STATE_SCHEMA)
    visited += view.row_count(AGG_TABLE)
    # the stored aggregates and the changes, unsummed: a reader sums what it selects
    aggregates = pl.concat([view.derived(AGG_TABLE, AGG_SCHEMA), *(
        contributions(rows, sign) for rows, sign in ((merged, 1), (old, -1)) if rows.height)],
        how="vertical").collect(engine="in-memory")
    wanted = pl.Series(touched, dtype=pl.Int64)
    warm = WarmState(view, aggregates, None, wanted, merged.select(list(STATE_SCHEMA)),
                     visited, mark=mark, old=old)
    return warm, delta


# -- the leaders: the first rows of the newest and most-recalled lists, kept ---------------
#
# Per list, the ``LEADERS_K`` qualifying rows ranking first and a *floor* ranking at least
# as high as every row left out (none: the list is complete). A digest replaces the
# entries touched since the watermark by their current rows and takes the first N when
# the N-th ranks above the floor; else it reads the state's row groups. The job keeps the
# table from the changed rows and refills it from every row when a list runs low.

#: (the leaders keep the text of their entries, which a digest emits as they are: under
#: the text prefix, so an erasure writes them again without the erased capsules' rows,
#: which the digest reads as touched rows anyway)
LEADERS = "projections/text/digest_leaders"
#: rows kept per list (a digest with N above it reads the state's row groups instead)
LEADERS_K = 256
LEADERS_SCHEMA = pl.Schema({**STATE_SCHEMA, "list": pl.String(), "floor": pl.Boolean()})
#: rows per row group: a digest reads a list's first groups, until its first N are certain
LEADERS_GROUP_ROWS = 16
_ORDERS: dict[str, tuple[list[str], list[bool]]] = {
    "newest": (["seq"], [True]),
    "recalled": (["recall_count", "last_recalled_at", "seq"], [True, True, False]),
}


@functools.cache
def qualifies_expr(order: str) -> pl.Expr:
    """Can a state row appear in list ``order`` (before any fence)?"""
    keep = population_expr()
    return keep & pl.col("last_recalled_at").is_not_null() if order == "recalled" else keep


def _ranks_above(order: str, floor: Mapping[str, Any]) -> pl.Expr:
    """Does a row rank strictly before ``floor`` in list ``order``?"""
    by, descending = _ORDERS[order]
    above = pl.lit(False)
    tied = pl.lit(True)
    for column, desc in zip(by, descending, strict=True):
        value = pl.lit(floor[column], dtype=STATE_SCHEMA[column])
        better = pl.col(column) > value if desc else pl.col(column) < value
        above = above | (tied & better.fill_null(False))
        tied = tied & (pl.col(column) == value).fill_null(False)
    return above


def _ranked(rows: pl.DataFrame, order: str) -> pl.DataFrame:
    by, descending = _ORDERS[order]
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
    for order in _ORDERS:
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
    for order in _ORDERS:
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
    first = _first(candidates, n, order, keep & qualifies_expr(order))
    if not floor.height:
        return first  # every qualifying row is at hand
    if first.height < n:
        return None
    # does the n-th rank strictly before the floor?
    last, bound = first.row(-1, named=True), floor.row(0, named=True)
    for column, desc in zip(*_ORDERS[order], strict=True):
        if last[column] is None or bound[column] is None:
            return None
        if last[column] != bound[column]:
            return first if (last[column] > bound[column]) == desc else None
    return None


def _read_leaders(view: StoreView) -> tuple[pl.DataFrame | None, int]:
    if not view.partitions(LEADERS):
        return None, 0
    return (view.derived(LEADERS, LEADERS_SCHEMA).collect(engine="in-memory"),
            view.row_count(LEADERS))
