"""nMEMORY 0.3.0 (schema v21) and 0.2.x (v20): both import; an incremental import goes on
across the engine's in-place migration; the ``about`` kind; and what an honest import
refuses (reference 0.1 and 6)."""

from __future__ import annotations

import json
import sqlite3

import polars as pl
import pytest
from import_helpers import digest_text, execute, expected_text
from nmemory_fixture import (
    KINDS_V20,
    KINDS_V21,
    VERSIONS,
    Builder,
    build_curated,
    build_rich,
    grow_rich,
    migrate_to_v21,
)

import memframe as mf
from memframe.importers import ImportSourceError, SourceRewrittenError, import_nmemory


def _user_version(db) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def _relations_sql(db) -> str:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT sql FROM sqlite_master WHERE name = 'relations'").fetchone()[0]
    finally:
        con.close()


# ---- v21 and the migration -------------------------------------------------------------------

def test_the_fixture_versions_differ_in_the_relations_check_only(tmp_path):
    a, b = build_rich(tmp_path / "a.db", version=20), build_rich(tmp_path / "b.db", version=21)
    assert (_user_version(a), _user_version(b)) == (20, 21)
    assert "'about'" not in _relations_sql(a) and "'about'" in _relations_sql(b)
    with pytest.raises(sqlite3.IntegrityError):  # the v20 CHECK refuses the ninth kind
        execute(a, "INSERT INTO relations VALUES ('about', 'cap-1', 'cap-3', "
                   "'2026-07-22T00:00:00Z', 'manual')")


def test_an_import_goes_on_across_the_engines_migration_to_v21(tmp_path):
    db = build_rich(tmp_path / "a.db", version=20)
    first = import_nmemory(db, tmp_path / "inc", progress=False)
    migrate_to_v21(db)  # the user upgrades the engine to 0.3.0 and opens the store
    assert _user_version(db) == 21 and "'about'" in _relations_sql(db)
    grow_rich(db)
    b = Builder(db, fresh=False)
    b.relate("cap-1", "cap-12", "about", at="2026-07-22T09:00:00Z")  # only v21 holds it
    b.close()
    second = import_nmemory(db, tmp_path / "inc", progress=False)
    assert (first.mode, second.mode) == ("full", "incremental")
    assert any("migrated from schema version 20 to 21" in note for note in second.notes)
    import_nmemory(db, tmp_path / "fresh", progress=False)
    assert digest_text(tmp_path / "inc") == digest_text(tmp_path / "fresh")
    store = mf.Store.open(tmp_path / "inc")
    assert store.watermarks["import:nmemory"]["schema_version"] == 21
    about = store.table("relations").filter(pl.col("kind") == "about").collect()
    assert about.select("from_id", "to_id").rows() == [("cap-1", "cap-12")]
    assert import_nmemory(db, tmp_path / "inc", progress=False).mode == "unchanged"


