"""dag and mission against an independent plain-Python rendering of reference 4.10/4.11,
on random graphs with cycles, witnesses, supersedes and tombstones."""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
from collections import defaultdict

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memframe.digest import digest_tables
from memframe.schema import TIMESTAMP, table_schema

T = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
KINDS = ["blocks", "blocks", "blocks", "witnesses", "supersedes", "grounded_in", "grounded_in",
         "part_of"]


# -- the reference, written out plainly ----------------------------------------------------

def kahn_leftover(active, preds):
    indeg = {x: len([p for p in preds[x] if p in active]) for x in active}
    succ = defaultdict(set)
    for x in active:
        for p in preds[x]:
            if p in active:
                succ[p].add(x)
    heap = [x for x in active if indeg[x] == 0]
    heapq.heapify(heap)
    while heap:
        x = heapq.heappop(heap)
        for t in succ[x]:
            indeg[t] -= 1
            if indeg[t] == 0:
                heapq.heappush(heap, t)
    return {x for x in active if indeg[x] > 0}


def find_cycle(leftover, preds):
    current = min(leftover)
    walk = []
    while current not in walk:
        walk.append(current)
        current = min(p for p in preds[current] if p in leftover)
    loop = walk[walk.index(current):][::-1]
    i = loop.index(min(loop))
    return loop[i:] + loop[:i]


def ref_dag(edges, tombstoned, n):
    blocks = [(f, t) for k, f, t in edges if k == "blocks"]
    universe = {f for f, _ in blocks} | {t for _, t in blocks}
    dead = set(tombstoned) | {t for k, _, t in edges if k == "supersedes"}
    done = {t for k, _, t in edges if k == "witnesses" and t in universe and t not in dead}
    blockers = {x: set() for x in universe}
    for f, t in blocks:
        if f not in dead and f not in done:
            blockers[t].add(f)
    active = universe - dead - done
    leftover = kahn_leftover(active, blockers)
    if leftover:
        return {"status": "cycle", "cycle": find_cycle(leftover, blockers),
                "entangled_total": len(leftover)}
    ready = sorted(x for x in active if not blockers[x])
    blocked = sorted(x for x in active if blockers[x])
    done_list = sorted(done)
    return {"status": "ok", "ready": ready[:n], "ready_total": len(ready),
            "blocked": blocked[:n], "blocked_total": len(blocked),
            "done": done_list[:n], "done_total": len(done_list)}


def ref_mission(edges, tombstoned, nodes, epics, n):
    superseded = {t for k, _, t in edges if k == "supersedes"}
    dead = set(tombstoned) | superseded
    g = {(f, t) for k, f, t in edges if k == "grounded_in"}
    grounded_from = {f for f, t in g if t not in dead}
    live = [(f, t) for f, t in g if f not in dead and t not in dead]
    preds = defaultdict(set)
    members = set()
    for f, t in live:
        preds[t].add(f)
        members |= {f, t}
    leftover = kahn_leftover(members, preds)
    if leftover:
        return {"status": "cycle", "cycle": find_cycle(leftover, preds),
                "entangled_total": len(leftover)}
    roots = []
    for cid in reversed(nodes):  # newest first; tombstoned capsules are not in `all`
        if len(roots) == n:
            break
        if cid in tombstoned or cid not in epics:
            continue
        if cid in superseded or cid in grounded_from:
            continue
        children = len({f for f, t in g if t == cid and f not in dead})
        roots.append((cid, children))
    return {"status": "ok", "roots": roots} if roots else None


# -- hand-made canonical tables ------------------------------------------------------------

def frame(table, rows):
    schema = table_schema(table)
    if not rows:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(rows, schema=schema, orient="row")


def tables_for(count, edges, tombstoned, epics):
    nodes = [f"cap-{i}" for i in range(1, count + 1)]
    capsules = frame("capsules", [
        (i, cid, T, "p", f"c{i}", 2, "note", "a", hashlib.sha256(cid.encode()).hexdigest(),
         0.6, T, None, "observed-fact", False, None, None)
        for i, cid in enumerate(nodes, start=1)])
    seq = count
    rel_rows, forget_rows, class_rows = [], [], []
    for kind, f, t in edges:
        seq += 1
        rel_rows.append((seq, T, kind, f, t, "manual"))
    for cid in sorted(tombstoned):
        seq += 1
        forget_rows.append((seq, T, cid, "tombstone", None))
    for cid in sorted(epics):
        seq += 1
        class_rows.append((seq, T, cid, "epic", "project"))
    return nodes, {
        "capsules": capsules,
        "relations": frame("relations", rel_rows),
        "forgets": frame("forgets", forget_rows),
        "classifications": frame("classifications", class_rows),
    }


@st.composite
def graphs(draw):
    count = draw(st.integers(1, 13))
    node = st.integers(1, count).map(lambda i: f"cap-{i}")
    edges = draw(st.lists(st.tuples(st.sampled_from(KINDS), node, node), max_size=40))
    edges = list(dict.fromkeys(edges))  # (kind, from, to) is unique in a store
    tombstoned = draw(st.sets(node, max_size=3))
    epics = draw(st.sets(node, max_size=5))
    n = draw(st.integers(0, 4))
    return count, edges, tombstoned, epics, n


TWO_CYCLES = [("blocks", "cap-3", "cap-4"), ("blocks", "cap-4", "cap-3"),
              ("blocks", "cap-1", "cap-12"), ("blocks", "cap-12", "cap-1"),
              ("grounded_in", "cap-5", "cap-6"), ("grounded_in", "cap-6", "cap-5"),
              ("grounded_in", "cap-2", "cap-9"), ("grounded_in", "cap-9", "cap-2")]


@settings(max_examples=200, deadline=None)
@example((13, TWO_CYCLES, set(), set(), 2))
@example((13, TWO_CYCLES + [("witnesses", "cap-7", "cap-1")], {"cap-2"}, {"cap-11"}, 2))
@given(graphs())
def test_dag_and_mission_match_the_reference(case):
    count, edges, tombstoned, epics, n = case
    nodes, tables = tables_for(count, edges, tombstoned, epics)
    body = digest_tables(tables, now=T, headlines=n).to_dict()
    assert body["dag"] == ref_dag(edges, tombstoned, n)
    expected = ref_mission(edges, tombstoned, nodes, epics, n)
    got = body.get("mission")
    if expected is None:
        assert got is None
    elif expected["status"] == "cycle":
        assert got == expected
    else:
        assert got["status"] == "ok"
        assert [(r["id"], r["children"]) for r in got["roots"]] == expected["roots"]
        assert all(r["kind"] == "epic" for r in got["roots"])


def test_reference_helpers_agree_on_a_known_case():
    edges = [("blocks", "cap-1", "cap-2"), ("blocks", "cap-2", "cap-1"),
             ("blocks", "cap-2", "cap-3")]
    assert ref_dag(edges, set(), 10) == {"status": "cycle", "cycle": ["cap-1", "cap-2"],
                                         "entangled_total": 3}
    assert TIMESTAMP == pl.Datetime("ns", "UTC")
