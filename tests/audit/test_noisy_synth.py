"""The audit scored on a noisy synthetic store: capsules hold UUID and hash references,
id-like tokens, numbers, code identifiers, mixed case, diacritics, plurals and a few
misspellings, and ``miss_truth`` still says which typo came from which word."""

from __future__ import annotations

import re

import polars as pl
import pytest

import memframe as mf
from memframe import synth
from memframe.audit import id_like, score_aliases
from memframe.audit.score import TYPO_EDITS
from tests.audit.helpers import osa

SEED, CAPSULES, MISSES = 5, 2500, 1500


# the module keeps to one pytest worker, so its synthetic store is made once per run
pytestmark = pytest.mark.xdist_group("noisy-synth-audit")


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    store = synth.synthesize(tmp_path_factory.mktemp("noisy") / "s", capsules=CAPSULES,
                             seed=SEED, noise=True, misses=MISSES)
    truth = synth.miss_truth(SEED, capsules=CAPSULES, noise=True, misses=MISSES)
    live = (store.capsule_state().filter(pl.col("status") == "live").select("content")
            .collect().get_column("content"))
    return store, truth, live, mf.audit.recall_misses(store)


def test_the_noise_is_there(noisy):
    _, _, live, _ = noisy
    text = "\n".join(live.to_list())
    uuid = r"\b[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    for pattern in (uuid, r"fixed in [0-9a-f]{7}\b", r"commit [0-9a-f]{40}\b", r"\bcap-\d+",
                    r"\bsess-\d+", r"\bPR #\d+", r"\bnode_\d+", r"release v\d+\.\d+\.\d+",
                    r"\d+ms\b", r"\b[a-z]+_[a-z]+\b", r"\b[a-z]+[A-Z][a-z]+\b",
                    r"\b[A-Z][a-z]+[A-Z][a-z]+\b", r"\b[A-Z]{5,}\b", r"Zürich|Łódź|façade"):
        assert re.search(pattern, text), pattern


def test_the_ledger_is_the_truth_and_typos_stay_one_edit(noisy):
    store, truth, live, _ = noisy
    ledger = store.table("recall_misses").sort("seq").select("term", "outcome").collect()
    assert ledger.rows() == truth.select("term", "outcome").rows()
    assert truth.height == MISSES + 2  # the bulk rows and one query through the verb
    tokens = set(live.str.to_lowercase().str.extract_all(r"\w+").explode().drop_nulls())
    typos = truth.filter(pl.col("edit").is_in(TYPO_EDITS)).select("term", "word").unique()
    for term, word in typos.iter_rows():
        assert osa(term, word) == 1
        assert term not in tokens, term  # never a plural, misspelling or phrase word
    kinds = set(truth.get_column("edit"))
    assert kinds == {*TYPO_EDITS, "exact", "absent"}
    absent = truth.filter(pl.col("edit") == "absent").get_column("term")
    assert pl.select(id_like(pl.lit(absent))).to_series().sum() > 0  # hashes, cap-…, sess-…


def test_precision_at_1_on_the_noisy_synth(noisy):
    _, truth, _, audit = noisy
    score = audit.score(truth)
    assert score.typo_terms > 300
    assert score.precision_at_1 >= 0.9
    assert score.recall_at_1 >= 0.9
    assert score.recall >= score.recall_at_1
    by_edit = {r["edit"]: r for r in score.by_edit.iter_rows(named=True)}
    assert by_edit["exact"]["proposed"] == 0  # spelled right: in the vocabulary


def test_no_proposal_names_or_targets_an_id(noisy):
    _, truth, _, audit = noisy
    aliases = audit.aliases
    assert not pl.select(id_like(pl.lit(aliases.get_column("alias")))).to_series().any()
    ids = truth.filter(pl.col("edit") == "absent").filter(id_like(pl.col("term")))
    assert ids.height
    assert aliases.join(ids.select("term"), on="term").is_empty()
    flagged = audit.terms.filter(pl.col("id_like")).get_column("term").to_list()
    assert set(ids.get_column("term")) <= set(flagged)
    assert audit.totals["id_like_terms"] == len(flagged)


def test_diacritic_words_spelled_right_are_in_the_vocabulary(noisy):
    _, truth, _, audit = noisy
    words = set(truth.filter(pl.col("edit") == "exact").get_column("term")) \
        & set(synth._DIACRITIC_WORDS)
    assert words
    rows = audit.terms.filter(pl.col("term").is_in(list(words)))
    assert rows.get_column("in_vocabulary").all()


def test_transposition_typos_get_their_word_first(noisy):
    # plain Levenshtein counts a transposition as two edits, so a word two real edits
    # away used to tie with the right one; the score breaks down per edit
    _, truth, _, audit = noisy
    typos = truth.filter(pl.col("edit") == "transpose").select("term", "word").unique()
    assert typos.height > 50
    first = audit.aliases.filter(pl.col("rank") == 1).select("term", "alias", "distance")
    joined = typos.join(first, on="term", how="left")
    assert (joined.get_column("alias") == joined.get_column("word")).all()
    assert (joined.get_column("distance") == 1).all()
    by_edit = score_aliases(audit.aliases, truth).by_edit.filter(pl.col("edit") == "transpose")
    assert by_edit.select("terms", "correct_at_1").row(0) == (typos.height, typos.height)


def test_default_synth_is_unchanged_by_the_noise_option():
    # the bundled sample store was written before the noise existed
    sample = mf.Store.open(synth.sample_store_path())
    ledger = sample.table("recall_misses").sort("seq").select("term", "outcome").collect()
    truth = synth.miss_truth(synth.SAMPLE_SEED, capsules=synth.SAMPLE_CAPSULES)
    assert ledger.rows() == truth.select("term", "outcome").rows()
    assert synth.miss_truth(synth.SAMPLE_SEED, capsules=synth.SAMPLE_CAPSULES, noise=True) \
        .select("term").rows() != truth.select("term").rows()


def test_command_line_writes_a_noisy_store_with_its_truth(tmp_path, capsys):
    from memframe.cli import main

    out = tmp_path / "noisy"
    assert main(["synth", str(out), "--capsules", "400", "--seed", "9", "--noise",
                 "--misses", "120", "--quiet"]) == 0
    store = mf.Store.open(out)
    truth = synth.miss_truth(9, capsules=400, noise=True, misses=120)
    ledger = store.table("recall_misses").sort("seq").select("term").collect()
    assert ledger.rows() == truth.select("term").rows()
    capsys.readouterr()
    assert main(["audit", "misses", str(out), "--format", "json", "--quiet"]) == 0
    body = capsys.readouterr()
    assert body.err == ""
    assert '"frequency_per_edit":1000' in body.out


def test_a_negative_miss_count_is_refused(tmp_path):
    with pytest.raises(mf.errors.InvalidInputError, match="misses"):
        synth.synthesize(tmp_path / "bad", capsules=300, misses=-1)
    assert not (tmp_path / "bad" / "memframe.json").exists()
