"""Every canonical table readable as a Delta Lake table: deltalake, pl.scan_delta and
DuckDB's delta_scan return the rows store.table(name) returns, through every verb,
maintenance, an import, and a crash between a generation and its Delta versions."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import deltalake
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.cli import main
from memframe.schema import CANONICAL_TABLES
from tests.importers.nmemory_fixture import build_rich, grow_rich
from tests.store.delta_readers import (
    assert_readers_match,
    assert_same,
    read_deltalake,
    read_polars,
)
from tests.store.test_crash_and_concurrency import KILLED_AT as CRASH_PRELUDE

ROOT = Path(__file__).resolve().parents[2]


def clock_from(start: dt.datetime):
    now = [start]

    def clock() -> dt.datetime:
        now[0] += dt.timedelta(seconds=1)
        return now[0]

    return clock


def fresh(tmp_path: Path, **kwargs) -> mf.Store:
    start = dt.datetime(2026, 7, 23, 12, tzinfo=dt.UTC)
    return mf.Store.create(tmp_path / "s", clock=clock_from(start), **kwargs)


def versions(table_dir: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (table_dir / "_delta_log").glob("[0-9]*.json"))


def commit_info(table_dir: Path, version: int) -> dict:
    path = table_dir / "_delta_log" / f"{version:020d}.json"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return next(a["commitInfo"] for a in lines if "commitInfo" in a)


def named_files(table_dir: Path, version: int | None = None) -> set[str]:
    uris = deltalake.DeltaTable(str(table_dir), version=version).file_uris()
    return {Path(u.removeprefix("file://")).name for u in uris}


def store_files(store: mf.StoreView, table: str) -> set[str]:
    return {Path(p.path).name for p in store.partitions(table)}


NANOS = "2026-07-01T00:00:00.123456789Z"


def test_every_verb_and_maintenance_reads_the_same_through_three_readers(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    scratch = tmp_path / "scratch"
    assert_readers_match(store, scratch)  # an empty store: 16 empty Delta tables
    a, b, c, d = store.ingest([
        {"content": "alpha", "source": "note", "anchor": "a", "created_at": NANOS},
        {"content": "beta", "source": "note", "anchor": "b", "kind": "task"},
        {"content": "gamma", "source": "note", "anchor": "c", "project_id": "team/api"},
        {"content": "delta", "source": "note", "anchor": "d",
         "valid_to": "2027-01-01T00:00:00.000000001Z"},
    ])
    assert_readers_match(store, scratch)
    store.relate(a, b, "blocks")
    store.record_recall([a, a, b])
    store.classify(c, kind="fact", tier="archived")
    sid = store.session_start("team/api")
    store.session_finish(sid, handoff="next: ship it")
    store.record_miss(["retreival"], "missing_evidence")
    store.teach_alias("Retreival", "retrieval")
    store.record_lane_override("vector", "fused")
    store.record_git_scan("git:repo", "abc123",
                          [{"capsule_id": a, "kind": "anchor_sha", "ref": "abc123",
                            "verdict": "corroborated"}])
    store.review(d, "proposed")
    store.pin(b, reason="keep")
    with store.transaction():
        store.relate(c, d, "part_of")
        store.ingest({"content": "epsilon", "source": "note", "anchor": "e"})
    assert_readers_match(store, scratch)
    store.forget(d, mode="tombstone", reason="stale")
    store.forget(c, mode="redact", reason="secret")
    assert_readers_match(store, scratch, duckdb=False)
    purged_file = next(p.path for p in store.partitions("capsules"))
    store.forget(a, mode="purge", reason="erase")
    assert_readers_match(store, scratch)
    # the newest version no longer names the file that held the purged content
    assert Path(purged_file).name not in named_files(tmp_path / "s" / "capsules")
    assert named_files(tmp_path / "s" / "capsules") == store_files(store, "capsules")
    merged = store.compact(min_rows=100)
    assert merged["journal"] > 1
    assert_readers_match(store, scratch, duckdb=False)
    report = store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=1e-9)
    assert report["partitions"] > 0
    assert_readers_match(store, scratch)  # read from the checkpoints vacuum wrote
    for table in CANONICAL_TABLES:
        table_dir = tmp_path / "s" / table
        assert named_files(table_dir) == store_files(store, table), table


def test_time_travel_by_version_is_the_generation_it_names(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    ids = []
    for n in range(4):
        ids += store.ingest({"content": f"c{n}", "source": "s", "anchor": str(n)})
    store.forget(ids[1], mode="purge")
    store.compact(min_rows=100)
    store.relate(ids[0], ids[2], "blocks")
    table_dir = tmp_path / "s" / "capsules"
    seen = []
    for version in versions(table_dir):
        generation = commit_info(table_dir, version)["memframe"]["generation"]
        seen.append(generation)
        expected = store.at(generation).table("capsules").collect()
        assert_same(expected, read_deltalake(table_dir, version), f"v{version}")
        assert_same(expected, read_polars(table_dir, version), f"v{version}")
    # version 0 is the empty table at creation; then one version per generation that
    # touched capsules: the four ingests, the purge, the compaction (not the relate)
    assert seen == [0, 1, 2, 3, 4, 5, 6]
    assert store.generation == 7 and commit_info(table_dir, 6)["operation"] == "OPTIMIZE"


def test_vacuum_leaves_no_openable_version_naming_a_deleted_file(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    ids = [store.ingest({"content": f"c{n}", "source": "s", "anchor": str(n)})[0]
           for n in range(5)]
    store.compact(min_rows=100)
    store.forget(ids[0], mode="purge")  # an erasure: never kept by the retention window
    store.ingest({"content": "after", "source": "s", "anchor": "z"})
    table_dir = tmp_path / "s" / "capsules"
    before = versions(table_dir)
    report = store.vacuum()  # the default seven days: only the erasure ends history
    assert report["partitions"] > 0 and report["no_longer_readable"] is not None
    kept = versions(table_dir)
    assert kept[0] > before[0] and kept[-1] == before[-1]
    checkpoint = table_dir / "_delta_log" / f"{kept[0]:020d}.checkpoint.parquet"
    assert checkpoint.exists()
    assert json.loads((table_dir / "_delta_log" / "_last_checkpoint").read_text())[
        "version"] == kept[0]
    for version in kept:  # every version a reader can open names only files that exist
        generation = commit_info(table_dir, version)["memframe"]["generation"]
        files = named_files(table_dir, version)
        assert all((table_dir / name).exists() for name in files), version
        assert files == store_files(store.at(generation), "capsules")
    # the first readable version is where memframe's readable range starts, for capsules
    first_generation = commit_info(table_dir, kept[0])["memframe"]["generation"]
    assert first_generation <= report["readable"][0]
    for version in range(before[0], kept[0]):
        with pytest.raises(Exception):  # noqa: B017 - deltalake's own error types vary
            deltalake.DeltaTable(str(table_dir), version=version).file_uris()
    # untouched tables keep their history
    assert versions(tmp_path / "s" / "pins") == [0]


def test_an_existing_store_gets_delta_logs_from_sync(tmp_path, capsys):
    source = build_rich(tmp_path / "nmemory.sqlite")
    target = tmp_path / "imported"
    mf.importers.import_nmemory(source, target)
    store = mf.Store.open(target)
    assert not list(target.glob("*/_delta_log"))  # off unless asked for
    assert main(["delta", "status", str(target), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["enabled"] is False
    assert main(["delta", "sync", str(target), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["generation"] == store.generation
    assert all(head == {"version": 0, "generation": store.generation}
               for head in report["tables"].values())
    assert_readers_match(store, tmp_path / "scratch")
    # later commits, by any handle, keep the logs: an incremental import, an ingest
    grow_rich(source)
    mf.importers.import_nmemory(source, target)
    mf.Store.open(target).ingest({"content": "new", "source": "s", "anchor": "n"})
    assert store.delta_logs_status()["synced_through"] == store.generation
    assert_readers_match(mf.Store.open(target), tmp_path / "scratch")
    assert main(["delta", "sync", str(target), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["versions"] == {}


def test_two_handles_interleaving_keep_versions_in_generation_order(tmp_path):
    one = fresh(tmp_path, delta_logs=True)
    two = mf.Store.open(tmp_path / "s")
    for n in range(6):
        (one if n % 2 else two).ingest({"content": f"c{n}", "source": "s", "anchor": str(n)})
    table_dir = tmp_path / "s" / "capsules"
    assert [commit_info(table_dir, v)["memframe"]["generation"]
            for v in versions(table_dir)] == list(range(7))
    assert_readers_match(one, tmp_path / "scratch", duckdb=False)


def test_stores_without_delta_logs_write_none(tmp_path):
    store = fresh(tmp_path)
    store.ingest({"content": "x", "source": "s", "anchor": "a"})
    assert not list((tmp_path / "s").rglob("_delta_log"))
    assert store.delta_logs_status()["enabled"] is False


# ---- a crash between a generation and its Delta versions ---------------------------------

#: a writer that SIGKILLs itself right after its generation linked, before any Delta version
KILLED_BEFORE_DELTA = textwrap.dedent("""
    import os, signal, sys
    import memframe as mf
    from memframe.store.delta import DeltaLogs
    def killed(self, entry, after):
        os.kill(os.getpid(), signal.SIGKILL)
    DeltaLogs.after_land = killed
    store = mf.Store.open(sys.argv[1])
    a = store.ingest({"content": "lost to Delta " + sys.argv[2], "source": "crash",
                      "anchor": "k"})[0]
    print(a, flush=True)
