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
from memframe.digest.inputs import (
    COLUMNS,
    DigestInputs,
    StateNotWarm,
    digest_failed,
    read_inputs,
)
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
            inputs = _rebuilt_inputs(view, subset)
        else:
            inputs = read_inputs(view, view.now(), "incremental", fast=True,
                                 sections=(CAP, None), kept=False, trust_state=True,
                                 shared=shared)
        values = kept_values(inputs, CAP)
    except (MemframeError, StateNotWarm) as exc:  # the digest computes (and fails) itself
        if notes is not None:
            notes.append(f"digest_sections: not kept: {exc}")
        return report
    graph = inputs.globals.get("graph")
    warm = inputs.warm.rows_visited if inputs.warm is not None else 0
    report["rows_visited"] = (inputs.rows_visited + warm
                              + (graph.rows_visited if graph is not None else 0))
    report["rows_written"] = KEPT.stage(commit, {TABLE: encode(values)}, marks,
                                        row_group_rows={TABLE: GROUP_ROWS})
    return report


def _rebuilt_inputs(view: StoreView, subset: pl.DataFrame) -> Any:
    """What `kept_values` reads, from a rebuilt state's subset rows and the graph's tables
    (the sections computed over them are the full digest's: the law tests compare)."""
    tables = {name: view.table(name).select(COLUMNS[name]).collect(engine="streaming")
              for name in ("relations", "forgets")}
    problem = check_rows("relations", tables["relations"])
    if problem:
        raise digest_failed(problem)  # the digest fails closed on these rows: keep nothing
    return DigestInputs(tables=tables, optional={}, state=state_frame(subset),
                        now=view.now(),
                        rows_visited=sum(view.row_count(n) for n in tables))
