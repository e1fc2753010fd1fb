"""Vacuum keeps time travel working for a retention window, says what it ends, and can
dry-run. Regression: vacuum once removed every replaced file at once (readable generations
went from 1..96 to 105..105) with no window, no dry run and no report of what was lost."""

from __future__ import annotations

import datetime as dt
import os

import polars as pl
import pytest

import memframe as mf
from memframe.cli import main
from memframe.errors import InvalidInputError
from memframe.store import tables
from tests.conftest import TickingClock
from tests.store.test_faults import state_of

DAY = dt.timedelta(days=1)


def history(tmp_path) -> tuple[mf.Store, TickingClock]:
    """Three days, each ingesting and compacting the capsules (replacing earlier files):
    day 0 is generations 1..3, day 1 is 4..5, day 2 is 6..7."""
    clock = TickingClock()
    store = mf.Store.create(tmp_path / "s", clock=clock)
    for day in ("ab", "c", "d"):
        for t in day:
            store.ingest({"content": t, "source": "s", "anchor": t})
        store.compact("capsules")
        clock.set(clock.now + DAY)
    assert store.generation == 7
    return store, clock


def readable(store: mf.Store) -> list[int]:
    return [g for g in range(1, store.generation + 1) if store.at(g).readable()]


def test_the_default_window_keeps_recent_generations_readable(tmp_path):
    store, _ = history(tmp_path)
    report = store.vacuum()
    assert report["partitions"] == 0 and report["no_longer_readable"] is None
    assert report["readable"] == [1, 7] and readable(store) == list(range(1, 8))
    assert store.at(2).table("capsules").collect()["content"].to_list() == ["a", "b"]


def test_generations_older_than_the_window_go_and_the_report_says_which(tmp_path):
    store, clock = history(tmp_path)
    start = clock.now - 3 * DAY
    clock.set(start + dt.timedelta(days=7, hours=36))
    # the window starts inside day 1: an as_of there reads generation 5, so 5..7 stay
    report = store.vacuum()
    assert report["no_longer_readable"] == [1, 4] and report["readable"] == [5, 7]
    assert readable(store) == [5, 6, 7]
    assert store.as_of(start + dt.timedelta(hours=37)).generation == 5
    assert report["files"] == sorted(report["files"]) and len(report["files"]) == 4
    clock.set(clock.now + dt.timedelta(days=30))
    report = store.vacuum()
    assert report["no_longer_readable"] == [5, 6] and report["readable"] == [7, 7]
    assert store.table("capsules").collect()["content"].to_list() == ["a", "b", "c", "d"]


@pytest.mark.parametrize("hours,first", [(0, 7), (1, 7), (167.9, 1)])
def test_a_short_retention_must_be_asked_for_explicitly(tmp_path, hours, first):
    store, _ = history(tmp_path)
    before = state_of(store)
    with pytest.raises(InvalidInputError, match="allow_short_retention=True"):
        store.vacuum(retention_hours=hours)
    assert state_of(store) == before
    report = store.vacuum(retention_hours=hours, allow_short_retention=True)
    assert report["readable"] == [first, 7]
    assert report["no_longer_readable"] == ([1, first - 1] if first > 1 else None)


@pytest.mark.parametrize("bad", [{"retention_hours": -1}, {"retention_hours": float("nan")},
                                 {"retention_hours": "168"}, {"retention_hours": True},
                                 {"dry_run": "yes"}, {"allow_short_retention": 1}])
def test_odd_vacuum_arguments_are_refused(tmp_path, bad):
    store, _ = history(tmp_path)
    before = state_of(store)
    with pytest.raises(InvalidInputError):
        store.vacuum(**bad)
    assert state_of(store) == before


def test_a_dry_run_removes_nothing_and_reports_what_the_real_run_does(tmp_path):
    store, _ = history(tmp_path)
    before = state_of(store)
    plan = store.vacuum(retention_hours=0, allow_short_retention=True, dry_run=True)
    assert state_of(store) == before and plan["dry_run"] is True
    done = store.vacuum(retention_hours=0, allow_short_retention=True)
    assert {**plan, "dry_run": False} == done
    assert len(done["files"]) == 6 and all(f.startswith("capsules/part-") for f in done["files"])


