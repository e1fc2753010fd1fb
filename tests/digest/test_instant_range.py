"""``archive_candidates`` at the ends of the instant range (reference 4.15): condition 5 is
``whole_days(now - created_at) > 180`` or ``valid_to < now``, exact for any two instants a
store holds (the reference's durations do not wrap), on every path: no state, the digest
state after a cycle, and ``verify="full"``. Instants are int64 nanoseconds, whose
difference wraps past 292 years; the episode job compares instants the same way."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import memframe as mf
from memframe.errors import InvalidInputError
from memframe.projections.episodes import capsule_partials, segment
from tests.conftest import TickingClock

UTC = dt.UTC
FIRST = dt.datetime(1677, 9, 21, 0, 12, 44, tzinfo=UTC)  # the store's first instant
LAST = dt.datetime(2262, 4, 11, 23, 47, 16, tzinfo=UTC)  # and its last
CREATED = [FIRST, dt.datetime(1678, 1, 1, tzinfo=UTC), dt.datetime(2026, 1, 1, tzinfo=UTC),
           dt.datetime(2261, 10, 12, tzinfo=UTC), dt.datetime(2262, 1, 1, tzinfo=UTC), LAST]
NOWS = [FIRST, dt.datetime(1678, 3, 1, tzinfo=UTC), dt.datetime(1700, 1, 1, tzinfo=UTC),
        dt.datetime(2027, 1, 1, tzinfo=UTC), dt.datetime(2262, 4, 1, tzinfo=UTC), LAST]


def _model(created: dt.datetime, valid_to: dt.datetime | None, now: dt.datetime) -> bool:
    """Condition 5 with Python's unbounded durations (whole days truncate toward zero)."""
    days = (now - created) / dt.timedelta(days=1)
    return (valid_to is not None and valid_to < now) or int(days) > 180


def _store(path, rows):
    store = mf.Store.create(path, clock=TickingClock())
    ids = store.ingest([{"content": f"old {i}", "source": "s", "anchor": "a",
                         "created_at": created, "valid_from": created, "valid_to": valid_to}
                        for i, (created, valid_to) in enumerate(rows)])
    newer = store.ingest({"content": "newer", "source": "s", "anchor": "a"})[0]
    for cid in ids:  # candidates must be superseded
        store.relate(newer, cid, "supersedes")
    return store


def _answers(store, now):
    warm = mf.digest(store, now=now).to_dict()["archive_candidates"]
    full = mf.digest(store, now=now, verify="full").to_dict()["archive_candidates"]
    return warm, full


@pytest.mark.parametrize("created", CREATED, ids=lambda c: c.date().isoformat())
def test_stale_at_the_ends_of_the_range_on_every_path(tmp_path, created):
    store = _store(tmp_path / "s", [(created, None)])
    for cycled in (False, True):
        if cycled:
            store.memory.run_cycle()
        for now in NOWS:
            expected = int(_model(created, None, now))
            assert _answers(store, now) == (expected, expected), (created, now, cycled)


def test_expiry_at_the_last_instant_never_wraps(tmp_path):
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(start, LAST), (start, LAST - dt.timedelta(seconds=1)), (LAST, LAST)]
    store = _store(tmp_path / "s", rows)
    store.memory.run_cycle()
    for now in [*NOWS, start + dt.timedelta(days=100)]:
        expected = sum(_model(c, v, now) for c, v in rows)
        assert _answers(store, now) == (expected, expected), now


def test_now_outside_the_instants_a_store_holds_is_refused(tmp_path):
    store = _store(tmp_path / "s", [(dt.datetime(2026, 1, 1, tzinfo=UTC), None)])
    for now in (dt.datetime(3000, 1, 1, tzinfo=UTC), dt.datetime(1600, 1, 1, tzinfo=UTC)):
        with pytest.raises(InvalidInputError, match="now: .* outside the instants"):
            mf.digest(store, now=now)


def test_episode_gaps_across_the_whole_range():
    caps = pl.DataFrame({"id": ["cap-1", "cap-2", "cap-3"],
                         "created_at": [FIRST, LAST, LAST],
                         "conversation_id": ["c", "c", "d"]},
                        schema_overrides={"created_at": pl.Datetime("ns", "UTC")})
    out = segment(capsule_partials(caps), dt.timedelta(minutes=30), LAST)
    # 584 years apart: two episodes, not one (a wrapped difference is negative)
    assert out.filter(pl.col("conversation_id") == "c")["memory_count"].to_list() == [1, 1]
    # a tail at the first instant is quiet at the last one; one at the last is still open
    assert out.select("conversation_id", "open").rows() == [
        ("c", False), ("c", True), ("d", True)]
    early = segment(capsule_partials(caps), dt.timedelta(minutes=30), FIRST)
    assert early.filter(pl.col("conversation_id") == "d")["open"].to_list() == [True]
    # a gap longer than the whole range keeps one episode, open
    whole = segment(capsule_partials(caps), dt.timedelta(days=999_999), LAST)
    assert whole.filter(pl.col("conversation_id") == "c").select(
        "memory_count", "open").rows() == [(2, True)]
