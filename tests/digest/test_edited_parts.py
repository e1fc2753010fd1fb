"""A canonical part edited below the digest state's watermark (its size changed, its
modification time restored): the cycle recorded a seal over the identities of the
canonical parts it folded (size, inode, mtime, ctime: any write moves the change time),
so the warm digest sees the part is not the file folded and folds from the rows, as
``verify="full"`` does, and the next cycle rebuilds the digest's state."""

from __future__ import annotations

import datetime as dt
import os

import polars as pl
import pytest

import memframe as mf
from memframe.digest.state import digest_capsules
from tests.conftest import TickingClock

NOW = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)


def _store(path):
    store = mf.Store.create(path, clock=TickingClock())
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                         "project_id": "alpha"} for i in range(4)])
    store.memory.run_cycle()
    store.ingest({"content": "later", "source": "s", "anchor": "a", "project_id": "beta"})
    return store, ids


def _edit_below_the_watermark(store, edit):
    """Rewrite the first capsules part in place with ``edit`` applied to its rows, and set
    its modification time back to what it was."""
    part = store.pinned().partitions("capsules")[0]
    path = store.path / part.path
    before = os.stat(path)
    rows = pl.read_parquet(path)
    edit(rows).write_parquet(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert after.st_mtime_ns == before.st_mtime_ns and after.st_size != before.st_size


def _bodies(store, **kwargs):
    return [mf.digest(store, now=NOW, project_prefix=prefix, **kwargs).to_dict()
            for prefix in (None, "alpha")]


@pytest.mark.parametrize("edit", [
    lambda rows: rows.with_columns(pl.lit("gamma-project").alias("project_id")),
    lambda rows: rows.with_columns(
        pl.when(pl.col("seq") == pl.col("seq").min()).then(pl.lit("ACTIVE(x) rewritten"))
        .otherwise(pl.col("content")).alias("content")),
], ids=["project", "content"])
def test_an_edited_part_is_never_served_from_the_state(tmp_path, edit):
    store, _ids = _store(tmp_path / "s")
    stale = _bodies(store)
    assert digest_capsules.seal_holds(store.pinned())
    _edit_below_the_watermark(store, edit)
    assert not digest_capsules.seal_holds(store.pinned())
    full = _bodies(store, verify="full")
    assert full != stale  # the edit changes the answer
    assert _bodies(store) == full
    report = store.memory.run_cycle()
    assert "canonical parts" in " ".join(report.notes)  # the cycle says why it rebuilt
    assert digest_capsules.seal_holds(store.pinned())
    assert _bodies(store) == _bodies(store, verify="full") == full


def test_the_seal_costs_one_stat_per_part_and_no_row(tmp_path, monkeypatch):
    store, _ids = _store(tmp_path / "s")
    store.memory.run_cycle()
    view = store.pinned()
    stats = []
    real = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: stats.append(p) or real(p, *a, **k))
    assert digest_capsules.seal_holds(view)
    parts = sum(len(view.partitions(name)) for name in mf.schema.CANONICAL_TABLES)
    assert 0 < len(stats) <= parts