def test_an_erasure_is_never_kept_for_time_travel(tmp_path):
    store, _ = history(tmp_path)
    store.forget("cap-2", mode="purge")
    report = store.vacuum()  # the default window: only the erased bytes' history goes
    assert report["readable"] == [8, 8] and report["no_longer_readable"] == [1, 7]
    assert len(list((store.path / "capsules").glob("*.parquet"))) == 1  # the rewritten one
    assert store.table("capsules").collect()["content"].to_list() == ["a", None, "c", "d"]


def test_the_cli_dry_run_lists_files_and_generations(tmp_path, capsys):
    store, _ = history(tmp_path)
    assert main(["vacuum", str(store.path), "--retention-hours", "0", "--format", "text"]) == 1
    err = capsys.readouterr().err
    assert "--allow-short-retention" in err and "Traceback" not in err
    assert main(["vacuum", str(store.path), "--retention-hours", "0", "--allow-short-retention",
                 "--dry-run", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "would remove 6 partition file(s)" in out and "capsules/part-" in out
    assert "generations 1..6 would stop being readable" in out
    assert readable(store) == list(range(1, 8))


def test_a_second_vacuum_reads_only_the_generation_files_since_the_first(tmp_path,
                                                                          monkeypatch):
    """Vacuum reads the log's history of partitions; a handle keeps what the files it
    read said (they never change once linked), so a vacuum under a stream of commits
    costs the commits since the last one, not the log's length."""
    from memframe.store.log import Log

    store, clock = history(tmp_path)
    read: list[int] = []
    real = Log.read_entry
    monkeypatch.setattr(Log, "read_entry", lambda self, g: read.append(g) or real(self, g))
    first = store.vacuum(retention_hours=0, dry_run=True, allow_short_retention=True)
    assert sorted(set(read)) == list(range(1, 8))
    store.ingest({"content": "e", "source": "s", "anchor": "e"})
    store.compact("capsules")
    read.clear()
    again = store.vacuum(retention_hours=0, dry_run=True, allow_short_retention=True)
    assert 7 not in read and {8, 9} <= set(read)
    # the same answer as a handle that reads every file
    fresh = mf.Store.open(tmp_path / "s", clock=clock).vacuum(retention_hours=0, dry_run=True, allow_short_retention=True)
    assert again == fresh and again["files"] != first["files"]
    removed = store.vacuum(retention_hours=0, allow_short_retention=True)
    assert removed["files"] == fresh["files"] and readable(store) == [9]


def test_a_vacuum_asks_the_file_system_only_about_files_it_may_remove(tmp_path, monkeypatch):
    """The files a generation in the window names are kept whatever their age and size:
    a vacuum under a stream of commits lists thousands and stats none of them, only the
    replaced ones past the window and the files no generation names (their age decides)."""
    from memframe.store import store as store_module

    stats: list[str] = []
    real = store_module._owned_files

    class Counted:
        def __init__(self, entry: os.DirEntry[str]) -> None:
            self.entry, self.path, self.name = entry, entry.path, entry.name

        def stat(self, **kwargs: bool) -> os.stat_result:
            stats.append(self.name)
            return self.entry.stat(**kwargs)

    monkeypatch.setattr(store_module, "_owned_files",
                        lambda root: ((Counted(e), rel, kind) for e, rel, kind in real(root)))
    store, _clock = history(tmp_path)
    parts = sum(1 for p in (tmp_path / "s").rglob("part-*.parquet"))
    assert store.vacuum()["files"] == [] and stats == [] and parts > 5
    stray = tmp_path / "s" / "capsules" / ".tmp-0123456789abcdef"
    stray.write_bytes(b"x")
    assert store.vacuum()["files"] == [] and stats == [stray.name]  # too young to remove
    stats.clear()
    removed = store.vacuum(retention_hours=0, allow_short_retention=True)
    gone = [os.path.basename(f) for f in removed["files"]]
    assert len(gone) == 6 and sorted(stats) == sorted([*gone, stray.name])  # still young
    assert removed["bytes"] > 0


def test_a_restored_log_is_read_again_from_the_start(tmp_path):
    """When the newest file a handle read is no longer the same file (a log restored from
    a copy, then committed on), the kept history is dropped, not trusted."""
    from memframe.store.log import Log

    store, clock = history(tmp_path)
    log_dir = tmp_path / "s" / "_log"
    saved = {p.name for p in log_dir.iterdir() if p.is_file()}
    other = mf.Store.open(tmp_path / "s", clock=clock)
    other.ingest({"content": "lost", "source": "s", "anchor": "l"})
    other.compact("capsules")  # generations 8 and 9, read by a vacuum, then lost
    lost = store._log.lifetimes(9)  # read once: kept by the handle's log
    for name in [p.name for p in log_dir.iterdir() if p.is_file()]:
        if name not in saved:
            (log_dir / name).unlink()
    other = mf.Store.open(tmp_path / "s", clock=clock)
    other.ingest({"content": "kept", "source": "s", "anchor": "k"})  # generation 8 again
    other.compact("capsules")  # and 9
    kept, fresh = store._log.lifetimes(9), Log.open(tmp_path / "s").lifetimes(9)
    assert kept == fresh and kept.stamps[-1] != lost.stamps[-1]


def test_a_vacuum_with_nothing_to_remove_never_stops_the_writers(tmp_path, monkeypatch):
    """Under the default window most vacuums remove nothing: they survey without the
    commit lock and answer, so a stream of small commits is never held up by them; nor
    are they by one that removes only files a generation named and a later one replaced
    (no commit links them again). One that removes a file no generation named (a
    crash's, or a commit's in flight) takes the ticket and the lock, and surveys again
    under them."""
    from memframe.store.log import Log

    store, _clock = history(tmp_path)
    taken: list[str] = []
    real_exclusive, real_ticket = Log.exclusive, Log.take_ticket
    monkeypatch.setattr(Log, "exclusive",
                        lambda self, *a: taken.append("lock") or real_exclusive(self, *a))
    monkeypatch.setattr(Log, "take_ticket",
                        lambda self, *a: taken.append("ticket") or real_ticket(self, *a))
    quiet = store.vacuum()
    assert taken == [] and quiet["partitions"] == 0 and quiet["readable"] == [1, 7]
    (tmp_path / "s" / "_log" / ".tmp-0123456789abcdef").write_bytes(b"left by a crash")
    old = dt.datetime.now().timestamp() - 3600
    os.utime(tmp_path / "s" / "_log" / ".tmp-0123456789abcdef", (old, old))
    swept = store.vacuum()
    assert taken == ["ticket", "lock"] and swept["temporary"] == 1
    assert not (tmp_path / "s" / "_log" / ".tmp-0123456789abcdef").exists()
    cut = store.vacuum(retention_hours=0, allow_short_retention=True)
    assert taken[2:] == [] and cut["partitions"] > 0  # replaced files only: no lock
    assert readable(store) == [7]
    assert all(not (tmp_path / "s" / f).exists() for f in cut["files"])
    # a partition no generation named (a crashed writer's, past the grace period)
    name = tables.part_path("capsules", store.generation, 7)
    pl.DataFrame({"x": [1]}).write_parquet(tmp_path / "s" / name)
    os.utime(tmp_path / "s" / name, (old, old))
    orphan = store.vacuum(retention_hours=0, allow_short_retention=True)
    assert taken[2:] == ["ticket", "lock"] and orphan["files"] == [name]
    assert readable(store) == [7]
    # while a push copies files (replaced ones among them), it waits for the push
    store.ingest({"content": "late", "source": "s", "anchor": "l"})
    store.compact("capsules", min_rows=10)
    with store._log.pushing():
        during = store.vacuum(retention_hours=0, allow_short_retention=True)
    assert taken[4:] == ["ticket", "lock"] and during["partitions"] > 0
