"""Pictures and HTML helpers: assertions on chart specs and frames, never on pixels."""

from __future__ import annotations

import datetime as dt
import html
import re
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


def _circles(svg: str) -> list[tuple[str, str]]:
    """(fill, tooltip) of every node of a graph picture."""
    return re.findall(r'<circle [^>]*fill="([^"]+)"><title>([^<]*)</title>', svg)


def test_dag_chart_draws_the_frames(ticking):
    s = ticking
    c = _caps(s, 3)
    s.relate(c[0], c[1], "blocks")
    s.relate(c[2], c[0], "witnesses")
    chart = display.dag_chart(s)
    # a done blocker stops gating: cap-2 is ready
    assert chart.title == "blocks-DAG: 1 ready, 0 blocked, 1 done, 0 cycle"
    assert chart.alt == chart.title + "; 1 edges (0 gating), 2 layers"
    assert _circles(chart.svg) == [
        (display.DAG_COLORS["done"], "cap-1 · done: capsule 0…"),
        (display.DAG_COLORS["ready"], "cap-2 · ready: capsule 1…")]
    # the edge no longer gates: dashed
    (edge,) = re.findall(r"<line [^>]*stroke-width=\"1.2\"[^>]*/>", chart.svg)
    assert 'stroke-dasharray="4 3"' in edge
    legend = re.findall(r'<rect x="[\d.]+" y="\d+" width="10" height="10" fill="([^"]+)"/>'
                        r'<text [^>]*>([^<]+)</text>', chart.svg)
    assert legend == [(display.DAG_COLORS[k], k) for k in ("ready", "blocked", "done", "cycle")]


def test_graph_pictures_escape_stored_text(ticking):
    s = ticking
    a, b = s.ingest([{"content": "<script>alert(1)</script>\x1b[31m", "source": "s",
                      "anchor": "a", "kind": "epic"},
                     {"content": "\"><img src=x onerror=alert(1)>", "source": "s", "anchor": "b",
                      "kind": "task"}])
    s.relate(b, a, "grounded_in")
    s.relate(a, b, "blocks")
    for chart in (display.mission_chart(s), display.dag_chart(s)):
        assert "<script" not in chart.svg and "<img" not in chart.svg and "\x1b" not in chart.svg
        assert "&lt;script&gt;alert(1)&lt;/script&gt;\\u001b" in chart.svg


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
    chart = display.mission_chart(s)
    # the child of a cycle stays in the picture when children are capped (it once fell out)
    assert chart.title == "mission tree: 0 root, 1 child, 0 parent, 2 cycle"
    assert sorted(fill for fill, _ in _circles(chart.svg)) == sorted(
        [display.MISSION_COLORS["cycle"]] * 2 + [display.MISSION_COLORS["child"]])


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


def _bars(svg: str) -> list[tuple[str, str, int]]:
    """(category, series, value) of every bar of a bar chart."""
    return [(html.unescape(c), html.unescape(n), int(v.replace(",", ""))) for c, n, v in
            re.findall(r"<rect [^>]*><title>([^<]*): (\S+) ([\d,]+)</title></rect>", svg)]


def _axis(svg: str, anchor: str = "end") -> list[str]:
    """The count axis' tick labels."""
    return re.findall(rf'text-anchor="{anchor}" class="mfc-val"[^>]*>([\d,]+)</text>', svg)


def test_miss_trend_chart_stacks_the_outcomes_per_day(audited):
    chart = display.miss_trend_chart(audited)
    bars = _bars(chart.svg)
    assert {day for day, _, _ in bars} <= {d.isoformat() for d in audited.daily["day"]}
    assert sum(v for _, _, v in bars) == audited.totals["misses"] == 18
    by_outcome = {o: sum(v for _, n, v in bars if n == o) for o in ("abstain", "missing_evidence")}
    assert by_outcome == {"abstain": 8, "missing_evidence": 10}
    assert chart.title == "Recall misses per day (UTC)"
    daily = audited.daily
    peak = daily.row(daily.get_column("misses").arg_max(), named=True)
    assert chart.alt.endswith(f"18 in all, the highest {peak['misses']} ({peak['day']}); "
                              "abstain 8, missing_evidence 10")
    # the audit page draws the very same chart
    assert chart.inline in audited.to_html()


