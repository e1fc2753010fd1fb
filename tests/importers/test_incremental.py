"""Incremental re-import: import, grow the source, import again == a fresh full import."""

from __future__ import annotations

import shutil

import polars as pl
import pytest
from import_helpers import clock, digest_text, execute, expected_text
from nmemory_fixture import VERSIONS, Builder, build_rich, grow_rich

import memframe as mf
from memframe.importers import ImportSourceError, SourceRewrittenError, import_nmemory
from memframe.importers.nmemory import WATERMARK
from memframe.state import latest_by_seq

# capsules tombstoned between the two imports keep the metadata the first import saw
ERASED_KEEPS = ["content_chars", "source", "anchor", "confidence", "valid_to",
                "instruction_taint"]
APPEND_ONLY = {  # table -> sort key (the rows are the same set, whatever the seq)
    "capsules": ["id"],
    "relations": ["kind", "from_id", "to_id"],
    "forgets": ["capsule_id"],
    "journal": ["audit_seq"],
    "recall_misses": ["at", "term"],
    "lane_overrides": ["at", "forced"],
    "corroborations": ["at", "capsule_id", "kind", "ref"],
    "brackets": ["session_id", "event"],
}
LATEST = {"classifications": ["capsule_id"], "tiers": ["capsule_id"],
          "source_cursors": ["source_key"]}


@pytest.fixture(params=VERSIONS, ids=[f"v{v}" for v in VERSIONS])
def grown(tmp_path, request):
    """(incremental store, fresh store, first report, second report), at each version."""
    db = build_rich(tmp_path / "a.db", version=request.param)
    first = import_nmemory(db, tmp_path / "inc", progress=False)
    grow_rich(db)
    second = import_nmemory(db, tmp_path / "inc", progress=False)
    import_nmemory(db, tmp_path / "fresh", progress=False)
    return tmp_path / "inc", tmp_path / "fresh", first, second


def _erased_ids(store) -> list[str]:
    """Capsules whose content this store erased after ingesting it."""
    return (store.table("capsules").filter(pl.col("content").is_null()
                                           & (pl.col("content_chars") > 0))
            .select("id").collect()["id"].to_list())


def test_incremental_equals_fresh_digest(grown):
    inc, fresh, _, second = grown
    assert second.mode == "incremental"
    assert digest_text(inc) == digest_text(fresh)


def test_incremental_equals_fresh_capsule_state(grown):
    inc, fresh, _, _ = grown
    a = mf.Store.open(inc).capsule_state().drop("seq").collect()
    b = mf.Store.open(fresh).capsule_state().drop("seq").collect()
    erased = _erased_ids(mf.Store.open(inc))
    assert erased == ["cap-15"]
    same = pl.col("id").is_in(erased).not_()
    assert a.filter(same).equals(b.filter(same))
    assert a.filter(~same).drop(ERASED_KEEPS).equals(b.filter(~same).drop(ERASED_KEEPS))
    assert a.filter(~same)["content"].to_list() == [None]


def test_incremental_equals_fresh_tables(grown):
    inc, fresh, _, _ = grown
    a, b = mf.Store.open(inc), mf.Store.open(fresh)
    for table, key in APPEND_ONLY.items():
        x = a.table(table).drop("seq").collect().sort(key)
        y = b.table(table).drop("seq").collect().sort(key)
        if table == "capsules":
            keep = ~pl.col("id").is_in(_erased_ids(a))
            x, y = x.filter(keep), y.filter(keep)
        assert x.equals(y), table
    for table, key in LATEST.items():  # mutable source tables: equal under their fold
        x = latest_by_seq(a.table(table), *key).drop("seq").collect().sort(key)
        y = latest_by_seq(b.table(table), *key).drop("seq").collect().sort(key)
        assert x.equals(y), table
    fold = [pl.col("count").sum(), pl.col("at").max()]
    x = a.table("recalls").group_by("capsule_id").agg(fold).collect().sort("capsule_id")
    y = b.table("recalls").group_by("capsule_id").agg(fold).collect().sort("capsule_id")
    assert x.equals(y)


def test_incremental_reads_and_writes_only_the_change(grown):
    inc, _, first, second = grown
    # the 4 new capsules are converted; the 16 imported ones are read once more to prove
    # none was edited in place (docs/importing-nmemory.md: the price of the rewrite check)
    assert first.read["capsules"] == 16 and second.read["capsules"] == 16 + 4
    assert second.read["audit_events"] == 16
    assert second.read["recall_misses"] == 1
    # a v21 file's receipts are read too (the grown file's one new recall)
    v21 = mf.Store.open(inc).snapshot.watermarks[WATERMARK]["schema_version"] >= 21
    assert second.added == {"capsules": 4, "relations": 2, "forgets": 2, "recalls": 2,
                            "classifications": 2, "tiers": 2, "brackets": 2, "journal": 16,
                            "recall_misses": 1, "lane_overrides": 1, "corroborations": 1,
                            "source_cursors": 2, **({"recall_receipts": 1} if v21 else {})}
    assert second.erased == 1
    store = mf.Store.open(inc)
    assert store.generation == 2
    entry = store.snapshot
    assert entry.watermarks[WATERMARK]["imports"] == 2


