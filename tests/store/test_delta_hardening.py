"""Delta logs under crashes, links and hostile files (issue 38): a prune killed at any
step, a planted link, a commit named "compact" that is none, logs ahead of ``_log/``,
a commit that is not JSON, and temporary files a crash left."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memframe as mf
from memframe.cli import main
from memframe.errors import CorruptStoreError, DeltaLogsAheadError, MemframeError
from tests.store.delta_readers import read_polars
from tests.store.test_delta import commit_info, fresh, versions

ROOT = Path(__file__).resolve().parents[2]


def _rows_match(store: mf.Store, table: str = "capsules") -> None:
    got = read_polars(store.path / table).sort("seq")
    want = store.table(table).collect().sort("seq")
    assert got["seq"].to_list() == want["seq"].to_list()
    assert got["id"].to_list() == want["id"].to_list() if "id" in want.columns else True


def _prunable(path: Path) -> mf.Store:
    """A store whose next vacuum deletes files and prunes the capsules' Delta log."""
    store = fresh(path, delta_logs=True)
    ids = [store.ingest({"content": f"c{n}", "source": "s", "anchor": str(n)})[0]
           for n in range(6)]
    store.compact(min_rows=100)
    store.forget(ids[0], mode="purge")
    store.ingest({"content": "after", "source": "s", "anchor": "z"})
    return store


#: vacuum in a child that SIGKILLs itself at its kill_at-th durable file operation
KILLED_VACUUM = textwrap.dedent("""
    import os, signal, sys
    import memframe as mf
    store = mf.Store.open(sys.argv[1])
    kill_at = int(sys.argv[2])
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
    store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=1e-9)
    print(events, flush=True)
""")


def _vacuum_child(path: Path, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILLED_VACUUM, str(path), str(kill_at)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_vacuum_killed_at_every_step_of_its_prune_leaves_delta_maintainable(tmp_path):
    template = tmp_path / "t"
    _prunable(template)
    probe = tmp_path / "probe"
    shutil.copytree(template / "s", probe)
    run = _vacuum_child(probe, 0)
    assert run.returncode == 0, run.stderr[-2000:]
    steps = int(run.stdout.split()[-1])
    assert steps > 5
    for k in range(1, steps + 1):
        path = tmp_path / f"k{k}"
        shutil.copytree(template / "s", path)
        child = _vacuum_child(path, k)
        assert child.returncode == -signal.SIGKILL, (k, child.stderr[-2000:])
        store = mf.Store.open(path)
        # every maintenance entry point works again, and repairs what the kill left
        store.sync_delta_logs()
        store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=1e-9)
        assert main(["delta", "sync", str(path), "--quiet"]) == 0
        table_dir = path / "capsules"
        kept = versions(table_dir)
        assert kept[0] == 0 or (table_dir / "_delta_log"
                                / f"{kept[0]:020d}.checkpoint.parquet").exists(), (k, kept)
        _rows_match(store)
        store.ingest({"content": "later", "source": "s", "anchor": "l"})
        _rows_match(store)


def test_a_delta_log_planted_as_a_link_is_never_written_through(tmp_path):
    other = fresh(tmp_path / "other", delta_logs=True)
    other.ingest({"content": "theirs", "source": "s", "anchor": "t"})
    theirs = tmp_path / "other" / "s" / "capsules" / "_delta_log"
    before = sorted(os.listdir(theirs))
    store = fresh(tmp_path, delta_logs=True)
    store.ingest({"content": "mine", "source": "s", "anchor": "m"})
    mine = tmp_path / "s" / "capsules" / "_delta_log"
    shutil.rmtree(mine)
    mine.symlink_to(theirs, target_is_directory=True)
    with pytest.warns(mf.store.delta.DeltaLogsBehind, match="symbolic link"):
        store.ingest({"content": "second", "source": "s", "anchor": "x"})
    assert sorted(os.listdir(theirs)) == before  # the other store's log is untouched
    with pytest.raises(CorruptStoreError, match="symbolic link.*--rebuild"):
        store.sync_delta_logs()
    with pytest.raises(CorruptStoreError, match="symbolic link"):
        store.vacuum()
    assert sorted(os.listdir(theirs)) == before
    store.sync_delta_logs(rebuild=True)
    assert not mine.is_symlink() and sorted(os.listdir(theirs)) == before
    _rows_match(store)


def test_the_lock_file_planted_as_a_link_is_refused(tmp_path):
    store = fresh(tmp_path)
    target = tmp_path / "elsewhere" / "created-by-memframe"
    target.parent.mkdir()
    lock = tmp_path / "s" / "_log" / ".lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(target)
    with pytest.raises(CorruptStoreError, match=r"\.lock is a symbolic link"):
        store.ingest({"content": "x", "source": "s", "anchor": "a"})
    assert not target.exists() and store.generation == 0


def test_a_table_directory_planted_as_a_link_is_refused(tmp_path):
    store = fresh(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "s" / "capsules").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(CorruptStoreError, match="capsules is a symbolic link"):
        store.ingest({"content": "x", "source": "s", "anchor": "a"})
    assert os.listdir(elsewhere) == [] and store.generation == 0