def test_top_terms_chart_ranks_and_stacks(audited):
    chart = display.top_terms_chart(audited, n=2)
    top = audited.terms.head(2)
    labels = re.findall(r'<text x="174" y="\d+" text-anchor="end" class="mfc-lbl"[^>]*>([^<]*)<',
                        chart.svg)
    assert labels == ["retreival ↻", "rare0 ↻"]
    assert [t.split(" ")[0] for t in labels] == top.get_column("term").to_list()
    bars = _bars(chart.svg)
    for row in top.iter_rows(named=True):
        mine = {n: v for c, n, v in bars if c.split(" ")[0] == row["term"]}
        assert mine == {o: row[o] for o in ("abstain", "missing_evidence") if row[o]}
    assert chart.title == "Top 2 missed terms"
    assert "↻ missed on two days or more" in chart.svg


def test_count_axes_have_whole_ticks_and_recalls_a_log_scale(audited, ticking):
    assert _axis(display.miss_trend_chart(audited).svg) == ["0", "2", "4", "6"]
    assert _axis(display.lane_override_chart(audited).svg) == ["0", "1"]
    assert _axis(display.top_terms_chart(audited).svg, "middle") == [
        "0", "2", "4", "6", "8", "10"]
    caps = _caps(ticking, 2)
    ticking.record_recall([caps[0]] * 12 + [caps[1]])
    chart = display.recall_distribution_chart(ticking)
    assert _axis(chart.svg) == ["1", "10", "100"]  # powers of ten: a log axis


def test_every_picture_is_an_image_with_alt_text_and_follows_the_scheme(audited, ticking):
    caps = _caps(ticking, 3)
    ticking.relate(caps[0], caps[1], "blocks")
    ticking.record_recall(caps)
    charts = [display.miss_trend_chart(audited), display.top_terms_chart(audited),
              display.lane_override_chart(audited), display.recall_distribution_chart(ticking),
              display.dag_chart(ticking), display.mission_chart(ticking)]
    for chart in charts:
        assert isinstance(chart, display.Chart)
        head = chart.svg[:chart.svg.index(">") + 1]
        assert 'xmlns="http://www.w3.org/2000/svg"' in head and 'role="img"' in head
        assert f'aria-label="{display.esc(chart.alt)}"' in head
        assert f"<title>{display.esc(chart.alt)}</title>" in chart.svg
        assert re.search(r"\d", chart.alt), chart.alt  # the figures, in words
        # text and background take the page's variables, with a fallback per scheme
        assert ".mfc-lbl{fill:var(--mf-fg2,#3d444d)}" in chart.svg
        assert "@media (prefers-color-scheme:dark){" in chart.svg
        assert "<script" not in chart.svg and "href" not in chart.svg
        assert chart._repr_svg_() == chart.svg
        html = chart._repr_html_()
        assert '<div class="mf">' in html and "http://" not in html


def test_no_extra_is_needed_to_draw(audited, monkeypatch):
    for name in ("altair", "vl_convert", "matplotlib"):
        monkeypatch.setitem(sys.modules, name, None)
    assert display.miss_trend_chart(audited).svg.startswith("<svg")
    assert "<svg" in audited.to_html()
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "plot" not in project["project"]["optional-dependencies"]


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
    chart = display.mission_chart(s, max_children=3)
    assert (display.COLLAPSED_COLOR, f"{epic} +4 · collapsed: {note}") in _circles(chart.svg)
    assert "1 collapsed (children past the first few folded into 1 node(s))" in chart.title


def test_lane_override_chart_stacks_the_pairs(audited):
    chart = display.lane_override_chart(audited)
    bars = _bars(chart.svg)
    assert {n for _, n, _ in bars} == {"term->fused", "vector->fused"}
    assert sum(v for _, _, v in bars) == 2
    assert chart.alt.endswith("; term->fused 1, vector->fused 1")


