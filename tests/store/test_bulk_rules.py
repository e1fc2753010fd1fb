"""Store.append follows the verbs' rules (its docstring's promise), row for row.

Regression tests: the bulk form of three verbs once accepted what the verb refuses, and the
bulk form of forget dropped an erasure the verb performs. Each test names the verb and
checks the bulk form behaves the same.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import memframe as mf
from memframe.errors import UnknownCapsuleError


def _two_capsules(tmp_path: Path) -> tuple[mf.Store, str, str]:
    store = mf.Store.create(tmp_path / "s")
    a, b = store.ingest([{"content": t, "source": "s", "anchor": t} for t in ("a", "b")])
    return store, a, b


VERB = {
    "recalls": lambda store, cid: store.record_recall([cid]),
    "classifications": lambda store, cid: store.classify(cid, kind="fact"),
    "tiers": lambda store, cid: store.classify(cid, tier="archived"),
}


@pytest.mark.parametrize("table, row", [
    ("recalls", {"count": [1]}),
    ("classifications", {"kind": ["fact"]}),
    ("tiers", {"tier": ["archived"]}),
])
def test_record_level_state_takes_a_forgotten_capsule_like_the_verb(tmp_path: Path, table: str,
                                                                     row: dict) -> None:
    """Usage, kind and tier are about the record (nMEMORY's rule): a tombstoned capsule
    takes them through the verb and through the bulk form alike; an unknown id does not."""
    store, a, _ = _two_capsules(tmp_path)
    store.forget(a)
    VERB[table](store, a)
    assert store.append(table, {"capsule_id": [a], **row}) == 1
    assert store.table(table).filter(pl.col("capsule_id") == a).collect().height == 2
    generation = store.generation
    with pytest.raises(UnknownCapsuleError, match="cap-3"):
        VERB[table](store, "cap-3")
    with pytest.raises(UnknownCapsuleError, match="cap-3"):
        store.append(table, {"capsule_id": ["cap-3"], **row})
    assert store.generation == generation


def test_a_recall_batch_naming_a_forgotten_capsule_keeps_everyones_usage(tmp_path: Path) -> None:
    store, a, b = _two_capsules(tmp_path)
    store.forget(a)
    store.record_recall([a, b, b])
    counts = dict(store.capsule_state().select("id", "recall_count").collect().iter_rows())
    assert counts == {a: 1, b: 2}


def test_bulk_purge_erases_a_tombstoned_capsule_like_the_verb(tmp_path: Path) -> None:
    store, a, b = _two_capsules(tmp_path)
    store.forget(a)
    store.forget(b)
    store.forget(b, mode="purge")  # the verb upgrades a tombstone to an erasure
    store.append("forgets", {"capsule_id": [a], "mode": ["purge"]})
    contents = dict(store.table("capsules").select("id", "content").collect().iter_rows())
    assert contents[b] is None
    assert contents[a] is None  # the bulk form keeps the bytes it was asked to purge


@pytest.mark.parametrize("modes", [["tombstone", "redact"], ["tombstone", "purge"],
                                   ["tombstone", "tombstone", "purge"]])
def test_bulk_forget_keeps_the_strongest_mode_of_one_batch(tmp_path: Path, modes) -> None:
    """A batch naming one capsule twice erases it when any of its rows erases, as the same
    requests through forget() do (the bulk form once kept only the first row)."""
    store, a, b = _two_capsules(tmp_path)
    written = store.append("forgets", {"capsule_id": [a] * len(modes), "mode": modes})
    verbs, c, _ = _two_capsules(tmp_path / "verbs")
    for mode in modes:
        verbs.forget(c, mode=mode)
    assert written == 2
    for s in (store, verbs):
        contents = dict(s.table("capsules").select("id", "content").collect().iter_rows())
        assert contents == {a: None, b: "b"}
        assert s.table("forgets").collect()["mode"].to_list() == ["tombstone", modes[-1]]
