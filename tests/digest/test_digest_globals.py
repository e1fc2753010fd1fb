"""The store-wide families the digest job keeps (`memframe.digest.state.kept_families`):
reused while their tables are unchanged, read again as soon as one is written, recomputed
by the job only for the families whose tables changed, equal value for value to the
computation over the tables, and never kept over rows the digest fails closed on."""

from __future__ import annotations

import datetime as dt

import networkx as nx
import polars as pl
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.digest import families
from memframe.digest.checks import check_rows
from memframe.digest.families import FAMILIES
from memframe.digest.state import family_codec, kept_families
from memframe.store import StoreView
from tests.conftest import TickingClock

NOW = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
FAMILY_TABLES = {t for tables in FAMILIES.values() for t in tables}


def _populated(path):
    store = mf.Store.create(path, clock=TickingClock())
    ids = store.ingest([{"content": f"ACTIVE(t{i % 3}): step {i}", "source": "s",
                         "anchor": "a", "project_id": "p", "kind": "epic" if i == 0 else None}
                        for i in range(12)])
    store.relate(ids[1], ids[2], "blocks")
    store.relate(ids[2], ids[3], "blocks")
    store.relate(ids[4], ids[0], "grounded_in")
    store.relate(ids[5], ids[0], "part_of")
    store.relate(ids[6], ids[3], "witnesses")
    store.relate(ids[8], ids[7], "supersedes")
    store.forget(ids[9])
    store.record_miss(["lost"], "abstain")
    store.record_lane_override("term", "fused")
    store.record_git_scan("git:/repo", "sha1", [{"capsule_id": ids[1], "kind": "mention",
                                                 "ref": "a.py", "verdict": "corroborated"}])
    store.session_start("p")
    return store, ids


@pytest.fixture
def reads(monkeypatch):
    """The canonical tables read through `StoreView.table` during a test."""
    seen: list[str] = []
    real = StoreView.table

    def counting(self, name):
        seen.append(name)
        return real(self, name)

    monkeypatch.setattr(StoreView, "table", counting)
    return seen


def test_kept_families_replace_their_tables_until_one_is_written(tmp_path, reads):
    store, ids = _populated(tmp_path / "s")
    store.memory.run_cycle()
    store.ingest({"content": "after the job", "source": "s", "anchor": "a"})
    reads.clear()
    warm = mf.digest(store, now=NOW)
    assert FAMILY_TABLES.isdisjoint(reads)  # every family was current: no table read
    assert warm.to_json() == mf.digest(store, now=NOW, verify="full").to_json()

    store.relate(ids[1], ids[11], "blocks")  # the graph family's table is written
    reads.clear()
    warm = mf.digest(store, now=NOW)
    assert {"relations", "forgets"} <= set(reads)
    assert {"recall_misses", "lane_overrides", "corroborations"}.isdisjoint(reads)
    assert warm.to_json() == mf.digest(store, now=NOW, verify="full").to_json()
    assert warm.to_dict()["dag"]["blocked_total"] == 2


def _fresh(store):
    """Four capsules no relation or forget names yet, as a session captures them."""
    return store.ingest([{"content": f"fresh {i}", "source": "s", "anchor": "a",
                          "project_id": "p"} for i in range(4)])


def _every_shape(store):
    """The digest as every reader takes it: kept sections (unfenced, N <= 32), fenced,
    a cap above the kept one; each with its ``verify="full"`` twin."""
    for kwargs in ({}, {"project_prefix": "p"}, {"headlines": 40}):
        yield (mf.digest(store, now=NOW, **kwargs).to_json(),
               mf.digest(store, now=NOW, verify="full", **kwargs).to_json())


