"""Laws of the recall-coverage audit and the life of a miss, over random histories."""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from unittest import mock

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.audit import coverage as coverage_module

WORDS = ["deploy", "canary", "freeze", "rollback", "slot"]
T0 = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)

op = st.one_of(
    st.tuples(st.just("recall"), st.lists(st.integers(0, 5), max_size=3),
              st.lists(st.sampled_from(WORDS), min_size=1, max_size=2)),
    st.tuples(st.just("usage"), st.lists(st.integers(0, 5), min_size=1, max_size=2)),
    st.tuples(st.just("miss"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=2),
              st.sampled_from(["abstain", "missing_evidence"])),
    st.tuples(st.just("ingest"), st.sampled_from(WORDS)),
    st.tuples(st.just("forget"), st.integers(0, 5)),
    st.tuples(st.just("teach"), st.sampled_from(WORDS + ["Deploy", " CANARY "]),
              st.sampled_from(["ship", "release", "--", "Canary"])),
)


def _run(ops, gaps) -> mf.Store:
    steps = iter(T0 + dt.timedelta(hours=sum(gaps[: i + 1])) for i in range(len(gaps)))
    store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=lambda: next(steps))
    ids = store.ingest([{"content": f"note {i} on {w}", "source": "s", "anchor": str(i)}
                        for i, w in enumerate(WORDS + ["misc"])])
    n = 0
    for o in ops:
        n += 1
        if o[0] == "recall":
            store.record_recall([ids[i] for i in o[1]], terms=o[2])
        elif o[0] == "usage":
            store.record_recall([ids[i] for i in o[1]])
        elif o[0] == "miss":
            store.record_miss(o[1], o[2])
        elif o[0] == "teach":
            try:
                store.teach_alias(o[1], o[2])
            except mf.MemframeError:
                pass  # an alias that folds to its term: refused, nothing written
        elif o[0] == "ingest":
            store.ingest({"content": f"later {o[1]} {n}", "source": "s", "anchor": f"x{n}"})
        else:
            store.forget(ids[o[1]], mode="tombstone", reason="r")
    return store