""")


def _killed_writer(path: Path, script: str = KILLED_BEFORE_DELTA, *args: str
                   ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, str(path), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_sigkill_between_a_generation_and_its_delta_versions_then_catch_up(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    store.ingest({"content": "first", "source": "s", "anchor": "f"})
    child = _killed_writer(tmp_path / "s", KILLED_BEFORE_DELTA, "one")
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    table_dir = tmp_path / "s" / "capsules"
    # the generation landed; Delta is one version behind and still shows what it showed
    assert store.generation == 2
    assert commit_info(table_dir, versions(table_dir)[-1])["memframe"]["generation"] == 1
    status = store.delta_logs_status()
    assert status["synced_through"] == 1 and status["generation"] == 2
    assert_same(store.at(1).table("capsules").collect(), read_polars(table_dir), "behind")
    # the next commit catches up first, in order
    store.relate("cap-1", "cap-2", "blocks")
    assert [commit_info(table_dir, v)["memframe"]["generation"]
            for v in versions(table_dir)] == [0, 1, 2]
    journal_dir = tmp_path / "s" / "journal"
    assert [commit_info(journal_dir, v)["memframe"]["generation"]
            for v in versions(journal_dir)] == [0, 1, 2, 3]
    assert_readers_match(store, tmp_path / "scratch")
    # and the explicit catch-up does the same
    child = _killed_writer(tmp_path / "s", KILLED_BEFORE_DELTA, "two")
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert main(["delta", "sync", str(tmp_path / "s"), "--format", "json"]) == 0
    assert store.delta_logs_status()["synced_through"] == store.generation == 4
    assert_readers_match(store, tmp_path / "scratch")


#: the crash tests' writer prelude (it SIGKILLs itself at its kill_at-th durable file
#: operation), then a history of every kind of commit Delta mirrors
KILLED_AT = textwrap.dedent(CRASH_PRELUDE + """
    for i in range(2):
        a, b = store.ingest([{"content": f"{i}-a", "source": "crash", "anchor": "x"},
                             {"content": f"{i}-b", "source": "crash", "anchor": "y"}])
        store.relate(b, a, "blocks")
    store.compact(min_rows=10)
    store.forget(a, mode="purge")
    print(events, flush=True)
