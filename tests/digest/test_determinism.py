"""Determinism, pinning, time travel, known_hash, rows_visited, frames."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys

import polars as pl
from conftest import T0, dig, put

import memframe as mf
from memframe.digest.core import reference_read
from memframe.digest.state import journal

NOW = T0 + dt.timedelta(days=1)


def populate(store):
    a = put(store, "alpha ✓ fact", project="team/api")
    b = put(store, "ACTIVE(t): beta thread", project="team/web", kind="task")
    c = put(store, "gamma epic", project="solo", kind="epic")
    store.relate(a, b, "blocks")
    store.relate(b, c, "grounded_in")
    store.record_recall([a, b])
    store.record_miss(["lost term"], "abstain")
    sid = store.session_start("team/api")
    store.session_finish(sid, handoff="handoff for the next session")


def test_same_generation_same_bytes_across_processes(store, tmp_path):
    populate(store)
    here = mf.digest(store, now=NOW).to_json()
    script = (
        "import datetime as dt, sys, memframe as mf\n"
        "s = mf.Store.open(sys.argv[1])\n"
        "now = dt.datetime.fromisoformat(sys.argv[2])\n"
        "sys.stdout.buffer.write(mf.digest(s, now=now).to_json().encode('utf-8'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(store.path), NOW.isoformat()],
        capture_output=True, check=True, timeout=120,
    ).stdout.decode("utf-8")
    assert out == here
    assert mf.digest(store, now=NOW).to_json() == here  # and again in-process


def test_time_travel_equals_the_digest_taken_then(store):
    populate(store)
    g = store.generation
    then = mf.digest(store, now=NOW).to_json()
    put(store, "written later")
    store.relate("cap-1", "cap-2", "supersedes")
    assert mf.digest(store, now=NOW).to_json() != then
    view = store.at(g)
    assert mf.digest(view, now=NOW).to_json() == then
    assert mf.digest(view, now=NOW).generation == g


def test_hash_is_sha256_of_the_wire_text_and_known_hash_short_circuits(store):
    populate(store)
    d = mf.digest(store, now=NOW)
    assert d.hash == hashlib.sha256(d.to_json().encode("utf-8")).hexdigest()
    assert not d.unchanged
    same = mf.digest(store, now=NOW, known_hash=d.hash)
    assert same.unchanged and same.to_dict() == {"unchanged": True, "hash": d.hash}
    assert json.loads(same.to_json()) == {"unchanged": True, "hash": d.hash}
    assert same.frames == {}
    put(store, "a change")
    moved = mf.digest(store, now=NOW, known_hash=d.hash)
    assert not moved.unchanged and moved.hash != d.hash


def test_to_json_is_the_compact_dump_of_to_dict(store):
    populate(store)
    d = mf.digest(store, now=NOW)
    assert d.to_json() == json.dumps(d.to_dict(), ensure_ascii=False, separators=(",", ":"))
    body = d.to_dict()
    body["total"] = -1
    assert d.to_dict()["total"] != -1  # to_dict hands out a copy


def test_rows_visited_counts_the_partitions_read(store):
    populate(store)
    view = store.pinned()
    read = ["capsules", "relations", "forgets", "recalls", "classifications", "tiers",
            "brackets", "journal", "recall_misses", "lane_overrides", "corroborations",
            "source_cursors"]
    tables = sum(view.row_count(name) for name in read)
    d = mf.digest(store, now=NOW)
    body = d.to_dict()
    emitted = {row["id"] for key in ("newest", "handoff", "most_recalled")
               for row in body.get(key, [])}
    emitted |= {row["id"] for row in body.get("mission", {}).get("roots", [])}
    caps = [(part, pl.read_parquet(view.path / part.path, columns=["id"])["id"].to_list())
            for part in view.snapshot.parts("capsules")]
    content = sum(part.rows for part, ids in caps if emitted & set(ids))  # one group each
    journal_rows = view.row_count("journal")  # no checkpoint yet: the chain is walked in full
    # no digest state yet: the state's fold reads every source row (headlines included:
    # no content is read) and the capsules' ids once more first (to plan its ranges of
    # capsule numbers: one range here), and the graph, staged and pinned sections read
    # their tables
    twice = sum(view.row_count(name) for name in ("relations", "forgets", "reviews", "pins",
                                                  "capsules"))
    assert d.rows_visited == tables + journal_rows + twice > tables
    # verify="full" reads every row at once (a small store fits the memory budget)
    full = mf.digest(store, now=NOW, verify="full")
    assert full.to_json() == d.to_json() and full.rows_visited == tables + journal_rows + content
    source, body = reference_read(store, 10, None)  # explain's read: the same
    assert body == mf.digest(store).to_dict() and source.rows_visited() == full.rows_visited
    store.memory.run_cycle()  # the checkpoint: the walk then reads only its own rows
    view = store.pinned()
    checkpoint = view.row_count("projections/digest/journal")
    # the digest state replaces the six per-capsule tables (one stored row per capsule)
    state = sum(view.row_count(t) for t in view.snapshot.tables
                if t.startswith("projections/digest_capsules/"))
    assert state == view.row_count("capsules")
    per_capsule = ["capsules", "recalls", "classifications", "tiers", "journal"]
    # the store-wide families (graph, sources, misses, lanes, sessions) are read from their
    # kept values instead of their tables
    families = ["relations", "forgets", "recall_misses", "lane_overrides", "corroborations",
                "source_cursors", "brackets"]
    # (the part_of edges, the graph's endpoints and its known ids are looked up, never read
    # whole: no epic is shown and no relation or forget was written since)
    kept = sum(view.row_count(t) for t in view.snapshot.tables
               if t.startswith("projections/digest_globals/")
               and not t.endswith(("_members", "_endpoints", "_known")))
    assert kept > 0
    rest = tables - sum(view.row_count(name) for name in per_capsule + families) + kept
    # the warm digest reads the aggregates and the leaders; headlines come with the state
    # rows, so no content is read
    aggregates = view.row_count("projections/digest_aggregates")
    subset = sum(view.row_count(t) for t in view.snapshot.tables
                 if t.startswith("projections/digest_subset/"))
    subset += view.row_count("projections/text/digest_subset")
    assert aggregates > 0 and subset > 0
    # the newest and most-recalled lists come from the kept leaders (every row here)
    leaders = view.row_count("projections/text/digest_leaders")
    assert 0 < leaders <= 2 * state
    # the subset sections and the dag come from the kept sections (every row here: the
    # lists are shorter than the cap), so neither the subset nor the graph's values
    # are read
    sections = view.row_count("projections/text/digest_sections")
    graph = view.row_count("projections/digest_globals/graph")
    assert sections > 1 and graph > 0
    # the checkpoint's seal confirms the verified journal parts: its rows are not read
    assert journal.watermark_of(view)["seal"] is not None and checkpoint > 0
    warm = mf.digest(view, now=NOW)
    assert warm.rows_visited == rest - graph + aggregates + sections + leaders
    # fenced, the subset and the graph's kept values are read (and the kept sections not)
    fenced = mf.digest(view, now=NOW, project_prefix="team")
    assert fenced.rows_visited == rest + aggregates + subset + leaders
    assert mf.digest(view, now=NOW, verify="full").rows_visited == tables + journal_rows + content
    assert mf.digest(mf.Store.create(store.path.parent / "empty")).rows_visited == 0


def test_frames_mirror_the_lists(store):
    populate(store)
    d = mf.digest(store, now=NOW)
    body = d.to_dict()
    frames = d.frames
    assert frames["newest"]["id"].to_list() == [r["id"] for r in body["newest"]]
    assert frames["by_project"].to_dicts() == body["by_project"]
    assert frames["most_recalled"]["recall_count"].to_list() == [
        r["recall_count"] for r in body["most_recalled"]]
    assert frames["dag"].filter(pl.col("list") == "ready")["id"].to_list() == body["dag"]["ready"]
    assert frames["open_sessions"].height == 0
    assert frames["summary"]["total"].item() == body["total"]
    assert frames["mission"]["id"].to_list() == [r["id"] for r in body["mission"]["roots"]]


def test_default_now_is_the_store_clock(store, clock):
    put(store, "expires", valid_from=T0 - dt.timedelta(days=2),
        valid_to=T0 + dt.timedelta(days=2))
    clock.set(T0 + dt.timedelta(days=3))
    assert mf.digest(store).to_dict()["newest"][0].get("expired") is True
    clock.set(T0)
    assert "expired" not in mf.digest(store).to_dict()["newest"][0]


def test_the_digest_writes_nothing(store):
    populate(store)
    g = store.generation
    dig(store)
    assert store.generation == g
