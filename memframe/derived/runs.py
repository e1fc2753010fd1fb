"""Append-only sorted runs, size-tiered, merged a bounded amount per cycle.

An index kept as runs is a few derived tables ``<prefix>/T<k>`` (tiers ``k = 0, 1, ...``),
each holding one or more partitions. A partition is sorted by the index's columns and
written with small row groups, so the min/max statistics of its lookup column (the first
sort column) are tight and a lookup of a few values reads only the row groups that can
hold them. Rows are never changed, only added:

* a cycle appends its new rows as one run of tier 0 (nothing read); an index of partial
  counts (``combine``) adds them up per key when runs merge, and a reader adds them up
  across runs (merge-on-read: no old row is read to write a new one);
* a tier that holds ``TIER_RUNS`` runs starts a merge of those runs (its *inputs*) into one
  run of the next tier. The merge advances by key ranges, a chunk at a time: each chunk
  reads the row groups of the inputs that can hold the next keys, writes the merged rows
  of those keys as a partition of the next tier and moves the merge's *cursor* (the
  highest sort key merged) past them. A cycle spends at most a budget of rows on merges
  (`merge_budget`: a constant plus the rows it appends), lowest tier first, so no cycle
  pays for a whole merge however large the tier; when the last chunk lands, the inputs
  are removed. A reader skips the inputs' rows at or below the cursor (they are in the
  next tier already), so every row is counted exactly once at every generation;
* the rebuild door writes every row as one run, in the tier that run's size belongs to
  (``BASE_RUN * TIER_RUNS**k`` rows), so later cycles never merge it into a small tier.

The merges in progress (inputs and cursor per tier) and the runs each tier holds are kept
in a watermark of the generation log (``<prefix>/merging``), committed with the rows.

A lookup is planned from the footers before any row is read (`SortedRuns.plan`), so a
caller that has two ways to answer can take the one that reads fewer rows.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.frames import strictly_increasing
from memframe.schema import empty_of

if TYPE_CHECKING:
    from memframe.store import Partition, StoreView
    from memframe.store.capture import Commit
    from memframe.store.spill import SpilledRows

__all__ = ["BASE_RUN", "TIER_RUNS", "Budget", "Plan", "SortedRuns", "merge_budget",
           "stage_append_together"]

TIER_RUNS = 8  # runs a tier may hold before it is merged into the next one
BASE_RUN = 4_096  # rows a tier-0 run is sized for; tier k runs are BASE_RUN * TIER_RUNS**k


def merge_budget(new_rows: int) -> Budget:
    """The rows a cycle that appends ``new_rows`` may read to advance merges.

    Half a tier-0 run plus the rows appended: a cycle never reads more for merges,
    whatever the sizes of the tiers and however many cycles ran (a chunk may read a few
    row groups more to make progress: see `SortedRuns.stage_append`). Merging every row
    once per tier needs about ``new_rows`` per tier a row passes through; when merges
    need more than the budget they go on over more cycles and the tiers hold more runs
    meanwhile (a lookup reads a row group more per run), never more rows per cycle.

    Examples:
        >>> merge_budget(2_000).left == BASE_RUN // 2 + 2_000
        True
    """
    return Budget(BASE_RUN // 2 + max(0, int(new_rows)))


@dataclasses.dataclass
class Budget:
    """Rows a cycle may still read for merges (shared by the indexes it appends to).

    Attributes:
        left: rows still allowed.
        spent: rows read so far.
    """

    left: int
    spent: int = 0

    @property
    def total(self) -> int:
        return self.left + self.spent

    def spend(self, rows: int) -> None:
        self.left -= rows
        self.spent += rows


@dataclasses.dataclass(frozen=True)
class Plan:
    """The row groups a lookup will read, per partition, and their row count.

    Attributes:
        groups: ``(partition, row group numbers)`` for every partition with a group to read.
        rows: the Parquet rows those groups hold (what the lookup will add to rows_visited).
        cursors: per partition that is the input of a merge in progress, the highest sort
            key already merged (its rows up to there are read from the next tier instead).
    """

    groups: tuple[tuple[Partition, tuple[int, ...]], ...]
    rows: int
    cursors: tuple[tuple[str, tuple[Any, ...]], ...] = ()


_BOUNDS: dict[tuple[str, str, tuple[str, ...]], tuple[list[tuple[Any, ...] | None], list[Any],
                                                 list[int]]] = {}
_BOUNDS_KEEP = 4_096
#: from this many rows read, a lookup filters each row group as it reads it (1,000 scattered
#: groups of a 10M-row run: 4M rows, 1.5 GB); below, one filter over all costs less
FILTER_EACH_FROM_ROWS = 65_536


def _bounds(view: StoreView, part: Partition, columns: tuple[str, ...]
            ) -> tuple[list[tuple[Any, ...] | None], list[Any], list[int]]:
    """Per row group of a partition: the lowest sort key it can hold (the per-column
    minimums; None when a statistic is missing), the maximum of the first column, and its
    rows. Kept per process: a partition's file never changes."""
    key = (str(view.path), part.path, columns)
    found = _BOUNDS.get(key)
    if found is not None:
        return found
    ranges = [view.row_group_ranges(part, c) for c in columns]
    lows = [None if any(r[0][g] is None for r in ranges) else tuple(r[0][g] for r in ranges)
            for g in range(len(ranges[0][2]))]
    if len(_BOUNDS) >= _BOUNDS_KEEP:
        _BOUNDS.pop(next(iter(_BOUNDS)))
    _BOUNDS[key] = (lows, list(ranges[0][1]), list(ranges[0][2]))
    return _BOUNDS[key]


