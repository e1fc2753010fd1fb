"""Store.append follows the verbs' rules (its docstring's promise), row for row.

Regression tests: the bulk form of three verbs once accepted what the verb refuses, and the
bulk form of forget dropped an erasure the verb performs. Each test names the verb and
checks the bulk form behaves the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import memframe as mf
from memframe.errors import UnknownCapsuleError


def _two_capsules(tmp_path: Path) -> tuple[mf.Store, str, str]:
    store = mf.Store.create(tmp_path / "s")
    a, b = store.ingest([{"content": t, "source": "s", "anchor": t} for t in ("a", "b")])
    return store, a, b


@pytest.mark.parametrize("table, row", [
    ("recalls", {"count": [1]}),
    ("classifications", {"kind": ["fact"]}),
    ("tiers", {"tier": ["archived"]}),
])
def test_bulk_refuses_a_forgotten_capsule_like_the_verb(tmp_path: Path, table: str,
                                                        row: dict) -> None:
    store, a, _ = _two_capsules(tmp_path)
    store.forget(a)
    with pytest.raises(UnknownCapsuleError):
        store.record_recall([a])  # the verb refuses (so do classify(kind=..., tier=...))
    with pytest.raises(UnknownCapsuleError):
        store.append(table, {"capsule_id": [a], **row})


def test_bulk_purge_erases_a_tombstoned_capsule_like_the_verb(tmp_path: Path) -> None:
    store, a, b = _two_capsules(tmp_path)
    store.forget(a)
    store.forget(b)
    store.forget(b, mode="purge")  # the verb upgrades a tombstone to an erasure
    store.append("forgets", {"capsule_id": [a], "mode": ["purge"]})
    contents = dict(store.table("capsules").select("id", "content").collect().iter_rows())
    assert contents[b] is None
    assert contents[a] is None  # the bulk form keeps the bytes it was asked to purge