histories = st.lists(op, max_size=12).flatmap(
    lambda ops: st.tuples(st.just(ops), st.lists(st.integers(0, 40), min_size=len(ops) + 7,
                                                 max_size=len(ops) + 7)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories)
def test_coverage_laws(history):
    ops, gaps = history
    store = _run(ops, gaps)
    cov = mf.audit.recall_coverage(store)
    receipts = store.table("recall_receipts").collect()
    # per day: hits + receipts that returned nothing == receipts; the column sums to the rows
    empty = (receipts.filter(pl.col("returned_ids").list.len() == 0)
             .group_by(pl.col("at").dt.date().alias("day")).len())
    daily = cov.daily.join(empty, on="day", how="left").with_columns(pl.col("len").fill_null(0))
    assert (daily["hits"] + daily["len"] == daily["receipts"]).all()
    assert int(cov.daily["receipts"].sum()) == receipts.height
    misses = store.table("recall_misses").collect()
    assert int(cov.daily["misses"].sum()) == misses.height
    assert (cov.daily["misses"] == cov.daily["abstain"] + cov.daily["missing_evidence"]).all()
    if cov.daily.height:  # quiet days included: one row per day, no gap
        days = cov.daily["day"].to_list()
        assert days == [days[0] + dt.timedelta(days=i) for i in range(len(days))]
    # never recalled = live minus any id in recalls or in a receipt's returned ids
    state = store.capsule_state().collect()
    live = set(state.filter(pl.col("status") == "live")["id"])
    named = set(store.table("recalls").collect()["capsule_id"]) | {
        i for ids in receipts["returned_ids"].to_list() for i in ids}
    assert set(cov.never_recalled["id"]) == live - named
    assert cov.never_recalled.height == len(live - named)
    # answers count every (folded term, returned id) pair of the receipts
    pairs = sum(len(set(t.lower() for t in terms)) * len(ids) for terms, ids in
                zip(receipts["terms"].to_list(), receipts["returned_ids"].to_list(), strict=True))
    assert int(cov.answers["answers"].sum()) == pairs
    # the life of a miss: one row per term, repeats sum to the misses, resolution after
    life = mf.audit.recall_misses(store, progress=False).lifecycle
    assert life.height == misses["term"].n_unique()
    assert int(life["repeats"].sum()) == misses.height
    resolved = life.filter(pl.col("resolved_at").is_not_null())
    assert (resolved["resolved_at"] > resolved["first_miss"]).all()
    assert (resolved["resolved_at"] > resolved["last_miss"]).all()
    taught = store.table("recall_aliases").collect()
    for row in resolved.iter_rows(named=True):  # the receipt named answered the term
        if row["resolution"] == "receipt":
            r = receipts.filter(pl.col("id") == row["resolved_by"]).row(0, named=True)
            assert row["term"] in {t.lower() for t in r["terms"]} and r["returned_ids"]
        elif row["resolution"] == "alias":  # the alias named was taught for the term then
            a = taught.filter((pl.col("term") == row["term"])
                              & (pl.col("alias") == row["resolved_by"]))
            assert a["at"].to_list() == [row["resolved_at"]]
    # the earliest answer wins: no alias for a term was taught between its last miss and
    # its resolution (nor after the last miss of a term still open)
    late = taught.filter(pl.col("alias").str.contains("[a-z]")).join(
        life, on="term").filter((pl.col("at") > pl.col("last_miss"))
                                & pl.col("at").lt(pl.col("resolved_at")).fill_null(True))
    assert late.is_empty()


def test_a_receipt_resolves_a_miss_and_an_open_miss_stays_open(tmp_path):
    days = iter(T0 + dt.timedelta(days=d) for d in range(30))
    store = mf.Store.create(tmp_path / "s", clock=lambda: next(days))
    a = store.ingest({"content": "blue slot rollback", "source": "s", "anchor": "a"})[0]
    for _ in range(3):
        store.record_miss(["Rollback"], "abstain")
    store.record_miss(["canary"], "missing_evidence")
    store.record_recall([a], terms=["rollback"])
    audit = mf.audit.recall_misses(store, progress=False)
    row = audit.lifecycle.filter(pl.col("term") == "rollback").row(0, named=True)
    assert (row["repeats"], row["resolved_by"], row["resolution"]) == (3, "rcpt-1", "receipt")
    assert row["time_to_resolution"] == dt.timedelta(days=4)
    assert audit.open_misses()["term"].to_list() == ["canary"]
    assert audit.resolution_times().filter(pl.col("bucket") == "< 7 days")["terms"].item() == 1


def test_an_alias_taught_after_the_last_miss_resolves_it_and_the_earliest_answer_wins(tmp_path):
    days = iter(T0 + dt.timedelta(days=d) for d in range(30))
    store = mf.Store.create(tmp_path / "s", clock=lambda: next(days))
    a = store.ingest({"content": "blue slot rollback", "source": "s", "anchor": "a"})[0]
    store.record_miss(["Rollbak"], "abstain")                 # day 1
    store.record_miss(["Canery"], "abstain")                  # day 2
    store.teach_alias("canery", "canary")                      # day 3: before its last miss
    store.record_miss(["canery", "Frieze", "wat"], "abstain")  # day 4
    store.teach_alias("ROLLBAK", "rollback")                   # day 5: resolves rollbak
    store.record_recall([a], terms=["rollbak"])                # day 6: later, loses
    store.teach_alias("Frieze", "--")                          # day 7: no word, no answer
    store.record_recall([a], terms=["frieze"])                 # day 8: answers frieze
    store.teach_alias("wat", "what")                           # day 9
    life = mf.audit.recall_misses(store, progress=False).lifecycle
    got = {r["term"]: (r["resolution"], r["resolved_by"], r["resolved_at"])
           for r in life.iter_rows(named=True)}
    assert got["rollbak"] == ("alias", "rollback", T0 + dt.timedelta(days=5))
    assert got["frieze"] == ("receipt", "rcpt-2", T0 + dt.timedelta(days=8))
    assert got["wat"] == ("alias", "what", T0 + dt.timedelta(days=9))
    assert got["canery"] == (None, None, None)  # taught on day 3, missed again on day 4
    row = life.filter(pl.col("term") == "rollbak").row(0, named=True)
    assert row["time_to_resolution"] == dt.timedelta(days=4)
    # time travel: before the alias was taught, the term was open
    before = mf.audit.recall_misses(store.at(store.generation - 5), progress=False).lifecycle
    assert before.filter(pl.col("term") == "rollbak")["resolved_at"].to_list() == [None]


def test_receipts_survive_an_erasure_and_the_digest_ignores_the_new_tables(tmp_path):
    def build(path, extra: bool) -> mf.Store:
        days = iter(T0 + dt.timedelta(hours=h) for h in range(50))
        store = mf.Store.create(path, clock=lambda: next(days))
        rows = [{"content": f"fact {i}", "source": "s", "anchor": str(i)} for i in range(3)]
        if extra:
            rows[0]["event_at"] = "2026-01-01T00:00:00Z"
            rows[1] |= {"event_from": "2026-01-01T00:00:00Z", "event_to": "2026-03-01T00:00:00Z"}
        a, b, _ = store.ingest(rows)
        store.record_recall([a, b], **({"terms": ["fact"]} if extra else {}))
        store.record_recall([], **({"terms": ["nothing"]} if extra else {}))
        store.forget(a, mode="purge", reason="gone")
        return store

    with_tables = build(tmp_path / "with", True)
    without = build(tmp_path / "without", False)
    assert with_tables.table("recall_receipts").collect().height == 2
    assert with_tables.table("recall_receipts").collect()["returned_ids"].to_list()[0] == [
        "cap-1", "cap-2"]  # the purge leaves the receipt as it was
    assert mf.digest(with_tables).to_json() == mf.digest(without).to_json()
    # taught aliases: the digest reads no alias row, only the journal rows teaching wrote
    # (one memory_alias row per pair, which the engine's digest counts as well)
    plain = mf.digest(with_tables).to_dict()
    with_tables.append("recall_aliases", {"term": ["Fact", "fact", "nothing"],
                                          "alias": ["claim", "claim", "void"]})
    assert with_tables.table("recall_aliases").collect().height == 2
    taught = mf.digest(with_tables).to_dict()
    assert taught["audit_events"] == plain["audit_events"] + 2
    assert taught["journal"] == {**plain["journal"], "verified": plain["journal"]["verified"] + 2}
    assert ({k: v for k, v in taught.items() if k not in ("audit_events", "journal")}
            == {k: v for k, v in plain.items() if k not in ("audit_events", "journal")})


# ---- every frame against a plain-Python reference --------------------------------------

SPELLINGS = ["deploy", "Deploy", "  DEPLOY ", "Café", "cafe", "--", "slot", "Ångström", "x1"]
PROJECTS = ["team", "team/api", "ops", None]
LANES = ["term", "vector", "fused", None]

receipt = st.tuples(
    st.integers(0, 24 * 9),  # hours after T0
    st.lists(st.sampled_from(SPELLINGS), min_size=1, max_size=3),
    st.lists(st.integers(0, 5), max_size=3),  # returned (a capsule may come back twice)
    st.sampled_from(LANES), st.sampled_from(PROJECTS), st.sampled_from(PROJECTS))
windows = st.tuples(st.sampled_from([None, 1, 3]), st.sampled_from([None, 4, 8]),
                    st.sampled_from([None, "team", "team/api", "ops"]))


def _reference(store: mf.Store, since, until, prefix):
    """The coverage frames computed row by row from the tables."""
    import re
    from collections import Counter

    from memframe.text import fold_term

    rows = store.table("recall_receipts").collect().to_dicts()
    kept = [r for r in rows if (since is None or r["at"] >= since)
            and (until is None or r["at"] < until)
            and (prefix is None or (r["project_id"] or r["project_prefix"] or "")
                 .startswith(prefix) and (r["project_id"] or r["project_prefix"]) is not None)]
    answers: Counter = Counter()
    for r in kept:
        terms = {fold_term(t) for t in r["terms"]}
        for term in (t for t in terms if re.search(r"[A-Za-z0-9]", t)):
            for cid in r["returned_ids"]:
                answers[(term, cid)] += 1

    def tally(key):
        out: dict = {}
        for r in kept:
            n, h = out.get(key(r), (0, 0))
            out[key(r)] = (n + 1, h + bool(r["returned_ids"]))
        return out

    named = {r["capsule_id"] for r in store.table("recalls").collect().to_dicts()} | {
        i for r in rows for i in r["returned_ids"]}
    state = store.capsule_state().collect()
    live = {r["id"] for r in state.to_dicts() if r["status"] == "live"
            and (prefix is None or (r["project_id"] or "").startswith(prefix))}
    return {
        "answers": sorted(((t, c, n) for (t, c), n in answers.items()),
                          key=lambda x: (-x[2], x[0], x[1])),
        "by_project": tally(lambda r: r["project_id"]),
        "by_lane": tally(lambda r: r["lane"]),
        "by_day": tally(lambda r: r["at"].date()),
        "never": live - named,
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(receipt, max_size=14), st.lists(st.integers(0, 5), max_size=3),
       st.lists(st.integers(0, 5), max_size=2), windows)
def test_coverage_frames_match_a_row_by_row_reference(receipts, usage, forgotten, window):
    store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"),
                            clock=lambda: T0 + dt.timedelta(days=12))
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": str(i),
                         "project_id": PROJECTS[i % 3]} for i in range(6)])
    ordered = sorted(receipts, key=lambda r: r[0])
    for first in range(0, len(ordered), 5):  # a partition per 5 receipts
        store.append("recall_receipts", pl.DataFrame(
            [{"at": T0 + dt.timedelta(hours=h), "terms": terms,
              "returned_ids": [ids[i] for i in returned], "lane": lane, "project_id": project,
              "project_prefix": prefix} for h, terms, returned, lane, project, prefix
             in ordered[first:first + 5]],
            schema={"at": pl.Datetime("ns", "UTC"), "terms": pl.List(pl.String),
                    "returned_ids": pl.List(pl.String), "lane": pl.String,
                    "project_id": pl.String, "project_prefix": pl.String}))
    if usage:
        store.record_recall([ids[i] for i in usage])
    for i in set(forgotten):
        store.forget(ids[i], mode="tombstone", reason="r")
    since_day, until_day, prefix = window
    since = T0 + dt.timedelta(days=since_day) if since_day is not None else None
    until = T0 + dt.timedelta(days=until_day) if until_day is not None else None
    cov = mf.audit.recall_coverage(store, since=since, until=until, project_prefix=prefix)
    ref = _reference(store, since, until, prefix)
    with mock.patch.object(coverage_module, "RECEIPT_ROWS", 1):  # a chunk per partition
        chunked = mf.audit.recall_coverage(store, since=since, until=until,
                                           project_prefix=prefix)
    assert chunked.to_json() == cov.to_json()

    assert cov.answers.rows() == ref["answers"]
    assert cov.answers.schema == pl.Schema(
        {"term": pl.String, "capsule_id": pl.String, "answers": pl.Int64})
    for name, key in (("by_project", "project_id"), ("by_lane", "lane")):
        frame = getattr(cov, name)
        assert {r[key]: (r["receipts"], r["hits"]) for r in frame.to_dicts()} == ref[name]
        order = sorted(ref[name], key=lambda k: (-ref[name][k][0], k is None, k or ""))
        assert frame[key].to_list() == order
    days = {r["day"]: (r["receipts"], r["hits"]) for r in cov.daily.to_dicts()
            if r["receipts"]}
    assert days == ref["by_day"]
    assert set(cov.never_recalled["id"]) == ref["never"]
    committed = dt.datetime.fromisoformat(store.committed_at.replace("Z", "+00:00"))
    assert {r["id"]: r["age_days"] for r in cov.never_recalled.to_dicts()} == {
        r["id"]: (committed - r["created_at"]) // dt.timedelta(days=1)
        for r in store.capsule_state().collect().to_dicts() if r["id"] in ref["never"]}


