"""The job that keeps the digest's subset sections (`memframe.digest.state.sections`).

It runs last in the job's commit, after the state and the store-wide families staged
theirs, and computes the values with the reference section functions
(`memframe.digest.assemble.kept_values`) over what the commit lands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import job_report
from memframe.digest.assemble import kept_values
from memframe.digest.checks import check_rows
from memframe.digest.reads import COLUMNS, StateNotWarm, digest_failed, job_source
from memframe.digest.source import DigestSource, TableSource
from memframe.digest.state import digest_capsules
from memframe.digest.state.sections import CAP, GROUP_ROWS, KEPT, TABLE, encode, marks_of
from memframe.errors import MemframeError
from memframe.state import state_frame

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit

__all__ = ["stage_cycle"]


def stage_cycle(commit: Commit, view: StoreView, *, full: bool = False,
                subset: pl.DataFrame | None = None, shared: Any = None,
                notes: list[str] | None = None) -> dict[str, int]:
    """Stage the kept values after the other digest states staged theirs on ``commit``,
    when its watermarks say they changed (see the module docstring); nothing is read when
    they did not. The values are computed at ``view`` by the warm digest's own reads (the
    stored state plus the rows the cycle folds: the job trusts its stored state as the
    state's own cycle does, and a digest uses the kept values only where it trusts that
    state, when the journal checkpoint holds), or, when this commit rebuilt the state
    (``full``, or a store's first cycle), from the rebuilt ``subset`` rows and the graph's
    tables: either is the state ``commit`` lands. ``shared``: the source parts the cycle
    read already (not read again). Nothing is kept when the digest would fail (said in
    ``notes``, with why), or when a rebuild kept no state."""
    report = job_report()
    marks = marks_of(commit.watermarks)
    if digest_capsules.WATERMARK not in commit.watermarks:
        return report  # no state (a virgin store): nothing to keep
    if subset is None and (full or digest_capsules.watermark_of(view) is None):
        return report  # the state was not rebuilt (rows the digest fails closed on)
    if subset is None and KEPT.marks(commit.watermarks) == marks and view.partitions(TABLE):
        return report
    try:
        if subset is not None:
            source: DigestSource = _rebuilt_source(view, subset)
        else:
            source = job_source(view, CAP, shared)
        values = kept_values(source, CAP)
    except (MemframeError, StateNotWarm) as exc:  # the digest computes (and fails) itself
        if notes is not None:
            notes.append(f"digest_sections: not kept: {exc}")
        return report
    report["rows_visited"] = source.rows_visited()
    report["rows_written"] = KEPT.stage(commit, {TABLE: encode(values)}, marks,
                                        row_group_rows={TABLE: GROUP_ROWS})
    return report


def _rebuilt_source(view: StoreView, subset: pl.DataFrame) -> TableSource:
    """What `kept_values` reads, from a rebuilt state's subset rows and the graph's tables
    (the sections computed over them are the full digest's: the law tests compare)."""
    tables = {name: view.table(name).select(COLUMNS[name]).collect(engine="streaming")
              for name in ("relations", "forgets")}
    problem = check_rows("relations", tables["relations"])
    if problem:
        raise digest_failed(problem)  # the digest fails closed on these rows: keep nothing
    tombstoned = tables["forgets"].get_column("capsule_id").unique().sort()
    return TableSource(tables, {}, state_frame(subset), view.now(), {}, 0, tombstoned,
                       sum(view.row_count(n) for n in tables))
