"""``archive_candidates`` from the kept archive instants (`digest_aggregates.archive_at`): one row
group read for any ``now``, exact before, between and after the instants, with the rows
above the watermark added, and with aggregates kept whole by an earlier version carried
over."""

from __future__ import annotations

import datetime as dt

import polars as pl

import memframe as mf
from memframe.digest.state import digest_aggregates
from tests.conftest import TickingClock

NOW = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)


def _store(path):
    store = mf.Store.create(path, clock=TickingClock())
    rows = [{"content": f"note {i}", "source": "s", "anchor": "a",
             "created_at": NOW - dt.timedelta(days=190 + 3 * i),
             "valid_from": NOW - dt.timedelta(days=190 + 3 * i)} for i in range(24)]
    start = NOW - dt.timedelta(days=300)
    rows += [{"content": f"expiring {i}", "source": "s", "anchor": "a", "created_at": start,
              "valid_from": start, "valid_to": NOW - dt.timedelta(days=20 * i)}
             for i in range(6)]
    ids = store.ingest(rows)
    for older in ids[:12] + ids[24:]:  # each superseded by the next capsule
        store.relate(ids[(ids.index(older) + 1) % len(ids)], older, "supersedes")
    return store, ids


def _nows():
    return [NOW + dt.timedelta(days=d) for d in range(-120, 40, 9)] + [
        NOW - dt.timedelta(days=400), NOW + dt.timedelta(days=900)]


def _agree(store, **kwargs):
    for now in _nows():
        warm = mf.digest(store, now=now, **kwargs).to_dict()["archive_candidates"]
        full = mf.digest(store, now=now, verify="full", **kwargs).to_dict()
        assert warm == full["archive_candidates"], now


def test_every_now_is_answered_from_one_row_group(tmp_path, monkeypatch):
    monkeypatch.setattr(digest_aggregates, "ARCHIVE_GROUP_ROWS", 2)
    store, ids = _store(tmp_path / "s")
    store.memory.run_cycle()
    view = store.pinned()
    (part,) = view.partitions(digest_aggregates.ARCHIVE_TABLE)
    assert part.rows > 10 and len(view.row_group_ranges(part, "at")[2]) > 5
    _agree(store)
    answers = {mf.digest(store, now=now).to_dict()["archive_candidates"] for now in _nows()}
    assert len(answers) > 5  # the instants spread over the nows asked
    # rows above the watermark add their changes: a recall removes a stale candidate, a
    # new supersedes edge adds one
    store.record_recall([ids[3]])
    store.relate(ids[20], ids[19], "supersedes")
    _agree(store)
    store.memory.run_cycle()
    _agree(store)


def test_the_rows_read_do_not_grow_with_the_instants(tmp_path, monkeypatch):
    monkeypatch.setattr(digest_aggregates, "ARCHIVE_GROUP_ROWS", 2)
    store, _ids = _store(tmp_path / "s")
    store.memory.run_cycle()
    view = store.pinned()
    for now in _nows():
        _total, read = digest_aggregates.archive_at(view, now)
        assert read <= 2


def test_aggregates_kept_whole_by_an_earlier_version_are_carried_over(tmp_path):
    store, ids = _store(tmp_path / "s")
    store.memory.run_cycle()
    view = store.pinned()
    archive = view.derived(digest_aggregates.ARCHIVE_TABLE, digest_aggregates.ARCHIVE_SCHEMA).collect()
    small = view.derived(digest_aggregates.AGG_TABLE, digest_aggregates.AGG_SCHEMA).collect()
    legacy = pl.concat([small, archive.select(pl.lit("archive").alias("metric"),
                                              pl.lit("").alias("key"), "at", "n")])

    def as_before(c):  # the instants inside the aggregates, no archive rows of their own
        c.write_derived(digest_aggregates.AGG_TABLE, legacy, replace=True)
        c.write_derived(digest_aggregates.ARCHIVE_TABLE, archive.clear(), replace=True)

    store.commit(as_before, operation="memory_projections")
    _agree(store)
    store.record_recall([ids[5]])
    store.memory.run_cycle()  # moves them to the archive table
    view = store.pinned()
    assert not view.derived(digest_aggregates.AGG_TABLE, digest_aggregates.AGG_SCHEMA).filter(
        pl.col("metric") == "archive").collect().height
    assert view.row_count(digest_aggregates.ARCHIVE_TABLE) > 0
    _agree(store)
