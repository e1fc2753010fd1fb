"""The audit scored against a synthetic store whose misses are known by construction:
``memframe.synth.miss_truth`` records, row for row, which typo came from which word."""

from __future__ import annotations

import datetime as dt
import re

import polars as pl
import pytest

import memframe as mf
from memframe.synth import miss_truth, synthesize
from memframe.text import fold_term
from tests.audit.helpers import daily_oracle, osa, term_oracle

SEED, CAPSULES = 7, 600
TYPO_EDITS = ("transpose", "delete", "substitute", "insert")


# the module keeps to one pytest worker, so its synthetic store is made once per run
pytestmark = pytest.mark.xdist_group("synth-audit")


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    store = synthesize(tmp_path_factory.mktemp("synth") / "store", capsules=CAPSULES, seed=SEED)
    truth = miss_truth(SEED, capsules=CAPSULES)
    return store, truth, mf.audit.recall_misses(store)


def _truth_rows(truth: pl.DataFrame) -> list[tuple[dt.datetime, str, str]]:
    return list(truth.select("at", "term", "outcome").iter_rows())


def test_the_ledger_is_the_truth(synth):
    store, truth, audit = synth
    ledger = store.table("recall_misses").sort("seq").select("term", "outcome").collect()
    assert ledger.rows() == truth.select("term", "outcome").rows()
    assert audit.totals["misses"] == truth.height


def test_per_term_figures_match_the_truth(synth):
    _, truth, audit = synth
    expected = term_oracle(_truth_rows(truth))
    got = {row["term"]: row for row in audit.terms.iter_rows(named=True)}
    assert set(got) == set(expected)
    for term, want in expected.items():
        row = got[term]
        for key in ("misses", "abstain", "missing_evidence", "days"):
            assert row[key] == want[key], (term, key)
        assert row["first_seen"] == want["first_seen"]
        assert row["last_seen"] == want["last_seen"]
        assert row["recurring"] == (want["days"] >= 2)
    # order: misses desc, then term
    keys = [(-r["misses"], r["term"]) for r in audit.terms.iter_rows(named=True)]
    assert keys == sorted(keys)
    assert audit.totals["recurring_terms"] == sum(w["days"] >= 2 for w in expected.values())


def test_daily_trend_matches_the_truth(synth):
    _, truth, audit = synth
    expected = daily_oracle(_truth_rows(truth))
    got = {row.pop("day"): row for row in audit.daily.iter_rows(named=True)}
    assert got == expected


def test_every_typo_gets_its_word_as_first_alias(synth):
    store, truth, audit = synth
    typos = truth.filter(pl.col("edit").is_in(TYPO_EDITS)).select("term", "word").unique()
    assert typos.height > 10
    live = " ".join(
        store.capsule_state().filter(pl.col("status") == "live").collect()
        .get_column("content").to_list()
    ).lower()
    best = {r["term"]: r for r in audit.aliases.filter(pl.col("rank") == 1)
            .iter_rows(named=True)}
    terms = {r["term"]: r for r in audit.terms.iter_rows(named=True)}
    for term, word in typos.iter_rows():
        assert re.search(rf"\b{re.escape(word)}\b", live), word  # the word is live vocabulary
        assert terms[term]["in_vocabulary"] is False
        assert best[term]["alias"] == word, term
        assert best[term]["distance"] == osa(term, word) == 1  # one edit, transpositions too
        assert terms[term]["alias"] == word
        capsules = sum(
            bool(re.search(rf"\b{re.escape(word)}\b", fold_term(c)))
            for c in store.capsule_state().filter(pl.col("status") == "live").collect()
            .get_column("content").to_list()
        )
        assert best[term]["capsules"] == capsules


def test_correct_words_are_in_the_vocabulary_and_get_no_alias(synth):
    _, truth, audit = synth
    exact = set(truth.filter(pl.col("edit") == "exact").get_column("term"))
    assert exact
    rows = audit.terms.filter(pl.col("term").is_in(list(exact)))
    assert rows.get_column("in_vocabulary").all()
    assert rows.get_column("alias").is_null().all()
    assert audit.aliases.filter(pl.col("term").is_in(list(exact))).is_empty()
    absent = set(truth.filter(pl.col("edit") == "absent").get_column("term"))
    assert absent
    absent_rows = audit.terms.filter(pl.col("term").is_in(list(absent)))
    assert not absent_rows.get_column("in_vocabulary").any()


def test_every_proposal_obeys_the_distance_rules(synth):
    _, _, audit = synth
    assert audit.aliases.height
    for row in audit.aliases.iter_rows(named=True):
        limit = 1 if len(row["term"]) <= 4 else 2
        assert 1 <= row["distance"] == osa(row["term"], row["alias"]) <= limit
    per_term = audit.aliases.group_by("term").agg(pl.col("rank").sort())
    for ranks in per_term.get_column("rank").to_list():
        assert ranks == list(range(1, len(ranks) + 1)) and len(ranks) <= 3


def test_lane_trend_matches_the_table(synth):
    store, _, audit = synth
    rows = store.table("lane_overrides").select("at", "forced", "auto_pick").collect().rows()
    assert rows
    expected: dict[tuple, int] = {}
    for at, forced, auto in rows:
        key = (at.date(), forced, auto)
        expected[key] = expected.get(key, 0) + 1
    got = {(d, f, a): n for d, f, a, n in audit.lane_daily.iter_rows() if n}
    assert got == expected
    assert audit.totals["lane_overrides"] == len(rows)
