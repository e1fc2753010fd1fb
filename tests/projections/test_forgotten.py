"""Live counts by key: the forgotten-member indexes give the same live_count as reading every
forget, whatever the history and whether the cycle ran, and a door lookup reads a bounded
number of rows however many forgets the store holds."""

from __future__ import annotations

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
from tests.projections.helpers import bulk_capsules, caps
from tests.strategies import play_sessions, session_step


def model_live(store: mf.Store) -> dict[str, int]:
    """live_count in plain Python: members folded into the session row, not forgotten now."""
    mark = int(store.watermarks.get("projections/session", 0) or 0)
    gone = set(store.table("forgets").collect()["capsule_id"].to_list())
    out: dict[str, int] = {}
    for row in store.table("capsules").collect().iter_rows(named=True):
        conv = row["conversation_id"]
        if conv is None or row["seq"] > mark:
            continue
        out[conv] = out.get(conv, 0) + (row["id"] not in gone)
    return out


def page_live(store: mf.Store, conversation_id=None) -> dict[str, int]:
    rows = store.memory.sessions(conversation_id=conversation_id).rows
    return dict(rows.select("conversation_id", "live_count").iter_rows())


@pytest.mark.parametrize("tiny", [False, True], ids=["default", "tiny-tiers"])
def test_indexed_live_counts_equal_the_full_read(tiny):
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(session_step, min_size=1, max_size=16))
    def law(steps):
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play_sessions(store, steps)
            view = store.pinned()
            mark = int(view.watermarks.get("projections/session", 0) or 0)
            model = model_live(store)
            assert {k: v for k, v in page_live(store).items()} == {
                k: v for k, v in model.items() if k in page_live(store)}
            for conv in ("c0", "c3"):
                assert page_live(store, conv) == ({conv: model[conv]} if conv in model else {})
            if forgotten.usable(view, mark):  # and the slow path agrees
                with pytest.MonkeyPatch.context() as mp:
                    mp.setattr(forgotten, "usable", lambda *_: False)
                    assert page_live(store) == {k: model[k] for k in page_live(store)}

    with pytest.MonkeyPatch.context() as mp:
        if tiny:
            mp.setattr(runs, "TIER_RUNS", 2)
            mp.setattr(runs, "BASE_RUN", 2)
        law()


def test_a_lookup_after_many_forgets_reads_a_bounded_number_of_rows(tmp_path):
    visited = {}
    for n_convs in (200, 2_000):
        store = mf.Store.create(tmp_path / f"s{n_convs}", clock=TickingClock())
        store.ingest(bulk_capsules(n_convs, 5))
        store.memory.run_cycle()
        total = store.row_count("capsules")
        gone = [f"cap-{i}" for i in range(3, total, 7)]  # forgets spread over the store
        store.append("forgets", {"capsule_id": gone})
        store.memory.run_cycle()
        page = store.memory.sessions(conversation_id="conv-00000100")
        members = [f"cap-{i}" for i in range(501, 506)]
        assert page.rows["live_count"].to_list() == [5 - len(set(members) & set(gone))]
        visited[n_convs] = page.rows_visited
        # the full read of every forget, for comparison
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(forgotten, "usable", lambda *_: False)
            slow = store.memory.sessions(conversation_id="conv-00000100")
        assert slow.rows.equals(page.rows)
        assert slow.rows_visited > len(gone)
    # the session row and its forgotten count, by key: a few row groups per level
    assert visited[2_000] <= 4 * runs.SortedRuns.row_group_rows
    assert visited[2_000] <= visited[200] + 2 * runs.SortedRuns.row_group_rows


def test_forgets_written_after_the_cycle_are_counted_from_the_members_index(mstore):
    mstore.ingest(caps([("a", 1), ("a", 2), ("b", 3), (None, 4)]))
    mstore.memory.run_cycle()
    mstore.forget("cap-1")
    mstore.forget("cap-4")  # no conversation
    mstore.forget("cap-1", "purge")  # a second forget of the same capsule counts once
    assert page_live(mstore) == {"a": 1, "b": 1}
    mstore.ingest(caps([("b", 5)], tag="late"))
    mstore.forget("cap-5")  # above the session watermark: not a folded member yet
    assert page_live(mstore) == {"a": 1, "b": 1}
    mstore.memory.run_cycle()
    assert page_live(mstore) == {"a": 1, "b": 1}
    assert forgotten.usable(mstore.pinned(), mstore.watermarks["projections/session"])


def test_a_store_without_the_indexes_falls_back_and_the_next_cycle_builds_them(mstore):
    mstore.ingest(caps([("a", 1), ("a", 2), ("b", 3)]))
    mstore.forget("cap-2")

    def drop(c):
        for k in forgotten.FORGOTTEN.tiers(c.view):
            c.write_derived(forgotten.FORGOTTEN.table(k), pl.DataFrame(), replace=True)
        c.watermarks.pop(forgotten.WATERMARK, None)

    mstore.memory.run_cycle()
    mstore.commit(drop, operation="drop")  # a store written before the indexes existed
    view = mstore.pinned()
    assert not forgotten.usable(view, view.watermarks["projections/session"])
    assert page_live(mstore) == {"a": 1, "b": 1}
    mstore.ingest(caps([("b", 4)], tag="more"))
    mstore.memory.run_cycle()
    view = mstore.pinned()
    assert forgotten.usable(view, view.watermarks["projections/session"])
    assert page_live(mstore) == {"a": 1, "b": 2}
