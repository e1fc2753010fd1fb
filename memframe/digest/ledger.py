"""Store-global audit and upkeep sections: tiers (reference 4.13), journal (4.14) and
archive_candidates (4.15)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import polars as pl

from memframe._scalars import as_int
from memframe.schema import ARCHIVE_AFTER_DAYS, FORGET_ACTIONS, STALE_AFTER_NS, TIERS, TIMESTAMP
from memframe.taint import has_finding
from memframe.text import epoch_ns, journal_lines, sha256_hex

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView

__all__ = [
    "tiers_section",
    "verify_chain",
    "chain_walk",
    "walk_parts",
    "out_of_band",
    "journal_section",
    "archive_candidates",
    "FORGET_ACTIONS",
    "ARCHIVE_AFTER_DAYS",
]


def tiers_section(state: pl.DataFrame) -> dict:
    """Effective-tier counts of the non-tombstoned capsules, store-wide.

    Examples:
        >>> import polars as pl
        >>> s = pl.DataFrame({"status": ["live", "superseded", "tombstoned"],
        ...                   "tier": ["active", "archived", "active"]})
        >>> tiers_section(s)
        {'active': 1, 'archived': 1, 'quarantined': 0}
    """
    counts = (
        state.filter(pl.col("status") != "tombstoned")
        .group_by(pl.col("tier").fill_null("active"))
        .len()
    )
    found = dict(zip(counts["tier"].to_list(), counts["len"].to_list(), strict=True))
    return {tier: int(found.get(tier, 0)) for tier in TIERS}


VERIFY_SLICE_ROWS = 500_000
#: the journal columns the chain walk reads
JOURNAL_COLUMNS = ("seq", "audit_seq", "at", "actor", "action", "subject", "reason",
                   "chained_hash")


def chain_walk(journal: pl.DataFrame, *, previous: str = "", verified: int = 0,
               slice_rows: int = 500_000) -> dict:
    """Walk the hash chain of ``journal`` in audit order, from a stored hash on.

    Each row must carry ``sha256(previous row's stored hash + its canonical line)``; the
    first row's predecessor is ``previous`` (``""`` at the chain's start). Rows verify
    independently against their stored predecessors, so the walk goes in slices.

    Args:
        journal: journal rows (``audit_seq``, ``seq``, ``at``, ``actor``, ``action``,
            ``subject``, ``reason``, ``chained_hash``).
        previous: the stored hash of the row before the first one.
        verified: rows already verified before these (added to the count).
        slice_rows: rows hashed per slice (bounded string buffers).

    Returns:
        ``{"chain": "ok", "verified": verified + rows}`` or
        ``{"chain": "broken", "broken_seq": s}`` at the first row whose hash differs.

    Examples:
        >>> import datetime as dt, hashlib, polars as pl
        >>> t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> line = '{"seq":2,"at":"2026-01-01T00:00:00Z","actor":"a","action":"x","subject":"s","reason":null}'
        >>> j = pl.DataFrame({"seq": [5], "audit_seq": [2], "at": [t], "actor": ["a"],
        ...     "action": ["x"], "subject": ["s"], "reason": [None],
        ...     "chained_hash": [hashlib.sha256(("h1" + line).encode()).hexdigest()]},
        ...     schema_overrides={"reason": pl.String})
        >>> chain_walk(j, previous="h1", verified=1)
        {'chain': 'ok', 'verified': 2}
        >>> chain_walk(j)
        {'chain': 'broken', 'broken_seq': 2}
    """
    if journal.height == 0:
        return {"chain": "ok", "verified": verified}
    ordered = journal
    if not journal.get_column("audit_seq").is_sorted():
        ordered = journal.sort(["audit_seq", "seq"])
    # each row is checked against the stored hash before it (the first against ``previous``)
    before = ordered.get_column("chained_hash").shift(1).scatter(0, previous)
    for offset in range(0, ordered.height, slice_rows):
        rows = ordered.slice(offset, slice_rows)
        prev = before.slice(offset, slice_rows)
        expected = sha256_hex(journal_lines(rows), prefix=prev)
        mismatch = (rows.get_column("chained_hash") != expected).fill_null(True)
        if mismatch.any():
            first = mismatch.arg_true()[0]
            return {"chain": "broken", "broken_seq": int(rows["audit_seq"][first])}
    return {"chain": "ok", "verified": verified + ordered.height}


def walk_parts(view: StoreView, parts: Sequence[Partition], slice_rows: int,
               read: Callable[[Partition], pl.DataFrame] | None = None
               ) -> tuple[dict, tuple[int, str] | None, int] | None:
    """The full walk, one part at a time (bounded memory), when the parts follow each other
    in audit order (each sorted, each starting above the last); None otherwise. ``read``
    reads one part's ``JOURNAL_COLUMNS`` (default: the view's reader)."""
    previous, verified, tail = "", 0, (0, "")
    for i, part in enumerate(parts):
        frame = (view.read_partitions("journal", [part], JOURNAL_COLUMNS) if read is None
                 else read(part))
        if frame.height == 0:
            continue
        audit = frame.get_column("audit_seq")
        if not audit.is_sorted() or as_int(audit.min()) <= tail[0]:
            return None
        section = chain_walk(frame, previous=previous, verified=verified,
                             slice_rows=slice_rows)
        if section["chain"] != "ok":
            # the first break in audit order only if no later part numbers a row below it
            rest = view.read_partitions("journal", parts[i + 1:], ["audit_seq"])
            if rest.height and as_int(rest["audit_seq"].min()) <= as_int(audit.max()):
                return None
            return section, None, rest.height
        tail = (int(audit[-1]), str(frame["chained_hash"][-1]))
        previous, verified = tail[1], section["verified"]
    return {"chain": "ok", "verified": verified}, tail, 0




def verify_chain(journal: pl.DataFrame) -> dict:
    """Walk the whole hash chain in audit order (`chain_walk` from the chain's start; see
    :mod:`memframe.digest.state.journal` for the checkpointed walk)."""
    return chain_walk(journal, slice_rows=VERIFY_SLICE_ROWS)


def out_of_band(state: pl.DataFrame) -> int:
    """Coverage misses: non-tombstoned capsules no audit row names as subject, plus
    tombstoned capsules with no ``memory_forget``/``memory_merge`` row naming them,
    answered from the capsule-state fold's coverage flags (``named``, ``forget_named``:
    `memframe.state`)."""
    return int(state.select(
        ((pl.col("status") != "tombstoned") & ~pl.col("named").fill_null(False)).sum()
        + ((pl.col("status") == "tombstoned") & ~pl.col("forget_named").fill_null(False))
        .sum()
    ).item())


def journal_section(journal: pl.DataFrame | None, state: pl.DataFrame,
                    chain: dict | None = None) -> dict:
    """``{"chain", "verified"|"broken_seq", "out_of_band"}`` (reference 4.14).

    ``chain`` is the chain verdict when the caller already has it (a store's digest
    checks the chain from its verified checkpoint); otherwise the whole chain is walked.
    """
    if chain is not None:
        section = dict(chain)
    elif journal is not None:
        section = verify_chain(journal)
    else:
        raise ValueError("journal_section needs the journal rows or the chain verdict")
    section["out_of_band"] = out_of_band(state)
    return section


def archive_candidates(state: pl.DataFrame, now: _dt.datetime,
                       attach: Callable[[pl.DataFrame], pl.DataFrame] | None = None) -> int:
    """How many records the consolidation planner would propose archiving (4.15).

    A non-tombstoned capsule counts when it is superseded, its effective tier is
    ``active``, it is not pinned (the pin veto), it does not pass the quarantine guard (tainted AND externally-imported
    AND the taint scanner finds something), and either ``valid_to < now`` or it is more
    than 180 whole days old with no recall. ``attach`` adds ``content`` to the suspects
    when the state was read without it.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> now = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
        >>> s = pl.DataFrame({"status": ["superseded"], "tier": ["active"],
        ...     "superseded": [True], "valid_to": [None],
        ...     "created_at": [dt.datetime(2025, 1, 1, tzinfo=dt.UTC)], "recall_count": [0],
        ...     "instruction_taint": [False], "authority_class": ["observed-fact"],
        ...     "content": ["old"], "pinned": [False]}, schema_overrides={"valid_to": pl.Datetime("ns", "UTC")})
        >>> archive_candidates(s, now)
        1
    """
    now_lit = pl.lit(now).cast(TIMESTAMP)
    expired = pl.col("valid_to").is_not_null() & (pl.col("valid_to") < now_lit)
    # now - created_at >= 181 days, compared without subtracting instants: the difference
    # of two nanosecond instants wraps past 292 years (1678 -> 2027, 2262 -> 1700)
    latest_ns = epoch_ns(now) - STALE_AFTER_NS  # a Python int: never wraps
    old_enough = (pl.col("created_at").dt.epoch("ns") <= latest_ns
                  if latest_ns >= -(2**63) else pl.lit(False))
    stale = old_enough & (pl.col("recall_count").fill_null(0) == 0)
    unpinned = ~pl.col("pinned")
    shortlist = state.filter(
        (pl.col("status") != "tombstoned")
        & pl.col("superseded")
        & unpinned
        & (pl.col("tier").fill_null("active") == "active")
        & (expired | stale)
    )
    suspect = pl.col("instruction_taint") & (pl.col("authority_class") == "externally-imported")
    scanned = shortlist.filter(suspect)
    if scanned.height == 0:
        return shortlist.height
    if scanned.height and "content" not in scanned.columns and attach is not None:
        scanned = attach(scanned)  # the taint scan reads only the suspects' content
    return shortlist.height - scanned.filter(has_finding(pl.col("content"))).height
