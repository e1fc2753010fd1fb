"""The jobs that keep the digest's per-capsule state (`stage_cycle`, `stage_rebuild`) and
its kept subset sections (`stage_sections`).

A cycle folds the rows above the watermark with the stored rows of the numbers they touch,
appends the changed rows as runs, and stages the subset (`digest_subset`), its text, the
aggregates and archive instants (`digest_aggregates`) and the leaders (`digest_leaders`)
in the same commit; the rebuild writes them all from every source row. The sections job
(`memframe.digest.state.sections`) runs last in the job's commit, after the state and the
store-wide families staged theirs, and computes the values with the reference section
functions (`memframe.digest.assemble.kept_values`) over what the commit lands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import job_report, read_whole
from memframe.derived.runs import Budget, merge_budget
from memframe.digest.assemble import kept_values
from memframe.digest.checks import check_rows, check_tables
from memframe.digest.reads import COLUMNS, StateNotWarm, digest_failed, job_source
from memframe.digest.source import DigestSource, TableSource
from memframe.digest.state import (
    cold_fold,
    digest_aggregates,
    digest_capsules,
    digest_leaders,
    digest_subset,
)
from memframe.digest.state.sections import CAP, GROUP_ROWS, KEPT, TABLE, encode, marks_of
from memframe.errors import MemframeError
from memframe.state import KEY, SOURCES, STATE_SCHEMA, STORED_SCHEMA, state_frame
from memframe.store.spill import RowSpill

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit


def stage_cycle(commit: Commit, view: StoreView, budget: Budget | None = None,
                shared: digest_capsules.Shared | None = None, keep: dict[str, Any] | None = None
                ) -> dict[str, int]:
    """Fold the rows written since the watermark into the state (staged on ``commit``).

    Reads only the parts committed above the watermark and the stored rows of the
    capsule numbers they touch (a new capsule's number lies above every stored run's, so
    it reads nothing), appends the changed rows as runs and advances the runs' merges
    within ``budget`` (`merge_budget` of the rows appended when None); nothing new reads
    and writes nothing. The first cycle of a store without state builds it from scratch
    (`stage_rebuild`, handing its subset rows to ``keep``). Source parts in ``shared``
    (read by another job of the cycle) are not read again.
    """
    mark = digest_capsules.watermark_of(view)
    if mark is None:
        if not any(view.partitions(name) for name in SOURCES):
            return job_report(0, 0, 0)  # a virgin store: nothing to fold, nothing written
        return stage_rebuild(commit, view, keep)
    delta, visited, top = digest_capsules.read_above(view, mark, shared)
    if top <= mark:
        return job_report(0, 0, 0)
    if check_tables(delta):  # the digest fails closed on these rows: never fold them
        return job_report(visited, 0, 0)
    folded_in = sum(f.height for f in delta.values())
    touched = digest_capsules.touched_numbers(delta)
    written = 0
    if touched:
        existing, merged, n = digest_capsules.fold_touched(view, delta, touched)
        visited += n
        changed = merged.join(existing.select(list(STORED_SCHEMA)), on=list(STORED_SCHEMA),
                              how="anti", nulls_equal=True) if existing.height else merged
        if changed.height:
            old = existing.filter(pl.col(KEY).is_in(changed[KEY].implode()))
            members = changed.filter(digest_subset.subset_expr())
            if budget is None:
                budget = merge_budget(changed.height + members.height
                                      + old.filter(digest_subset.subset_expr()).height)
            visited += digest_capsules.state_runs().stage_put(commit, view, changed, top, budget)
            sub = digest_subset.subset_changes(changed, old)
            if sub.height:
                visited += digest_subset.subset_runs().stage_put(commit, view, sub, top, budget)
                commit.set_watermark(digest_subset.SUBSET_MARK, top)
            members, n = _stage_subset_text(commit, view, members, old)
            visited += n
            written = changed.height
            visited += _stage_derived(commit, view, changed, old, members)
    commit.set_watermark(digest_capsules.WATERMARK, top)
    return job_report(visited, folded_in, written)


def _stage_subset_text(commit: Commit, view: StoreView, members: pl.DataFrame,
                       old: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Append the text of the changed rows that joined the subset (``members``: the
    changed rows that are members; ``old``: the changed rows' stored versions) to the
    subset's text table: a joining capsule's text is at hand when it is new (folded from
    its content), else read from its capsule row. Returns the members with the text known
    and the Parquet rows read."""
    parts = view.partitions(digest_subset.SUBSET_TEXT)
    # a member's text is stored once; an erasure removed the erased members' rows (the
    # fold gives them the text of no content, written again here)
    was = old.filter(digest_subset.subset_expr()).get_column(KEY).implode()
    joining = members.filter(~pl.col(KEY).is_in(was) | pl.col("erased"))
    if not joining.height:
        return members, 0
    joining, visited = digest_capsules.fill_text(view, joining)
    # append-only: a capsule's text never changes before its erasure, which removes its
    # row; a table of many small parts is written again as one
    text = joining.select(list(digest_subset.TEXT_SCHEMA))
    replace = len(parts) >= digest_subset.TEXT_PARTS
    if replace:
        stored, n = read_whole(view, digest_subset.SUBSET_TEXT, digest_subset.TEXT_SCHEMA)
        visited += n
        text = pl.concat([stored, text], how="vertical").unique(KEY, keep="last").sort(KEY)
    commit.write_derived(digest_subset.SUBSET_TEXT, text, replace=replace,
                         row_group_rows=digest_capsules.ROW_GROUP_ROWS)
    members, _none = digest_capsules.fill_text(view, members, joining, need=pl.lit(False))
    return members, visited