def test_recall_distribution_follows_most_recalled(ticking):
    s = ticking
    c = _caps(s, 6)
    s.record_recall([c[2], c[2], c[2], c[4], c[4], c[0]])
    s.record_recall([c[0]])
    s.record_recall([c[5]])
    s.forget(c[5])  # tombstoned capsules never count
    ranked = display.recall_ranking(s)
    most = mf.digest(s).to_dict()["most_recalled"]
    assert ranked.get_column("id").to_list() == [r["id"] for r in most]
    assert ranked.get_column("rank").to_list() == [1, 2, 3]
    assert ranked.get_column("recall_count").to_list() == [3, 2, 2]
    chart = display.recall_distribution_chart(s)
    assert chart.alt == ("Recall distribution (live capsules): 3 ranks, from 3 recalls (rank 1) "
                         "down to 2; 7 in all. top 10% of recalled capsules hold 43% of recalls")
    assert "from 3 recalls (rank 1) down to 3; 3 in all" in \
        display.recall_distribution_chart(s, n=1).alt


# ---- HTML helpers --------------------------------------------------------------------------

def test_html_table_escapes_and_limits():
    frame = pl.DataFrame({"term": ["<b>x</b>", "a\x1bb", "ok"], "n": [1, 2, 3]})
    html = display.html_table(frame, caption="<i>", limit=2)
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "a\\u001bb" in html and "\x1b" not in html
    assert "<caption>&lt;i&gt;</caption>" in html
    assert "1 more rows not shown" in html and "ok" not in html


def test_horizontal_bars_geometry():
    from memframe._render.svg import hbar_chart

    svg = hbar_chart(["a", "b"], [("x", [2, 0], "#111"), ("y", [2, 1], "#222")],
                     title="t", width=400).svg
    bars = re.findall(r'<rect x="([\d.]+)" y="\d+" width="([\d.]+)" height="16" fill', svg)
    # the axis runs to 4 (ticks 0..4) over the plot width (400 - 180 - 40 = 180)
    assert bars == [("180", "90"), ("270", "90"), ("180", "45")]


def test_a_long_series_bins_to_months_and_a_short_one_stays_daily():
    from memframe._render.svg import time_bar_chart

    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(366 + 365 + 365)]
    frame = pl.DataFrame({"day": days, "n": [1] * len(days)})
    chart = time_bar_chart(frame, [("n", "misses", "#4c78a8")], title="misses per {unit}")
    assert chart.title == "misses per month"
    bars = _bars(chart.svg)
    assert len(bars) == 36 and sum(v for _, _, v in bars) == len(days)
    assert bars[0] == ("2024-01", "misses", 31)
    short = time_bar_chart(frame.head(10), [("n", "misses", "#4c78a8")], title="per {unit}")
    assert short.title == "per day" and len(_bars(short.svg)) == 10


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
    assert _axis(trend) == ["0", "2", "4", "6", "8", "10"]
    alt = re.search(r'aria-label="([^"]*)"', trend).group(1)
    assert "29 bars from week of 2026-01-05 to week of 2026-07-20" in alt
    assert "12 in all" in alt and "the highest 10 (week of 2026-01-05)" in alt


def test_a_lane_pair_has_one_colour_whatever_pairs_the_store_holds(tmp_path, clock):
    """The legend's colours are fixed per pair of the closed vocabulary: a store holding
    only `fused->term` draws it in the same colour as a store holding every pair."""
    from memframe.schema import LANE_PAIRS

    def colours(pairs) -> dict[str, str]:
        store = mf.Store.create(tmp_path / f"s{len(list(tmp_path.iterdir()))}", clock=clock)
        store.ingest({"content": "x", "source": "s", "anchor": "a"})
        for forced, auto in pairs:
            store.record_lane_override(forced, auto)
        svg = display.lane_override_chart(mf.audit.recall_misses(store)).svg
        fills = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"><title>[^<]*: (\S+) ', svg)
        return {name: fill for fill, name in fills}

    every = colours(LANE_PAIRS)
    assert len(every) == len(LANE_PAIRS) == len(set(every.values()))
    for subset in ([LANE_PAIRS[-1]], [LANE_PAIRS[2], LANE_PAIRS[0]], [LANE_PAIRS[1]]):
        alone = colours(subset)
        assert alone and all(every[name] == fill for name, fill in alone.items()), alone
