"""A push killed at random points resumes, and readers of the remote copy see only whole
generations: before, during and after a push, whatever it was doing when it died."""

from __future__ import annotations

import datetime as dt
import json
import random
import signal
import subprocess
import sys
import time

import pytest

import memframe as mf
from memframe.errors import NotAStoreError
from memframe.store.objects import Objects

NOW = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
_PUSH = ("import sys, json, memframe as mf\n"
         "mf.Store.open(sys.argv[1]).push(sys.argv[2], storage_options=json.loads(sys.argv[3]))\n")


def _grow(store: mf.Store, rng: random.Random, commits: int) -> None:
    """``commits`` generations of mixed verbs, each adding files."""
    for _ in range(commits):
        n = int(store.counters.get("capsules") or 0)
        verb = rng.choice(["ingest", "ingest", "relate", "recall", "forget", "session", "cycle"])
        if verb == "ingest" or n < 3:
            store.ingest([{"content": f"note {n + i} {rng.random()}", "source": "s",
                           "anchor": str(n + i), "conversation_id": f"c{rng.randrange(3)}"}
                          for i in range(rng.randrange(1, 4))])
        elif verb == "relate":
            store.relate(f"cap-{rng.randrange(1, n + 1)}", f"cap-{rng.randrange(1, n + 1)}",
                         "blocks")
        elif verb == "recall":
            store.record_recall([f"cap-{rng.randrange(1, n + 1)}"])
        elif verb == "forget":
            store.forget(f"cap-{rng.randrange(1, n + 1)}", mode=rng.choice(["tombstone", "purge"]))
        elif verb == "session":
            store.session_finish(store.session_start("p"), handoff="next: more")
        else:
            store.memory.run_cycle()


def _check_whole(url: str, options: dict, local: mf.Store) -> int | None:
    """The remote's newest generation, after checking it reads exactly as the local store
    did at that generation; None when the remote is not a store yet."""
    try:
        remote = mf.Store.open(url, storage_options=options)
    except NotAStoreError:
        return None
    g = remote.generation
    view = local.at(g)
    assert remote.table("capsules").collect().equals(view.table("capsules").collect())
    assert mf.digest(remote, now=NOW).to_json() == mf.digest(view, now=NOW).to_json()
    return g


def _generations(url: str, options: dict) -> int:
    return len([k for k, _ in Objects(url, options).listing("_log/") if k[5].isdigit()])


def _push_in_child(store: mf.Store, url: str, options: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _PUSH, str(store.path), url,
                             json.dumps(options)])


@pytest.mark.slow
def test_a_push_killed_anywhere_resumes(tmp_path, clock, bucket, s3_options):
    rng = random.Random(7)
    store = mf.Store.create(tmp_path / "s", clock=clock)
    _grow(store, rng, 6)
    url = f"s3://{bucket}/crash"
    seen: list[int | None] = []
    pushed_ends = [store.generation]
    started = time.monotonic()
    child = _push_in_child(store, url, s3_options)
    child.wait(120)
    full = time.monotonic() - started  # the child's start-up and the whole first push
    assert child.returncode == 0
    for round_ in range(6):
        _grow(store, rng, 12)
        landed = _generations(url, s3_options)
        child = _push_in_child(store, url, s3_options)
        if round_ < 3:  # any time: start-up, planning, files, generation files
            time.sleep(rng.uniform(0.2, full * 1.1))
        else:  # once k more generation files landed: a push stopped between generations
            k = rng.randrange(1, 12)
            while child.poll() is None and _generations(url, s3_options) < landed + k:
                time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        seen.append(_check_whole(url, s3_options, store))
        if round_ % 2:  # resume in process, then check the end state
            store.push(url, storage_options=s3_options)
            assert _check_whole(url, s3_options, store) == store.generation
            pushed_ends.append(store.generation)
    store.push(url, storage_options=s3_options)
    assert _check_whole(url, s3_options, store) == store.generation
    assert len({g for g in seen if g is not None} - set(pushed_ends)) >= 1
    assert all(g is not None for g in seen)  # the first push finished: always a store


@pytest.mark.slow
def test_a_first_push_killed_leaves_no_store_or_a_whole_one(tmp_path, clock, bucket,
                                                            s3_options):
    rng = random.Random(11)
    store = mf.Store.create(tmp_path / "s", clock=clock)
    _grow(store, rng, 25)
    for attempt in range(4):
        url = f"s3://{bucket}/first{attempt}"
        child = _push_in_child(store, url, s3_options)
        time.sleep(rng.uniform(0.3, 2.0))
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        g = _check_whole(url, s3_options, store)
        assert g in (None, store.generation)  # the marker lands last
        store.push(url, storage_options=s3_options)
        assert _check_whole(url, s3_options, store) == store.generation


@pytest.mark.slow
def test_a_reader_racing_a_pusher_sees_only_whole_generations(tmp_path, clock, bucket,
                                                               s3_options):
    rng = random.Random(3)
    store = mf.Store.create(tmp_path / "s", clock=clock)
    _grow(store, rng, 4)
    url = f"s3://{bucket}/race"
    store.push(url, storage_options=s3_options)
    reader = mf.Store.open(url, storage_options=s3_options)
    seen = set()
    for _ in range(3):
        _grow(store, rng, 15)
        child = _push_in_child(store, url, s3_options)
        while child.poll() is None:
            view = reader.pinned()  # the handle moves to the newest generation
            local = store.at(view.generation)
            assert view.table("capsules").collect().equals(local.table("capsules").collect())
            assert view.table("relations").collect().equals(local.table("relations").collect())
            seen.add(view.generation)
        assert child.returncode == 0
    assert mf.digest(reader, now=NOW).to_json() == mf.digest(store, now=NOW).to_json()
    assert len(seen) >= 2  # the reader saw the remote move while it was pushed
