"""The bundled sample store: warm as shipped, with a little history to travel through.

When the derived-state format changes, `python scripts/make_sample_store.py` brings the
sample up to date in one run; these tests say so when it is needed.
"""

from __future__ import annotations

import shutil

import memframe as mf
from memframe.synth import sample_store_path

REGENERATE = "the bundled sample is stale: run `python scripts/make_sample_store.py`"


def test_the_sample_ships_with_current_derived_state(tmp_path):
    copy = tmp_path / "sample"
    shutil.copytree(sample_store_path(), copy)
    store = mf.Store.open(copy)
    # a cycle on a copy has nothing to fold, rebuild or move: the state is current
    report = store.memory.run_cycle()
    assert report.generation is None, f"{REGENERATE} (a cycle wrote {report.to_dict()})"
    # so the digest of the sample as shipped reads the kept state, not every row
    warm = mf.digest(mf.Store.open(sample_store_path()))
    full = mf.digest(mf.Store.open(sample_store_path()), verify="full")
    assert warm.to_json() == full.to_json()
    assert warm.rows_visited * 20 < full.rows_visited, (REGENERATE, warm.rows_visited,
                                                        full.rows_visited)


def test_the_sample_keeps_a_few_generations_for_time_travel():
    store = mf.Store.open(sample_store_path())
    readable = [g for g in range(1, store.generation + 1) if store.at(g).readable()]
    assert len(readable) >= 5 and readable[-1] == store.generation
    # they differ: a handoff, new capsules and a forget came after the compaction
    totals = {mf.digest(store.at(g)).to_dict()["total"] for g in readable}
    assert len(totals) >= 2
    # and the timeline holds no future: the newest commit is the timeline's, not today's
    assert store.committed_at < "2026-07-01"


def test_as_of_reaches_a_day_of_history_and_the_instants_the_digest_shows(capsys):
    """The readable generations span more than a day, and `--as-of` an instant the digest
    shows (the created_at of a capsule written in that span) reads the store as it was."""
    import datetime as dt
    import json

    from memframe.cli import main

    store = mf.Store.open(sample_store_path())
    readable = [g for g in range(1, store.generation + 1) if store.at(g).readable()]
    first, last = (dt.datetime.fromisoformat(store.at(g).committed_at)
                   for g in (readable[0], readable[-1]))
    assert last - first >= dt.timedelta(days=1), (first, last)
    newest = mf.digest(store).to_dict()["newest"]
    later = [r for r in newest if dt.datetime.fromisoformat(r["created_at"]) >= first]
    assert len(later) >= 2
    for row in later:
        assert main(["digest", "--as-of", row["created_at"], "--format", "json"]) == 0
        body = json.loads(capsys.readouterr().out)
        # the store as it was then: that capsule is there, nothing written after it
        shown = [r["id"] for r in body["newest"]]
        assert row["id"] in shown, (row, shown)
        assert all(r["created_at"] <= row["created_at"] for r in body["newest"]), shown
    # an instant between two later generations reads the one before it
    middle = first + (last - first) / 2
    assert main(["digest", "--as-of", middle.isoformat(), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] <= mf.digest(store).to_dict()["total"]
