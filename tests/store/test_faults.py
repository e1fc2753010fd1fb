"""Regression tests for the write path's edge faults: each refusal leaves the store unchanged."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import shutil
import time

import polars as pl
import pytest

import memframe as mf
from memframe.errors import (
    CorruptStoreError,
    InvalidInputError,
    MemframeError,
    TombstonedContentError,
    UnknownCapsuleError,
)
from memframe.store import log as log_module


def row(text: str, **extra) -> dict:
    return {"content": text, "source": "s", "anchor": "a", **extra}


def state_of(store: mf.Store) -> tuple:
    """What a refusal must leave untouched: the generation and every file's name and bytes."""
    files = {}
    for p in sorted(store.path.rglob("*")):
        if p.is_file() and p.name != ".lock":
            files[p.relative_to(store.path).as_posix()] = p.read_bytes()
    return store.generation, files


def age(*paths, seconds: float = 3600) -> None:
    then = time.time() - seconds
    for p in paths:
        os.utime(p, (then, then), follow_symlinks=False)


# -- 1. vacuum deletes only what it owns ----------------------------------------------------

def test_vacuum_leaves_a_users_files_and_a_nested_store_alone(store):
    store.ingest(row("a"))
    mine = store.path / "exports" / "mine.parquet"
    mine.parent.mkdir()
    pl.DataFrame({"x": [1]}).write_parquet(mine)
    in_table_dir = store.path / "capsules" / "notes.parquet"
    pl.DataFrame({"x": [1]}).write_parquet(in_table_dir)
    nested = mf.Store.create(store.path / "projections" / "inner")
    nested.ingest(row("inner"))
    age(*store.path.rglob("*"))
    store.vacuum()
    assert mine.exists() and in_table_dir.exists()
    assert mf.Store.open(nested.path).table("capsules").collect()["content"].to_list() == ["inner"]
    assert store.table("capsules").collect().height == 1


def test_vacuum_does_not_follow_a_symlinked_table_directory(tmp_path, clock):
    other = mf.Store.create(tmp_path / "other", clock=clock)
    other.ingest(row("theirs"))
    store = mf.Store.create(tmp_path / "s", clock=clock)
    (store.path / "projections").mkdir()
    os.symlink(other.path / "capsules", store.path / "projections" / "linked")
    age(*other.path.rglob("*"))
    store.vacuum()
    assert mf.Store.open(other.path).table("capsules").collect().height == 1


def test_vacuum_removes_a_dangling_temporary_symlink(store):
    store.ingest(row("a"))
    link = store.path / "capsules" / ".tmp-0123456789abcdef"
    os.symlink(store.path / "nowhere", link)
    age(link)
    assert store.vacuum()["temporary"] == 1
    assert not os.path.lexists(link)


# -- 2. vacuum racing a commit -----------------------------------------------------------------

@pytest.mark.parametrize("grace", [0, -1, float("nan"), float("inf"), "60", True])
def test_vacuum_refuses_a_grace_that_protects_nothing(store, grace):
    store.ingest(row("a"))
    before = state_of(store)
    with pytest.raises(InvalidInputError, match="grace_seconds"):
        store.vacuum(grace_seconds=grace)
    assert state_of(store) == before


def test_a_paused_writer_keeps_its_files_through_a_vacuum(tmp_path, clock):
    """A writer holds the commit lock from its first file to its link: vacuum waits."""
    path = tmp_path / "s"
    writer = mf.Store.create(path, clock=clock)
    vacuumer = mf.Store.open(path, clock=clock)
    outcome = {}

    def stage(w):
        ids = w.ingest(row("slow"))
        return ids

    # pause inside the landing: after the partitions are written, before the link

    original = log_module.Log.try_commit

    def paused(self, entry):
        age(*path.rglob("*.parquet"))  # even files older than any grace are protected
        try:
            vacuumer.vacuum(grace_seconds=1, wait_seconds=0.2)
        except mf.errors.ConcurrentCommitError as exc:
            outcome["vacuum"] = str(exc)
        return original(self, entry)

    log_module.Log.try_commit = paused
    try:
        assert writer.commit(stage, operation="ingest") == ["cap-1"]
    finally:
        log_module.Log.try_commit = original
    assert "nothing was removed" in outcome["vacuum"]
    reopened = mf.Store.open(path)
    assert reopened.table("capsules").collect()["content"].to_list() == ["slow"]
    reopened.ingest(row("after"))  # the store stays writable


