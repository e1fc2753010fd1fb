"""Relations, sessions, the blocks-DAG, mission and unanchored (ref 4.6, 4.10-4.12, 8)."""

from __future__ import annotations

from conftest import PROJECT, dig, ids, put


def caps(store, n, prefix="node", **fields):
    return [put(store, f"{prefix} {i}", **fields) for i in range(1, n + 1)]


# -- counters and sessions -------------------------------------------------------------

def test_11_relate_and_session_move_the_counters(store):
    a, b = caps(store, 2)
    store.relate(a, b, "blocks")
    store.session_start(PROJECT)
    d = dig(store)
    assert (d["relations"], d["open_sessions"], d["audit_events"]) == (1, 1, 4)


def test_12_every_relation_kind_is_counted(store):
    a, b = caps(store, 2)
    for kind in ("supersedes", "derived_from", "witnesses", "blocks", "grounded_in"):
        store.relate(a, b, kind)
    assert dig(store)["relations"] == 5


def test_13_open_session_ids_capped_with_exact_total(store):
    s1, s2, s3 = (store.session_start(PROJECT) for _ in range(3))
    d = dig(store, headlines=2)
    assert d["open_sessions"] == 3 and d["open_session_ids"] == [s1, s2] == ["sess-1", "sess-2"]
    store.session_finish(s1)
    d = dig(store, headlines=2)
    assert d["open_sessions"] == 2 and d["open_session_ids"] == [s2, s3]


def test_open_sessions_are_store_global(store):
    store.session_start("elsewhere")
    d = dig(store, project_prefix="nott")
    assert d["open_sessions"] == 1 and d["open_session_ids"] == ["sess-1"]


# -- dag ---------------------------------------------------------------------------------

def test_14_dag_cycle_fails_closed_and_supersede_repairs(store):
    c1, c2 = caps(store, 2)
    store.relate(c1, c2, "blocks")
    assert dig(store)["dag"] == {"status": "ok", "ready": [c1], "ready_total": 1,
                                 "blocked": [c2], "blocked_total": 1, "done": [],
                                 "done_total": 0}
    store.relate(c2, c1, "blocks")
    d = dig(store)
    assert d["dag"] == {"status": "cycle", "cycle": [c1, c2], "entangled_total": 2}
    assert d["total"] == 2  # the rest of the digest still serves
    c3 = put(store, "replacement")
    store.relate(c3, c2, "supersedes")
    dag = dig(store)["dag"]
    assert dag["status"] == "ok" and dag["ready"] == [c1] and dag["blocked"] == []


def test_15_forget_repairs_a_three_cycle(store):
    c1, c2, c3 = caps(store, 3)
    store.relate(c1, c2, "blocks")
    store.relate(c2, c3, "blocks")
    store.relate(c3, c1, "blocks")
    assert dig(store)["dag"] == {"status": "cycle", "cycle": [c1, c2, c3], "entangled_total": 3}
    store.forget(c2)
    dag = dig(store)["dag"]
    assert dag["status"] == "ok" and dag["ready"] == [c3] and dag["blocked"] == [c1]


def test_16_witnessed_blocker_is_done_and_frees_its_dependent(store):
    c1, c2 = caps(store, 2)
    store.relate(c1, c2, "blocks")
    dag = dig(store)["dag"]
    assert dag["done"] == [] and dag["done_total"] == 0
    c3 = put(store, "proof")
    store.relate(c3, c1, "witnesses")
    dag = dig(store)["dag"]
    assert (dag["done"], dag["done_total"]) == ([c1], 1)
    assert (dag["ready"], dag["ready_total"]) == ([c2], 1)
    assert (dag["blocked"], dag["blocked_total"]) == ([], 0)


def test_17_18_part_of_and_proposes_are_inert_to_the_dag(store):
    c1, c2, c3 = caps(store, 3)
    store.relate(c1, c2, "blocks")
    before = dig(store)
    store.relate(c1, c3, "part_of")
    store.relate(c2, c3, "part_of")
    store.relate(c3, c1, "part_of")
    store.relate(c3, c2, "proposes")
    after = dig(store)
    assert after["dag"] == before["dag"]
    assert (before["relations"], after["relations"]) == (1, 5)


def test_dag_lists_sort_bytewise_and_cap_with_exact_totals(store):
    nodes = caps(store, 12)
    hub = nodes[0]
    for other in nodes[1:]:
        store.relate(hub, other, "blocks")
    dag = dig(store, headlines=3)["dag"]
    blocked = sorted(nodes[1:])
    assert blocked[:3] == ["cap-10", "cap-11", "cap-12"]
    assert dag["blocked"] == blocked[:3] and dag["blocked_total"] == 11
    assert dag["ready"] == [hub] and dag["ready_total"] == 1


def test_cycle_entangled_total_counts_downstream_nodes(store):
    c1, c2, c3, c4 = caps(store, 4)
    store.relate(c2, c1, "blocks")
    store.relate(c1, c2, "blocks")
    store.relate(c2, c3, "blocks")
    store.relate(c3, c4, "blocks")
    assert dig(store)["dag"] == {"status": "cycle", "cycle": [c1, c2], "entangled_total": 4}


