"""The capture verbs: each one commit, journaled, idempotent where the reference says so."""

from __future__ import annotations

import hashlib

import polars as pl
import pytest

import memframe as mf
from memframe.errors import InvalidInputError, SessionError, UnknownCapsuleError
from tests.conftest import verify_chain


def row(content: str, **extra):
    return {"content": content, "source": "note", "anchor": "a", **extra}


def test_ingest_assigns_dense_ids_and_one_commit_per_call(store):
    assert store.ingest([row("a"), row("b")]) == ["cap-1", "cap-2"]
    store.relate("cap-2", "cap-1", "supersedes")
    assert store.ingest(row("c")) == ["cap-3"]
    assert store.generation == 3
    caps = store.table("capsules").collect()
    assert caps["id"].to_list() == ["cap-1", "cap-2", "cap-3"]
    assert caps["source_hash"][0] == hashlib.sha256(b"a").hexdigest()
    assert caps["confidence"].to_list() == [0.6, 0.6, 0.6]
    assert caps["project_id"].unique().to_list() == ["default"]


def test_seq_is_store_wide_strictly_increasing_in_commit_order(store):
    store.ingest([row("a"), row("b")])
    store.relate("cap-1", "cap-2", "blocks")
    store.record_recall(["cap-1"])
    seqs = []
    for name in mf.schema.CANONICAL_TABLES if hasattr(mf, "schema") else []:
        seqs += store.table(name).select("seq").collect()["seq"].to_list()
    from memframe.schema import CANONICAL_TABLES

    seqs = sorted(s for name in CANONICAL_TABLES
                  for s in store.table(name).select("seq").collect()["seq"].to_list())
    assert seqs == list(range(1, len(seqs) + 1))


def test_reingesting_the_same_content_returns_the_existing_id_and_writes_nothing(store):
    store.ingest(row("same"))
    g = store.generation
    assert store.ingest(row("same", source="other", anchor="z")) == ["cap-1"]
    assert store.generation == g
    assert store.ingest([row("new"), row("same"), row("new")]) == ["cap-2", "cap-1", "cap-2"]
    assert store.table("capsules").collect().height == 2


def test_ingest_from_a_dataframe_with_own_created_at_keeps_nanoseconds(store):
    frame = pl.DataFrame({
        "content": ["x", "y"], "source": ["s", "s"], "anchor": ["1", "2"],
        "created_at": ["2026-07-21T23:36:24.016162617Z", "2026-07-23T12:00:00Z"],
        "conversation_id": ["conv-1", None], "kind": ["task", None],
    })
    assert store.ingest(frame) == ["cap-1", "cap-2"]
    caps = store.table("capsules").collect()
    assert caps["created_at"].dt.nanosecond().to_list() == [16162617, 0]
    assert caps["conversation_id"].to_list() == ["conv-1", None]
    state = store.capsule_state().collect()
    assert state["kind"].to_list() == ["task", None]


def test_journal_has_one_row_per_mutation_and_the_chain_verifies(store):
    store.ingest([row("a", kind="epic"), row("b")])
    store.relate("cap-2", "cap-1", "witnesses")
    sid = store.session_start("nmemory")
    store.session_finish(sid, handoff="the handoff")
    store.forget("cap-2", reason="wrong")
    journal = store.table("journal").collect().sort("audit_seq")
    assert journal.select("action", "subject").rows() == [
        ("memory_ingest", "cap-1"), ("memory_ingest", "cap-2"), ("memory_classify", "cap-1"),
        ("memory_relate", "cap-2"), ("memory_session_start", "sess-1"),
        ("memory_ingest", "cap-3"), ("memory_session_finish", "sess-1"),
        ("memory_forget", "cap-2"),
    ]
    assert journal["audit_seq"].to_list() == list(range(1, 9))
    assert verify_chain(journal) == (True, 8)


def test_a_tampered_journal_row_breaks_the_independent_verifier(store):
    store.ingest([row("a"), row("b")])
    journal = store.table("journal").collect()
    tampered = journal.with_columns(
        pl.when(pl.col("audit_seq") == 1).then(pl.lit("memory_forget")).otherwise("action")
        .alias("action"))
    assert verify_chain(tampered) == (False, 1)


def test_relate_is_idempotent_and_refuses_missing_endpoints(store):
    store.ingest([row("a"), row("b")])
    store.relate("cap-1", "cap-2", "blocks")
    g = store.generation
    store.relate("cap-1", "cap-2", "blocks")
    assert store.generation == g
    with pytest.raises(UnknownCapsuleError, match="cap-9"):
        store.relate("cap-1", "cap-9", "blocks")
    with pytest.raises(InvalidInputError, match="allowed: 'supersedes'"):
        store.relate("cap-1", "cap-2", "causes")
    store.relate("out-1", "cap-2", "falsifies")  # outcomes may falsify (reference section 6)
    store.relate("cap-1", "cap-2", "abstracted_into")
    assert store.table("relations").collect().height == 3