def three_parts_and_another_handle(tmp_path, clock) -> tuple[mf.Store, mf.Store]:
    """A store with three small capsule parts, and a second handle that will compact them."""
    store = mf.Store.create(tmp_path / "s", clock=clock)
    for t in "abc":
        store.ingest(row(t))
    return store, mf.Store.open(store.path, clock=clock)


def compact_and_vacuum(other: mf.Store) -> None:
    other.compact("capsules")
    other.vacuum(retention_hours=0, allow_short_retention=True)  # the replaced parts are gone


def test_a_reader_retries_when_a_vacuum_removes_what_it_pinned(tmp_path, clock):
    store, other = three_parts_and_another_handle(tmp_path, clock)
    view = store.pinned()
    compact_and_vacuum(other)
    with pytest.raises(mf.errors.GenerationNotFoundError):
        view.table("capsules")  # a frozen view cannot move on
    # a handle re-pins on the newer generation
    assert store.table("capsules").collect().height == 3
    assert mf.digest(store).to_dict()["total"] == 3


def test_a_purging_writer_retries_when_its_part_was_compacted_and_vacuumed(tmp_path, clock):
    store, other = three_parts_and_another_handle(tmp_path, clock)
    store.table("capsules").collect()  # the handle has seen the three small parts
    compact_and_vacuum(other)
    store.forget("cap-2", mode="purge")
    contents = store.table("capsules").collect().sort("seq")["content"].to_list()
    assert contents == ["a", None, "c"]


# -- 3. a failed import removes only its own store --------------------------------------------

def test_discarding_a_created_store_spares_one_another_process_committed_to(tmp_path, clock):
    created = mf.Store.create(tmp_path / "s", clock=clock)
    mf.Store.open(tmp_path / "s", clock=clock).ingest(row("someone else's"))
    assert created.discard_if_unused(remove_root=True) is False
    assert mf.Store.open(tmp_path / "s").table("capsules").collect().height == 1


def test_discarding_an_unused_store_removes_only_what_create_made(tmp_path, clock):
    created = mf.Store.create(tmp_path / "s", clock=clock)
    (tmp_path / "s" / "keep.txt").write_text("mine")
    assert created.discard_if_unused(remove_root=True) is True
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["keep.txt"]
    fresh = mf.Store.create(tmp_path / "t", clock=clock)
    assert fresh.discard_if_unused(remove_root=True) is True
    assert not (tmp_path / "t").exists()


# -- 4. instants outside the nanosecond range ---------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("valid_to", "9999-12-31T00:00:00Z"),
    ("created_at", "0001-01-01T00:00:00Z"),
    ("valid_from", dt.datetime(2300, 1, 1, tzinfo=dt.UTC)),
    ("created_at", dt.datetime(1600, 1, 1)),
])
def test_instants_outside_the_range_are_refused_not_wrapped(store, field, value):
    store.ingest(row("seed"))
    before = state_of(store)
    with pytest.raises(InvalidInputError, match=f"{field}.*1677-09-21T00:12:44Z..2262"):
        store.ingest(row("x", **{field: value}))
    with pytest.raises(InvalidInputError, match="1677-09-21"):
        store.append("recalls", {"capsule_id": ["cap-1"], "at": [value]})
    assert state_of(store) == before


def test_a_clock_outside_the_range_is_refused(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=lambda: dt.datetime(9999, 1, 1, tzinfo=dt.UTC))
    with pytest.raises(InvalidInputError, match="the store's clock.*outside"):
        store.ingest(row("x"))
    assert store.generation == 0


# -- 5. one id parser: ASCII digits only ----------------------------------------------------------

@pytest.mark.parametrize("bad", ["cap-\u0661", "cap-\uff11", "cap-\u00b2", "cap-01", "cap-1 ",
                                 " cap-1", "cap-+1", "cap-1_0", "CAP-1"])
def test_ids_in_other_digits_name_no_capsule(store, bad):
    store.ingest(row("secret"))
    before = state_of(store)
    for call in (lambda: store.forget(bad, mode="purge"),
                 lambda: store.record_recall([bad]),
                 lambda: store.classify(bad, tier="archived"),
                 lambda: store.relate(bad, "cap-1", "blocks"),
                 lambda: store.append("forgets", {"capsule_id": [bad], "mode": ["purge"]})):
        with pytest.raises(UnknownCapsuleError, match="is not in this store"):
            call()
    assert state_of(store) == before
    assert store.table("capsules").collect()["content"].to_list() == ["secret"]


# -- 6. forget is sticky: a forgotten content is not silently swallowed ---------------------------

