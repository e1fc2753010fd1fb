"""Crash safety under SIGKILL, and several writer processes racing for generations."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import polars as pl
import pytest

import memframe as mf
from memframe.schema import CANONICAL_TABLES
from tests.conftest import verify_chain

#: the start of a writer that SIGKILLs itself at its kill_at-th durable file operation
KILLED_AT = """
    import os, signal, sys
    import memframe as mf, memframe.schema
    store = mf.Store.open(sys.argv[1])
    tag, kill_at = sys.argv[2], int(sys.argv[3])
    mf.schema.model("capsules")  # declare the write-side models before counting starts
    # Deterministic kill points: the process kills itself at its kill_at-th durable file
    # operation (fsync, link, rename, unlink), whatever the machine's speed.
    events = 0
    def counted(fn):
        def run(*args, **kwargs):
            global events
            events += 1
            if events == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*args, **kwargs)
        return run
    for name in ("fsync", "link", "replace", "rename", "unlink"):
        setattr(os, name, counted(getattr(os, name)))
"""

WRITER = textwrap.dedent(KILLED_AT + """
    for i in range(3):
        with store.transaction():
            a, b = store.ingest([
                {"content": f"{tag}-{i}-a", "source": "crash", "anchor": "x"},
                {"content": f"{tag}-{i}-b " + "y" * (i % 7), "source": "crash", "anchor": "y"},
            ])
            store.relate(b, a, "blocks")
    store.compact(min_rows=10)
    store.forget(a, mode="purge")
    print(events, flush=True)
""")


def check_invariants(path) -> int:
    store = mf.Store.open(path)
    caps = store.table("capsules").collect()
    rels = store.table("relations").collect()
    journal = store.table("journal").collect()
    # no half commit: capsules come in pairs with their edge and their journal rows
    assert caps.height % 2 == 0
    assert rels.height == caps.height // 2
    forgets = store.table("forgets").collect()
    assert journal.height == caps.height + rels.height + forgets.height
    # an erasure lands with its forgets row, never apart from it
    erased = set(caps.filter(pl.col("content").is_null())["id"])
    assert erased == set(forgets["capsule_id"])
    assert caps["id"].to_list() == [f"cap-{n}" for n in range(1, caps.height + 1)]
    assert set(caps["id"]) <= set(journal["subject"])
    assert verify_chain(journal) == (True, journal.height)
    seqs = sorted(s for name in CANONICAL_TABLES
                  for s in store.table(name).select("seq").collect()["seq"])
    assert len(seqs) == len(set(seqs))
    return caps.height


@pytest.mark.slow
def test_sigkill_at_every_durable_step_never_shows_a_half_commit(tmp_path):
    path = tmp_path / "s"
    mf.Store.create(path)
    # a first run makes the table directories (a commit that makes one also syncs the
    # root), so the counted run below has exactly the steps every later run has
    subprocess.run([sys.executable, "-c", WRITER, str(path), "warm", "0"],
                   capture_output=True, text=True, check=True)
    dry = subprocess.run([sys.executable, "-c", WRITER, str(path), "dry", "0"],
                         capture_output=True, text=True, check=True)
    steps = int(dry.stdout.strip())
    assert steps > 20  # the workload really crosses many commit steps
    before = check_invariants(path)
    killed = 0
    for k in range(1, steps + 1):
        child = subprocess.run([sys.executable, "-c", WRITER, str(path), f"k{k}", str(k)],
                               capture_output=True, text=True)
        killed += child.returncode == -signal.SIGKILL
        after = check_invariants(path)  # no half commit, whatever step the kill hit
        assert after >= before
        before = after
    assert killed == steps  # every step was a kill point
    store = mf.Store.open(path)
    for leftover in path.rglob("*"):  # the killed writers' files, aged past the grace
        os.utime(leftover, (time.time() - 3600, time.time() - 3600), follow_symlinks=False)
    store.vacuum(grace_seconds=60, retention_hours=0, allow_short_retention=True)
    named = {p.as_posix() for name in CANONICAL_TABLES for p in store.files(name)}
    on_disk = {p.as_posix() for p in path.rglob("*.parquet")}
    assert on_disk == named
    assert not list(path.rglob(".tmp-*"))
    check_invariants(path)


INGESTER = textwrap.dedent("""
    import json, sys, memframe as mf
    store = mf.Store.open(sys.argv[1])
    said = []  # (text, the id the ingest returned)
    for i in range(110):  # every 11th a text all four bring (one of them stores it)
        text = f"shared-{i // 11}" if i % 11 == 10 else f"{sys.argv[2]}-{i}"
        said += zip([text], store.ingest({"content": text, "source": "race", "anchor": "x"}))
    print(json.dumps(said))
