"""memframe.synth: determinism, realistic shape, miss ground truth, the sample store."""

from __future__ import annotations

import datetime as dt
import random
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe import graph, synth
from memframe import schema as S
from memframe.errors import InvalidInputError, MemframeError, MemoryBudgetError
from tests.audit.helpers import osa

N = 1500


def _levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _tables(store: mf.Store) -> dict[str, pl.DataFrame]:
    return {name: store.table(name).collect().sort("seq") for name in S.CANONICAL_TABLES}


# the module keeps to one pytest worker, so its synthetic store is made once per run
pytestmark = pytest.mark.xdist_group("synth")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> mf.Store:
    return synth.synthesize(tmp_path_factory.mktemp("synth") / "s", capsules=N, seed=0)


@pytest.fixture(scope="module")
def tables(synthetic: mf.Store) -> dict[str, pl.DataFrame]:
    return _tables(synthetic)


@pytest.fixture(scope="module")
def state(synthetic: mf.Store) -> pl.DataFrame:
    return synthetic.capsule_state().collect()


# ---- determinism -----------------------------------------------------------------------

def test_same_arguments_give_identical_tables(tmp_path: Path, tables: dict[str, pl.DataFrame]) -> None:
    again = _tables(synth.synthesize(tmp_path / "again", capsules=N, seed=0))
    for name in S.CANONICAL_TABLES:
        assert again[name].equals(tables[name]), name


def test_another_seed_gives_another_store(tmp_path: Path, tables: dict[str, pl.DataFrame]) -> None:
    other = _tables(synth.synthesize(tmp_path / "other", capsules=N, seed=1))
    assert not other["capsules"]["content"].equals(tables["capsules"]["content"])
    assert other["capsules"].height == N


def test_synthesis_writes_in_bulk_commits(synthetic: mf.Store, tables: dict[str, pl.DataFrame]) -> None:
    # far fewer generations than rows: events land as one commit per table
    rows = sum(frame.height for frame in tables.values())
    assert synthetic.generation < rows / 20


# ---- chunks and the memory budget ----------------------------------------------------------

@pytest.mark.parametrize("noise", [False, True])
def test_a_store_made_in_chunks_is_the_store_made_at_once(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         noise: bool) -> None:
    args = {"capsules": N, "seed": 2, "noise": noise, "dag_cycle": True}
    whole = _tables(synth.synthesize(tmp_path / "whole", **args))
    # a tenth of the store per chunk, and receipts a few hundred per commit: every random
    # stream is read in pieces, the recall counts of ten chunks are folded and added up,
    # the receipts land in turns
    monkeypatch.setattr(synth, "_CHUNK_CAPSULES", N // 10)
    monkeypatch.setattr(synth, "_RECEIPT_ROWS", 200)
    fills: list[int] = []
    rows = synth._Plan.rows

    def counted(plan: synth._Plan, lo: int, hi: int) -> pl.DataFrame:
        fills.append(hi - lo)
        return rows(plan, lo, hi)

    monkeypatch.setattr(synth._Plan, "rows", counted)
    store = synth.synthesize(tmp_path / "chunks", **args)
    assert len(fills) >= 6 and max(fills) <= N // 4  # really made a chunk at a time
    assert len(store.files("recall_receipts")) > 1  # really written in turns
    chunked = _tables(store)
    for name in S.CANONICAL_TABLES:
        assert chunked[name].equals(whole[name]), name


def test_journal_chained_a_small_piece_at_a_time_is_the_journal_chained_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        tables: dict[str, pl.DataFrame]) -> None:
    # each commit renders and chains its journal lines one partition's rows at a time: a
    # few rows per partition makes every bulk commit do it in many pieces
    from memframe.store import tables as store_tables

    monkeypatch.setattr(store_tables, "PART_ROWS", 97)
    store = synth.synthesize(tmp_path / "pieces", capsules=N, seed=0)
    assert len(store.files("journal")) > 2 * len(store.files("capsules"))  # really in pieces
    pieces = _tables(store)
    for name in S.CANONICAL_TABLES:
        assert pieces[name].equals(tables[name]), name