def test_sessions_finish_once_and_refuse_a_blank_handoff(store):
    sid = store.session_start("proj")
    assert sid == "sess-1"
    g = store.generation
    with pytest.raises(InvalidInputError, match="blank"):
        store.session_finish(sid, handoff="  \n\t ")
    assert store.generation == g  # refused: the session stays open
    cap = store.session_finish(sid, handoff="next: ship it")
    state = store.capsule_state().collect()
    assert state.filter(pl.col("id") == cap).select("source", "project_id", "content").row(0) == (
        "memory_session_finish", "proj", "next: ship it")
    with pytest.raises(SessionError, match="already finished"):
        store.session_finish(sid)
    with pytest.raises(SessionError, match="never started"):
        store.session_finish("sess-7")
    assert store.session_start("proj") == "sess-2"


def test_record_miss_folds_terms_and_writes_one_row_per_term(store):
    assert store.record_miss(["  Retreival", "retreival", "--", "Ça"], "abstain") == ["retreival", "ca"]
    misses = store.table("recall_misses").collect()
    assert misses.select("term", "outcome").rows() == [("retreival", "abstain"), ("ca", "abstain")]
    g = store.generation
    assert store.record_miss(["??"], "abstain") == []
    assert store.generation == g


def test_recalls_fold_to_count_and_last_instant(store, clock):
    store.ingest([row("a"), row("b")])
    store.record_recall(["cap-1"])
    store.record_recall(["cap-1", "cap-2"])
    state = store.capsule_state().collect()
    assert state["recall_count"].to_list() == [2, 1]
    last = state["last_recalled_at"].to_list()
    assert last[0] == last[1]


def test_classify_latest_row_wins_and_tier_defaults_to_active(store):
    store.ingest([row("a"), row("b")])
    store.classify("cap-1", kind="task")
    store.classify("cap-1", kind="epic", tier="archived")
    state = store.capsule_state().collect()
    assert state.select("kind", "tier").rows() == [("epic", "archived"), (None, "active")]


def test_transaction_groups_verbs_into_one_commit(store):
    with store.transaction():
        a, b = store.ingest([row("a"), row("b")])
        store.relate(a, b, "blocks")
        store.classify(b, kind="task")
    assert store.generation == 1
    assert store.table("relations").collect().height == 1


def test_a_failing_transaction_writes_nothing(store):
    store.ingest(row("a"))
    g = store.generation
    with pytest.raises(UnknownCapsuleError):
        with store.transaction():
            store.ingest(row("b"))
            store.relate("cap-2", "cap-42", "blocks")
    assert store.generation == g
    assert store.table("capsules").collect().height == 1


def test_git_scan_records_cursor_and_corroborations(store):
    store.ingest([row("a"), row("b")])
    store.record_git_scan("git:/repo", "headsha", [
        {"capsule_id": "cap-1", "kind": "anchor_path", "ref": "src/x.rs", "verdict": "corroborated"},
        {"capsule_id": "cap-2", "kind": "mention", "ref": "abc", "verdict": "missing"},
    ])
    assert store.table("source_cursors").collect().select("source_key", "cursor").rows() == [
        ("git:/repo", "headsha")]
    assert store.table("corroborations").collect()["source"].to_list() == ["git", "git"]


def test_bulk_append_follows_the_verbs_rules(store):
    store.ingest([row(t) for t in "abcd"])
    written = store.append("relations", pl.DataFrame({
        "kind": ["blocks", "blocks", "blocks"], "from_id": ["cap-1", "cap-1", "cap-2"],
        "to_id": ["cap-2", "cap-2", "cap-3"]}))
    assert written == 2
    assert store.append("relations", {"kind": ["blocks"], "from_id": ["cap-1"],
                                      "to_id": ["cap-2"]}) == 0
    journal = store.table("journal").collect()
    assert journal.filter(pl.col("action") == "memory_relate").height == 2
    with pytest.raises(UnknownCapsuleError, match="cap-77"):
        store.append("recalls", {"capsule_id": ["cap-1", "cap-77"]})
    store.append("recalls", {"capsule_id": ["cap-1", "cap-2"], "count": [5, 2]})
    assert store.capsule_state().collect()["recall_count"].to_list() == [5, 2, 0, 0]
