"""One set of fail-closed row checks (reference 5), the same verdict on every path: a
store with no digest state (the cold fold), the digest state after a cycle with the bad
rows above its watermark (the job never folds them), and ``verify="full"``; fenced or
not. ``cap-01`` once passed the reference read's own check and failed the state's."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import memframe as mf
from memframe.errors import DigestFailedError, MemframeError
from tests.conftest import TickingClock

NOW = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)


def _newest_part(store, table):
    parts = store.pinned().partitions(table)
    return store.path / max(parts, key=lambda p: p.seq_hi or 0).path


def _set(column, value, dtype=pl.String):
    return lambda rows: rows.with_columns(pl.lit(value, dtype=dtype).alias(column))


# (what is written, the table it lands in, how the new rows are made bad, the verdict)
BAD = {
    "capsule id cap-01": ("ingest", "capsules", _set("id", "cap-01"), "corrupt capsule row"),
    "capsule id cap-0": ("ingest", "capsules", _set("id", "cap-0"), "corrupt capsule row"),
    "capsule id in other digits": ("ingest", "capsules", _set("id", "cap-\u0663"),
                                   "corrupt capsule row"),
    "capsule without project": ("ingest", "capsules", _set("project_id", None),
                                "corrupt capsule row"),
    "capsule without taint": ("ingest", "capsules", _set("instruction_taint", None, pl.Boolean),
                              "corrupt capsule row"),
    "unknown relation kind": ("relate", "relations", _set("kind", "likes"),
                              "unknown relation kind 'likes'"),
    "relation without endpoint": ("relate", "relations", _set("to_id", None),
                                  "has no endpoint"),
    "journal row without time": ("relate", "journal", _set("at", None, pl.Datetime("ns", "UTC")),
                                 "has no valid time"),
    "review verdict": ("review", "reviews", _set("verdict", "maybe"), "review row at seq"),
    "pin without value": ("pin", "pins", _set("pinned", None, pl.Boolean), "pin row at seq"),
    "bracket without id": ("session", "brackets", _set("session_id", None),
                           "session bracket row has no time or id"),
}


def _write(store, what, ids):
    if what == "ingest":
        store.ingest({"content": "newer", "source": "s", "anchor": "a", "project_id": "p"})
    elif what == "relate":
        store.relate(ids[1], ids[0], "blocks")
    elif what == "review":
        store.review(ids[0], "proposed")
    elif what == "pin":
        store.pin(ids[1])
    else:
        store.session_start("p")


def _verdicts(store):
    out = []
    for kwargs in ({}, {"verify": "full"}, {"project_prefix": "p"},
                   {"project_prefix": "p", "verify": "full"}):
        with pytest.raises(MemframeError, match=r"^memory_digest failed: ") as caught:
            mf.digest(store, now=NOW, **kwargs)
        # a type of its own, under the base every caller already catches
        assert type(caught.value) is DigestFailedError, type(caught.value)
        out.append(str(caught.value))
    return out


@pytest.mark.parametrize("cycled", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("case", list(BAD))
def test_the_same_verdict_on_every_path(tmp_path, case, cycled):
    what, table, spoil, verdict = BAD[case]
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                         "project_id": "p"} for i in range(3)])
    store.session_start("p")
    if cycled:
        store.memory.run_cycle()
    _write(store, what, ids)
    path = _newest_part(store, table)
    rows = spoil(pl.read_parquet(path))
    path.unlink()
    rows.write_parquet(path)
    verdicts = _verdicts(store)
    assert len(set(verdicts)) == 1 and verdict in verdicts[0], verdicts
    if cycled:  # the job never folds what the digest fails closed on
        store.memory.run_cycle()
        assert _verdicts(store) == verdicts
