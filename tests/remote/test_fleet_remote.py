"""The fleet frame of stores on an S3 server: listed under a prefix, each row equal to the
row of the same store on disk, a broken journal flagged, a failing store its own row."""

from __future__ import annotations

import datetime as dt

import polars as pl

import memframe as mf
from memframe.store.objects import Objects, list_stores
from tests.fleet.conftest import forge_first_hash, hand_built

NOW = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)


def test_a_fleet_on_object_storage_reads_as_the_same_fleet_on_disk(tmp_path, bucket,
                                                                   s3_options, monkeypatch):
    local = {name: hand_built(tmp_path / name) for name in ("a1", "a2", "team/a3")}
    forge_first_hash(local["a2"])
    prefix = f"s3://{bucket}/agents"
    for name, store in local.items():
        store.push(f"{prefix}/{name}", storage_options=s3_options)
    # not a store: a stray object, and a prefix whose push never finished (no marker)
    Objects(prefix, s3_options).put("notes/readme.txt", b"hello")
    Objects(f"{prefix}/half", s3_options).put("_log/00000000000000000001.json", b"{}")
    assert list_stores(prefix, s3_options) == [f"{prefix}/{n}" for n in ("a1", "a2", "team/a3")]

    there = mf.fleet(prefix, now=NOW, storage_options=s3_options)
    here = mf.fleet([str(tmp_path / n) for n in local], now=NOW)
    assert there.frame["path"].to_list() == [f"{prefix}/{n}" for n in ("a1", "a2", "team/a3")]
    same = [c for c in here.frame.columns if c not in ("path", "digest_requests")]
    assert there.frame.select(same).equals(here.frame.select(same))
    assert there.frame["chain_ok"].to_list() == [True, False, True]
    assert there.frame["broken_chain"].to_list() == [False, True, False]
    assert there.frame["error"].is_null().all()
    assert (there.frame["digest_requests"] > 0).all()
    assert here.frame["digest_requests"].is_null().all()

    # a store that fails is a row with its error, and the others still read (read through
    # a new mirror: the old one holds the files fetched before they were deleted)
    monkeypatch.setenv("MEMFRAME_CACHE_DIR", str(tmp_path / "new-cache"))
    Objects(f"{prefix}/a1", s3_options).delete_many(
        [p.path for p in local["a1"].partitions("journal")])
    broken = mf.fleet([f"{prefix}/a1", f"{prefix}/team/a3", f"{prefix}/missing"], now=NOW,
                      storage_options=s3_options)
    errors = dict(zip(broken.frame["path"], broken.frame["error"], strict=True))
    assert errors[f"{prefix}/team/a3"] is None
    assert "NotAStoreError" in errors[f"{prefix}/missing"]
    assert errors[f"{prefix}/a1"] is not None and "journal" in errors[f"{prefix}/a1"]
    assert broken.frame.filter(pl.col("path") == f"{prefix}/team/a3")["total"].item() == \
        here.frame.filter(pl.col("path").str.ends_with("a3"))["total"].item()
