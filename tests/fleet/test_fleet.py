"""mf.fleet: every column against the store's own digest, error rows, flags, determinism."""

from __future__ import annotations

import datetime as dt
import json
import os

import polars as pl
import pytest

import memframe as mf
from memframe.errors import InvalidInputError
from memframe.fleet import FLEET_SCHEMA

from .conftest import NOW, hand_built

# the fleet on disk is built once per worker: keep this module's tests on one
pytestmark = pytest.mark.xdist_group("fleet")

READ = ["alpha", "beta", "gamma", "broken"]
FAILING = ["damaged", "notes", "missing"]


@pytest.fixture(scope="module")
def answer(fleet_paths):
    return mf.fleet([fleet_paths[n] for n in READ + FAILING], now=NOW)


def rows_by_path(fleet):
    return {r["path"]: r for r in fleet.frame.to_dicts()}


def instant(text):
    return pl.Series([text]).str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="ns",
                                             time_zone="UTC").item()


def open_starts(store):
    """The start instant of every open session, read in plain Python."""
    starts, finished = {}, set()
    for row in store.table("brackets").collect().iter_rows(named=True):
        if row["event"] == "start":
            starts[row["session_id"]] = min(starts.get(row["session_id"], row["at"]), row["at"])
        elif row["event"] == "finish":
            finished.add(row["session_id"])
    return [at for sid, at in starts.items() if sid not in finished]


def expected_row(path):
    """The row a store should answer, from its own digest and tables."""
    store = mf.Store.open(path)
    d = mf.digest(store, now=NOW)
    body = d.to_dict()
    dag, journal = body["dag"], body["journal"]
    opened = open_starts(store)
    misses = [r["at"] for r in store.table("recall_misses").collect().iter_rows(named=True)
              if NOW - dt.timedelta(days=7) < r["at"] <= NOW]
    sources = body.get("sources", {}).get("sources", [])
    return {
        "path": path,
        "generation": store.generation,
        "committed_at": store.history()["committed_at"][-1],
        "total": body["total"],
        "live": sum(p["live"] for p in body["by_project"]),
        "projects": len({p["project_id"] for p in body["by_project"]}),
        "handoffs": body.get("handoff_total", 0),
        "handoff_age": NOW - instant(body["handoff"][0]["created_at"]) if body["handoff"] else None,
        "open_sessions": body["open_sessions"],
        "oldest_open_age": NOW - min(opened) if opened else None,
        "orphaned_open": sum(1 for at in opened if at < NOW - dt.timedelta(days=1)),
        "ready": dag.get("ready_total"), "blocked": dag.get("blocked_total"),
        "done": dag.get("done_total"),
        "dag_cycle": dag["status"] == "cycle",
        "mission_cycle": (body.get("mission") or {}).get("status") == "cycle",
        "chain_ok": journal["chain"] == "ok",
        "broken_seq": journal.get("broken_seq"),
        "quarantined": body["tiers"]["quarantined"],
        "archive_candidates": body["archive_candidates"],
        "misses_7d": len(misses),
        "staged": body.get("staged", {}).get("proposed", 0),
        "drifted_sources": max((s["drifted"] for s in sources), default=0),
        "digest_rows": d.rows_visited,
        "digest_requests": None,
    }


@pytest.mark.parametrize("name", READ)
def test_every_column_is_the_stores_own_digest(answer, fleet_paths, name):
    row = rows_by_path(answer)[fleet_paths[name]]
    want = expected_row(fleet_paths[name])
    got = {k: row[k] for k in want}
    assert got == want
    assert row["error"] is None


def test_the_frame_has_the_documented_columns_sorted_by_path(answer, fleet_paths):
    assert answer.frame.schema == pl.Schema(FLEET_SCHEMA)
    assert answer.frame["path"].to_list() == sorted(fleet_paths[n] for n in READ + FAILING)
    assert answer.now == NOW


def test_the_hand_built_store_reads_as_written(answer, fleet_paths):
    row = rows_by_path(answer)[fleet_paths["gamma"]]
    # four capsules (three notes, the handoff); the proposal leaves every count and project
    assert (row["total"], row["projects"], row["handoffs"], row["open_sessions"]) == (3, 2, 1, 1)
    assert dt.timedelta(days=10) < row["handoff_age"] < dt.timedelta(days=10, hours=2)
    assert dt.timedelta(days=3) - dt.timedelta(minutes=1) < row["oldest_open_age"] <= dt.timedelta(days=3)
    assert (row["orphaned_open"], row["misses_7d"], row["staged"], row["quarantined"],
            row["drifted_sources"]) == (1, 1, 1, 1, 1)
    assert row["committed_at"] == mf.Store.open(fleet_paths["gamma"]).history()[
        "committed_at"][-1] > NOW - dt.timedelta(days=3)
    assert (row["stale_handoff"], row["broken_chain"], row["orphaned_sessions"]) == (
        True, False, True)


def test_a_forged_journal_hash_is_a_broken_chain_not_an_error(answer, fleet_paths):
    row = rows_by_path(answer)[fleet_paths["broken"]]
    assert row["error"] is None
    assert (row["chain_ok"], row["broken_seq"], row["broken_chain"]) == (False, 1, True)
    assert row["total"] == rows_by_path(answer)[fleet_paths["gamma"]]["total"]
    flagged = answer.flagged["path"].to_list()
    assert {fleet_paths["gamma"], fleet_paths["broken"]} <= set(flagged)
    assert flagged == [r["path"] for r in answer.frame.to_dicts()
                       if r["stale_handoff"] or r["broken_chain"] or r["orphaned_sessions"]]


