"""The warm path is taken where it should be: after a cycle that kept everything (its
report has no notes), a digest reads the kept state, not the canonical rows; a few new
rows cost a few more rows read. A silent fall-back to the slow path fails here."""

from __future__ import annotations

import datetime as dt

import polars as pl

import memframe as mf
from memframe.digest.reads import open_source
from memframe.digest.state.kept_source import KeptSource
from tests.conftest import TickingClock

NOW = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)


def _store(path, n=400):
    store = mf.Store.create(path, clock=TickingClock())
    ids = store.ingest([{"content": f"ACTIVE(t{i % 5}): step {i}" if i % 7 == 0 else f"note {i}",
                         "source": "s", "anchor": "a", "project_id": f"p{i % 3}",
                         "kind": "epic" if i % 50 == 0 else None} for i in range(n)])
    # one commit for the edges: the store's commit count stays the same at every size
    picks = range(1, n - 1, 9)
    store.append("relations", pl.DataFrame({
        "kind": ["blocks", "part_of"] * len(picks),
        "from_id": [ids[i] for i in picks for _ in range(2)],
        "to_id": [t for i in picks for t in (ids[i + 1], ids[0])]}))
    store.record_recall(ids[:40])
    store.record_miss(["lost"], "abstain")
    store.session_start("p0")
    return store, ids


def _canonical_rows(store):
    view = store.pinned()
    return sum(view.row_count(name) for name in mf.schema.CANONICAL_TABLES)


def test_after_a_cycle_the_digest_reads_the_kept_state(tmp_path):
    store, ids = _store(tmp_path / "s")
    report = store.memory.run_cycle()
    assert report.notes == ()  # everything was kept
    total = _canonical_rows(store)
    full = mf.digest(store, now=NOW, verify="full")
    assert full.rows_visited >= total
    warm = mf.digest(store, now=NOW)
    assert warm.to_json() == full.to_json()
    assert warm.rows_visited < total // 4, (warm.rows_visited, total)
    view = store.pinned()
    source = open_source(view, NOW, "incremental", 10, None)
    assert isinstance(source, KeptSource)
    assert source.kept_sections() is not None  # the unfenced sections as the job kept them
    assert {"graph", "sessions", "misses"} <= set(source.families)  # (no lane, no git rows)
    assert not source.warm.in_memory
    fenced = mf.digest(store, now=NOW, project_prefix="p1")
    # the subset and its text, not every row (at this size one row group of the capsules,
    # read for an emitted row's text, is the whole table)
    assert fenced.rows_visited < total
    assert fenced.to_json() == mf.digest(store, now=NOW, project_prefix="p1",
                                         verify="full").to_json()
    # new rows no kept section names cost about themselves
    store.ingest([{"content": f"new {i}", "source": "s", "anchor": "a", "project_id": "p2"}
                  for i in range(5)])
    after = mf.digest(store, now=NOW)
    assert after.to_json() == mf.digest(store, now=NOW, verify="full").to_json()
    assert after.rows_visited < warm.rows_visited + 60


def test_the_warm_read_does_not_follow_the_store_size(tmp_path):
    reads = []
    for n in (300, 1200):
        store, _ids = _store(tmp_path / f"s{n}", n)
        assert store.memory.run_cycle().notes == ()
        reads.append((mf.digest(store, now=NOW).rows_visited, _canonical_rows(store)))
    (small, small_total), (big, big_total) = reads
    assert big_total > 3 * small_total
    assert big < 1.5 * small, reads
