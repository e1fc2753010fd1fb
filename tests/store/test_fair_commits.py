"""Fair commits (issue 38, item 1): a rewrite that loses the race to an append is rebased
(its written file linked as it is, not read and written again), and a writer holding the
fairness ticket makes new commits wait behind it, for a bound."""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import tempfile
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.jobs import cycle as cycle_module
from memframe.schema import CANONICAL_TABLES
from memframe.store import index, tables
from memframe.store import log as log_module


def _store(tmp_path):
    store = mf.Store.create(tmp_path / "s")
    store.ingest([{"content": f"c{n}", "source": "s", "anchor": str(n)} for n in range(50)])
    return store


def test_a_purge_that_loses_to_an_append_is_rebased_not_redone(tmp_path, monkeypatch):
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    writes: list[str] = []
    reads: list[str] = []
    busy = [False]  # the other handle is committing (its writes are not the purge's)
    real_write, real_read = tables.write_part, store._read_pinned_part

    def write(root, rel, *a, **k):  # noqa: ANN001, ANN202
        if not busy[0]:
            writes.append(rel)
        return real_write(root, rel, *a, **k)

    monkeypatch.setattr(tables, "write_part", write)
    monkeypatch.setattr(log_module, "TICKET_WAIT_SECONDS", 0.2)  # the other handle waits
    monkeypatch.setattr(store, "_read_pinned_part",
                        lambda snap, part: reads.append(part.path) or real_read(snap, part))
    calls = [0]

    def purge(w):
        calls[0] += 1
        if calls[0] <= 2:  # an append lands first, twice: the purge loses the race twice
            busy[0] = True
            other.ingest({"content": f"append {calls[0]}", "source": "s", "anchor": "x"})
            busy[0] = False
        return w.forget("cap-7", mode="purge")

    store.commit(purge, operation="forget")
    assert calls[0] == 3
    capsule_writes = [w for w in writes if w.startswith("capsules/")]
    assert len(capsule_writes) == 1  # the rewrite was written once and linked at the third try
    assert len([r for r in reads if r.startswith("capsules/")]) == 1  # and read once
    caps = store.table("capsules").collect()
    assert caps.filter(caps["id"] == "cap-7")["content"].to_list() == [None]
    assert caps.height == 52
    assert capsule_writes[0] in {p.path for p in store.partitions("capsules")}
    on_disk = {f"capsules/{p.name}" for p in (tmp_path / "s" / "capsules").glob("part-*")}
    # no file of a lost attempt is left behind: everything on disk is some generation's
    ever = {p.path for g in range(1, store.generation + 1)
            for p in store.at(g).partitions("capsules")}
    assert on_disk <= ever


def test_a_true_conflict_is_redone(tmp_path):
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    calls = [0]

    def purge(w):
        calls[0] += 1
        if calls[0] == 1:  # the winner erases in the same partition: the read set changed
            other.forget("cap-3", mode="purge")
        return w.forget("cap-7", mode="purge")

    store.commit(purge, operation="forget")
    caps = store.table("capsules").collect()
    assert set(caps.filter(caps["content"].is_null())["id"]) == {"cap-3", "cap-7"}
    ever = {p.path for g in range(1, store.generation + 1)
            for p in store.at(g).partitions("capsules")}
    assert {f"capsules/{p.name}" for p in (tmp_path / "s" / "capsules").glob("part-*")} <= ever


def test_new_commits_wait_behind_the_ticket_for_a_bound(tmp_path, monkeypatch):
    store = _store(tmp_path)
    holder = mf.Store.open(tmp_path / "s")
    ticket = holder._log.take_ticket()
    assert ticket is not None
    done: list[float] = []

    def small() -> None:
        t0 = time.perf_counter()
        store.ingest({"content": "small", "source": "s", "anchor": "q"})
        done.append(time.perf_counter() - t0)

    thread = threading.Thread(target=small)
    thread.start()
    time.sleep(0.5)
    assert not done  # waiting behind the ticket
    log_module.Log.release_ticket(ticket)  # the holder landed: the queue moves
    thread.join(10)
    assert done and 0.4 <= done[0] < log_module.TICKET_WAIT_SECONDS
    # the wait is bounded: a ticket never released holds nobody up past it
    monkeypatch.setattr(log_module, "TICKET_WAIT_SECONDS", 0.3)
    stuck = holder._log.take_ticket()
    t0 = time.perf_counter()
    store.ingest({"content": "late", "source": "s", "anchor": "l"})
    assert 0.25 <= time.perf_counter() - t0 < 5
    log_module.Log.release_ticket(stuck)


@pytest.fixture
def tickets(monkeypatch) -> list[int | None]:
    """Every fairness ticket taken while the test runs (the fd, None when refused)."""
    taken: list[int | None] = []
    real_take = log_module.Log.take_ticket

    def spy(self, *a, **k):
        fd = real_take(self, *a, **k)
        taken.append(fd)
        return fd

    monkeypatch.setattr(log_module.Log, "take_ticket", spy)
    return taken