""")


@pytest.mark.slow
def test_four_processes_ingesting_concurrently(tmp_path):
    path = tmp_path / "s"
    mf.Store.create(path)
    procs = [subprocess.Popen([sys.executable, "-c", INGESTER, str(path), f"w{k}"],
                              stdout=subprocess.PIPE, text=True) for k in range(4)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0]
    store = mf.Store.open(path)
    caps = store.table("capsules").collect()
    assert caps.height == 410  # 100 of each writer's own, 10 shared
    assert sorted(caps["id"], key=lambda i: int(i[4:])) == [f"cap-{n}" for n in range(1, 411)]
    assert caps["content"].n_unique() == 410
    # whether it staged once, moved past the others' new capsules or staged again, every
    # id an ingest returned holds its text (a shared text: the one id that stored it)
    said = pl.DataFrame([pair for out in outs for pair in json.loads(out)],
                        schema={"content": pl.String, "id": pl.String}, orient="row")
    assert said.height == 440
    held = said.join(caps.select("id", pl.col("content").alias("held")), on="id", how="left")
    assert held.filter(pl.col("held").ne_missing(pl.col("content"))).height == 0
    assert said.filter(pl.col("content").str.starts_with("shared"))["id"].n_unique() == 10
    seqs = sorted(s for name in CANONICAL_TABLES
                  for s in store.table(name).select("seq").collect()["seq"])
    assert seqs == list(range(1, 821))  # 410 capsules + 410 journal rows, dense and unique
    journal = store.table("journal").collect()
    assert verify_chain(journal) == (True, 410)
    assert store.generation == 410  # an ingest of a stored text writes nothing
    # every writer's rows are in seq order of their commit: ids follow seq
    by_seq = caps.sort("seq")["id"].to_list()
    assert by_seq == [f"cap-{n}" for n in range(1, 411)]
    assert journal.sort("seq")["subject"].to_list() == by_seq


JOBS = textwrap.dedent(KILLED_AT + """
    for i in range(2):
        store.ingest([{"content": f"{tag}-{i}-{k}", "source": "crash", "anchor": "x",
                       "conversation_id": f"c{k}"} for k in range(3)])
        store.memory.run_cycle()
    store.compact(min_rows=100)
    store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=0.001)
    store.forget("cap-1", mode="purge")
    store.memory.run_cycle()
    store.memory.rebuild_projections()
    print(events, flush=True)
""")


def warm_equals_full(path, scratch) -> None:
    """The jobs' state after whatever happened equals a rebuild from the canonical rows."""
    import shutil

    store = mf.Store.open(path)
    store.memory.run_cycle()
    warm = (store.memory.session_digest(limit=1000).hash, mf.digest(store).to_json())
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(path, scratch)
    copy = mf.Store.open(scratch)
    copy.memory.rebuild_projections()
    assert copy.memory.session_digest(limit=1000).hash == warm[0]
    assert mf.digest(copy, verify="full").to_json() == warm[1]


@pytest.mark.slow
def test_sigkill_during_the_projection_jobs_and_maintenance(tmp_path):
    """Kills at spread durable steps of ingest + cycle + compact + vacuum + purge + rebuild:
    nothing half-written, warm == full after, and the next commit lands."""
    path = tmp_path / "s"
    mf.Store.create(path)
    subprocess.run([sys.executable, "-c", JOBS, str(path), "warm", "0"],
                   capture_output=True, text=True, check=True)
    dry = subprocess.run([sys.executable, "-c", JOBS, str(path), "dry", "0"],
                         capture_output=True, text=True, check=True)
    steps = int(dry.stdout.strip())
    assert steps > 20
    kill_points = sorted({1 + (steps - 1) * i // 9 for i in range(10)})
    killed = 0
    for k in kill_points:
        child = subprocess.run([sys.executable, "-c", JOBS, str(path), f"k{k}", str(k)],
                               capture_output=True, text=True)
        assert child.returncode in (0, -signal.SIGKILL), child.stderr[-2000:]
        killed += child.returncode == -signal.SIGKILL
        store = mf.Store.open(path)
        caps = store.table("capsules").collect()
        assert caps.height % 3 == 0  # every ingest whole
        journal = store.table("journal").collect()
        assert verify_chain(journal) == (True, journal.height)
        warm_equals_full(path, tmp_path / "copy")
    assert killed >= len(kill_points) - 1
    mf.Store.open(path).ingest({"content": "after", "source": "s", "anchor": "a"})


CYCLER = textwrap.dedent("""
    import sys, memframe as mf
    store = mf.Store.open(sys.argv[1])
    for i in range(int(sys.argv[2])):
        store.memory.run_cycle()
        store.memory.sessions()
        store.memory.session_digest()
        store.memory.episodes()
        if i % 3 == 0:
            store.memory.rebuild_projections()
""")

MAINTAINER = textwrap.dedent("""
    import sys, memframe as mf
    store = mf.Store.open(sys.argv[1])
    for i in range(int(sys.argv[2])):
        store.compact(min_rows=1000)
        store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=0.001)
""")

CONVERSER = textwrap.dedent("""
    import sys, memframe as mf
    store = mf.Store.open(sys.argv[1])
    for i in range(int(sys.argv[3])):
        store.ingest({"content": f"{sys.argv[2]}-{i}", "source": "race", "anchor": "x",
                      "conversation_id": f"{sys.argv[2]}-{i % 4}"})
""")


@pytest.mark.slow
def test_jobs_and_doors_with_a_concurrent_compact_and_vacuum(tmp_path):
    path = tmp_path / "s"
    mf.Store.create(path)
    procs = [subprocess.Popen([sys.executable, "-c", CONVERSER, str(path), f"w{k}", "30"],
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    procs += [subprocess.Popen([sys.executable, "-c", CYCLER, str(path), "12"],
                               stderr=subprocess.PIPE, text=True),
              subprocess.Popen([sys.executable, "-c", MAINTAINER, str(path), "15"],
                               stderr=subprocess.PIPE, text=True)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e[-1500:] for e in errors]
    store = mf.Store.open(path)
    assert store.table("capsules").collect().height == 60
    warm_equals_full(path, tmp_path / "copy")
    store.ingest({"content": "after", "source": "s", "anchor": "a"})