def _stage_derived(commit: Commit, view: StoreView, changed: pl.DataFrame,
                   old: pl.DataFrame, subset: pl.DataFrame | None = None) -> int:
    """Stage the aggregates, the archive instants and the leaders for state rows that
    changed (``old``: their stored rows, absent for new numbers; ``subset``: the subset
    rows staged, when they changed). Returns the Parquet rows read."""
    stored, visited = read_whole(view, digest_aggregates.AGG_TABLE, digest_aggregates.AGG_SCHEMA)
    aggregates = digest_aggregates.merge_aggregates(
        stored, digest_aggregates.contributions(changed), digest_aggregates.contributions(old, -1))
    is_archive = pl.col("metric") == "archive"
    commit.write_derived(digest_aggregates.AGG_TABLE, aggregates.filter(~is_archive), replace=True)
    # the archive instants are rewritten only when their sums changed (a supersedes edge,
    # or an event on a superseded capsule)
    moved = aggregates.filter(is_archive)
    if moved.height:
        archive, n = read_whole(view, digest_aggregates.ARCHIVE_TABLE,
                                digest_aggregates.ARCHIVE_SCHEMA)
        visited += n
        commit.write_derived(digest_aggregates.ARCHIVE_TABLE,
                             digest_aggregates.archive_rows(archive, moved), replace=True,
                             row_group_rows=digest_aggregates.ARCHIVE_GROUP_ROWS)
    return visited + _stage_leaders(commit, view, changed, subset)


def _stage_leaders(commit: Commit, view: StoreView, changed: pl.DataFrame,
                   subset: pl.DataFrame | None = None) -> int:
    """Stage the leaders after ``changed`` rows (refilled from every state row when a
    list ran low, or when the store has none yet), the text of their entries filled (a
    digest emits them as they are). Returns the Parquet rows read."""
    stored, visited = digest_leaders.read_leaders(view)
    leaders = digest_leaders.update_leaders(stored, changed) if stored is not None else None
    if leaders is None:
        rows, n = digest_capsules.read_stored(view)
        visited += n
        current = pl.concat([rows.filter(~pl.col(KEY).is_in(changed.get_column(KEY).implode()))
                             .select(list(STATE_SCHEMA)), changed.select(list(STATE_SCHEMA))],
                            how="vertical")
        leaders = digest_leaders.leaders_of(current)
    # the entries' text (a floor keeps none): the changed rows' first (an erased row's is
    # empty), then the stored entries', the subset's, else the capsules'
    index = pl.int_range(pl.len(), dtype=pl.Int64).alias("_i")
    leaders = leaders.with_columns(index)
    entries, n = digest_capsules.fill_text(view, leaders.filter(~pl.col("floor")), changed,
                                           stored, subset)
    leaders = pl.concat([entries, leaders.filter(pl.col("floor"))], how="vertical").sort(
        "_i").drop("_i")
    commit.write_derived(digest_leaders.LEADERS, leaders, replace=True,
                         row_group_rows=digest_leaders.group_sizes(leaders))
    return visited + n