def test_a_v20_copy_of_a_store_imported_at_v21_is_refused(tmp_path):
    old = build_rich(tmp_path / "a.db", version=20)
    new = tmp_path / "b.db"
    new.write_bytes(old.read_bytes())
    migrate_to_v21(new)
    import_nmemory(new, tmp_path / "s", progress=False)
    with pytest.raises(SourceRewrittenError, match="no nMEMORY release migrates a store down"):
        import_nmemory(old, tmp_path / "s", progress=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_about_edges_count_in_relations_only(tmp_path, version):
    """The rich fixture at v21 with about edges: its digest is the reference's with the
    relation count (and the audit rows of the relate calls) moved, nothing else."""
    db = build_rich(tmp_path / "a.db", version=version)
    expected = json.loads(expected_text("rich"))
    if version == 21:
        b = Builder(db, fresh=False)
        for src, dst in (("cap-5", "cap-1"), ("cap-4", "cap-1"), ("cap-16", "cap-4")):
            b.relate(src, dst, "about", at="2026-07-21T23:36:40Z")
        b.close()
        expected["relations"] += 3
        expected["audit_events"] += 3
        expected["journal"]["verified"] += 3
    import_nmemory(db, tmp_path / "s", progress=False)
    assert json.loads(digest_text(tmp_path / "s")) == expected


def test_the_engine_refuses_about_to_a_forgotten_capsule_but_keeps_older_edges(tmp_path):
    db = tmp_path / "a.db"
    b = Builder(db, version=21)
    note = b.ingest("a note", at="2026-07-22T00:00:00Z")
    topic = b.ingest("a topic", at="2026-07-22T00:00:01Z")
    b.relate(note, topic, "about", at="2026-07-22T00:00:02Z")
    b.forget(topic, "purged", at="2026-07-22T00:00:03Z")
    with pytest.raises(ValueError, match="refuses an about edge"):
        b.relate(b.ingest("late", at="2026-07-22T00:00:04Z"), topic, "about",
                 at="2026-07-22T00:00:05Z")
    b.close()
    import_nmemory(db, tmp_path / "s", progress=False)  # the older edge imports
    assert json.loads(digest_text(tmp_path / "s"))["relations"] == 1


# ---- refusals: the kinds a source's schema admits ------------------------------------------

@pytest.mark.parametrize(("version", "kind"), [(20, "about"), (20, "abstracted_into"),
                                               (21, "abstracted_into"), (21, "likes")])
def test_a_kind_the_sources_schema_does_not_admit_is_refused_listing_the_engines_kinds(
        tmp_path, version, kind):
    db = build_rich(tmp_path / "a.db", version=version)
    execute(db, "CREATE TABLE r2 AS SELECT * FROM relations", "DROP TABLE relations",
            "CREATE TABLE relations (kind TEXT, from_id TEXT, to_id TEXT, at TEXT, origin TEXT)",
            "INSERT INTO relations SELECT * FROM r2", "DROP TABLE r2",
            (f"INSERT INTO relations VALUES ('{kind}', 'cap-1', 'cap-3', "
             f"'2026-07-22T00:00:00Z', 'manual')", ()))
    with pytest.raises(ImportSourceError, match=f"unknown relation kind '{kind}'") as err:
        import_nmemory(db, tmp_path / "s", progress=False)
    allowed = str(err.value).split("allowed: ")[1]
    assert allowed == ", ".join(KINDS_V21 if version == 21 else KINDS_V20)
    assert "abstracted_into" not in allowed
    assert not (tmp_path / "s").exists()


# ---- refusals: endpoints the engine never writes ---------------------------------------------

def _loose_relations(db) -> None:
    """The relations table without its key and CHECKs (a source that lost them)."""
    execute(db, "CREATE TABLE r2 AS SELECT * FROM relations", "DROP TABLE relations",
            "CREATE TABLE relations (kind TEXT, from_id TEXT, to_id TEXT, at TEXT, origin TEXT)",
            "INSERT INTO relations SELECT * FROM r2", "DROP TABLE r2")


@pytest.mark.parametrize(("kind", "from_id", "to_id"), [
    ("blocks", "cap-1\x00x", "cap-3"),
    ("blocks", "cap-1", "cap-3\x1b[31m"),
    ("blocks", "cap-1", "cap-03"),
    ("blocks", "cap-1", "cap-0"),
    ("blocks", "cap-1", "cap-99"),
    ("blocks", " cap-1", "cap-3"),
    ("blocks", "cap-1", "CAP-3"),
    ("blocks", "out-1", "cap-3"),
    ("falsifies", "out-1", "cap-3"),  # no outcome out-1 was issued
    ("blocks", "cap-1", "cap-1"),
])
def test_an_endpoint_the_source_did_not_issue_is_refused_naming_the_row(tmp_path, kind,
                                                                      from_id, to_id):
    db = build_rich(tmp_path / "a.db")
    _loose_relations(db)
    execute(db, ("INSERT INTO relations VALUES (?, ?, ?, '2026-07-22T00:00:00Z', 'manual')",
                 (kind, from_id, to_id)))
    with pytest.raises(ImportSourceError, match="relations row edge=") as err:
        import_nmemory(db, tmp_path / "s", progress=False)
    message = str(err.value)
    assert repr(f"{kind} {from_id} -> {to_id}") in message
    assert "self" in message or "to itself" in message or "not an id the source issued" in message
    assert not (tmp_path / "s").exists()


def test_a_falsifies_edge_from_an_issued_outcome_imports(tmp_path):
    db = tmp_path / "a.db"
    b = Builder(db)
    cap = b.ingest("a claim", at="2026-07-22T00:00:00Z")
    out = b.outcome("the claim failed in production", at="2026-07-22T00:00:01Z")
    b.relate(out, cap, "falsifies", at="2026-07-22T00:00:02Z")
    b.close()
    import_nmemory(db, tmp_path / "s", progress=False)
    rel = mf.Store.open(tmp_path / "s").table("relations").collect()
    assert rel.select("kind", "from_id", "to_id").rows() == [("falsifies", "out-1", "cap-1")]


def test_repeated_relation_rows_import_once(tmp_path):
    db = build_rich(tmp_path / "a.db")
    _loose_relations(db)
    execute(db, "INSERT INTO relations SELECT kind, from_id, to_id, "
                "'2026-07-23T00:00:00Z', origin FROM relations")  # every edge twice, later
    report = import_nmemory(db, tmp_path / "s", progress=False)
    assert report.added["relations"] == 7
    assert any("7 repeated edge row(s) imported once" in note for note in report.notes)
    fresh = build_rich(tmp_path / "b.db")
    import_nmemory(fresh, tmp_path / "t", progress=False)
    keep = ["at", "kind", "from_id", "to_id", "origin"]
    a = mf.Store.open(tmp_path / "s").table("relations").select(keep).collect()
    b = mf.Store.open(tmp_path / "t").table("relations").select(keep).collect()
    assert a.equals(b)  # the first row of each edge, as the key keeps it
    assert digest_text(tmp_path / "s") == digest_text(tmp_path / "t")


@pytest.mark.parametrize("value", ["2.5", "'two'", "x'02'"])  # '2' would be stored as 2
def test_a_recall_count_that_is_not_an_integer_is_refused(tmp_path, value):
    db = build_rich(tmp_path / "a.db")
    execute(db, f"UPDATE usage SET recall_count = {value} WHERE capsule_id = 'cap-3'")
    with pytest.raises(ImportSourceError,
                       match=r"usage row capsule_id='cap-3': recall_count .* is stored as "
                             r"(real|text|blob), not an integer"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_a_non_integer_recall_count_is_refused_on_an_incremental_import_too(tmp_path):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    execute(db, "UPDATE usage SET recall_count = 4.5 WHERE capsule_id = 'cap-1'")
    with pytest.raises(ImportSourceError, match="recall_count 4.5 is stored as real"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert mf.Store.open(tmp_path / "s").generation == 1


def test_sessions_without_a_capsule_get_no_project(tmp_path):
    db = build_curated(tmp_path / "d.db")
    b = Builder(db, fresh=False)
    empty = b.session_start("somewhere", at="2026-07-22T00:00:00Z")
    b.session_finish(empty, at="2026-07-22T00:00:01Z", project="somewhere")
    b.close()
    import_nmemory(db, tmp_path / "s", progress=False)
    brackets = mf.Store.open(tmp_path / "s").table("brackets").collect()
    rows = brackets.filter(pl.col("session_id") == empty).select("event", "project_id").rows()
    assert rows == [("start", None), ("finish", None)]
    held = brackets.filter(pl.col("session_id") == "sess-1")["project_id"].unique().to_list()
    assert held == ["team"]  # a session holding a capsule: that capsule's project
    assert "default" not in brackets["project_id"].drop_nulls().to_list()
