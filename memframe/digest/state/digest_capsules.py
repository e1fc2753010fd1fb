"""The digest's per-capsule state as stored: its runs, the source rows above them, and text.

One row per capsule number: `memframe.state.fold_state` of the nine per-capsule tables (the
one fold every reader of capsule state runs), stored as versioned sorted runs
(`memframe.derived.keyed`) under ``projections/digest_capsules/T<k>`` with the watermark
``projections/digest/capsules``. This module holds where the runs live (`state_runs`), the
watermark, the reads of the source rows above it (`read_above`, `scan_all`, the capsule
numbers they touch), the seal over the canonical parts folded (`seal_holds`), the state's
hash, and the text a row carries: the runs hold no text
read from content (old versions stay in them until a merge, so nothing an erasure must
remove may be in them), and `fill_text` reads a row's label and headline from its capsule
when no kept row carries them. Rows the digest fails closed on are never folded.

Beside the runs, in the same generation: the subset (`digest_subset`), the aggregates and
archive instants (`digest_aggregates`) and the leaders (`digest_leaders`); the job that
keeps them all is `capsule_job`, the readers `warm_reader` (from the kept state; also the
door) and `cold_fold` (every row, one range of capsule numbers at a time).
The layout, and what each part buys: docs/architecture.md ("The digest's state").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import keyed
from memframe.ids import capsule_number_expr
from memframe.schema import CANONICAL_TABLES, THREAD_PATTERN, empty_of
from memframe.state import (
    KEY,
    SOURCE_KEY,
    SOURCES,
    STATE_SCHEMA,
    STORED_SCHEMA,
    TEXT,
    fold_state,
    guarded_expr,
)
from memframe.store import fingerprint
from memframe.text import headline_expr

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView


NAME = "digest_capsules"


#: versioned with the state's columns: a store whose state has other columns rebuilds it
#: (the digest folds every row until then)
WATERMARK = "projections/digest/capsules"


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


def watermark_of(view: StoreView) -> int | None:
    mark = view.watermarks.get(WATERMARK)
    return int(mark) if mark is not None else None


@functools.cache
def source_columns(name: str) -> tuple[str | pl.Expr, ...]:
    if name == "capsules":
        return (*SOURCES["capsules"], *_text_of(pl.col("content")),
                guarded_expr().alias("guarded"))
    return tuple(SOURCES[name])


#: source parts another reader of the same cycle read already: table -> (the parts, every
#: row of them with at least the columns of `shared_columns`)
Shared = Mapping[str, tuple[Sequence["Partition"], pl.DataFrame]]


def shared_columns(name: str, have: Sequence[str]) -> list[str | pl.Expr]:
    """The columns (beside ``have``) a reader sharing its read of source ``name`` with the
    state adds to it (`read_above` then reads nothing more of those parts)."""
    return [c for c in source_columns(name) if not (isinstance(c, str) and c in have)]


def read_above(view: StoreView, mark: int, shared: Shared | None = None
               ) -> tuple[dict[str, pl.DataFrame], int, int]:
    """The rows of the six source tables with ``seq > mark``, the Parquet rows read, and
    the highest ``seq`` among the parts read (``mark`` when none). A table whose parts
    above ``mark`` are all among ``shared``'s is taken from there (nothing read)."""
    out: dict[str, pl.DataFrame] = {}
    visited, top = 0, mark
    for name in SOURCES:
        parts = [p for p in view.partitions(name) if (p.seq_hi or 0) > mark]
        if not parts:
            continue
        top = max(top, *(p.seq_hi or 0 for p in parts))
        names = [c if isinstance(c, str) else c.meta.output_name() for c in source_columns(name)]
        pre = (shared or {}).get(name)
        if pre is not None and {p.path for p in parts} <= {p.path for p in pre[0]}:
            out[name] = pre[1].select(names).filter(pl.col("seq") > mark)
            continue
        out[name], n = rows_above(view, name, mark, source_columns(name), parts)
        visited += n
    return out, visited, top


def rows_above(view: StoreView, name: str, mark: int, columns: Sequence[str | pl.Expr],
               parts: Sequence[Partition] | None = None) -> tuple[pl.DataFrame, int]:
    """The ``columns`` of source ``name``'s rows with ``seq > mark``, and the Parquet rows
    read: those of its ``parts`` that reach above ``mark`` (found when None; none: nothing
    read, the rows come back empty)."""
    if parts is None:
        parts = [p for p in view.partitions(name) if (p.seq_hi or 0) > mark]
    if not parts:
        from memframe.schema import empty_frame

        return empty_frame(name).select(columns), 0
    rows = (view.scan_partitions(name, parts).select(columns)
            .filter(pl.col("seq") > mark).collect(engine="in-memory"))
    return rows, sum(p.rows for p in parts)


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
        out[name] = view.scan_partitions(name, parts).select(source_columns(name))
    return out, visited, top


