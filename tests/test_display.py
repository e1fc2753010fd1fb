"""Pictures and HTML helpers: assertions on chart specs and frames, never on pixels."""

from __future__ import annotations

import datetime as dt
import sys

import polars as pl
import pytest

import memframe as mf
from memframe import display

UTC = dt.UTC


@pytest.fixture
def ticking(tmp_path):
    days = iter(dt.datetime(2026, 7, 1, tzinfo=UTC) + dt.timedelta(hours=7 * i)
                for i in range(10_000))
    return mf.Store.create(tmp_path / "s", clock=lambda: next(days))


def _caps(store, n, **extra):
    return store.ingest([{"content": f"capsule {i}\nbody", "source": "note", "anchor": f"a{i}",
                          **extra} for i in range(n)])


def _statuses(nodes: pl.DataFrame) -> dict[str, str]:
    return dict(nodes.select("id", "status").iter_rows())


# ---- the blocks-DAG ------------------------------------------------------------------------

def test_dag_frames_follow_the_digest(ticking):
    s = ticking
    c = _caps(s, 8)
    s.relate(c[0], c[1], "blocks")   # 1 blocks 2
    s.relate(c[1], c[2], "blocks")   # 2 blocks 3
    s.relate(c[3], c[2], "blocks")   # 4 blocks 3
    s.relate(c[4], c[3], "witnesses")  # 4 is done
    s.relate(c[5], c[6], "blocks")
    s.forget(c[5])                   # 6 is dead: 7 is ready
    s.relate(c[7], c[0], "derived_from")  # no dag effect
    nodes, edges = display.dag_frames(s)
    assert _statuses(nodes) == {"cap-1": "ready", "cap-2": "blocked", "cap-3": "blocked",
                                "cap-4": "done", "cap-7": "ready"}
    dag = mf.digest(s, headlines=100).to_dict()["dag"]
    for status in ("ready", "blocked", "done"):
        assert sorted(k for k, v in _statuses(nodes).items() if v == status) == dag[status]
    # a blocker sits left of what it blocks
    layer = dict(nodes.select("id", "layer").iter_rows())
    for a, b in edges.select("from_id", "to_id").iter_rows():
        assert layer[a] < layer[b]
    assert edges.select("from_id", "to_id", "live").rows() == [
        ("cap-1", "cap-2", True), ("cap-2", "cap-3", True), ("cap-4", "cap-3", False),
    ]
    # edge coordinates are the node coordinates
    pos = {r[0]: (r[1], r[2]) for r in nodes.select("id", "layer", "position").iter_rows()}
    for a, b, x, y, x2, y2 in edges.select("from_id", "to_id", "x", "y", "x2", "y2").iter_rows():
        assert (x, y, x2, y2) == (*pos[a], *pos[b])
    assert nodes.filter(pl.col("id") == "cap-1").get_column("headline").item() == "capsule 0…"


def test_dag_cycle_is_coloured(ticking):
    s = ticking
    c = _caps(s, 5)
    s.relate(c[0], c[1], "blocks")
    s.relate(c[1], c[2], "blocks")
    s.relate(c[2], c[0], "blocks")
    s.relate(c[2], c[3], "blocks")  # downstream of the cycle: entangled
    s.relate(c[4], c[0], "blocks")  # upstream: ready
    nodes, _ = display.dag_frames(s)
    dag = mf.digest(s).to_dict()["dag"]
    assert dag["status"] == "cycle"
    statuses = _statuses(nodes)
    assert sorted(k for k, v in statuses.items() if v == "cycle") == ["cap-1", "cap-2", "cap-3",
                                                                       "cap-4"]
    assert len([v for v in statuses.values() if v == "cycle"]) == dag["entangled_total"]
    assert set(dag["cycle"]) <= {k for k, v in statuses.items() if v == "cycle"}
    assert statuses["cap-5"] == "ready"
    layer = dict(nodes.select("id", "layer").iter_rows())
    assert layer["cap-1"] == layer["cap-2"] == layer["cap-3"]  # one component, one layer
    # witnessing a member dissolves the cycle, as in the digest
    s.relate(c[4], c[1], "witnesses")
    statuses = _statuses(display.dag_frames(s)[0])
    assert "cycle" not in statuses.values() and statuses["cap-2"] == "done"


