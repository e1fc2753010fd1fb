"""store.teach_alias and the recall_aliases table: folding, refusals, the pair stored once,
the journal row, erasure, time travel, Delta logs and the store's summaries."""

from __future__ import annotations

import datetime as dt

import pytest

import memframe as mf
from memframe.errors import InvalidInputError
from tests.conftest import TickingClock

T0 = dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def store(tmp_path) -> mf.Store:
    return mf.Store.create(tmp_path / "s", clock=TickingClock())


def _pairs(view) -> list[tuple[str, str]]:
    return view.table("recall_aliases").sort("seq").select("term", "alias").collect().rows()


def test_both_sides_fold_and_a_pair_is_stored_once_with_its_first_instant(store):
    assert store.teach_alias("  Configuração ", "config") is True
    assert store.teach_alias("CONFIGURACAO", "Config") is False  # the same pair, refolded
    assert store.teach_alias("configuracao", "cfg") is True
    assert store.teach_alias("config", "configuracao") is True  # one way: the reverse is new
    rows = store.table("recall_aliases").sort("seq").collect()
    assert rows.select("term", "alias").rows() == [
        ("configuracao", "config"), ("configuracao", "cfg"), ("config", "configuracao")]
    assert rows["at"][0] == T0 + dt.timedelta(seconds=1)  # the first teaching's instant
    # one journal row per pair written, naming term and alias as the caller spelled them
    journal = store.table("journal").sort("seq").select("action", "subject", "reason").collect()
    assert journal.rows() == [("memory_alias", "  Configuração ", "alias=config"),
                              ("memory_alias", "configuracao", "alias=cfg"),
                              ("memory_alias", "config", "alias=configuracao")]


@pytest.mark.parametrize(("term", "alias", "message"), [
    ("  ", "x", r"term '  ' is empty once folded .*give the word recall callers search"),
    ("x", "\t\n", r"alias '\\t\\n' is empty once folded"),
    ("Tokio", "TÓKIO", r"alias 'TÓKIO' folds to the term itself \('tokio'\)"),
    (None, "x", r"term must be text \(a str\); got NoneType"),
    ("x", ["y"], r"alias must be text"),
])
def test_bad_input_is_refused_naming_what_and_nothing_is_written(store, term, alias, message):
    generation = store.generation
    with pytest.raises(InvalidInputError, match=message):
        store.teach_alias(term, alias)
    assert store.generation == generation
    assert store.table("recall_aliases").collect().is_empty()
    assert store.table("journal").collect().is_empty()


def test_the_bulk_path_folds_skips_stored_pairs_and_refuses_a_whole_bad_batch(store):
    store.teach_alias("pg", "postgres")
    assert store.append("recall_aliases", {"term": ["PG", "k8s", "K8S"],
                                           "alias": ["Postgres", "kubernetes", "Kubernetes"]}) == 1
    assert _pairs(store) == [("pg", "postgres"), ("k8s", "kubernetes")]
    generation = store.generation
    with pytest.raises(InvalidInputError, match=r"recall_aliases row 1: alias 'Y' folds to "
                                                r"its term \('y'\)"):
        store.append("recall_aliases", {"term": ["x", "y"], "alias": ["z", "Y"]})
    with pytest.raises(InvalidInputError, match=r"recall_aliases row 0: term is blank"):
        store.append("recall_aliases", {"term": [None], "alias": ["z"]})
    assert store.generation == generation and len(_pairs(store)) == 2


def test_teaching_inside_a_transaction_sees_its_own_pairs(store):
    with store.transaction() as tx:
        assert tx.teach_alias("a", "b") is True
        assert tx.append("recall_aliases", {"term": ["A"], "alias": ["B"]}) == 0
    assert _pairs(store) == [("a", "b")]
    # a second handle learns the stored pairs from the log
    other = mf.Store.open(store.path, clock=TickingClock())
    assert other.teach_alias("a", "b") is False and other.teach_alias("a", "c") is True


def test_a_forget_in_any_mode_leaves_the_aliases(store):
    ids = store.ingest([{"content": f"retrieval note {i}", "source": "s", "anchor": str(i)}
                        for i in range(3)])
    store.teach_alias("retreival", "retrieval")
    store.teach_alias("ghost", ids[0])  # an alias may be any text, a capsule id too
    for cid, mode in zip(ids, ("tombstone", "redact", "purge"), strict=True):
        store.forget(cid, mode=mode, reason="gone")
    assert _pairs(store) == [("retreival", "retrieval"), ("ghost", "cap-1")]


def test_time_travel_and_the_store_summaries(store):
    store.teach_alias("pg", "postgres")
    first = store.generation
    store.teach_alias("pg", "psql")
    assert _pairs(store.at(first)) == [("pg", "postgres")]
    assert _pairs(store.as_of(T0 + dt.timedelta(seconds=1, milliseconds=500))) == [
        ("pg", "postgres")]
    assert _pairs(store) == [("pg", "postgres"), ("pg", "psql")]
    assert "recall_aliases" in repr(store) and "2 rows" in repr(store)
    assert "recall_aliases" in store._repr_html_()


def test_the_delta_log_carries_the_table(tmp_path):
    from tests.store.delta_readers import assert_readers_match

    store = mf.Store.create(tmp_path / "s", clock=TickingClock(), delta_logs=True)
    store.teach_alias("pg", "postgres")
    store.teach_alias("Ångström", "angstrom unit")
    assert_readers_match(store, tmp_path / "scratch", duckdb=False, tables=["recall_aliases"])