def test_a_budget_too_small_for_one_chunk_is_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    with mf.memory_limit("64MiB"), pytest.raises(MemoryBudgetError, match="memframe synth"):
        synth.synthesize(tmp_path / "s", capsules=N)
    assert not (tmp_path / "s").exists()


def test_the_memory_budget_sizes_the_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMFRAME_MEMORY_LIMIT", raising=False)
    params = synth.SynthParams.for_capsules(3_000_000)
    assert synth._chunk_capsules(params, 100_000) == synth._CHUNK_CAPSULES  # no budget
    room = synth._FIXED_BYTES + synth._STORE_BYTES * 3_000_000
    with mf.memory_limit(int(room + 150_000 * synth._CHUNK_BYTES)):
        assert synth._chunk_capsules(params, 100_000) == 150_000
    with mf.memory_limit(int(room + 50_000 * synth._CHUNK_BYTES)):
        with pytest.raises(MemoryBudgetError):  # less than one ingest commit's rows
            synth._chunk_capsules(params, 100_000)
        assert synth._chunk_capsules(params, 40_000) == 50_000


# ---- shape -------------------------------------------------------------------------------

def test_exact_capsule_count_and_every_table_non_empty(tables: dict[str, pl.DataFrame]) -> None:
    assert tables["capsules"].height == N
    assert tables["capsules"]["id"].to_list() == [f"cap-{i}" for i in range(1, N + 1)]
    empty = [name for name, frame in tables.items() if frame.height == 0]
    # review and pin events (reference 4.17) are not synthesised: the sample store has none
    assert empty == ["reviews", "pins"]


