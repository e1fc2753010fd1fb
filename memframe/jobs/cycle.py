"""The two jobs over every registered projection: the incremental cycle and the rebuild.

* ``run_cycle`` runs the cycle stage of every name in ``MEMORY_PROJECTION_NAMES``, in that
  order (`memframe.jobs.registry`): each reads only what was written above its
  watermarks and stages its rows and new watermarks; all land in ONE commit. Nothing is
  stamped on a canonical row; a cycle with nothing new writes nothing. When a table's
  newest partitions are many small ones (a stream of single-row commits), a compaction
  of just those lands first, in a commit of its own (`Store._compact_tail`: the same
  rows in fewer files).
* ``rebuild`` runs their rebuild stages: every projection folded from every canonical row
  and replaced, with its watermarks, in one commit. It is a door, never run on a timer.

Both run inside ``Store.commit``: on a lost race the function runs again against the
newer generation, so each is a pure function of the generation the commit is pinned to.
Two jobs in one ``store.transaction()`` are refused: the second would fold the rows the
first already folded (its view is the generation the transaction is pinned to).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.errors import InvalidInputError
from memframe.jobs import registry, stages
from memframe.jobs.stages import CYCLE_STAGES, Job, Progress, Reports

if TYPE_CHECKING:
    from memframe.store import Store
    from memframe.store.capture import Commit

__all__ = ["CycleReport", "CYCLE_STAGES", "Progress", "run_cycle", "rebuild", "stage_rebuild"]

_OPERATIONS = ("memory_projections", "memory_rebuild_projections")


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
            `memframe.digest.state.digest_capsules`; ``digest_globals``, the store-wide
            families; ``digest_sections``, the kept subset sections of
            `memframe.digest.state.sections`), its own
            ``rows_visited``, ``rows_folded`` and ``rows_written``; ``rows_visited`` above
            adds up every state's reads.
        notes: what the job could not do as asked, what it did instead and why (a state
            rebuilt because the parts it folded changed; a value not kept); empty when
            everything was kept as asked.
        merged_parts: per table, the newest small partitions merged before the cycle (in
            a commit of their own; the same rows), when a table had at least 16 of them
            below a tier's bound; empty otherwise.
    """

    rows_visited: int
    rows_folded: int
    rows_written: int
    watermark: int
    generation: int | None
    projections: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()
    merged_parts: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __repr__(self) -> str:
        """One line: what was folded, written and read, and where it landed.

        Examples:
            >>> CycleReport(120, 7, 2, 31, 5)
            <memframe CycleReport: folded 7 rows, wrote 2 session rows, read 120 rows; watermark 31; generation 5>
        """
        return f"<memframe CycleReport: {self._summary()}>"

    def _summary(self) -> str:
        landed = (f"generation {self.generation}" if self.generation is not None
                  else "nothing to commit")
        merged = sum(self.merged_parts.values())
        first = f"merged {merged:,} small partitions first; " if merged else ""
        return (f"{first}folded {self.rows_folded:,} rows, wrote {self.rows_written:,} "
                f"session rows, read {self.rows_visited:,} rows; watermark "
                f"{self.watermark:,}; {landed}")

    def _repr_html_(self) -> str:
        """A notebook table: one row per maintained state (what it read, folded, wrote)."""
        from memframe._render import esc, fragment, rows_table

        head = f"<p><b>cycle</b>: {esc(self._summary())}</p>"
        rows = [{"state": name, **part} for name, part in self.projections.items()]
        return fragment(head + (rows_table(rows) if rows else ""))


def _report(commit: Commit, job: Job, parts: Reports) -> CycleReport:
    visited = sum(p["rows_visited"] for p in parts.values())
    generation = None if commit.empty else commit.generation + 1
    return CycleReport(visited, parts["session"]["rows_folded"],
                       parts["session"]["rows_written"], job.new_mark, generation, parts,
                       tuple(job.notes))


def _claim(commit: Commit) -> None:
    """One job per commit: a second would fold again what the first staged (both read
    the generation the commit is pinned to, not each other's rows)."""
    if any(op in _OPERATIONS for op in commit.operations):
        raise InvalidInputError(
            "a transaction can hold one projection job (run_cycle or "
            "rebuild_projections); run the second after the transaction commits")


