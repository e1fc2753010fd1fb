"""The read doors of the session projection: ``sessions`` and ``session_digest``.

Every door pins one generation, reads through it, and answers a `Page` that reports its
own bound: ``rows_visited`` is the real number of Parquet rows read (after row-group
pruning), never an estimate. A lookup by conversation id reads only the row groups whose
statistics can hold it.

The ``hash`` of a page is the sha256 of the lines it names. A caller that passes it back
as ``known_hash`` is told ``unchanged=True`` and handed no rows: that saves the CALLER's
tokens, never the engine's reads -- the door reads exactly what it would read anyway to
know whether anything changed.

``live_count`` (members not tombstoned) is not an exact fold term (a later forget shrinks
it), so it is never stored: the door computes it at read time from the forgotten counts
the cycle keeps per conversation plus the forgets written since (merge-on-read, see
`memframe.projections.forgotten`), so a lookup reads the new forgets and a few row groups
per key, whatever the store's size. A store that never had a capsule answers an empty
page, never an error.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from memframe import schema as S
from memframe.errors import InvalidInputError
from memframe.projections import forgotten, session_rows
from memframe.projections.session_rows import KEY, watermark_of
from memframe.text import parse_instant, rfc3339

if TYPE_CHECKING:
    from memframe.store import StoreView

__all__ = ["Page", "SESSIONS_SCHEMA", "DIGEST_SCHEMA", "sessions", "session_digest", "lines_hash"]

#: columns of a ``sessions()`` page
SESSIONS_SCHEMA = pl.Schema(
    {
        "conversation_id": pl.String(),
        "first_at": S.TIMESTAMP,
        "last_at": S.TIMESTAMP,
        "memory_count": pl.Int64(),
        "live_count": pl.Int64(),
        "content_chars": pl.Int64(),
        "last_member_id": pl.String(),
        "summary": pl.String(),
        "hash": pl.String(),
    }
)
#: columns of a ``session_digest()`` page
DIGEST_SCHEMA = pl.Schema({**{k: v for k, v in SESSIONS_SCHEMA.items() if k != "hash"},
                           "line": pl.String()})


@dataclasses.dataclass(frozen=True)
class Page:
    """One answer of a door.

    Attributes:
        rows: the rows (empty, with the door's columns, when ``unchanged``).
        rows_visited: Parquet rows actually read to answer.
        hash: sha256 of the lines this page names (see each door).
        unchanged: True when the caller's ``known_hash`` equals ``hash`` (no rows handed).
        total: rows that matched before ``limit`` cut the list.
    """

    rows: pl.DataFrame
    rows_visited: int
    hash: str
    unchanged: bool = False
    total: int | None = None

    def __len__(self) -> int:
        return self.rows.height

    def __repr__(self) -> str:
        """One line, not the dataclass dump of every row.

        Examples:
            >>> import polars as pl
            >>> Page(pl.DataFrame({"a": [1, 2]}), rows_visited=40, hash="ab" * 32, total=9)
            <memframe Page: 2 of 9 rows, 40 rows read, hash abababababab>
        """
        if self.unchanged:
            return f"<memframe Page: unchanged, {self.rows_visited:,} rows read, hash {self.hash[:12]}>"
        shown = (f"{self.rows.height:,} of {self.total:,}" if self.total is not None
                 and self.total != self.rows.height else f"{self.rows.height:,}")
        return (f"<memframe Page: {shown} rows, {self.rows_visited:,} rows read, "
                f"hash {self.hash[:12]}>")

    def _repr_html_(self) -> str:
        from memframe._render import door_page_html  # the leaf renderer

        return door_page_html(self.rows, rows_visited=self.rows_visited, page_hash=self.hash,
                              unchanged=self.unchanged, total=self.total)


def lines_hash(lines: Sequence[str]) -> str:
    """sha256 of the lines joined by newlines (the empty list hashes the empty text).

    Examples:
        >>> lines_hash([]) == hashlib.sha256(b"").hexdigest()
        True
    """
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def _limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInputError(f"limit takes a whole number >= 0 or None; got {limit!r}")
    return limit


def _live_counts(view: StoreView, rows: pl.DataFrame, keys: list[str] | None = None
                 ) -> tuple[pl.DataFrame, int]:
    """Add ``live_count``: members folded into each row minus those tombstoned now.

    With the forgotten-member indexes current (advanced with the session projection), the
    counts are read by key (``keys``: the conversations looked up, None for all) and the
    forgets written since are added; else every forget is read and its capsule looked up.
    """
    mark = watermark_of(view)
    if forgotten.usable(view, mark):
        if rows.height == 0:
            return rows.with_columns(pl.lit(0, dtype=pl.Int64).alias("live_count")).select(
                list(SESSIONS_SCHEMA)), 0
        dead, visited = forgotten.forgotten_counts(view, mark, keys)
        out = rows.join(dead.rename({"forgotten": "dead"}), on=KEY, how="left").with_columns(
            (pl.col("memory_count") - pl.col("dead").fill_null(0)).alias("live_count"))
        return out.select(list(SESSIONS_SCHEMA)), visited
    forgets = view.table("forgets").select("capsule_id")
    visited = view.row_count("forgets")
    gone: pl.Series | list[str] = (
        forgets.unique().collect(engine="in-memory")["capsule_id"] if visited else [])
    dead = pl.DataFrame(schema={KEY: pl.String, "dead": pl.Int64})
    if len(gone) and rows.height:
        members, n = view.read_matching("capsules", S.table_schema("capsules"), "id",
                                        list(gone), columns=["seq", KEY])
        visited += n
        mark = watermark_of(view)
        dead = (members.filter((pl.col("seq") <= mark) & pl.col(KEY).is_in(rows[KEY].implode()))
                .group_by(KEY).agg(pl.len().cast(pl.Int64).alias("dead")))
    out = rows.join(dead, on=KEY, how="left").with_columns(
        (pl.col("memory_count") - pl.col("dead").fill_null(0)).alias("live_count"))
    return out.select(list(SESSIONS_SCHEMA)), visited


def _select(view: StoreView, conversation_id: str | Sequence[str] | None,
            since: dt.datetime | str | None, limit: int | None) -> tuple[pl.DataFrame, int, int]:
    """The session rows a door names, ordered, cut, with live counts; visited; total."""
    since_at = parse_instant(since, "since")
    limit = _limit(limit)
    if conversation_id is None:
        rows, visited = session_rows.read_all(view)
    else:
        ids = [conversation_id] if isinstance(conversation_id, str) else list(conversation_id)
        if not all(isinstance(i, str) for i in ids):
            raise InvalidInputError("conversation_id takes a string, a list of strings or None")
        rows, visited = session_rows.read_keys(view, ids)
    rows = rows.filter(pl.col("memory_count") > 0)
    if since_at is not None:
        rows = rows.filter(pl.col("last_at") >= since_at)
    rows = rows.sort(["last_at", KEY], descending=[True, False], nulls_last=True)
    total = rows.height
    if limit is not None:
        rows = rows.head(min(limit, rows.height))  # a limit past any int64 cuts nothing
    # live counts by key for the rows named (a lookup, or a page cut by ``limit``)
    keys = None if conversation_id is None and limit is None else rows[KEY].to_list()
    rows, n = _live_counts(view, rows, keys)
    return rows, visited + n, total


def sessions(view: StoreView, conversation_id: str | Sequence[str] | None = None,
             since: dt.datetime | str | None = None, limit: int | None = None,
             known_hash: str | None = None) -> Page:
    """Session rows, newest activity first (``last_at`` desc, then ``conversation_id``).

    The page hash covers each named row's own hash and its live count, so it changes
    when a member is added, summarised or forgotten.

    Args:
        view: the pinned generation to read.
        conversation_id: one id or several (a key lookup reading only the row groups that
            can hold them), or None for every session.
        since: only sessions active at or after this instant (``last_at >= since``).
        limit: at most this many rows (``Page.total`` keeps the count before the cut).
        known_hash: a hash from an earlier page; when it matches, no rows are handed.

    Returns:
        A `Page` with the columns of ``SESSIONS_SCHEMA``.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> store.memory.sessions().rows.height  # never had a capsule: an empty page
        0
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a",
        ...                   "conversation_id": "conv-1"})
        >>> _ = store.memory.run_cycle()
        >>> page = store.memory.sessions(conversation_id="conv-1")
        >>> page.rows.select("memory_count", "live_count").row(0)
        (1, 1)
        >>> store.memory.sessions(known_hash=page.hash).unchanged
        True
    """
    rows, visited, total = _select(view, conversation_id, since, limit)
    lines = [f"{h} {n}" for h, n in rows.select("hash", "live_count").iter_rows()]
    digest = lines_hash(lines)
    if known_hash is not None and known_hash == digest:
        return Page(rows.clear(), visited, digest, True, total)
    return Page(rows, visited, digest, False, total)


def _lines(rows: pl.DataFrame) -> pl.DataFrame:
    span = rfc3339(pl.col("first_at")) + pl.lit("..") + rfc3339(pl.col("last_at"))
    summary = pl.when(pl.col("summary").is_null()).then(pl.lit("")).otherwise(
        pl.lit(" summary=") + pl.col("summary").map_batches(
            lambda s: pl.Series([json.dumps(v, ensure_ascii=False) for v in s.to_list()],
                                dtype=pl.String), return_dtype=pl.String))
    line = pl.concat_str([
        pl.col(KEY), pl.lit(" "), span,
        pl.lit(" memories="), pl.col("memory_count").cast(pl.String),
        pl.lit(" live="), pl.col("live_count").cast(pl.String),
        pl.lit(" chars="), pl.col("content_chars").cast(pl.String),
        pl.lit(" last="), pl.col("last_member_id"), summary,
    ])
    return rows.with_columns(line.alias("line")).select(list(DIGEST_SCHEMA))


def session_digest(view: StoreView, limit: int = 10, known_hash: str | None = None) -> Page:
    """One line per session (span, counts, last member), newest first, and their hash.

    A line reads ``<conversation_id> <first_at>..<last_at> memories=<n> live=<n>
    chars=<n> last=<capsule id>`` (plus `` summary="..."`` once one was recorded). The
    page hash is the sha256 of those lines joined by newlines. Passing it back as
    ``known_hash`` answers ``unchanged=True`` and no rows: that saves the caller's tokens
    (no bodies to re-read), never the engine's reads -- ``rows_visited`` is the same
    either way.

    Args:
        view: the pinned generation to read.
        limit: at most this many sessions (default 10; ``Page.total`` is the full count).
        known_hash: the hash of an earlier digest.

    Returns:
        A `Page` with the columns of ``DIGEST_SCHEMA``.

    Examples:
        >>> import memframe as mf, tempfile, os, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, 12, tzinfo=dt.timezone.utc)
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=lambda: t)
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a",
        ...                   "conversation_id": "conv-1"})
        >>> _ = store.memory.run_cycle()
        >>> page = store.memory.session_digest()
        >>> page.rows["line"][0]
        'conv-1 2026-07-23T12:00:00Z..2026-07-23T12:00:00Z memories=1 live=1 chars=2 last=cap-1'
        >>> again = store.memory.session_digest(known_hash=page.hash)
        >>> again.unchanged, again.rows.height
        (True, 0)
    """
    if limit is None:
        raise InvalidInputError("session_digest needs a limit (default 10)")
    rows, visited, total = _select(view, None, None, limit)
    rows = _lines(rows)
    digest = lines_hash(rows["line"].to_list())
    if known_hash is not None and known_hash == digest:
        return Page(rows.clear(), visited, digest, True, total)
    return Page(rows, visited, digest, False, total)
