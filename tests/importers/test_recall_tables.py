"""Schema v21's receipts, event times and epistemics import, once and incrementally."""

from __future__ import annotations

import json
import shutil
import sqlite3

import polars as pl

import memframe as mf
from memframe.importers import import_nmemory
from memframe.state import current_sidecar
from tests.importers.nmemory_fixture import build_recall, build_rich, grow_recall


def _source(db) -> dict[str, list[tuple]]:
    con = sqlite3.connect(db)
    try:
        receipts = [(i, json.loads(t), json.loads(r), o, lane, p)
                    for i, t, r, o, lane, p in con.execute(
                        "SELECT id, terms, returned_ids, outcome, lane, project_id "
                        "FROM recall_receipts ORDER BY seq")]
        times = sorted(con.execute("SELECT capsule_id, event_at FROM event_time"))
        facts = sorted(con.execute("SELECT capsule_id, evidence_state, proof_hint, stale_if "
                                   "FROM epistemics"))
    finally:
        con.close()
    return {"receipts": receipts, "times": times, "facts": facts}


def _stored(path) -> dict[str, list[tuple]]:
    store = mf.Store.open(path)
    receipts = store.table("recall_receipts").sort("seq").select(
        "id", "terms", "returned_ids", "outcome", "lane", "project_id").collect()
    times = current_sidecar("event_times", store.table("event_times")).select(
        "capsule_id", pl.col("event_at").dt.strftime("%Y-%m-%dT%H:%M:%SZ")).sort(
        "capsule_id").collect()
    facts = current_sidecar("epistemics", store.table("epistemics")).select(
        "capsule_id", "evidence_state", "proof_hint", "stale_if").sort("capsule_id").collect()
    return {"receipts": [tuple(r) for r in receipts.rows()], "times": times.rows(),
            "facts": facts.rows()}


def test_a_v21_store_imports_its_receipts_event_times_and_epistemics(tmp_path):
    db = build_recall(tmp_path / "r.db")
    report = import_nmemory(db, tmp_path / "s", progress=False)
    assert report.added["recall_receipts"] == 3
    assert report.added["event_times"] == 1 and report.added["epistemics"] == 2
    for name in ("recall_receipts", "event_time", "epistemics"):
        assert name not in report.skipped
    assert _stored(tmp_path / "s") == _source(db)
    receipts = mf.Store.open(tmp_path / "s").table("recall_receipts").collect()
    assert receipts["terms"].to_list()[1] == ["rollback", "slot"]
    assert receipts["returned_ids"].to_list()[2] == []


def test_twice_incrementally_nothing_is_lost(tmp_path):
    db = build_recall(tmp_path / "r.db")
    import_nmemory(db, tmp_path / "inc", progress=False)
    for step in (1, 2):
        grow_recall(db, step)
        report = import_nmemory(db, tmp_path / "inc", progress=False)
        assert report.mode == "incremental"
        assert report.added["recall_receipts"] == 2
        assert _stored(tmp_path / "inc") == _source(db)
    import_nmemory(db, tmp_path / "full", progress=False)
    assert _stored(tmp_path / "full") == _stored(tmp_path / "inc")
    inc = mf.Store.open(tmp_path / "inc")
    full = mf.Store.open(tmp_path / "full")
    assert inc.table("recall_receipts").drop("seq").collect().equals(
        full.table("recall_receipts").drop("seq").collect())
    assert import_nmemory(db, tmp_path / "inc", progress=False).mode == "unchanged"


def test_a_v20_store_has_none_and_catches_up_after_the_migration(tmp_path):
    from tests.importers.nmemory_fixture import migrate_to_v21

    db = build_rich(tmp_path / "a.db", version=20)
    report = import_nmemory(db, tmp_path / "s", progress=False)
    store = mf.Store.open(tmp_path / "s")
    for table in ("recall_receipts", "event_times", "epistemics"):
        assert store.table(table).collect().height == 0
    assert report.skipped["recall_receipts"] == 4
    migrate_to_v21(db)
    again = import_nmemory(db, tmp_path / "s", progress=False)
    assert again.added == {"recall_receipts": 4}
    assert _stored(tmp_path / "s")["receipts"] == _source(db)["receipts"]


def test_a_receipt_naming_an_unknown_capsule_is_refused(tmp_path):
    db = build_recall(tmp_path / "r.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE recall_receipts SET returned_ids = '[\"cap-99\"]' WHERE id = 'rcpt-1'")
    con.commit()
    con.close()
    bad = tmp_path / "bad.db"
    shutil.copy(db, bad)
    try:
        import_nmemory(bad, tmp_path / "s", progress=False)
    except mf.MemframeError as exc:
        assert "cap-99" in str(exc) or "names no capsule" in str(exc)
    else:
        raise AssertionError("a receipt naming cap-99 was imported")
    assert not (tmp_path / "s").exists()
