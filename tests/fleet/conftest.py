"""A small fleet on disk: stores built through the public API with an injected clock, one
with a forged journal hash, one damaged, and paths that are not stores."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import polars as pl
import pytest

import memframe as mf
from memframe.synth import synthesize
from tests.conftest import TickingClock

UTC = dt.UTC
T0 = dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=UTC)
#: the fleet's instant: 12 days after the hand-built stores' first commit
NOW = T0 + dt.timedelta(days=12)


def hand_built(path: Path) -> mf.Store:
    """A store whose every fleet figure was written on purpose, at known instants: a
    handoff 10 days before NOW, a session open for 3 days, one miss inside the week and
    one outside it, a proposal, a quarantined capsule and a drifted git witness."""
    clock = TickingClock(T0)
    store = mf.Store.create(path, clock=clock)
    ids = store.ingest([{"content": f"note {i}", "source": "chat", "anchor": f"a{i}",
                         "project_id": p} for i, p in enumerate(["team/api", "team/web", "ops"])])
    store.record_miss(["olden"], "abstain")  # 12 days before NOW: outside the week
    clock.set(NOW - dt.timedelta(days=10, hours=1))
    sid = store.session_start("team/api")
    store.session_finish(sid, handoff="next: ship the schema fix")
    clock.set(NOW - dt.timedelta(days=3))
    store.session_start("ops")  # left open: orphaned after a day
    store.classify(ids[2], tier="quarantined")
    store.review(ids[1], "proposed")
    store.record_git_scan("git:/srv/repo", "abc123", [
        {"capsule_id": ids[0], "kind": "anchor_path", "ref": "a0", "verdict": "drifted"}])
    clock.set(NOW - dt.timedelta(days=2))
    store.record_miss(["recent"], "missing_evidence")
    return store


def forge_first_hash(store: mf.Store) -> None:
    """Break the journal's hash chain at audit_seq 1 (as tests/digest/test_ledger.py does)."""
    time.sleep(0.02)  # a rewrite in the same change-time tick would be racy
    for path in store.pinned().files("journal"):
        frame = pl.read_parquet(path)
        if 1 in frame["audit_seq"].to_list():
            path.unlink()
            frame.with_columns(
                pl.when(pl.col("audit_seq") == 1).then(pl.lit("deadbeef"))
                .otherwise(pl.col("chained_hash")).alias("chained_hash")
            ).write_parquet(path)


def build_fleet(root: Path) -> dict[str, str]:
    """The fleet under ``root / "agents"``; name -> path."""
    agents = root / "agents"
    paths = {
        "alpha": agents / "alpha",
        "beta": agents / "team" / "beta",
        "gamma": agents / "team" / "gamma",
        "broken": agents / "zeta-broken",
        "damaged": agents / "damaged",
    }
    synthesize(paths["alpha"], capsules=200, seed=1)
    synthesize(paths["beta"], capsules=200, seed=2, dag_cycle=True)
    hand_built(paths["gamma"])
    forge_first_hash(hand_built(paths["broken"]))
    damaged = mf.Store.create(paths["damaged"], clock=TickingClock(T0))
    damaged.ingest({"content": "one", "source": "s", "anchor": "a"})
    for part in damaged.files("capsules"):
        part.unlink()
    # a store inside a store's folder is not listed: a store is not descended into
    mf.Store.create(paths["alpha"] / "nested" / "inner")
    (agents / "notes").mkdir()
    (agents / "notes" / "readme.txt").write_text("not a store")
    return {name: str(path) for name, path in paths.items()} | {
        "notes": str(agents / "notes"), "missing": str(agents / "missing"),
        "root": str(agents)}


@pytest.fixture(scope="session")
def fleet_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_fleet(tmp_path_factory.mktemp("fleet"))
