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
