"""Digest parity: the imported store's digest equals, byte for byte, the digest written by
hand from the reference (spec/digest-reference.md) for each fixture, built on the engine's
own layout at schema v20 (nMEMORY 0.2.x) and v21 (0.3.0)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from import_helpers import digest_text, expected_text, file_hash
from nmemory_fixture import VERSIONS, build_cycles, build_empty, build_rich

import memframe as mf
from memframe.importers import import_nmemory
from memframe.text import rfc3339

FIXTURES = {"rich": build_rich, "cycles": build_cycles, "empty": build_empty}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_digest_equals_the_hand_written_reference(tmp_path, name, version):
    db = FIXTURES[name](tmp_path / f"{name}.db", version=version)
    report = import_nmemory(db, tmp_path / "store", progress=False)
    assert report.mode == "full"
    assert digest_text(tmp_path / "store") == expected_text(name)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_journal_is_the_source_audit_log_verbatim(tmp_path, name, version):
    """Same seqs, text and hashes, and no journal row of the import's own."""
    import sqlite3

    db = FIXTURES[name](tmp_path / f"{name}.db", version=version)
    import_nmemory(db, tmp_path / "store", progress=False)
    con = sqlite3.connect(db)
    audit = con.execute("SELECT seq, at, actor, action, subject, reason, chained_hash "
                        "FROM audit_events ORDER BY seq").fetchall()
    con.close()
    journal = (mf.Store.open(tmp_path / "store").table("journal").sort("audit_seq")
               .select("audit_seq", rfc3339(pl.col("at")), "actor", "action", "subject",
                       "reason", "chained_hash").collect().rows())
    assert journal == audit


def test_nine_digit_instants_survive(tmp_path):
    db = build_rich(tmp_path / "rich.db")
    import_nmemory(db, tmp_path / "store", progress=False)
    caps = mf.Store.open(tmp_path / "store").table("capsules").filter(
        pl.col("id") == "cap-12").collect()
    assert caps["created_at"].dt.nanosecond().item() == 16162617
    assert json.loads(digest_text(tmp_path / "store"))["newest"][3]["created_at"] == (
        "2026-07-21T23:36:24.016162617Z")


def test_the_source_is_never_written(tmp_path):
    db = build_rich(tmp_path / "rich.db")
    before = file_hash(db)
    db.chmod(0o444)  # read-only file: the import must still work
    try:
        import_nmemory(db, tmp_path / "store", progress=False)
        import_nmemory(db, tmp_path / "store", progress=False)
    finally:
        db.chmod(0o644)
    assert file_hash(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rich.db", "store"]
