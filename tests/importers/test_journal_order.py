"""An imported journal already in audit_seq order is staged as it is, not sorted again
(the sort copied every journal column): the store it writes is the same, file for file."""

from __future__ import annotations

import polars as pl
import pytest
from import_helpers import NOW
from nmemory_fixture import build_cycles, build_rich

import memframe as mf
from memframe.importers import import_nmemory
from memframe.store import capture
from tests.conftest import FROZEN, TickingClock


def _part_bytes(path) -> dict[str, list[bytes]]:
    """Every canonical table's partition files, their bytes in the log's order."""
    store = mf.Store.open(path)
    snap = store._snap
    return {table: [(path / part.path).read_bytes() for part in snap.parts(table)]
            for table in snap.tables}


@pytest.mark.parametrize("build", [build_rich, build_cycles])
def test_skipping_the_sort_writes_the_same_files_under_tiny_batches(tmp_path, monkeypatch,
                                                                     build):
    db = build(tmp_path / "src.db")
    import_nmemory(db, tmp_path / "fast", progress=False, batch_rows=1,
                   clock=TickingClock(NOW, FROZEN))
    with monkeypatch.context() as m:  # the rows sorted every time, as before
        m.setattr(capture, "strictly_increasing", lambda values: False)
        import_nmemory(db, tmp_path / "sorted", progress=False, batch_rows=1,
                       clock=TickingClock(NOW, FROZEN))
    fast, slow = _part_bytes(tmp_path / "fast"), _part_bytes(tmp_path / "sorted")
    assert fast["journal"]
    assert fast == slow
    for table in ("journal", "capsules"):
        assert (mf.Store.open(tmp_path / "fast").table(table).collect().equals(
            mf.Store.open(tmp_path / "sorted").table(table).collect()))


def test_a_journal_out_of_order_is_still_sorted(tmp_path):
    db = build_rich(tmp_path / "src.db")
    import_nmemory(db, tmp_path / "store", progress=False)
    rows = (mf.Store.open(tmp_path / "store").table("journal").sort("audit_seq")
            .drop("seq").collect())
    assert rows.height > 2

    def staged(frame: pl.DataFrame, name: str) -> pl.DataFrame:
        target = mf.Store.create(tmp_path / name, clock=TickingClock(NOW, FROZEN))
        target.commit(lambda c: c.append_journal(frame), operation="import")
        return target.table("journal").collect()

    in_order = staged(rows, "in-order")
    assert staged(rows.reverse(), "reversed").equals(in_order)
    assert in_order["audit_seq"].to_list() == rows["audit_seq"].to_list()
