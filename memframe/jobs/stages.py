"""What each registered projection stages in a job's commit: its cycle and its rebuild.

A stage takes the job's `Job` (the commit, the view it is pinned to, and what earlier
stages of the same commit read) and returns its parts' reports, name -> ``{rows_visited,
rows_folded, rows_written}``. `memframe.jobs.registry` maps every name of
``MEMORY_PROJECTION_NAMES`` to its stages; `memframe.jobs.cycle` runs them in that order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import job_report
from memframe.digest.state import (
    capsule_job,
    digest_capsules,
    journal,
    kept_families,
)
from memframe.projections import forgotten, session_rows
from memframe.projections.session import (
    capsule_partials,
    combine_partials,
    fold_sessions,
    summary_partials,
)
from memframe.projections.session_rows import KEY, WATERMARK, watermark_of
from memframe.store import fingerprint

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit

__all__ = ["Job", "Reports", "CYCLE_STAGES", "Progress", "session_cycle", "session_rebuild", "session_land",
           "digest_cycle", "digest_rebuild"]

Reports = dict[str, dict[str, int]]

#: The stages of a job, in order, as ``progress`` callbacks are told them.
CYCLE_STAGES: tuple[str, ...] = (
    "session projection", "live-count indexes", "journal checkpoint", "digest state",
    "store-wide sections", "kept sections",
)

#: ``progress(done, total, stage)``: called before each stage of a job.
Progress = Callable[[int, int, str], None]

_CAPSULE_COLUMNS = ["seq", "id", "created_at", "content_chars", "conversation_id"]
_SUMMARY_COLUMNS = ["seq", "conversation_id", "summary"]


@dataclasses.dataclass
class Job:
    """One job's commit and what its stages share.

    Attributes:
        commit: the commit every stage stages on.
        view: the generation the commit is pinned to.
        session_mark: the session projection's watermark before (``old``) and after
            (``new``) this job.
        shared: source rows a stage read that a later stage may reuse (``"capsules"``: the
            capsule parts above the session watermark and their rows; ``"journal"``: the
            journal parts the checkpoint verified).
        subset: the digest subset's rows, when this commit rebuilt the digest state.
        progress: the caller's ``progress(done, total, stage)`` (`step` tells it).
        notes: what a stage could not do as asked and what it did instead (the report's
            ``notes``).
    """

    commit: Commit
    view: StoreView
    old_mark: int = 0
    new_mark: int = 0
    capsules: pl.DataFrame | None = None
    shared: dict[str, Any] = dataclasses.field(default_factory=dict)
    subset: pl.DataFrame | None = None
    progress: Progress | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    def step(self, stage: str) -> None:
        """Tell the ``progress`` callback that ``stage`` (one of `CYCLE_STAGES`) starts."""
        if self.progress is not None:
            self.progress(CYCLE_STAGES.index(stage), len(CYCLE_STAGES), stage)


# -- session: the session rows and their live-count indexes --------------------------------

def session_cycle(job: Job) -> Reports:
    """Fold the capsules and summaries above the session watermark into partial rows,
    appended as a run (no stored row is read); advance the live-count indexes."""
    view, commit = job.view, job.commit
    job.step("session projection")
    mark = job.old_mark = job.new_mark = watermark_of(view)
    cap_parts = [p for p in view.partitions("capsules") if (p.seq_hi or 0) > mark]
    sum_parts = [p for p in view.partitions("summaries") if (p.seq_hi or 0) > mark]
    report = job_report()
    if cap_parts or sum_parts:
        report = _fold_new(job, cap_parts, sum_parts)
    # the indexes advance with the new watermark, sharing the capsule rows read here
    job.step("live-count indexes")
    dead = forgotten.stage_cycle(commit, view, job.new_mark,
                                 capsules=(job.old_mark, job.capsules))
    return {"session": report, "forgotten": dead}


def _fold_new(job: Job, cap_parts: list, sum_parts: list) -> dict[str, int]:
    view, commit, mark = job.view, job.commit, job.old_mark
    visited = sum(p.rows for p in cap_parts) + sum(p.rows for p in sum_parts)
    job.new_mark = max(p.seq_hi or 0 for p in [*cap_parts, *sum_parts])
    after = pl.col("seq") > mark
    # the parts' rows, whole, with the digest state's columns too: read once per job
    every = view.scan_partitions("capsules", cap_parts).select(
        *_CAPSULE_COLUMNS, *digest_capsules.shared_columns("capsules", _CAPSULE_COLUMNS)
    ).collect(engine="in-memory") if cap_parts else None
    if every is not None:
        job.shared["capsules"] = (cap_parts, every)
    caps = (every.select(_CAPSULE_COLUMNS) if every is not None
            else view.read_partitions("capsules", [], _CAPSULE_COLUMNS))
    caps = job.capsules = caps.filter(after & pl.col(KEY).is_not_null())
    sums = view.read_partitions("summaries", sum_parts, _SUMMARY_COLUMNS).filter(after)
    partials = combine_partials(pl.concat([capsule_partials(caps.lazy()),
                                           summary_partials(sums.lazy())], how="vertical")
                                ).collect(engine="in-memory")
    if partials.height:
        visited += session_rows.stage_append(commit, view, partials)
    commit.set_watermark(WATERMARK, job.new_mark)
    return job_report(visited, caps.height + sums.height, partials.height)


def session_rebuild(job: Job) -> Reports:
    """Fold every capsule and summary; replace the session rows and the indexes."""
    view = job.view
    job.step("session projection")
    cap_parts = list(view.partitions("capsules"))
    sum_parts = list(view.partitions("summaries"))
    visited = sum(p.rows for p in cap_parts) + sum(p.rows for p in sum_parts)
    caps = view.scan_partitions("capsules", cap_parts).select(_CAPSULE_COLUMNS)
    sums = view.scan_partitions("summaries", sum_parts).select(_SUMMARY_COLUMNS)
    rows = fold_sessions(caps, sums, engine="streaming")
    folded_in = int(rows["memory_count"].sum() or 0) + sum(p.rows for p in sum_parts)
    mark = max((p.seq_hi or 0 for p in [*cap_parts, *sum_parts]), default=0)
    return session_land(job, rows, mark, visited, folded_in)


def session_land(job: Job, rows: pl.DataFrame, mark: int, visited: int, folded: int
                 ) -> Reports:
    """Stage whole folded session ``rows`` and their watermark, and rebuild the indexes
    (shared by the rebuild door and the distributed rebuild, so both land identically)."""
    session_rows.stage_replace(job.commit, job.view, rows)
    job.commit.set_watermark(WATERMARK, mark)
    job.old_mark = job.new_mark = mark
    job.step("live-count indexes")
    return {"session": job_report(visited, folded, rows.height),
            "forgotten": forgotten.stage_rebuild(job.commit, job.view, mark)}


# -- digest: the journal checkpoint, the per-capsule state, the families, the sections ------

def digest_cycle(job: Job) -> Reports:
    """Advance the digest's state by what was written since its watermarks; rebuild it
    when the canonical parts it folded are no longer the files sealed
    (`digest_capsules.seal_holds`)."""
    commit, view = job.commit, job.view
    sizes: dict[str, int | None] = {}  # one stat per part for the old seal and the new
    if fingerprint.SEAL_MARK in view.watermarks and not digest_capsules.seal_holds(view, sizes):
        job.notes.append("digest: canonical parts at or below the digest state's seal "
                         "changed since it was recorded (a part rewritten, compacted or "
                         "copied): the digest's state was rebuilt from every row")
        return digest_rebuild(job)
    job.step("journal checkpoint")
    checkpoint, read = journal.stage_checkpoint(commit, view, full=False)
    if read is not None:
        job.shared["journal"] = read
    rebuilt: dict[str, Any] = {}
    job.step("digest state")
    state = capsule_job.stage_cycle(commit, view, shared=job.shared, keep=rebuilt)
    job.subset = rebuilt.get("subset")
    job.step("store-wide sections")
    families = kept_families.stage_cycle(commit, view, notes=job.notes)
    # last: the kept sections follow the marks the state and the families just staged
    job.step("kept sections")
    sections = capsule_job.stage_sections(commit, view, subset=job.subset, shared=job.shared,
                                         notes=job.notes)
    digest_capsules.stage_seal(commit, view, sizes)
    return {"digest": checkpoint,
            "digest_capsules": state, "digest_globals": families,
            "digest_sections": sections}


def digest_rebuild(job: Job) -> Reports:
    """The digest's whole state from every row, replacing what is stored."""
    commit, view = job.commit, job.view
    job.step("journal checkpoint")
    checkpoint, _read = journal.stage_checkpoint(commit, view, full=True)
    rebuilt: dict[str, Any] = {}
    job.step("digest state")
    state = capsule_job.stage_rebuild(commit, view, rebuilt)
    job.subset = rebuilt.get("subset")
    job.step("store-wide sections")
    families = kept_families.stage_cycle(commit, view, full=True, notes=job.notes)
    job.step("kept sections")
    sections = capsule_job.stage_sections(commit, view, full=True, subset=job.subset,
                                         notes=job.notes)
    digest_capsules.stage_seal(commit, view)
    return {"digest": checkpoint,
            "digest_capsules": state, "digest_globals": families,
            "digest_sections": sections}