def test_receipts_event_times_and_epistemics(tables: dict[str, pl.DataFrame],
                                             state: pl.DataFrame) -> None:
    receipts = tables["recall_receipts"]
    # one receipt per two capsules by default, ids in write order, never before what they
    # return
    assert receipts.height == N // 2
    assert receipts["id"].to_list() == [f"rcpt-{i}" for i in range(1, N // 2 + 1)]
    assert receipts["at"].is_sorted()
    hit = receipts["returned_ids"].list.len() > 0
    assert set(receipts.filter(hit)["outcome"]) == {"grounded"}
    assert set(receipts.filter(~hit)["outcome"]) <= {"abstain", "missing_evidence"}
    assert 0 < (~hit).sum() < hit.sum()
    created = dict(tables["capsules"].select("id", "created_at").iter_rows())
    for at, ids in receipts.filter(hit).select("at", "returned_ids").iter_rows():
        assert all(created[i] <= at for i in ids)
    # the abstaining receipts repeat recorded misses, at their instants
    misses = set(tables["recall_misses"].select("at", "term").iter_rows())
    assert {(at, terms[0]) for at, terms in receipts.filter(~hit).select("at", "terms")
            .iter_rows()} <= misses
    # planted dead weight: some live capsules nothing ever names
    named = set(tables["recalls"]["capsule_id"]) | set(receipts["returned_ids"].explode()
                                                       .drop_nulls())
    live = set(state.filter(pl.col("status") == "live")["id"])
    assert len(live - named) > N // 20
    times = tables["event_times"]
    assert times.height > 0 and times["event_at"].null_count() > 0
    assert (times["event_at"].is_null() == times["event_from"].is_not_null()).all()
    assert (times["event_to"] >= times["event_from"]).all()
    epi = tables["epistemics"]
    assert set(epi["evidence_state"]) == {"observed", "inferred", "unverified"}
    assert epi["proof_hint"].null_count() > 0 and epi["stale_if"].null_count() > 0
    # taught aliases: typo terms (folded by the store) mapped to the word they meant, one
    # journal row each naming the term as it was spelled
    taught = tables["recall_aliases"]
    assert taught.height > 0 and taught["at"].is_sorted()
    assert set(taught["term"]) <= set(tables["recall_misses"]["term"])
    assert set(taught["alias"]) <= set(synth.VOCABULARY)
    spelled = tables["journal"].filter(pl.col("action") == "memory_alias")
    assert spelled.height == taught.height
    assert (spelled["subject"] != taught["term"]).any()  # some in title case, as typed


def test_recall_tables_can_be_left_out(tmp_path: Path, tables: dict[str, pl.DataFrame]) -> None:
    bare = _tables(synth.synthesize(tmp_path / "bare", capsules=N, seed=0, recall_tables=False))
    for name in S.CANONICAL_TABLES:
        if name in ("recall_receipts", "event_times", "epistemics", "recall_aliases"):
            assert bare[name].height == 0
        elif name == "journal":  # epistemics and aliases are journaled, after the rest
            assert tables[name].head(bare[name].height).equals(bare[name])
        else:
            assert bare[name].equals(tables[name]), name


def test_project_tree_and_conversations(tables: dict[str, pl.DataFrame]) -> None:
    caps = tables["capsules"]
    projects = set(caps["project_id"].unique())
    assert {"team", "team/api", "team/web", "ops", "ops/infra"} <= projects
    assert caps["conversation_id"].null_count() > 0  # standalone notes
    sizes = caps.group_by("conversation_id").len().drop_nulls()["len"]
    assert sizes.max() >= 20 and sizes.median() >= 3
    # bursty: rows of a conversation come minutes apart, with some pauses of hours
    gaps = (
        caps.drop_nulls("conversation_id")
        .sort("conversation_id", "created_at")
        .select((pl.col("created_at").diff().over("conversation_id")).dt.total_seconds())
        .drop_nulls()
        .to_series()
    )
    assert gaps.median() < 300
    assert (gaps > 3600).sum() > 0
    span = caps["created_at"].max() - caps["created_at"].min()
    assert span > dt.timedelta(weeks=3)


def test_timestamps_carry_up_to_nine_fractional_digits(tables: dict[str, pl.DataFrame]) -> None:
    nanos = tables["capsules"]["created_at"].dt.nanosecond()
    assert (nanos == 0).sum() > 0  # whole seconds
    assert (nanos % 1000 != 0).sum() > 0  # nine digits
    assert ((nanos % 1000 == 0) & (nanos % 1_000_000 != 0)).sum() > 0  # microseconds


def test_some_capsules_arrive_after_newer_ones(tables: dict[str, pl.DataFrame]) -> None:
    created = tables["capsules"]["created_at"]
    assert (created.diff().dt.total_seconds() < -3600).sum() > 0


def test_valid_to_expiries(tables: dict[str, pl.DataFrame]) -> None:
    caps = tables["capsules"]
    valid_to = caps["valid_to"]
    assert 0 < valid_to.is_not_null().sum() < caps.height
    assert (valid_to < caps["created_at"].max()).sum() > 0  # expired by the timeline's end
    assert (valid_to >= caps["valid_from"]).all()


def test_bracket_sessions_with_handoffs_some_open(tables: dict[str, pl.DataFrame]) -> None:
    brackets = tables["brackets"]
    started = set(brackets.filter(pl.col("event") == "start")["session_id"])
    finished = set(brackets.filter(pl.col("event") == "finish")["session_id"])
    assert finished < started  # some left open
    handoffs = tables["capsules"].filter(pl.col("source") == "memory_session_finish")
    assert 0 < handoffs.height < len(finished)  # some finished without a handoff
    assert set(handoffs["anchor"]) <= finished


def test_thread_handoffs_chained_with_supersedes(state: pl.DataFrame,
                                                 tables: dict[str, pl.DataFrame]) -> None:
    active = state.filter(pl.col("content").str.starts_with("ACTIVE("))
    labels = active["content"].str.extract(r"^ACTIVE\(([^)]*)\)")
    assert labels.n_unique() >= 3
    assert "scrub" in set(labels)
    assert (active["status"] == "superseded").sum() > 0
    assert (active["status"] == "live").sum() > 0
    supersedes = tables["relations"].filter(pl.col("kind") == "supersedes")
    chained = supersedes.filter(pl.col("from_id").is_in(active["id"].implode())
                                & pl.col("to_id").is_in(active["id"].implode()))
    assert chained.height > 0
    # some threads are closed: a non-ACTIVE row supersedes the newest ACTIVE row
    closers = state.filter(pl.col("content").str.starts_with("Closed thread"))
    assert closers.height > 0


def test_supersede_chains_and_tombstones(state: pl.DataFrame) -> None:
    assert (state["status"] == "superseded").sum() > 20
    modes = state["forget_mode"].drop_nulls().value_counts()
    assert set(modes["forget_mode"]) == {"tombstone", "redact", "purge"}
    erased = state.filter(pl.col("forget_mode").is_in(["redact", "purge"]))
    assert erased["content"].null_count() == erased.height
    assert (erased["content_chars"] > 0).all()
    kept = state.filter(pl.col("forget_mode") == "tombstone")
    assert kept["content"].null_count() == 0


def test_supersede_chain_longer_than_one(tables: dict[str, pl.DataFrame]) -> None:
    sup = tables["relations"].filter(pl.col("kind") == "supersedes").select("from_id", "to_id")
    two = sup.join(sup.rename({"from_id": "to_id", "to_id": "further"}), on="to_id")
    assert two.height > 0


def test_blocks_dag_has_ready_blocked_and_done(tables: dict[str, pl.DataFrame],
                                               state: pl.DataFrame) -> None:
    tombstoned = state.filter(pl.col("status") == "tombstoned")["id"]
    dag = graph.blocks_dag(tables["relations"], tombstoned, 10)
    assert dag["status"] == "ok"
    assert dag["ready_total"] > 0 and dag["blocked_total"] > 0 and dag["done_total"] > 0
    tasks = set(state.filter(pl.col("kind") == "task")["id"])
    blocks = tables["relations"].filter(pl.col("kind") == "blocks")
    assert set(blocks["from_id"]) | set(blocks["to_id"]) <= tasks


def test_dag_cycle_behind_a_flag(tmp_path: Path) -> None:
    store = synth.synthesize(tmp_path / "c", capsules=400, seed=2, dag_cycle=True)
    state = store.capsule_state().collect()
    tombstoned = state.filter(pl.col("status") == "tombstoned")["id"]
    dag = graph.blocks_dag(store.table("relations").collect(), tombstoned, 10)
    assert dag["status"] == "cycle"
    assert len(dag["cycle"]) == 3


def test_missions_epics_and_tasks(tables: dict[str, pl.DataFrame], state: pl.DataFrame) -> None:
    kinds = state["kind"].value_counts()
    counts = dict(zip(kinds["kind"], kinds["count"], strict=True))
    assert counts["epic"] >= 3 and counts["task"] >= 12
    epics = set(state.filter(pl.col("kind") == "epic")["id"])
    grounded = tables["relations"].filter(pl.col("kind") == "grounded_in")
    assert set(grounded["to_id"]) <= epics
    mission = graph.mission_graph(tables["relations"],
                                  state.filter(pl.col("status") == "tombstoned")["id"])
    assert mission.cycle is None
    roots = epics - set(mission.grounded_from)
    assert 0 < len(roots) < len(epics)  # some epics are sub-epics of others
    unanchored = state.filter((pl.col("kind") == "task") & (pl.col("status") == "live")
                              & ~pl.col("id").is_in(mission.grounded_from.implode()))
    assert unanchored.height > 0


def test_recalls_are_zipf_distributed(tables: dict[str, pl.DataFrame], state: pl.DataFrame) -> None:
    recalls = tables["recalls"]
    assert recalls["count"].max() > 1
    usage = state.filter(pl.col("recall_count") > 0)["recall_count"].sort(descending=True)
    top = usage.head(max(1, usage.len() // 100)).sum()
    assert top / usage.sum() > 0.25  # the head of the distribution dominates
    assert (usage == 1).sum() > usage.len() // 4  # ... and a long tail
    tomb = set(state.filter(pl.col("status") == "tombstoned")["id"])
    assert not tomb & set(recalls["capsule_id"])


def test_tiers_kinds_lanes_sources(tables: dict[str, pl.DataFrame], state: pl.DataFrame) -> None:
    assert set(state["tier"]) == {"active", "archived", "quarantined"}
    assert "active" in set(tables["tiers"]["tier"])  # some restored from the archive
    assert state["kind"].n_unique() >= 9
    lanes = set(tables["lane_overrides"].select("forced", "auto_pick").iter_rows())
    assert lanes <= set(S.LANE_PAIRS) and len(lanes) >= 2
    cursors = tables["source_cursors"]
    assert cursors["source_key"].n_unique() == 2
    assert set(tables["corroborations"]["verdict"]) == set(S.CORROBORATION_VERDICTS)
    assert set(tables["corroborations"]["kind"]) == set(S.CORROBORATION_KINDS)
    tainted = state.filter(pl.col("instruction_taint"))
    assert (tainted["authority_class"] == "externally-imported").all() and tainted.height > 0


def test_journal_chain_and_rollups(tables: dict[str, pl.DataFrame]) -> None:
    journal = tables["journal"]
    assert journal["audit_seq"].to_list() == list(range(1, journal.height + 1))
    processing = tables["processing"]
    assert processing["abstracted_into_memory_id"].n_unique() == 2
    edges = tables["relations"].filter(pl.col("kind") == "abstracted_into")
    assert edges.height == processing.height


def test_digest_of_a_synthetic_store(synthetic: mf.Store) -> None:
    body = mf.digest(synthetic, headlines=5).to_dict()
    assert body["total"] > N * 0.95
    assert body["handoff_total"] > 0 and body["open_sessions"] > 0
    assert body["dag"]["status"] == "ok" and body["mission"]["status"] == "ok"
    assert body["journal"]["chain"] == "ok"


# ---- recall misses and their ground truth -----------------------------------------------

def test_miss_ledger_matches_the_ground_truth(tables: dict[str, pl.DataFrame]) -> None:
    truth = synth.miss_truth(0, capsules=N)
    misses = tables["recall_misses"]
    assert misses.select("at", "term", "outcome").equals(truth.select("at", "term", "outcome"))
    assert set(truth["edit"]) == {"transpose", "delete", "substitute", "insert", "exact", "absent"}


def test_typos_are_near_words_the_capsules_contain(tables: dict[str, pl.DataFrame]) -> None:
    truth = synth.miss_truth(0, capsules=N)
    contents = tables["capsules"]["content"].drop_nulls().str.to_lowercase()
    tokens = set(contents.str.extract_all(r"[a-z0-9]+").explode().drop_nulls())
    typos = truth.filter(pl.col("edit").is_in(["transpose", "delete", "substitute", "insert"]))
    assert typos.height > truth.height // 2
    for term, word in typos.select("term", "word").iter_rows():
        assert word in tokens, word
        assert term not in tokens, term
        assert 1 <= _levenshtein(term, word) <= 2
        assert osa(term, word) == 1
    absent = truth.filter(pl.col("edit") == "absent")["term"]
    assert absent.len() > 0 and not set(absent) & tokens


def test_truth_names_the_unique_nearest_word() -> None:
    truth = synth.miss_truth(4, capsules=600)
    typos = truth.filter(pl.col("word").is_not_null() & (pl.col("edit") != "exact"))
    for term, word in typos.select("term", "word").iter_rows():
        best = min(synth.VOCABULARY, key=lambda w: (osa(term, w), w != word))
        assert best == word
        assert sum(osa(term, w) <= 1 for w in synth.VOCABULARY) == 1


def test_vocabulary_is_well_separated() -> None:
    words = synth.VOCABULARY
    assert len(set(words)) == len(words) >= 150
    assert all(re.fullmatch(r"[a-z]{5,}", w) for w in words)
    close = [(a, b) for i, a in enumerate(words) for b in words[i + 1:] if osa(a, b) < 3]
    assert close == []


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(synth.VOCABULARY), st.integers(0, 2**32))
def test_typo_is_one_edit_away(word: str, seed: int) -> None:
    typo, edit = synth.typo_of(word, random.Random(seed))
    assert typo != word and typo not in synth.VOCABULARY
    assert osa(typo, word) == 1
    assert edit in ("transpose", "delete", "substitute", "insert")


# ---- arguments and the sample store -------------------------------------------------------

def test_too_small_a_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="at least 200"):
        synth.synthesize(tmp_path / "tiny", capsules=50)
    with pytest.raises(InvalidInputError, match="aware"):
        synth.synthesize(tmp_path / "naive", clock_start=dt.datetime(2026, 1, 1))


def test_clock_start_moves_the_timeline(tmp_path: Path) -> None:
    start = dt.datetime(2025, 1, 6, tzinfo=dt.UTC)
    store = synth.synthesize(tmp_path / "t", capsules=300, seed=0, clock_start=start)
    created = store.table("capsules").select("created_at").collect().to_series()
    assert created.min() >= start
    assert created.max() <= start + dt.timedelta(days=synth.SynthParams.for_capsules(300).span_days)


def test_sample_store_path_finds_the_repo_copy() -> None:
    path = synth.sample_store_path()
    assert (path / "memframe.json").is_file()
    assert _as_synthesized(mf.Store.open(path)).row_count("capsules") == synth.SAMPLE_CAPSULES


def _as_synthesized(store):
    """The sample as `synthesize` made it: its oldest readable generation, the compaction
    (the generations after it add a handoff, two capsules, a recall and a forget)."""
    oldest = min(g for g in range(1, store.generation + 1) if store.at(g).readable())
    return store.at(oldest)


def test_sample_store_path_prefers_installed_package_data(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = tmp_path / "memframe" / "_data" / "sample-store"
    mf.Store.create(packaged)
    monkeypatch.setattr(synth.resources, "files", lambda _: tmp_path / "memframe")
    assert synth.sample_store_path() == packaged


def test_sample_store_path_teaches_when_missing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synth, "_candidates", lambda: iter([tmp_path / "nothing"]))
    with pytest.raises(MemframeError, match="make_sample_store"):
        synth.sample_store_path()


def test_committed_sample_store_is_what_synth_makes(tmp_path: Path) -> None:
    committed = _tables(_as_synthesized(mf.Store.open(synth.sample_store_path())))
    # a sample written before synth planted the nMEMORY 0.3.0 tables is what synth makes
    # without them (test_recall_tables_can_be_left_out: the other tables are the same)
    planted = committed["recall_receipts"].height > 0
    fresh = _tables(synth.synthesize(tmp_path / "fresh", capsules=synth.SAMPLE_CAPSULES,
                                     seed=synth.SAMPLE_SEED, recall_tables=planted))
    for name in S.CANONICAL_TABLES:
        assert committed[name].equals(fresh[name]), (
            f"{name} differs: regenerate with `python scripts/make_sample_store.py`")


def test_the_progress_bar_counts_handoffs_with_the_chunks(tmp_path, monkeypatch):
    # a handoff is one commit; counted one by one before the first chunk, the bar's first
    # rate was a handful of capsules a second, and its first estimate hundreds of hours
    import tqdm.auto

    updates: list[int] = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            self.total = kwargs.get("total")

        def update(self, n):
            updates.append(n)

        def set_description(self, text):  # the stage after the last capsule
            pass

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    synth.synthesize(tmp_path / "s", capsules=1200, seed=3, progress=True, chunk_rows=150)
    assert sum(updates) == 1200
    assert min(updates[:-1]) >= 2  # never one handoff alone
    assert len(updates) <= 1200 // 150 + 8


def test_the_progress_bar_names_each_stage_after_the_capsules(tmp_path, capsys):
    """The events after the last capsule take the last seconds of a large synth: the bar
    says which table it is writing, never sitting still without a word."""
    from memframe.synth import synthesize

    synthesize(tmp_path / "s", capsules=400, seed=3, progress=True)
    err = capsys.readouterr().err
    stages = re.findall(r"synth: ([a-z ()]+?):", err)
    for stage in ("classifications", "relations", "recalls", "rollups (abstract)", "forgets"):
        assert stage in stages, (stage, stages)
    assert stages.index("forgets") > stages.index("recalls")  # in the order written
