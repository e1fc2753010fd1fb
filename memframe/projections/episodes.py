"""Episodes: bursts of a conversation, segmented by a forward-only walk (not a projection).

An episode is a run of a conversation's capsules, in ``(created_at, id)`` order, with no
silence longer than ``gap`` inside it. Unlike a session, an episode can be *open*: its
run may still continue. That state is why episodes are not a projection in spec 000's
sense (no closed-form fold): they are built by `run_episode_job`, a forward-only walk over
its own watermark:

* it walks the capsules written since its watermark together with the open tails it left
  last time;
* an episode closes when a later row of its conversation starts more than ``gap`` after it,
  or when the conversation has been quiet longer than ``gap`` (by the store's clock);
* closed episodes are appended to the derived table ``projections/episodes/closed`` and never
  rewritten; open tails are kept in ``projections/episodes/open`` for the next walk.

A row that arrives after its burst has closed (an older ``created_at`` written late) is
walked with the conversation's open tail, if it has one, or starts an episode of its own:
closed episodes are never reopened or rewritten.

`episodes` answers the closed episodes and, with ``include_open``, adds the still-open
tail at read time (the stored tails plus the rows the job has not walked yet), flagged
``open``. So the same row is in the session projection after the next cycle, but in a
closed episode only once its run has been quiet longer than the gap and the job has run.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from memframe import schema as S
from memframe.errors import InvalidInputError
from memframe.ids import capsule_number_expr
from memframe.projections.doors import Page, lines_hash
from memframe.store import StoreView
from memframe.text import epoch_ns, rfc3339

if TYPE_CHECKING:
    from memframe.store import Store
    from memframe.store.capture import Commit

__all__ = ["EPISODE_SCHEMA", "DEFAULT_GAP", "segment", "run_episode_job", "episodes",
           "EpisodeReport"]

CLOSED = "projections/episodes/closed"
OPEN = "projections/episodes/open"
WATERMARK = "projections/episodes"
GAP_KEY = "projections/episodes/gap_ns"
DEFAULT_GAP = dt.timedelta(minutes=30)
_ROW_GROUP_ROWS = 2_048

EPISODE_SCHEMA = pl.Schema(
    {
        "conversation_id": pl.String(),
        "first_at": S.TIMESTAMP,
        "last_at": S.TIMESTAMP,
        "memory_count": pl.Int64(),
        "first_member_id": pl.String(),
        "last_member_id": pl.String(),
        "open": pl.Boolean(),
    }
)


def _gap_ns(gap: dt.timedelta | float | int) -> int:
    if isinstance(gap, dt.timedelta):
        ns = (gap.days * 86_400 + gap.seconds) * 1_000_000_000 + gap.microseconds * 1_000
    elif isinstance(gap, int | float) and not isinstance(gap, bool):
        if not math.isfinite(gap):
            raise InvalidInputError(f"gap must be a finite number of seconds; got {gap!r}")
        ns = int(gap * 1_000_000_000)
    else:
        raise InvalidInputError(f"gap takes a timedelta or seconds; got {gap!r}")
    if ns <= 0:
        raise InvalidInputError(f"gap must be positive (e.g. timedelta(minutes=30)); got {gap!r}")
    return ns


def _num(expr: pl.Expr) -> pl.Expr:
    return capsule_number_expr(expr)


def _wide_ns(column: str) -> pl.Expr:
    return pl.col(column).dt.epoch("ns").cast(pl.Int128)


def capsule_partials(capsules: pl.DataFrame) -> pl.DataFrame:
    """Capsule rows with a conversation -> one-row episode partials."""
    return capsules.filter(pl.col("conversation_id").is_not_null()).select(
        "conversation_id",
        pl.col("created_at").alias("first_at"),
        pl.col("created_at").alias("last_at"),
        pl.lit(1, dtype=pl.Int64).alias("memory_count"),
        pl.col("id").alias("first_member_id"),
        pl.col("id").alias("last_member_id"),
    )


def segment(partials: pl.DataFrame, gap: dt.timedelta | float | int,
            now: dt.datetime) -> pl.DataFrame:
    """Segment episode partials into episodes, flagging each conversation's open tail.

    Within a conversation, partials are walked by ``(first_at, id number, id)``; a new
    episode starts where a partial begins more than ``gap`` after the latest instant seen
    so far. The last episode of a conversation is open while ``now - last_at <= gap``.

    Args:
        partials: rows of ``EPISODE_SCHEMA`` (without ``open``): single capsules or
            stored tails.
        gap: the longest silence inside an episode.
        now: the instant that decides whether a tail has gone quiet.

    Returns:
        Episodes (``EPISODE_SCHEMA``), ordered by conversation and first_at.

    Examples:
        >>> import polars as pl, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> m = dt.timedelta(minutes=1)
        >>> caps = pl.DataFrame({"id": ["cap-1", "cap-2", "cap-3"],
        ...                      "created_at": [t, t + m, t + 60 * m],
        ...                      "conversation_id": ["c", "c", "c"]})
        >>> out = segment(capsule_partials(caps), dt.timedelta(minutes=30), t + 61 * m)
        >>> out.select("memory_count", "first_member_id", "last_member_id", "open").rows()
        [(2, 'cap-1', 'cap-2', False), (1, 'cap-3', 'cap-3', True)]
    """
    gap_ns = _gap_ns(gap)
    if partials.height == 0:
        return pl.DataFrame(schema=EPISODE_SCHEMA)
    key = "conversation_id"
    frame = partials.with_columns(
        _num(pl.col("first_member_id")).alias("_fnum"),
        _num(pl.col("last_member_id")).alias("_lnum"),
    ).sort([key, "first_at", "_fnum", "first_member_id"])
    # instants as 128-bit integers: the difference of two nanosecond instants wraps past
    # 292 years (a row of 1678 and one of 2262), and a gap may be longer than that
    last_ns = _wide_ns("last_at")
    prev = last_ns.cum_max().shift(1).over(key)
    start = prev.is_null() | ((_wide_ns("first_at") - prev) > gap_ns)
    frame = frame.with_columns(start.cast(pl.Int64).cum_sum().over(key).alias("_episode"))
    out = frame.group_by([key, "_episode"]).agg(
        pl.col("first_at").min(),
        pl.col("last_at").max(),
        pl.col("memory_count").sum(),
        pl.col("first_member_id").sort_by("first_at", "_fnum", "first_member_id").first(),
        pl.col("last_member_id").sort_by("last_at", "_lnum", "last_member_id").last(),
    )
    now_ns = epoch_ns(now)
    quiet = (pl.lit(now_ns, dtype=pl.Int128) - _wide_ns("last_at")) > gap_ns
    is_tail = pl.col("_episode") == pl.col("_episode").max().over(key)
    return (out.with_columns((is_tail & ~quiet).alias("open"))
            .sort([key, "first_at", "_episode"]).select(list(EPISODE_SCHEMA)))


class EpisodeReport(dict):
    """What one episode job did: rows_visited, rows_walked, closed, open, generation."""


def _unwalked(view: StoreView, mark: int) -> tuple[pl.DataFrame, int, int]:
    parts = [p for p in view.partitions("capsules") if (p.seq_hi or 0) > mark]
    if not parts:
        return pl.DataFrame(schema={k: EPISODE_SCHEMA[k] for k in EPISODE_SCHEMA if k != "open"}), 0, mark
    caps = view.read_partitions("capsules", parts, ["seq", "id", "created_at", "conversation_id"]
                                ).filter(pl.col("seq") > mark)
    return capsule_partials(caps), sum(p.rows for p in parts), max(p.seq_hi or 0 for p in parts)


def _job(store: Store, commit: Commit, gap_ns: int) -> EpisodeReport:
    view = commit.view
    mark = int(view.watermarks.get(WATERMARK, 0) or 0)
    fresh, visited, new_mark = _unwalked(view, mark)
    tails = view.derived(OPEN, EPISODE_SCHEMA).collect(engine="in-memory")
    visited += view.row_count(OPEN)
    walked = pl.concat([tails.drop("open"), fresh], how="vertical")
    segs = segment(walked, dt.timedelta(microseconds=gap_ns / 1000), commit.now)
    closed = segs.filter(~pl.col("open")).sort("conversation_id", "first_at")
    still = segs.filter(pl.col("open")).sort("conversation_id", "first_at")
    report = EpisodeReport(rows_visited=visited, rows_walked=fresh.height,
                           closed=closed.height, open=still.height, generation=None)
    if closed.height == 0 and new_mark == mark and still.equals(tails.sort("conversation_id", "first_at")):
        return report  # nothing new and nothing went quiet: write nothing
    if closed.height:
        commit.write_derived(CLOSED, closed, replace=False, row_group_rows=_ROW_GROUP_ROWS)
    commit.write_derived(OPEN, still, replace=True, row_group_rows=_ROW_GROUP_ROWS)
    commit.set_watermark(WATERMARK, new_mark)
    commit.set_watermark(GAP_KEY, gap_ns)
    report["generation"] = commit.generation + 1
    return report


def run_episode_job(store: Store, gap: dt.timedelta | float | int = DEFAULT_GAP) -> EpisodeReport:
    """Walk the capsules written since the job's watermark into episodes (one commit).

    Args:
        store: the store to walk.
        gap: the longest silence inside an episode (timedelta or seconds; default 30 min).

    Returns:
        An `EpisodeReport` (a dict): rows_visited, rows_walked, closed (episodes closed
        now), open (tails left open), generation (None when nothing was written).

    Examples:
        >>> import memframe as mf, tempfile, os, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, 12, tzinfo=dt.timezone.utc)
        >>> now = [t]
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=lambda: now[0])
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a",
        ...                   "conversation_id": "conv-1"})
        >>> store.memory.run_episode_job(dt.timedelta(minutes=5))["closed"]
        0
        >>> now[0] = t + dt.timedelta(minutes=6)
        >>> store.memory.run_episode_job(dt.timedelta(minutes=5))["closed"]
        1
    """
    gap_ns = _gap_ns(gap)
    return store.commit(lambda c: _job(store, c, gap_ns), operation="memory_episodes")


def episodes(view: StoreView, conversation_id: str | Sequence[str] | None = None,
             include_open: bool = True) -> Page:
    """Closed episodes, plus (``include_open``) the still-open tail computed at read time.

    The open tail is the job's stored tails plus the capsules it has not walked yet,
    segmented with the job's last gap (the default gap if it never ran) and flagged
    ``open=True``: the job has not closed them.

    Args:
        view: the pinned generation to read.
        conversation_id: one id, several, or None for all.
        include_open: add the still-open tail.

    Returns:
        A `Page` of ``EPISODE_SCHEMA`` rows ordered by conversation and first_at; its hash
        covers the lines named.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a",
        ...                   "conversation_id": "conv-1"})
        >>> page = store.memory.episodes()
        >>> page.rows.select("memory_count", "open").rows()
        [(1, True)]
    """
    if conversation_id is None:
        ids = None
    else:
        ids = [conversation_id] if isinstance(conversation_id, str) else list(conversation_id)
    if ids is None:
        closed = view.derived(CLOSED, EPISODE_SCHEMA).collect(engine="in-memory")
        visited = view.row_count(CLOSED)
    else:
        closed, visited = view.read_matching(CLOSED, EPISODE_SCHEMA, "conversation_id", ids)
    frames = [closed]
    if include_open:
        mark = int(view.watermarks.get(WATERMARK, 0) or 0)
        gap_ns = int(view.watermarks.get(GAP_KEY, 0) or 0) or _gap_ns(DEFAULT_GAP)
        fresh, n, _ = _unwalked(view, mark)
        tails = view.derived(OPEN, EPISODE_SCHEMA).collect(engine="in-memory")
        visited += n + view.row_count(OPEN)
        walked = pl.concat([tails.drop("open"), fresh], how="vertical")
        if ids is not None:
            walked = walked.filter(pl.col("conversation_id").is_in(ids))
        far = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)  # every tail counts as still open
        segs = segment(walked, dt.timedelta(microseconds=gap_ns / 1000), far)
        frames.append(segs.with_columns(pl.lit(True).alias("open")))
    rows = pl.concat(frames, how="vertical").sort("conversation_id", "first_at", "open")
    lines = rows.select(pl.concat_str([
        pl.col("conversation_id"), pl.lit(" "), rfc3339(pl.col("first_at")), pl.lit(".."),
        rfc3339(pl.col("last_at")), pl.lit(" memories="), pl.col("memory_count").cast(pl.String),
        pl.lit(" first="), pl.col("first_member_id"), pl.lit(" last="),
        pl.col("last_member_id"), pl.when(pl.col("open")).then(pl.lit(" open")).otherwise(
            pl.lit("")),
    ]))
    return Page(rows, visited, lines_hash(lines.to_series().to_list()), False, rows.height)