def test_a_sessions_blocks_edges_between_fresh_capsules_leave_the_graph_kept(tmp_path, reads):
    store, ids = _populated(tmp_path / "s")
    store.memory.run_cycle()
    a, b, c, d = _fresh(store)
    store.relate(a, b, "blocks")
    store.relate(b, c, "blocks")
    store.relate(d, c, "blocks")
    store.record_recall([a, b])
    fresh = kept_families.fresh_edges(store.pinned())
    assert fresh is not None and fresh.relations == 3
    assert fresh.ready.to_list() == sorted([a, d]) and fresh.blocked.to_list() == sorted([b, c])
    reads.clear()
    warm = mf.digest(store, now=NOW)
    assert {"relations", "forgets"}.isdisjoint(reads)  # the tables are not read
    full = mf.digest(store, now=NOW, verify="full")
    assert warm.to_json() == full.to_json()
    dag = warm.to_dict()["dag"]
    assert (dag["ready_total"], dag["blocked_total"], warm.to_dict()["relations"]) == (3, 3, 9)
    # what was read: the rows above the graph's marks and a few kept ids, not the tables
    assert warm.rows_visited < full.rows_visited
    for warm_json, full_json in _every_shape(store):
        assert warm_json == full_json


@pytest.mark.parametrize("case", ["known id", "other kind", "cycle", "forgotten after",
                                  "old forget"])
def test_new_relation_rows_that_are_not_fresh_blocks_edges_read_the_tables(tmp_path, reads,
                                                                            case):
    store, ids = _populated(tmp_path / "s")
    store.memory.run_cycle()
    a, b, c, _d = _fresh(store)
    if case == "known id":  # ids[2] blocks and is blocked: a fresh node would be wrong
        store.relate(a, ids[2], "blocks")
    elif case == "other kind":
        store.relate(a, b, "grounded_in")
    elif case == "cycle":
        store.relate(a, b, "blocks")
        store.relate(b, a, "blocks")
    elif case == "forgotten after":
        store.relate(a, b, "blocks")
        store.forget(b)
    else:  # ids[9] was forgotten before the cycle: dead, not a ready node
        store.relate(ids[9], c, "blocks")
    assert kept_families.fresh_edges(store.pinned()) is None
    reads.clear()
    warm = mf.digest(store, now=NOW)
    assert "relations" in reads
    assert warm.to_json() == mf.digest(store, now=NOW, verify="full").to_json()
    for warm_json, full_json in _every_shape(store):
        assert warm_json == full_json


def test_the_job_recomputes_only_the_families_whose_tables_changed(tmp_path):
    store, _ids = _populated(tmp_path / "s")
    first = store.memory.run_cycle().projections["digest_globals"]
    view = store.pinned()
    assert all(view.partitions(family_codec.table_of(family)) for family in FAMILIES)
    assert first["rows_visited"] == sum(view.row_count(t) for t in FAMILY_TABLES)
    store.record_miss(["again"], "abstain")
    report = store.memory.run_cycle().projections["digest_globals"]
    # only the misses family is read again (its one table), and only it is rewritten
    assert report["rows_visited"] == store.row_count("recall_misses") == 2
    assert store.memory.run_cycle().generation is None  # nothing new: nothing written


def test_a_virgin_store_keeps_nothing(tmp_path):
    store = mf.Store.create(tmp_path / "s")
    store.ingest({"content": "only a capsule", "source": "s", "anchor": "a"})
    report = store.memory.run_cycle().projections["digest_globals"]
    assert report == {"rows_visited": 0, "rows_folded": 0, "rows_written": 0}
    assert not any(store.pinned().partitions(family_codec.table_of(f)) for f in FAMILIES)


def test_relations_the_digest_fails_closed_on_are_never_kept(tmp_path):
    bad = pl.DataFrame({"seq": [1], "kind": ["befriends"], "from_id": ["cap-1"],
                        "to_id": ["cap-2"]})
    assert check_rows("relations", bad) == "unknown relation kind 'befriends'"
    assert check_rows("relations", bad.with_columns(
        kind=pl.lit("blocks"), to_id=pl.lit(None))) == "relation row at seq 1 has no endpoint"
    assert check_rows("relations", bad.with_columns(kind=pl.lit("blocks"))) is None


