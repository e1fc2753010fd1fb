"""The cycle (rules 1, 5, 7): forward-only over a watermark, one commit, cost follows writes."""

from __future__ import annotations

import datetime as dt
import shutil

import polars as pl

import memframe as mf
from memframe.projections import session_rows
from memframe.projections.session_rows import WATERMARK
from memframe.schema import CANONICAL_TABLES
from tests.conftest import TickingClock
from tests.projections.helpers import bulk_capsules, caps, model_rows, stored_rows


def _canonical_parts(view) -> dict:
    return {name: view.snapshot.parts(name) for name in CANONICAL_TABLES}


def test_cycle_lands_rows_and_watermark_in_one_commit_and_stamps_nothing(mstore):
    mstore.ingest(caps([("a", 1), ("a", 2), ("b", 3)]))
    before = mstore.pinned()
    report = mstore.memory.run_cycle()
    after = mstore.pinned()
    assert after.generation == before.generation + 1 == report.generation
    assert WATERMARK not in before.watermarks
    assert after.watermarks[WATERMARK] == report.watermark == max(
        p.seq_hi for p in after.snapshot.parts("capsules"))
    assert stored_rows(after).height == 2 and stored_rows(before).height == 0
    assert _canonical_parts(after) == _canonical_parts(before)  # nothing stamped on a row
    session = report.projections["session"]
    assert session["rows_folded"] == 3 and session["rows_written"] == 2
    # the same commit records the journal's verified checkpoint (3 journal rows, 1 part)
    assert report.projections["digest"] == {"rows_visited": 3, "rows_folded": 0,
                                            "rows_written": 1}
    # the first cycle builds the live-count indexes from every capsule and forget
    assert report.projections["forgotten"]["rows_visited"] == 3
    # and builds the digest's per-capsule state from the 3 capsule and 3 journal rows
    assert report.projections["digest_capsules"] == {"rows_visited": 6, "rows_folded": 6,
                                                     "rows_written": 3}
    # and, last, keeps the digest's subset sections, from the subset rows that build folded
    # and the graph's tables (empty: nothing read); one row, as no list has an item
    assert report.projections["digest_sections"] == {"rows_visited": 0, "rows_folded": 0,
                                                     "rows_written": 1}
    assert report.rows_visited == session["rows_visited"] + 3 + 3 + 6


def test_a_cycle_with_nothing_new_writes_nothing(mstore):
    mstore.memory.run_cycle()
    assert mstore.generation == 0  # a store that never had a capsule
    mstore.ingest(caps([("a", 1)]))
    mstore.memory.run_cycle()
    g = mstore.generation
    report = mstore.memory.run_cycle()
    assert mstore.generation == g and report.generation is None
    assert (report.rows_folded, report.rows_written, report.rows_visited) == (0, 0, 0)
    mstore.record_recall(["cap-1"])  # nothing new for sessions; new for the digest state
    aggregates = mstore.pinned().row_count("projections/digest_aggregates")
    leaders = mstore.pinned().row_count("projections/text/digest_leaders")
    report = mstore.memory.run_cycle()
    assert report.projections["session"]["rows_folded"] == 0
    # the recall row, the capsule's state row (level 0), the aggregates and the leaders
    # it updates
    assert report.projections["digest_capsules"] == {
        "rows_visited": 1 + 1 + aggregates + leaders, "rows_folded": 1, "rows_written": 1}
    g = mstore.generation
    assert mstore.memory.run_cycle().generation is None and mstore.generation == g


def test_cycle_reads_only_partitions_after_the_watermark(mstore):
    for k in range(5):
        mstore.ingest(caps([(f"c{k}", k), (f"c{k}", k + 0.5)], tag=f"b{k}"))
    mstore.memory.run_cycle()
    mstore.ingest(caps([("new", 9), (None, 9.5), ("new", 10)], tag="fresh"))
    report = mstore.memory.run_cycle()
    session = report.projections["session"]
    # the 3 new capsule rows only: the new partial is appended, no stored row is read
    assert session["rows_visited"] == 3
    assert session["rows_folded"] == 2 and session["rows_written"] == 1
    # the digest's journal checkpoint: the 5 recorded parts + the 3 new journal rows
    assert report.projections["digest"]["rows_visited"] == 5 + 3
    # the live-count indexes reuse the capsule rows the session fold read
    assert report.projections["forgotten"]["rows_visited"] == 0
    assert stored_rows(mstore).to_dicts() == model_rows(mstore)