def test_dag_chart_spec(ticking):
    s = ticking
    c = _caps(s, 3)
    s.relate(c[0], c[1], "blocks")
    s.relate(c[2], c[0], "witnesses")
    spec = display.dag_chart(s).to_dict()
    # a done blocker stops gating: cap-2 is ready
    assert spec["title"] == "blocks-DAG: 1 ready, 0 blocked, 1 done, 0 cycle"
    edges, nodes, labels = spec["layer"]
    assert edges["mark"]["type"] == "rule" and nodes["mark"]["type"] == "circle"
    assert labels["mark"]["type"] == "text" and labels["encoding"]["text"]["field"] == "id"
    scale = nodes["encoding"]["color"]["scale"]
    assert scale["domain"] == ["ready", "blocked", "done", "cycle"]
    assert scale["range"] == [display.DAG_COLORS[k] for k in scale["domain"]]
    assert [(v["id"], v["status"]) for v in nodes["data"]["values"]] == [
        ("cap-1", "done"), ("cap-2", "ready")]
    assert [(v["from_id"], v["to_id"]) for v in edges["data"]["values"]] == [("cap-1", "cap-2")]


def test_sample_store_dag_matches_its_digest():
    from memframe.synth import sample_store_path

    store = mf.Store.open(sample_store_path())
    dag = mf.digest(store, headlines=100_000).to_dict()["dag"]
    statuses = _statuses(display.dag_frames(store, max_nodes=100_000)[0])
    if dag["status"] == "ok":
        for status in ("ready", "blocked", "done"):
            assert sorted(k for k, v in statuses.items() if v == status) == dag[status]
    else:
        assert len([v for v in statuses.values() if v == "cycle"]) == dag["entangled_total"]


def test_max_nodes_caps_the_picture(ticking):
    s = ticking
    c = _caps(s, 6)
    for a, b in zip(c, c[1:], strict=False):
        s.relate(a, b, "blocks")
    nodes, edges = display.dag_frames(s, max_nodes=3)
    assert nodes.get_column("id").to_list() == ["cap-1", "cap-2", "cap-3"]
    assert edges.height == 2


# ---- the mission tree ----------------------------------------------------------------------

def test_mission_frames_follow_the_digest(ticking):
    s = ticking
    epic, old_epic, t1, t2, t3, fact = s.ingest([
        {"content": "ship v1", "source": "s", "anchor": "e", "kind": "epic"},
        {"content": "old plan", "source": "s", "anchor": "o", "kind": "epic"},
        {"content": "write docs", "source": "s", "anchor": "t1", "kind": "task"},
        {"content": "cut release", "source": "s", "anchor": "t2", "kind": "task"},
        {"content": "sub step", "source": "s", "anchor": "t3", "kind": "task"},
        {"content": "a fact", "source": "s", "anchor": "f", "kind": "fact"},
    ])
    s.relate(t1, epic, "grounded_in")
    s.relate(t2, epic, "grounded_in")
    s.relate(t3, t1, "grounded_in")
    s.relate(fact, old_epic, "grounded_in")
    s.relate(epic, old_epic, "grounded_in")
    s.forget(old_epic)  # dead parent: the epic is a root again, the fact falls out
    nodes, edges = display.mission_frames(s)
    assert _statuses(nodes) == {"cap-1": "root", "cap-3": "child", "cap-4": "child",
                                "cap-5": "child"}
    mission = mf.digest(s).to_dict()["mission"]
    roots = {r["id"] for r in mission["roots"]}
    assert roots == {k for k, v in _statuses(nodes).items() if v == "root"}
    layer = dict(nodes.select("id", "layer").iter_rows())
    assert layer == {"cap-1": 0, "cap-3": 1, "cap-4": 1, "cap-5": 2}
    assert edges.select("from_id", "to_id").rows() == [
        ("cap-3", "cap-1"), ("cap-4", "cap-1"), ("cap-5", "cap-3")]


def test_mission_cycle_and_chart(ticking):
    s = ticking
    a, b, c = s.ingest([{"content": t, "source": "s", "anchor": t, "kind": "task"}
                        for t in "abc"])
    s.relate(a, b, "grounded_in")
    s.relate(b, a, "grounded_in")
    s.relate(c, a, "grounded_in")
    nodes, _ = display.mission_frames(s)
    mission = mf.digest(s).to_dict()["mission"]
    assert mission["status"] == "cycle"
    statuses = _statuses(nodes)
    assert set(mission["cycle"]) <= {k for k, v in statuses.items() if v == "cycle"}
    spec = display.mission_chart(s).to_dict()
    assert spec["layer"][1]["encoding"]["color"]["scale"]["domain"] == \
        ["root", "child", "parent", "cycle"]
    assert spec["title"].startswith("mission tree: ")


# ---- miss pictures -------------------------------------------------------------------------

@pytest.fixture
def audited(ticking):
    s = ticking
    s.ingest({"content": "retrieval and embedding", "source": "n", "anchor": "a"})
    for i in range(9):
        s.record_miss(["retreival", f"rare{i % 3}"], "abstain" if i % 2 else "missing_evidence")
    s.record_lane_override("vector", "fused")
    s.record_lane_override("term", "fused")
    return mf.audit.recall_misses(s)