def test_newly_tombstoned_content_is_erased_from_the_data_files(grown):
    inc, _, _, _ = grown
    store = mf.Store.open(inc)
    for path in store.files("capsules"):
        frame = pl.read_parquet(path)
        assert "Merged from another device" not in frame["content"].drop_nulls().to_list()
    forgets = store.table("forgets").collect().sort("capsule_id")
    assert forgets.select("capsule_id", "mode", "reason").rows() == [
        ("cap-10", "purge", "leaked secret"), ("cap-13", "redact", "typo in the draft"),
        ("cap-15", "purge", "duplicate"), ("cap-18", "redact", "scratch")]


def test_reimport_without_change_commits_nothing(tmp_path):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    again = import_nmemory(db, tmp_path / "s", progress=False)
    assert again.mode == "unchanged" and again.added == {}
    assert again.generation == mf.Store.open(tmp_path / "s").generation == 1
    assert digest_text(tmp_path / "s") == expected_text("rich")


def test_many_small_imports_equal_one(tmp_path):
    """Import after every few mutations; the end state equals one import of the end file."""
    db = tmp_path / "a.db"
    b = Builder(db)
    b.close()
    t = "2026-07-22T08:00:{:02d}Z".format
    for step in range(6):
        b = Builder(db, fresh=False)
        cid = b.ingest(f"note {step}", at=t(step * 5), project="p")
        if step:
            b.relate(cid, f"cap-{step}", "supersedes", at=t(step * 5 + 1))
            b.recall([f"cap-{step}", cid], at=t(step * 5 + 2))
        if step == 3:
            b.forget("cap-2", "purged", at=t(step * 5 + 3))
            b.classify("cap-1", "fact", at=t(step * 5 + 4))
        b.close()
        import_nmemory(db, tmp_path / "inc", progress=False)
    import_nmemory(db, tmp_path / "fresh", progress=False)
    assert mf.Store.open(tmp_path / "inc").generation == 6
    assert digest_text(tmp_path / "inc") == digest_text(tmp_path / "fresh")


# ---- refusals: a source rewritten in a way that is not an append ----------------------------

REWRITES = {
    "journal row edited": ["UPDATE audit_events SET reason = 'edited' WHERE seq = 38"],
    "journal rechained": [
        "UPDATE audit_events SET chained_hash = 'x' || chained_hash WHERE seq >= 10"],
    "journal row deleted": ["DELETE FROM audit_events WHERE seq = 5"],
    "capsule deleted": ["DELETE FROM capsules WHERE seq = 16"],
    "relation deleted": ["DELETE FROM relations WHERE kind = 'derived_from'"],
    "relation re-timed": ["UPDATE relations SET at = '2026-07-22T00:00:00Z' "
                          "WHERE kind = 'supersedes'"],
    "usage decreased": ["UPDATE usage SET recall_count = 1 WHERE capsule_id = 'cap-1'"],
    "usage re-timed": ["UPDATE usage SET last_recalled_at = '2026-07-22T00:00:00Z' "
                       "WHERE capsule_id = 'cap-3'"],
    "tombstone removed": ["DELETE FROM tombstones WHERE capsule_id = 'cap-10'",
                          "UPDATE capsules SET canonical_json = '{}' WHERE id = 'cap-10'"],
    "classification removed": ["DELETE FROM classifications WHERE capsule_id = 'cap-5'"],
    "session restarted": ["UPDATE sessions SET started_at = '2026-07-22T00:00:00Z' "
                          "WHERE session_id = 'sess-2'"],
    "session unfinished": ["UPDATE sessions SET finished_at = NULL WHERE session_id = 'sess-1'"],
    "cursor removed": ["DELETE FROM source_cursors"],
    "miss deleted": ["DELETE FROM recall_misses WHERE seq = 1"],
}


@pytest.mark.parametrize("case", sorted(REWRITES))
def test_rewritten_source_is_refused_and_nothing_written(tmp_path, case):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    before = sorted(p.relative_to(tmp_path / "s") for p in (tmp_path / "s").rglob("*"))
    grow_rich(db)  # legitimate growth too: the refusal must not depend on it
    execute(db, *REWRITES[case])
    with pytest.raises(SourceRewrittenError, match="not an append"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert mf.Store.open(tmp_path / "s").generation == 1
    assert sorted(p.relative_to(tmp_path / "s") for p in (tmp_path / "s").rglob("*")) == before


def test_a_different_source_is_refused(tmp_path):
    a = build_rich(tmp_path / "a.db")
    import_nmemory(a, tmp_path / "s", progress=False)
    other = Builder(tmp_path / "b.db")
    other.ingest("unrelated", at="2026-01-01T00:00:00Z")
    other.close()
    with pytest.raises(ImportSourceError, match="different nMEMORY store"):
        import_nmemory(tmp_path / "b.db", tmp_path / "s", progress=False)


def test_a_moved_copy_of_the_same_source_is_accepted(tmp_path):
    a = build_rich(tmp_path / "a.db")
    import_nmemory(a, tmp_path / "s", progress=False)
    shutil.copy(a, tmp_path / "moved.db")
    grow_rich(tmp_path / "moved.db")
    assert import_nmemory(tmp_path / "moved.db", tmp_path / "s",
                          progress=False).mode == "incremental"


def test_a_store_written_by_verbs_since_the_import_is_refused(tmp_path):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    store = mf.Store.open(tmp_path / "s", clock=clock)
    # verbs continue the imported id sequences
    assert store.ingest({"content": "native", "source": "s", "anchor": "a"}) == ["cap-17"]
    assert store.session_start("p") == "sess-5"
    grow_rich(db)
    with pytest.raises(ImportSourceError, match="written to since"):
        import_nmemory(db, tmp_path / "s", progress=False)
