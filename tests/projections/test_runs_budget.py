"""Index runs merge a bounded number of rows per cycle, and stay exact while they do.

The live-count indexes (`memframe.projections.forgotten`) are size-tiered sorted runs
(`memframe.derived.runs`). A full tier's merge advances by key-range chunks, at most
a budget of rows per cycle (`runs.merge_budget`), so no cycle pays for a whole merge,
however many cycles have run and however large the store; a reader skips the inputs'
rows that a merge has already written to the next tier. Tiny tiers, row groups and
budgets here make merges span many cycles in small stores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.derived import runs
from memframe.projections import forgotten
from tests.conftest import TickingClock
from tests.projections.helpers import T0

INDEXES = ("FORGOTTEN", "MEMBERS", "MEMBERS_BY_CONVERSATION", "FORGOTTEN_MEMBERS")


def _tiny(mp: pytest.MonkeyPatch, *, base: int, tiers: int, group: int) -> None:
    """Small tiers, budgets and row groups: merges of several chunks in small stores."""
    mp.setattr(runs, "BASE_RUN", base)
    mp.setattr(runs, "TIER_RUNS", tiers)
    for name in INDEXES:
        mp.setattr(forgotten, name,
                   dataclasses.replace(getattr(forgotten, name), row_group_rows=group))


def _uuid(i: int) -> str:
    return hashlib.sha256(f"conv-{i}".encode()).hexdigest()[:32]  # random key order


def _capsules(n: int, convs: list[str], rng: random.Random, tag: str) -> pl.DataFrame:
    return pl.DataFrame({
        "content": [f"{tag}-{i}" for i in range(n)],
        "source": ["conversation"] * n, "anchor": ["bench"] * n,
        "conversation_id": [rng.choice(convs) for _ in range(n)],
        "created_at": [T0] * n,
    })


def _members_model(store: mf.Store) -> pl.DataFrame:
    """(num, conversation_id) of every capsule folded by the indexes' watermark."""
    mark = forgotten.watermark_of(store.pinned())["seq"]
    return (store.table("capsules").filter((pl.col("seq") <= mark)
                                           & pl.col("conversation_id").is_not_null())
            .select(pl.col("id").str.slice(4).cast(pl.Int64).alias("num"), "conversation_id")
            .collect().sort("num"))


def _forgotten_model(store: mf.Store) -> dict[str, int]:
    members = _members_model(store)
    mark = forgotten.watermark_of(store.pinned())["seq"]
    gone = (store.table("forgets").filter(pl.col("seq") <= mark)
            .select(pl.col("capsule_id").str.slice(4).cast(pl.Int64).alias("num"))
            .unique().collect())
    dead = members.join(gone, on="num", how="semi")
    return dict(dead.group_by("conversation_id").len().iter_rows())


