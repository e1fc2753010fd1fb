"""total, by_project, newest, most_recalled, headline flags, fences (ref 4.1-4.5, 8)."""

from __future__ import annotations

import datetime as dt

from conftest import PROJECT, T0, dig, ids, put

UTC = dt.UTC


def test_3_totals_count_the_population_before_the_cap(store):
    fenced = [put(store, f"ACTIVE(t{i}): sqlite note {i}", project="nott/tech") for i in range(1, 6)]
    other = put(store, "ACTIVE(t9): sqlite elsewhere", project="other")
    store.record_recall(fenced + [other])
    d = dig(store, project_prefix="nott/tech", headlines=2)
    for key in ("handoff", "newest", "most_recalled"):
        assert len(d[key]) == 2, key
        assert d[f"{key}_total"] == 5, key
    assert d["total"] == 5
    wide = dig(store, project_prefix="nott/tech", headlines=50)
    for key in ("handoff", "newest", "most_recalled"):
        assert len(wide[key]) == 5 and wide[f"{key}_total"] == 5
    assert other not in ids(wide["newest"] + wide["handoff"] + wide["most_recalled"])


def test_4_by_project_live_excludes_superseded_while_count_keeps_them(store):
    a = put(store, "tech one", project="nott/tech")
    b = put(store, "tech two", project="nott/tech")
    c = put(store, "tech three", project="nott/tech")
    put(store, "ops one", project="nott/ops")
    store.relate(c, a, "supersedes")
    store.relate(c, b, "supersedes")
    d = dig(store)
    assert d["by_project"] == [
        {"project_id": "nott/ops", "count": 1, "live": 1},
        {"project_id": "nott/tech", "count": 3, "live": 1},
    ]
    assert d["total"] == 4
    assert [r["id"] for r in d["newest"] if r.get("superseded")] == [b, a]
    assert "handoff_total" not in d and "most_recalled_total" not in d


def test_5_most_recalled_fills_from_recalls(store, clock):
    a = put(store, "alpha fact about sqlite storage")
    put(store, "beta fact about postgres")
    store.record_recall([a])
    store.record_recall([a])
    d = dig(store)
    assert len(d["most_recalled"]) == 1 and len(d["newest"]) == 2
    row = d["most_recalled"][0]
    assert row["id"] == a and row["headline"] == "alpha fact about sqlite storage"
    assert row["recall_count"] == 2
    assert row["last_recalled_at"].endswith("Z")
    assert list(row)[-2:] == ["recall_count", "last_recalled_at"]
    assert d["most_recalled_total"] == 1


def test_most_recalled_orders_by_count_then_last_recall_then_seq(store, clock):
    c1, c2, c3, c4 = (put(store, f"recall subject {i}") for i in range(1, 5))
    store.record_recall([c3])
    store.record_recall([c2])          # c2 recalled before c1 although created after
    store.record_recall([c3])
    store.record_recall([c1, c4])      # same instant: seq breaks the tie
    rows = dig(store)["most_recalled"]
    assert ids(rows) == [c3, c1, c4, c2]
    assert [r["recall_count"] for r in rows] == [2, 1, 1, 1]
    assert rows[1]["last_recalled_at"] == rows[2]["last_recalled_at"]
    assert rows[1]["last_recalled_at"] > rows[3]["last_recalled_at"]


def test_tombstoned_capsules_leave_every_capsule_section(store):
    a = put(store, "to be forgotten")
    b = put(store, "stays")
    store.record_recall([a, b])
    store.forget(a)
    d = dig(store)
    assert d["total"] == 1 and ids(d["newest"]) == [b] and ids(d["most_recalled"]) == [b]
    assert d["by_project"] == [{"project_id": PROJECT, "count": 1, "live": 1}]


def test_39_project_prefix_is_a_subtree_fence(store):
    put(store, "root", project="nott")
    put(store, "sub", project="nott/sub")
    put(store, "sibling", project="nottx")
    d = dig(store, project_prefix="nott")
    assert d["total"] == 2
    assert d["by_project"] == [
        {"project_id": "nott", "count": 1, "live": 1},
        {"project_id": "nott/sub", "count": 1, "live": 1},
    ]
    assert dig(store, project_prefix=" nott")["total"] == 0  # accepted as-is, matches nothing


def test_empty_scope_omits_totals_and_keeps_store_global_sections(store):
    a = put(store, "one")
    b = put(store, "two")
    store.relate(a, b, "blocks")
    store.record_miss(["lost"], "abstain")
    d = dig(store, project_prefix="elsewhere")
    assert d["total"] == 0 and d["by_project"] == [] and d["newest"] == []
    assert "newest_total" not in d and "recent_failures" not in d
    assert d["relations"] == 1 and d["dag"]["ready"] == [a] and d["recall_misses"] == 1


def test_41_kind_appears_only_when_classified(store):
    a = put(store, "a task", kind="task")
    b = put(store, "unclassified")
    newest = dig(store)["newest"]
    assert ids(newest) == [b, a]
    assert "kind" not in newest[0] and newest[1]["kind"] == "task"


def test_42_governance_kinds_flow_through(store):
    for kind in ("constraint", "capability", "failure_pattern"):
        put(store, f"a {kind}", kind=kind)
    assert [r["kind"] for r in dig(store)["newest"]] == [
        "failure_pattern", "capability", "constraint"]


def test_reclassification_latest_kind_wins(store):
    a = put(store, "first a fact", kind="fact")
    store.classify(a, kind="decision")
    assert dig(store)["newest"][0]["kind"] == "decision"


def test_tier_and_expired_flags(store):
    a = put(store, "expiring", valid_from=dt.datetime(2026, 1, 1, tzinfo=UTC),
            valid_to=dt.datetime(2026, 7, 1, tzinfo=UTC))
    b = put(store, "archived one")
    store.classify(b, tier="archived")
    rows = {r["id"]: r for r in dig(store)["newest"]}
    assert rows[a]["expired"] is True and "tier" not in rows[a]
    assert rows[b]["tier"] == "archived" and "expired" not in rows[b]
    assert list(rows[a]) == ["id", "project_id", "instruction_taint", "created_at",
                             "headline", "expired"]
    # expired is strict and uses the digest's now
    at_edge = dig(store, now=dt.datetime(2026, 7, 1, tzinfo=UTC))
    assert "expired" not in {r["id"]: r for r in at_edge["newest"]}[a]


def test_created_at_keeps_nanoseconds_trimmed(store):
    put(store, "precise", created_at="2026-07-21T23:36:24.016162617Z")
    put(store, "round", created_at=T0)
    rows = {r["headline"]: r for r in dig(store)["newest"]}
    assert rows["precise"]["created_at"] == "2026-07-21T23:36:24.016162617Z"
    assert rows["round"]["created_at"] == "2026-07-23T12:00:00Z"


def test_headline_law_cuts_every_boundary(store):
    for i, sep in enumerate(["\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"]):
        put(store, f"line{i}{sep}second")
    put(store, "x" * 150)
    put(store, "trailing\n")
    heads = [r["headline"] for r in dig(store, headlines=20)["newest"]]
    assert heads[0] == "trailing"
    assert heads[1] == "x" * 140 + "…"
    assert heads[2:] == [f"line{i}…" for i in reversed(range(8))]


def test_instruction_taint_flag_is_carried(store):
    put(store, "imported", authority_class="externally-imported", instruction_taint=True)
    assert dig(store)["newest"][0]["instruction_taint"] is True
