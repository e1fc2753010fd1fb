"""The kept leaders of the newest and most-recalled lists (`digest_leaders.leaders_first`):
with a table far smaller than the store (tiny K, floors, trims and refills all happen),
the warm digest still answers the full computation's bytes; a warm digest after new rows
answers its lists from the leaders without reading the state's row groups."""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.derived import keyed
from memframe.digest.state import digest_capsules, digest_leaders, warm_reader
from memframe.state import KEY, population_expr
from tests.conftest import TickingClock
from tests.digest.test_warm_equals_full import _bytes_agree
from tests.strategies import LAW_EXAMPLES, NOW, digest_step, play


def test_tiny_leaders_answer_the_full_bytes(monkeypatch):
    @settings(max_examples=LAW_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(digest_step, min_size=1, max_size=18), k=st.integers(1, 4),
           final_cycle=st.booleans())
    def law(steps, k, final_cycle):
        monkeypatch.setattr(digest_leaders, "LEADERS_K", k)
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play(store, steps)
            # without it, the rows since the last cycle (an erasure's commit, which writes
            # the leaders again without the erased rows) are read above the watermark
            if final_cycle:
                store.memory.run_cycle()
            # warm against verify="full" only: the kept leaders are the one thing K changes,
            # and neither verify="full" nor the full algorithm reads them; that those two
            # agree, for these very histories, is test_warm_equals_full's law
            _bytes_agree(store.pinned(), reference=False)

    law()


def _state_groups_read(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = keyed.KeyedRuns.read_all

    def counting(self, view, *args, **kwargs):
        seen.append(self.prefix)
        return real(self, view, *args, **kwargs)

    monkeypatch.setattr(keyed.KeyedRuns, "read_all", counting)
    return seen


def test_the_lists_come_from_the_leaders(tmp_path, monkeypatch):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"}
                        for i in range(600)])
    store.record_recall(ids[::7] + ids[::50])
    store.memory.run_cycle()
    store.ingest([{"content": f"new {i}", "source": "s", "anchor": "a"} for i in range(3)])
    store.record_recall([ids[3]])
    view = store.pinned()
    before = warm_reader.read_warm(view)[0]
    read: list = []
    real = keyed.KeyedRuns.partitions
    monkeypatch.setattr(keyed.KeyedRuns, "partitions",
                        lambda self, v: read.append(self.prefix) or real(self, v))
    body = mf.digest(view, now=NOW, headlines=10).to_dict()
    assert read == []  # no state row group was scanned: the leaders proved both lists
    assert [r["id"] for r in body["newest"][:3]] == ["cap-603", "cap-602", "cap-601"]
    assert body["most_recalled"][0]["id"] == "cap-1"  # recalled twice (ids[::7], ids[::50])
    # newest: K rows and a floor; most recalled: every recalled capsule (fewer than K), so
    # no floor (the list is complete)
    leaders = view.derived(digest_leaders.LEADERS, digest_leaders.LEADERS_SCHEMA).collect()
    recalled = len(set(ids[::7] + ids[::50]))
    assert leaders.group_by("list", "floor").len().sort("list", "floor").rows() == [
        ("newest", False, digest_leaders.LEADERS_K), ("newest", True, 1), ("recalled", False, recalled)]
    # a digest reads a list's first row groups only: until N + 1 untouched entries qualify
    # (the last one read then stands for the floor)
    base = before.rows_visited
    head = before.leaders("newest", population_expr(), 10)
    assert before.rows_visited - base == digest_leaders.LEADERS_GROUP_ROWS == head.height
    assert head.get_column("floor").to_list() == [False] * 15 + [True]
    assert head.get_column("num").to_list() == list(range(600, 584, -1))
    # the most-recalled list: its own first group
    assert before.leaders("recalled", population_expr(), 0).height >= 1
    assert before.rows_visited - base <= 2 * digest_leaders.LEADERS_GROUP_ROWS