def test_cycle_cost_does_not_follow_the_store_size(tmp_path):
    visited, written = [], []
    for n_convs in (50, 5_000):
        store = mf.Store.create(tmp_path / f"s{n_convs}", clock=TickingClock())
        store.ingest(bulk_capsules(n_convs, 4))
        store.memory.rebuild_projections()
        # a touched old conversation and a new one
        store.ingest(caps([("conv-00000007", 99_999), ("brand-new", 99_999)], tag="late"))
        report = store.memory.run_cycle().projections["session"]
        visited.append(report["rows_visited"])
        written.append(report["rows_written"])
        assert stored_rows(store).to_dicts() == model_rows(store)
    assert written == [2, 2]
    # the cycle reads the new capsule rows only: a partial row per conversation is
    # appended, no stored row is read, however many conversations are stored
    assert visited == [2, 2]


def test_rebuild_is_a_pure_function_of_canonical_rows(mstore, tmp_path):
    mstore.ingest(caps([("a", 1), ("b", 2), ("a", 3)]))
    mstore.memory.run_cycle()
    mstore.ingest(caps([("b", 0.5)], tag="late"))
    mstore.memory.run_cycle()
    incremental = stored_rows(mstore)
    # durable: another handle (another process's view) reads the same rows
    assert stored_rows(mf.Store.open(mstore.path)).equals(incremental)
    # rebuildable from canonical rows alone: a copy with its projection dropped rebuilds it
    copy = tmp_path / "copy"
    shutil.copytree(mstore.path, copy)
    other = mf.Store.open(copy, clock=TickingClock())
    other.commit(lambda c: [c.write_derived(session_rows.PARTIALS.table(k),
                                            pl.DataFrame(), replace=True)
                            for k in session_rows.PARTIALS.tiers(c.view)], operation="drop")
    assert stored_rows(other).height == 0
    other.memory.rebuild_projections()
    assert stored_rows(other).equals(incremental)


def test_rebuild_never_runs_on_its_own(mstore, monkeypatch):
    from memframe.jobs import cycle

    run = cycle._run

    def refuse(commit, stage, *args):
        if stage == "rebuild":
            raise AssertionError("the rebuild ran without being asked")
        return run(commit, stage, *args)

    monkeypatch.setattr(cycle, "_run", refuse)
    mstore.ingest(caps([("a", 1)]))
    for _ in range(3):
        mstore.memory.run_cycle()
        mstore.memory.sessions()
        mstore.memory.session_digest()
        mstore.ingest(caps([("a", mstore.row_count("capsules") + 1)], tag=str(mstore.generation)))


def test_frozen_views_refuse_the_jobs(mstore):
    mstore.ingest(caps([("a", 1)]))
    view = mstore.at(1)
    for call in (view.memory.run_cycle, view.memory.rebuild_projections,
                 view.memory.run_episode_job):
        try:
            call()
        except mf.errors.ReadOnlyStoreError:
            continue
        raise AssertionError(f"{call} wrote through a frozen view")


def _history(path) -> mf.Store:
    store = mf.Store.create(path, clock=TickingClock())
    store.ingest(bulk_capsules(30, 50))  # 1,500 capsules
    store.record_recall([f"cap-{n}" for n in range(1, 1500, 7)])
    store.relate("cap-3", "cap-9", "blocks")
    store.forget("cap-11", mode="purge")
    return store


def test_a_cycle_over_most_of_a_large_store_folds_it_range_by_range(tmp_path, monkeypatch):
    # a first cycle folds every row above its (absent) watermarks in memory: at 10M
    # capsules 7.75 GiB; past one fold range it takes the rebuild's ranges (the same state)
    from memframe import budget
    from memframe.store import ranges

    plain, ranged = _history(tmp_path / "plain"), _history(tmp_path / "ranged")
    assert plain.memory.run_cycle().notes == ()
    monkeypatch.setattr(ranges, "FOLD_RANGE", 1_001)
    report = ranged.memory.run_cycle()
    assert len(report.notes) == 1 and "most of the store" in report.notes[0]
    assert ranged.history()["operation"][-1] == plain.history()["operation"][-1]
    now = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    for store in (plain, ranged):  # the kept state answers, and it is the reference's
        assert mf.digest(store, now=now).to_json() == mf.digest(store, now=now,
                                                                verify="full").to_json()
    assert mf.digest(plain, now=now).to_json() == mf.digest(ranged, now=now).to_json()
    assert plain.memory.sessions().rows.equals(ranged.memory.sessions().rows)
    # a few new rows: the cycle as always; many, under a budget that cannot hold them: ranged
    for store in (plain, ranged):
        store.ingest(bulk_capsules(1, 20, offset=900, tag="more"))
    assert ranged.memory.run_cycle().notes == ()
    for store in (plain, ranged):
        store.ingest(bulk_capsules(30, 40, offset=1000, tag="late"))  # 1,200 of 2,720
    monkeypatch.setattr(budget, "CYCLE_ROW_BYTES", 10**7)
    with mf.memory_limit("2GB"):
        report = ranged.memory.run_cycle()
    assert "more than the memory budget" in report.notes[0]
    assert plain.memory.run_cycle().notes == ()  # no budget: 1,200 rows fold in memory
    assert mf.digest(plain, now=now).to_json() == mf.digest(ranged, now=now).to_json()
    assert plain.memory.sessions().rows.equals(ranged.memory.sessions().rows)