def test_a_writer_that_keeps_losing_takes_the_ticket(tmp_path, monkeypatch, tickets):
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    taken = tickets
    # the other handle, in this process, waits behind the ticket for the bound: keep it short
    monkeypatch.setattr(log_module, "TICKET_WAIT_SECONDS", 0.2)
    calls = [0]

    def compact_like(w):
        calls[0] += 1
        if calls[0] <= 3:
            other.ingest({"content": f"a{calls[0]}", "source": "s", "anchor": "a"})
        return w.forget("cap-1", mode="purge")

    store.commit(compact_like, operation="forget")
    assert calls[0] == 4 and len(taken) == 1 and taken[0] is not None


def test_a_commit_stands_aside_once_for_a_ticket_taken_while_it_staged(tmp_path):
    store = _store(tmp_path)
    holder = mf.Store.open(tmp_path / "s")
    calls = [0]
    tickets: list[int | None] = []

    def ingest(w):
        calls[0] += 1
        if calls[0] == 1:  # a rewrite that kept losing takes the ticket now
            tickets.append(holder._log.take_ticket())
            threading.Timer(0.3, log_module.Log.release_ticket, [tickets[0]]).start()
        return w.ingest({"content": "late", "source": "s", "anchor": "l"})

    t0 = time.perf_counter()
    assert store.commit(ingest, operation="ingest") == ["cap-51"]
    assert calls[0] == 2 and tickets[0] is not None
    assert time.perf_counter() - t0 >= 0.25  # it waited behind the ticket, then landed


def test_an_append_that_loses_twice_takes_no_ticket(tmp_path, monkeypatch):
    """Appends never conflict with each other's rows: their retry is cheap, and a ticket
    for every small commit would queue them all behind each other."""
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    taken: list[object] = []
    monkeypatch.setattr(log_module.Log, "take_ticket",
                        lambda self, *a, **k: taken.append(1))
    calls = [0]

    def append(w):
        calls[0] += 1
        if calls[0] <= 3:
            other.ingest({"content": f"a{calls[0]}", "source": "s", "anchor": "a"})
        return w.ingest({"content": "mine", "source": "s", "anchor": "m"})

    store.commit(append, operation="ingest")
    assert calls[0] == 4 and taken == []


def test_a_transaction_that_keeps_losing_is_rebased_and_takes_the_ticket(tmp_path,
                                                                          monkeypatch, tickets):
    """A transaction lands through the same fair path as any commit: its lost races replay
    its verbs on the newer generation, a rewrite it staged is linked as written, and after
    repeated losses it takes the fairness ticket."""
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    taken = tickets
    monkeypatch.setattr(log_module, "TICKET_WAIT_SECONDS", 0.2)
    writes: list[str] = []
    real_write = tables.write_part
    busy = [False]

    def write(root, rel, *a, **k):  # noqa: ANN001, ANN202
        if not busy[0]:
            writes.append(rel)
        return real_write(root, rel, *a, **k)

    monkeypatch.setattr(tables, "write_part", write)
    real_land = store._land
    lands = [0]

    def land(commit, op, kept=None, **k):  # noqa: ANN001, ANN202
        lands[0] += 1
        if lands[0] <= 3:  # another handle lands first, three times
            busy[0] = True
            other.ingest({"content": f"append {lands[0]}", "source": "s", "anchor": "x"})
            busy[0] = False
        return real_land(commit, op, kept, **k)

    monkeypatch.setattr(store, "_land", land)
    with store.transaction():
        store.forget("cap-7", mode="purge")
        store.relate("cap-1", "cap-2", "blocks")
    assert lands[0] == 4 and len(taken) == 1 and taken[0] is not None
    assert len([w for w in writes if w.startswith("capsules/")]) == 1  # rebased, not redone
    caps = store.table("capsules").collect()
    assert caps.filter(caps["id"] == "cap-7")["content"].to_list() == [None]
    assert caps.height == 53
    assert store.table("relations").collect().height == 1
    assert store.history()["operation"][-1] == "transaction"


def _beaten_at_the_link(store, other, monkeypatch, winner, times: int = 1) -> list[int]:
    """Make ``store``'s next link attempts lose: before each of its first ``times`` links,
    ``winner(other, k)`` lands a commit through another handle. Returns the link count."""
    real = store._log.try_commit
    links = [0]

    def try_commit(entry):  # noqa: ANN001, ANN202
        links[0] += 1
        if links[0] <= times:
            winner(other, links[0])
        return real(entry)

    monkeypatch.setattr(store._log, "try_commit", try_commit)
    return links


def _append(other, k):  # noqa: ANN001, ANN202
    other.ingest([{"content": f"appended {k}.{i}", "source": "s", "anchor": f"z{k}",
                   "conversation_id": "conv-late"} for i in range(2)])


