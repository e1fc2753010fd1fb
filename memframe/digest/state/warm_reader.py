"""The warm reader: what a digest reads of the kept state instead of every state row.

`read_warm` gives a `WarmState`: the stored aggregates plus the changes of the rows above
the watermark, the subset read on first use, and the top-N readers (`WarmState.top_rows`:
the rows at hand, then the leaders, then the state's row groups in the order of their
statistics). `read_state` gives the exact state rows at a generation (stored rows plus the
rows above the watermark; every row folded when there is no state yet), `state_door` the
same as the ``digest`` projection's door (registered in `memframe.jobs.registry`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived import keyed
from memframe.digest.state import digest_aggregates, digest_capsules, digest_leaders, digest_subset
from memframe.state import KEY, STATE_SCHEMA, fold_state

if TYPE_CHECKING:
    from memframe.store import StoreView


#: a top-N request of the digest: (n, order, keep), as `WarmState.top_rows` takes them
TopRequest = tuple[int, str, pl.Expr]


@dataclasses.dataclass
class WarmState:
    """What a warm digest reads instead of every state row (see this module's docstring).

    Attributes:
        view: the pinned generation.
        aggregates: aggregate rows whose sums, per (metric, key, at), are the aggregates at
            ``view`` (the stored rows and the changes of the rows above the watermark, not
            summed: readers sum what they select).
        subset_rows: the subset's state rows at ``view`` (members only), or None until
            `subset` reads them.
        touched: capsule numbers whose stored rows are stale (rows above the watermark).
        merged: their current state rows.
        rows_visited: Parquet rows read so far (the top-N readers add theirs).
        in_memory: ``merged`` holds the state rows folded now (nothing stored is read):
            every row, or (``tops``) the candidates of the top-N lists only.
        mark: the state's watermark (every stored row has a lower ``seq``).
        tops: with ``in_memory``, the top-N requests (``(n, order, keep)``) ``merged``
            was reduced to: the first ``n`` rows of each range of capsule numbers in
            ``order`` under ``keep`` (`fold_warm`); a request they cannot answer is
            refused. None: ``merged`` holds every state row.
    """

    view: Any
    aggregates: pl.DataFrame
    subset_rows: pl.DataFrame | None
    touched: pl.Series
    merged: pl.DataFrame
    rows_visited: int
    in_memory: bool = False
    mark: int = 0
    tops: tuple[tuple[int, str, pl.Expr], ...] | None = None
    old: pl.DataFrame | None = dataclasses.field(default=None, repr=False)
    _leader_groups: dict = dataclasses.field(default_factory=dict, repr=False)

    @functools.cached_property
    def sums(self) -> dict[tuple[str, str], int]:
        """The aggregates summed per (metric, key), the archive's instants left out."""
        rows = self.aggregates.filter(pl.col("metric") != "archive").group_by(
            "metric", "key").agg(pl.col("n").sum())
        return {(metric, key): int(n) for metric, key, n in rows.rows()}

    @property
    def subset(self) -> pl.DataFrame:
        """The subset's state rows at ``view``: the stored members not touched since the
        watermark and the touched rows that are members now (read on first use, counted
        in ``rows_visited``)."""
        if self.subset_rows is None:
            stored, n = digest_subset.read_subset(self.view)
            self.rows_visited += n
            rows = pl.concat([
                stored.filter(~pl.col(KEY).is_in(self.touched.implode()))
                .select(list(STATE_SCHEMA)),
                self.merged.filter(digest_subset.subset_expr()).select(list(STATE_SCHEMA)),
            ], how="vertical")
            # a touched member's text: the stored member's (text never changes before an
            # erasure, which the fold applies); the labels the sections group by read from
            # the capsules when not kept (after an erasure dropped them: headlines are read
            # for the rows emitted)
            self.subset_rows, n = digest_capsules.fill_text(self.view, rows, stored,
                                                            need=pl.col("threaded"))
            self.rows_visited += n
        return self.subset_rows

    def subset_changed(self) -> bool:
        """Did a row written since the watermark change the subset (a touched capsule that
        is, or was, a member)? Nothing is read: the touched rows' stored versions were."""
        if self.in_memory:
            return True
        return any(rows.height and rows.select(digest_subset.subset_expr().any()).item()
                   for rows in (self.merged, self.old) if rows is not None)

    def leaders(self, order: str, keep: pl.Expr, n: int) -> pl.DataFrame | None:
        """The kept leaders of list ``order`` as far as the first ``n`` rows satisfying
        ``keep`` need them, or None when the job has not kept them. Row groups are read in
        order (a list's rows are stored by rank, its floor last) until the floor, or
        until ``n + 1`` untouched entries satisfy ``keep``: the last entry read then
        stands for the floor (every entry left unread ranks below it). Counted in
        ``rows_visited``."""
        parts = self.view.partitions(digest_leaders.LEADERS)
        if not parts:
            return None
        wanted = (keep & digest_leaders.qualifies_expr(order)
                  & ~pl.col(KEY).is_in(self.touched.implode()))
        read: list[pl.DataFrame] = []
        found = 0
        for part in parts:
            mins, maxs, counts = self.view.row_group_ranges(part, "list")
            for g, (lo, hi) in enumerate(zip(mins, maxs, strict=True)):
                if lo is not None and hi is not None and not lo <= order <= hi:
                    continue
                if (part.path, g) not in self._leader_groups:  # a group both lists share
                    self.rows_visited += counts[g]
                    self._leader_groups[part.path, g] = self.view.read_row_groups(
                        part, [g], digest_leaders.LEADERS_SCHEMA)
                rows = self._leader_groups[part.path, g]
                if not lo == hi == order:
                    rows = rows.filter(pl.col("list") == order)
                read.append(rows)
                ends, hits = rows.select(pl.col("floor").any(),
                                         (wanted & ~pl.col("floor")).sum()).row(0)
                if ends:
                    return pl.concat(read, how="vertical")  # the whole list
                found += hits
                if found > n:
                    mine = pl.concat(read, how="vertical")
                    last = pl.int_range(pl.len()) == pl.len() - 1
                    return mine.with_columns(last.alias("floor"))
        return pl.concat(read, how="vertical") if read else None

    def top_rows(self, keep: pl.Expr, n: int, order: str, total: int | None = None
                 ) -> pl.DataFrame:
        """The first ``n`` state rows satisfying ``keep``, ``order`` being ``"newest"``
        (seq descending) or ``"recalled"`` (recall count desc, last recall desc, seq asc).

        Row groups of the state runs are read in the order of their statistics (the
        largest ``seq``, or the largest ``recall_count``, first) until no unread group can
        hold a row that would rank among the first ``n``, or until all ``total`` rows
        satisfying ``keep`` (when the caller knows how many there are) have been found.
        """
        if n <= 0:
            return self.merged.clear()
        if self.in_memory:
            if self.tops is not None and not any(
                    n <= m and order == o and keep.meta.eq(k) for m, o, k in self.tops):
                raise ValueError(f"the cold digest state holds the candidates of {self.tops}"
                                 f" only; asked for the first {n} {order!r} rows of {keep}")
            return digest_leaders.first_rows(self.merged, n, order, keep)
        # rows at hand settle the list when they are all the qualifying rows, or (newest)
        # when n of them are new since the watermark (newer than every stored row)
        new = keep & (pl.col("seq") > self.mark)
        at_hand, fresh = self.merged.select(keep.sum().alias("a"), new.sum().alias("b")).row(0)
        if total is not None and at_hand >= total:
            return digest_leaders.first_rows(self.merged, n, order, keep)
        if order == "newest" and fresh >= n:
            return digest_leaders.first_rows(self.merged, n, order, new)
        leaders = self.leaders(order, keep, n)
        if leaders is not None:
            found = digest_leaders.leaders_first(leaders, self.merged, self.touched, keep, n, order)
            if found is not None:
                return found
        column = "seq" if order == "newest" else "recall_count"
        runs = digest_capsules.state_runs()
        groups = []
        for part in runs.partitions(self.view):
            _mins, maxs, counts = self.view.row_group_ranges(part, column)
            for g, hi in enumerate(maxs):
                groups.append((hi, part, g, counts[g]))
        # a group without statistics could hold anything: read it first
        groups.sort(key=lambda x: (x[0] is not None, -(x[0] or 0)))
        read: list[pl.DataFrame] = []
        stale = self.touched.implode()
        # the rows at hand are current: they rank above every stored version
        pool0 = self.merged.with_columns(pl.lit(2**62, dtype=pl.Int64).alias(keyed.VERSION))
        i = 0
        while True:
            exhausted = i >= len(groups)
            # the current row of each number read (its newest version), then the filter
            rows = pl.concat([pool0, *read], how="vertical") if read else pool0
            if read:
                rows = keyed.newest_rows(rows, KEY)
            rows = rows.filter(keep)
            if total is not None and rows.height >= total:
                exhausted = True  # every row that qualifies is at hand
            final = rows if exhausted else rows.filter(pl.col(column) > groups[i][0])
            if exhausted or final.height >= n:
                return digest_leaders.first_rows(final.drop(keyed.VERSION), n, order)
            batch = groups[i:i + 4]
            i += len(batch)
            for _hi, part, g, count in batch:
                self.rows_visited += count
                frame = digest_capsules.with_text(
                    self.view.read_row_groups(part, [g], runs.runs.schema))
                read.append(frame.filter(~pl.col(KEY).is_in(stale)))


def read_warm(view: StoreView, shared: digest_capsules.Shared | None = None
              ) -> tuple[WarmState, dict[str, pl.DataFrame]] | None:
    """The aggregates at ``view``, with the subset read on first use (and the rows read
    above the watermark, for the digest's fail-closed checks), or None when the job never
    recorded them (the digest then reads every state row). ``shared``: source parts the
    caller read already (the journal parts its chain check walked), as `read_above`."""
    mark = digest_capsules.watermark_of(view)
    if mark is None or not view.partitions(digest_aggregates.AGG_TABLE):
        return None
    delta, visited, _top = digest_capsules.read_above(view, mark, shared)
    touched = digest_capsules.touched_numbers(delta)
    old, merged, n = digest_capsules.fold_touched(view, delta, touched)
    visited += n + view.row_count(digest_aggregates.AGG_TABLE)
    # the stored aggregates and the changes, unsummed: a reader sums what it selects
    aggregates = pl.concat([
        view.derived(digest_aggregates.AGG_TABLE, digest_aggregates.AGG_SCHEMA),
        *(digest_aggregates.contributions(rows, sign)
          for rows, sign in ((merged, 1), (old, -1)) if rows.height)],
        how="vertical").collect(engine="in-memory")
    wanted = pl.Series(touched, dtype=pl.Int64)
    warm = WarmState(view, aggregates, None, wanted, merged.select(list(STATE_SCHEMA)),
                     visited, mark=mark, old=old)
    return warm, delta


def read_state(view: StoreView) -> tuple[pl.DataFrame, int, dict[str, pl.DataFrame]]:
    """The exact state at ``view``: stored rows plus the rows above the watermark.

    Returns:
        The state rows (one per capsule number, in no particular order), the Parquet rows
        read, and the rows read above the watermark (table -> rows, for the digest's
        fail-closed checks; lazily every source row when there is no state yet).
    """
    mark = digest_capsules.watermark_of(view)
    if mark is None:  # no state yet (a virgin store, or the job never ran): fold all
        sources, visited, _top = digest_capsules.scan_all(view)
        return fold_state(sources, engine="streaming"), visited, sources  # type: ignore[return-value]
    stored, visited = digest_capsules.read_stored(view)
    delta, n, _top = digest_capsules.read_above(view, mark)
    visited += n
    touched = digest_capsules.touched_numbers(delta)
    if touched:
        wanted = pl.Series(touched, dtype=pl.Int64).implode()
        merged = fold_state(delta, stored.filter(pl.col(KEY).is_in(wanted)))
        rest = stored.filter(~pl.col(KEY).is_in(wanted))
        stored = pl.concat([rest.select(list(STATE_SCHEMA)), merged], how="vertical")
    # the labels the sections group by: every labelled row is in the subset, which keeps
    # its members' text (other rows' headlines are read for the rows a digest emits)
    subset, n = digest_subset.read_subset(view)
    visited += n
    rows, n = digest_capsules.fill_text(view, stored, subset, need=pl.col("threaded"))
    return rows, visited + n, delta


def state_door(view: StoreView) -> Any:
    """The digest state's door: the exact state rows at ``view`` as a `Page`. The text
    columns (``thread``, ``headline``) are those of the subset's members and of the rows
    folded now; the state keeps no other text (null: read it from the capsule).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "ACTIVE(t): go", "source": "s", "anchor": "a"})
        >>> state_door(store.pinned()).rows.select("num", "threaded", "thread", "named").rows()
        [(1, True, 't', True)]
    """
    from memframe.projections.doors import Page

    state, visited, _delta = read_state(view)
    return Page(rows=state, rows_visited=visited, hash=digest_capsules.state_hash(state))


def read_state_of(view: StoreView, numbers: Sequence[int],
                  stored: dict[Any, pl.DataFrame] | None = None
                  ) -> tuple[pl.DataFrame, int] | None:
    """The exact state rows of the capsule ``numbers`` at ``view`` (their stored rows plus
    the rows above the watermark, folded) and the Parquet rows read; None when the state
    is not kept, or its canonical parts are no longer the files sealed (then only a fold
    of every row is exact).

    ``stored`` (a dict the caller passes to each call for the same ``numbers``) keeps the
    stored rows read, by the runs they came from: two generations that keep the same run
    files (no cycle between them) read them once, and the second adds no rows read."""
    mark = digest_capsules.watermark_of(view)
    if mark is None or not digest_capsules.seal_holds(view):
        return None
    delta, visited, _top = digest_capsules.read_above(view, mark)
    runs = digest_capsules.state_runs().runs
    same = (tuple(p.path for p in runs.runs(view)), tuple(sorted(runs.cursors(view).items())))
    old = None if stored is None else stored.get(same)
    if old is None:
        old, n = digest_capsules.read_stored(view, list(numbers))
        visited += n
        if stored is not None:
            stored[same] = old
    merged = fold_state(delta, old if old.height else None) if delta else old
    wanted = pl.Series(list(numbers), dtype=pl.Int64).implode()
    return merged.filter(pl.col(KEY).is_in(wanted)), visited
