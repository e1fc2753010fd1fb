"""One capsule-state fold (`memframe.state.fold_state`) for every reader: after any history
of verbs, `Store.capsule_state()`, the reference digest's state and the digest's
incremental state (stored rows plus the rows above their watermark, with the job run at
random points) all equal a plain-Python model of the canonical rows."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.digest.reads import reference_state
from memframe.digest.state import warm_reader
from memframe.state import state_frame
from memframe.text import headline
from tests.conftest import TickingClock
from tests.strategies import LAW_EXAMPLES, digest_step, play

#: the public columns of `Store.capsule_state()` beyond the capsule's own
PUBLIC = ("status", "superseded", "forget_mode", "recall_count", "last_recalled_at", "kind",
          "scope", "tier")
#: what the digest reads of each capsule beyond those
DIGEST = ("staged", "pinned", "named", "forget_named", "member_total", "newest_member",
          "thread", "headline")


#: the verbs that write rows the fold reads (the others only dilute the search)
fold_step = digest_step.filter(lambda s: s[0] in (
    "ingest", "relate", "forget", "recall", "classify", "kind", "review", "pin", "cycle",
    "rebuild", "compact"))
_plain = {"content": "ACTIVE(t): x", "project_id": "p", "source": "note", "kind": None,
          "late": 0, "expires": False, "imported": False}


def _number(capsule_id: str | None) -> int | None:
    if capsule_id is None or not capsule_id.startswith("cap-"):
        return None
    digits = capsule_id[4:]
    return int(digits) if digits.isdigit() and digits == str(int(digits)) else None


def _latest(rows: list[dict], capsule_id: str) -> dict | None:
    mine = [r for r in rows if r["capsule_id"] == capsule_id]
    return max(mine, key=lambda r: r["seq"]) if mine else None


def model(store: mf.Store) -> dict[str, dict]:
    """Capsule id -> its state, in plain Python from the canonical rows (independent of
    the Polars fold)."""
    t = {name: store.table(name).collect().to_dicts() for name in (
        "capsules", "recalls", "classifications", "tiers", "forgets", "journal", "relations",
        "reviews", "pins")}
    out = {}
    for c in t["capsules"]:
        cid = c["id"]
        recalls = [r for r in t["recalls"] if r["capsule_id"] == cid]
        forgets = [r for r in t["forgets"] if r["capsule_id"] == cid]
        forget = _latest(t["forgets"], cid)
        kind = _latest(t["classifications"], cid)
        tier = _latest(t["tiers"], cid)
        review = _latest(t["reviews"], cid)
        pin = _latest(t["pins"], cid)
        into = [r for r in t["relations"] if r["to_id"] == cid]
        members = [r for r in into if r["kind"] == "part_of"]
        superseded = any(r["kind"] == "supersedes" for r in into)
        erased = any(r["mode"] in ("redact", "purge") for r in forgets)
        subjects = [r for r in t["journal"] if r["subject"] == cid]
        content = c["content"] or ""
        thread = None
        if content.startswith("ACTIVE(") and ")" in content:
            thread = content[len("ACTIVE("):content.index(")")]
        out[cid] = {
            "status": ("tombstoned" if forget else "superseded" if superseded else "live"),
            "superseded": superseded,
            "forget_mode": forget["mode"] if forget else None,
            "recall_count": sum(r["count"] for r in recalls),
            "last_recalled_at": max((r["at"] for r in recalls), default=None),
            "kind": kind["kind"] if kind else None,
            "scope": kind["scope"] if kind else None,
            "tier": tier["tier"] if tier else "active",
            "staged": review is not None and review["verdict"] != "ratified",
            "pinned": bool(pin["pinned"]) if pin else False,
            "named": bool(subjects),
            "forget_named": any(r["action"] in ("memory_forget", "memory_merge")
                                for r in subjects),
            "member_total": len(members),
            "newest_member": max((_number(r["from_id"]) for r in members
                                  if _number(r["from_id"]) is not None), default=None),
            "thread": None if erased else thread,
            "headline": "" if erased else headline(content),
        }
    return out


def _by_id(frame, columns) -> dict[str, dict]:
    return {row["id"]: {c: row[c] for c in columns} for row in frame.to_dicts()}


def _project(states: dict[str, dict], columns) -> dict[str, dict]:
    return {cid: {c: s[c] for c in columns} for cid, s in states.items()}


def test_every_reader_of_capsule_state_equals_the_plain_python_model():
    @settings(max_examples=LAW_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(fold_step, min_size=1, max_size=18), final_cycle=st.booleans())
    # a sum, a max and a latest-by-seq each need two events of one capsule to be told apart
    @example(steps=[("ingest", [_plain, _plain]), ("recall", [0]), ("cycle", None),
                    ("recall", [0, 0]), ("kind", (0, "task")), ("kind", (0, "epic")),
                    ("pin", (1, True)), ("pin", (1, False)), ("review", (1, "proposed")),
                    ("relate", (1, 0, "part_of")), ("relate", (1, 0, "part_of"))],
             final_cycle=False)
    def law(steps, final_cycle):
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play(store, steps)
            if final_cycle:
                store.memory.run_cycle()
            expected = model(store)
            public = store.capsule_state().collect()
            assert public.get_column("seq").is_sorted()
            assert _by_id(public, PUBLIC) == _project(expected, PUBLIC)
            view = store.pinned()
            tables = {name: frame.collect() for name, frame in view.tables().items()}
            reference = reference_state(tables)
            assert _by_id(reference, PUBLIC + DIGEST) == _project(expected, PUBLIC + DIGEST)
            # the incremental state keeps no text: its headlines read as unknown (null)
            # until the digest reads the content of the rows it emits
            rows, _visited, _above = warm_reader.read_state(view)
            incremental = state_frame(rows)
            without_text = PUBLIC + tuple(c for c in DIGEST if c != "headline")
            assert _by_id(incremental, without_text) == _project(expected, without_text)
            for cid, row in _by_id(incremental, ("headline",)).items():
                assert row["headline"] in (None, expected[cid]["headline"]), cid

    law()