def test_a_cycle_beaten_by_appends_links_as_staged(tmp_path, monkeypatch, tickets):
    """The cycle folds what is at or below its watermarks: commits that only appended
    rows above them while it staged change none of it, so it links its files on top of
    theirs (the conflict check of optimistic table formats) instead of folding again."""
    store = _store(tmp_path)
    store.memory.run_cycle()
    store.ingest({"content": "new", "source": "s", "anchor": "n", "conversation_id": "c1"})
    other = mf.Store.open(tmp_path / "s")
    writes: list[str] = []
    real_write = tables.write_part

    def write(root, rel, *a, **k):  # noqa: ANN001, ANN202
        writes.append(rel)
        return real_write(root, rel, *a, **k)

    monkeypatch.setattr(tables, "write_part", write)
    links = _beaten_at_the_link(store, other, monkeypatch, _append, times=2)
    before = store.generation
    report = store.memory.run_cycle()
    # two appends won (one generation each), then the cycle linked on the first retry
    assert links[0] == 3 and tickets == []
    assert report.generation == store.generation == before + 3
    assert store.history()["operation"][-1] == "memory_projections"
    derived = [w for w in writes if w.startswith("projections/")]
    assert derived and len(derived) == len(set(derived))  # each written once
    entry = store._log.read_entry(store.generation)
    assert entry["parent"] == before + 2
    assert entry["counters"] == store._log.read_entry(before + 2)["counters"]
    # the appended rows are above the watermark: read now, folded by the next cycle
    assert report.watermark < store._log.read_entry(before + 1)["seq"][0]
    for _ in range(2):
        warm = mf.digest(store).to_json()
        assert warm == mf.digest(store, verify="full").to_json()
        assert "appended 2.1" in warm
        store.memory.run_cycle()
    folded = store.memory.sessions().rows
    assert folded.filter(pl.col("conversation_id") == "conv-late")["memory_count"].to_list() == [4]
    store.memory.rebuild_projections()  # the fold of every row from scratch agrees
    assert store.memory.sessions().rows.equals(folded)


def test_a_compaction_beaten_by_appends_links_as_staged(tmp_path, monkeypatch, tickets):
    store = mf.Store.create(tmp_path / "s")
    for n in range(6):
        store.ingest({"content": f"c{n}", "source": "s", "anchor": str(n)})
    other = mf.Store.open(tmp_path / "s")
    links = _beaten_at_the_link(store, other, monkeypatch, _append)
    rows_before = store.table("capsules").collect().height
    assert store.compact("capsules") == {"capsules": 6}
    assert links[0] == 2 and tickets == []
    entry = store._log.read_entry(store.generation)
    assert entry.get("compaction") is True and entry["counters"]["capsules"] == 8
    caps = store.table("capsules").collect()
    assert caps.height == rows_before + 2 and caps["id"].is_unique().all()
    assert len(store.partitions("capsules")) == 2  # the merged part and the appended one


@pytest.mark.parametrize("winner", ["purge", "cycle", "derived"])
def test_a_cycle_beaten_by_more_than_appends_folds_again(tmp_path, monkeypatch, winner):
    """A winner that erased, moved a watermark or wrote derived rows changed what the
    cycle read (or cannot be told apart from one that did): it stages again."""
    store = _store(tmp_path)
    store.ingest({"content": "new", "source": "s", "anchor": "n"})
    other = mf.Store.open(tmp_path / "s")

    def win(o, _k):  # noqa: ANN001, ANN202
        if winner == "purge":
            o.forget("cap-3", mode="purge")
        elif winner == "cycle":
            o.memory.run_cycle()
        else:
            o.commit(lambda w: w.write_derived("projections/example", pl.DataFrame({"x": [1]}),
                                               replace=False), operation="example")

    stagings = [0]
    real_report = cycle_module._report

    def report(*a, **k):  # noqa: ANN002, ANN003, ANN202
        stagings[0] += 1
        return real_report(*a, **k)

    monkeypatch.setattr(cycle_module, "_report", report)
    links = _beaten_at_the_link(store, other, monkeypatch, win)
    result = store.memory.run_cycle()
    if winner == "cycle":  # the winner folded everything: nothing is left to write
        assert result.generation is None and stagings[0] == 3  # the winner's, ours twice
    else:
        assert links[0] == 2 and stagings[0] == 2 and result.generation == store.generation
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()