def test_compaction_is_told_from_what_a_commit_did_not_its_name(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    a = store.ingest({"content": "a", "source": "s", "anchor": "a"})[0]
    store.ingest({"content": "b", "source": "s", "anchor": "b"})
    table_dir = tmp_path / "s" / "capsules"

    def last_version() -> tuple[dict, list[dict]]:
        v = versions(table_dir)[-1]
        lines = [json.loads(x) for x in
                 (table_dir / "_delta_log" / f"{v:020d}.json").read_text().splitlines()]
        return commit_info(table_dir, v), lines

    store.commit(lambda w: w.ingest({"content": "c", "source": "s", "anchor": "c"}),
                 operation="compact")
    info, lines = last_version()
    assert info["operation"] == "WRITE"
    assert all(x["add"]["dataChange"] for x in lines if "add" in x)
    store.commit(lambda w: w.forget(a, mode="purge"), operation="compact")
    info, lines = last_version()
    assert info["operation"] == "WRITE"
    assert all(x[k]["dataChange"] for x in lines for k in ("add", "remove") if k in x)
    store.compact("capsules")  # a real merge: OPTIMIZE, no data change
    info, lines = last_version()
    assert info["operation"] == "OPTIMIZE"
    assert not any(x[k]["dataChange"] for x in lines for k in ("add", "remove") if k in x)
    _rows_match(store)


def test_a_state_file_past_the_newest_generation_is_refused(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    store.ingest({"content": "a", "source": "s", "anchor": "a"})
    state = tmp_path / "s" / "_log" / "_delta.json"
    data = json.loads(state.read_text())
    data["synced_through"] = 99
    state.write_text(json.dumps(data))
    reopened = mf.Store.open(tmp_path / "s")
    with pytest.raises(DeltaLogsAheadError, match=r"ahead.*delta sync --rebuild"):
        reopened.ingest({"content": "b", "source": "s", "anchor": "b"})
    assert reopened.generation == 1
    with pytest.raises(DeltaLogsAheadError):
        reopened.sync_delta_logs()
    assert main(["delta", "status", str(tmp_path / "s")]) == 1
    assert main(["delta", "sync", "--rebuild", str(tmp_path / "s"), "--quiet"]) == 0
    reopened.ingest({"content": "b", "source": "s", "anchor": "b"})
    assert reopened.delta_logs_status()["synced_through"] == 2
    _rows_match(reopened)


def test_a_generation_lost_from_the_log_is_never_reused(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    for t in "abc":
        store.ingest({"content": t, "source": "s", "anchor": t})
    # a restored backup: the newest generation file is gone, Delta still mirrors it
    (tmp_path / "s" / "_log" / f"{3:020d}.json").unlink()
    reopened = mf.Store.open(tmp_path / "s")
    assert reopened.generation == 2
    with pytest.raises(DeltaLogsAheadError, match="generation 3"):
        reopened.ingest({"content": "new", "source": "s", "anchor": "n"})
    assert reopened.generation == 2
    assert not (tmp_path / "s" / "_log" / f"{3:020d}.json").exists()
    reopened.sync_delta_logs(rebuild=True)
    reopened.ingest({"content": "new", "source": "s", "anchor": "n"})
    got = read_polars(tmp_path / "s" / "capsules").sort("seq")["content"].to_list()
    assert got == ["a", "b", "new"]


def test_a_delta_commit_that_is_not_json_is_a_teaching_error(tmp_path, capsys):
    store = _prunable(tmp_path)
    newest = versions(tmp_path / "s" / "capsules")[-1]
    bad = tmp_path / "s" / "capsules" / "_delta_log" / f"{newest:020d}.json"
    bad.write_bytes(b"{not json\n")
    for call in (store.sync_delta_logs, store.delta_logs_status,
                 lambda: store.vacuum(retention_hours=0, allow_short_retention=True)):
        with pytest.raises(CorruptStoreError, match=rf"{bad.name}.*--rebuild"):
            call()
    capsys.readouterr()
    assert main(["delta", "status", str(tmp_path / "s")]) == 1
    assert "--rebuild" in capsys.readouterr().err
    assert main(["delta", "sync", "--rebuild", str(tmp_path / "s"), "--quiet"]) == 0
    store.vacuum(retention_hours=0, allow_short_retention=True)
    _rows_match(store)


def test_temporary_files_a_crash_left_in_a_delta_log_are_vacuumed(tmp_path):
    store = fresh(tmp_path, delta_logs=True)
    store.ingest({"content": "a", "source": "s", "anchor": "a"})
    tmp = tmp_path / "s" / "capsules" / "_delta_log" / ".tmp-0123456789abcdef"
    tmp.write_bytes(b"half a version")
    old = dt.datetime.now().timestamp() - 3600
    os.utime(tmp, (old, old))
    report = store.vacuum()
    assert not tmp.exists() and report["temporary"] == 1
    assert "capsules/_delta_log/.tmp-0123456789abcdef" in report["files"]


def test_errors_are_memframe_errors():
    assert issubclass(DeltaLogsAheadError, MemframeError)
