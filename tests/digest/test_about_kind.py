"""The ``about`` relation kind (nMEMORY 0.3.0, reference 0.1): a capsule is about a topic
node. Counted in ``relations``; no effect on ``dag``, ``mission``, ``unanchored`` or
``open_efforts``; an edge to a forgotten topic is refused when it is written."""

from __future__ import annotations

import pytest
from conftest import PROJECT, dig, put

import memframe as mf


def _planning_store(store):
    epic = put(store, "Ship the importer", kind="epic")
    task = put(store, "Write the reader", kind="task")
    other = put(store, "Write the writer", kind="task")
    topic = put(store, "Topic: SQLite")
    store.relate(task, epic, "part_of")
    store.relate(task, other, "blocks")
    return epic, task, other, topic


def _without_relations(d: dict) -> dict:
    """The body less what any relate moves (the edge count and its journal row)."""
    return {k: v for k, v in d.items() if k not in ("relations", "audit_events", "journal")}


@pytest.mark.parametrize("prefix", [None, PROJECT])
def test_about_edges_count_in_relations_and_move_no_other_section(store, prefix):
    epic, task, other, topic = _planning_store(store)
    before = dig(store, project_prefix=prefix)
    # every endpoint shape: a task about a topic, the epic about it, the topic about a task
    store.relate(task, topic, "about")
    store.relate(epic, topic, "about")
    store.relate(topic, other, "about")
    store.relate(other, epic, "about")
    after = dig(store, project_prefix=prefix)
    assert after["relations"] == before["relations"] + 4
    assert after["audit_events"] == before["audit_events"] + 4
    assert _without_relations(after) == _without_relations(before)
    for key in ("dag", "open_efforts", "open_efforts_total", "unanchored", "mission"):
        assert after.get(key) == before.get(key)


def test_about_never_anchors_an_unanchored_node(store):
    epic = put(store, "The epic", kind="epic")
    task = put(store, "A task", kind="task")
    assert dig(store)["unanchored"] == 1
    store.relate(task, epic, "about")
    assert dig(store)["unanchored"] == 1
    store.relate(task, epic, "grounded_in")
    assert "unanchored" not in dig(store)


def test_the_warm_digest_agrees_after_about_edges(store):
    epic, task, other, topic = _planning_store(store)
    store.memory.run_cycle()
    store.relate(task, topic, "about")
    store.relate(epic, topic, "about")
    warm = mf.digest(store, verify="incremental").to_json()
    full = mf.digest(store, verify="full").to_json()
    assert warm == full
    store.memory.run_cycle()
    assert mf.digest(store).to_json() == full


def test_about_to_a_forgotten_capsule_is_refused_with_a_teach(store):
    note, topic = put(store, "a note"), put(store, "a topic")
    store.forget(topic, reason="obsolete")
    with pytest.raises(mf.errors.UnknownCapsuleError,
                       match=r"about edge .* 'cap-2' was forgotten .*live capsule"):
        store.relate(note, topic, "about")
    assert store.table("relations").collect().height == 0
    # the bulk path refuses it too, naming the row, and writes nothing
    with pytest.raises(mf.errors.UnknownCapsuleError, match="relations row 1: an about edge"):
        store.append("relations", {"kind": ["blocks", "about"], "from_id": [note, note],
                                   "to_id": [topic, topic]})
    assert store.table("relations").collect().height == 0


def test_about_is_the_only_kind_that_checks_a_forgotten_end(store):
    note, topic = put(store, "a note"), put(store, "a topic")
    store.forget(note, reason="obsolete")
    store.relate(note, topic, "about")  # a forgotten *from* end is fine, as in the engine
    store.forget(topic, reason="obsolete")
    for kind in ("derived_from", "blocks", "part_of", "proposes"):
        store.relate(put(store, f"n {kind}"), topic, kind)
    assert dig(store)["relations"] == 5


def test_an_about_edge_outlives_the_forget_of_its_topic(store):
    note, topic = put(store, "a note"), put(store, "a topic")
    store.relate(note, topic, "about")
    store.forget(topic, reason="obsolete")
    assert dig(store)["relations"] == 1