def stage_rebuild(commit: Commit, view: StoreView, keep: dict[str, Any] | None = None
                  ) -> dict[str, int]:
    """The whole state from every source row, replacing what is stored (one commit).
    ``keep`` receives the subset's state rows (``"subset"``) for a later job of the
    same commit (`memframe.digest.state.sections`)."""
    sources, visited, top = digest_capsules.scan_all(view)
    if check_tables(sources):  # never fold what the digest fails closed on
        return job_report(visited)
    # folded range by range of capsule numbers (as the cold digest): the peak follows a
    # range's source rows, not the store's. Of each range: its rows as stored (no text),
    # spilled to disk in number order until the commit lands, and the leaders'
    # candidates (orders are total)
    stored = RowSpill(STORED_SCHEMA)
    tops = tuple((digest_leaders.LEADERS_K + 1, order, digest_leaders.qualifies_expr(order))
                 for order in digest_leaders.ORDERS)
    aggregates, subset, candidates, _n = cold_fold.fold_ranges(
        view, tops, lambda rows: stored.add(rows.select(list(STORED_SCHEMA))))
    if keep is not None:
        keep["subset"] = subset
    rows = stored.rows()
    digest_capsules.state_runs().stage_replace(commit, view, rows, top)
    digest_subset.subset_runs().stage_replace(commit, view, subset.with_columns(
        pl.lit(True).alias("member")).select(list(digest_subset.SUBSET_SCHEMA)), top)
    commit.write_derived(digest_subset.SUBSET_TEXT,
                         subset.select(list(digest_subset.TEXT_SCHEMA)).sort(KEY), replace=True,
                         row_group_rows=digest_capsules.ROW_GROUP_ROWS)
    is_archive = pl.col("metric") == "archive"
    commit.write_derived(digest_aggregates.AGG_TABLE, aggregates.filter(~is_archive), replace=True)
    commit.write_derived(digest_aggregates.ARCHIVE_TABLE,
                         digest_aggregates.archive_rows(None, aggregates.filter(is_archive)),
                         replace=True, row_group_rows=digest_aggregates.ARCHIVE_GROUP_ROWS)
    leaders = digest_leaders.leaders_of(candidates)
    commit.write_derived(digest_leaders.LEADERS, leaders, replace=True,
                         row_group_rows=digest_leaders.group_sizes(leaders))
    commit.set_watermark(digest_capsules.WATERMARK, top)
    commit.set_watermark(digest_subset.SUBSET_MARK, top)
    return job_report(visited, visited, rows.height)


def stage_sections(commit: Commit, view: StoreView, *, full: bool = False,
                   subset: pl.DataFrame | None = None, shared: Any = None,
                   notes: list[str] | None = None) -> dict[str, int]:
    """Stage the kept values after the other digest states staged theirs on ``commit``,
    when its watermarks say they changed (`sections`); nothing is read when they did not.
    The values are computed at ``view`` by the warm digest's own reads (the stored state
    plus the rows the cycle folds: the job trusts its stored state as the state's own
    cycle does, and a digest uses the kept values only where it trusts that state, when
    the journal checkpoint holds), or, when this commit rebuilt the state (``full``, or a
    store's first cycle), from the rebuilt ``subset`` rows and the graph's tables: either
    is the state ``commit`` lands. ``shared``: the source parts the cycle
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
        source: DigestSource = (_rebuilt_source(view, subset) if subset is not None
                                else job_source(view, CAP, shared))
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
