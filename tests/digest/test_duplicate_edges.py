"""Duplicate relation rows (an imported source whose relations table lost its key): the
digest counts edges, not rows. ``open_efforts.member_total`` is the number of distinct
``part_of`` from-ids (reference 4.17) on every path: no state, after a cycle, and
``verify="full"``; so is everything else the graph feeds."""

from __future__ import annotations

import datetime as dt

import memframe as mf
from memframe.importers import import_nmemory
from tests.conftest import TickingClock
from tests.importers.nmemory_fixture import Builder

NOW = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)


def _keyless_source(path):
    """An nMEMORY file whose relations table has no primary key, with every ``part_of``
    and ``blocks`` row written twice."""
    b = Builder(path)
    epic = b.ingest("the effort", at="2026-07-01T00:00:00Z")
    b.classify(epic, "epic", at="2026-07-01T00:00:01Z")
    members = [b.ingest(f"step {i}", at=f"2026-07-01T00:01:0{i}Z") for i in range(3)]
    b.con.executescript("""
        ALTER TABLE relations RENAME TO keyed;
        CREATE TABLE relations (kind TEXT NOT NULL, from_id TEXT NOT NULL,
            to_id TEXT NOT NULL, at TEXT NOT NULL, origin TEXT NOT NULL DEFAULT 'manual');
        DROP TABLE keyed;
    """)
    for i, member in enumerate(members):
        for _copy in range(2):
            b.relate(member, epic, "part_of", at=f"2026-07-01T00:02:0{i}Z")
    for _copy in range(2):
        b.relate(members[1], members[0], "blocks", at="2026-07-01T00:03:00Z")
    b.close()
    return epic


def _efforts(store, **kwargs):
    """What the graph feeds, unfenced (kept sections on the warm path) and fenced (the
    sections computed over the digest state's subset)."""
    bodies = [mf.digest(store, now=NOW, **kwargs).to_dict(),
              mf.digest(store, now=NOW, project_prefix="nmemory", **kwargs).to_dict()]
    return [(b["open_efforts"], b["relations"], b["dag"]) for b in bodies]


def test_member_total_counts_distinct_members_on_every_path(tmp_path):
    epic = _keyless_source(tmp_path / "src.db")
    import_nmemory(tmp_path / "src.db", tmp_path / "s", progress=False)
    store = mf.Store.open(tmp_path / "s", clock=TickingClock())
    full = _efforts(store, verify="full")
    (row,) = full[1][0]
    assert (row["id"], row["member_total"]) == (epic, 3)
    assert _efforts(store) == full  # no state: every row folded now
    store.memory.run_cycle()
    assert _efforts(store) == full  # the state after a cycle
    # a later duplicate of an edge already folded, and a new member twice
    with store.transaction() as c:
        c.relate("cap-4", epic, "part_of")
    assert _efforts(store) == _efforts(store, verify="full")
    store.memory.run_cycle()
    assert _efforts(store) == _efforts(store, verify="full")
    assert mf.digest(store, now=NOW).to_dict() == mf.digest(
        store, now=NOW, verify="full").to_dict()
