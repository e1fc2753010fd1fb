"""The recall-miss audit on small stores built by hand, where every figure is known."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

import memframe as mf
from memframe.audit import AliasRules, alias_proposals, vocabulary
from memframe.audit.misses import ALIAS_SCHEMA, DAILY_SCHEMA, LANE_DAILY_SCHEMA, TERM_SCHEMA
from memframe.cli import main
from tests.conftest import FROZEN, TickingClock

UTC = dt.UTC
D1 = dt.datetime(2026, 7, 1, 9, tzinfo=UTC)


def DayClock() -> TickingClock:  # noqa: N802 (frozen at D1; tests move it explicitly)
    return TickingClock(D1, FROZEN)


@pytest.fixture
def known(tmp_path):
    """A store whose misses are written day by day from a script, with its ground truth."""
    clock = DayClock()
    store = mf.Store.create(tmp_path / "s", clock=clock)
    ids = store.ingest([
        {"content": "Retrieval lanes: the vector index", "source": "note", "anchor": "a"},
        {"content": "retrieval budget and the GPU quota", "source": "note", "anchor": "b"},
        {"content": "Embedding cache, café menu", "source": "note", "anchor": "c"},
        {"content": "retrieving old tombstoned words: zebra", "source": "note", "anchor": "d"},
        {"content": "superseded draft mentions yak", "source": "note", "anchor": "e"},
        {"content": "a newer draft", "source": "note", "anchor": "e"},
    ])
    store.forget(ids[3])
    store.relate(ids[5], ids[4], "supersedes")
    # day offset -> (terms, outcome): the script of misses
    script = [
        (0, ["Retreival", "embeding", "zebra"], "abstain"),
        (0, ["retreival"], "missing_evidence"),
        (2, ["retreival", "gpus", "Cafe"], "abstain"),
        (2, ["yak", "budget"], "missing_evidence"),
        (5, ["retreival", "embeding"], "abstain"),
    ]
    for offset, terms, outcome in script:
        clock.now = D1 + dt.timedelta(days=offset, hours=offset)
        store.record_miss(terms, outcome)
    lanes = [(0, "vector", "fused"), (0, "vector", "fused"), (3, "term", "fused")]
    for offset, forced, auto in lanes:
        clock.now = D1 + dt.timedelta(days=offset, minutes=30)
        store.record_lane_override(forced, auto)
    return store, clock


def test_per_term_table(known):
    store, _ = known
    audit = mf.audit.recall_misses(store)
    assert audit.terms.schema == pl.Schema(TERM_SCHEMA)
    rows = {r["term"]: r for r in audit.terms.iter_rows(named=True)}
    assert list(rows) == ["retreival", "embeding", "budget", "cafe", "gpus", "yak", "zebra"]
    r = rows["retreival"]
    assert (r["misses"], r["abstain"], r["missing_evidence"], r["days"], r["recurring"]) == \
        (4, 3, 1, 3, True)
    assert r["first_seen"] == D1 and r["last_seen"] == D1 + dt.timedelta(days=5, hours=5)
    assert (rows["embeding"]["days"], rows["embeding"]["recurring"]) == (2, True)
    assert (rows["gpus"]["days"], rows["gpus"]["recurring"]) == (1, False)
    # vocabulary: live content only, folded like miss terms
    assert rows["budget"]["in_vocabulary"] and rows["cafe"]["in_vocabulary"]
    assert not rows["zebra"]["in_vocabulary"]  # only in a tombstoned capsule
    assert not rows["yak"]["in_vocabulary"]  # only in a superseded capsule
    assert rows["retreival"]["alias"] == "retrieval"
    assert rows["embeding"]["alias"] == "embedding"
    assert rows["gpus"]["alias"] == "gpu"
    assert rows["budget"]["alias"] is None
    assert audit.totals == {
        "misses": 11, "abstain": 8, "missing_evidence": 3, "terms": 7, "recurring_terms": 2,
        "unknown_terms": 5, "terms_with_alias": 3, "days_with_misses": 3, "lane_overrides": 3,
        "id_like_terms": 0,
    }


def test_daily_trend_fills_quiet_days(known):
    store, _ = known
    daily = mf.audit.recall_misses(store).daily
    assert daily.schema == pl.Schema(DAILY_SCHEMA)
    assert daily.select("day", "misses", "abstain", "missing_evidence", "terms", "new_terms") \
        .rows() == [
        (dt.date(2026, 7, 1), 4, 3, 1, 3, 3),
        (dt.date(2026, 7, 2), 0, 0, 0, 0, 0),
        (dt.date(2026, 7, 3), 5, 3, 2, 5, 4),
        (dt.date(2026, 7, 4), 0, 0, 0, 0, 0),
        (dt.date(2026, 7, 5), 0, 0, 0, 0, 0),
        (dt.date(2026, 7, 6), 2, 2, 0, 2, 0),
    ]


def test_lane_trend_by_pair(known):
    store, _ = known
    audit = mf.audit.recall_misses(store)
    assert audit.lane_daily.schema == pl.Schema(LANE_DAILY_SCHEMA)
    # every day of the span x every pair seen, in the reference's pair order
    assert audit.lane_daily.rows() == [
        (dt.date(2026, 7, 1), "term", "fused", 0),
        (dt.date(2026, 7, 1), "vector", "fused", 2),
        (dt.date(2026, 7, 2), "term", "fused", 0),
        (dt.date(2026, 7, 2), "vector", "fused", 0),
        (dt.date(2026, 7, 3), "term", "fused", 0),
        (dt.date(2026, 7, 3), "vector", "fused", 0),
        (dt.date(2026, 7, 4), "term", "fused", 1),
        (dt.date(2026, 7, 4), "vector", "fused", 0),
    ]
    assert audit.lane_totals().rows() == [("term", "fused", 1), ("vector", "fused", 2)]


def test_window(known):
    store, _ = known
    july3 = mf.audit.recall_misses(store, since="2026-07-03", until="2026-07-04")
    assert july3.totals["misses"] == 5
    assert july3.daily.get_column("day").to_list() == [dt.date(2026, 7, 3)]
    assert july3.terms.get_column("recurring").sum() == 0  # one day in the window
    assert july3.lane_daily.is_empty()
    # since inclusive, until exclusive, instants and dates alike
    exact = mf.audit.recall_misses(store, since=D1 + dt.timedelta(days=5, hours=5))
    assert exact.totals["misses"] == 2
    before = mf.audit.recall_misses(store, until=D1 + dt.timedelta(days=5, hours=5))
    assert before.totals["misses"] == 9
    assert mf.audit.recall_misses(store, since=dt.date(2026, 7, 6)).totals["misses"] == 2
    assert mf.audit.recall_misses(store, until="2026-07-01T09:00:00Z").totals["misses"] == 0
    w = json.loads(july3.to_json())["window"]
    assert w == {"since": "2026-07-03T00:00:00Z", "until": "2026-07-04T00:00:00Z"}


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"since": "yesterday"}, "ISO 8601"),
        ({"since": "2026-07-05", "until": "2026-07-01"}, "after until"),
        ({"recurring_days": 0}, "recurring_days"),
        ({"since": 3}, "since must be"),
    ],
)
def test_bad_arguments_teach(known, kwargs, fragment):
    store, _ = known
    with pytest.raises(mf.errors.InvalidInputError, match=fragment):
        mf.audit.recall_misses(store, **kwargs)


def test_pinned_and_time_travel(known):
    store, clock = known
    g = store.generation
    before = mf.audit.recall_misses(store)
    clock.now = D1 + dt.timedelta(days=9)
    store.record_miss(["retreival"], "abstain")
    after = mf.audit.recall_misses(store)
    assert after.totals["misses"] == before.totals["misses"] + 1
    assert after.generation == g + 1
    again = mf.audit.recall_misses(store.at(g))
    assert again.to_json() == before.to_json()
    assert again.generation == g


def test_json_is_deterministic_and_complete(known):
    store, _ = known
    a, b = mf.audit.recall_misses(store), mf.audit.recall_misses(store)
    assert a.to_json() == b.to_json()
    body = json.loads(a.to_json())
    assert list(body) == ["audit", "generation", "window", "rules", "vocabulary_size",
                          "totals", "terms", "daily", "lane_daily", "aliases"]
    assert body["terms"][0] == {
        "term": "retreival", "misses": 4, "abstain": 3, "missing_evidence": 1,
        "first_seen": "2026-07-01T09:00:00Z", "last_seen": "2026-07-06T14:00:00Z", "days": 3,
        "recurring": True, "in_vocabulary": False, "alias": "retrieval", "id_like": False,
    }
    assert body["daily"][0]["day"] == "2026-07-01"
    assert len(body["aliases"]) == a.aliases.height
    assert set(a.frames) == {"terms", "daily", "lane_daily", "aliases"}


def test_empty_store(tmp_path):
    store = mf.Store.create(tmp_path / "empty")
    audit = mf.audit.recall_misses(store)
    for frame, schema in ((audit.terms, TERM_SCHEMA), (audit.daily, DAILY_SCHEMA),
                          (audit.lane_daily, LANE_DAILY_SCHEMA), (audit.aliases, ALIAS_SCHEMA)):
        assert frame.is_empty() and frame.schema == pl.Schema(schema)
    assert audit.totals["misses"] == 0
    assert "no recall misses recorded" in audit.to_text()
    assert "no recall misses recorded" in audit.to_html()
    assert json.loads(audit.to_json())["terms"] == []


# ---- alias proposals in isolation --------------------------------------------------------

def _vocab(pairs):
    return pl.DataFrame(pairs, schema={"token": pl.String, "capsules": pl.Int64}, orient="row")


def test_alias_order_is_distance_then_capsules_then_term():
    vocab = _vocab([("cache", 2), ("catch", 9), ("cachet", 2), ("caches", 2), ("cachers", 5),
                    ("cached", 4), ("cahce", 1)])
    terms = pl.DataFrame({"term": ["cachee"], "misses": [1]})
    got = alias_proposals(terms, vocab, AliasRules(per_term=10))
    # distance 1: cached(4), then cache caches cachet (2 each, by token);
    # distance 2: cachers(5), cahce(1); catch is 3 edits away
    assert got.select("alias", "distance", "capsules", "rank").rows() == [
        ("cached", 1, 4, 1), ("cache", 1, 2, 2), ("caches", 1, 2, 3), ("cachet", 1, 2, 4),
        ("cachers", 2, 5, 5), ("cahce", 2, 1, 6),
    ]
    assert alias_proposals(terms, vocab).height == 3  # the default per-term cap


def test_short_terms_get_one_edit_at_most():
    vocab = _vocab([("gpu", 3), ("gpus", 1), ("cpu", 8), ("gp", 1), ("ug", 9)])
    terms = pl.DataFrame({"term": ["gpux", "pgu", "gupx"], "misses": [3, 2, 1]})
    got = alias_proposals(terms, vocab, AliasRules(per_term=10))
    # a transposition is one edit (pgu -> gpu); gupx is two edits from everything
    assert got.select("term", "alias", "distance").rows() == [
        ("gpux", "gpu", 1), ("gpux", "gpus", 1), ("pgu", "gpu", 1),
    ]
    wider = alias_proposals(terms, vocab, AliasRules(short_max_distance=2, per_term=10))
    assert ("gupx", "gpu", 2) in wider.select("term", "alias", "distance").rows()
    assert ("pgu", "cpu", 2) in wider.select("term", "alias", "distance").rows()
    assert alias_proposals(terms, vocab, AliasRules(max_distance=0)).is_empty()


def test_terms_in_the_vocabulary_get_no_proposal():
    vocab = _vocab([("index", 1), ("indexes", 1)])
    got = alias_proposals(pl.DataFrame({"term": ["index"], "misses": [1]}), vocab)
    assert got.is_empty()


def test_alias_rules_validate():
    with pytest.raises(mf.errors.InvalidInputError, match="max_distance"):
        AliasRules(max_distance=-1)


def test_vocabulary_tokenises_and_folds_like_miss_terms():
    state = pl.DataFrame({
        "id": ["cap-1", "cap-2", "cap-3"],
        "status": ["live", "live", "superseded"],
        "content": ["Ça marche: CO-OP, e.g. Łódź_v2 — ÉTÉ!", "été été", "hidden"],
    })
    assert vocabulary(state).rows() == [
        ("ca", 1), ("co", 1), ("co-op", 1), ("e", 1), ("e.g", 1), ("ete", 2), ("g", 1),
        ("lodz_v2", 1), ("marche", 1), ("op", 1),
    ]


# ---- the command line ----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "text", "html"])
def test_cli_formats(known, capsys, fmt):
    store, _ = known
    assert main(["audit", "misses", str(store.path), "--format", fmt]) == 0
    out = capsys.readouterr().out
    audit = mf.audit.recall_misses(store)
    expected = {"json": audit.to_json, "text": audit.to_text, "html": audit.to_html}[fmt]()
    assert out.rstrip("\n") == expected.rstrip("\n")


def test_cli_window(known, capsys):
    store, _ = known
    assert main(["audit", "misses", str(store.path), "--format", "json",
                 "--since", "2026-07-03", "--until", "2026-07-04"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["misses"] == 5
    assert main(["audit", "misses", str(store.path), "--since", "soon"]) == 1
    assert "ISO 8601" in capsys.readouterr().err


def test_text_report(known):
    store, _ = known
    text = mf.audit.recall_misses(store).to_text()
    lines = text.splitlines()
    assert lines[0] == "recall-miss audit, generation 11: 11 misses of 7 terms on 3 days"
    # a transposition is one edit; the evidence: live capsules, misses it would explain
    assert any(line.startswith("  retreival -> retrieval: 1, 2 capsules, explains ")
               for line in lines)
    seen = [line for line in lines if line.startswith("  retreival ")][0]
    assert seen.split()[2] == "3*"  # missed on 3 days: recurring
    assert seen.split()[4].endswith("Z")  # the one instant format: YYYY-MM-DD HH:MM:SSZ
    assert seen.endswith("-> retrieval")
    assert all(len(line) <= 80 for line in lines), [x for x in lines if len(x) > 80]
    assert "  vector -> fused: 2" in lines
