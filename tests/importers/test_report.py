"""The ImportReport (text, HTML, counts), the mapping's details, and the progress bar."""

from __future__ import annotations

import polars as pl
import pytest
from import_helpers import execute
from nmemory_fixture import build_rich

import memframe as mf
from memframe.importers import ImportReport, import_nmemory


@pytest.fixture
def imported(tmp_path):
    db = build_rich(tmp_path / "a<b>&.db")
    report = import_nmemory(db, tmp_path / "store", progress=False)
    return report, mf.Store.open(tmp_path / "store")


def test_report_counts(imported):
    report, _ = imported
    assert isinstance(report, ImportReport)
    assert report.source_rows["capsules"] == 16 and report.source_rows["audit_events"] == 38
    assert report.added == {"capsules": 16, "relations": 7, "forgets": 2, "recalls": 4,
                            "classifications": 5, "tiers": 1, "brackets": 5, "journal": 38,
                            "recall_misses": 3, "lane_overrides": 2, "corroborations": 4,
                            "source_cursors": 1, "recall_aliases": 1}
    # every engine-only table, with its rows: the FTS mirror keeps an empty row per
    # forgotten capsule, the embeddings lose theirs
    assert report.skipped == {"anchor_hashes": 0, "capsules_fts": 16, "embeddings": 14,
                              "epistemics": 0, "event_time": 0, "feedback_weights": 0,
                              "import_blocks": 0, "outcomes": 0, "preferences": 0,
                              "recall_receipts": 4, "source_backfills": 0}
    assert report.source_rows["review_events"] == report.source_rows["pin_events"] == 0
    assert report.rows_written == 89 and report.rows_per_second > 0
    assert report.to_dict()["mode"] == "full"


def test_report_text_and_html(imported):
    report, _ = imported
    text = str(report)
    assert "nMEMORY import (full)" in text and "capsules_fts" in text and "89 rows" in text
    page = report._repr_html_()
    assert "a&lt;b&gt;&amp;.db" in page and "a<b>" not in page
    assert "<table" in page and "capsules_fts" in page
    assert "ImportReport(mode='full'" in repr(report)


def test_capsule_mapping(imported):
    _, store = imported
    caps = store.table("capsules").collect()
    assert caps["id"].to_list() == [f"cap-{n}" for n in range(1, 17)]
    assert caps["seq"].is_sorted()
    one = caps.row(0, named=True)
    assert one["conversation_id"] == "sess-1" and one["author"] is None
    assert one["content_chars"] == len("Use SQLite WAL mode for the store")
    eleven = caps.filter(pl.col("id") == "cap-11").row(0, named=True)
    assert eleven["authority_class"] == "externally-imported" and eleven["instruction_taint"]
    assert str(eleven["valid_to"]) == "2026-07-22 00:00:00+00:00"
    gone = caps.filter(pl.col("id").is_in(["cap-10", "cap-13"])).select(
        "id", "content", "content_chars", "source", "anchor").rows()
    assert gone == [("cap-10", None, 0, "nmemory-tombstone", "cap-10"),
                    ("cap-13", None, 0, "note", "draft")]  # redacted keeps provenance
    state = store.capsule_state().collect()
    assert state.filter(pl.col("status") == "tombstoned")["id"].to_list() == ["cap-10", "cap-13"]


def test_usage_becomes_one_exact_recall_row_per_capsule(imported):
    _, store = imported
    recalls = store.table("recalls").collect().sort("capsule_id")
    assert recalls.select("capsule_id", "count").rows() == [
        ("cap-1", 3), ("cap-10", 1), ("cap-12", 1), ("cap-3", 1)]


def test_sessions_become_brackets(imported):
    _, store = imported
    rows = store.table("brackets").collect().select(
        "session_id", "event", "project_id", "summary").rows()
    # a session's project is that of its first capsule; sess-3 and sess-4 hold none, and
    # nMEMORY's sessions table names no project: none is invented
    assert rows == [("sess-1", "start", "nott/tech", None),
                    ("sess-1", "finish", "nott/tech", "importer half done"),
                    ("sess-2", "start", "nott", None), ("sess-3", "start", None, None),
                    ("sess-4", "start", None, None)]


def test_relations_keep_origin(imported):
    _, store = imported
    rel = store.table("relations").collect()
    assert rel.filter(pl.col("origin") == "import").select("kind", "from_id", "to_id").rows() == [
        ("derived_from", "cap-1", "cap-12")]


def test_review_and_pin_events_are_imported_not_skipped(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, "INSERT INTO pin_events (capsule_id, pinned, reason, actor, at) "
                "VALUES ('cap-1', 1, 'keep', 'me', '2026-07-22T00:00:00Z')",
            "INSERT INTO review_events (capsule_id, verdict, reason, actor, at) "
            "VALUES ('cap-2', 'proposed', 'staged ingest', 'me', '2026-07-22T00:00:01Z')")
    report = import_nmemory(db, tmp_path / "s", progress=False)
    assert "pin_events" not in report.skipped and "review_events" not in report.skipped
    assert report.added["pins"] == report.added["reviews"] == 1
    assert not any("pin_events" in note for note in report.notes)
    store = mf.Store.open(tmp_path / "s")
    assert store.table("pins").select("capsule_id", "pinned", "reason", "actor").collect().rows() \
        == [("cap-1", True, "keep", "me")]
    assert store.table("reviews").select("capsule_id", "verdict", "reason").collect().rows() \
        == [("cap-2", "proposed", "staged ingest")]


def test_non_canonical_times_are_normalised_and_noted(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, "UPDATE relations SET at = '2026-07-20T11:00:05+02:00' WHERE kind = 'supersedes'")
    report = import_nmemory(db, tmp_path / "s", progress=False)
    assert any("relations.at: 1 timestamp" in note for note in report.notes)
    rel = mf.Store.open(tmp_path / "s").table("relations").filter(
        pl.col("kind") == "supersedes").collect()
    assert str(rel["at"][0]) == "2026-07-20 09:00:05+00:00"


def test_progress_bar_goes_to_stderr_only_when_asked(tmp_path, capsys):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "quiet", progress=False)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    import_nmemory(db, tmp_path / "loud", progress=True)
    out = capsys.readouterr()
    assert out.out == "" and "nmemory import" in out.err
    import_nmemory(db, tmp_path / "auto")  # default: stderr is not a terminal under pytest
    assert capsys.readouterr().err == ""