def test_a_dag_cycle_is_flagged_and_its_counts_are_null(answer, fleet_paths):
    beta = rows_by_path(answer)[fleet_paths["beta"]]
    alpha = rows_by_path(answer)[fleet_paths["alpha"]]
    assert beta["dag_cycle"] and (beta["ready"], beta["blocked"], beta["done"]) == (None,) * 3
    assert not alpha["dag_cycle"] and alpha["ready"] is not None


@pytest.mark.parametrize("name, error", [("damaged", "DigestFailedOnCorruptStoreError: "),
                                         ("notes", "NotAStoreError: "),
                                         ("missing", "NotAStoreError: ")])
def test_a_store_that_fails_is_a_row_with_its_error(answer, fleet_paths, name, error):
    row = rows_by_path(answer)[fleet_paths[name]]
    assert row["error"].startswith(error), row["error"]
    assert all(v is None for k, v in row.items() if k not in ("path", "error")), row
    assert answer.errors[fleet_paths[name]] == row["error"]
    assert set(answer.errors) == {fleet_paths[n] for n in FAILING}


def test_a_prefix_lists_every_store_under_it_without_entering_one(fleet_paths):
    listed = mf.fleet(fleet_paths["root"], now=NOW)
    assert listed.frame["path"].to_list() == sorted(
        fleet_paths[n] for n in ("alpha", "beta", "gamma", "broken", "damaged"))
    assert not any("inner" in p for p in listed.frame["path"])
    every = mf.fleet([fleet_paths[n] for n in ("alpha", "beta", "gamma", "broken", "damaged")],
                     now=NOW)
    assert listed.frame.equals(every.frame)
    assert mf.fleet(fleet_paths["gamma"], now=NOW).frame["path"].to_list() == [
        fleet_paths["gamma"]]  # a directory that is a store is a fleet of one
    with pytest.raises(InvalidInputError, match="is not a directory"):
        mf.fleet(fleet_paths["missing"], now=NOW)


def test_the_same_stores_and_now_give_the_same_frame(answer, fleet_paths):
    again = mf.fleet([fleet_paths[n] for n in reversed(READ + FAILING)], now=NOW)
    assert again.frame.equals(answer.frame)
    assert again.to_json() == answer.to_json()
    later = mf.fleet([fleet_paths["gamma"]], now=NOW + dt.timedelta(days=1))
    gamma = rows_by_path(answer)[fleet_paths["gamma"]]
    assert later.frame["handoff_age"][0] == gamma["handoff_age"] + dt.timedelta(days=1)


def test_the_fleet_reads_without_writing(fleet_paths):
    def listing():
        return sorted((os.path.join(d, f), os.stat(os.path.join(d, f)).st_mtime_ns)
                      for d, _, files in os.walk(fleet_paths["root"]) for f in files)

    before = listing()
    mf.fleet(fleet_paths["root"], now=NOW)
    assert listing() == before


def test_thresholds_move_the_flags(fleet_paths):
    paths = [fleet_paths["gamma"]]
    loose = mf.fleet(paths, now=NOW, stale_after=dt.timedelta(days=30),
                     orphan_after=dt.timedelta(days=5))
    row = loose.frame.row(0, named=True)
    assert (row["stale_handoff"], row["orphaned_sessions"], row["orphaned_open"]) == (
        False, False, 0)
    with pytest.raises(InvalidInputError, match="stale_after"):
        mf.fleet(paths, now=NOW, stale_after=7)
    with pytest.raises(InvalidInputError, match="now must be a timezone-aware"):
        mf.fleet(paths, now=dt.datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError, match="local, ray"):
        mf.fleet(paths, engine="spark")


def test_a_store_without_handoffs_is_not_stale(tmp_path):
    mf.Store.create(tmp_path / "quiet").ingest({"content": "x", "source": "s", "anchor": "a"})
    row = mf.fleet([str(tmp_path / "quiet")], now=NOW).frame.row(0, named=True)
    assert row["handoff_age"] is None and row["stale_handoff"] is False
    assert row["oldest_open_age"] is None and row["orphaned_sessions"] is False


def test_an_empty_directory_is_an_empty_fleet(tmp_path):
    empty = mf.fleet(str(tmp_path), now=NOW)
    assert empty.frame.height == 0 and empty.frame.schema == pl.Schema(FLEET_SCHEMA)
    assert json.loads(empty.to_json())["stores"] == []


def test_text_fits_80_columns_and_html_escapes_stored_text(tmp_path):
    hostile = tmp_path / "<b>agent\x1b]0;x\x07"
    hand_built(hostile)
    f = mf.fleet([str(hostile), str(tmp_path / ("missing-" + "y" * 90))], now=NOW)
    text = f.to_text()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "\x1b" not in text and "\\u001b" in text
    assert "NotAStoreError" in text and " SO" in text
    for html in (f.to_html(), f._repr_html_()):
        assert "<b>agent" not in html and "&lt;b&gt;agent" in html
        assert "\x1b" not in html
    assert f.to_html().startswith("<!DOCTYPE html>")
    assert repr(f).startswith("<Fleet stores=2 failed=1 flagged=1")
