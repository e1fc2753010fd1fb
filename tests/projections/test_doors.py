"""The doors (rules 3, 8, 9 and the virgin store): pages, ordering, live counts, hashes,
rows_visited."""

from __future__ import annotations

import hashlib

import polars as pl
import pytest

import memframe as mf
from memframe.projections import doors, session_rows
from memframe.projections.doors import DIGEST_SCHEMA, SESSIONS_SCHEMA
from tests.conftest import TickingClock
from tests.projections.helpers import at, bulk_capsules, caps

EMPTY_HASH = hashlib.sha256(b"").hexdigest()


def test_a_store_that_never_had_a_capsule_answers_empty_pages(mstore):
    for page in (mstore.memory.sessions(), mstore.memory.session_digest(),
                 mstore.memory.sessions(conversation_id="nope"), mstore.memory.episodes(),
                 mstore.memory.sessions(since="2026-01-01T00:00:00Z", limit=3)):
        assert page.rows.height == 0 and page.hash == EMPTY_HASH
        assert page.rows_visited == 0 and not page.unchanged
    assert mstore.memory.sessions().rows.schema == SESSIONS_SCHEMA
    assert mstore.memory.session_digest().rows.schema == DIGEST_SCHEMA
    mstore.ingest(caps([(None, 1)]))  # capsules, but none in a conversation
    mstore.memory.run_cycle()
    assert mstore.memory.sessions().rows.height == 0


def test_sessions_order_filter_limit(mstore):
    mstore.ingest(caps([("b", 5), ("a", 5), ("c", 1), ("d", 9), ("c", 2)]))
    mstore.memory.run_cycle()
    page = mstore.memory.sessions()
    assert page.rows["conversation_id"].to_list() == ["d", "a", "b", "c"]  # last_at desc, id
    assert page.rows.columns == list(SESSIONS_SCHEMA)
    assert mstore.memory.sessions(since=at(5)).rows["conversation_id"].to_list() == ["d", "a", "b"]
    cut = mstore.memory.sessions(limit=2)
    assert cut.rows["conversation_id"].to_list() == ["d", "a"] and cut.total == 4
    one = mstore.memory.sessions(conversation_id="c")
    assert one.rows.select("memory_count", "first_at").row(0) == (2, at(1))
    assert mstore.memory.sessions(conversation_id=["c", "b"]).rows.height == 2
    with pytest.raises(mf.errors.InvalidInputError):
        mstore.memory.sessions(limit=-1)
    with pytest.raises(mf.errors.InvalidInputError):
        mstore.memory.sessions(since="yesterday")


def test_live_count_is_computed_at_read_time(mstore):
    ids = mstore.ingest(caps([("a", 1), ("a", 2), ("a", 3), ("b", 4)]))
    mstore.memory.run_cycle()
    row_hash = mstore.memory.sessions(conversation_id="a").rows["hash"][0]
    first = mstore.memory.sessions()
    mstore.forget(ids[1], "tombstone")
    mstore.forget(ids[2], "purge")
    page = mstore.memory.sessions(conversation_id="a")  # no cycle in between
    assert page.rows.select("memory_count", "live_count").row(0) == (3, 1)
    assert page.rows["hash"][0] == row_hash  # the stored row did not change
    assert mstore.memory.sessions().hash != first.hash  # the page did
    # a forgotten capsule the projection has not folded yet does not count against it
    late = mstore.ingest(caps([("a", 9)], tag="late"))
    mstore.forget(late[0])
    assert mstore.memory.sessions(conversation_id="a").rows["live_count"][0] == 1


def test_known_hash_answers_unchanged_without_rows_and_reads_the_same(mstore):
    mstore.ingest(caps([("a", 1), ("b", 2)]))
    mstore.memory.run_cycle()
    for door in (mstore.memory.sessions, mstore.memory.session_digest):
        page = door()
        again = door(known_hash=page.hash)
        assert again.unchanged and again.rows.height == 0 and again.hash == page.hash
        assert again.rows_visited == page.rows_visited  # saves tokens, not reads
        assert not door(known_hash="0" * 64).unchanged
    old = mstore.memory.session_digest()
    mstore.ingest(caps([("a", 3)], tag="more"))
    mstore.memory.run_cycle()
    assert not mstore.memory.session_digest(known_hash=old.hash).unchanged


def test_the_docstrings_say_what_the_hash_saves():
    import memframe.jobs as jobs
    import memframe.projections as projections

    for text in (doors.__doc__, doors.session_digest.__doc__, projections.__doc__,
                 jobs.Memory.session_digest.__doc__):
        flat = " ".join(text.split()).replace("CALLER's", "caller's")
        assert "caller's tokens" in flat and "engine's reads" in flat


def test_digest_lines_and_their_hash(mstore):
    mstore.ingest(caps([("a", 1), ("a", 2.5), ("b", 3)]))
    mstore.memory.summarize(["b"], lambda rows: 'said "hi"')
    mstore.memory.run_cycle()
    page = mstore.memory.session_digest(limit=10)
    assert page.rows["line"].to_list() == [
        'b 2026-07-23T12:00:03Z..2026-07-23T12:00:03Z memories=1 live=1 chars=7 last=cap-3 '
        'summary="said \\"hi\\""',
        "a 2026-07-23T12:00:01Z..2026-07-23T12:00:02.5Z memories=2 live=2 chars=16 last=cap-2",
    ]
    assert page.hash == hashlib.sha256("\n".join(page.rows["line"]).encode()).hexdigest()
    assert mstore.memory.session_digest(limit=1).rows.height == 1
    assert mstore.memory.session_digest(limit=1).total == 2


def test_summary_only_conversations_are_not_sessions(mstore):
    mstore.append("summaries", {"conversation_id": ["ghost"], "summary": ["no members yet"]})
    mstore.memory.run_cycle()
    assert mstore.memory.sessions().rows.height == 0
    mstore.ingest(caps([("ghost", 1)]))
    mstore.memory.run_cycle()
    assert mstore.memory.sessions().rows["summary"].to_list() == ["no members yet"]


def test_rows_visited_is_the_real_count(mstore):
    mstore.ingest(caps([(f"c{k}", k) for k in range(30)]))
    mstore.memory.run_cycle()
    mstore.forget("cap-3")
    view = mstore.pinned()
    stored = sum(part.rows for part in session_rows.PARTIALS.runs(view))
    page = mstore.memory.sessions()
    # every projection row + the forget rows + the capsule row group that holds cap-3
    capsule_rows = view.row_count("capsules")
    assert page.rows_visited == stored + 1 + capsule_rows


@pytest.mark.slow
def test_one_conversation_lookup_on_100k_sessions_is_bounded(tmp_path):
    store = mf.Store.create(tmp_path / "big", clock=TickingClock())
    store.ingest(bulk_capsules(100_000, 1))
    store.memory.rebuild_projections()
    store.ingest(bulk_capsules(50, 2, offset=100_000, tag="late"))
    store.memory.run_cycle()
    for conv in ("conv-00000000", "conv-00054321", "conv-00099999", "conv-00100049"):
        page = store.memory.sessions(conversation_id=conv)
        assert page.rows["conversation_id"].to_list() == [conv]
        # a row group per run that can hold it: a few hundred rows, not 100k
        assert page.rows_visited <= 3 * session_rows.PARTIALS.row_group_rows
    full = store.memory.sessions(limit=1)
    assert full.total == 100_050 and full.rows_visited >= 100_050
    page = store.memory.sessions(conversation_id="conv-00054321")
    assert page.rows.select(pl.col("memory_count")).item() == 1