def test_a_kept_family_is_refused_when_the_row_counts_disagree(tmp_path):
    store, _ids = _populated(tmp_path / "s")
    store.memory.run_cycle()
    view = store.pinned()
    assert kept_families.is_current(view, "graph")[0]

    class Shrunk:  # the log says relations hold fewer rows than when the job kept them
        def __getattr__(self, name):
            return getattr(view, name)

        def row_count(self, name):
            return view.row_count(name) - (name == "relations")

    assert not kept_families.is_current(Shrunk(), "graph")[0]
    assert kept_families.is_current(Shrunk(), "misses")[0]


def test_time_travel_reads_the_families_kept_then(tmp_path):
    store, ids = _populated(tmp_path / "s")
    store.memory.run_cycle()
    then = store.generation
    store.relate(ids[10], ids[11], "blocks")
    store.forget(ids[1])
    store.memory.run_cycle()
    for view in (store.at(then), store.pinned()):
        assert mf.digest(view, now=NOW).to_json() == mf.digest(
            view, now=NOW, verify="full").to_json()


relation = st.tuples(st.integers(0, 7), st.integers(0, 7),
                     st.sampled_from(["blocks", "grounded_in", "witnesses", "part_of",
                                      "supersedes", "derived_from"]))


def test_decode_of_encode_is_the_computation_for_every_graph():
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(edges=st.lists(relation, max_size=14), dead=st.sets(st.integers(0, 7), max_size=3))
    def law(edges, dead):
        rows = [(i, kind, f"cap-{a + 1}", f"cap-{b + 1}")
                for i, (a, b, kind) in enumerate(edges) if a != b]
        relations = pl.DataFrame(rows, schema={"seq": pl.Int64, "kind": pl.String,
                                               "from_id": pl.String, "to_id": pl.String},
                                 orient="row")
        forgets = pl.DataFrame({"seq": list(range(len(dead))),
                                "capsule_id": [f"cap-{d + 1}" for d in sorted(dead)]},
                               schema={"seq": pl.Int64, "capsule_id": pl.String})
        want = families.family_values("graph", {"relations": relations, "forgets": forgets})
        got = family_codec.decode("graph", family_codec.encode("graph", want))
        assert got["relations"] == want["relations"]
        assert got["dag_projection"] == want["dag_projection"]
        assert got["mission_graph"].cycle == want["mission_graph"].cycle
        assert got["mission_graph"].grounded_from.to_list() == \
            want["mission_graph"].grounded_from.to_list()
        assert got["mission_graph"].children.equals(want["mission_graph"].children)
        # what the open_efforts board reads of the relations (members from the kept
        # edges, as the job writes them)
        want_e = want["effort_graph"]
        assert got["witnessed"].to_list() == want_e.witnessed.to_list()
        edges = family_codec.member_rows(want)
        epics = want_e.member_stats.get_column("epic")
        assert edges.equals(want_e.members(epics).sort("epic", "member"))
        assert edges.height == edges.unique().height

    law()


def test_the_board_reads_the_members_of_the_epics_it_shows_only(tmp_path, monkeypatch):
    monkeypatch.setattr(family_codec, "MEMBERS_GROUP_ROWS", 8)
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    epics = store.ingest([{"content": f"epic {i}", "source": "s", "anchor": "a",
                           "kind": "epic"} for i in range(30)])
    members = store.ingest([{"content": f"member {i}", "source": "s", "anchor": "a"}
                            for i in range(300)])
    store.append("relations", pl.DataFrame({
        "kind": ["part_of"] * 300, "from_id": members,
        "to_id": [epics[i % 30] for i in range(300)]}))
    store.memory.run_cycle()
    view = store.pinned()
    index = kept_families.read_values(view, "graph")[0]["_reads"]
    shown = pl.Series([epics[-1], epics[-2]])
    edges = index(shown)
    assert sorted(set(edges.get_column("epic").to_list())) == sorted(shown.to_list())
    assert edges.height == 20
    assert index.rows_visited < view.row_count(family_codec.MEMBERS_TABLE) // 4
    for n in (0, 2, 40):
        assert mf.digest(view, now=NOW, headlines=n).to_json() == mf.digest(
            view, now=NOW, headlines=n, verify="full").to_json()


