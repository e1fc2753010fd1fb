"""Store-global counters and sessions (reference 4.6): relations, open_sessions,
open_session_ids, audit_events. Never fenced."""

from __future__ import annotations

import polars as pl

from memframe.text import rfc3339

__all__ = ["open_sessions", "audit_events"]


def open_sessions(brackets: pl.DataFrame, n: int) -> tuple[int, list[str]]:
    """The exact open-session count and the first ``n`` open ids, oldest-open first.

    A session is open when it has a ``start`` bracket and no ``finish`` bracket. The
    order is the reference's: by the start instant as RFC3339 *text*, then by session
    id text (so a whole-second start sorts after a fractional start in the same second,
    as the reference's TEXT column does).

    Examples:
        >>> import datetime as dt, polars as pl
        >>> t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> b = pl.DataFrame({"seq": [1, 2, 3], "at": [t, t, t],
        ...                   "session_id": ["sess-1", "sess-2", "sess-1"],
        ...                   "event": ["start", "start", "finish"]})
        >>> open_sessions(b, 10)
        (1, ['sess-2'])
    """
    starts = (
        brackets.filter(pl.col("event") == "start")
        .group_by("session_id")
        .agg(pl.col("at").min())
    )
    finished = brackets.filter(pl.col("event") == "finish").select("session_id").unique()
    still_open = (
        starts.join(finished, on="session_id", how="anti")
        .with_columns(rfc3339(pl.col("at")).alias("started_at"))
        .sort(["started_at", "session_id"])
    )
    return still_open.height, still_open.get_column("session_id").head(n).to_list()


def audit_events(journal: pl.DataFrame) -> int:
    """Count of all journal (audit) rows.

    Examples:
        >>> import polars as pl
        >>> audit_events(pl.DataFrame({"audit_seq": [1, 2, 3]}))
        3
    """
    return journal.height
