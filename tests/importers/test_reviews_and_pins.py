"""review_events and pin_events: imported in full and incrementally, so the digest's staged,
pinned and open_efforts sections equal the hand-written reference (fixture D)."""

from __future__ import annotations

import polars as pl
import pytest
from import_helpers import NOW, clock, execute, expected_text
from nmemory_fixture import VERSIONS, build_curated, grow_curated

import memframe as mf
from memframe.importers import ImportSourceError, SourceRewrittenError, import_nmemory
from memframe.importers import nmemory as importer


def curated_text(path, **kwargs) -> str:
    kwargs.setdefault("headlines", 3)
    return mf.digest(mf.Store.open(path, clock=clock), now=NOW, **kwargs).to_json()


@pytest.mark.parametrize("version", VERSIONS)
def test_curated_digest_equals_the_hand_written_reference(tmp_path, version):
    db = build_curated(tmp_path / "d.db", version=version)
    report = import_nmemory(db, tmp_path / "s", progress=False)
    assert report.added["reviews"] == 7 and report.added["pins"] == 8
    assert curated_text(tmp_path / "s") == expected_text("curated")


def test_curated_rows_map_one_to_one(tmp_path):
    db = build_curated(tmp_path / "d.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    store = mf.Store.open(tmp_path / "s")
    reviews = store.table("reviews").sort("seq").collect()
    assert reviews.select("capsule_id", "verdict", "reason").rows()[:3] == [
        ("cap-7", "proposed", "staged ingest"), ("cap-8", "proposed", "staged ingest"),
        ("cap-8", "ratified", "agreed")]
    assert set(reviews["actor"]) == {"nmemory-mcp"}
    assert str(reviews["at"][-1]) == "2026-07-21 08:00:00+00:00"
    pins = store.table("pins").sort("seq").collect()
    assert pins.select("capsule_id", "pinned").rows()[:3] == [
        ("cap-1", True), ("cap-3", True), ("cap-3", False)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("prefix", "pinned", "efforts", "total"),
    [("team", ["cap-5", "cap-2", "cap-1"], ["cap-4"], 7),
     ("other", ["cap-12"], ["cap-12"], 3),
     # 0.3.0: cap-4 (project team) rides the board of a fence holding only its members
     ("team/api", ["cap-5"], ["cap-4"], 2)],
)
def test_curated_fenced_sections(tmp_path, prefix, pinned, efforts, total, version):
    db = build_curated(tmp_path / "d.db", version=version)
    import_nmemory(db, tmp_path / "s", progress=False)
    d = mf.digest(mf.Store.open(tmp_path / "s"), now=NOW, project_prefix=prefix).to_dict()
    assert [r["id"] for r in d.get("pinned", [])] == pinned
    assert [r["id"] for r in d.get("open_efforts", [])] == efforts
    assert d["total"] == total
    assert d["staged"] == {"proposed": 4, "stale_proposals": 3}  # store-global


@pytest.mark.parametrize("version", VERSIONS)
def test_incremental_import_carries_new_reviews_and_pins(tmp_path, version):
    db = build_curated(tmp_path / "d.db", version=version)
    import_nmemory(db, tmp_path / "inc", progress=False)
    grow_curated(db)
    second = import_nmemory(db, tmp_path / "inc", progress=False)
    assert second.mode == "incremental"
    assert second.added["reviews"] == 3 and second.added["pins"] == 2
    assert second.read["review_events"] == 3 and second.read["pin_events"] == 2
    import_nmemory(db, tmp_path / "fresh", progress=False)
    assert curated_text(tmp_path / "inc") == curated_text(tmp_path / "fresh")
    for table in ("reviews", "pins"):
        a = mf.Store.open(tmp_path / "inc").table(table).drop("seq").collect()
        b = mf.Store.open(tmp_path / "fresh").table(table).drop("seq").collect()
        assert a.equals(b), table
    d = mf.digest(mf.Store.open(tmp_path / "inc"), now=NOW).to_dict()
    assert d["staged"] == {"proposed": 3, "stale_proposals": 1}  # cap-14 stale; 15, 16 not
    efforts = {r["id"]: r for r in d["open_efforts"]}
    assert set(efforts) == {"cap-4", "cap-9", "cap-12"}
    assert efforts["cap-9"]["member_total"] == 1 and efforts["cap-9"]["pinned"] is True
    assert d["archive_candidates"] == 2  # cap-1 was unpinned
    unchanged = import_nmemory(db, tmp_path / "inc", progress=False)
    assert unchanged.mode == "unchanged"


def test_an_import_made_before_reviews_and_pins_were_read_catches_up(tmp_path, monkeypatch):
    """A watermark without review_events/pin_events imports all their rows next time."""
    db = build_curated(tmp_path / "d.db")
    older = {k: v for k, v in importer.SOURCE_TABLES.items()
             if k not in ("review_events", "pin_events")}
    patched = {"SOURCE_TABLES": older, "_SEQ_TABLES": importer._SEQ_TABLES[:5],
               "_SEQ_ROWS": {k: v for k, v in importer.convert._SEQ_ROWS.items() if k in older}}
    modules = [importer, importer.common, importer.source, importer.convert, importer.plan]
    with monkeypatch.context() as m:
        for module in modules:  # the importer's package modules each hold these names
            for name, value in patched.items():
                if hasattr(module, name):
                    m.setattr(module, name, value)
        import_nmemory(db, tmp_path / "old", progress=False)
    assert mf.Store.open(tmp_path / "old").table("reviews").collect().height == 0
    report = import_nmemory(db, tmp_path / "old", progress=False)
    assert report.mode == "incremental" and report.added == {"reviews": 7, "pins": 8}
    assert curated_text(tmp_path / "old") == expected_text("curated")


def test_a_pin_naming_no_capsule_is_refused_and_nothing_written(tmp_path):
    db = build_curated(tmp_path / "d.db")
    execute(db, "INSERT INTO pin_events (capsule_id, pinned, reason, actor, at) "
                "VALUES ('cap-99', 1, 'why', 'me', '2026-07-22T00:00:00Z')")
    with pytest.raises(ImportSourceError, match="pin_events row seq=9: capsule_id names no "
                                                "capsule of the source"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_a_review_without_an_actor_is_refused(tmp_path):
    db = build_curated(tmp_path / "d.db")
    con_sql = ("CREATE TABLE r2 AS SELECT * FROM review_events",
               "DROP TABLE review_events",
               "CREATE TABLE review_events (seq INTEGER PRIMARY KEY, capsule_id TEXT, "
               "verdict TEXT, reason TEXT, actor TEXT, at TEXT)",
               "INSERT INTO review_events SELECT * FROM r2",
               "DROP TABLE r2",
               "UPDATE review_events SET actor = NULL WHERE seq = 2")
    execute(db, *con_sql)
    with pytest.raises(ImportSourceError, match="review_events row seq=2: capsule_id or actor"):
        import_nmemory(db, tmp_path / "s", progress=False)


@pytest.mark.parametrize("sql", [
    "DELETE FROM review_events WHERE seq = 1",
    "UPDATE pin_events SET pinned = 0 WHERE seq = 8",
])
def test_rewritten_review_or_pin_history_is_refused(tmp_path, sql):
    db = build_curated(tmp_path / "d.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    execute(db, sql)
    with pytest.raises(SourceRewrittenError, match="not an append"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert mf.Store.open(tmp_path / "s").generation == 1
    pins = mf.Store.open(tmp_path / "s").table("pins").collect()
    assert pins.filter(pl.col("capsule_id") == "cap-9")["pinned"].to_list() == [True]
