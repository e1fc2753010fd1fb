"""Fixtures of the distributed tests: one local Ray for the whole session, small stores."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import memframe as mf
from memframe.projections import session_rows
from memframe.synth import synthesize
from tests.conftest import TickingClock

UTC = dt.UTC
T0 = dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=UTC)
#: the digests' "now": fixed, so the ray, process and one-by-one digests agree
NOW = dt.datetime(2026, 9, 1, tzinfo=UTC)


@pytest.fixture(scope="session")
def ray_local() -> Iterator[object]:
    """Ray in local mode, started once for every test that needs it, shut down at the end."""
    import ray

    if ray.is_initialized():  # pragma: no cover - another suite left one running
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


def Clock() -> TickingClock:  # noqa: N802 (the suite's clock, one second per reading)
    return TickingClock(T0)


def ingest_batch(store: mf.Store, rng: random.Random, n: int, tag: str,
                 conversations: int = 17) -> list[str]:
    """``n`` capsules in one commit: random conversations (some none), late arrivals
    (created_at anywhere in a week, so later commits carry older instants) and exact
    created_at ties (the "last member" tie-break by capsule number)."""
    stamps = [T0 + dt.timedelta(minutes=rng.randrange(0, 7 * 24 * 60 // 10) * 10)
              for _ in range(n)]
    convs = [None if rng.random() < 0.15 else f"conv-{rng.randrange(conversations):02d}"
             for _ in range(n)]
    frame = pl.DataFrame(
        {
            "content": [f"{tag}-{i} " + "x" * rng.randrange(0, 40) for i in range(n)],
            "source": "conversation",
            "anchor": [f"{tag}/{i}" for i in range(n)],
            "conversation_id": convs,
            "created_at": stamps,
        },
        schema_overrides={"conversation_id": pl.String, "created_at": pl.Datetime("ns", "UTC")},
    )
    return store.ingest(frame)


def many_partition_store(path: Path, *, commits: int = 40, rows: int = 60,
                         seed: int = 7) -> mf.Store:
    """A store whose capsules sit in ``commits`` partitions, with summaries and a purge."""
    rng = random.Random(seed)
    store = mf.Store.create(path, clock=Clock())
    ids: list[str] = []
    for c in range(commits):
        ids += ingest_batch(store, rng, rows, f"c{c}")
        if c % 9 == 4:
            picks = sorted({f"conv-{rng.randrange(17):02d}" for _ in range(4)})
            store.append("summaries", {"conversation_id": picks + ["conv-only-summary"],
                                       "summary": [f"summary {c} of {p}" for p in picks]
                                       + ["no member yet"]})
    store.forget(ids[5], mode="purge")  # rewrites a capsule partition; content_chars stays
    store.forget(ids[6])
    return store


def projection_rows(store: mf.Store | mf.StoreView) -> pl.DataFrame:
    """The stored session rows (one per conversation), sorted by conversation_id."""
    rows, _ = session_rows.read_all(store.pinned())
    return rows.sort("conversation_id")


@pytest.fixture(scope="session")
def digest_stores(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three small realistic stores (distinct seeds)."""
    root = tmp_path_factory.mktemp("digest-stores")
    paths = []
    for seed in (1, 2, 3):
        path = root / f"store-{seed}"
        synthesize(path, capsules=300, seed=seed)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="session")
def broken_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Paths that cannot digest: missing, not a store, a store with a partition gone."""
    root = tmp_path_factory.mktemp("broken")
    (root / "not-a-store").mkdir()
    (root / "not-a-store" / "notes.txt").write_text("hello")
    damaged = root / "damaged"
    store = mf.Store.create(damaged)
    store.ingest({"content": "one", "source": "s", "anchor": "a"})
    for part in store.files("capsules"):
        part.unlink()
    return {"missing": str(root / "missing"), "not-a-store": str(root / "not-a-store"),
            "damaged": str(damaged)}
