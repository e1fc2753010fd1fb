"""The two callers of the session fold: the incremental cycle and the rebuild door.

* ``run_cycle`` reads only the canonical rows whose ``seq`` is above the projection's
  watermark (the partitions committed after it), folds them into one partial row per
  conversation they touch and lands those (appended as a run: no stored row is read,
  `memframe.projections.session_rows`) and the new watermark in ONE commit. Nothing is
  stamped on a canonical row; a cycle with nothing new writes nothing.
* ``rebuild`` folds every canonical row and replaces the projection, with its watermark,
  in one commit. It is a door, never run on a timer.

Both run inside ``Store._commit``: on a lost race the function is run again against the
newer generation, so each is a pure function of the generation the commit is pinned to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.projections import (
    digest_globals,
    digest_sections,
    digest_state,
    forgotten,
    journal,
    session_rows,
)
from memframe.projections.session import (
    capsule_partials,
    combine_partials,
    fold_sessions,
    summary_partials,
)
from memframe.store import StoreView

if TYPE_CHECKING:
    from memframe.store import Partition, Store
    from memframe.store.capture import Commit

__all__ = ["CycleReport", "WATERMARK", "run_cycle", "rebuild"]

NAME = "session"
KEY = "conversation_id"
#: the watermark key of the session projection in the generation log
WATERMARK = "projections/session"

_CAPSULE_COLUMNS = ["seq", "id", "created_at", "content_chars", "conversation_id"]
_SUMMARY_COLUMNS = ["seq", "conversation_id", "summary"]


@dataclasses.dataclass(frozen=True)
class CycleReport:
    """What one cycle (or rebuild) did.

    Attributes:
        rows_visited: Parquet rows read by the whole job (canonical partitions, projection
            row groups, the live-count indexes and the digest's journal checkpoint).
        rows_folded: canonical rows folded into the session projection (capsules with a
            conversation and summaries).
        rows_written: session partial rows written (one per conversation touched; every
            row for a rebuild).
        watermark: the highest canonical ``seq`` folded into the session projection.
        generation: the generation that landed them (None when nothing was written).
        projections: per maintained state (``session``; ``forgotten``, the live-count
            indexes of `memframe.projections.forgotten`; ``digest``, the journal
            checkpoint; ``digest_capsules``, the digest's per-capsule state of
            `memframe.projections.digest_state`; ``digest_globals``, the store-wide
            families; ``digest_sections``, the kept subset sections of
            `memframe.projections.digest_sections`), its own
            ``rows_visited``, ``rows_folded`` and ``rows_written``; ``rows_visited`` above
            adds up every state's reads.
    """

    rows_visited: int
    rows_folded: int
    rows_written: int
    watermark: int
    generation: int | None
    projections: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __repr__(self) -> str:
        """One line: what was folded, written and read, and where it landed.

        Examples:
            >>> CycleReport(120, 7, 2, 31, 5)
            <memframe CycleReport: folded 7 rows, wrote 2 session rows, read 120 rows; watermark 31; generation 5>
        """
        landed = (f"generation {self.generation}" if self.generation is not None
                  else "nothing to commit")
        return (f"<memframe CycleReport: folded {self.rows_folded:,} rows, wrote "
                f"{self.rows_written:,} session rows, read {self.rows_visited:,} rows; "
                f"watermark {self.watermark:,}; {landed}>")

    def _repr_html_(self) -> str:
        """A notebook table: one row per maintained state (what it read, folded, wrote)."""
        from memframe._render import fragment, rows_table

        landed = (f"generation {self.generation}" if self.generation is not None
                  else "nothing to commit")
        head = (f"<p><b>cycle</b>: folded {self.rows_folded:,} rows, wrote "
                f"{self.rows_written:,} session rows, read {self.rows_visited:,} rows; "
                f"watermark {self.watermark:,}; {landed}</p>")
        rows = [{"state": name, **part} for name, part in self.projections.items()]
        return fragment(head + (rows_table(rows) if rows else ""))


def _view_of(store: Store, commit: Commit) -> StoreView:
    return commit.view


def _read_parts(view: StoreView, table: str, parts: list[Partition], columns: list[str]
                ) -> pl.DataFrame:
    return view.read_partitions(table, parts, columns)


def watermark_of(view: StoreView) -> int:
    return int(view.watermarks.get(WATERMARK, 0) or 0)


def _combine(commit: Commit, mark: int, parts: dict[str, dict[str, int]]) -> CycleReport:
    visited = sum(p["rows_visited"] for p in parts.values())
    generation = None if commit.empty else commit.generation + 1
    return CycleReport(visited, parts["session"]["rows_folded"],
                       parts["session"]["rows_written"], mark, generation, parts)


def _part(visited: int, folded: int, written: int) -> dict[str, int]:
    return {"rows_visited": visited, "rows_folded": folded, "rows_written": written}


def _digest_cycle(view: StoreView, commit: Commit, *, full: bool = False,
                  shared: dict[str, Any] | None = None) -> dict[str, int]:
    """Advance the digest's state: the journal's verified checkpoint (the journal parts it
    read, with their rows, are added to ``shared``)."""
    report = journal.stage_checkpoint(commit, view, full=full)
    if shared is not None and report.read is not None:
        shared["journal"] = report.read
    return _part(report.rows_visited, 0, report.parts_recorded)


#: The cycle's stages, in order, as `run_cycle` reports them to its ``progress`` callback.
CYCLE_STAGES: tuple[str, ...] = (
    "session projection", "live-count indexes", "journal checkpoint", "digest state",
    "store-wide sections", "kept sections",
)

#: ``progress(done, total, stage)``: called before each stage of a cycle.
Progress = Callable[[int, int, str], None]


def _cycle(store: Store, commit: Commit, progress: Progress | None = None) -> CycleReport:
    def stage(i: int) -> None:
        if progress is not None:
            progress(i, len(CYCLE_STAGES), CYCLE_STAGES[i])

    view = _view_of(store, commit)
    old_mark = watermark_of(view)
    stage(0)
    session, mark, caps, shared = _session_cycle(view, commit)
    # the live-count indexes advance with the session projection's new watermark (sharing
    # the capsule rows it read when both start from the same mark), and the digest's state
    # takes the capsule parts it needs from the ones read here when it can
    stage(1)
    dead = forgotten.stage_cycle(commit, view, mark, capsules=(old_mark, caps))
    stage(2)
    checkpoint = _digest_cycle(view, commit, shared=shared)
    rebuilt: dict[str, Any] = {}  # the subset, when this cycle builds the state
    stage(3)
    state = digest_state.stage_cycle(commit, view, shared=shared, keep=rebuilt)
    stage(4)
    kept = digest_globals.stage_cycle(commit, view)
    # last: the kept sections follow the marks the state and the families just staged
    stage(5)
    sections = digest_sections.stage_cycle(commit, view, subset=rebuilt.get("subset"),
                                           shared=shared)
    return _combine(commit, mark, {"session": session, "forgotten": dead,
                                   "digest": checkpoint,
                                   "digest_capsules": state,
                                   "digest_globals": kept,
                                   "digest_sections": sections})


def _session_cycle(view: StoreView, commit: Commit
                   ) -> tuple[dict[str, int], int, pl.DataFrame | None, dict[str, Any]]:
    mark = watermark_of(view)
    cap_parts = [p for p in view.partitions("capsules") if (p.seq_hi or 0) > mark]
    sum_parts = [p for p in view.partitions("summaries") if (p.seq_hi or 0) > mark]
    if not cap_parts and not sum_parts:
        return _part(0, 0, 0), mark, None, {}
    visited = sum(p.rows for p in cap_parts) + sum(p.rows for p in sum_parts)
    new_mark = max(p.seq_hi or 0 for p in [*cap_parts, *sum_parts])
    after = pl.col("seq") > mark
    # the parts' rows, whole, with the digest state's columns too: read once per cycle
    every = view.scan_partitions("capsules", cap_parts).select(
        *_CAPSULE_COLUMNS, *digest_state.shared_columns("capsules", _CAPSULE_COLUMNS)
    ).collect(engine="in-memory") if cap_parts else None
    shared: dict[str, Any] = {} if every is None else {"capsules": (cap_parts, every)}
    caps = (every.select(_CAPSULE_COLUMNS) if every is not None
            else _read_parts(view, "capsules", [], _CAPSULE_COLUMNS))
    caps = caps.filter(after & pl.col(KEY).is_not_null())
    sums = _read_parts(view, "summaries", sum_parts, _SUMMARY_COLUMNS).filter(after)
    folded_in = caps.height + sums.height
    # the partials of the rows written since the watermark, one per conversation touched,
    # appended as a run: no stored row is read (readers combine a conversation's partials)
    partials = combine_partials(pl.concat([capsule_partials(caps.lazy()),
                                           summary_partials(sums.lazy())], how="vertical")
                                ).collect(engine="in-memory")
    if partials.height:
        visited += session_rows.stage_append(commit, view, partials)
    commit.set_watermark(WATERMARK, new_mark)
    written = partials.height
    return _part(visited, folded_in, written), new_mark, caps, shared


def run_cycle(store: Store, progress: Progress | None = None) -> CycleReport:
    """Fold what was written since the watermark into the session projection (one commit).

    ``progress(done, total, stage)``, when given, is called before each of the
    `CYCLE_STAGES` (again from the first when a lost race runs the cycle once more).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest([{"content": "hi", "source": "conversation", "anchor": "a",
        ...                    "conversation_id": "conv-1"}])
        >>> report = run_cycle(store)
        >>> session = report.projections["session"]
        >>> session["rows_folded"], session["rows_written"]
        (1, 1)
        >>> run_cycle(store).generation is None  # nothing new: nothing written
        True
    """
    return store.commit(lambda c: _cycle(store, c, progress), operation="memory_projections")


def _rebuild(store: Store, commit: Commit) -> CycleReport:
    view = _view_of(store, commit)
    cap_parts = list(view.partitions("capsules"))
    sum_parts = list(view.partitions("summaries"))
    visited = sum(p.rows for p in cap_parts) + sum(p.rows for p in sum_parts)
    caps = view.scan_partitions("capsules", cap_parts).select(
        _CAPSULE_COLUMNS)
    sums = view.scan_partitions("summaries", sum_parts).select(
        _SUMMARY_COLUMNS)
    rows = fold_sessions(caps, sums, engine="streaming")
    folded_in = int(rows["memory_count"].sum() or 0) + sum(p.rows for p in sum_parts)
    mark = max((p.seq_hi or 0 for p in [*cap_parts, *sum_parts]), default=0)
    return stage_rebuild(commit, rows, mark, rows_visited=visited, rows_folded=folded_in,
                         store=store)


def stage_rebuild(commit: Commit, rows: pl.DataFrame, watermark: int, *, rows_visited: int,
                  rows_folded: int, store: Store | None = None) -> CycleReport:
    """Stage a whole folded projection and its watermark on ``commit`` (the rebuild's landing).

    Shared by the rebuild door and the distributed rebuild, so both land identically. With
    ``store`` (the store the commit lands on), the live-count indexes and the digest's
    journal checkpoint are rebuilt in the same commit.
    """
    session_rows.stage_replace(commit, commit.view, rows)
    commit.set_watermark(WATERMARK, watermark)
    parts = {"session": _part(rows_visited, rows_folded, rows.height)}
    if store is not None:
        view = _view_of(store, commit)
        parts["forgotten"] = forgotten.stage_rebuild(commit, view, watermark)
        parts["digest"] = _digest_cycle(view, commit, full=True)
        rebuilt: dict[str, Any] = {}
        parts["digest_capsules"] = digest_state.stage_rebuild(commit, view, rebuilt)
        parts["digest_globals"] = digest_globals.stage_cycle(commit, view, full=True)
        parts["digest_sections"] = digest_sections.stage_cycle(
            commit, view, full=True, subset=rebuilt.get("subset"))
    return _combine(commit, watermark, parts)


def rebuild(store: Store) -> CycleReport:
    """Fold every canonical row and replace the session projection in one commit.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a",
        ...                   "conversation_id": "conv-1"})
        >>> rebuild(store).projections["session"]["rows_written"]
        1
    """
    return store.commit(lambda c: _rebuild(store, c), operation="memory_rebuild_projections")
