"""Wire shape: the empty golden, key order, omissions, caps vs totals (ref 4.0, 7, 8)."""

from __future__ import annotations

import json

import pytest
from conftest import PROJECT, dig, ids, put, raw

import memframe as mf
from memframe.errors import InvalidInputError

EMPTY_GOLDEN = (
    '{"label":"ADVISORY_NOT_AUTHORITY","framing":"DATA","total":0,"by_project":[],'
    '"newest":[],"most_recalled":[],"relations":0,"open_sessions":0,"open_session_ids":[],'
    '"audit_events":0,"recall_misses":0,"dag":{"status":"ok","ready":[],"ready_total":0,'
    '"blocked":[],"blocked_total":0,"done":[],"done_total":0},'
    '"tiers":{"active":0,"archived":0,"quarantined":0},'
    '"journal":{"chain":"ok","verified":0,"out_of_band":0},"archive_candidates":0}'
)

WIRE_ORDER = [
    "label", "framing", "total", "by_project", "handoff", "handoff_total", "newest",
    "newest_total", "most_recalled", "most_recalled_total", "relations", "open_sessions",
    "open_session_ids", "audit_events", "recall_misses", "recent_failures",
    "lane_overrides_total", "sources", "dag", "mission", "unanchored", "tiers", "journal",
    "archive_candidates", "staged", "pinned", "pinned_total", "open_efforts",
    "open_efforts_total",
]


def test_1_empty_store_golden_is_byte_identical(store):
    assert raw(store) == EMPTY_GOLDEN
    assert mf.digest(store).to_json() == EMPTY_GOLDEN  # the store's own clock


def test_2_projects_counts_newest_order(store):
    put(store, "digest alpha fact", project="proj-a")
    put(store, "digest beta fact", project="proj-a")
    put(store, "digest gamma fact", project="proj-b")
    d = dig(store, headlines=2)
    assert d["label"] == "ADVISORY_NOT_AUTHORITY" and d["framing"] == "DATA"
    assert d["total"] == 3
    assert d["by_project"] == [
        {"project_id": "proj-a", "count": 2, "live": 2},
        {"project_id": "proj-b", "count": 1, "live": 1},
    ]
    assert ids(d["newest"]) == ["cap-3", "cap-2"]
    assert d["newest"][0]["headline"] == "digest gamma fact"
    assert d["newest_total"] == 3
    assert d["most_recalled"] == [] and "most_recalled_total" not in d
    assert ids(dig(store)["newest"]) == ["cap-3", "cap-2", "cap-1"]


def test_headline_row_keys_in_wire_order(store):
    put(store, "a fact")
    row = dig(store)["newest"][0]
    assert list(row) == ["id", "project_id", "instruction_taint", "created_at", "headline"]
    assert row["project_id"] == PROJECT and row["instruction_taint"] is False
    assert row["created_at"] == "2026-07-23T12:00:00Z"


def test_every_present_key_follows_the_wire_order(store):
    a = put(store, "ACTIVE(t): thread row", kind="task")
    b = put(store, "epic root", kind="epic")
    store.relate(a, b, "blocks")
    store.record_recall([a])
    store.record_miss(["lost term"], "abstain")
    store.record_lane_override("term", "fused")
    store.record_git_scan("git:/repo", "sha1", [])
    draft = put(store, "a staged draft")
    store.review(draft, "proposed")
    store.pin(a, reason="load-bearing")
    keys = list(dig(store))
    assert keys == [k for k in WIRE_ORDER if k in keys]
    for key in ("handoff", "handoff_total", "most_recalled_total", "recent_failures",
                "lane_overrides_total", "sources", "mission", "unanchored", "staged",
                "pinned", "pinned_total", "open_efforts", "open_efforts_total"):
        assert key in keys, key


def test_48_headlines_raise_the_cap_without_moving_the_total(store):
    store.ingest([{"content": f"capsule {i}", "source": "note", "anchor": "a"} for i in range(12)])
    assert len(dig(store)["newest"]) == 10
    assert dig(store)["newest_total"] == 12
    assert len(dig(store, headlines=12)["newest"]) == 12
    assert len(dig(store, headlines=3)["newest"]) == 3
    assert {dig(store, headlines=h)["total"] for h in (0, 3, 10, 12, 1000)} == {12}


def test_headlines_zero_empties_lists_keeps_totals(store):
    sid = store.session_start(PROJECT)
    store.session_finish(sid, handoff="handoff text")
    put(store, "other")
    d = dig(store, headlines=0)
    assert "handoff" not in d and d["handoff_total"] == 1
    assert d["newest"] == [] and d["newest_total"] == 2
    assert d["open_session_ids"] == []


@pytest.mark.parametrize("bad", ["ten", -1, 2.5, True])  # None is the default (1.1)
def test_49_non_numeric_headlines_is_a_teaching_error(store, bad):
    with pytest.raises(InvalidInputError, match="non-negative integer") as info:
        mf.digest(store, headlines=bad)
    if bad == "ten":
        assert '"ten"' in str(info.value)


def test_47_event_time_never_reaches_the_digest(store):
    put(store, "capsule with an event", valid_from="2026-01-01T00:00:00Z")
    assert "event_time" not in raw(store)


def test_43_witnessed_epic_golden(store):
    epic = put(store, "witnessed effort epic", kind="epic")
    witness = put(store, "closing witness")
    store.relate(witness, epic, "witnesses")
    d = dig(store)
    for row in d["newest"] + d["mission"]["roots"]:
        row["created_at"] = "<TS>"
    expected = {
        "label": "ADVISORY_NOT_AUTHORITY", "framing": "DATA", "total": 2,
        "by_project": [{"project_id": PROJECT, "count": 2, "live": 2}],
        "newest": [
            {"id": "cap-2", "project_id": PROJECT, "instruction_taint": False,
             "created_at": "<TS>", "headline": "closing witness"},
            {"id": "cap-1", "project_id": PROJECT, "instruction_taint": False,
             "created_at": "<TS>", "headline": "witnessed effort epic", "kind": "epic"},
        ],
        "newest_total": 2, "most_recalled": [], "relations": 1, "open_sessions": 0,
        "open_session_ids": [], "audit_events": 4, "recall_misses": 0,
        "dag": {"status": "ok", "ready": [], "ready_total": 0, "blocked": [],
                "blocked_total": 0, "done": [], "done_total": 0},
        "mission": {"status": "ok", "roots": [
            {"id": "cap-1", "project_id": PROJECT, "instruction_taint": False,
             "created_at": "<TS>", "headline": "witnessed effort epic", "kind": "epic",
             "children": 0}]},
        "tiers": {"active": 2, "archived": 0, "quarantined": 0},
        "journal": {"chain": "ok", "verified": 4, "out_of_band": 0},
        "archive_candidates": 0,
    }
    assert json.dumps(d) == json.dumps(expected)  # same keys in the same order


def test_non_ascii_is_emitted_raw_and_controls_escaped(store):
    put(store, "café ✓ \x01 end")
    text = raw(store)
    assert "café ✓ \\u0001 end" in text