""")


@pytest.mark.slow
def test_sigkill_at_durable_steps_with_delta_logs_then_sync(tmp_path):
    probe = tmp_path / "probe"
    mf.Store.create(probe, delta_logs=True)
    run = _killed_writer(probe, KILLED_AT, "delta", "0")
    assert run.returncode == 0, run.stderr[-2000:]
    steps = int(run.stdout.split()[-1])
    kill_points = sorted({1 + (steps - 1) * i // 11 for i in range(12)})
    for k in kill_points:
        path = tmp_path / f"s{k}"
        mf.Store.create(path, delta_logs=True)
        child = _killed_writer(path, KILLED_AT, "delta", str(k))
        assert child.returncode == -signal.SIGKILL, (k, child.stderr[-2000:])
        store = mf.Store.open(path)
        store.sync_delta_logs()
        assert_readers_match(store, tmp_path / "scratch", duckdb=False)
        for table in ("capsules", "relations", "journal"):
            mirrored = [commit_info(path / table, v)["memframe"]["generation"]
                        for v in versions(path / table)]
            assert mirrored == sorted(set(mirrored)), (k, table, mirrored)


def test_periodic_checkpoints_read_the_same_and_survive_vacuum(tmp_path, monkeypatch):
    from memframe.store import delta

    monkeypatch.setattr(delta, "CHECKPOINT_EVERY", 3)
    store = fresh(tmp_path, delta_logs=True)
    ids = [store.ingest({"content": f"c{n}", "source": "s", "anchor": str(n)})[0]
           for n in range(7)]
    table_dir = tmp_path / "s" / "capsules"
    log_dir = table_dir / "_delta_log"
    assert sorted(p.name[:20] for p in log_dir.glob("*.checkpoint.parquet")) == [
        f"{3:020d}", f"{6:020d}"]
    assert json.loads((log_dir / "_last_checkpoint").read_text())["version"] == 6
    assert_readers_match(store, tmp_path / "scratch")  # checkpoint 6 + JSON commit 7
    for version in versions(table_dir):
        generation = commit_info(table_dir, version)["memframe"]["generation"]
        assert_same(store.at(generation).table("capsules").collect(),
                    read_deltalake(table_dir, version), f"v{version}")
    store.forget(ids[4], mode="purge")  # rewrites the partition of generation 5
    store.vacuum()
    kept = versions(table_dir)
    # the purge is version 8: from there on no version names the file it replaced, so
    # the log starts at a checkpoint there and the older commits and checkpoints are gone
    assert kept[0] == 8 and (log_dir / f"{8:020d}.checkpoint.parquet").exists()
    assert not (log_dir / f"{3:020d}.checkpoint.parquet").exists()
    assert_readers_match(store, tmp_path / "scratch")
    # the next periodic checkpoint takes its metadata from the vacuum's checkpoint
    store.ingest({"content": "more", "source": "s", "anchor": "m"})
    assert (log_dir / f"{9:020d}.checkpoint.parquet").exists()
    assert_readers_match(store, tmp_path / "scratch", tables=["capsules"])


def test_an_unused_store_with_delta_logs_is_discarded_whole(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    assert (tmp_path / "s" / "capsules" / "_delta_log").is_dir()
    assert store.discard_if_unused(remove_root=True)
    assert not (tmp_path / "s").exists()


def test_a_delta_log_memframe_did_not_write_never_fails_a_commit(tmp_path, capsys):
    store = fresh(tmp_path, delta_logs=True)
    foreign = tmp_path / "s" / "capsules" / "_delta_log" / f"{1:020d}.json"
    foreign.write_text(json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n")
    with pytest.warns(UserWarning, match="memframe delta sync"):
        assert store.ingest({"content": "x", "source": "s", "anchor": "a"}) == ["cap-1"]
    assert store.generation == 1 and store.table("capsules").collect().height == 1
    with pytest.raises(mf.errors.CorruptStoreError, match="memframe delta sync"):
        store.sync_delta_logs()
    assert main(["delta", "sync", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err
    assert "did not write" in err and "Traceback" not in err
    foreign.parent.rename(tmp_path / "moved-away")  # as the message says
    store.sync_delta_logs()
    assert_readers_match(store, tmp_path / "scratch", duckdb=False)


# ---- the law: whatever the sequence of writes, Delta reads what memframe reads -------------

_STEPS = st.lists(st.sampled_from(["ingest", "relate", "recall", "tombstone", "redact",
                                   "purge", "compact", "vacuum", "sync"]),
                  min_size=1, max_size=12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_any_sequence_of_writes_reads_the_same_through_delta(tmp_path_factory, steps):
    base = tmp_path_factory.mktemp("law")
    store = fresh(base, delta_logs=True)
    ids = store.ingest([{"content": f"seed {n}", "source": "s", "anchor": str(n),
                         "created_at": f"2026-07-01T00:00:0{n}.00000000{n}Z"} for n in range(3)])
    for n, step in enumerate(steps):
        live = [i for i in ids
                if i not in set(store.table("forgets").collect()["capsule_id"])]
        if step == "ingest":
            ids += store.ingest({"content": f"step {n}", "source": "s", "anchor": str(n)})
        elif step == "relate" and len(ids) > 1:
            store.relate(ids[-1], ids[0], "blocks")
        elif step == "recall":
            store.record_recall(ids[:2])
        elif step in ("tombstone", "redact", "purge") and live:
            store.forget(live[0], mode=step, reason="law")
        elif step == "compact":
            store.compact(min_rows=1000)
        elif step == "vacuum":
            store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=1e-9)
        elif step == "sync":
            store.sync_delta_logs()
    for table in ("capsules", "relations", "forgets", "recalls", "journal"):
        table_dir = Path(store.path) / table
        assert_same(store.table(table).collect(), read_polars(table_dir), table)
        for version in versions(table_dir):  # every version a reader can open
            generation = commit_info(table_dir, version)["memframe"]["generation"]
            assert named_files(table_dir, version) == store_files(store.at(generation), table)


CONCURRENT_WRITER = textwrap.dedent("""
    import sys
    import memframe as mf
    store = mf.Store.open(sys.argv[1])
    for n in range(12):
        a = store.ingest({"content": f"{sys.argv[2]} {n}", "source": "race", "anchor": "r"})[0]
        if n % 4 == 3:
            store.relate(a, "cap-1", "blocks")