def test_miss_trend_chart_spec(audited):
    spec = display.miss_trend_chart(audited).to_dict()
    assert spec["mark"]["type"] == "bar"
    enc = spec["encoding"]
    assert (enc["x"]["field"], enc["x"]["type"]) == ("day", "temporal")
    assert (enc["y"]["field"], enc["y"]["stack"]) == ("misses", "zero")
    assert enc["color"]["scale"]["domain"] == ["missing_evidence", "abstain"]
    values = spec["data"]["values"]
    assert len(values) == 2 * audited.daily.height
    assert sum(v["misses"] for v in values) == audited.totals["misses"] == 18
    by_outcome = {o: sum(v["misses"] for v in values if v["outcome"] == o)
                  for o in ("abstain", "missing_evidence")}
    assert by_outcome == {"abstain": 8, "missing_evidence": 10}


def test_top_terms_chart_spec(audited):
    spec = display.top_terms_chart(audited, n=2).to_dict()
    values = spec["data"]["values"]
    top = audited.terms.head(2)
    # one row per (term, outcome): bars stack by outcome, as in the audit page
    assert [v["term"] for v in values[::2]] == top.get_column("term").to_list()
    assert {v["outcome"] for v in values} == {"abstain", "missing_evidence"}
    for row in top.iter_rows(named=True):
        mine = {v["outcome"]: v["count"] for v in values if v["term"] == row["term"]}
        assert mine == {"abstain": row["abstain"], "missing_evidence": row["missing_evidence"]}
    assert spec["encoding"]["color"]["scale"]["range"] == [
        display.OUTCOME_COLORS[o] for o in spec["encoding"]["color"]["scale"]["domain"]]
    # the y order is the ranking; recurring terms are marked in their label
    assert spec["encoding"]["y"]["sort"] == [v["label"] for v in values[::2]]
    first = values[0]
    assert first == {**first, "term": "retreival", "label": "retreival ↻", "misses": 9,
                     "seen": "recurring", "alias": "retrieval"}
    assert spec["title"]["text"] == "Top 2 missed terms"


def test_count_axes_have_whole_ticks_and_recalls_a_log_scale(audited, ticking):
    for chart in (display.miss_trend_chart(audited), display.lane_override_chart(audited)):
        axis = chart.to_dict()["encoding"]["y"]["axis"]
        assert axis == {**axis, "tickMinStep": 1, "format": "d"}
    ticking.record_recall(_caps(ticking, 2))
    spec = display.recall_distribution_chart(ticking).to_dict()
    assert spec["encoding"]["y"]["scale"]["type"] == "log"


def test_mission_chart_folds_children_past_the_cap(ticking):
    s = ticking
    epic, *tasks = s.ingest([{"content": f"t{i}", "source": "s", "anchor": f"t{i}",
                              "kind": "epic" if i == 0 else "task"} for i in range(8)])
    sub = s.ingest({"content": "sub", "source": "s", "anchor": "sub", "kind": "task"})[0]
    for t in tasks:
        s.relate(t, epic, "grounded_in")
    s.relate(sub, tasks[-1], "grounded_in")  # under a folded child: folded with it
    full, _ = display.mission_frames(s)
    assert full.height == 9
    nodes, edges = display.mission_frames(s, max_children=3)
    statuses = _statuses(nodes)
    assert statuses == {epic: "root", **{t: "child" for t in sorted(tasks)[:3]},
                        f"{epic} +4": "collapsed"}
    assert (f"{epic} +4", epic) in edges.select("from_id", "to_id").rows()
    note = nodes.filter(pl.col("status") == "collapsed").get_column("headline").item()
    assert note.startswith("4 more children of cap-1: ")
    # the tree layout: the parent sits at the mean of its children
    pos = dict(nodes.select("id", "position").iter_rows())
    kids = [n for n, st in statuses.items() if st != "root"]
    assert pos[epic] == sum(pos[k] for k in kids) / len(kids)
    spec = display.mission_chart(s, max_children=3).to_dict()
    assert "collapsed" in spec["layer"][1]["encoding"]["color"]["scale"]["domain"]


def test_lane_override_chart_spec(audited):
    spec = display.lane_override_chart(audited).to_dict()
    assert spec["mark"]["type"] == "line"
    pairs = {v["pair"] for v in spec["data"]["values"]}
    assert pairs == {"term->fused", "vector->fused"}
    assert sum(v["overrides"] for v in spec["data"]["values"]) == 2