def _assert_exact(store: mf.Store) -> None:
    """Every index holds each row once (merged rows read from one place only)."""
    view = store.pinned()
    model = _members_model(store)
    members, _ = forgotten.MEMBERS.read_all(view)
    assert members.sort("num").equals(model.select(members.columns))
    by_conv, _ = forgotten.MEMBERS_BY_CONVERSATION.read_all(view)
    assert by_conv.sort("num").equals(model.select(by_conv.columns))
    counts, _ = forgotten.FORGOTTEN.read_all(view)
    summed = dict(counts.group_by("conversation_id").agg(pl.col("forgotten").sum()).iter_rows())
    assert {k: v for k, v in summed.items() if v} == _forgotten_model(store)
    dead, _ = forgotten.FORGOTTEN_MEMBERS.read_all(view)
    assert dead["num"].is_unique().all()
    # lookups (planned from the footers, merge cursors applied) agree with the model,
    # filtering their pieces once or each group as it is read (a large read's way)
    some = sorted(model["conversation_id"].unique().to_list())[::7]
    nums = model["num"].to_list()[::5]
    for each in (1 << 62, 0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(runs, "FILTER_EACH_FROM_ROWS", each)
            rows, _ = forgotten.MEMBERS_BY_CONVERSATION.lookup(view, some)
            assert rows.sort("num").equals(model.filter(pl.col("conversation_id").is_in(some))
                                           .select(rows.columns))
            rows, _ = forgotten.MEMBERS.lookup(view, nums)
            assert rows.sort("num").equals(model.filter(pl.col("num").is_in(nums)))


def _merging(store: mf.Store) -> int:
    """Merges in progress that have written some chunks (and not all) at this generation."""
    view = store.pinned()
    return sum(1 for name in INDEXES
               for _path, _cursor in getattr(forgotten, name).cursors(view).items())


def _merge_rows(store: mf.Store) -> int:
    """The input rows of the largest merge in progress at this generation."""
    view = store.pinned()
    rows = {p.path: p.rows for name in INDEXES for p in getattr(forgotten, name).runs(view)}
    sizes = [sum(rows[path] for path in merge["inputs"])
             for name in INDEXES
             for merge in (view.watermarks.get(getattr(forgotten, name).state_name)
                           or {}).get("merges", {}).values()]
    return max(sizes, default=0)


NEW = 12  # capsules per cycle
GROUP = 4  # rows per row group


@pytest.mark.parametrize("size", [400, 4_000])
def test_no_cycle_reads_more_than_its_merge_budget_however_many_cycles_run(tmp_path, size):
    with pytest.MonkeyPatch.context() as mp:
        _tiny(mp, base=16, tiers=2, group=GROUP)
        rng = random.Random(size)
        convs = [_uuid(i) for i in range(size // 10)]
        store = mf.Store.create(tmp_path / "s", clock=TickingClock())
        store.ingest(_capsules(size, convs, rng, "bulk"))
        store.memory.rebuild_projections()
        budget = runs.merge_budget(NEW).left
        reads, in_progress, largest = [], 0, 0
        for r in range(90):
            store.ingest(_capsules(NEW, rng.sample(convs, 4), rng, f"r{r}"))
            report = store.memory.run_cycle()
            reads.append(report.projections["forgotten"]["rows_visited"])
            in_progress += _merging(store) > 0
            largest = max(largest, _merge_rows(store))
            if r % 10 == 9:
                _assert_exact(store)
        # cycles without forgets read only for merges: never more than the budget, plus
        # the head row group of each input that can hold a chunk's next key (a k-way merge
        # must see them): a tier merges 2 x TIER_RUNS runs (the fan-in of the members by
        # conversation), each of them in at most two partitions at any key
        assert max(reads) <= budget + 2 * (2 * runs.TIER_RUNS) * GROUP
        assert sum(reads) > 20 * budget  # the tiers did merge, over and over
        assert in_progress >= 10  # merges spanned cycles (a cursor part-way through them)
        # merges far larger than what a cycle may read went on part-way over many cycles
        assert largest > 3 * (budget + 4 * GROUP)
        _assert_exact(store)


def test_the_door_and_the_cycle_stay_exact_while_merges_are_part_way(tmp_path):
    with pytest.MonkeyPatch.context() as mp:
        _tiny(mp, base=8, tiers=2, group=GROUP)
        rng = random.Random(7)
        convs = [_uuid(i) for i in range(30)]
        store = mf.Store.create(tmp_path / "s", clock=TickingClock())
        store.ingest(_capsules(300, convs, rng, "bulk"))
        store.memory.run_cycle()
        seen_part_way = 0
        for r in range(40):
            store.ingest(_capsules(NEW, rng.sample(convs, 3), rng, f"r{r}"))
            if r % 3 == 0:  # forgets of every mode, some after an earlier forget
                ids = store.table("capsules").select("id").collect()["id"].to_list()
                picked = rng.sample(ids, 6)
                store.append("forgets", {"capsule_id": picked,
                                         "mode": ["tombstone", "redact", "purge"] * 2})
            if r % 4 != 3:
                store.memory.run_cycle()
            seen_part_way += _merging(store) > 0
            door = {k: v for k, v in store.memory.sessions().rows
                    .select("conversation_id", "live_count").iter_rows()}
            one = store.memory.sessions(conversation_id=convs[r % 30])
            with pytest.MonkeyPatch.context() as slow:  # the exact read of every forget
                slow.setattr(forgotten, "usable", lambda *_: False)
                assert door == dict(store.memory.sessions().rows
                                    .select("conversation_id", "live_count").iter_rows())
                assert one.rows.equals(
                    store.memory.sessions(conversation_id=convs[r % 30]).rows)
        assert seen_part_way >= 5
        store.memory.run_cycle()
        _assert_exact(store)
        before = store.memory.sessions()
        store.memory.rebuild_projections()
        after = store.memory.sessions()
        assert before.rows.equals(after.rows) and before.hash == after.hash


step = st.one_of(
    st.tuples(st.just("ingest"), st.integers(1, 9), st.integers(0, 5)),
    st.tuples(st.just("forget"), st.integers(1, 60), st.sampled_from(["tombstone", "purge"])),
    st.tuples(st.just("cycle"), st.just(0), st.just(0)),
)


def test_incremental_indexes_equal_the_rebuilt_ones_for_any_history():
    """Random histories with tiny budgets: after every cycle each index holds exactly the
    rows the rebuild door derives, and the door equals the rebuilt door."""

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(step, min_size=3, max_size=30))
    def law(steps):
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            made = 0
            for i, (verb, a, b) in enumerate(steps):
                if verb == "ingest":
                    rng = random.Random(i)
                    store.ingest(_capsules(a, [_uuid(c) for c in range(b, b + 3)], rng,
                                           f"h{i}"))
                    made += a
                elif verb == "forget" and a <= made:
                    store.append("forgets", {"capsule_id": [f"cap-{a}"], "mode": [b]})
                else:
                    store.memory.run_cycle()
                    if forgotten.watermark_of(store.pinned()) is not None:
                        _assert_exact(store)
            store.memory.run_cycle()
            if made:
                _assert_exact(store)
            before = store.memory.sessions()
            store.memory.rebuild_projections()
            after = store.memory.sessions()
            assert before.rows.equals(after.rows) and before.hash == after.hash

    with pytest.MonkeyPatch.context() as mp:
        _tiny(mp, base=2, tiers=2, group=2)
        law()


@given(wanted=st.lists(st.integers(0, 60), max_size=6),
       groups=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 10)), min_size=1,
                       max_size=5))
