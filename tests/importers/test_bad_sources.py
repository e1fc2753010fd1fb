"""Bad sources and targets: a clear MemframeError, and nothing written to the target."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from import_helpers import execute
from nmemory_fixture import ACTOR, Builder, build_rich, grow_rich

import memframe as mf
from memframe.importers import ImportSourceError, import_nmemory


def _refused(db, target, match):
    with pytest.raises(mf.MemframeError, match=match) as err:
        import_nmemory(db, target, progress=False)
    assert isinstance(err.value, ImportSourceError)
    return err.value


def test_not_a_sqlite_file(tmp_path):
    db = tmp_path / "notes.db"
    db.write_text("just some notes\n")
    _refused(db, tmp_path / "s", "is not a SQLite database")
    assert not (tmp_path / "s").exists()


def test_missing_file(tmp_path):
    _refused(tmp_path / "nope.db", tmp_path / "s", "does not exist")
    assert not (tmp_path / "s").exists()


def test_a_damaged_sqlite_file(tmp_path):
    db = build_rich(tmp_path / "a.db")
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # smash the schema page after the header
    db.write_bytes(bytes(data))
    _refused(db, tmp_path / "s", "damaged|cannot read")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("version", "advice"), [
    (0, "it is not an nMEMORY store, or it is damaged"),
    (11, "open it once with nMEMORY 0.3.0, which migrates an older store to schema 21 in "
         "place"),
    (19, "open it once with nMEMORY 0.3.0"),
    (22, "no nMEMORY release migrates a store down: import it with a memframe release that "
         "reads schema 22"),
])
def test_an_unread_schema_version_is_named_with_advice_that_can_be_followed(tmp_path, version,
                                                                           advice):
    db = build_rich(tmp_path / "a.db")
    execute(db, f"PRAGMA user_version = {version}")
    err = _refused(db, tmp_path / "s", f"schema version {version}")
    assert "this importer reads 20 (nMEMORY 0.2.x) and 21 (nMEMORY 0.3.0)" in str(err)
    assert advice in str(err)
    assert ("(nMEMORY 0.1.x)" in str(err)) == (version == 11)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("table", ["usage", "audit_events", "capsules", "source_cursors"])
def test_missing_table(tmp_path, table):
    db = build_rich(tmp_path / "a.db")
    execute(db, f"DROP TABLE {table}")
    _refused(db, tmp_path / "s", f"lacks table\\(s\\) {table}")
    assert not (tmp_path / "s").exists()


def test_missing_column(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, "ALTER TABLE relations DROP COLUMN origin")
    _refused(db, tmp_path / "s", "table relations lacks column\\(s\\) origin")


CORRUPT = {
    "truncated JSON": ('{"content": "x', "not valid JSON"),
    "not an object": ("[1, 2]", "not a Capsule v1 object"),
    "wrong type": ('{"content": "x", "confidence": "high"}', "'confidence' has the wrong type"),
    "missing fields": ('{"content": "x"}', "lacks provenance.source"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_canonical_json_names_the_row(tmp_path, case):
    text, match = CORRUPT[case]
    db = build_rich(tmp_path / "a.db")
    execute(db, ("UPDATE capsules SET canonical_json = ? WHERE id = 'cap-5'", (text,)))
    err = _refused(db, tmp_path / "s", match)
    assert "cap-5" in str(err)
    assert not (tmp_path / "s").exists()


def test_column_disagreeing_with_the_json_is_refused(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, "UPDATE capsules SET project_id = 'elsewhere' WHERE id = 'cap-4'")
    _refused(db, tmp_path / "s", "cap-4.*project_id column differs")


def test_bad_timestamp_is_refused(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, "UPDATE capsules SET created_at = 'yesterday' WHERE id = 'cap-2'")
    _refused(db, tmp_path / "s", "cap-2.*created_at 'yesterday' is not an RFC3339")


def test_tombstone_without_null_json_is_inconsistent(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, "INSERT INTO tombstones (capsule_id, mode, content_hmac, at, reason) "
                "VALUES ('cap-1', 'purged', 'h', '2026-07-22T00:00:00Z', 'gone')")
    _refused(db, tmp_path / "s", "cap-1.*tombstones row but its canonical_json is still present")


def test_journal_time_that_would_not_round_trip_is_refused(tmp_path):
    """A '+00:00' offset verifies in the source but memframe renders 'Z': refuse."""
    db = tmp_path / "a.db"
    b = Builder(db)
    b.ingest("one", at="2026-07-22T00:00:00Z")
    b.audit("2026-07-22T00:00:01+00:00", "memory_note", "cap-1")  # chained with that text
    b.close()
    _refused(db, tmp_path / "s", "seq=2.*'2026-07-22T00:00:01\\+00:00' would be re-rendered as "
                                 "'2026-07-22T00:00:01Z'")
    assert not (tmp_path / "s").exists()


def test_untrimmed_fraction_in_journal_is_refused(tmp_path):
    db = tmp_path / "a.db"
    b = Builder(db)
    b.audit("2026-07-22T00:00:01.500Z", "memory_note", "x")
    b.close()
    _refused(db, tmp_path / "s", "would be re-rendered as '2026-07-22T00:00:01.5Z'")


def test_invalid_vocabulary_is_refused(tmp_path):
    db = build_rich(tmp_path / "a.db")
    con = sqlite3.connect(db)
    con.execute("PRAGMA ignore_check_constraints = ON")
    con.execute("UPDATE recall_misses SET outcome = 'grounded' WHERE seq = 2")
    con.commit()
    con.close()
    _refused(db, tmp_path / "s", "recall_misses row seq=2: unknown miss outcome 'grounded'")


def test_failure_leaves_an_existing_empty_directory_empty(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, "UPDATE capsules SET canonical_json = 'garbage' WHERE id = 'cap-9'")
    (tmp_path / "s").mkdir()
    _refused(db, tmp_path / "s", "cap-9")
    assert list((tmp_path / "s").iterdir()) == []


def test_failure_on_reimport_leaves_the_store_unchanged(tmp_path):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    grow_rich(db)
    execute(db, "UPDATE capsules SET canonical_json = '{' WHERE id = 'cap-19'")
    _refused(db, tmp_path / "s", "cap-19")
    assert mf.Store.open(tmp_path / "s").generation == 1


def test_target_holding_something_else_is_refused(tmp_path):
    db = build_rich(tmp_path / "a.db")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "keep.txt").write_text("mine")
    _refused(db, tmp_path / "t", "not a memframe store")
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["keep.txt"]


def test_store_with_native_rows_is_refused(tmp_path):
    db = build_rich(tmp_path / "a.db")
    store = mf.Store.create(tmp_path / "s")
    store.ingest({"content": "native", "source": "s", "anchor": "a"})
    _refused(db, tmp_path / "s", "rows no nMEMORY import wrote")
    assert mf.Store.open(tmp_path / "s").generation == 1


def test_an_empty_memframe_store_is_filled(tmp_path):
    db = build_rich(tmp_path / "a.db")
    mf.Store.create(tmp_path / "s")
    assert import_nmemory(db, tmp_path / "s", progress=False).mode == "full"


def test_fixture_chain_is_the_reference_chain(tmp_path):
    """Guard the fixture itself: audit hashes follow reference 4.14 exactly."""
    db = build_rich(tmp_path / "a.db")
    con = sqlite3.connect(db)
    prev = ""
    for seq, at, actor, action, subject, reason, stored in con.execute(
            "SELECT seq, at, actor, action, subject, reason, chained_hash FROM audit_events "
            "ORDER BY seq"):
        line = json.dumps({"seq": seq, "at": at, "actor": actor, "action": action,
                           "subject": subject, "reason": reason},
                          ensure_ascii=False, separators=(",", ":"))
        prev = hashlib.sha256((prev + line).encode()).hexdigest()
        assert stored == prev and actor == ACTOR
    con.close()


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_an_import_target_that_is_a_broken_symlink_is_refused(tmp_path, kind):
    """Regression: a dangling or looping symlink as the target gave a raw OSError."""
    db = build_rich(tmp_path / "src.db")
    target = tmp_path / "store"
    if kind == "dangling":
        target.symlink_to(tmp_path / "nowhere")
    else:
        target.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(target)
    with pytest.raises(mf.MemframeError, match="symbolic link that leads nowhere"):
        import_nmemory(db, target)
    assert target.is_symlink() and not (tmp_path / "nowhere").exists()
    with pytest.raises(mf.MemframeError, match="symbolic link that leads nowhere"):
        mf.Store.create(target)
