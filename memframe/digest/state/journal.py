"""The journal's verified checkpoint: what lets a warm digest verify only what is new.

The digest job records, for an intact chain, the last verified ``audit_seq``, its hash and
the rows verified (watermark ``projections/digest/journal``), a row per verified part
(path, rows, audit range, sha256, file identity) and a seal over those identities. A warm
call confirms the verified parts are the very files verified (one stat each against the
seal, else part by part) and walks the rows above the checkpoint, or above the last part
before the ones a compaction merged; any other difference sends it to the full walk, so
its answer is always the full walk's. The trust model: docs/architecture.md ("Verifying
the journal"). `check_chain` checks the chain; `stage_checkpoint` records the checkpoint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe import schema as S
from memframe._scalars import as_int
from memframe.derived import job_report, read_whole
from memframe.digest.ledger import JOURNAL_COLUMNS, chain_walk, walk_parts
from memframe.digest.params import VERIFY_MODES
from memframe.store import fingerprint

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView
    from memframe.store.capture import Commit

__all__ = ["TABLE", "WATERMARK", "CHECKPOINT_SCHEMA", "ChainCheck", "check_chain", "is_sealed",
           "stage_checkpoint"]

TABLE = "projections/digest/journal"
WATERMARK = "projections/digest/journal"

#: one row per verified journal part
CHECKPOINT_SCHEMA = pl.Schema({
    "path": pl.String(), "rows": pl.Int64(), "audit_lo": pl.Int64(), "audit_hi": pl.Int64(),
    "sha256": pl.String(), "size": pl.Int64(), "inode": pl.Int64(), "mtime_ns": pl.Int64(),
    "ctime_ns": pl.Int64()})


# -- checking ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ChainCheck:
    """The outcome of checking the journal chain at one generation.

    Attributes:
        section: ``{"chain": "ok", "verified": n}`` or ``{"chain": "broken", "broken_seq": s}``.
        rows_visited: Parquet rows read (journal rows and checkpoint rows).
        walked: ``"full"`` or ``"incremental"``: how the answer was reached.
        reason: why a warm check walked in full, or from before parts a compaction merged.
        tail: ``(audit_seq, chained_hash)`` of the last verified row when the chain is ok.
        fresh: checkpoint rows for parts verified now and not yet (or no longer) recorded.
        recorded: the checkpoint rows that were confirmed (empty after a full walk).
        read: after an incremental walk, the parts walked and every row of them (the
            ``JOURNAL_COLUMNS``), for another reader of the same generation.
    """

    section: dict
    rows_visited: int
    walked: str
    reason: str | None = None
    tail: tuple[int, str] | None = None
    fresh: tuple[dict[str, Any], ...] = ()
    recorded: tuple[dict[str, Any], ...] = ()
    read: tuple[tuple[Partition, ...], pl.DataFrame] | None = None


def watermark_of(view: StoreView) -> dict[str, Any] | None:
    mark = view.watermarks.get(WATERMARK)
    return dict(mark) if isinstance(mark, dict) else None


def _read_parts(view: StoreView, parts: Sequence[Partition], record: bool
                ) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """Rows of ``parts`` (``record``: parsed from the very bytes fingerprinted) and their
    checkpoint rows."""
    if not record:
        return view.read_partitions("journal", parts, JOURNAL_COLUMNS), []
    read = view.read_partitions_fingerprinted("journal", parts, JOURNAL_COLUMNS)
    rows = []
    for part, (frame, fp) in zip(parts, read, strict=True):
        audit = frame.get_column("audit_seq")
        rows.append({"path": part.path, "rows": part.rows,
                     "audit_lo": as_int(audit.min()) if frame.height else None,
                     "audit_hi": as_int(audit.max()) if frame.height else None, **fp})
    if not read:
        return S.empty_frame("journal").select(JOURNAL_COLUMNS), rows
    return pl.concat([frame for frame, _ in read], how="vertical"), rows


def _tail(section: dict, frame: pl.DataFrame, fallback: tuple[int, str] | None
          ) -> tuple[int, str] | None:
    if section["chain"] != "ok" or frame.height == 0:
        return fallback if section["chain"] == "ok" else None
    last = frame.sort(["audit_seq", "seq"]).tail(1)
    return int(last["audit_seq"][0]), str(last["chained_hash"][0])


def _full(view: StoreView, journal: pl.DataFrame | None, record: bool, reason: str | None,
          visited: int, slice_rows: int) -> ChainCheck:
    parts = list(view.partitions("journal"))
    fresh: list[dict[str, Any]] = []
    if journal is None:
        def read(part: Partition) -> pl.DataFrame:  # each part fingerprinted as it is read
            frame, rows = _read_parts(view, [part], record)
            fresh.extend(rows)
            return frame

        walked = walk_parts(view, parts, slice_rows, read)
        if walked is not None and (not record or len(fresh) == len(parts)):
            section, tail, extra = walked
            return ChainCheck(section, visited + view.row_count("journal") + extra, "full",
                              reason, tail, tuple(fresh))
        fresh.clear()  # out of audit order (or broken before the last part): in one piece
    if journal is None or record:  # a journal the caller read is counted by the caller
        journal, fresh = _read_parts(view, parts, record)
        visited += view.row_count("journal")
    section = chain_walk(journal, slice_rows=slice_rows)
    return ChainCheck(section, visited, "full", reason, _tail(section, journal, (0, "")),
                      tuple(fresh))


def check_chain(view: StoreView, verify: str = "incremental", *,
                journal: pl.DataFrame | None = None, record: bool = False,
                slice_rows: int = 500_000) -> ChainCheck:
    """Verify the journal chain at ``view``: from the checkpoint on, or in full.

    Args:
        view: the pinned generation.
        verify: ``"incremental"`` (use the checkpoint when it holds) or ``"full"``.
        journal: the whole journal, when the caller already read it (used by a full walk).
        record: fingerprint the parts read (for the job that records the checkpoint).
        slice_rows: rows hashed per slice.

    Returns:
        A `ChainCheck`; its ``section`` is always the one the full walk gives.
    """
    if verify not in VERIFY_MODES:
        raise ValueError(verify)  # validated by the callers
    mark = watermark_of(view)
    if verify == "full":
        return _full(view, journal, record, None, 0, slice_rows)
    if mark is None:
        return _full(view, journal, record, "no checkpoint", 0, slice_rows)
    if not record and is_sealed(view, mark):  # confirmed without reading the rows
        return _above(view, journal, record, 0, (), mark, slice_rows,
                      [p for p in view.partitions("journal")
                       if (p.seq_hi or 0) > int(mark["seq"])])
    recorded, visited = read_whole(view, TABLE, CHECKPOINT_SCHEMA)
    reason, kept = _confirm(view, recorded, mark)
    # verified parts merged into new files: walked again from the last part kept before them
    back = _rewind(view, kept, mark) if reason and "no longer in" in reason else None
    if reason is not None and back is None:
        return _full(view, journal, record, reason, visited, slice_rows)
    known = {row["path"] for row in kept}
    new_parts = [p for p in view.partitions("journal") if p.path not in known]
    check = _above(view, journal, record, visited + (back or {}).get("read", 0), tuple(kept),
                   back or mark, slice_rows, new_parts)
    return dataclasses.replace(check, reason=reason and f"{reason}: walked from the part "
                               f"before it") if check.walked == "incremental" else check


def _rewind(view: StoreView, kept: list[dict[str, Any]], mark: dict[str, Any]
            ) -> dict[str, Any] | None:
    """The checkpoint as it stood at the last of ``kept`` (the parts confirmed from the
    chain's start), with the rows read for it; None when they are no unbroken start."""
    ends = [0] + [int(row["audit_hi"]) for row in kept]  # where each part's predecessor ends
    last = next((p for p in view.partitions("journal") if p.path == kept[-1]["path"]), None
                ) if kept else None
    if (last is None or last.seq_hi is None or ends[-1] >= int(mark["audit_seq"])
            or any(row["audit_lo"] != end + 1 for row, end in zip(kept, ends, strict=False))):
        return None
    tail, read = view.read_by_seq("journal", [last.seq_hi], ["audit_seq", "chained_hash"])
    if tail.height != 1 or as_int(tail["audit_seq"][0]) != ends[-1]:
        return None
    return {"audit_seq": ends[-1], "hash": str(tail["chained_hash"][0]), "read": read,
            "verified": sum(int(row["rows"]) for row in kept)}


def _above(view: StoreView, journal: pl.DataFrame | None, record: bool, visited: int,
           rows: tuple[dict[str, Any], ...], mark: dict[str, Any], slice_rows: int,
           new_parts: list[Partition]) -> ChainCheck:
    """The incremental walk once the recorded parts are confirmed: the parts the
    checkpoint does not name, verified from its hash on."""
    frame, fresh = _read_parts(view, new_parts, record)
    visited += sum(p.rows for p in new_parts)
    audit_seq, chained = int(mark["audit_seq"]), str(mark["hash"])
    if frame.height and as_int(frame.get_column("audit_seq").min()) <= audit_seq:
        return _full(view, journal, record, "a new journal row is numbered inside the "
                     "checkpoint", visited, slice_rows)
    section = chain_walk(frame, previous=chained, verified=int(mark["verified"]),
                         slice_rows=slice_rows)
    return ChainCheck(section, visited, "incremental", None,
                      _tail(section, frame, (audit_seq, chained)), tuple(fresh), rows,
                      (tuple(new_parts), frame))


#: at most this many parts with an untrusted identity ride in the checkpoint's watermark
#: beside its seal (more: no seal, the rows are read); a cycle under a stream of
#: single-row commits records the dozen or so written within the last racy window
MAX_RACY = 16


def seal_of(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The seal of recorded checkpoint rows: the sha256 of the path, row count and
    identity of every part whose identity is trusted (sorted by path), and the rows of the
    others (recorded within the racy window of their change time: only their bytes can
    confirm them); None when those are more than ``MAX_RACY``."""
    racy = [dict(row) for row in rows if row["ctime_ns"] is None]
    if len(racy) > MAX_RACY:
        return None
    trusted = [(row["path"], row["rows"], row) for row in rows if row["ctime_ns"] is not None]
    return {"sha256": fingerprint.seal(trusted), "racy": racy}


def is_sealed(view: StoreView, mark: dict[str, Any]) -> bool:
    """Are the verified parts, as the pinned generation names them (every journal part at
    or below the checkpoint's ``seq``), the very files sealed? The trusted ones by their
    identity now (one stat each, hashed together), the few untrusted ones by their bytes;
    no checkpoint row is read. False sends the caller to the row-by-row confirmation,
    which says what differs."""
    seal = mark.get("seal")
    if not seal:
        return False
    racy = {row["path"]: row for row in seal["racy"]}
    trusted, seen = [], 0
    for part in view.partitions("journal"):
        if (part.seq_hi or 0) > int(mark["seq"]):
            continue
        seen += 1
        row = racy.get(part.path)
        if row is not None:
            if part.rows != row["rows"] or not view.partition_is(part.path, row):
                return False
            continue
        identity = view.partition_identity(part)
        if identity is None:
            return False
        trusted.append((part.path, part.rows, identity))
    return seen == int(mark.get("parts", -1)) == len(trusted) + len(racy) \
        and fingerprint.seal(trusted) == seal["sha256"]


def _confirm(view: StoreView, recorded: pl.DataFrame, mark: dict[str, Any]
             ) -> tuple[str | None, list[dict[str, Any]]]:
    """What differs first (in audit order; None when every recorded part is the very file
    verified) and the recorded rows confirmed before it."""
    parts = {p.path: p for p in view.partitions("journal")}
    if recorded.height and (
        as_int(recorded["rows"].sum()) != int(mark.get("verified", -1))
        or as_int(recorded["audit_hi"].max()) != int(mark.get("audit_seq", -1))
    ):
        return "the checkpoint's rows disagree with its watermark", []
    if not recorded.height and int(mark.get("verified", -1)) != 0:
        return "the checkpoint's rows are missing", []
    kept: list[dict[str, Any]] = []
    for row in recorded.sort("audit_lo", nulls_last=True).iter_rows(named=True):
        part, name = parts.get(row["path"]), f"verified journal part {row['path']}"
        if part is None:
            return f"{name} is no longer in the generation", kept
        if part.rows != row["rows"]:
            return f"{name} now has {part.rows} rows", kept
        if not view.partition_is(row["path"], row):
            return f"{name} is not the file that was verified", kept
        kept.append(row)
    return None, kept


# -- recording -----------------------------------------------------------------------------

#: the checkpoint table is rewritten as one part once it has more parts than this
MAX_CHECKPOINT_PARTS = 8


def _nothing_new(view: StoreView, mark: dict[str, Any] | None) -> bool:
    """True when the checkpoint has seen every journal part and its seal, if any, holds
    (nothing is read; a seal a copy of the store broke is recorded again)."""
    parts = view.partitions("journal")
    if mark is None:
        return not parts
    return (len(parts) == int(mark.get("parts", -1))
            and all((p.seq_hi or 0) <= int(mark.get("seq", -1)) for p in parts)
            and (not mark.get("seal") or is_sealed(view, mark)))


def stage_checkpoint(commit: Commit, view: StoreView, *, full: bool = False
                     ) -> tuple[dict[str, int], tuple[tuple[Partition, ...], pl.DataFrame] | None]:
    """Verify the chain at ``view`` and, when intact, stage the checkpoint on ``commit``.

    Records a row for every part verified now (appended; the whole table is rewritten
    after a full walk or a compaction, when racy parts can now be trusted, or once it has
    many parts) and moves the watermark to the last verified row. A broken chain, or a
    journal the checkpoint has seen whole, stages nothing. Returns the job's report and,
    after an incremental walk, the parts it read with their rows (`ChainCheck.read`).
    """
    mark = watermark_of(view)
    if not full and _nothing_new(view, mark):
        return job_report(), None
    check = check_chain(view, "full" if full else "incremental", record=True)
    if check.section["chain"] != "ok" or check.tail is None:
        return job_report(check.rows_visited), None
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
    replace = (check.walked == "full" or retrusted or check.reason is not None
               or len(view.partitions(TABLE)) >= MAX_CHECKPOINT_PARTS)
    frame = pl.DataFrame(recorded + fresh if replace else fresh, schema=CHECKPOINT_SCHEMA,
                         orient="row")
    commit.write_derived(TABLE, frame.sort("audit_lo", nulls_last=True), replace=replace)
    parts = view.partitions("journal")
    commit.set_watermark(WATERMARK, {
        "audit_seq": audit_seq, "hash": chained, "verified": int(check.section["verified"]),
        "seq": max((p.seq_hi or 0 for p in parts), default=0), "parts": len(parts),
        "seal": seal_of(recorded + fresh)})
    return job_report(check.rows_visited, 0, len(fresh)), check.read
