"""The generation log: creation, pinning, time travel, checkpoints, compaction, vacuum."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import time

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.errors import (
    GenerationNotFoundError,
    NotAStoreError,
    ReadOnlyStoreError,
    StoreExistsError,
)
from memframe.schema import CANONICAL_TABLES
from tests.conftest import TickingClock


def row(content: str, **extra):
    return {"content": content, "source": "note", "anchor": "a", **extra}


def snapshot_of(view) -> dict[str, list[tuple]]:
    return {name: view.table(name).sort("seq").collect().rows() for name in CANONICAL_TABLES}


def test_create_refuses_a_non_empty_path_and_open_refuses_a_non_store(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file.txt").write_text("hello")
    with pytest.raises(StoreExistsError, match="pick an empty or new directory"):
        mf.Store.create(tmp_path / "busy")
    with pytest.raises(NotAStoreError, match="not a memframe store"):
        mf.Store.open(tmp_path / "busy")
    with pytest.raises(NotAStoreError, match="does not exist"):
        mf.Store.open(tmp_path / "nowhere")
    mf.Store.create(tmp_path / "s")
    with pytest.raises(StoreExistsError, match="already holds a store"):
        mf.Store.create(tmp_path / "s")
    marker = json.loads((tmp_path / "s" / "memframe.json").read_text())
    assert marker == {"format": "memframe-store", "version": 1}


def test_a_new_store_reads_as_empty_tables(store):
    assert store.generation == 0
    for name in CANONICAL_TABLES:
        assert store.table(name).collect().height == 0
    assert store.capsule_state().collect().height == 0


def test_a_pinned_view_never_sees_later_commits(store, tmp_path, clock):
    store.ingest(row("a"))
    view = store.pinned()
    other = mf.Store.open(tmp_path / "store", clock=clock)
    other.ingest(row("b"))
    assert view.table("capsules").collect().height == 1
    assert store.table("capsules").collect().height == 2  # the handle reads the newest
    lazy = store.at(1).table("capsules")
    other.ingest(row("c"))
    assert lazy.collect().height == 1


def test_at_reproduces_exactly_what_was_visible_at_each_generation(store):
    seen = {}
    for i in range(6):
        store.ingest(row(f"c{i}"))
        if i % 2:
            store.relate(f"cap-{i + 1}", f"cap-{i}", "supersedes")
        seen[store.generation] = snapshot_of(store)
    for g, expected in seen.items():
        assert snapshot_of(store.at(g)) == expected
    with pytest.raises(GenerationNotFoundError, match="the newest is"):
        store.at(store.generation + 1)


def test_as_of_picks_the_newest_generation_committed_by_then(tmp_path):
    clock = TickingClock(step=dt.timedelta(hours=1))
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest(row("a"))  # committed at 13:00
    store.ingest(row("b"))  # 14:00
    store.ingest(row("c"))  # 15:00
    assert store.as_of("2026-07-23T14:30:00Z").generation == 2
    assert store.as_of(dt.datetime(2026, 7, 23, 15, tzinfo=dt.UTC)).generation == 3
    assert store.as_of("2026-07-23T12:30:00Z").generation == 0


def test_views_are_read_only(store):
    store.ingest(row("a"))
    view = store.at(1)
    with pytest.raises(ReadOnlyStoreError, match="frozen view"):
        view.ingest(row("b"))
    with pytest.raises(ReadOnlyStoreError):
        view.relate("cap-1", "cap-1", "blocks")


def test_opening_uses_the_newest_checkpoint_plus_the_tail(tmp_path, clock):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    for i in range(205):
        store.record_miss([f"term{i}"], "abstain")
    log = tmp_path / "s" / "_log"
    checkpoints = sorted(p.name for p in log.glob("_checkpoint.*.json"))
    assert checkpoints == ["_checkpoint.00000000000000000100.json",
                           "_checkpoint.00000000000000000200.json"]
    # the generations the checkpoint covers are not read again when opening (its own
    # generation file stays: the checkpoint is verified against it)
    for g in range(1, 200):
        os.rename(log / f"{g:020d}.json", tmp_path / f"moved-{g}.json")
    reopened = mf.Store.open(tmp_path / "s")
    assert reopened.generation == 205
    assert reopened.table("recall_misses").collect().height == 205


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=8),
       min_rows=st.integers(min_value=1, max_value=12), cap=st.integers(min_value=1, max_value=9))
def test_compact_changes_no_row(tmp_path_factory, batches, min_rows, cap):
    from memframe.store import tables

    with pytest.MonkeyPatch.context() as mp:
        # capsule partitions hold at most ``cap`` rows (the ones an erasure rewrites)
        mp.setattr(tables, "ERASABLE_PART_ROWS", cap)
        compacted_within(tmp_path_factory, batches, min_rows, cap)


def compacted_within(tmp_path_factory, batches: list[int], min_rows: int, cap: int) -> None:
    store = mf.Store.create(tmp_path_factory.mktemp("c") / "s", clock=TickingClock())
    n = 0
    for size in batches:
        store.ingest([row(f"x{n + k}") for k in range(size)])
        n += size
        store.record_recall([f"cap-{n}"])
    before = snapshot_of(store)
    parts_before = store.pinned().partitions("capsules")
    store.compact(min_rows=min_rows)
    assert snapshot_of(store) == before
    parts = store.pinned().partitions("capsules")
    assert len(parts) <= len(parts_before)
    # what compaction wrote holds at most a capsule partition's rows, and it merged every
    # run of small partitions as far as that allows: compacting again merges nothing
    assert all(p.rows <= cap for p in parts if p not in parts_before)
    small = min(min_rows, cap)
    assert all(a.rows >= small or b.rows >= small or a.rows + b.rows > cap
               for a, b in itertools.pairwise(parts))
    assert store.compact("capsules", min_rows=min_rows) == {}
    store.vacuum(retention_hours=0, allow_short_retention=True)  # no grace for replaced parts
    assert snapshot_of(mf.Store.open(store.path)) == before
    # the verbs still work after compaction (the write indexes follow the new parts)
    assert store.ingest(row("x0")) == ["cap-1"]
    store.forget("cap-1", mode="purge")
    assert store.capsule_state().collect()["content"][0] is None


def test_compact_merges_small_partitions(store):
    for i in range(5):
        store.ingest(row(f"c{i}"))
    assert len(store.files("capsules")) == 5
    assert store.compact("capsules") == {"capsules": 5}
    assert len(store.files("capsules")) == 1
    with pytest.raises(mf.errors.InvalidInputError, match="unknown table"):
        store.compact("capsule")


def test_vacuum_removes_orphans_but_not_referenced_parts(store):
    store.ingest(row("a"))
    orphan = store.path / "capsules" / "part-00000000000000000002-0000-deadbeef0000.parquet"
    pl.DataFrame({"x": [1]}).write_parquet(orphan)
    stale = store.path / "_log" / ".tmp-0123456789abcdef"
    stale.write_text("{}")
    assert store.vacuum()["files"] == []  # may be a writer in flight
    hour_ago = time.time() - 3600
    for leftover in (orphan, stale):
        os.utime(leftover, (hour_ago, hour_ago))
    report = store.vacuum()
    assert (report["partitions"], report["temporary"]) == (1, 1)
    assert not orphan.exists()
    assert store.table("capsules").collect().height == 1


def test_readers_ignore_files_no_generation_names(store):
    store.ingest(row("a"))
    stray = store.path / "capsules" / "part-00000000000000000009-0000-000000000000.parquet"
    store.table("capsules").collect().write_parquet(stray)
    assert store.table("capsules").collect().height == 1


def test_a_store_shows_itself_in_a_terminal_and_a_notebook(tmp_path, clock):
    store = mf.Store.create(tmp_path / "<b>odd'name", clock=clock)
    store.ingest([row("a"), row("b")])
    text = repr(store)
    assert "generation=1" in text and "capsules" in text and "2 rows" in text
    page = store._repr_html_()
    assert "<b>odd" not in page and "&lt;b&gt;odd&#x27;name" in page
    assert '>capsules</td><td class="mf-num">2</td>' in page


def test_a_generation_file_changed_after_a_read_is_checked_again(tmp_path, clock):
    """The log remembers which bytes it found whole, not which generation: a file
    edited in place after a read is checked field by field again."""
    from memframe.errors import CorruptStoreError
    from memframe.store.log import Log, gen_name

    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest(row("one"))
    log = Log.open(tmp_path / "s")
    entry = log.read_entry(1)
    assert log.read_entry(1) == entry  # the same bytes: read again, not checked again
    path = tmp_path / "s" / "_log" / gen_name(1)
    path.write_text(json.dumps({**entry, "generation": 7}))
    with pytest.raises(CorruptStoreError, match="field generation"):
        log.read_entry(1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.booleans()), min_size=1, max_size=25))
def test_applying_entries_keeps_parts_in_seq_order(steps):
    """`Snapshot.apply` appends parts above the others as they come and sorts when one
    lands below (a merged part, an import's rows): the parts of a table are always in
    (seq, path) order."""
    from memframe.store.log import EMPTY, Part

    snap, made = EMPTY, []
    for g, (lo, drop) in enumerate(steps, start=1):
        removes = [made.pop(0).path] if drop and made else []
        part = Part(f"capsules/part-{g:020d}-0000-{g:012x}.parquet", 1, lo, lo)
        made.append(part)
        snap = snap.apply({"generation": g, "add": [{"table": "capsules", **part.to_json()}],
                           "remove": removes})
        parts = list(snap.parts("capsules"))
        assert parts == sorted(made, key=lambda p: (p.seq_lo, p.path))
