"""`mf.explain`: why a capsule is, or is not, in each list of the digest.

The law (over the digest machine's random histories): ``listed`` is membership of the id in
that section of ``mf.digest(...)``, and a listed row's ``rank`` is its place in the listed
list. Hand-written cases pin each family of reasons, naming the rule and the other capsule.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

import memframe as mf
from memframe.digest import EXPLAIN_SECTIONS
from tests.digest.machine import DigestMachine

#: sections that are counts on the wire (never listed)
COUNTS = {"unanchored", "staged"}
#: (headlines, project_prefix) probes of the law
PROBES = ((2, None), (10, "nott"))


def ids_in(body: dict, section: str) -> list[str]:
    """The ids a section of the wire JSON names (an independent reading of 4.0)."""
    head, _, tail = section.partition(".")
    value = body.get(head)
    if tail:
        value = value.get(tail) if isinstance(value, dict) else None
    if not isinstance(value, list):
        return []
    return [v if isinstance(v, str) else v["id"] for v in value]


def check_explain(store: mf.Store, cids: list[str], n: int, prefix: str | None) -> None:
    body = json.loads(mf.digest(store, headlines=n, project_prefix=prefix).to_json())
    for cid in cids:
        why = mf.explain(store, cid, headlines=n, project_prefix=prefix)
        assert why.schema == pl.Schema({"section": pl.String(), "listed": pl.Boolean(),
                                        "rank": pl.Int64(), "reason": pl.String()})
        assert tuple(why["section"]) == EXPLAIN_SECTIONS
        for section, listed, rank, reason in why.iter_rows():
            ids = ids_in(body, section)
            assert listed == (cid in ids), (cid, n, prefix, section, reason, ids)
            assert reason, section
            if listed:
                assert rank == ids.index(cid) + 1, (cid, section, rank, ids)
            elif rank is not None and section not in COUNTS:
                cap = 20 if section == "pinned" else n
                assert rank > cap, (cid, n, section, rank, reason, ids)
                assert "past" in reason, reason


class ExplainMachine(DigestMachine):
    """The machine's sessions; explain of a few capsules checked against the digest."""

    def digest_agrees(self) -> None:  # the digest's bytes are the machine's own test
        pass

    @invariant()
    def explain_agrees(self) -> None:
        cids = sorted({self.cap(self.written // 2), self.cap(self.written - 1)})
        self.probe = getattr(self, "probe", -1) + 1  # one probe a step, in turn (CI time)
        check_explain(self.store, cids, *PROBES[self.probe % len(PROBES)])


TestExplainMachine = ExplainMachine.TestCase
TestExplainMachine.settings = settings(max_examples=6, stateful_step_count=20, deadline=None,
                                       suppress_health_check=list(HealthCheck))


# -- the reasons, family by family ------------------------------------------------------------

def note(content: str = "note", **fields) -> dict:
    return {"content": content, "source": "s", "anchor": "a", **fields}


def why(store: mf.Store, cid: str, section: str, **kwargs) -> tuple[bool, int | None, str]:
    frame = mf.explain(store, cid, **kwargs)
    row = frame.filter(pl.col("section") == section)
    assert row.height == 1, section
    return row.row(0)[1:]


def test_one_row_per_section_in_wire_order_and_the_same_answer_twice(store):
    [a] = store.ingest(note())
    first = mf.explain(store, a)
    assert first["section"].to_list() == list(EXPLAIN_SECTIONS)
    assert first.equals(mf.explain(store, a))
    assert mf.explain(store.at(store.generation), a).equals(first)
    assert why(store, a, "newest") == (True, 1, "listed at rank 1 (newest first, 4.4)")


def test_a_staged_capsule_is_out_of_every_capsule_section_and_counted_in_staged(store):
    [a] = store.ingest(note())
    store.review(a, "proposed")
    listed, rank, reason = why(store, a, "newest")
    assert (listed, rank) == (False, None)
    assert reason.startswith("staged and not ratified (4.17)") and '"proposed"' in reason
    assert why(store, a, "staged")[2].startswith("counted in staged.proposed (4.17)")
    store.review(a, "ratified")
    assert why(store, a, "newest")[0] is True
    assert why(store, a, "staged")[2] == 'not staged (4.17): its latest review verdict is "ratified"'


def test_a_tombstoned_capsule_is_told_so(store):
    [a, b] = store.ingest([note(), note("other")])
    store.relate(a, b, "blocks")
    store.forget(a)
    assert why(store, a, "newest")[2].startswith("tombstoned (2.1)")
    assert why(store, a, "dag.ready")[2] == "tombstoned: dead to the dag (4.10)"
    assert why(store, b, "dag.ready")[:2] == (True, 1)  # its one blocker is dead


def test_outside_the_prefix(store):
    [a] = store.ingest(note(project_id="nottx"))
    listed, rank, reason = why(store, a, "newest", project_prefix="nott")
    assert (listed, rank) == (False, None)
    assert reason.startswith('outside the prefix nott/ (3): its project "nottx"')
    assert why(store, a, "newest", project_prefix="nottx")[0] is True


def test_rank_past_headlines_says_raise_headlines(store):
    ids = store.ingest([note(f"n{i}") for i in range(12)])
    assert why(store, ids[0], "newest") == (False, 12, "rank 12 past headlines 10 (raise headlines)")
    assert why(store, ids[0], "newest", headlines=12)[0] is True
    assert why(store, ids[10], "newest", headlines=0) == (
        False, 2, "rank 2 past headlines 0 (raise headlines)")


def test_handoff_reasons_name_the_rule_and_the_other_capsule(store):
    [unclosed, plain, old, new, first, second] = store.ingest([
        note("ACTIVE(open without a close"), note("plain"), note("ACTIVE(t): one"),
        note("ACTIVE(t): two"), note("done", source="memory_session_finish"),
        note("done again", source="memory_session_finish")])
    assert why(store, unclosed, "handoff")[2] == (
        "not a thread handoff: the ACTIVE( label is not closed (2.3: no ')' follows it)")
    assert why(store, plain, "handoff")[2].startswith("not a handoff (2.3)")
    assert why(store, old, "handoff")[2] == (
        f'a newer handoff {new} holds project "default", thread "t" (4.3: the newest per key wins)')
    assert why(store, first, "handoff")[2] == (
        f'a newer handoff {second} holds the bracket slot of project "default" (4.3: the newest per '
        f'key wins)')
    store.relate(old, new, "supersedes")
    assert why(store, new, "handoff")[2] == (
        f"a thread handoff retired by {old} (4.3): a superseded thread row leaves the lead")
    assert why(store, old, "handoff")[:2] == (True, 2)
    assert why(store, new, "dag.ready")[2] == "not a blocks-edge participant (4.10): no blocks edge names it"


def test_most_recalled_and_pinned(store):
    ids = store.ingest([note(f"n{i}") for i in range(22)])
    assert why(store, ids[0], "most_recalled")[2] == "never recalled (4.5): no recall receipt names it"
    store.record_recall([ids[0]])
    assert why(store, ids[0], "most_recalled")[:2] == (True, 1)
    with store.transaction():
        for cid in ids:
            store.pin(cid)
        store.pin(ids[5], pinned=False)
    assert why(store, ids[5], "pinned")[2] == "not pinned (4.17): its latest pin row unpinned it"
    assert why(store, ids[0], "pinned") == (False, 21, (
        "rank 21 past the pinned cap 20 (4.17: DIGEST_PINNED_CAP; headlines does not raise "
        "it)"))
    assert why(store, ids[-1], "pinned", headlines=0)[:2] == (True, 1)


def test_dag_reasons_name_the_blocker_the_witness_and_the_superseder(store):
    [a, b, c, d, w] = store.ingest([note(f"n{i}") for i in range(5)])
    store.relate(a, b, "blocks")
    store.relate(b, c, "blocks")
    assert why(store, b, "dag.ready") == (False, None, f"blocked by {a} (4.10)")
    assert why(store, b, "dag.blocked")[:2] == (True, 1)
    assert why(store, a, "dag.blocked")[2].startswith("ready (4.10)")
    assert why(store, a, "dag.done")[2] == "not witnessed (4.10): no witnesses edge names it"
    store.relate(w, a, "witnesses")
    assert why(store, a, "dag.ready")[2] == (
        f"done: witnessed by {w}, it leaves ready and blocked (4.10)")
    assert why(store, b, "dag.ready")[:2] == (True, 1)
    store.relate(d, b, "supersedes")
    assert why(store, b, "dag.ready")[2] == f"superseded by {d}: dead to the dag (4.10)"
    store.relate(c, a, "blocks")
    store.relate(a, c, "blocks")  # a is done: no cycle through it
    assert why(store, c, "dag.cycle")[2].startswith("the blocks dag is acyclic (4.10)")


def test_a_blocks_cycle_is_named(store):
    [a, b, c] = store.ingest([note(f"n{i}") for i in range(3)])
    store.relate(a, b, "blocks")
    store.relate(b, a, "blocks")
    assert why(store, a, "dag.cycle") == (True, 1, (
        "listed at rank 1 on the reported blocks dag cycle (4.10): supersede or forget a "
        "member to repair it"))
    assert why(store, b, "dag.ready")[2].startswith(f"the blocks dag has a live cycle ({a} -> {b})")
    assert why(store, c, "dag.cycle")[2] == f"not on the one blocks dag cycle reported (4.10: {a} -> {b})"


def test_mission_unanchored_and_open_efforts(store):
    [epic, parent, task, member, witness] = store.ingest([
        note("epic", kind="epic"), note("parent", kind="epic"), note("task", kind="task"),
        note("member"), note("proof")])
    assert why(store, epic, "mission.roots")[:2] == (True, 2)
    assert why(store, task, "mission.roots")[2] == 'not an epic (4.11): its kind is "task"'
    assert why(store, task, "unanchored")[2].startswith("counted in unanchored (4.12): a task")
    assert why(store, member, "unanchored")[2].startswith("not a planning node (4.12)")
    store.relate(epic, parent, "grounded_in")
    store.relate(task, parent, "grounded_in")
    assert why(store, epic, "mission.roots")[2] == (
        f"anchored by grounded_in to the live parent {parent} (4.11)")
    assert why(store, task, "unanchored")[2] == (
        f"anchored by grounded_in to the live parent {parent} (4.12)")
    store.relate(member, epic, "part_of")
    assert why(store, epic, "open_efforts")[:2] == (True, 1)
    store.relate(witness, epic, "witnesses")
    assert why(store, epic, "open_efforts")[2] == (
        f"witnessed by {witness}: done, not an open epic (4.17)")
    assert why(store, member, "open_efforts")[2] == "not an epic (4.17): it was never classified"


def test_unknown_ids_and_bad_parameters_are_refused_like_the_digest_refuses_them(store):
    store.ingest(note())
    with pytest.raises(mf.errors.UnknownCapsuleError, match=r"'cap-9' is not in this store "
                       r"\(ids run cap-1..cap-1\); list the ids with store.capsule_state\(\)"):
        mf.explain(store, "cap-9")
    with pytest.raises(mf.errors.InvalidInputError, match="headlines requires"):
        mf.explain(store, "cap-1", headlines=-1)
    with pytest.raises(mf.errors.DigestParameterError, match="subtree separator"):
        mf.explain(store, "cap-1", project_prefix="nott/")
    with pytest.raises(mf.errors.InvalidInputError, match="an id like 'cap-12'"):
        mf.explain(store, 1)


def test_a_repeated_handoff_is_one_capsule_and_the_machine_counts_it_once():
    # regression: two sessions finishing with the same handoff text share one capsule; the
    # machine once counted two and asked explain about an id the store never wrote
    machine = ExplainMachine()
    try:
        machine.start(rows=[{"content": "plain note", "late_days": 0, "project_id": "nott",
                             "handoff": False, "event": False, "imported": False,
                             "expires": False, "evidence": None, "kind": None,
                             "conversation": None}])
        machine.session_start(project="nott/sub")
        machine.session_start(project="nottx")
        machine.session_finish(i=0, handoff="next: carry on")
        machine.session_finish(i=0, handoff="next: carry on")
        assert machine.written == machine.store.counters["capsules"] == 2
        machine.explain_agrees()
        why = mf.explain(machine.store, "cap-2")
        assert why.filter(pl.col("section") == "handoff")["listed"].item()
    finally:
        machine.teardown()
