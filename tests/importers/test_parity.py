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


# ---- the same rows at other caps and fences, derived by hand from the reference ----------

def _capped(body: dict, n: int) -> dict:
    """Reference 1.1 and 4.0 applied to a digest computed at a larger cap: every capped list
    keeps its first ``n`` rows, no count or total moves, and ``handoff``,
    ``open_efforts`` and a ``mission`` left without roots are omitted when empty."""
    out = json.loads(json.dumps(body))
    for key in ("handoff", "newest", "most_recalled", "open_session_ids", "open_efforts"):
        if key in out:
            out[key] = out[key][:n]
    for name in ("ready", "blocked", "done"):
        if name in out["dag"]:
            out["dag"][name] = out["dag"][name][:n]
        for row in out.get("open_efforts", []):
            if name in row:
                row[name] = row[name][:n]
    if "roots" in out.get("mission", {}):
        out["mission"]["roots"] = out["mission"]["roots"][:n]
    for key in ("handoff", "open_efforts"):
        if key in out and not out[key]:
            del out[key]
    if "roots" in out.get("mission", {}) and not out["mission"]["roots"]:
        del out["mission"]
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_rich_digest_at_other_caps(tmp_path, version, n):
    db = build_rich(tmp_path / "rich.db", version=version)
    import_nmemory(db, tmp_path / "store", progress=False)
    got = json.loads(digest_text(tmp_path / "store", headlines=n))
    assert got == _capped(json.loads(expected_text("rich")), n)


@pytest.mark.parametrize("version", VERSIONS)
def test_rich_digest_fenced_to_nott(tmp_path, version):
    """Fixture A fenced to ``nott`` (capsules 1-7, 9 and 16 of the script): the capsule
    sections hold those only, the store-global ones are unchanged, and the miss text is
    omitted (reference 3, 4.7)."""
    db = build_rich(tmp_path / "rich.db", version=version)
    import_nmemory(db, tmp_path / "store", progress=False)
    got = json.loads(digest_text(tmp_path / "store", headlines=5, project_prefix="nott"))
    full = json.loads(expected_text("rich"))
    rows = {key: {row["id"]: row for row in full[key]}
            for key in ("handoff", "newest", "most_recalled")}
    want = _capped(full, 5)
    want.update(
        total=9,
        by_project=[p for p in full["by_project"] if p["project_id"].startswith("nott")],
        handoff=[rows["handoff"][i] for i in ("cap-16", "cap-3")], handoff_total=2,
        newest=[rows["newest"][i] for i in ("cap-16", "cap-9", "cap-7", "cap-6", "cap-5")],
        newest_total=9,
        most_recalled=[rows["most_recalled"][i] for i in ("cap-1", "cap-3")],
        most_recalled_total=2,
    )
    del want["recent_failures"]
    assert got == want
