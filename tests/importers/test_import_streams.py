"""An import stages its rows as it reads them and writes each table's full partitions at
once (`Commit.flush`): it holds about a partition per table, never the source. The store
it writes is the one it wrote when it held everything; a failure leaves no file behind;
a vacuum running beside it removes none of its files."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from import_helpers import NOW, digest_text, execute
from nmemory_fixture import build_recall, build_rich, grow_rich

import memframe as mf
from memframe.errors import ConcurrentCommitError, ImportSourceError
from memframe.importers import import_nmemory
from memframe.store import capture, tables
from tests.conftest import FROZEN, TickingClock


def _part_bytes(path: Path) -> dict[str, list[bytes]]:
    """Every table's partition files, their bytes in the log's order."""
    store = mf.Store.open(path)
    return {table: [(path / part.path).read_bytes() for part in store._snap.parts(table)]
            for table in store._snap.tables}


def _files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet")}


def _import(db: Path, target: Path, **kwargs) -> mf.importers.ImportReport:
    return import_nmemory(db, target, progress=False, clock=TickingClock(NOW, FROZEN),
                          **kwargs)


@pytest.mark.parametrize("build", [build_rich, build_recall])
def test_writing_partitions_early_writes_the_same_files(tmp_path, monkeypatch, build):
    db = build(tmp_path / "src.db")
    monkeypatch.setattr(tables, "PART_ROWS", 3)
    written: list[str] = []
    flush = capture.Commit.flush

    def counted(self, table):
        before = len(self.flushed)
        flush(self, table)
        written.extend(table for _ in self.flushed[before:])

    with monkeypatch.context() as m:
        m.setattr(capture.Commit, "flush", counted)
        _import(db, tmp_path / "early", batch_rows=2)
    with monkeypatch.context() as m:  # every row held until the commit lands, as before
        m.setattr(capture.Commit, "flush", lambda self, table: None)
        _import(db, tmp_path / "held", batch_rows=2)
    assert "capsules" in written and "journal" in written
    early, held = _part_bytes(tmp_path / "early"), _part_bytes(tmp_path / "held")
    assert early == held
    assert max(len(files) for files in early.values()) > 1  # tables of several partitions
    assert digest_text(tmp_path / "early") == digest_text(tmp_path / "held")


def test_an_import_holds_about_a_partition_per_table(tmp_path, monkeypatch):
    db = build_rich(tmp_path / "src.db")
    monkeypatch.setattr(tables, "PART_ROWS", 2)
    most: dict[str, int] = {}
    append = capture.Commit.append

    def watched(self, table, frame):
        staged = append(self, table, frame)
        held = sum(f.height for f in self.frames.get(table, []))
        most[table] = max(most.get(table, 0), held)
        return staged

    monkeypatch.setattr(capture.Commit, "append", watched)
    report = _import(db, tmp_path / "store", batch_rows=1)
    assert report.added["capsules"] == 16 and report.added["journal"] > 16
    # a row short of a partition, plus the batch just read, at most
    assert most["capsules"] <= 2 and most["journal"] <= 2
    assert digest_text(tmp_path / "store")


def test_a_full_import_that_fails_late_leaves_nothing(tmp_path, monkeypatch):
    db = build_rich(tmp_path / "src.db")
    execute(db, "UPDATE capsules SET canonical_json = '{' WHERE id = 'cap-16'")
    monkeypatch.setattr(tables, "PART_ROWS", 2)
    flushed: list[Path] = []
    flush = capture.Commit.flush

    def seen(self, table):
        flush(self, table)
        flushed.extend(path for path, _ in self.flushed if path not in flushed)

    monkeypatch.setattr(capture.Commit, "flush", seen)
    with pytest.raises(ImportSourceError, match="cap-16"):
        _import(db, tmp_path / "store", batch_rows=1)
    assert len(flushed) >= 7  # the 15 capsules before it were written out already
    assert not any(path.exists() for path in flushed)
    assert not (tmp_path / "store").exists()


def test_an_incremental_import_that_fails_late_leaves_the_store_as_it_was(tmp_path,
                                                                         monkeypatch):
    db = build_rich(tmp_path / "src.db")
    _import(db, tmp_path / "store")
    before = _files(tmp_path / "store")
    generation = mf.Store.open(tmp_path / "store").generation
    grow_rich(db)
    execute(db, "UPDATE capsules SET canonical_json = '{' WHERE id = 'cap-19'")
    monkeypatch.setattr(tables, "PART_ROWS", 1)
    with pytest.raises(ImportSourceError, match="cap-19"):
        _import(db, tmp_path / "store", batch_rows=1)
    assert _files(tmp_path / "store") == before
    assert mf.Store.open(tmp_path / "store").generation == generation


def test_a_vacuum_beside_an_import_removes_none_of_its_files(tmp_path, monkeypatch):
    db = build_rich(tmp_path / "src.db")
    grown = tmp_path / "grown.db"
    grown.write_bytes(db.read_bytes())
    grow_rich(grown)
    _import(db, tmp_path / "store")  # a store a vacuum can run on
    monkeypatch.setattr(tables, "PART_ROWS", 1)
    first_file = threading.Event()
    resume = threading.Event()
    flush = capture.Commit.flush

    def pausing(self, table):
        flush(self, table)
        if self.flushed and not first_file.is_set():
            first_file.set()
            assert resume.wait(60)

    monkeypatch.setattr(capture.Commit, "flush", pausing)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            _import(grown, tmp_path / "store", batch_rows=1)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)

    importer = threading.Thread(target=run)
    importer.start()
    try:
        assert first_file.wait(60)
        on_disk = _files(tmp_path / "store")
        other = mf.Store.open(tmp_path / "store")
        named = {p.path for parts in other._snap.tables.values() for p in parts}
        assert on_disk - named  # the import's first partition, which no generation names
        time.sleep(0.05)  # older than the grace below: only the lock keeps it
        with pytest.raises(ConcurrentCommitError, match="nothing was removed"):
            other.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=0.01,
                         wait_seconds=0.2)
        assert _files(tmp_path / "store") == on_disk
    finally:
        resume.set()
        importer.join(60)
    assert not failures
    store = mf.Store.open(tmp_path / "store")
    assert all((tmp_path / "store" / p.path).exists()
               for parts in store._snap.tables.values() for p in parts)
    fresh = tmp_path / "fresh"
    _import(grown, fresh)
    assert digest_text(tmp_path / "store") == digest_text(fresh)


def test_a_full_disk_while_writing_early_leaves_nothing(tmp_path, monkeypatch):
    import errno

    from memframe.errors import StorageError

    db = build_rich(tmp_path / "src.db")
    monkeypatch.setattr(tables, "PART_ROWS", 2)
    write_part = tables.write_part
    calls = []

    def filling(root, relpath, frame, **kwargs):
        calls.append(relpath)
        if len(calls) == 4:  # the fourth file is cut short by a full disk
            (root / relpath).write_bytes(b"PAR1 half")
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_part(root, relpath, frame, **kwargs)

    monkeypatch.setattr(tables, "write_part", filling)
    with pytest.raises(StorageError, match="space"):
        _import(db, tmp_path / "store", batch_rows=1)
    assert len(calls) == 4
    assert not (tmp_path / "store").exists()


def test_receipts_written_early_still_count_for_the_next_receipt_id(tmp_path, monkeypatch):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock(NOW, FROZEN))
    [cid] = store.ingest({"content": "note", "source": "s", "anchor": "a"})
    monkeypatch.setattr(tables, "PART_ROWS", 2)

    def run(c):
        for _ in range(3):
            capture.record_recall(c, [cid], terms=["note"])
        c.flush("recall_receipts")  # two of the three written out already
        assert len(c.flushed) == 1
        capture.record_recall(c, [cid], terms=["note"])

    store.commit(run, operation="recalls")
    ids = store.table("recall_receipts").select("id").collect()["id"]
    assert ids.to_list() == ["rcpt-1", "rcpt-2", "rcpt-3", "rcpt-4"]