def test_a_run_is_skipped_only_when_no_group_could_hold_a_value(wanted, groups):
    """The partition-level shortcut of `SortedRuns.plan` agrees with asking every row
    group: a run is skipped exactly when no value lies within its groups' span (and never
    when it could hold one)."""
    wanted = sorted(set(wanted))
    mins = [lo for lo, _ in groups]
    maxs = [lo + width for lo, width in groups]
    in_span = any(min(mins) <= v <= max(maxs) for v in wanted)
    assert runs._outside(wanted, mins, maxs) == (not in_span)
    # a group without statistics could hold anything: never skipped
    assert not runs._outside(wanted, [None, *mins], [None, *maxs])


@pytest.mark.parametrize("key", ["num", "name"])
def test_a_replacing_run_is_stored_in_order_whatever_order_it_comes_in(tmp_path, key):
    """`SortedRuns.stage_replace` skips the sort (a copy of every row) only for rows whose
    first key column already ascends strictly; shuffled rows, repeated keys and text keys
    are sorted."""
    schema = pl.Schema({"num": pl.Int64(), "name": pl.String(), "v": pl.Int64()})
    index = runs.SortedRuns("projections/test/order", schema, (key, "v"))
    rng = random.Random(7)
    nums = list(range(1, 301))
    rng.shuffle(nums)
    shuffled = pl.DataFrame({"num": nums, "name": [f"n{n:04d}" for n in nums],
                             "v": [n % 3 for n in nums]}, schema=schema)
    repeated = pl.concat([shuffled.head(5), shuffled.head(5).with_columns(pl.col("v") + 9)])
    expected: dict[str, pl.DataFrame] = {}
    for label, rows in (("ordered", shuffled.sort(key, "v")), ("shuffled", shuffled),
                        ("repeated", repeated.sort("v", descending=True))):
        store = mf.Store.create(tmp_path / f"{key}-{label}")
        store.commit(lambda c, rows=rows: index.stage_replace(c, c.view, rows), operation="t")
        view = store.pinned()
        stored = pl.read_parquet([view.path / p.path for t in view.snapshot.tables
                                  if t.startswith("projections/test/order")
                                  for p in view.partitions(t)])
        assert stored.equals(rows.sort(key, "v")), label
        expected[label] = stored
    assert expected["ordered"].equals(expected["shuffled"])