def test_dag_is_store_global(store):
    a = put(store, "a", project="x")
    b = put(store, "b", project="y")
    store.relate(a, b, "blocks")
    assert dig(store, project_prefix="z")["dag"]["ready"] == [a]


# -- mission -----------------------------------------------------------------------------

def test_19_mission_lists_epic_roots_with_child_counts(store):
    epic = put(store, "ship v1", kind="epic")
    for i in range(2):
        child = put(store, f"child {i}")
        store.relate(child, epic, "grounded_in")
    m = dig(store)["mission"]
    assert m["status"] == "ok" and len(m["roots"]) == 1
    root = m["roots"][0]
    assert root["id"] == epic and root["kind"] == "epic" and root["children"] == 2
    assert list(root)[-1] == "children"


def test_20_epic_with_outgoing_grounded_in_is_not_a_root(store):
    top = put(store, "top epic", kind="epic")
    sub = put(store, "sub epic", kind="epic")
    store.relate(sub, top, "grounded_in")
    roots = dig(store)["mission"]["roots"]
    assert ids(roots) == [top] and roots[0]["children"] == 1


def test_21_mission_is_dormant_without_epics(store):
    put(store, "a plain fact")
    assert "mission" not in dig(store)


def test_22_grounded_in_cycle_fails_mission_closed_only(store):
    epic = put(store, "epic", kind="epic")
    c2, c3, c4 = caps(store, 3)
    store.relate(c2, c3, "grounded_in")
    store.relate(c3, c4, "grounded_in")
    store.relate(c4, c2, "grounded_in")
    d = dig(store)
    assert d["total"] == 4 and d["dag"]["status"] == "ok"
    assert d["mission"] == {"status": "cycle", "cycle": [c2, c3, c4], "entangled_total": 3}
    c5 = put(store, "replacement")
    store.relate(c5, c3, "supersedes")
    d = dig(store)
    assert d["total"] == 5
    assert d["mission"]["status"] == "ok"
    assert [(r["id"], r["children"]) for r in d["mission"]["roots"]] == [(epic, 0)]


def test_23_epic_with_dead_parent_resurfaces_as_root(store):
    parent = put(store, "parent epic", kind="epic")
    child = put(store, "child epic", kind="epic")
    store.relate(child, parent, "grounded_in")
    assert ids(dig(store)["mission"]["roots"]) == [parent]
    closer = put(store, "closer")
    store.relate(closer, parent, "supersedes")
    roots = ids(dig(store)["mission"]["roots"])
    assert child in roots and parent not in roots


def test_24_roots_honor_prefix_children_are_store_global(store):
    nott = put(store, "nott epic", kind="epic", project="nott")
    put(store, "other epic", kind="epic", project="other")
    child = put(store, "other child", project="other")
    store.relate(child, nott, "grounded_in")
    roots = dig(store, project_prefix="nott")["mission"]["roots"]
    assert [(r["id"], r["children"]) for r in roots] == [(nott, 1)]


def test_mission_roots_newest_first_and_capped(store):
    epics = [put(store, f"epic {i}", kind="epic") for i in range(4)]
    assert ids(dig(store, headlines=2)["mission"]["roots"]) == epics[::-1][:2]
    assert "mission" not in dig(store, headlines=0)


def test_children_count_live_children_only(store):
    epic = put(store, "epic", kind="epic")
    kids = caps(store, 3, prefix="kid")
    for kid in kids:
        store.relate(kid, epic, "grounded_in")
    store.forget(kids[0])
    newer = put(store, "newer kid")
    store.relate(newer, kids[1], "supersedes")
    assert dig(store)["mission"]["roots"][0]["children"] == 1


# -- unanchored --------------------------------------------------------------------------

def test_25_unanchored_task_drops_on_anchor(store):
    epic = put(store, "epic", kind="epic")
    task = put(store, "task", kind="task")
    assert dig(store)["unanchored"] == 1
    store.relate(task, epic, "grounded_in")
    assert "unanchored" not in dig(store)


def test_26_unanchored_counts_a_node_whose_only_parent_died(store):
    parent = put(store, "parent")
    task = put(store, "task", kind="task")
    store.relate(task, parent, "grounded_in")
    assert "unanchored" not in dig(store)
    closer = put(store, "closer")
    store.relate(closer, parent, "supersedes")
    assert dig(store)["unanchored"] == 1


def test_27_ungrounded_epic_is_not_unanchored(store):
    epic = put(store, "lonely epic", kind="epic")
    d = dig(store)
    assert "unanchored" not in d and d["mission"]["roots"][0]["id"] == epic


def test_28_active_thread_row_is_a_planning_node(store):
    parent = put(store, "parent")
    row = put(store, "ACTIVE(scrub): in flight")
    assert dig(store)["unanchored"] == 1
    store.relate(row, parent, "grounded_in")
    assert "unanchored" not in dig(store)


def test_unanchored_is_fenced_and_skips_superseded(store):
    put(store, "task a", kind="task", project="a")
    old = put(store, "task b", kind="task", project="b")
    assert dig(store)["unanchored"] == 2
    assert dig(store, project_prefix="a")["unanchored"] == 1
    newer = put(store, "newer b", project="b")
    store.relate(newer, old, "supersedes")
    assert "unanchored" not in dig(store, project_prefix="b")
