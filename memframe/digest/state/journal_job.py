"""The job that records the journal's verified checkpoint (`stage_checkpoint`).

When the chain is intact at a generation, the job records the last verified ``audit_seq``,
its hash and the rows verified (watermark ``projections/digest/journal``), one row per part
verified now and a seal over those parts' identities; `journal` checks the chain against
what it recorded.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.digest.state import journal

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView
    from memframe.store.capture import Commit

__all__ = ["CheckpointReport", "stage_checkpoint"]

#: the checkpoint table is rewritten as one part once it has more parts than this
MAX_CHECKPOINT_PARTS = 8


@dataclasses.dataclass(frozen=True)
class CheckpointReport:
    """What one recording did: rows read, parts recorded, the verified tail (and the parts
    an incremental walk read, with their rows: `ChainCheck.read`)."""

    rows_visited: int
    parts_recorded: int
    audit_seq: int
    walked: str
    read: tuple[tuple[Partition, ...], pl.DataFrame] | None = None


def _nothing_new(view: StoreView, mark: dict[str, Any] | None) -> bool:
    """True when the journal has no part the checkpoint has not seen and its seal, if it
    has one, still holds (nothing is read; a seal broken by a copy of the store is
    recorded again)."""
    parts = view.partitions("journal")
    if mark is None:
        return not parts
    return (len(parts) == int(mark.get("parts", -1))
            and all((p.seq_hi or 0) <= int(mark.get("seq", -1)) for p in parts)
            and (not mark.get("seal") or journal.is_sealed(view, mark)))


def stage_checkpoint(commit: Commit, view: StoreView, *, full: bool = False
                     ) -> CheckpointReport:
    """Verify the chain at ``view`` and, when intact, stage the checkpoint on ``commit``.

    Records a row for every part verified now (appended; the whole table is rewritten
    after a full walk, when parts recorded racily can now be trusted, or once it has
    many parts) and moves the watermark to the last verified row. A broken chain stages
    nothing; a journal with no part the checkpoint has not seen reads and stages nothing.
    """
    mark = journal.watermark_of(view)
    if not full and _nothing_new(view, mark):
        return CheckpointReport(0, 0, int((mark or {}).get("audit_seq", 0)), "none")
    check = journal.check_chain(view, "full" if full else "incremental", record=True)
    if check.section["chain"] != "ok" or check.tail is None:
        return CheckpointReport(check.rows_visited, 0, int((mark or {}).get("audit_seq", 0)),
                                check.walked)
    audit_seq, chained = check.tail
    fresh = list(check.fresh)
    recorded = list(check.recorded)
    retrusted = False
    # parts recorded racily, or whose identity moved with their bytes unchanged (a copy of
    # the store, a restored backup): their identity now, fingerprinted with their bytes
    for i, row in enumerate(recorded):
        if view.partition_identity(row["path"]) != {
                k: row[k] for k in ("size", "inode", "mtime_ns", "ctime_ns")}:
            fp = view.partition_fingerprint(row["path"])
            if fp["sha256"] == row["sha256"] and fp["ctime_ns"] is not None:
                recorded[i] = {**row, **fp}
                retrusted = True
    if check.walked == "full" or retrusted:
        rows, replace = recorded + fresh, True
    else:
        replace = len(view.partitions(journal.TABLE)) >= MAX_CHECKPOINT_PARTS
        rows = recorded + fresh if replace else fresh
    frame = pl.DataFrame(rows, schema=journal.CHECKPOINT_SCHEMA, orient="row")
    commit.write_derived(journal.TABLE, frame.sort("audit_lo", nulls_last=True), replace=replace)
    parts = view.partitions("journal")
    commit.set_watermark(journal.WATERMARK, {
        "audit_seq": audit_seq,
        "hash": chained,
        "verified": int(check.section["verified"]),
        "seq": max((p.seq_hi or 0 for p in parts), default=0),
        "parts": len(parts),
        "seal": journal.seal_of(recorded + fresh),
    })
    return CheckpointReport(check.rows_visited, len(fresh), audit_seq, check.walked, check.read)
