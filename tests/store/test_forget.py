"""Forget: tombstone hides; redact and purge erase the content bytes from every file."""

from __future__ import annotations

import pytest

from memframe.errors import InvalidInputError, UnknownCapsuleError

SECRET = "the launch code is zebra-4471-quokka"


def files_containing(root, needle: bytes) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return hits


def test_tombstone_hides_but_keeps_the_bytes(store):
    store.ingest([{"content": SECRET, "source": "s", "anchor": "a"},
                  {"content": "other", "source": "s", "anchor": "b"}])
    store.forget("cap-1", reason="stale")
    state = store.capsule_state().collect()
    assert state["status"].to_list() == ["tombstoned", "live"]
    assert state["forget_mode"].to_list() == ["tombstone", None]
    assert files_containing(store.path, SECRET.encode())


@pytest.mark.parametrize("mode", ["redact", "purge"])
def test_erasure_leaves_no_file_holding_the_content(store, mode):
    # the secret shares a partition with rows that must survive the rewrite
    store.ingest([{"content": "keep me", "source": "s", "anchor": "a"},
                  {"content": SECRET, "source": "s", "anchor": "b", "conversation_id": "c1"},
                  {"content": "keep me too", "source": "s", "anchor": "c"}])
    store.relate("cap-3", "cap-1", "blocks")
    assert files_containing(store.path, SECRET.encode())
    g = store.generation
    store.forget("cap-2", mode=mode, reason="pii")
    state = store.capsule_state().collect()
    assert state["content"].to_list() == ["keep me", None, "keep me too"]
    assert state["content_chars"].to_list() == [7, len(SECRET), 11]  # recorded at ingest
    assert state["status"].to_list() == ["live", "tombstoned", "live"]
    # time travel still shows the content until the replaced partition is vacuumed
    assert store.at(g).table("capsules").collect()["content"][1] == SECRET
    store.vacuum()
    assert files_containing(store.path, SECRET.encode()) == []
    assert files_containing(store.path, SECRET[:12].encode()) == []


def test_erasure_inside_the_commit_that_ingested_it(store):
    with store.transaction():
        store.ingest({"content": SECRET, "source": "s", "anchor": "b"})
        store.forget("cap-1", mode="purge")
    store.vacuum()
    assert files_containing(store.path, SECRET.encode()) == []
    assert store.capsule_state().collect()["status"].to_list() == ["tombstoned"]


def test_forget_escalates_but_never_repeats(store):
    store.ingest({"content": SECRET, "source": "s", "anchor": "b"})
    store.forget("cap-1")
    g = store.generation
    store.forget("cap-1")
    assert store.generation == g
    store.forget("cap-1", mode="purge")
    assert store.generation == g + 1
    store.vacuum()
    assert files_containing(store.path, SECRET.encode()) == []
    with pytest.raises(InvalidInputError, match="allowed: 'tombstone'"):
        store.forget("cap-1", mode="shred")
    with pytest.raises(UnknownCapsuleError):
        store.forget("cap-2")


def test_a_bulk_commit_is_split_into_bounded_partitions_and_erasure_rewrites_one(store, monkeypatch):
    from memframe.store import tables

    monkeypatch.setattr(tables, "PART_ROWS", 4)
    ids = store.ingest([{"content": f"row {i}", "source": "s", "anchor": "a"} for i in range(10)])
    parts = store.files("capsules")
    assert len(parts) == 3
    assert store.table("capsules").collect()["id"].to_list() == ids
    store.forget("cap-6", mode="purge")
    after = store.files("capsules")
    assert len(after) == 3 and len(set(after) - set(parts)) == 1
    assert store.capsule_state().collect()["content"].to_list() == [
        f"row {i}" if i != 5 else None for i in range(10)]
    assert store.ingest({"content": "row 9", "source": "s", "anchor": "a"}) == ["cap-10"]