def test_values_kept_by_other_code_are_not_read(tmp_path, monkeypatch):
    from memframe.store import derived

    store, _ids = _populated(tmp_path / "s")
    store.memory.run_cycle()
    monkeypatch.setattr(derived, "writer", lambda: "a later version")
    assert all(not kept_families.is_current(store.pinned(), f)[0] for f in FAMILIES)
    assert mf.digest(store, now=NOW).to_json() == mf.digest(
        store, now=NOW, verify="full").to_json()
    report = store.memory.run_cycle().projections["digest_globals"]
    assert report["rows_written"] > 0  # the job keeps them again, in its own layout
    assert all(kept_families.is_current(store.pinned(), f)[0] for f in FAMILIES)


def test_the_state_folds_the_member_counts_the_board_reads(tmp_path):
    from memframe.digest.efforts import effort_graph
    from memframe.digest.state import warm_reader

    store, ids = _populated(tmp_path / "s")
    store.relate(ids[7], ids[0], "part_of")
    store.relate(ids[11], ids[0], "part_of")
    store.relate(ids[2], ids[9], "part_of")  # into a forgotten capsule: counted all the same
    state = warm_reader.state_door(store.pinned()).rows
    want = effort_graph(store.table("relations").collect()).member_stats
    got = (state.filter(pl.col("members") > 0)
           .select(pl.format("cap-{}", "num").alias("epic"),
                   pl.col("members").alias("member_total"),
                   pl.format("cap-{}", "newest_member").alias("newest_member"),
                   pl.col("newest_member").alias("newest_member_number")).sort("epic"))
    assert got.equals(want)
    assert got.get_column("member_total").to_list() == [3, 1]


def test_a_forget_away_from_the_graph_leaves_it_current(tmp_path, reads):
    store, ids = _populated(tmp_path / "s")
    store.memory.run_cycle()
    store.forget(ids[10])  # no blocks, witnesses or grounded_in edge touches it
    reads.clear()
    warm = mf.digest(store, now=NOW)
    assert "relations" not in reads
    assert warm.to_json() == mf.digest(store, now=NOW, verify="full").to_json()
    report = store.memory.run_cycle().projections["digest_globals"]
    assert report["rows_written"] == 0  # its marks move; nothing is recomputed
    # the new forget row, and the endpoint row groups that could hold its id
    assert 1 < report["rows_visited"] <= 1 + store.pinned().row_count(family_codec.ENDPOINTS_TABLE)
    assert kept_families.is_current(store.pinned(), "graph")[0]

    store.forget(ids[2])  # blocked by ids[1], blocking ids[3]: the graph changes
    reads.clear()
    warm = mf.digest(store, now=NOW)
    assert "relations" in reads
    assert warm.to_json() == mf.digest(store, now=NOW, verify="full").to_json()
    assert store.memory.run_cycle().projections["digest_globals"]["rows_written"] > 0


WARM_IMPORTS = """
import sys, datetime as dt, memframe as mf
store = mf.Store.open(sys.argv[1])
mf.digest(store, now=dt.datetime(2026, 9, 1, tzinfo=dt.UTC))
print(sorted(m for m in ("pandas", "networkx") if m in sys.modules))
"""


