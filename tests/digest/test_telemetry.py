"""recall_misses, recent_failures, lane_overrides_total, sources (ref 4.7-4.9, 8)."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import dig, put, raw

from memframe.digest.telemetry import checked_total, lane_overrides_total

UTC = dt.UTC


@pytest.fixture
def frozen(clock):
    clock.step = dt.timedelta(0)
    return clock


def test_29_a_missed_term_is_counted(store):
    put(store, "notes about retrieval quality")
    store.record_miss(["Retreival"], "abstain")
    d = dig(store)
    assert d["recall_misses"] == 1
    assert d["recent_failures"]["recall_misses"][0]["term"] == "retreival"


def test_30_recent_failures_are_ordered_typed_and_bounded(store, frozen):
    frozen.set(dt.datetime(2026, 7, 23, 2, 5, 6, tzinfo=UTC))
    store.record_miss(["older miss"], "missing_evidence")
    frozen.set(dt.datetime(2026, 7, 23, 2, 5, 7, tzinfo=UTC))
    store.record_miss(["A" * 180 + "-forbidden-rest\nforbidden-second-line"], "abstain")
    text = raw(store)
    d = dig(store)
    assert d["recent_failures"] == {"recall_misses": [
        {"term": "a" * 140 + "…", "outcome": "abstain", "at": "2026-07-23T02:05:07Z"},
        {"term": "older miss", "outcome": "missing_evidence", "at": "2026-07-23T02:05:06Z"},
    ]}
    assert "forbidden" not in text
    assert "lane_overrides_total" not in d


@pytest.mark.parametrize("sep", ["\n", "\r\n", "\r", "\x85", "\u2028", "\u2029"])
def test_31_miss_terms_never_carry_a_second_line(store, sep):
    store.record_miss([f"secret-first{sep}inject-second"], "abstain")
    text = raw(store)
    assert dig(store)["recent_failures"]["recall_misses"][0]["term"] == "secret-first…"
    assert "inject" not in text


def test_32_recent_failures_cap_at_five_term_rows(store):
    store.record_miss([f"term-{i}" for i in range(1, 7)], "abstain")
    d = dig(store)
    assert d["recall_misses"] == 6
    assert [r["term"] for r in d["recent_failures"]["recall_misses"]] == [
        "term-6", "term-5", "term-4", "term-3", "term-2"]


def test_33_project_scope_omits_unattributable_miss_text(store):
    store.record_miss(["some term"], "abstain")
    store.record_lane_override("term", "fused")
    d = dig(store, project_prefix="this-project")
    assert "recent_failures" not in d
    assert d["lane_overrides_total"] == 1 and d["recall_misses"] == 1
    assert "recent_failures" in dig(store)


def test_35_lane_override_total_checks_conversion_and_addition():
    assert checked_total([1, 2]) == 3
    assert checked_total([]) == 0
    assert checked_total([1, -2]) is None
    assert checked_total([2**63 - 1, 1]) is None
    assert checked_total([2**64]) is None
    assert checked_total([None]) is None


def test_35_lane_overrides_aggregate_per_pair(store):
    store.record_lane_override("term", "fused")
    store.record_lane_override("vector", "term")
    store.record_lane_override("vector", "term")
    assert dig(store)["lane_overrides_total"] == 3


def test_lane_overrides_total_rejects_an_invalid_row():
    import polars as pl

    t = dt.datetime(2026, 1, 1, tzinfo=UTC)
    good = pl.DataFrame({"seq": [1, 2], "at": [t, t], "forced": ["term", "fused"],
                         "auto_pick": ["fused", "term"]})
    assert lane_overrides_total(good) == 2
    assert lane_overrides_total(good.with_columns(pl.Series("seq", [0, 2]))) is None
    assert lane_overrides_total(good.with_columns(pl.Series("forced", ["term", "term"]))) is None
    assert lane_overrides_total(good.with_columns(pl.lit(None).alias("at"))) is None
    assert lane_overrides_total(good.head(0)) is None


def test_36_sources_reflect_scan_state(store, frozen):
    c1 = put(store, "anchored capsule")
    c2 = put(store, "mentioned capsule")
    frozen.set(dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=UTC))
    store.record_git_scan("git:/repo", "headsha", [
        {"capsule_id": c1, "kind": "anchor_path", "ref": "src/a.py", "verdict": "corroborated"},
        {"capsule_id": c1, "kind": "anchor_content", "ref": "src/a.py", "verdict": "drifted"},
        {"capsule_id": c2, "kind": "mention", "ref": "README.md", "verdict": "corroborated"},
    ])
    assert dig(store)["sources"] == {"sources": [{
        "source_key": "git:/repo", "cursor": "headsha", "at": "2026-07-23T12:00:00Z",
        "corroborated": 1, "drifted": 1, "missing": 0, "mentions": 1}]}
    assert "sources" in dig(store, project_prefix="elsewhere")  # store-global


def test_sources_latest_cursor_and_latest_verdict_win(store, frozen):
    c1 = put(store, "anchored capsule")
    store.record_git_scan("git:/b", "b1", [
        {"capsule_id": c1, "kind": "anchor_path", "ref": "x", "verdict": "corroborated"}])
    frozen.set(dt.datetime(2026, 7, 24, tzinfo=UTC))
    store.record_git_scan("git:/a", "a1", [
        {"capsule_id": c1, "kind": "anchor_path", "ref": "x", "verdict": "missing"}])
    store.record_git_scan("git:/b", "b2", [])
    rows = dig(store)["sources"]["sources"]
    assert [(r["source_key"], r["cursor"]) for r in rows] == [("git:/a", "a1"), ("git:/b", "b2")]
    # tallies are keyed by source vocabulary: every git cursor carries the same numbers
    assert {(r["corroborated"], r["missing"]) for r in rows} == {(0, 1)}
    assert rows[0]["at"] == "2026-07-24T00:00:00Z"


def test_no_scan_no_sources_key(store):
    put(store, "x")
    assert "sources" not in dig(store)


def test_terms_outside_the_engine_fold_table_are_recorded_and_shown_as_they_are(store):
    """The engine folds only its closed 82-letter table: ``ș`` and ``đ`` stay, so the
    recorded rows are already folded and ``recent_failures`` is shown (reference 4.7)."""
    store.record_miss(["BUCUREȘTI", "Đường", "Café"], "abstain")
    terms = store.table("recall_misses").select("term").collect()["term"].to_list()
    assert terms == ["bucurești", "đường", "cafe"]
    d = dig(store)
    assert [r["term"] for r in d["recent_failures"]["recall_misses"]] == [
        "cafe", "đường", "bucurești"]


def test_a_row_folded_beyond_the_engine_table_is_still_valid(store):
    """A term holding a letter outside the table (``ș``) passes the digest's check."""
    store.append("recall_misses", {"term": ["ieși"], "outcome": ["abstain"]})
    assert dig(store)["recent_failures"]["recall_misses"][0]["term"] == "ieși"