def test_ingesting_a_forgotten_content_is_refused_loudly(store):
    (cid,) = store.ingest(row("the plan"))
    store.forget(cid, mode="purge")
    before = state_of(store)
    with pytest.raises(TombstonedContentError) as info:
        store.ingest([row("new"), row("the plan")])
    assert info.value.capsule_id == cid and "forgotten" in str(info.value)
    assert "row 1" in str(info.value)
    sid = store.session_start("p")
    before = state_of(store)
    with pytest.raises(TombstonedContentError, match=cid):
        store.session_finish(sid, handoff="the plan")
    assert state_of(store) == before
    # content still live answers its own id, as before
    (live,) = store.ingest(row("kept"))
    assert store.ingest(row("kept")) == [live]


# -- 7. ids, counts, log paths, checkpoints ---------------------------------------------------------

def test_automatic_session_ids_never_reuse_an_explicit_one(store):
    assert store.session_start("p", session_id="sess-2") == "sess-2"
    ids = [store.session_start("p") for _ in range(3)]
    assert "sess-2" not in ids and len(set(ids)) == 3
    assert ids == ["sess-1", "sess-3", "sess-4"] or ids == ["sess-3", "sess-4", "sess-5"]


def test_recall_counts_that_could_overflow_are_refused(store):
    store.ingest(row("a"))
    before = state_of(store)
    with pytest.raises(InvalidInputError, match="count"):
        store.append("recalls", {"capsule_id": ["cap-1"], "count": [2**62]})
    assert state_of(store) == before
    store.append("recalls", {"capsule_id": ["cap-1", "cap-1"], "count": [2**31 - 1, 2**31 - 1]})
    assert store.capsule_state().collect()["recall_count"][0] == 2 * (2**31 - 1)


@pytest.mark.parametrize("evil", ["/etc/passwd", "../other/capsules/part-00000000000000000001-0000-aaaaaaaaaaaa.parquet",
                                  "capsules/../../other/capsules/part-00000000000000000001-0000-aaaaaaaaaaaa.parquet",
                                  "journal/part-00000000000000000002-0000-aaaaaaaaaaaa.parquet",
                                  # a name memframe never writes: a line break after it, a
                                  # digit of another script
                                  "capsules/part-00000000000000000002-0000-aaaaaaaaaaaa.parquet\n",
                                  "capsules/part-0000000000000000000\u0662-0000-aaaaaaaaaaaa.parquet"])
def test_a_generation_naming_a_path_outside_its_table_is_corrupt(tmp_path, clock, evil):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest(row("a"))
    entry = json.loads((store.path / "_log" / f"{2 - 1:020d}.json").read_text())
    entry.update(generation=2, parent=1, add=[{"table": "capsules", "path": evil, "rows": 1,
                                               "seq": [9, 9]}], remove=[])
    (store.path / "_log" / f"{2:020d}.json").write_text(json.dumps(entry))
    with pytest.raises(CorruptStoreError, match="refused|not a table name"):
        mf.Store.open(store.path).table("capsules")


@pytest.mark.parametrize("entry", ['[]', '{"generation": 2}', '{"generation": 2, "add": [5]}',
                                   '{"generation": "x"}', '{"generation": 2, "add": {"a": 1}}'])
def test_a_generation_file_of_the_wrong_shape_is_corrupt(store, entry):
    store.ingest(row("a"))
    (store.path / "_log" / f"{2:020d}.json").write_text(entry)
    with pytest.raises(CorruptStoreError, match="00000000000000000002.json"):
        mf.Store.open(store.path).table("capsules")


@pytest.mark.parametrize("evil", ["../other/capsules/part-00000000000000000001-0000-aaaaaaaaaaaa.parquet",
                                  "capsules/part-00000000000000000001-0000-aaaaaaaaaaaa.parquet\n"])