def _run(commit: Commit, stage: str, operation: str, progress: Progress | None = None
         ) -> CycleReport:
    _claim(commit)
    job = Job(commit, commit.view, progress=progress)
    if stage == "cycle":
        why = _rebuilds(commit.view)
        if why is not None:
            stage = "rebuild"
            job.notes.append(why)
    parts: Reports = {}
    for name in registry.MEMORY_PROJECTION_NAMES:
        parts.update(getattr(registry.PROJECTIONS[name], stage)(job))
    commit.operations.append(operation)
    # everything folded is at or below the watermarks: rows other writers append above
    # them meanwhile change none of it, so a lost race links these files on top of theirs
    commit.allow_rebase(lambda report, generation: dataclasses.replace(report,
                                                                      generation=generation))
    return _report(commit, job, parts)


def _rebuilds(view: Any) -> str | None:
    """Why a cycle at ``view`` folds every row range by range as the rebuild door does
    (the same state: rebuild == incremental), or None. A cycle folds the rows above its
    watermarks in memory: the first cycle of a large store, or one after most of it was
    imported, would hold all of them at once (7.75 GiB at 10M capsules, against 1.74 GiB for
    the rebuild). It takes the rebuild when they are more than one fold range and either
    at least half the store or more than the memory budget holds."""
    from memframe import budget
    from memframe.errors import MemoryBudgetError
    from memframe.store.ranges import range_size

    mark = stages.watermark_of(view)
    parts = list(view.partitions("capsules"))
    new = sum(p.rows for p in parts if (p.seq_hi or 0) > mark)
    total = sum(p.rows for p in parts)
    if new <= budget.SMALLEST_RANGE:
        return None
    try:
        if new <= range_size(view):
            return None
    except MemoryBudgetError:  # no range fits the budget: the cycle, as it always ran
        return None
    limit = budget.current_limit()
    over = limit is not None and budget.BASE_BYTES + new * budget.CYCLE_ROW_BYTES > limit
    if 2 * new < total and not over:
        return None
    what = "more than the memory budget holds at once" if over else "most of the store"
    return (f"cycle: {new:,} capsule rows above the watermark ({what}): every row was folded "
            f"range by range, as rebuild_projections() does")


def run_cycle(store: Store, progress: Progress | None = None) -> CycleReport:
    """Fold what was written since the watermarks into every projection (one commit).

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
    # a stream of small commits leaves a partition per commit and table: the newest are
    # merged first when they are many, so that this cycle and every later digest read,
    # seal and verify a few dozen files instead of one per commit
    merged = store._compact_tail()
    with store._rewriting():  # a long first attempt: it goes ahead of small commits' losers
        report = store.commit(lambda c: _run(c, "cycle", _OPERATIONS[0], progress),
                              operation=_OPERATIONS[0])
    return dataclasses.replace(report, merged_parts=merged) if merged else report


def rebuild(store: Store, progress: Progress | None = None) -> CycleReport:
    """Fold every canonical row and replace every projection in one commit.
    ``progress(done, total, stage)``, when given, is called before each stage.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a",
        ...                   "conversation_id": "conv-1"})
        >>> rebuild(store).projections["session"]["rows_written"]
        1
    """
    from memframe.digest.state.cold_fold import range_size

    range_size(store.pinned())  # refused before anything when the budget cannot fold it
    with store._rewriting():
        return store.commit(lambda c: _run(c, "rebuild", _OPERATIONS[1], progress),
                            operation=_OPERATIONS[1])


def stage_rebuild(commit: Commit, rows: pl.DataFrame, watermark: int, *, rows_visited: int,
                  rows_folded: int) -> CycleReport:
    """Stage session ``rows`` folded elsewhere (the distributed rebuild) with every other
    projection's rebuild stage, as the rebuild door lands them."""
    from memframe.jobs import stages

    _claim(commit)
    job = Job(commit, commit.view)
    parts = stages.session_land(job, rows, watermark, rows_visited, rows_folded)
    for name in registry.MEMORY_PROJECTION_NAMES:
        if name != "session":
            parts.update(registry.PROJECTIONS[name].rebuild(job))
    commit.operations.append(_OPERATIONS[1])
    return _report(commit, job, parts)