def test_an_erasure_that_loses_reads_the_text_tables_once(tmp_path, monkeypatch):
    """The derived text tables an erasure stages again without the erased rows are read
    once per commit: a retry after a lost race takes them from the commit's reads."""
    store = _store(tmp_path)
    store.memory.run_cycle()  # the digest's text tables exist
    text = [t for t, parts in store.snapshot.tables.items()
            if parts and t.startswith("projections/text/")]
    assert text
    other = mf.Store.open(tmp_path / "s")
    # the other handle, in this process, waits behind the ticket for the bound: keep it short
    monkeypatch.setattr(log_module, "TICKET_WAIT_SECONDS", 0.2)
    reads: list[str] = []
    real_read = pl.read_parquet

    def spy(source, *a, **k):  # noqa: ANN001, ANN202
        if "projections/text/" in str(source):
            reads.append(str(source))
        return real_read(source, *a, **k)

    monkeypatch.setattr(pl, "read_parquet", spy)
    calls = [0]

    def purge(w):
        calls[0] += 1
        if calls[0] <= 2:  # an append lands first, twice
            other.ingest({"content": f"append {calls[0]}", "source": "s", "anchor": "x"})
        return w.forget("cap-7", mode="purge")

    store.commit(purge, operation="forget")
    assert calls[0] == 3
    assert reads and len(reads) == len(set(reads))  # each text part read once, not thrice
    monkeypatch.undo()
    held = 0
    for table in text:  # and the erased capsule's rows are gone from every one of them
        for part in store.partitions(table):
            rows = pl.read_parquet(tmp_path / "s" / part.path)
            held += rows.height
            if "num" in rows.columns:
                assert 7 not in rows["num"].to_list()
            texts = rows.select(pl.col(pl.String)).unpivot()["value"].to_list()
            assert "c6" not in texts  # cap-7's content
    assert held  # the tables still hold the other capsules' rows


def test_a_new_commit_waits_for_a_writer_that_lost_a_race_for_a_bound(tmp_path, monkeypatch):
    """Losers first: the winner of a race starts its next commit at once, a whole attempt
    ahead of the writer that lost to it; a new commit waits while a loser retries."""
    store = _store(tmp_path)
    loser = mf.Store.open(tmp_path / "s")
    mark = loser._log.mark_loser()
    assert mark is not None
    t0 = time.perf_counter()
    store.ingest({"content": "new", "source": "s", "anchor": "n"})
    waited = time.perf_counter() - t0
    assert waited >= log_module.LOSER_WAIT_SECONDS * 0.9  # it waited, up to the bound
    done: list[float] = []

    def small() -> None:
        t1 = time.perf_counter()
        store.ingest({"content": "after", "source": "s", "anchor": "a"})
        done.append(time.perf_counter() - t1)

    monkeypatch.setattr(log_module, "LOSER_WAIT_SECONDS", 5.0)
    thread = threading.Thread(target=small)
    thread.start()
    time.sleep(0.3)
    assert not done  # still behind the loser
    log_module.Log.release_ticket(mark)  # the loser landed: the new commit goes at once
    thread.join(5)
    assert done and 0.25 <= done[0] < 2.0


