"""The batched candidate search is exact: it finds every vocabulary word within a term's
limit that a brute-force optimal-string-alignment scan finds, with the same distance, and
ranks them as the rules say."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe.audit import AliasRules, alias_proposals
from memframe.audit.misses import PREFIX
from tests.audit.helpers import osa

# a small alphabet makes near strings (and shared deletion variants) common
_WORDS = st.text(alphabet="abcd", min_size=1, max_size=PREFIX + 5)


def _frames(terms: list[str], vocab: dict[str, int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    t = pl.DataFrame({"term": terms, "misses": [1 + i % 3 for i in range(len(terms))]},
                     schema={"term": pl.String, "misses": pl.Int64})
    v = pl.DataFrame({"token": list(vocab), "capsules": list(vocab.values())},
                     schema={"token": pl.String, "capsules": pl.Int64})
    return t, v


@settings(max_examples=150, deadline=None)
@given(terms=st.lists(_WORDS, min_size=1, max_size=8, unique=True),
       vocab=st.dictionaries(_WORDS, st.integers(1, 50), min_size=1, max_size=25),
       max_distance=st.integers(1, 2), short=st.integers(0, 2))
def test_candidate_search_matches_brute_force(terms, vocab, max_distance, short):
    rules = AliasRules(max_distance=max_distance, short_max_distance=short, per_term=1000)
    t, v = _frames(terms, vocab)
    got = {(r["term"], r["alias"], r["distance"])
           for r in alias_proposals(t, v, rules).iter_rows(named=True)}
    want = set()
    for term in terms:
        if term in vocab:
            continue
        limit = rules.limit(term)
        for word in vocab:
            d = osa(term, word)
            if 1 <= d <= limit:
                want.add((term, word, d))
    assert got == want


@settings(max_examples=100, deadline=None)
@given(term=_WORDS, vocab=st.dictionaries(_WORDS, st.integers(1, 5000), min_size=2, max_size=25),
       per_edit=st.sampled_from([2, 10, 1000]))
def test_ranking_follows_the_rules(term, vocab, per_edit):
    rules = AliasRules(per_term=1000, frequency_per_edit=per_edit)
    t, v = _frames([term], vocab)
    rows = alias_proposals(t, v, rules).rows(named=True)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    keys = [(r["distance"] - math.log(r["capsules"]) / math.log(per_edit), r["distance"],
             -r["capsules"], r["alias"]) for r in rows]
    assert keys == sorted(keys)
    for a, b in zip(rows, rows[1:], strict=False):  # same distance: more live capsules first
        if a["distance"] == b["distance"]:
            assert (a["capsules"], b["alias"]) >= (b["capsules"], a["alias"])


def test_transposition_is_one_edit_and_beats_a_frequent_two_edit_word():
    t, v = _frames(["audti"], {"audit": 40, "auth": 900})
    rows = alias_proposals(t, v).select("alias", "distance", "rank").rows()
    assert rows == [("audit", 1, 1), ("auth", 2, 2)]


def test_a_far_more_frequent_word_outranks_a_rare_closer_one():
    # one capsule misspelt the word; the store says "retrieval" in 5,000
    t, v = _frames(["retreivl"], {"retreival": 1, "retrieval": 5000})
    assert alias_proposals(t, v).select("alias", "distance").rows() == [
        ("retrieval", 2), ("retreival", 1)]
    # with a stricter exchange rate, the closer word stays first
    strict = alias_proposals(t, v, AliasRules(frequency_per_edit=100_000))
    assert strict.get_column("alias").to_list() == ["retreival", "retrieval"]


def test_misses_explained_sums_the_terms_an_alias_is_proposed_for():
    terms = pl.DataFrame({"term": ["retreival", "retrival", "retrieva", "cahce"],
                          "misses": [7, 3, 2, 5]})
    vocab = pl.DataFrame({"token": ["retrieval", "cache"], "capsules": [10, 4]})
    got = {r["alias"]: r["misses_explained"]
           for r in alias_proposals(terms, vocab).iter_rows(named=True)}
    assert got == {"retrieval": 12, "cache": 5}


def test_id_like_terms_get_no_proposal():
    t, v = _frames(["3f9a2c1", "cap-1234", "sess-77", "retreival"],
                   {"retrieval": 3, "cap": 9, "sess": 4, "3f9a2": 1})
    assert alias_proposals(t, v).get_column("term").to_list() == ["retreival"]


@pytest.mark.parametrize("rules", [AliasRules(per_term=0), AliasRules(max_distance=0)])
def test_rules_that_allow_nothing_propose_nothing(rules):
    t, v = _frames(["retreival"], {"retrieval": 3})
    assert alias_proposals(t, v, rules).is_empty()


def test_frequency_per_edit_must_make_sense():
    from memframe.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="frequency_per_edit"):
        AliasRules(frequency_per_edit=1)