# -- the cycle's merge of the newest small partitions ------------------------------------------

def _stream(store: mf.Store, n: int, tag: str) -> None:
    """``n`` single-row commits (an ingest and a recall each second one)."""
    for i in range(n):
        [cid] = store.ingest({"content": f"{tag} {i}", "source": "conversation",
                              "anchor": f"{tag}{i}", "conversation_id": f"c{i % 3}"})
        if i % 2:
            store.record_recall([cid])


def _rows(view, name: str) -> pl.DataFrame:
    return view.table(name).collect().sort("seq")


def test_the_cycle_merges_a_stream_of_small_commits_first_and_keeps_every_state_warm(mstore):
    from memframe.digest.state import digest_capsules, journal
    from memframe.store.store import AUTO_COMPACT_PARTS

    mstore.ingest(bulk_capsules(4, 5))  # 20 rows: above the first tier's 16
    _stream(mstore, 6, "early")  # sealed and verified by the cycle and digest below
    mstore.memory.run_cycle()
    mf.digest(mstore)
    bulk = {name: mstore.pinned().snapshot.parts(name)[0] for name in ("capsules", "journal")}
    _stream(mstore, AUTO_COMPACT_PARTS + 4, "late")  # 26 one-row parts, 13 recall parts
    before = mstore.pinned()
    report = mstore.memory.run_cycle()
    after = mstore.pinned()
    ops = mstore.history()["operation"].to_list()
    assert ops[-2:] == ["auto_compact", "memory_projections"]
    assert report.generation == after.generation and not report.notes  # nothing rebuilt
    assert report.merged_parts == {"capsules": 26, "journal": 26}
    assert repr(report).startswith("<memframe CycleReport: merged 52 small partitions first;")
    for name in CANONICAL_TABLES:  # the same rows, every one
        assert _rows(after, name).equals(_rows(before, name)), name
    for name, part in bulk.items():  # the bulk part is above the first tier: kept
        assert [p.rows for p in after.snapshot.parts(name)] == [20, 26]
        assert after.snapshot.parts(name)[0] == part
    assert len(after.snapshot.parts("recalls")) == 13  # fewer than 16: left
    # the digest's state was sealed again over the new files and the checkpoint recorded
    # again by the cycle (from the bulk part on): the warm path stays warm
    assert digest_capsules.seal_holds(after)
    check = journal.check_chain(after)
    assert check.walked == "incremental" and check.reason is None
    assert check.section == {"chain": "ok", "verified": 46}
    assert mf.digest(mstore).to_json() == mf.digest(mstore, verify="full").to_json()
    incremental = mstore.memory.sessions().rows
    mstore.memory.rebuild_projections()
    assert mstore.memory.sessions().rows.equals(incremental)  # rebuild == incremental


def test_a_store_written_row_by_row_keeps_a_few_dozen_parts_whatever_the_commits(
        mstore, monkeypatch):
    from memframe.store import store as store_module

    # four parts of a tier make one of the next: tiers of 4, 16 and 64 rows
    monkeypatch.setattr(store_module, "AUTO_COMPACT_PARTS", 4)
    monkeypatch.setattr(store_module, "AUTO_COMPACT_TIERS", (4, 16, 64))
    merged_rows = 0
    for i in range(60):
        _stream(mstore, 3, f"s{i}")  # 3 capsules, a recall, a cycle: 180 capsules
        before = {p.path: p.rows for p in mstore.pinned().snapshot.parts("capsules")}
        mstore.memory.run_cycle()
        after = {p.path for p in mstore.pinned().snapshot.parts("capsules")}
        merged_rows += sum(rows for path, rows in before.items() if path not in after)
        # fewer than 4 parts in each of the three tiers, and the parts of 64 rows or more
        assert len(after) <= 3 * 4 + 3, sorted(before.values())
    # each row merged again about once per tier, not at every cycle
    assert 180 <= merged_rows <= 3 * 180
    assert mf.digest(mstore).to_json() == mf.digest(mstore, verify="full").to_json()


