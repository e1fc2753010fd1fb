"""A generation file is checked in full: an odd one is a CorruptStoreError naming the file and
the field, on open, read, digest, ingest and vacuum alike.

Regression: an infinite ``generation`` or ``rows`` gave a raw OverflowError, 100k nested
brackets a raw RecursionError, odd counters or a numeric timestamp a raw error on the next
ingest, and ``"rows": -5`` or ``"seq": [Infinity, n]`` were accepted silently.
"""

from __future__ import annotations

import json

import pytest

import memframe as mf
from memframe.errors import CorruptStoreError


def edit(entry: dict, path: list, value) -> dict:
    target = entry
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return entry


# (what, the JSON path edited, the raw JSON text put there, the field the error names)
ODD = [
    ("infinite generation", ["generation"], "1e400", "generation"),
    ("infinite rows", ["add", 0, "rows"], "1e400", "rows"),
    ("negative rows", ["add", 0, "rows"], "-5", "rows"),
    ("float rows", ["add", 0, "rows"], "1.5", "rows"),
    ("infinite seq bound", ["add", 0, "seq"], "[Infinity, 3]", "seq"),
    ("reversed seq", ["add", 0, "seq"], "[3, 2]", "seq"),
    ("NaN seq", ["seq"], "[NaN, 4]", "seq"),
    ("text counter", ["counters", "capsules"], '"abc"', "capsules"),
    ("infinite counter", ["counters", "seq"], "1e400", "seq"),
    ("negative counter", ["counters", "audit_seq"], "-1", "audit_seq"),
    ("bool counter", ["counters", "sessions"], "true", "sessions"),
    ("numeric timestamp", ["timestamp"], "5", "timestamp"),
    ("odd timestamp", ["timestamp"], '"yesterday"', "timestamp"),
    ("deep watermarks", ["watermarks"], '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "nests deeper"),
    ("text watermark", ["watermarks"], '{"projections/session": "12"}', "projections/session"),
    ("infinite watermark", ["watermarks"], '{"projections/session": 1e400}', "projections/session"),
    ("odd parent", ["parent"], "7", "parent"),
    ("odd erases", ["erases"], '"yes"', "erases"),
    ("chain not text", ["counters", "chain"], "5", "chain"),
]

PLACEHOLDER = "\"__odd__\""


def damaged(tmp_path, clock, path: list, raw: str) -> mf.Store:
    """A handle that saw generation 1, and a generation 2 file damaged after it landed."""
    writer = mf.Store.create(tmp_path / "s", clock=clock)
    writer.ingest({"content": "a", "source": "s", "anchor": "a"})
    handle = mf.Store.open(writer.path, clock=clock)
    writer.ingest({"content": "b", "source": "s", "anchor": "b"})
    name = writer.path / "_log" / f"{2:020d}.json"
    entry = edit(json.loads(name.read_text()), path, "__odd__")
    name.write_text(json.dumps(entry).replace(PLACEHOLDER, raw))
    return handle


@pytest.mark.parametrize("what,path,raw,field", ODD, ids=[o[0] for o in ODD])
def test_an_odd_generation_file_is_a_corrupt_store_naming_file_and_field(tmp_path, clock, what,
                                                                          path, raw, field):
    store = damaged(tmp_path, clock, path, raw)
    calls = {
        "open": lambda: mf.Store.open(store.path),
        "read": lambda: store.table("capsules").collect(),
        "digest": lambda: mf.digest(store),
        "ingest": lambda: store.ingest({"content": "c", "source": "s", "anchor": "c"}),
        "vacuum": lambda: store.vacuum(),
        "time travel": lambda: store.at(2),
        "history": lambda: store.history(),
    }
    for name, call in calls.items():
        with pytest.raises(CorruptStoreError) as info:
            call()
        message = str(info.value)
        assert f"{2:020d}.json" in message, name
        assert field in message, (name, message)
    # the generation before it stays readable
    assert store.at(1).table("capsules").collect().height == 1


def test_a_deeply_nested_format_marker_is_not_a_store(tmp_path, clock):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    (store.path / "memframe.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(mf.errors.NotAStoreError, match="memframe.json"):
        mf.Store.open(store.path)


def test_a_deeply_nested_checkpoint_is_ignored(tmp_path, clock):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    for i in range(100):
        store.record_miss([f"t{i}"], "abstain")
    (store.path / "_log" / f"_checkpoint.{100:020d}.json").write_text("[" * 100_000)
    assert mf.Store.open(store.path).table("recall_misses").collect().height == 100
