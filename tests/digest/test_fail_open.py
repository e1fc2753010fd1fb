"""Fail-open legs degrade independently; everything else fails closed (ref 5, 8 row 34).

Faults are injected by damaging one table's partition file on disk: rewriting it as a
Parquet file with a row the digest must refuse, writing garbage bytes over it, or
removing it.
"""

from __future__ import annotations

import polars as pl
import pytest
from conftest import dig, put

import memframe as mf
from memframe.errors import MemframeError

SURVIVORS = ("label", "framing", "total", "dag", "journal", "tiers")


@pytest.fixture
def busy(store):
    a = put(store, "alpha capsule")
    b = put(store, "beta capsule")
    store.relate(a, b, "blocks")
    store.record_miss(["first miss"], "abstain")
    store.record_lane_override("term", "fused")
    store.record_git_scan("git:/repo", "sha1", [
        {"capsule_id": a, "kind": "anchor_path", "ref": "a.py", "verdict": "corroborated"}])
    d = dig(store)
    for key in ("recent_failures", "lane_overrides_total", "sources"):
        assert key in d
    assert d["recall_misses"] == 1
    return store


def rewrite(store, table, change):
    """Rewrite every partition of ``table`` with ``change(frame)`` (same schema)."""
    for path in store.pinned().files(table):
        frame = pl.read_parquet(path)
        path.unlink()
        change(frame).write_parquet(path)


def garble(store, table):
    for path in store.pinned().files(table):
        path.write_bytes(b"this is not parquet at all")


def remove(store, table):
    for path in store.pinned().files(table):
        path.unlink()


def same_except(before, after, keys):
    return {k: v for k, v in before.items() if k not in keys} == {
        k: v for k, v in after.items() if k not in keys}


def test_34_bad_miss_outcome_removes_only_recent_failures(busy):
    before = dig(busy)
    rewrite(busy, "recall_misses", lambda f: f.with_columns(pl.lit("grounded").alias("outcome")))
    after = dig(busy)
    assert "recent_failures" not in after
    assert after["recall_misses"] == 1
    assert same_except(before, after, {"recent_failures"})


def test_34_unfolded_miss_term_removes_only_recent_failures(busy):
    rewrite(busy, "recall_misses", lambda f: f.with_columns(pl.lit("Not Folded").alias("term")))
    after = dig(busy)
    assert "recent_failures" not in after and after["lane_overrides_total"] == 1


def test_34_invalid_lane_pair_removes_only_lane_overrides_total(busy):
    before = dig(busy)
    rewrite(busy, "lane_overrides", lambda f: f.with_columns(pl.lit("term").alias("auto_pick")))
    after = dig(busy)
    assert "lane_overrides_total" not in after
    assert same_except(before, after, {"lane_overrides_total"})


def test_34_garbage_miss_ledger_reports_zero_and_omits_recent(busy):
    before = dig(busy)
    garble(busy, "recall_misses")
    after = dig(busy)
    assert after["recall_misses"] == 0 and "recent_failures" not in after
    assert same_except(before, after, {"recall_misses", "recent_failures"})


def test_34_dropping_both_ledgers_degrades_both_and_nothing_else(busy):
    before = dig(busy)
    remove(busy, "recall_misses")
    remove(busy, "lane_overrides")
    after = dig(busy)
    assert after["recall_misses"] == 0
    assert "recent_failures" not in after and "lane_overrides_total" not in after
    assert same_except(before, after, {"recall_misses", "recent_failures", "lane_overrides_total"})
    for key in SURVIVORS:
        assert after[key] == before[key]


@pytest.mark.parametrize("table", ["source_cursors", "corroborations"])
def test_sources_fail_open_on_garbage(busy, table):
    before = dig(busy)
    garble(busy, table)
    after = dig(busy)
    assert "sources" not in after
    assert same_except(before, after, {"sources"})


def test_sources_fail_open_on_out_of_vocabulary_verdict(busy):
    rewrite(busy, "corroborations", lambda f: f.with_columns(pl.lit("maybe").alias("verdict")))
    assert "sources" not in dig(busy)


def test_rows_visited_skips_an_unreadable_leg(busy, read_path):
    view = busy.pinned()
    if read_path == "warm":  # a garbled part breaks the state's seal, and so does the same
        rewrite(busy, "recall_misses", lambda f: f)  # rows in another file: fold from rows
    full = mf.digest(busy).rows_visited
    lost = view.row_count("recall_misses")
    garble(busy, "recall_misses")
    assert mf.digest(busy).rows_visited == full - lost


@pytest.mark.parametrize("table", ["capsules", "relations", "journal", "forgets", "recalls",
                                   "brackets", "classifications", "tiers"])
def test_fail_closed_tables_fail_the_whole_digest(store, table):
    a = put(store, "alpha capsule", kind="task")
    b = put(store, "beta capsule")
    store.relate(a, b, "blocks")
    store.record_recall([a])
    store.classify(b, tier="archived")
    store.session_start("nmemory")
    store.forget(b)
    garble(store, table)
    with pytest.raises(MemframeError, match=r"^memory_digest failed: "):
        mf.digest(store)


def test_unknown_relation_kind_fails_closed(store):
    a = put(store, "alpha")
    b = put(store, "beta")
    store.relate(a, b, "blocks")
    rewrite(store, "relations", lambda f: f.with_columns(pl.lit("bogus").alias("kind")))
    with pytest.raises(MemframeError, match="memory_digest failed: unknown relation kind 'bogus'"):
        mf.digest(store)
