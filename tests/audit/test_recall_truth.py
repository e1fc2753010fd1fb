"""The recall-coverage audit and the life of a miss scored against a synthetic store whose
receipts are known by construction: ``memframe.synth.recall_truth`` plants dead weight
(capsules never recalled nor returned) and resolutions (misses a later receipt answers)."""

from __future__ import annotations

import polars as pl
import pytest

import memframe as mf
from memframe import synth
from memframe.audit import score_recall
from memframe.text import fold_term

SEED, CAPSULES, MISSES, RECEIPTS = 3, 800, 300, 2000

pytestmark = pytest.mark.xdist_group("synth-recall-truth")


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "noisy"])
def scored(request, tmp_path_factory):
    kw = dict(capsules=CAPSULES, noise=request.param, misses=MISSES, receipts=RECEIPTS)
    store = synth.synthesize(tmp_path_factory.mktemp("recall") / "s", seed=SEED, **kw)
    truth = synth.recall_truth(SEED, **kw)
    coverage = mf.audit.recall_coverage(store)
    audit = mf.audit.recall_misses(store)
    return store, truth, coverage, audit


def test_the_audits_score_at_least_095_on_the_planted_truth(scored):
    _, truth, coverage, audit = scored
    score = score_recall(coverage.never_recalled, audit.lifecycle, truth)
    # the truth plants enough to score: dead weight, receipts answering, terms left open
    assert score.planted_dead >= 50 and score.planted_resolutions >= 20
    assert truth.resolutions["resolved_at"].null_count() >= 20
    assert (truth.resolutions["resolution"] == "capsule").sum() >= 5
    assert score.planted_aliases >= 20  # taught aliases resolve some typo terms
    assert score.planted_alias_recall >= 0.95
    assert score.dead_weight_recall >= 0.95
    assert score.never_recalled_precision >= 0.95
    assert score.planted_resolution_recall >= 0.95
    assert score.resolution_accuracy >= 0.95


def test_the_planted_dead_weight_is_live_and_never_named(scored):
    store, truth, _, _ = scored
    state = store.capsule_state().collect()
    dead = set(truth.dead_weight["id"])
    live = set(state.filter(pl.col("status") == "live")["id"])
    assert dead <= live
    named = set(store.table("recalls").collect()["capsule_id"]) | set(
        store.table("recall_receipts").collect()["returned_ids"].explode().drop_nulls())
    assert not dead & named
    assert set(truth.recalled["id"]) == named


def test_planted_resolutions_are_receipts_or_aliases_after_the_last_miss(scored):
    store, truth, _, _ = scored
    receipts = store.table("recall_receipts").collect()
    by_id = {r["id"]: r for r in receipts.iter_rows(named=True)}
    taught = {(r["term"], r["alias"]): r["at"] for r in
              store.table("recall_aliases").collect().iter_rows(named=True)}
    planted = truth.resolutions.filter("planted")
    for row in planted.iter_rows(named=True):
        if row["resolution"] == "alias":
            assert taught[(row["term"], row["resolved_by"])] == row["resolved_at"]
            assert row["resolved_at"] > row["last_miss"]
            continue
        receipt = by_id[row["resolved_by"]]
        assert receipt["at"] == row["resolved_at"] > row["last_miss"] >= row["first_miss"]
        assert receipt["returned_ids"]
        assert [fold_term(t) for t in receipt["terms"]] == [row["term"]]


def test_a_wrong_audit_scores_low(scored):
    store, truth, coverage, audit = scored
    # an audit that lists nothing, and a lifecycle that resolves nothing, fail the bar
    empty = coverage.never_recalled.clear()
    opened = audit.lifecycle.with_columns(pl.lit(None).cast(pl.Datetime("ns", "UTC"))
                                          .alias("resolved_at"),
                                          pl.lit(None, dtype=pl.String).alias("resolved_by"))
    score = score_recall(empty, opened, truth)
    assert score.dead_weight_recall == 0.0
    assert score.planted_resolution_recall == 0.0 and score.planted_alias_recall == 0.0
    # an audit that ignores taught aliases misses every planted alias resolution
    no_alias = truth.resolutions.filter(pl.col("resolution") == "alias").select("term")
    blind = audit.lifecycle.join(no_alias, on="term", how="anti")
    assert score_recall(coverage.never_recalled, blind, truth).planted_alias_recall == 0.0
    # one taught too early (the term missed again after it) must not resolve the term
    early = store.table("recall_aliases").collect().join(
        audit.lifecycle, on="term").filter(pl.col("at") < pl.col("last_miss"))
    assert early.height >= 1
    assert not early.filter(pl.col("resolved_by").eq_missing(pl.col("alias"))
                            & pl.col("resolved_at").eq_missing(pl.col("at"))).height
    assert score.resolution_accuracy < 0.95
    # listing every live capsule is not precise: most were recalled
    live = store.capsule_state().filter(pl.col("status") == "live").select("id").collect()
    assert score_recall(live, audit.lifecycle, truth).never_recalled_precision < 0.6


def test_same_arguments_same_truth():
    a = synth.recall_truth(5, capsules=300)
    b = synth.recall_truth(5, capsules=300)
    for name in ("dead_weight", "recalled", "resolutions"):
        assert getattr(a, name).equals(getattr(b, name)), name
    c = synth.recall_truth(6, capsules=300)
    assert not a.dead_weight.equals(c.dead_weight)