def test_a_warm_digest_loads_no_graph_or_dataframe_library_of_its_own(tmp_path):
    # a digest answered from kept values needs neither the graph library nor the one a
    # timestamp statistic converts through; loading them cost a warm digest ~0.4 s
    import subprocess
    import sys

    store, _ids = _populated(tmp_path / "s")
    rows = [{"content": f"old {i}", "source": "s", "anchor": "a",
             "created_at": NOW - dt.timedelta(days=300 + i),
             "valid_from": NOW - dt.timedelta(days=300 + i)} for i in range(3)]
    old = store.ingest(rows)
    store.relate(old[1], old[0], "supersedes")  # an archive candidate: its instants are read
    store.memory.run_cycle()
    store.ingest({"content": "after the job", "source": "s", "anchor": "a"})
    out = subprocess.run([sys.executable, "-c", WARM_IMPORTS, str(store.path)],
                         capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
    assert store.pinned().row_count("projections/digest_archive") > 0


def test_a_family_that_cannot_be_read_is_not_kept_and_the_report_says_why(tmp_path):
    store, _ids = _populated(tmp_path / "s")
    for path in store.pinned().files("recall_misses"):
        path.write_bytes(b"this is not parquet at all")  # a damaged fail-open table
    report = store.memory.run_cycle()
    assert report.generation is not None  # the rest of the cycle landed
    assert report.projections["digest_capsules"]["rows_written"] > 0
    (note,) = [n for n in report.notes if "misses" in n]
    assert "not kept: a table cannot be read" in note
    assert not kept_families.is_current(store.pinned(), "misses")[0]
    assert kept_families.is_current(store.pinned(), "graph")[0]
    body = mf.digest(store, now=NOW).to_dict()
    assert body == mf.digest(store, now=NOW, verify="full").to_dict()


def test_a_bug_in_a_family_fails_the_cycle_instead_of_a_silent_slow_path(tmp_path,
                                                                          monkeypatch):
    store, _ids = _populated(tmp_path / "s")
    generation = store.generation

    def broken(relations, tombstoned):
        raise RuntimeError("graph cannot be built")

    monkeypatch.setattr(families, "graph_values", broken)
    with pytest.raises(RuntimeError, match="graph cannot be built"):
        store.memory.run_cycle()
    assert store.generation == generation  # nothing half committed


_old_edge = st.tuples(st.integers(0, 7), st.integers(0, 7),
                      st.sampled_from(["blocks", "witnesses", "grounded_in", "part_of",
                                       "supersedes"]))
# mostly between the four new capsules (8-11), mostly blocks: what a session writes
_new_edge = st.tuples(st.integers(7, 11), st.integers(7, 11),
                      st.sampled_from(["blocks"] * 5 + ["witnesses"]))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=st.lists(_old_edge, min_size=1, max_size=6), forgotten=st.lists(st.integers(0, 7), max_size=2),
       new=st.lists(_new_edge, min_size=1, max_size=4),
       forget_new=st.lists(st.integers(0, 11), max_size=1))
def test_fresh_edges_are_taken_exactly_when_the_model_says_and_answer_the_full_bytes(
        tmp_path_factory, old, forgotten, new, forget_new):
    store = mf.Store.create(tmp_path_factory.mktemp("s") / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"c {i}", "source": "s", "anchor": "a",
                         "project_id": "p"} for i in range(8)])
    named: set[str] = set()
    for a, b, kind in old:
        if a != b:
            store.relate(ids[a], ids[b], kind)
            named |= {ids[a], ids[b]}
    for i in forgotten:
        store.forget(ids[i])
        named.add(ids[i])
    store.memory.run_cycle()
    ids += store.ingest([{"content": f"n {i}", "source": "s", "anchor": "a",
                          "project_id": "p"} for i in range(4)])
    edges: list[tuple[str, str, str]] = []
    for a, b, kind in new:
        if a != b:
            store.relate(ids[a], ids[b], kind)
            edges.append((ids[a], ids[b], kind))
    dead_after = set()
    for i in forget_new:
        before = store.row_count("forgets")
        store.forget(ids[i])  # (a capsule forgotten before is not forgotten again)
        if store.row_count("forgets") > before:
            dead_after.add(ids[i])
    # the model: the cycle kept a graph (it had rows); only blocks edges since, between
    # ids no old row named, none forgotten since, and no cycle among them
    ends = {x for a, b, _k in edges for x in (a, b)}
    graph = nx.DiGraph([(a, b) for a, b, _k in edges])
    expected = (bool(named) and bool(edges) and all(k == "blocks" for _a, _b, k in edges)
                and not ends & named and not ends & dead_after
                and nx.is_directed_acyclic_graph(graph))
    # a new forget of an old blocks/witnesses/grounded_in end changes the graph too
    endpoints = {x for a, b, k in old if a != b and k in ("blocks", "witnesses", "grounded_in")
                 for x in (ids[a], ids[b])}
    expected = expected and not dead_after & endpoints
    event(f"fresh: {expected}")
    assert (kept_families.fresh_edges(store.pinned()) is not None) == expected
    for warm_json, full_json in _every_shape(store):
        assert warm_json == full_json
