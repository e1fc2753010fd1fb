"""Time travel to a generation whose derived files were vacuumed (a later cycle replaced
them) while its canonical files remain: the warm digest and the session doors fold from
the canonical rows, as ``verify="full"`` does, instead of refusing the generation."""

from __future__ import annotations

import datetime as dt

import memframe as mf
from memframe.store import derived
from tests.conftest import TickingClock

NOW = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)


def _history(path):
    store = mf.Store.create(path, clock=TickingClock())
    ids = store.ingest([{"content": f"ACTIVE(t{i % 2}): note {i}", "source": "s",
                         "anchor": "a", "conversation_id": f"conv-{i % 2}"} for i in range(6)])
    store.classify(ids[0], "epic")
    store.relate(ids[1], ids[0], "part_of")
    store.record_recall(ids[:2])
    store.memory.run_cycle()
    old = store.generation
    store.ingest([{"content": f"later {i}", "source": "s", "anchor": "a",
                   "conversation_id": "conv-0"} for i in range(4)])
    store.record_recall(ids[2:4])
    store.relate(ids[5], ids[4], "supersedes")
    store.memory.run_cycle()
    store.memory.rebuild_projections()  # replaces every derived file of the old cycle
    return store, old




def _doors(view):
    memory = view.memory
    pages = [memory.sessions(), memory.sessions(conversation_id="conv-1"),
             memory.session_digest()]
    return [(page.rows.rows(), page.hash) for page in pages]


def test_a_vacuumed_generation_is_answered_from_its_canonical_rows(tmp_path):
    store, old = _history(tmp_path / "s")
    before = store.at(old)
    warm_before = mf.digest(before, now=NOW).to_dict()
    doors_before = _doors(before)
    assert store.vacuum(retention_hours=0, allow_short_retention=True,
                        grace_seconds=0.001)["partitions"] > 0
    view = store.at(old)
    assert not derived.files_present(view.snapshot, store.path)  # what the vacuum took
    assert view.readable()  # the canonical files remain
    full = mf.digest(view, now=NOW, verify="full").to_dict()
    for prefix in (None, "proj"):
        assert mf.digest(view, now=NOW, project_prefix=prefix).to_dict() == mf.digest(
            view, now=NOW, project_prefix=prefix, verify="full").to_dict()
    assert mf.digest(view, now=NOW).to_dict() == full == warm_before
    assert full["total"] == 6
    assert _doors(view) == doors_before
    # the newest generation still reads its own derived state
    latest = store.pinned()
    assert derived.files_present(latest.snapshot, store.path)
    assert mf.digest(latest, now=NOW).to_dict() == mf.digest(
        latest, now=NOW, verify="full").to_dict()