def test_a_list_run_low_is_refilled_from_every_state_row(tmp_path, monkeypatch):
    monkeypatch.setattr(digest_leaders, "LEADERS_K", 4)
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"}
                        for i in range(20)])
    store.memory.run_cycle()
    for cid in ids[-4:]:  # every newest leader leaves the population
        store.forget(cid)
    seen = _state_groups_read(monkeypatch)
    store.memory.run_cycle()
    assert digest_capsules.state_runs().prefix in seen  # refilled from the stored state rows
    leaders = store.pinned().derived(digest_leaders.LEADERS, digest_leaders.LEADERS_SCHEMA).collect()
    newest = leaders.filter((pl.col("list") == "newest") & ~pl.col("floor"))
    assert newest.get_column("num").to_list() == [16, 15, 14, 13]
    assert mf.digest(store, now=NOW, headlines=3).to_json() == mf.digest(
        store, now=NOW, headlines=3, verify="full").to_json()


def test_an_erased_floor_keeps_the_list_exact(tmp_path, monkeypatch):
    """An erasure writes the leaders again without the erased capsules' rows: a floor
    names no capsule (it stands for a rank), so erasing the capsule it was taken from
    keeps it, and the digest still knows rows were left out."""
    monkeypatch.setattr(digest_leaders, "LEADERS_K", 2)
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"}
                        for i in range(6)])
    store.memory.run_cycle()
    leaders = store.pinned().derived(digest_leaders.LEADERS, digest_leaders.LEADERS_SCHEMA).collect()
    floor = leaders.filter((pl.col("list") == "newest") & pl.col("floor"))
    assert floor.get_column("seq").to_list() == [4]  # the third newest capsule's rank
    store.forget(ids[3], mode="purge")  # cap-4: the capsule the floor was taken from
    assert store.pinned().derived(digest_leaders.LEADERS, digest_leaders.LEADERS_SCHEMA).collect().filter(
        pl.col("floor")).height == 1
    for n in (1, 2, 3, 4):
        assert mf.digest(store, now=NOW, headlines=n).to_json() == mf.digest(
            store, now=NOW, headlines=n, verify="full").to_json(), n


def _state_rows(nums: list[int]) -> pl.DataFrame:
    from memframe.state import STATE_DEFAULTS, STATE_SCHEMA

    return pl.DataFrame([{"num": i, "seq": i} for i in nums]).select(
        [pl.col(c) if c in ("num", "seq") else pl.lit(STATE_DEFAULTS.get(c)).cast(d).alias(c)
         for c, d in STATE_SCHEMA.items()])


def test_the_nth_row_must_rank_strictly_before_the_floor():
    """The leaders prove the first N rows only when the N-th ranks strictly before the
    floor: a row that ties it (the very capsule the floor was taken from, touched and
    unchanged) proves nothing, and the caller reads the state's row groups instead."""
    rows = _state_rows([1, 2, 3, 4, 5])
    leaders = digest_leaders.leaders_of(rows, k=2).filter(pl.col("list") == "newest")
    keep = population_expr()
    nothing = pl.Series(KEY, [], dtype=pl.Int64)
    first = digest_leaders.leaders_first(leaders, rows.clear(), nothing, keep, 2, "newest")
    assert first.get_column("num").to_list() == [5, 4]
    assert digest_leaders.leaders_first(leaders, rows.clear(), nothing, keep, 3, "newest") is None
    touched = pl.Series(KEY, [4, 5], dtype=pl.Int64)
    tie = rows.filter(pl.col("num") == 3)  # ranks exactly as the floor (seq 3)
    assert digest_leaders.leaders_first(leaders, tie, touched, keep, 1, "newest") is None
    newer = _state_rows([6])
    assert digest_leaders.leaders_first(leaders, newer, touched, keep, 1, "newest").get_column(
        "num").to_list() == [6]
