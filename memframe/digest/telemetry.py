"""The fail-open legs: recall_misses, recent_failures, lane_overrides_total, sources
(reference 4.7-4.9). Each degrades on its own: ``recall_misses`` falls back to 0, the
others are omitted (returned as ``None``) when their table cannot be read or a row they
select fails validation."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from memframe.schema import (
    CORROBORATION_KINDS,
    CORROBORATION_VERDICTS,
    LANE_PAIRS,
    MISS_OUTCOMES,
)
from memframe.text import fold_term, headline, rfc3339

__all__ = [
    "RECENT_MISSES_N",
    "recall_misses_total",
    "recent_failures",
    "checked_total",
    "lane_overrides_total",
    "sources_section",
]

RECENT_MISSES_N = 5
_I64_MAX = 2**63 - 1


def recall_misses_total(misses: pl.DataFrame | None) -> int:
    """Rows in the recall-miss ledger; 0 when it could not be read.

    Examples:
        >>> import polars as pl
        >>> recall_misses_total(pl.DataFrame({"term": ["a", "b"]})), recall_misses_total(None)
        (2, 0)
    """
    return 0 if misses is None else misses.height


def _valid_miss(row: dict) -> bool:
    term = row["term"]
    seq = row["seq"]
    return (
        seq is not None
        and seq > 0
        and isinstance(term, str)
        and term != ""
        and any(ch.isalnum() for ch in term)
        and fold_term(term) == term
        and row["outcome"] in MISS_OUTCOMES
        and row["at"] is not None
    )


def recent_failures(misses: pl.DataFrame | None, fenced: bool) -> dict | None:
    """``{"recall_misses": [{term, outcome, at}]}``: the five newest misses by seq.

    Omitted (None) when fenced, unreadable, empty, or when any selected row fails the
    reference's validation (seq > 0; term non-empty, alphanumeric, already folded;
    outcome in the closed set; a time). Terms are shown through the headline law.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> t = dt.datetime(2026, 7, 23, 2, 5, 6, tzinfo=dt.UTC)
        >>> m = pl.DataFrame({"seq": [1], "at": [t], "term": ["older miss"],
        ...                   "outcome": ["missing_evidence"]})
        >>> recent_failures(m, fenced=False)
        {'recall_misses': [{'term': 'older miss', 'outcome': 'missing_evidence', 'at': '2026-07-23T02:05:06Z'}]}
    """
    if fenced or misses is None or misses.height == 0:
        return None
    newest = (
        misses.sort("seq", descending=True, nulls_last=False)
        .head(RECENT_MISSES_N)
        .with_columns(rfc3339(pl.col("at")).alias("at_text"))
    )
    rows = newest.to_dicts()
    if not all(_valid_miss(row) for row in rows):
        return None
    return {
        "recall_misses": [
            {"term": headline(row["term"]), "outcome": row["outcome"], "at": row["at_text"]}
            for row in rows
        ]
    }


def checked_total(counts: Iterable[int | None]) -> int | None:
    """Sum non-negative 64-bit counts with checked arithmetic; None on any bad term.

    Examples:
        >>> checked_total([1, 2])
        3
        >>> checked_total([1, -1]) is None, checked_total([2**63 - 1, 1]) is None
        (True, True)
    """
    total = 0
    for count in counts:
        if count is None or count < 0 or count > _I64_MAX:
            return None
        total += count
        if total > _I64_MAX:
            return None
    return total


def lane_overrides_total(overrides: pl.DataFrame | None) -> int | None:
    """All-time count of explicit lane choices that disagreed with auto routing.

    Every row is validated (seq > 0, ``(forced, auto_pick)`` one of the four allowed
    pairs, a time); the rows are counted per pair and the per-pair counts summed with
    :func:`checked_total`. None (omit the key) on an unreadable table, an invalid row,
    an overflow, or a total of 0.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> o = pl.DataFrame({"seq": [1, 2], "at": [t, t], "forced": ["term", "term"],
        ...                   "auto_pick": ["fused", "term"]})
        >>> lane_overrides_total(o) is None   # (term, term) is not an allowed pair
        True
        >>> lane_overrides_total(o.head(1))
        1
    """
    if overrides is None or overrides.height == 0:
        return None
    allowed = pl.DataFrame(
        {"forced": [p[0] for p in LANE_PAIRS], "auto_pick": [p[1] for p in LANE_PAIRS]}
    ).with_columns(pl.lit(True).alias("_ok"))
    checked = overrides.join(allowed, on=["forced", "auto_pick"], how="left")
    valid = (
        pl.col("_ok").fill_null(False)
        & pl.col("seq").is_not_null()
        & (pl.col("seq") > 0)
        & pl.col("at").is_not_null()
    )
    if not checked.select(valid.all()).item():
        return None
    per_pair = checked.group_by(["forced", "auto_pick"]).len()
    total = checked_total(per_pair["len"].to_list())
    return total or None


def sources_section(
    cursors: pl.DataFrame | None,
    corroborations: pl.DataFrame | None,
) -> dict | None:
    """``{"sources": [...]}``: one entry per scanned repository (reference 4.9).

    The cursor is the latest row per ``source_key``; the tallies come from the latest
    corroboration per ``(capsule_id, kind, ref)``, grouped by source vocabulary
    (``"git"``), so every ``git:`` cursor carries the same store-global numbers. None
    when no cursor exists, either table is unreadable or holds a row out of vocabulary.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> t = dt.datetime(2026, 7, 23, 12, tzinfo=dt.UTC)
        >>> cur = pl.DataFrame({"seq": [1], "at": [t], "source_key": ["git:/repo"],
        ...                     "cursor": ["headsha"]})
        >>> cor = pl.DataFrame({"seq": [2], "capsule_id": ["cap-2"], "source": ["git"],
        ...                     "kind": ["mention"], "ref": ["r"], "verdict": ["corroborated"]})
        >>> sources_section(cur, cor)["sources"][0]["mentions"]
        1
    """
    if cursors is None or corroborations is None or cursors.height == 0:
        return None
    if cursors.select(
        (pl.col("source_key").is_null() | pl.col("cursor").is_null() | pl.col("at").is_null()).any()
    ).item():
        return None
    bad = corroborations.filter(
        ~pl.col("kind").is_in(list(CORROBORATION_KINDS))
        | ~pl.col("verdict").is_in(list(CORROBORATION_VERDICTS))
        | pl.col("source").is_null()
        | pl.col("kind").is_null()
        | pl.col("verdict").is_null()
    )
    if bad.height:
        return None
    latest = corroborations.filter(
        pl.col("seq") == pl.col("seq").max().over(["capsule_id", "kind", "ref"])
    )
    mention = pl.col("kind") == "mention"
    tallies = latest.group_by("source").agg(
        (~mention & (pl.col("verdict") == "corroborated")).sum().cast(pl.Int64).alias("corroborated"),
        (~mention & (pl.col("verdict") == "drifted")).sum().cast(pl.Int64).alias("drifted"),
        (~mention & (pl.col("verdict") == "missing")).sum().cast(pl.Int64).alias("missing"),
        mention.sum().cast(pl.Int64).alias("mentions"),
    )
    rows = (
        cursors.filter(pl.col("seq") == pl.col("seq").max().over("source_key"))
        .with_columns(
            pl.col("source_key").str.split(":").list.first().alias("source"),
            rfc3339(pl.col("at")).alias("at"),
        )
        .join(tallies, on="source", how="left")
        .sort("source_key")
        .select(
            "source_key",
            "cursor",
            "at",
            *[pl.col(c).fill_null(0) for c in ("corroborated", "drifted", "missing", "mentions")],
        )
    )
    return {"sources": rows.to_dicts()}