def test_fewer_small_commits_than_the_bound_are_left_as_they_are(mstore):
    from memframe.store.store import AUTO_COMPACT_PARTS

    mstore.ingest(caps([("a", 1)]))
    mstore.memory.run_cycle()
    _stream(mstore, AUTO_COMPACT_PARTS - 2, "few")  # 15 one-row parts in all
    before = mstore.pinned()
    report = mstore.memory.run_cycle()
    assert report.generation == before.generation + 1 and report.merged_parts == {}
    assert mstore.history()["operation"].to_list()[-1] == "memory_projections"
    assert _canonical_parts(mstore.pinned()) == _canonical_parts(before)


def test_inside_a_transaction_the_cycle_merges_nothing(mstore, monkeypatch):
    from memframe.store import store as store_module

    monkeypatch.setattr(store_module, "AUTO_COMPACT_PARTS", 2)
    _stream(mstore, 6, "tx")
    before = mstore.pinned()
    with mstore.transaction():
        mstore.memory.run_cycle()
    assert mstore.generation == before.generation + 1
    assert _canonical_parts(mstore.pinned()) == _canonical_parts(before)
    _stream(mstore, 3, "out")
    mstore.memory.run_cycle()  # outside one it does
    assert mstore.history()["operation"].to_list()[-2:] == ["auto_compact",
                                                             "memory_projections"]


def test_the_merge_stages_a_bounded_number_of_rows_per_cycle(mstore, monkeypatch):
    from memframe.store import store as store_module

    monkeypatch.setattr(store_module, "AUTO_COMPACT_PARTS", 2)
    monkeypatch.setattr(store_module, "AUTO_COMPACT_ROWS", 4)
    _stream(mstore, 12, "many")  # 12 capsule parts, never cycled: every part is new
    first = mstore._compact_tail()
    assert first == {"capsules": 12}  # one run staged (12 rows): the other tables wait
    assert mstore._compact_tail() == {"recalls": 6}  # capsules' one part: nothing
    mstore.memory.run_cycle()
    assert mf.digest(mstore).to_json() == mf.digest(mstore, verify="full").to_json()


def test_the_merge_runs_again_when_another_handle_vacuumed_the_parts_it_pinned(mstore,
                                                                               monkeypatch):
    from memframe.store import store as store_module

    _stream(mstore, 18, "race")
    other = mf.Store.open(mstore.path)
    real = store_module.StoreView.read_partitions
    raced = []

    def read_after_a_vacuum(self, name, parts, *a, **k):
        if not raced:  # between the merge's pin and its read: merged and vacuumed away
            raced.append({})
            raced[0].update(other.compact())
            other.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=0.001)
        return real(self, name, parts, *a, **k)

    monkeypatch.setattr(store_module.StoreView, "read_partitions", read_after_a_vacuum)
    assert mstore._compact_tail() == {}  # run again: the other handle merged them
    assert raced and raced[0]["capsules"] == 18
    report = mstore.memory.run_cycle()
    assert report.generation == mstore.generation
    assert mf.digest(mstore).to_json() == mf.digest(mstore, verify="full").to_json()


def test_a_part_merged_across_the_seal_is_sealed_and_an_edit_of_it_is_seen(mstore):
    from memframe.digest.state import digest_capsules
    from memframe.store import fingerprint

    mstore.ingest(bulk_capsules(4, 5))
    _stream(mstore, 6, "sealed")
    mstore.memory.run_cycle()  # the seal: the bulk part and six one-row parts
    top = mstore.pinned().watermarks[fingerprint.SEAL_MARK]["seq"]
    _stream(mstore, 12, "new")
    assert mstore._compact_tail() == {"capsules": 18, "journal": 18}
    view = mstore.pinned()
    [merged] = [p for p in view.snapshot.parts("capsules") if p.rows == 18]
    assert merged.seq_lo <= top < merged.seq_hi  # rows the state folded, and new ones
    assert digest_capsules.seal_holds(view)
    # sealed: the bulk capsule and journal parts, the three recall parts, and the two merged
    assert view.watermarks[fingerprint.SEAL_MARK]["parts"] == 7
    # an edit of the merged file (its size moves) is seen: the state is not trusted
    path = mstore.path / merged.path
    frame = pl.read_parquet(path)
    frame.with_columns(pl.col("content").str.replace("sealed 0", "sealed 0, edited")
                       ).write_parquet(path)
    assert not digest_capsules.seal_holds(mstore.pinned())
    report = mstore.memory.run_cycle()
    assert any("rebuilt from every row" in note for note in report.notes)
    assert mf.digest(mstore).to_json() == mf.digest(mstore, verify="full").to_json()