""")


def test_writer_processes_racing_keep_every_log_in_generation_order(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    store.ingest({"content": "root", "source": "s", "anchor": "r"})
    children = [subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, str(tmp_path / "s"),
                                  f"w{i}"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                 stderr=subprocess.PIPE, text=True) for i in range(3)]
    for child in children:
        assert child.wait(timeout=300) == 0, child.stderr.read()[-2000:]
    # every writer mirrored its own generation (or caught up the ones before it): no sync
    assert store.delta_logs_status()["synced_through"] == store.generation == 46
    for table in ("capsules", "relations", "journal"):
        mirrored = [commit_info(tmp_path / "s" / table, v)["memframe"]["generation"]
                    for v in versions(tmp_path / "s" / table)]
        assert mirrored == sorted(set(mirrored)), (table, mirrored)
    assert_readers_match(store, tmp_path / "scratch")


def test_a_log_written_with_an_older_schema_gets_the_new_one(tmp_path):
    """memframe extends tables with columns: a log an older release started (here: its
    version 0 rewritten without ``actor``, as a release before that column wrote it)
    carries the new schema from the next version on, under the same table id."""
    store = fresh(tmp_path, delta_logs=True)
    first = tmp_path / "s" / "pins" / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines()]
    for action in actions:
        if "metaData" in action:
            old = json.loads(action["metaData"]["schemaString"])
            old["fields"] = [f for f in old["fields"] if f["name"] != "actor"]
            action["metaData"]["schemaString"] = json.dumps(old)
            table_id = action["metaData"]["id"]
        if "commitInfo" in action:
            action["commitInfo"]["memframe"]["schema"] = "older"
    first.write_text("".join(json.dumps(a) + "\n" for a in actions))
    assert "actor" not in read_polars(tmp_path / "s" / "pins").columns
    store = mf.Store.open(tmp_path / "s")  # the newer release opens the store
    (a,) = store.ingest({"content": "x", "source": "s", "anchor": "a"})
    store.pin(a, reason="keep")
    latest = [json.loads(line) for line in
              (first.parent / f"{1:020d}.json").read_text().splitlines()]
    (meta,) = [x["metaData"] for x in latest if "metaData" in x]
    assert meta["id"] == table_id
    assert_readers_match(store, tmp_path / "scratch", tables=["pins"])
    store.pin(a, pinned=False)  # the schema is now the log's own: no metaData again
    assert not any("metaData" in json.loads(line) for line in
                   (first.parent / f"{2:020d}.json").read_text().splitlines())


def test_vacuum_after_a_crash_left_delta_behind_catches_up_before_it_prunes(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    ids = store.ingest([{"content": f"c{n}", "source": "s", "anchor": str(n)}
                        for n in range(3)])
    child = _killed_writer(tmp_path / "s", KILLED_BEFORE_DELTA, "gone")
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    store.forget(ids[0], mode="purge")  # this handle mirrored generation 2: it catches up
    child = _killed_writer(tmp_path / "s", KILLED_BEFORE_DELTA, "gone again")
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert store.delta_logs_status()["synced_through"] < store.generation
    store.vacuum()  # removes the purged file's predecessor; Delta is behind when it starts
    status = store.delta_logs_status()
    assert status["synced_through"] == status["generation"] == store.generation
    table_dir = tmp_path / "s" / "capsules"
    for version in versions(table_dir):
        assert all((table_dir / name).exists() for name in named_files(table_dir, version))
    assert_readers_match(store, tmp_path / "scratch")


def test_the_timestamp_table_in_the_docs_is_what_the_readers_do(tmp_path):
    """docs/delta.md's table: microsecond truncation by every reader, and deltalake's
    pyarrow path refusing sub-microsecond digits (the docs' pandas route works)."""
    store = fresh(tmp_path, delta_logs=True)
    store.ingest({"content": "x", "source": "s", "anchor": "a", "created_at": NANOS})
    table_dir = tmp_path / "s" / "capsules"
    truncated = dt.datetime(2026, 7, 1, 0, 0, 0, 123456, tzinfo=dt.UTC)
    for frame in (read_polars(table_dir), read_deltalake(table_dir)):
        assert str(frame.schema["created_at"]) == "Datetime(time_unit='us', time_zone='UTC')"
        assert frame["created_at"].to_list() == [truncated]
    with pytest.raises(Exception, match="would lose data"):
        deltalake.DeltaTable(str(table_dir)).to_pandas()
    via_polars = pl.scan_delta(str(table_dir)).collect().to_pandas()
    assert via_polars["created_at"].iloc[0] == truncated
    exact = store.table("capsules").collect()["created_at"].cast(pl.Int64)[0]
    assert exact % 1000 == 789  # memframe itself keeps the nanoseconds


def test_an_erasure_renumbered_on_top_of_appends_reads_the_same_through_delta(tmp_path,
                                                                              monkeypatch):
    """An erasure beaten by commits that only appended links its renumbered rows on top of
    theirs: every Delta version mirrors one generation, and the tables read the same."""
    store = fresh(tmp_path, delta_logs=True)
    store.ingest([{"content": f"c{n}", "source": "s", "anchor": str(n)} for n in range(12)])
    other = mf.Store.open(tmp_path / "s")
    real = store._log.try_commit
    links = [0]

    def try_commit(entry):  # noqa: ANN001, ANN202
        links[0] += 1
        if links[0] <= 2:  # two appends land first
            other.ingest({"content": f"late {links[0]}", "source": "s", "anchor": "z"})
            other.record_recall(["cap-4"])
        return real(entry)

    monkeypatch.setattr(store._log, "try_commit", try_commit)
    store.forget("cap-4", mode="purge")
    monkeypatch.undo()
    assert links[0] == 3 and store.generation == 6
    view = store.pinned()
    for table in ("capsules", "forgets", "journal", "recalls"):
        assert_same(view.table(table).collect(), read_polars(tmp_path / "s" / table), table)
        assert_same(view.table(table).collect(), read_deltalake(tmp_path / "s" / table), table)
    erased = read_polars(tmp_path / "s" / "capsules").filter(pl.col("id") == "cap-4")
    assert erased["content"].to_list() == [None]


def test_an_ingest_renumbered_past_erasures_reads_the_same_through_delta(tmp_path,
                                                                         monkeypatch):
    """New capsules beaten by two erasures (which rewrite a capsule partition) and a
    compaction link their renumbered rows on top: every Delta version mirrors one
    generation, and the tables read the same through both Delta readers."""
    store = fresh(tmp_path, delta_logs=True)
    store.ingest([{"content": f"c{n}", "source": "s", "anchor": str(n)} for n in range(12)])
    store.record_recall(["cap-1"])
    store.record_recall(["cap-2"])
    other = mf.Store.open(tmp_path / "s")
    real = store._log.try_commit
    links = [0]

    def try_commit(entry):  # noqa: ANN001, ANN202
        links[0] += 1
        if links[0] == 1:
            other.forget("cap-4", mode="purge")
            other.compact()
        elif links[0] == 2:
            other.forget("cap-5", mode="redact")
        return real(entry)

    monkeypatch.setattr(store._log, "try_commit", try_commit)
    assert store.ingest({"content": "late", "source": "s", "anchor": "z"}) == ["cap-13"]
    monkeypatch.undo()
    assert links[0] == 3 and store.generation == 7  # 3 seeding, 3 winners, the ingest
    view = store.pinned()
    for table in ("capsules", "forgets", "journal", "recalls"):
        assert_same(view.table(table).collect(), read_polars(tmp_path / "s" / table), table)
        assert_same(view.table(table).collect(), read_deltalake(tmp_path / "s" / table), table)
    erased = read_deltalake(tmp_path / "s" / "capsules").filter(pl.col("content").is_null())
    assert sorted(erased["id"]) == ["cap-4", "cap-5"]
    table_dir = tmp_path / "s" / "capsules"
    mirrored = [commit_info(table_dir, v)["memframe"]["generation"]
                for v in versions(table_dir)[1:]]
    assert mirrored == [1, 4, 6, 7]  # the generations that touched capsules, once each
    for version, generation in zip(versions(table_dir)[1:], mirrored, strict=True):
        assert_same(store.at(generation).table("capsules").collect(),
                    read_polars(table_dir, version), f"v{version}")


def test_bounded_capsule_partitions_read_the_same_through_delta(tmp_path, monkeypatch):
    """An erasure that splits a larger capsule partition as it rewrites it (1 remove, 3
    adds) and a compaction that packs small ones up to the bound read the same through
    two Delta readers as through memframe."""
    from memframe.store import tables

    store = fresh(tmp_path, delta_logs=True)
    store.ingest([{"content": f"c{n}", "source": "s", "anchor": str(n)} for n in range(10)])
    monkeypatch.setattr(tables, "ERASABLE_PART_ROWS", 4)
    store.forget("cap-6", mode="purge")
    for n in range(5):
        store.ingest({"content": f"late {n}", "source": "s", "anchor": "z"})
    assert store.compact("capsules") == {"capsules": 6}  # [2, 1, 1] and [1, 1, 1]
    view = store.pinned()
    assert [p.rows for p in view.partitions("capsules")] == [4, 4, 4, 3]
    for table in ("capsules", "forgets", "journal"):
        assert_same(view.table(table).collect(), read_polars(tmp_path / "s" / table), table)
        assert_same(view.table(table).collect(), read_deltalake(tmp_path / "s" / table), table)
    erased = read_deltalake(tmp_path / "s" / "capsules").filter(pl.col("id") == "cap-6")
    assert erased["content"].to_list() == [None]
