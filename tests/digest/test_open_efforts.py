"""``open_efforts`` / ``open_efforts_total`` (reference 4.17; section 8 rows 43 and 46)."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

from conftest import PROJECT, T0, dig, ids, put, settle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
import memframe.graph as graph_module
from memframe.store.store import StoreView

DAG_KEYS = ("ready", "ready_total", "blocked", "blocked_total", "done", "done_total")


def effort(store, title="effort epic", project=PROJECT):
    return put(store, title, project=project, kind="epic")


def board(d) -> dict[str, dict]:
    return {row["id"]: row for row in d.get("open_efforts", [])}


def test_46_board_row_is_the_epic_headline_then_members_dag_and_handoff(store):
    epic = effort(store)
    a = put(store, "reader", kind="task")
    b = put(store, "writer", kind="task")
    for member in (a, b):
        store.relate(member, epic, "part_of")
    store.relate(a, b, "blocks")
    sid = store.session_start(PROJECT)
    handoff = store.session_finish(sid, handoff="reader done")
    store.relate(handoff, epic, "part_of")
    d = dig(store)
    assert d["open_efforts_total"] == 1
    (row,) = d["open_efforts"]
    assert list(row) == ["id", "project_id", "instruction_taint", "created_at", "headline",
                         "kind", "member_total", "newest_id", *DAG_KEYS, "handoff"]
    assert row["id"] == epic and row["kind"] == "epic" and row["member_total"] == 3
    assert row["newest_id"] == handoff
    assert (row["ready"], row["blocked"], row["done"]) == ([a], [b], [])
    assert row["handoff"] == d["newest"][0]  # the same headline row
    assert list(d)[-2:] == ["open_efforts", "open_efforts_total"]


def test_46_absent_without_an_open_epic(store):
    put(store, "a task", kind="task")
    d = dig(store)
    assert "open_efforts" not in d and "open_efforts_total" not in d


def test_46_witnessed_superseded_forgotten_or_relabelled_epics_are_closed(store):
    witnessed, superseded, forgotten, relabelled, open_ = (
        effort(store, f"epic {i}") for i in range(5))
    proof = put(store, "proof")
    store.relate(proof, witnessed, "witnesses")
    store.relate(put(store, "successor"), superseded, "supersedes")
    store.forget(forgotten)
    store.classify(relabelled, kind="task")
    d = dig(store)
    assert ids(d["open_efforts"]) == [open_] and d["open_efforts_total"] == 1


def test_46_member_total_counts_dead_and_cross_project_members(store):
    epic = effort(store, project="team")
    members = [put(store, f"member {i}", project=p)
               for i, p in enumerate(["team", "other", "other", "team"])]
    for member in members:
        store.relate(member, epic, "part_of")
    store.relate(members[3], members[0], "supersedes")  # dead member
    store.forget(members[1])  # tombstoned member
    d = dig(store, project_prefix="team")
    (row,) = d["open_efforts"]
    assert row["member_total"] == 4 and row["newest_id"] == members[3]
    # 0.3.0: the fence "other" holds a live member (member 2), so the epic rides there too,
    # as its own row (project team)
    (row,) = dig(store, project_prefix="other")["open_efforts"]
    assert row["id"] == epic and row["project_id"] == "team"


def test_46_dag_slices_are_capped_at_n_with_exact_totals(store):
    epic = effort(store)
    tasks = [put(store, f"task {i}") for i in range(4)]
    outsider = put(store, "not a member")
    for task in tasks:
        store.relate(task, epic, "part_of")
    store.relate(tasks[0], tasks[1], "blocks")
    store.relate(outsider, tasks[2], "blocks")
    store.relate(tasks[3], outsider, "blocks")
    store.relate(put(store, "proof"), tasks[0], "witnesses")
    full = dig(store, headlines=100)
    row = board(full)[epic]
    assert row["ready"] == sorted([tasks[1], tasks[3]]) and row["ready_total"] == 2
    assert row["blocked"] == [tasks[2]] and row["done"] == [tasks[0]]
    assert outsider in full["dag"]["blocked"]  # global, but not a member
    row = board(dig(store, headlines=1))[epic]
    assert row["ready"] == sorted([tasks[1], tasks[3]])[:1] and row["ready_total"] == 2


def test_46_a_live_blocks_cycle_omits_all_six_dag_fields(store):
    epic = effort(store)
    a, b = put(store, "a"), put(store, "b")
    store.relate(a, epic, "part_of")
    store.relate(a, b, "blocks")
    store.relate(b, a, "blocks")
    d = dig(store)
    assert d["dag"]["status"] == "cycle"
    row = board(d)[epic]
    assert not set(DAG_KEYS) & set(row) and row["member_total"] == 1


def test_46_handoff_is_the_newest_live_finish_handoff_member(store):
    epic = effort(store, project="team")
    picks = []
    for i, project in enumerate(["team", "other", "team", "team"]):
        sid = store.session_start(project)
        picks.append(store.session_finish(sid, handoff=f"handoff {i}"))
    note = put(store, "plain member note")
    for member in (*picks, note):
        store.relate(member, epic, "part_of")
    store.relate(note, picks[3], "supersedes")  # the newest handoff member is superseded
    store.forget(picks[2])  # the next one is tombstoned
    assert board(dig(store))[epic]["handoff"]["id"] == picks[1]  # another project is fine
    store.review(picks[1], "proposed")  # a staged member still resolves (unfenced live map)
    assert board(dig(store, project_prefix="team"))[epic]["handoff"]["id"] == picks[1]
    store.forget(picks[1])
    assert board(dig(store))[epic]["handoff"]["id"] == picks[0]


def test_46_rows_sort_by_newest_member_then_epic_and_cap_at_n(store):
    e1, e2, e3 = (effort(store, f"epic {i}") for i in range(3))
    late = put(store, "late member")
    store.relate(late, e1, "part_of")
    store.relate(late, e2, "part_of")  # e1 and e2 share their newest member: e2 (newer) first
    d = dig(store)
    assert ids(d["open_efforts"]) == [e2, e1, e3]
    assert [r["newest_id"] for r in d["open_efforts"]] == [late, late, e3]
    d = dig(store, headlines=2)
    assert ids(d["open_efforts"]) == [e2, e1] and d["open_efforts_total"] == 3
    d = dig(store, headlines=0)
    assert "open_efforts" not in d and d["open_efforts_total"] == 3


def test_46_staged_epic_is_no_effort_until_ratified(store):
    epic = effort(store)
    store.review(epic, "proposed")
    assert "open_efforts" not in dig(store)
    store.review(epic, "ratified")
    assert ids(dig(store)["open_efforts"]) == [epic]


def test_46_staged_members_still_count_and_can_be_newest(store):
    epic = effort(store)
    proposal = put(store, "proposed member")
    store.relate(proposal, epic, "part_of")
    store.review(proposal, "proposed")
    row = board(dig(store))[epic]
    assert row["member_total"] == 1 and row["newest_id"] == proposal


def test_46_staged_open_efforts_keep_the_staged_section_store_global(store):
    epic = effort(store, project="team")
    store.review(put(store, "proposal", project="other"), "proposed")
    d = dig(store, project_prefix="team")
    assert ids(d["open_efforts"]) == [epic] and d["staged"]["proposed"] == 1


def test_46_relations_read_and_dag_projected_once_per_call(store, read_path, monkeypatch):
    epic = effort(store)
    for i in range(3):
        member = put(store, f"m{i}")
        store.relate(member, epic, "part_of")
    store.relate(put(store, "blocker"), member, "blocks")
    settle(store)  # the job's own reads are not the digest's
    projections, reads = [], []
    real_projection = graph_module.blocks_projection
    real_table = StoreView.table

    def counting_projection(*args, **kwargs):
        projections.append(1)
        return real_projection(*args, **kwargs)

    def counting_table(self, name):
        reads.append(name)
        return real_table(self, name)

    monkeypatch.setattr(graph_module, "blocks_projection", counting_projection)
    monkeypatch.setattr(StoreView, "table", counting_table)
    d = dig(store)
    assert d["open_efforts"][0]["blocked"] == [member]
    # warm, the kept sections answer: neither is needed at all
    once = 0 if read_path == "warm" else 1
    assert len(projections) == once and reads.count("relations") == once


def test_46_a_fenced_call_reads_no_more_than_an_unfenced_one(store):
    epic = effort(store, project="team")
    store.relate(put(store, "member", project="other"), epic, "part_of")
    now = T0 + dt.timedelta(days=1)
    unfenced = mf.digest(store, now=now)
    fenced = mf.digest(store, project_prefix="team", now=now)
    assert fenced.rows_visited <= unfenced.rows_visited  # content is read only for emitted rows
    assert board(fenced.to_dict())[epic]["member_total"] == 1


# -- the law: each row's six dag fields are the global lists intersected with its members --

def _pairs(n: int, size: int):
    return st.lists(st.tuples(st.integers(1, n), st.integers(1, n)), max_size=size)


@st.composite
def graphs(draw):
    """Nodes 1..n, a few epics among the first ones, members, blocks and closing edges."""
    n = draw(st.integers(min_value=4, max_value=10))
    epics = draw(st.sets(st.integers(1, 3), min_size=1))
    edges = [("part_of", a, e) for a, e in draw(
        st.lists(st.tuples(st.integers(1, n), st.sampled_from(sorted(epics))), max_size=12))]
    edges += [("blocks", a, b) for a, b in draw(_pairs(n, 10))]
    edges += [("witnesses", a, b) for a, b in draw(_pairs(n, 2))]
    edges += [("supersedes", a, b) for a, b in draw(_pairs(n, 2))]
    return {"n": n, "epics": epics, "edges": edges,
            "forgotten": draw(st.sets(st.integers(1, n), max_size=2)),
            "cap": draw(st.integers(min_value=0, max_value=3))}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs())
def test_dag_fields_are_global_lists_intersected_with_members(graph):
    n = graph["n"]
    with tempfile.TemporaryDirectory() as tmp:
        store = mf.Store.create(Path(tmp) / "s", clock=lambda: T0)
        with store.transaction():
            cids = store.ingest([{"content": f"node {i}", "source": "s", "anchor": "a"}
                                 for i in range(1, n + 1)])
            for e in sorted(graph["epics"]):
                store.classify(cids[e - 1], kind="epic")
            edges = {(k, cids[a - 1], cids[b - 1]) for k, a, b in graph["edges"] if a != b}
            for kind, a, b in sorted(edges):
                store.relate(a, b, kind)
            for f in sorted(graph["forgotten"]):
                store.forget(cids[f - 1])
        full = mf.digest(store, headlines=10_000, now=T0).to_dict()
        capped = mf.digest(store, headlines=graph["cap"], now=T0).to_dict()
    members: dict[str, set[str]] = {}
    for kind, a, b in edges:
        if kind == "part_of":
            members.setdefault(b, set()).add(a)
    for body in (full, capped):
        for row in body.get("open_efforts", []):
            epic = row["id"]
            effort_ids = members.get(epic, set()) | {epic}
            assert row["member_total"] == len(members.get(epic, set()))
            if full["dag"]["status"] == "cycle":
                assert not set(DAG_KEYS) & set(row)
                continue
            for name in ("ready", "blocked", "done"):
                expected = [cid for cid in full["dag"][name] if cid in effort_ids]
                limit = 10_000 if body is full else graph["cap"]
                assert row[name] == expected[:limit]
                assert row[f"{name}_total"] == len(expected)


def test_frames_carry_pinned_and_open_efforts(store):
    epic = effort(store)
    member = put(store, "member")
    store.relate(member, epic, "part_of")
    sid = store.session_start(PROJECT)
    handoff = store.session_finish(sid, handoff="handed over")
    store.relate(handoff, epic, "part_of")
    store.pin(member)
    frames = mf.digest(store, now=T0).frames
    row = frames["open_efforts"].row(0, named=True)
    assert (row["id"], row["member_total"], row["newest_id"], row["handoff_id"]) == (
        epic, 2, handoff, handoff)
    assert row["ready_total"] == 0 and row["pinned"] is None
    assert frames["pinned"]["id"].to_list() == [member]
    assert frames["pinned"]["pinned"].to_list() == [True]
    summary = frames["summary"].row(0, named=True)
    assert (summary["pinned_total"], summary["open_efforts_total"],
            summary["staged_proposed"]) == (1, 1, 0)


# -- 0.3.0 admission (reference 4.17, section 10): the epic or any of its members ----------

def test_a_fence_holding_only_a_member_shows_the_epic_as_its_own_row(store):
    epic = effort(store, "ship the importer", project="team")
    reader = put(store, "reader", project="team/api", kind="task")
    store.relate(reader, epic, "part_of")
    d = dig(store, project_prefix="team/api")
    (row,) = d["open_efforts"]
    assert d["open_efforts_total"] == 1
    assert (row["id"], row["project_id"], row["headline"]) == (epic, "team", "ship the importer")
    assert row["member_total"] == 1 and row["newest_id"] == reader
    assert d["total"] == 1  # the fence's own counts are unchanged: the epic is not in them
    assert "open_efforts" not in dig(store, project_prefix="elsewhere")


def test_only_members_the_fence_holds_admit(store):
    epic = effort(store, project="team")
    gone = put(store, "forgotten member", project="api")
    staged = put(store, "proposed member", project="web")
    superseded = put(store, "old member", project="docs")
    for member in (gone, staged, superseded):
        store.relate(member, epic, "part_of")
    store.forget(gone)
    store.review(staged, "proposed")
    store.relate(put(store, "new doc", project="docs"), superseded, "supersedes")
    assert "open_efforts" not in dig(store, project_prefix="api")  # tombstoned: not in all
    assert "open_efforts" not in dig(store, project_prefix="web")  # staged: not in all
    assert ids(dig(store, project_prefix="docs")["open_efforts"]) == [epic]  # superseded is


def test_closed_epics_stay_off_a_board_their_members_reach(store):
    witnessed, superseded, forgotten = (effort(store, f"e{i}", project="team") for i in range(3))
    for epic in (witnessed, superseded, forgotten):
        store.relate(put(store, f"member of {epic}", project="api"), epic, "part_of")
    store.relate(put(store, "done", project="team"), witnessed, "witnesses")
    store.relate(put(store, "e1 again", project="team"), superseded, "supersedes")
    store.forget(forgotten)
    assert "open_efforts" not in dig(store, project_prefix="api")


def test_a_staged_epic_rides_through_a_member_the_scope_holds(store):
    """Section 10's reading: the row comes from the unfenced live map, staged included."""
    epic = effort(store, "proposed effort")
    store.review(epic, "proposed")
    member = put(store, "live member", project="team")
    store.relate(member, epic, "part_of")
    for prefix in (None, "team"):
        (row,) = dig(store, project_prefix=prefix)["open_efforts"]
        assert row["id"] == epic and row["project_id"] == PROJECT
    assert "open_efforts" not in dig(store, project_prefix=PROJECT)  # the epic is staged
    store.review(member, "proposed")  # its only member staged too: off every board
    assert "open_efforts" not in dig(store)


def test_the_warm_digest_follows_member_admission(store):
    """A member's forget or review changes the board without touching an epic's row."""
    epic = effort(store, "proposed effort")
    store.review(epic, "proposed")
    member = put(store, "member", project="team")
    store.relate(member, epic, "part_of")
    now = T0 + dt.timedelta(days=1)

    def check():
        for prefix in (None, "team", PROJECT):
            warm = mf.digest(store, project_prefix=prefix, now=now).to_json()
            full = mf.digest(store, project_prefix=prefix, now=now, verify="full").to_json()
            assert warm == full, prefix
        return board(dig(store))

    store.memory.run_cycle()
    assert list(check()) == [epic]
    store.review(member, "proposed")
    assert check() == {}
    store.memory.run_cycle()
    assert check() == {}
    store.review(member, "ratified")
    assert list(check()) == [epic]
    store.memory.run_cycle()
    store.forget(member)
    assert check() == {}
    store.memory.run_cycle()
    assert check() == {}