def test_a_checkpoint_naming_a_path_outside_its_table_is_never_followed(tmp_path, clock, evil):
    # a checkpoint hashes its own body, so a forged one passes that check: its paths are
    # checked as the log's are, and one that fails is ignored (the log is replayed)
    store = mf.Store.create(tmp_path / "s", clock=clock)
    for i in range(100):
        store.record_miss([f"t{i}"], "abstain")
    ckpt = store.path / "_log" / f"_checkpoint.{100:020d}.json"
    data = json.loads(ckpt.read_text())
    data["snapshot"]["tables"]["recall_misses"][0]["path"] = evil
    data["body_sha256"] = hashlib.sha256(json.dumps(
        data["snapshot"], sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    ckpt.write_text(json.dumps(data))
    with pytest.raises(CorruptStoreError, match="refused"):
        log_module.Log(store.path).snapshot(100, use_checkpoints=False).apply(
            {"generation": 101, "add": [{"table": "recall_misses", "path": evil, "rows": 1,
                                         "seq": [101, 101]}], "remove": []})
    assert log_module.Log(store.path)._read_checkpoint(100) is None
    misses = mf.Store.open(store.path).table("recall_misses").collect()
    assert misses.height == 100 and sorted(misses["seq"]) == list(range(1, 101))


def test_a_checkpoint_that_disagrees_with_the_log_is_ignored(tmp_path, clock):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    for i in range(100):
        store.record_miss([f"t{i}"], "abstain")
    store.ingest(row("kept"))
    ckpt = store.path / "_log" / f"_checkpoint.{100:020d}.json"
    data = json.loads(ckpt.read_text())
    data["snapshot"]["tables"]["recall_misses"] = []  # a checkpoint that forgot a table
    ckpt.write_text(json.dumps(data))
    reopened = mf.Store.open(store.path)
    assert reopened.table("recall_misses").collect().height == 100  # the log wins
    age(*store.path.rglob("*"))
    reopened.vacuum()
    assert mf.Store.open(store.path).table("recall_misses").collect().height == 100


def test_a_checkpoint_copied_from_another_store_is_ignored(tmp_path, clock):
    a = mf.Store.create(tmp_path / "a", clock=clock)
    b = mf.Store.create(tmp_path / "b", clock=clock)
    for i in range(100):
        a.record_miss([f"a{i}"], "abstain")
        b.record_miss([f"b{i}"], "abstain")
    name = f"_checkpoint.{100:020d}.json"
    shutil.copy(a.path / "_log" / name, b.path / "_log" / name)
    terms = mf.Store.open(b.path).table("recall_misses").collect()["term"]
    assert terms.str.starts_with("b").all()


# -- 8. raw exceptions become teaching errors, nothing written --------------------------------------

RAW = [
    ("lone surrogate", lambda s: s.ingest(row("bad \ud800 text"))),
    ("forget reason not text", lambda s: s.forget("cap-1", reason=5)),
    ("recall of None", lambda s: s.record_recall(None)),
    ("miss of None", lambda s: s.record_miss(None, "abstain")),
    ("unknown table", lambda s: s.table("nope")),
    ("as_of None", lambda s: s.as_of(None)),
    ("digest of a path", lambda s: mf.digest(str(s.path))),
    ("unequal columns", lambda s: s.append("recalls", {"capsule_id": ["cap-1", "cap-1"],
                                                      "count": [1]})),
    ("git scan rows not dicts", lambda s: s.record_git_scan("git:/r", "abc", ["cap-1"])),
    ("episode gap nan", lambda s: s.memory.run_episode_job(math.nan)),
    ("float count", lambda s: s.append("recalls", {"capsule_id": ["cap-1"], "count": [1.5]})),
    ("None as text", lambda s: s.append("summaries", {"conversation_id": [None],
                                                      "summary": ["x"]})),
    ("number as text", lambda s: s.append("tiers", {"capsule_id": ["cap-1"], "tier": [5]})),
    ("blank summary", lambda s: s.append("summaries", {"conversation_id": ["c"],
                                                       "summary": ["  "]})),
    ("empty row", lambda s: s.ingest([{}])),
    ("surrogate in bulk", lambda s: s.append("forgets", {"capsule_id": ["cap-1"],
                                                         "reason": ["\udfff"]})),
]


@pytest.mark.parametrize("name,call", RAW, ids=[r[0] for r in RAW])
def test_bad_calls_raise_a_memframe_error_and_write_nothing(store, name, call):
    store.ingest(row("a"))
    before = state_of(store)
    with pytest.raises(MemframeError) as info:
        call(store)
    assert len(str(info.value)) > 20
    assert state_of(store) == before


@pytest.mark.parametrize("name", [f"{2:020d}.json\n", f"{0:019d}\u0662.json",
                                  f"_checkpoint.{2:020d}.json\n"])
def test_a_log_file_name_memframe_never_writes_is_no_generation(tmp_path, clock, name):
    # a line break after the name, or a digit of another script: not a generation file
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest(row("a"))
    (store.path / "_log" / name).write_text((store.path / "_log" / f"{1:020d}.json").read_text())
    reopened = mf.Store.open(store.path)
    assert reopened.generation == 1
    reopened.ingest(row("b"))  # the next commit takes generation 2, as it would have
    assert mf.Store.open(store.path).table("capsules").collect().height == 2