def test_recall_distribution_follows_most_recalled(ticking):
    s = ticking
    c = _caps(s, 6)
    s.record_recall([c[2], c[2], c[2], c[4], c[4], c[0]])
    s.record_recall([c[0]])
    s.record_recall([c[5]])
    s.forget(c[5])  # tombstoned capsules never count
    spec = display.recall_distribution_chart(s).to_dict()
    values = spec["data"]["values"]
    most = mf.digest(s).to_dict()["most_recalled"]
    assert [v["id"] for v in values] == [r["id"] for r in most]
    assert [v["rank"] for v in values] == [1, 2, 3]
    assert [v["recall_count"] for v in values] == [3, 2, 2]
    assert spec["title"]["subtitle"] == "top 10% of recalled capsules hold 43% of recalls"
    assert spec["encoding"]["x"]["field"] == "rank"
    assert display.recall_distribution_chart(s, n=1).to_dict()["data"]["values"][0]["id"] == \
        "cap-3"


def test_missing_plot_extra_is_a_teaching_error(audited, monkeypatch):
    monkeypatch.setitem(sys.modules, "altair", None)
    with pytest.raises(mf.MemframeError, match=r'pip install "memframe-store\[plot\]"'):
        display.miss_trend_chart(audited)
    # the base install still renders the audit as HTML with inline SVG
    assert "<svg" in audited.to_html()


# ---- HTML helpers --------------------------------------------------------------------------

def test_html_table_escapes_and_limits():
    frame = pl.DataFrame({"term": ["<b>x</b>", "a\x1bb", "ok"], "n": [1, 2, 3]})
    html = display.html_table(frame, caption="<i>", limit=2)
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "a\\u001bb" in html and "\x1b" not in html
    assert "<caption>&lt;i&gt;</caption>" in html
    assert "1 more rows not shown" in html and "ok" not in html


def test_svg_bars_geometry():
    svg = display.svg_bars(["a", "b"], [("x", [2, 0], "#111"), ("y", [2, 1], "#222")],
                           title="t", horizontal=True, width=400)
    assert svg.count("<rect") == 3 + 2  # three bars plus two legend swatches
    # the longest stack (4) fills the plot width (400 - 180 - 50 = 170), shares proportional
    assert svg.count('width="85"') == 2 and svg.count('width="42.5"') == 1


def test_reprs_are_short_and_notebook_tables_name_every_state(tmp_path, clock):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest([{"content": f"c{i}", "source": "s", "anchor": "a",
                   "conversation_id": f"conv-{i % 3}"} for i in range(9)])
    report = store.memory.run_cycle()
    assert repr(report).startswith("<memframe CycleReport: folded 9 rows") and len(
        repr(report)) < 200
    html = report._repr_html_()
    for state in report.projections:
        assert f"<td>{state}</td>" in html or f">{state}<" in html
    page = store.memory.sessions(limit=2)
    assert repr(page).startswith("<memframe Page: 2 of 3 rows, ") and len(repr(page)) < 100
    history = store.history()
    assert history.columns == ["generation", "operation", "verbs", "committed_at",
                               "seq_first", "seq_last"]
    assert history.schema["committed_at"] == pl.Datetime("ns", "UTC")
    assert history.get_column("generation").to_list() == [1, 2]


def test_a_long_daily_chart_turns_weekly_with_a_scaled_axis_and_alt_text(tmp_path):
    import datetime as dt
    import re

    now = {"t": dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC)}
    store = mf.Store.create(tmp_path / "s", clock=lambda: now["t"])
    for day, n in ((0, 3), (1, 7), (200, 2)):
        now["t"] = dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC) + dt.timedelta(days=day)
        store.record_miss([f"term{i}" for i in range(n)], "abstain")
    audit = mf.audit.recall_misses(store)
    assert audit.daily.height == 201  # quiet days included
    html = audit.to_html()
    (trend,) = [s for s in re.findall(r"<svg.*?</svg>", html) if "per week" in s]
    widths = [float(w) for w in re.findall(r'<rect [^>]*width="([\d.]+)"[^>]*><title>week',
                                           trend)]
    assert len(widths) == 2 and min(widths) > 10  # a bar per week, not 201 hairlines
    # the axis: labelled ticks up to the first one past the highest week (10 misses)
    labels = re.findall(r'text-anchor="end" class="val"[^>]*>([\d,]+)</text>', trend)
    assert labels == ["0", "2", "4", "6", "8", "10"]
    alt = re.search(r'aria-label="([^"]*)"', trend).group(1)
    assert "29 bars from week of 2026-01-05 to week of 2026-07-20" in alt
    assert "12 in all" in alt and "the highest 10 (week of 2026-01-05)" in alt