def test_a_commit_that_lost_is_marked_until_it_ends(tmp_path):
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    marked: list[bool] = []
    calls = [0]

    def losers_waiting() -> bool:
        fd = os.open(tmp_path / "s" / "_log" / log_module.LOSERS_FILE, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def ingest(w):
        calls[0] += 1
        if calls[0] == 1:  # a first attempt: nobody is marked; then it loses once
            marked.append((tmp_path / "s" / "_log" / log_module.LOSERS_FILE).exists()
                          and losers_waiting())
            other.ingest({"content": "winner", "source": "s", "anchor": "w"},)
        else:
            marked.append(losers_waiting())
        return w.ingest({"content": "mine", "source": "s", "anchor": "m"})

    assert store.commit(ingest, operation="ingest") == ["cap-52"]
    assert marked == [False, True]  # marked on its retry
    assert not losers_waiting()  # and no longer once it landed

    def failing(w):
        calls[0] += 1
        if calls[0] == 3:
            other.ingest({"content": "again", "source": "s", "anchor": "w"})
            return w.ingest({"content": "mine 2", "source": "s", "anchor": "m"})
        raise RuntimeError("the caller's own failure")

    with pytest.raises(RuntimeError, match="own failure"):
        store.commit(failing, operation="ingest")
    assert not losers_waiting()  # a commit that ends in an error leaves no mark


def test_maintenance_goes_ahead_of_the_losers(tmp_path, monkeypatch):
    """An erasure, a compaction and the cycle (long first attempts, the ticket after one
    loss) do not wait for small commits' losers; a small commit does."""
    store = _store(tmp_path)
    loser = mf.Store.open(tmp_path / "s")
    monkeypatch.setattr(log_module, "LOSER_WAIT_SECONDS", 2.0)
    mark = loser._log.mark_loser()
    marks: list[object] = []
    real_mark = log_module.Log.mark_loser
    monkeypatch.setattr(log_module.Log, "mark_loser",
                        lambda self: marks.append(self) or real_mark(self))
    try:
        for name, verb in [("purge", lambda: store.forget("cap-3", mode="purge")),
                           ("redact", lambda: store.forget("cap-4", mode="redact")),
                           ("compact", store.compact),
                           ("cycle", store.memory.run_cycle)]:
            t0 = time.perf_counter()
            verb()
            assert time.perf_counter() - t0 < 1.5, name
        t0 = time.perf_counter()
        store.forget("cap-5")  # a tombstone is a small commit: it waits
        assert time.perf_counter() - t0 >= 1.8
        assert store._losers_first  # the maintenance verbs left the handle as it was
        assert marks == []  # and none that did not lose marked itself a loser
    finally:
        log_module.Log.release_ticket(mark)


@pytest.mark.parametrize("name", [log_module.LOSERS_FILE, log_module.PENDING_FILE])
def test_a_fifo_planted_as_the_ticket_or_the_losers_mark_holds_no_commit(tmp_path, name):
    """The probes open those files without blocking: a FIFO under either name (a hostile
    or broken store) once held every commit in open() for ever."""
    store = _store(tmp_path)
    os.mkfifo(tmp_path / "s" / "_log" / name)
    done: list[list[str]] = []
    thread = threading.Thread(
        target=lambda: done.append(store.ingest({"content": "y", "source": "s",
                                                 "anchor": "b"})), daemon=True)
    thread.start()
    thread.join(10)
    assert done == [["cap-51"]]


@pytest.mark.parametrize("mode", ["purge", "redact"])
def test_an_erasure_beaten_by_appends_renumbers_its_rows_and_links(tmp_path, monkeypatch,
                                                                   tickets, mode):
    """An erasure's rewrite is kept when commits that only appended beat it: its forgets
    and journal rows move past theirs (seq, audit seq, the chain) and it links without
    staging again or taking the ticket. The store reads as if it had been staged last."""
    store = _store(tmp_path)
    store.memory.run_cycle()
    other = mf.Store.open(tmp_path / "s")
    writes: list[str] = []
    busy = [False]  # the other handle is committing (its writes are not the erasure's)
    real_write = tables.write_part

    def write(root, rel, *a, **k):  # noqa: ANN001, ANN202
        if not busy[0]:
            writes.append(rel)
        return real_write(root, rel, *a, **k)

    stagings = [0]
    real_forget = mf.store.capture.forget

    def forget(c, capsule_id, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        stagings[0] += capsule_id == "cap-7"
        return real_forget(c, capsule_id, *a, **k)

    monkeypatch.setattr(mf.store.capture, "forget", forget)
    monkeypatch.setattr(tables, "write_part", write)

    def win(o, k):  # noqa: ANN001, ANN202
        busy[0] = True
        _append(o, k)
        o.record_recall(["cap-7"])  # a winner that names the erased capsule appends only
        o.forget(f"cap-{8 + k}")  # so does a tombstone of another capsule
        busy[0] = False

    links = _beaten_at_the_link(store, other, monkeypatch, win, times=2)
    before = store.generation
    store.forget("cap-7", mode=mode, reason="asked")
    assert stagings[0] == 1 and tickets == [] and links[0] == 3
    assert store.generation == before + 7  # three winners twice, then the erasure
    assert len([w for w in writes if w.startswith("capsules/")]) == 1  # rewritten once
    entry = store._log.read_entry(store.generation)
    won = store._log.read_entry(store.generation - 1)
    assert entry["parent"] == store.generation - 1
    assert entry["seq"][0] == won["counters"]["seq"] + 1
    assert entry["counters"]["seq"] == entry["seq"][1]
    assert entry["counters"]["audit_seq"] == won["counters"]["audit_seq"] + 1
    # every seq is unique and the forgets row is the newest
    for table in ("forgets", "journal", "capsules", "recalls"):
        seqs = store.table(table).select("seq").collect()["seq"]
        assert seqs.is_unique().all(), table
    forgets = store.table("forgets").collect().sort("seq")
    assert forgets.tail(1).select("capsule_id", "mode", "reason").rows() == [
        ("cap-7", mode, "asked")]
    caps = store.table("capsules").collect()
    assert caps.filter(pl.col("id") == "cap-7")["content"].to_list() == [None]
    # the audit chain verifies across the renumbered row, and every reader agrees
    digest = mf.digest(store)
    assert digest.to_dict()["journal"]["chain"] == "ok"
    assert digest.to_json() == mf.digest(store, verify="full").to_json()
    store.memory.run_cycle()
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()
    # no file of a lost attempt is left behind
    ever = {p.path for g in range(1, store.generation + 1) for t in ("forgets", "journal")
            for p in store.at(g).partitions(t)}
    on_disk = {f"{t}/{p.name}" for t in ("forgets", "journal")
               for p in (tmp_path / "s" / t).glob("part-*")}
    assert on_disk <= ever
    # and a fresh handle sees the same store (the indexes learn the renumbered rows)
    fresh = mf.Store.open(tmp_path / "s")
    assert fresh.capsule_state().collect().equals(store.capsule_state().collect())
    for handle in (store, fresh):  # both know it is forgotten as thoroughly already
        generation = handle.generation
        handle.forget("cap-7", mode=mode)
        assert handle.generation == generation


def test_an_erasure_beaten_by_another_erasure_stages_again(tmp_path, monkeypatch, tickets):
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    stagings = [0]
    real_forget = mf.store.capture.forget

    def forget(*a, **k):  # noqa: ANN002, ANN003, ANN202
        stagings[0] += 1
        return real_forget(*a, **k)

    monkeypatch.setattr(mf.store.capture, "forget", forget)
    _beaten_at_the_link(store, other, monkeypatch,
                        lambda o, _k: o.forget("cap-3", mode="purge"))
    store.forget("cap-7", mode="purge")
    assert stagings[0] == 3  # the winner's, ours twice: a true conflict
    caps = store.table("capsules").collect()
    assert set(caps.filter(pl.col("content").is_null())["id"]) == {"cap-3", "cap-7"}
    assert mf.digest(store).to_dict()["journal"]["chain"] == "ok"


def _fresh_ingest_beaten_by(tmp_path, monkeypatch, winner, times: int = 1):
    """An ingest of new text (a kind and an event time too) by ``store`` whose first
    ``times`` links lose to ``winner(other, k)``; the store, its stagings, the ids and
    the link attempts."""
    store = _store(tmp_path)
    store.memory.run_cycle()
    other = mf.Store.open(tmp_path / "s")
    stagings = [0]
    real_ingest = mf.store.capture.ingest

    def ingest(c, rows):  # noqa: ANN001, ANN202
        stagings[0] += isinstance(rows, list) and rows[0]["anchor"] == "mine"
        return real_ingest(c, rows)

    monkeypatch.setattr(mf.store.capture, "ingest", ingest)
    links = _beaten_at_the_link(store, other, monkeypatch, winner, times=times)
    ids = store.ingest([{"content": f"new text {i}", "source": "s", "anchor": "mine",
                         "kind": "decision", "conversation_id": "conv-mine",
                         "event_at": "2026-01-02T03:04:05Z"} for i in range(3)])
    monkeypatch.undo()
    return store, stagings[0], ids, links[0]


def _reads_as_staged_last(store, tmp_path) -> None:
    """Every seq unique, the audit chain whole, warm == full, and a fresh handle agrees."""
    for table in ("forgets", "journal", "capsules", "recalls", "classifications"):
        seqs = store.table(table).select("seq").collect()["seq"]
        assert seqs.is_unique().all(), table
    for table in ("capsules", "journal"):
        rows = store.table(table).collect()
        assert rows["seq"].max() <= store.counters["seq"], table
    digest = mf.digest(store)
    assert digest.to_dict()["journal"]["chain"] == "ok"
    assert digest.to_json() == mf.digest(store, verify="full").to_json()
    fresh = mf.Store.open(tmp_path / "s")
    assert fresh.capsule_state().collect().equals(store.capsule_state().collect())
    store.memory.run_cycle()
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()


@pytest.mark.parametrize("verbs", [
    ("purge",), ("redact",), ("compact",), ("cycle",), ("tombstone", "recall"),
    ("session", "purge")])
def test_new_capsules_beaten_by_commits_that_add_none_renumber_and_link(
        tmp_path, monkeypatch, tickets, verbs):
    """An ingest of new text reads nothing stored but the capsule counter and a hash
    lookup that found nothing: commits that added no capsule (an erasure, a compaction,
    the cycle, a tombstone, a recall, a new session) cannot have changed what it decided,
    so it moves its rows past theirs (seq, audit seq, chain) and links, staged once. The
    store reads as if it had been staged last."""
    def win(o, k):  # noqa: ANN001, ANN202
        for verb in verbs:
            if verb in ("purge", "redact"):
                o.forget(f"cap-{10 + k}", mode=verb)
            elif verb == "compact":
                for i in range(3):  # small parts for a compaction to merge
                    o.record_recall([f"cap-{i + 1}"])
                o.compact()
            elif verb == "cycle":
                o.record_recall(["cap-2"])
                o.memory.run_cycle()
            elif verb == "tombstone":
                o.forget(f"cap-{20 + k}")
            elif verb == "recall":
                o.record_recall(["cap-3", "cap-4"])
            elif verb == "session":
                o.session_start("p")

    store, stagings, ids, links = _fresh_ingest_beaten_by(tmp_path, monkeypatch, win, 2)
    assert ids == ["cap-51", "cap-52", "cap-53"]
    assert stagings == 1 and links == 3 and tickets == []
    entry = store._log.read_entry(store.generation)
    won = store._log.read_entry(store.generation - 1)
    assert entry["operation"] == "ingest" and entry["parent"] == store.generation - 1
    assert entry["seq"][0] == won["counters"]["seq"] + 1
    assert entry["counters"]["capsules"] == 53
    assert entry["counters"]["sessions"] == won["counters"]["sessions"]
    assert entry["watermarks"] == won["watermarks"]  # the winners' marks, kept
    state = store.capsule_state().collect().filter(pl.col("id").is_in(ids))
    assert state["kind"].to_list() == ["decision"] * 3
    assert state["conversation_id"].to_list() == ["conv-mine"] * 3
    erased = store.table("capsules").filter(pl.col("content").is_null()).collect()
    assert erased.height == sum(v in ("purge", "redact") for v in verbs) * 2
    _reads_as_staged_last(store, tmp_path)


def test_new_capsules_beaten_by_their_own_text_stage_again(tmp_path, monkeypatch, tickets):
    """Another ingest stored one of the texts first: it answers that text with its id (a
    true conflict), so the ingest stages again, even after a hop it moved past."""
    def win(o, k):  # noqa: ANN001, ANN202
        o.ingest({"content": "other text" if k == 1 else "new text 1", "source": "s",
                  "anchor": "theirs"})

    store, stagings, ids, _ = _fresh_ingest_beaten_by(tmp_path, monkeypatch, win, 2)
    assert stagings == 2
    assert ids == ["cap-53", "cap-52", "cap-54"]  # their cap-52 answers the same text
    _reads_as_staged_last(store, tmp_path)


@pytest.mark.parametrize("winners", [("ingest",), ("ingest", "purge"), ("bulk", "ingest")])
def test_new_capsules_beaten_by_other_new_capsules_move_past_them(tmp_path, monkeypatch,
                                                                   tickets, winners):
    """Two writers that both add capsules no longer stage each other's commits again: an
    ingest of new text that lost to commits adding other new capsules takes the ids after
    theirs (in its capsules, its kind, event time and journal rows, and the ids it
    returns), moves its seqs past theirs and links, staged once. The store reads as if
    it had been staged last, and the handle's lookups know both sides' texts."""
    def win(o, k):  # noqa: ANN001, ANN202
        verb = winners[k - 1]
        if verb == "ingest":
            o.ingest({"content": f"theirs {k}", "source": "s", "anchor": "t", "kind": "task"})
        elif verb == "bulk":
            o.ingest([{"content": f"bulk {i}", "source": "s", "anchor": "b"} for i in range(5)])
        else:
            o.forget("cap-9", mode="purge")

    store, stagings, ids, links = _fresh_ingest_beaten_by(tmp_path, monkeypatch, win,
                                                          len(winners))
    added = 5 * winners.count("bulk") + winners.count("ingest")
    assert stagings == 1 and links == len(winners) + 1 and tickets == []
    assert ids == [f"cap-{51 + added + i}" for i in range(3)]
    entry = store._log.read_entry(store.generation)
    assert entry["operation"] == "ingest" and entry["counters"]["capsules"] == 53 + added
    caps = store.table("capsules").collect()
    assert caps.filter(pl.col("anchor") == "mine").sort("seq")["id"].to_list() == ids
    assert caps["id"].is_unique().all() and caps.height == 53 + added
    state = store.capsule_state().collect().filter(pl.col("id").is_in(ids))
    assert state["kind"].to_list() == ["decision"] * 3
    assert state["conversation_id"].to_list() == ["conv-mine"] * 3
    times = store.table("event_times").collect()
    assert sorted(times["capsule_id"]) == sorted(ids)
    journal = store.table("journal").filter(pl.col("action") == "memory_ingest").collect()
    assert set(ids) <= set(journal["subject"])
    assert journal["subject"].is_unique().all()
    _reads_as_staged_last(store, tmp_path)
    # the handle's lookups hold both sides' texts under their stored ids
    assert store.ingest({"content": "new text 2", "source": "s", "anchor": "m"}) == [ids[2]]
    if "ingest" in winners:
        k = winners.index("ingest") + 1
        theirs = caps.filter(pl.col("content") == f"theirs {k}")["id"].to_list()
        assert store.ingest({"content": f"theirs {k}", "source": "s", "anchor": "m"}) == theirs


def test_an_ingest_that_found_stored_text_stages_again_after_an_erasure(tmp_path, monkeypatch,
                                                                        tickets):
    """A stored capsule that answers the text decides the ingest (forget is sticky): a
    purge of it in between must be seen, so the ingest stages again and refuses."""
    store = _store(tmp_path)
    other = mf.Store.open(tmp_path / "s")
    _beaten_at_the_link(store, other, monkeypatch,
                        lambda o, _k: o.forget("cap-7", mode="purge"))
    with pytest.raises(mf.errors.TombstonedContentError, match="cap-7"):
        store.ingest([{"content": "brand new", "source": "s", "anchor": "a"},
                      {"content": "c6", "source": "s", "anchor": "a"}])  # cap-7's text
    assert store.capsule_state().filter(pl.col("id") == "cap-51").collect().height == 0
    monkeypatch.undo()
    assert store.ingest({"content": "brand new", "source": "s", "anchor": "a"}) == ["cap-51"]


_FIXED = dt.datetime(2026, 6, 1, 12, tzinfo=dt.UTC)


def _winner_verb(o, verb: str, k: int) -> None:  # noqa: ANN001
    """One commit another handle lands first (``k``: which round, for distinct targets)."""
    if verb in ("purge", "redact", "tombstone"):
        o.forget(f"cap-{3 + k}", mode=verb)
    elif verb == "recall":
        o.record_recall(["cap-2", f"cap-{6 + k}"])
    elif verb == "relate":
        o.relate("cap-1", f"cap-{9 + k}", "about")
    elif verb == "compact":
        o.compact()
    elif verb == "cycle":
        o.memory.run_cycle()
    elif verb == "session":
        o.session_start("p")
    elif verb == "ingest new":
        o.ingest({"content": f"theirs {k}", "source": "s", "anchor": "t"})
    else:  # the text the raced ingest brings
        o.ingest({"content": "mine 0", "source": "s", "anchor": "t"})


def _raced_outcome(root, rounds: list[list[str]], rows: list[dict], raced: bool):  # noqa: ANN001, ANN202
    """Seed a store, then land ``rounds`` of winners and ``rows`` as one ingest: raced
    (each round lands through another handle just before the ingest's next link) or in
    order (every round first, then the ingest). Returns the ingest's ids (or the name of
    its error), the store, and how many rounds landed (a raced ingest that wrote nothing,
    or was refused, never reached the later links)."""
    store = mf.Store.create(root, clock=lambda: _FIXED)
    store.ingest([{"content": f"c{n}", "source": "s", "anchor": str(n)} for n in range(16)])
    store.memory.run_cycle()
    other = mf.Store.open(root, clock=lambda: _FIXED)
    links = [0]
    if raced:
        real = store._log.try_commit

        def try_commit(entry):  # noqa: ANN001, ANN202
            links[0] += 1
            if links[0] <= len(rounds):
                for verb in rounds[links[0] - 1]:
                    _winner_verb(other, verb, links[0])
            return real(entry)

        store._log.try_commit = try_commit
    else:
        for k, verbs in enumerate(rounds, start=1):
            for verb in verbs:
                _winner_verb(other, verb, k)
    try:
        outcome: object = store.ingest(rows)
    except mf.errors.MemframeError as exc:
        outcome = type(exc).__name__
    landed = min(links[0], len(rounds)) if raced else len(rounds)
    return outcome, mf.Store.open(root), landed


_VERBS = st.sampled_from(["purge", "redact", "tombstone", "recall", "relate", "compact",
                          "cycle", "session", "ingest new", "ingest mine"])


@settings(max_examples=25, deadline=None)
@given(rounds=st.lists(st.lists(_VERBS, min_size=1, max_size=3), min_size=1, max_size=3),
       texts=st.lists(st.sampled_from(["mine 0", "mine 1", "c3", "c7"]), min_size=1,
                      max_size=3))
def test_a_raced_ingest_reads_as_if_staged_after_its_winners(rounds, texts):
    """Whatever beat an ingest at its links (erasures, compactions, the cycle, other
    ingests, of its own text too), the store ends as if the winners had landed first and
    the ingest after them: the same ids (or the same refusal), and every canonical row the
    same, seq, audit seq and hash links included. Renumbered or staged again, a lost race
    leaves no trace. (An ingest that writes nothing never links, so nothing beats it.)"""
    rows = [{"content": t, "source": "s", "anchor": "m", "kind": "task"} for t in texts]
    with tempfile.TemporaryDirectory() as tmp:
        raced, a, landed = _raced_outcome(Path(tmp) / "a", rounds, rows, raced=True)
        ordered, b, _ = _raced_outcome(Path(tmp) / "b", rounds[:landed], rows, raced=False)
        assert raced == ordered
        assert a.generation == b.generation and a.counters == b.counters
        for table in CANONICAL_TABLES:
            got, want = (s.table(table).collect().sort("seq") for s in (a, b))
            assert got.equals(want), table
        assert a.capsule_state().collect().equals(b.capsule_state().collect())
        assert mf.digest(a).to_json() == mf.digest(b).to_json()


def test_a_rebased_writer_learns_its_own_rows_and_the_winners(tmp_path, monkeypatch, tickets):
    """A writer whose commit was rebased past another handle's keeps its lookups current
    without reading its own rows back: it reads what the winner added to the lookups it
    holds (an edge here), then folds its own rows. So its next ingest reads no capsule
    part, and re-relating the winner's edge stays a no-op."""
    store = _store(tmp_path)
    store.relate("cap-1", "cap-2", "supersedes")  # the edges lookup is loaded
    other = mf.Store.open(tmp_path / "s")
    links = _beaten_at_the_link(store, other, monkeypatch,
                                lambda o, _k: o.relate("cap-3", "cap-4", "blocks"))
    [mine] = store.ingest({"content": "mine", "source": "s", "anchor": "m"})
    monkeypatch.undo()
    assert links[0] == 2 and tickets == []
    reads: list[str] = []
    real_read = index.tables.read

    def read(root, parts, *a, **k):  # noqa: ANN001, ANN202
        reads.extend(p.path for p in parts)
        return real_read(root, parts, *a, **k)

    monkeypatch.setattr(index.tables, "read", read)
    assert store.ingest({"content": "more", "source": "s", "anchor": "m"}) == ["cap-52"]
    store.relate("cap-3", "cap-4", "blocks")
    assert not [p for p in reads if p.startswith(("capsules/", "relations/"))], reads
    assert store.ingest({"content": "mine", "source": "s", "anchor": "m"}) == [mine]
    edges = store.table("relations").filter(pl.col("kind") == "blocks").collect()
    assert edges.height == 1