def test_capsule_partitions_stay_small_enough_to_erase_and_a_larger_one_is_split(
        store, monkeypatch):
    """Capsule partitions (the ones an erasure rewrites whole) hold at most
    `tables.part_rows("capsules")` rows, fewer than other tables'; a larger one an older
    version wrote is split as an erasure rewrites it, so the next erasure near it rewrites
    a bounded one."""
    from memframe.store import tables

    def sizes(table: str) -> list[int]:
        return [p.rows for p in store.pinned().partitions(table)]

    monkeypatch.setattr(tables, "ERASABLE_PART_ROWS", 100)
    ids = store.ingest([{"content": f"row {i}", "source": "s", "anchor": "a"} for i in range(10)])
    assert sizes("capsules") == [10]
    monkeypatch.setattr(tables, "ERASABLE_PART_ROWS", 4)
    monkeypatch.setattr(tables, "PART_ROWS", 6)
    assert tables.part_rows("capsules") == 4 and tables.part_rows("recalls") == 6
    store.forget("cap-6", mode="purge")
    assert sizes("capsules") == [4, 4, 2]
    assert store.capsule_state().collect()["content"].to_list() == [
        f"row {i}" if i != 5 else None for i in range(10)]
    before = set(store.files("capsules"))
    store.forget("cap-2", mode="redact")
    assert sizes("capsules") == [4, 4, 2] and len(set(store.files("capsules")) - before) == 1
    ids += store.ingest([{"content": f"new {i}", "source": "s", "anchor": "a"}
                         for i in range(9)])
    store.record_recall(ids[:9])
    assert sizes("capsules") == [4, 4, 2, 4, 4, 1] and sizes("recalls") == [6, 3]
    assert store.table("capsules").collect()["id"].to_list() == ids


def test_an_erasure_writes_the_text_tables_again_without_the_erased_capsules(store):
    """Derived text tables (``projections/text/``) lose the erased capsules' rows in the
    erasing commit: by their ``num`` column (the other rows kept, in order, in row groups
    of the size they had), whole when rows that hang together list an erased capsule in
    ``names`` (kept as they are when none does), whole when neither says whose text a row
    holds. Once vacuumed, no file holds the text."""
    import polars as pl
    import pyarrow.parquet as pq

    store.ingest([{"content": f"note {i}" if i != 2 else SECRET, "source": "s",
                   "anchor": f"a{i}"} for i in range(1, 6)])
    keyed = pl.DataFrame({"num": [1, 2, 3, 4, 2, 5],
                          "headline": ["one", SECRET, "three", "four", SECRET, "five"]})
    tables = {"projections/text/keyed": (keyed, 2),
              "projections/text/unnamed": (pl.DataFrame({"k": [0], "text": [SECRET]}), None),
              "projections/text/names_other": (
                  pl.DataFrame({"text": ["one"], "names": ["1 3"]}), None),
              "projections/text/names_erased": (
                  pl.DataFrame({"text": [SECRET], "names": ["3 2"]}), None)}

    def stage(writer):
        for name, (frame, rows) in tables.items():
            writer.write_derived(name, frame, replace=True, row_group_rows=rows)

    store.commit(stage, operation="test_text")
    kept = store.pinned().partitions("projections/text/names_other")
    assert files_containing(store.path, SECRET.encode())
    store.forget("cap-2", mode="purge")
    view = store.pinned()
    (part,) = view.partitions("projections/text/keyed")
    assert view.derived("projections/text/keyed", keyed.schema).collect().rows() == [
        (1, "one"), (3, "three"), (4, "four"), (5, "five")]
    groups = pq.ParquetFile(view.path / part.path).metadata
    assert [groups.row_group(g).num_rows for g in range(groups.num_row_groups)] == [2, 2]
    assert view.partitions("projections/text/names_other") == kept  # the very same file
    assert not view.partitions("projections/text/unnamed")
    assert not view.partitions("projections/text/names_erased")
    store.vacuum()
    assert files_containing(store.path, SECRET.encode()) == []