@dataclasses.dataclass
class _Merge:
    inputs: list[str]  # the input partitions' paths
    cursor: tuple[Any, ...] | None  # the highest sort key written to the next tier
    done: list[int]  # per input, its leading row groups whose rows are all merged


def _outside(wanted: list[Any], mins: list[Any], maxs: list[Any]) -> bool:
    """Whether every (sorted) value in ``wanted`` lies outside the span of a partition's
    row groups (False when a group lacks statistics: it could hold anything)."""
    if not mins or None in mins or None in maxs:
        return False
    lo, hi = min(mins), max(maxs)
    i = bisect.bisect_left(wanted, lo)
    return i == len(wanted) or wanted[i] > hi


def _key(value: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """A sort key for lower bounds that may be unknown (None sorts first)."""
    if value is None:
        return (0,)
    return (1, *((0, None) if v is None else (1, v) for v in value))


def _lex(columns: Sequence[str], values: Sequence[Any], strict: bool, above: bool) -> pl.Expr:
    """Rows whose sort key is above (or below) ``values``, lexicographically."""
    col, value = pl.col(columns[0]), pl.lit(values[0])
    head = (col > value) if above else (col < value)
    if len(columns) == 1:
        return (head | (col == value)) if not strict else head
    return head | ((col == value) & _lex(columns[1:], values[1:], strict, above))


@dataclasses.dataclass(frozen=True)
class SortedRuns:
    """One index kept as size-tiered sorted runs.

    Attributes:
        prefix: derived-table prefix; tier ``k`` is the table ``<prefix>/T<k>``.
        schema: the stored columns.
        order: the sort columns; the first one is the lookup column.
        row_group_rows: rows per Parquet row group (small: a lookup reads whole groups).
        combine: applied to the rows of runs being merged (for example a sum per key, for
            an index of exact partial counts); None keeps every row. It must keep one row
            per value of ``order``.
        fan_in: runs a tier holds before it merges, in units of ``TIER_RUNS`` (a lookup
            reads a row group per run that can hold its value, a merge reads every row of
            its tier: a larger fan-in trades the first for the second).
        merge_tiers: how many tiers merge (None: all). An index whose runs never overlap
            (rows appended in ascending order of the lookup column) reads one run per
            value however many there are: merging its small runs into a tier of larger
            partitions saves footers, merging further saves nothing.

    Examples:
        >>> import polars as pl
        >>> idx = SortedRuns("projections/x/nums", pl.Schema({"num": pl.Int64()}), ("num",))
        >>> idx.table(2)
        'projections/x/nums/T2'
        >>> idx.tier_for(1_000_000)  # a rebuild's run of a million rows lands in tier 3
        3
    """

    prefix: str
    schema: pl.Schema
    order: tuple[str, ...]
    row_group_rows: int = 64
    combine: Callable[[pl.DataFrame], pl.DataFrame] | None = None
    fan_in: int = 1
    merge_tiers: int | None = None

    @property
    def column(self) -> str:
        return self.order[0]

    @property
    def state_name(self) -> str:
        """The watermark holding the merges in progress and the runs per tier."""
        return f"{self.prefix}/merging"

    def table(self, k: int) -> str:
        return f"{self.prefix}/T{k}"

    def tiers(self, view: StoreView) -> list[int]:
        """The tiers that hold at least one run at ``view``'s generation, ascending."""
        head = f"{self.prefix}/T"
        return sorted(int(t[len(head):]) for t in view.derived_names(head)
                      if t[len(head):].isdigit())

    def runs(self, view: StoreView) -> list[Partition]:
        """Every partition, lowest tier first."""
        return [p for k in self.tiers(view) for p in view.partitions(self.table(k))]

    @staticmethod
    def tier_for(rows: int) -> int:
        """The tier a run of ``rows`` rows belongs to."""
        k = 0
        while BASE_RUN * TIER_RUNS**k < rows:
            k += 1
        return k

    # -- the merges in progress -----------------------------------------------------------------
    def _state(self, view: StoreView) -> tuple[dict[int, _Merge], dict[int, int]]:
        raw = view.watermarks.get(self.state_name)
        if not isinstance(raw, dict):
            return {}, {}
        merges = {int(k): _Merge(list(m["inputs"]),
                                 None if m["cursor"] is None else tuple(m["cursor"]),
                                 [int(n) for n in m["done"]])
                  for k, m in (raw.get("merges") or {}).items()}
        landed = {int(k): int(n) for k, n in (raw.get("landed") or {}).items()}
        return merges, landed

    def _set_state(self, commit: Commit, merges: dict[int, _Merge], landed: dict[int, int]
                   ) -> None:
        commit.set_watermark(self.state_name, {
            "merges": {str(k): {"inputs": m.inputs,
                                "cursor": None if m.cursor is None else list(m.cursor),
                                "done": m.done}
                       for k, m in sorted(merges.items())},
            "landed": {str(k): n for k, n in sorted(landed.items())}})

    def cursors(self, view: StoreView) -> dict[str, tuple[Any, ...]]:
        """Per input partition of a merge in progress, the highest sort key merged."""
        merges, _ = self._state(view)
        return {path: m.cursor for m in merges.values() if m.cursor is not None
                for path in m.inputs}

    # -- reading ------------------------------------------------------------------------------
    def plan(self, view: StoreView, values: Sequence[Any]) -> Plan:
        """The row groups that can hold any of ``values`` (read from the footers only)."""
        wanted = sorted(set(values))
        out: list[tuple[Partition, tuple[int, ...]]] = []
        total = 0
        if not wanted:
            return Plan((), 0)
        cursors = self.cursors(view)
        for part in self.runs(view):
            mins, maxs, counts = view.row_group_ranges(part, self.column)
            if _outside(wanted, mins, maxs):
                continue  # no value sought lies within the partition's bounds
            done = cursors.get(part.path)
            groups = []
            for g, (lo, hi) in enumerate(zip(mins, maxs, strict=True)):
                if lo is not None and hi is not None:
                    if done is not None and hi < done[0]:
                        continue  # merged into the next tier already
                    i = bisect.bisect_left(wanted, lo)  # the first wanted value >= min
                    if i == len(wanted) or wanted[i] > hi:
                        continue
                groups.append(g)
            if groups:
                out.append((part, tuple(groups)))
                total += sum(counts[g] for g in groups)
        return Plan(tuple(out), total, tuple((p.path, cursors[p.path]) for p, _ in out
                                             if p.path in cursors))

    def _past(self, done: tuple[Any, ...]) -> pl.Expr:  # rows past a merge's cursor
        return _lex(self.order, done, strict=True, above=True)

    def _unmerged(self, part: Partition, rows: pl.DataFrame,
                  cursors: dict[str, tuple[Any, ...]]) -> pl.DataFrame:
        return rows.filter(self._past(cursors[part.path])) if part.path in cursors else rows

    def read(self, view: StoreView, plan: Plan, values: Sequence[Any]) -> pl.DataFrame:
        """The rows whose lookup column is in ``values``, reading exactly ``plan``'s groups."""
        cursors = dict(plan.cursors)
        wanted = pl.col(self.column).is_in(
            pl.Series(sorted(set(values)), dtype=self.schema[self.column]).implode())
        if plan.rows < FILTER_EACH_FROM_ROWS:
            pieces = [self._unmerged(part, view.read_row_groups(part, groups, self.schema),
                                     cursors) for part, groups in plan.groups]
            return (pl.concat(pieces) if pieces else empty_of(self.schema)).filter(wanted)
        return pl.concat([view.read_row_groups(part, groups, self.schema, wanted & (
            self._past(cursors[part.path]) if part.path in cursors else True))
            for part, groups in plan.groups])

    def lookup(self, view: StoreView, values: Sequence[Any]) -> tuple[pl.DataFrame, int]:
        """Rows whose lookup column is in ``values`` and the Parquet rows read."""
        return self.read(view, plan := self.plan(view, values), values), plan.rows

    def read_all(self, view: StoreView) -> tuple[pl.DataFrame, int]:
        """Every row of the index (each once) and the Parquet rows read."""
        cursors = self.cursors(view)
        pieces = [self._unmerged(part, view.read_partitions(self.prefix, [part],
                                                            schema=self.schema), cursors)
                  for part in self.runs(view)]
        return (pl.concat(pieces) if pieces else empty_of(self.schema),
                sum(p.rows for p in self.runs(view)))

    # -- writing ------------------------------------------------------------------------------
    def stage_append(self, commit: Commit, view: StoreView, rows: pl.DataFrame,
                     budget: Budget | None = None) -> int:
        """Add ``rows`` as a new tier-0 run and advance the merges. Rows read.

        Merges start when a tier holds ``TIER_RUNS`` runs and advance, lowest tier first,
        by chunks that read at most what is ``budget.left`` (`merge_budget` of the rows
        appended when None). To make progress a chunk may read row groups beyond it: those
        holding the next sort key when the footers' bounds are too loose to split there.
        """
        if budget is None:
            budget = merge_budget(rows.height)
        merges, landed = self._state(view)
        before = budget.spent
        if rows.height:
            commit.write_derived(self.table(0), rows.select(list(self.schema))
                                 .sort(list(self.order)), replace=False,
                                 row_group_rows=self.row_group_rows)
        changed = False
        top = max([*self.tiers(view), *merges], default=-1)
        for k in range(top + 1):
            if k not in merges:
                if self.merge_tiers is not None and k >= self.merge_tiers:
                    break
                live = list(view.partitions(self.table(k)))
                count = len(live) if k == 0 else landed.get(k, len(live))
                if count < TIER_RUNS * self.fan_in or not live:
                    continue
                merges[k] = _Merge([p.path for p in live], None, [0] * len(live))
                landed.setdefault(k + 1, len(view.partitions(self.table(k + 1))))
                landed[k] = 0
                changed = True
            while k in merges and budget.left > 0:
                if not self._chunk(commit, view, k, merges, landed, budget):
                    break  # not one row group fits in what is left: the next cycle goes on
                changed = True
        if changed:
            self._set_state(commit, merges, landed)
        return budget.spent - before

    def _chunk(self, commit: Commit, view: StoreView, k: int, merges: dict[int, _Merge],
               landed: dict[int, int], budget: Budget) -> bool:
        """Advance the merge of tier ``k`` by one chunk of about ``budget.left`` rows.

        Each input's row groups not yet merged are taken in file order, all inputs
        together in the order of the lowest key a group can hold (the per-column minimums
        of its footer). Of the rows read, a chunk writes those below every key an unread
        group can hold: below that group's minimums, or at most the last row read from
        its input (an input is sorted, so its unread rows come after that row). When the
        footers' bounds are too loose for any row to qualify, the next group is read too
        (a k-way merge must see the head of every input that can hold its next key).
        Returns False when not even one row group fits in what is left.
        """
        merge = merges[k]
        by_path = {p.path: p for p in view.partitions(self.table(k))}
        inputs = [by_path[path] for path in merge.inputs]
        cursor = merge.cursor
        queues: list[list[tuple[int, tuple[Any, ...] | None, int]]] = []
        highs: dict[int, Any] = {}  # per input, the highest lookup key of its head group
        for i, part in enumerate(inputs):
            lows, maxs, counts = _bounds(view, part, self.order)
            queue = [(g, lows[g], counts[g]) for g in range(merge.done[i], len(counts))]
            if queue:
                highs[i] = maxs[merge.done[i]]
            queues.append(queue)
        if not any(queues):  # every input row is in the next tier: drop the inputs
            self._finish(commit, k, inputs, merges, landed)
            return True
        order = []  # (running lower bound, input, position, rows): prefixes of each input
        for i, queue in enumerate(queues):
            running: tuple[Any, ...] | None = None
            for pos, (_g, lb, n) in enumerate(queue):
                key = _key(lb)
                running = key if running is None or key > running else running
                order.append((running, i, pos, n))
        order.sort(key=lambda o: o[:3])
        # the head groups that can hold the smallest keys: a chunk reads them all
        known = [h for h in highs.values() if h is not None]
        first = min(known) if known else None
        heads = sum(q[0][2] for q in queues
                    if q and (first is None or q[0][1] is None or q[0][1][0] <= first))
        if max(heads, order[0][3]) > budget.left and budget.left < budget.total:
            return False  # wait for the next cycle's whole budget
        taken = [0] * len(queues)
        read_rows: dict[int, list[pl.DataFrame]] = {}
        spent = 0

        def read(entries: list[tuple[Any, int, int, int]]) -> None:
            nonlocal spent
            for i in sorted({e[1] for e in entries}):
                positions = sorted(e[2] for e in entries if e[1] == i)
                groups = [queues[i][pos][0] for pos in positions]
                read_rows.setdefault(i, []).append(
                    view.read_row_groups(inputs[i], groups, self.schema))
                spent += sum(queues[i][pos][2] for pos in positions)
                taken[i] = positions[-1] + 1

        def last_of(i: int) -> tuple[Any, ...] | None:
            rows = read_rows[i][-1]
            return (tuple(rows.row(rows.height - 1, named=True)[c] for c in self.order)
                    if rows.height else None)

        nxt = 0
        total = 0
        # at least one group: a group larger than what is left of a whole budget is read
        # on its own (it cannot be split)
        while nxt < len(order) and (nxt == 0 or total + order[nxt][3] <= budget.left):
            total += order[nxt][3]
            nxt += 1
        read(order[:nxt])
        while True:
            got = pl.concat([f for pieces in read_rows.values() for f in pieces])
            if cursor is not None:
                got = got.filter(_lex(self.order, cursor, strict=True, above=True))
            done = all(taken[i] == len(q) for i, q in enumerate(queues))
            if not done:
                safe = pl.lit(True)
                for i, queue in enumerate(queues):
                    if taken[i] == len(queue):
                        continue  # all read: nothing of this input comes later
                    lb = queue[taken[i]][1]
                    below = (pl.lit(False) if lb is None
                             else _lex(self.order, lb, strict=True, above=False))
                    last = last_of(i) if i in read_rows else None
                    if last is not None:
                        below = below | _lex(self.order, last, strict=False, above=False)
                    safe = safe & below
                got = got.filter(safe)
            if got.height or done:
                break
            read([order[nxt]])  # loose bounds: read the next group too
            nxt += 1
        budget.spend(spent)
        if self.combine is not None and got.height:
            got = self.combine(got).select(list(self.schema))
        got = got.sort(list(self.order))
        if got.height:
            commit.write_derived(self.table(k + 1), got, replace=False,
                                 row_group_rows=self.row_group_rows)
            merge.cursor = tuple(got.row(got.height - 1, named=True)[c] for c in self.order)
        if done:
            self._finish(commit, k, inputs, merges, landed)
            return True
        # the groups whose rows are all at or below the cursor are never read again
        assert merge.cursor is not None
        for i in read_rows:
            rows = pl.concat(read_rows[i])
            merged = rows.filter(_lex(self.order, merge.cursor, strict=False,
                                      above=False)).height
            for _g, _lb, n in queues[i][:taken[i]]:
                if n > merged:
                    break
                merged -= n
                merge.done[i] += 1
        return True

    def _finish(self, commit: Commit, k: int, inputs: list[Partition], merges: dict[int, _Merge],
                landed: dict[int, int]) -> None:
        """The merge of tier ``k`` wrote its last chunk: its inputs go, tier k+1 has a run."""
        commit.replace_parts(self.table(k), inputs, empty_of(self.schema))
        del merges[k]
        landed[k + 1] = landed.get(k + 1, 0) + 1

    def stage_replace(self, commit: Commit, view: StoreView, rows: pl.DataFrame | SpilledRows
                      ) -> None:
        """Replace the whole index by ``rows`` (maybe spilled: `memframe.store.spill`): one
        run, in the tier its size belongs to."""
        target = self.tier_for(rows.height)
        for k in self.tiers(view):
            if k != target:
                commit.write_derived(self.table(k), rows.clear(), replace=True)
        ordered = rows.select(list(self.schema))
        # a rebuild's rows come in key order: sorting them again would copy every row
        if not strictly_increasing(ordered.get_column(self.order[0])):
            ordered = ordered.sort(list(self.order))
        commit.write_derived(self.table(target), ordered, replace=True,
                             row_group_rows=self.row_group_rows)
        if self.state_name in view.watermarks:
            self._set_state(commit, {}, {})


def stage_append_together(commit: Commit, view: StoreView, indexes: Sequence[SortedRuns],
                          rows: pl.DataFrame, budget: Budget | None = None) -> int:
    """Append the same rows to several indexes, their merges sharing one budget.

    Each index merges in its own sort order (a chunk of one is a key range of that order),
    so each reads its own runs; the budget (`merge_budget` of the rows appended when None)
    bounds what they read together. Returns the Parquet rows read.
    """
    if budget is None:
        budget = merge_budget(rows.height)
    return sum(ix.stage_append(commit, view, rows, budget) for ix in indexes)
