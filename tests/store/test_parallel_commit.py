"""A large commit writes its partitions on worker threads and chains its journal part by
part. Law: whatever the part size and whichever path runs, the store holds the same rows
and the same chain; a failing write leaves nothing behind.
"""

from __future__ import annotations

import polars as pl
import pytest

import memframe as mf
from memframe import schema as S
from memframe.errors import MemframeError
from memframe.store import store as store_module
from memframe.store import tables
from tests.conftest import TickingClock, verify_chain


def _workload(store: mf.Store) -> None:
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                   "kind": "fact" if i % 3 == 0 else None} for i in range(40)])
    store.append("relations", {"kind": ["blocks"] * 10,
                               "from_id": [f"cap-{i}" for i in range(1, 11)],
                               "to_id": [f"cap-{i}" for i in range(11, 21)]})
    with store.transaction():
        store.forget("cap-3", mode="purge")
        store.ingest([{"content": f"later {i}", "source": "s", "anchor": "b"} for i in range(9)])


def _tables(store: mf.Store) -> dict[str, pl.DataFrame]:
    return {t: store.table(t).collect().sort("seq") for t in S.CANONICAL_TABLES}


def test_small_parts_on_threads_write_what_one_part_writes(tmp_path, monkeypatch):
    plain = mf.Store.create(tmp_path / "plain", clock=TickingClock())
    _workload(plain)
    monkeypatch.setattr(tables, "PART_ROWS", 7)
    monkeypatch.setattr(store_module, "_PARALLEL_WRITE_ROWS", 1)
    split = mf.Store.create(tmp_path / "split", clock=TickingClock())
    _workload(split)
    assert len(split.files("journal")) > len(plain.files("journal"))  # really split
    for name, frame in _tables(plain).items():
        assert frame.equals(_tables(split)[name]), name
    journal = split.table("journal").collect()
    assert verify_chain(journal) == (True, journal.height)
    assert mf.digest(split).to_json() == mf.digest(plain).to_json()


@pytest.mark.parametrize("fail_at", [1, 3, 6])
def test_a_failing_part_write_lands_nothing_and_leaves_no_file(tmp_path, monkeypatch, fail_at):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    store.ingest({"content": "before", "source": "s", "anchor": "a"})
    files = sorted(p for p in store.path.rglob("*") if p.is_file())
    generation = store.generation
    monkeypatch.setattr(tables, "PART_ROWS", 5)
    monkeypatch.setattr(store_module, "_PARALLEL_WRITE_ROWS", 1)
    real = tables.write_part
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(tables, "write_part", flaky)
    with pytest.raises((OSError, MemframeError)):
        store.ingest([{"content": f"n{i}", "source": "s", "anchor": "a"} for i in range(20)])
    assert store.generation == generation
    assert sorted(p for p in store.path.rglob("*") if p.is_file()) == files
    monkeypatch.setattr(tables, "write_part", real)
    assert store.ingest({"content": "after", "source": "s", "anchor": "a"}) == ["cap-2"]