def test_ages_are_taken_at_the_generation_not_the_wall_clock(tmp_path):
    # regression: ages once read the opener's clock, so a rendered audit changed by the hour
    days = iter(T0 + dt.timedelta(days=d) for d in range(30))
    store = mf.Store.create(tmp_path / "s", clock=lambda: next(days))
    store.ingest({"content": "never recalled", "source": "s", "anchor": "a"})
    store.ingest({"content": "another", "source": "s", "anchor": "b"})
    ages = []
    for later in (40, 400):
        reopened = mf.Store.open(tmp_path / "s",
                                 clock=lambda d=later: T0 + dt.timedelta(days=d))
        ages.append(mf.audit.recall_coverage(reopened).never_recalled["age_days"].to_list())
    assert ages[0] == ages[1] == [1, 0]


def test_the_json_rendered_a_slice_at_a_time_is_the_json_of_the_whole(monkeypatch, tmp_path):
    import json as _json

    from memframe import frames
    from memframe.synth import synthesize

    synthesize(tmp_path / "s", capsules=200, chunk_rows=100)
    coverage = mf.audit.recall_coverage(mf.Store.open(tmp_path / "s"))
    whole = _json.dumps(coverage.to_dict(), ensure_ascii=False, separators=(",", ":"))
    assert coverage.to_json() == whole
    monkeypatch.setattr(frames, "JSON_ROWS", 3)  # slices of 3 rows, and a short last
    assert coverage.never_recalled.height % 3 != 0 or coverage.answers.height % 3 != 0
    assert coverage.to_json() == whole
