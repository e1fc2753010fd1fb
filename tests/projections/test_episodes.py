"""Episodes: a forward-only segmentation walk, and the "same row, two clocks" example."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import memframe as mf
from tests.conftest import FROZEN, TickingClock
from tests.projections.helpers import T0, at, caps

GAP = dt.timedelta(minutes=10)


@pytest.fixture
def clocked(tmp_path):
    clock = TickingClock(T0, FROZEN)
    return mf.Store.create(tmp_path / "s", clock=clock), clock


def _closed(store) -> pl.DataFrame:
    return store.memory.episodes(include_open=False).rows


def test_same_row_two_clocks(clocked):
    store, clock = clocked
    clock.now = at(0)
    store.ingest(caps([("conv", 0), ("conv", 60)]))
    store.memory.run_episode_job(GAP)
    # the session-end hook's one write: a finishing row, source "conversation"
    clock.now = at(120)
    (finish,) = store.ingest({"content": "session finished", "source": "conversation",
                              "anchor": "conv", "conversation_id": "conv",
                              "created_at": at(120)})
    store.memory.run_cycle()
    assert store.memory.sessions(conversation_id="conv").rows["last_member_id"][0] == finish
    store.memory.run_episode_job(GAP)
    assert _closed(store).height == 0  # not quiet long enough: no closed episode holds it
    tail = store.memory.episodes().rows
    assert tail.select("open", "last_member_id", "memory_count").rows() == [(True, finish, 3)]
    clock.now = at(120) + GAP  # quiet exactly the gap: still open
    store.memory.run_episode_job(GAP)
    assert _closed(store).height == 0
    clock.now = at(121) + GAP  # quiet longer than the gap
    store.memory.run_episode_job(GAP)
    closed = _closed(store)
    assert closed.select("first_member_id", "last_member_id", "memory_count", "open").rows() \
        == [("cap-1", finish, 3, False)]
    assert store.memory.episodes().rows.height == 1  # no open tail left


def test_bursts_split_on_gaps_and_rows_are_walked_once(clocked):
    store, clock = clocked
    clock.now = at(10_000)
    store.ingest(caps([("a", 0), ("a", 100), ("a", 2_000), ("b", 50), (None, 60),
                       ("a", 2_100)]))
    report = store.memory.run_episode_job(GAP)
    assert report["rows_walked"] == 5 and report["closed"] == 3
    rows = _closed(store)
    assert rows.select("conversation_id", "first_at", "last_at", "memory_count").rows() == [
        ("a", at(0), at(100), 2), ("a", at(2_000), at(2_100), 2), ("b", at(50), at(50), 1)]
    g = store.generation
    assert store.memory.run_episode_job(GAP)["generation"] is None and store.generation == g
    # forward-only: a row written late with an old created_at never reopens a closed episode
    clock.now = at(10_010)
    store.ingest(caps([("a", 50)], tag="late"))
    before = _closed(store)
    store.memory.run_episode_job(GAP)
    after = _closed(store)
    assert after.height == 4 and before.join(after, on=list(before.columns)).height == 3
    assert after.join(before, on=list(before.columns), how="anti").select(
        "first_at", "memory_count").rows() == [(at(50), 1)]
    # its own watermark: the session projection's is untouched
    assert "projections/session" not in store.watermarks


def test_open_tail_includes_rows_the_job_has_not_walked(clocked):
    store, clock = clocked
    store.ingest(caps([("a", 0), ("a", 1)]))
    page = store.memory.episodes(conversation_id="a")
    assert page.rows.select("memory_count", "open").rows() == [(2, True)]
    assert page.rows_visited == 2
    assert store.memory.episodes(include_open=False).rows.height == 0
    with pytest.raises(mf.errors.InvalidInputError):
        store.memory.run_episode_job(dt.timedelta(0))