def touched_numbers(delta: Mapping[str, pl.DataFrame]) -> list[int]:
    nums = []
    for name, frame in delta.items():
        column = SOURCE_KEY.get(name, "capsule_id")
        if name == "relations":
            frame = frame.filter(pl.col("kind").is_in(["supersedes", "part_of"]))
        nums.append(frame.lazy().select(capsule_number_expr(column).alias(KEY)))
    if not nums:
        return []
    return (pl.concat(nums).drop_nulls().unique().sort(KEY).collect(engine="in-memory")
            .get_column(KEY).to_list())


def state_runs() -> keyed.KeyedRuns:
    """Where the state rows live: ``projections/digest_capsules/T<k>``, one current row
    per capsule number (its newest version), written by `stage_cycle` as runs. The runs
    store no text (`STORED_SCHEMA`): old versions stay in them until a merge, so nothing
    an erasure must remove may be in them."""
    return keyed.KeyedRuns(f"projections/{NAME}", STORED_SCHEMA, KEY,
                           row_group_rows=ROW_GROUP_ROWS)


def read_stored(view: StoreView, numbers: Sequence[int] | None = None
                ) -> tuple[pl.DataFrame, int]:
    """The stored state rows of capsule ``numbers`` (None: every row), their text unknown
    (`with_text`), and the Parquet rows read."""
    runs = state_runs()
    rows, visited = runs.read_all(view) if numbers is None else runs.read_keys(view, numbers)
    return with_text(rows), visited


def fold_touched(view: StoreView, delta: Mapping[str, pl.DataFrame], numbers: Sequence[int]
                 ) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """The stored rows of capsule ``numbers`` (`read_stored`: the numbers the rows above
    the watermark, ``delta``, touch, or some of them), those rows with ``delta`` folded in
    (state rows of every number ``delta`` touches), and the Parquet rows read."""
    old, visited = read_stored(view, numbers)
    return old, fold_state(delta, old if old.height else None) if delta else old, visited


def with_text(rows: pl.DataFrame) -> pl.DataFrame:
    """Stored state rows (`STORED_SCHEMA`, any extra columns kept) with the text columns
    added as unknown (null), in `STATE_SCHEMA`'s order."""
    missing = [pl.lit(None, dtype=pl.String).alias(c) for c in TEXT if c not in rows.columns]
    out = rows.with_columns(missing) if missing else rows
    extra = [c for c in out.columns if c not in STATE_SCHEMA]
    return out.select(*STATE_SCHEMA, *extra)


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
            if found else empty_of({KEY: pl.Int64, **{c: pl.String for c in TEXT}}))
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


# -- the seal over the canonical parts the state folded -------------------------------------
# The job records the sha256 of the path, row count and size of every canonical part its
# state folded (`fingerprint.SEAL_MARK`); a warm digest stats the parts and compares (one
# stat each, nothing read): when the seal does not hold it uses no derived state, and the
# next cycle rebuilds it. Sizes, not inodes, so that a copy of the store keeps its seal;
# an edit that keeps a part's size is seen only by ``verify="full"``. A compaction or an
# erasure seals the parts it rewrote again in its own commit.

def seal_of(view: StoreView, top: int | None = None,
            sizes: dict[str, int | None] | None = None) -> dict[str, Any] | None:
    """The seal of the canonical parts holding rows at or below ``top`` (default: every
    part) at ``view``, by their sizes now; None when a part cannot be stat'ed. ``sizes``: the
    sizes one job already stat'ed (path -> size), filled as parts are stat'ed, so that
    its check of the old seal and its new seal stat each part once."""
    if top is None:
        top = max((p.seq_hi or 0 for name in CANONICAL_TABLES for p in view.partitions(name)),
                  default=0)
    parts = {name: view.partitions(name) for name in CANONICAL_TABLES}
    size = view.partition_size
    if sizes is not None:
        def size(path: str) -> int | None:
            if path not in sizes:
                sizes[path] = view.partition_size(path)
            return sizes[path]
    return fingerprint.canonical_seal(view.path, parts, top, size)


def seal_holds(view: StoreView, sizes: dict[str, int | None] | None = None) -> bool:
    """Are the canonical parts holding rows at or below the recorded seal's ``seq`` the very
    files sealed? False when no seal was recorded (a store whose digest job never ran).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a"})
        >>> seal_holds(store.pinned())
        False
        >>> _ = store.memory.run_cycle()
        >>> seal_holds(store.pinned())
        True
    """
    recorded = view.watermarks.get(fingerprint.SEAL_MARK)
    if not isinstance(recorded, dict):
        return False
    now = seal_of(view, int(recorded.get("seq", -1)), sizes)
    return now is not None and now == recorded


def stage_seal(commit: Any, view: StoreView, sizes: dict[str, int | None] | None = None
               ) -> None:
    """Record the seal of every canonical part ``view`` names (the parts the job just
    folded), unless it is the one recorded (a cycle with nothing new writes nothing) or
    there is none (a virgin store)."""
    now = seal_of(view, None, sizes)
    if now is not None and now["parts"] and view.watermarks.get(fingerprint.SEAL_MARK) != now:
        commit.set_watermark(fingerprint.SEAL_MARK, now)
