"""Shared fixtures: stores are built through the public API with an injected clock."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import polars as pl
import pytest

import memframe as mf


class TickingClock:
    """The suite's one injected clock: deterministic instants for every verb.

    Each reading moves ``step`` (default one second; ``timedelta(0)`` freezes it) from
    ``start``. ``advance_first`` (default) returns start + step on the first reading; off,
    the first reading is ``start`` itself. ``set(when)`` moves it explicitly.
    """

    def __init__(self, start: dt.datetime | None = None, step: dt.timedelta | None = None,
                 *, advance_first: bool = True):
        self.now = start or dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=dt.UTC)
        self.step = step if step is not None else dt.timedelta(seconds=1)
        self.advance_first = advance_first

    def __call__(self) -> dt.datetime:
        if self.advance_first:
            self.now = self.now + self.step
            return self.now
        value = self.now
        self.now = self.now + self.step
        return value

    def set(self, when: dt.datetime) -> None:
        self.now = when


FROZEN = dt.timedelta(0)


@pytest.fixture
def clock() -> TickingClock:
    return TickingClock()


@pytest.fixture
def store(tmp_path, clock) -> mf.Store:
    return mf.Store.create(tmp_path / "store", clock=clock)


def rfc3339(value: dt.datetime) -> str:
    text = value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text + "Z"


def verify_chain(journal: pl.DataFrame) -> tuple[bool, int]:
    """An independent reading of reference 4.14: (ok, rows verified or the broken audit seq)."""
    prev = ""
    rows = journal.sort("audit_seq").iter_rows(named=True)
    count = 0
    for row in rows:
        line = json.dumps(
            {"seq": row["audit_seq"], "at": rfc3339(row["at"]), "actor": row["actor"],
             "action": row["action"], "subject": row["subject"], "reason": row["reason"]},
            ensure_ascii=False, separators=(",", ":"),
        )
        expected = hashlib.sha256((prev + line).encode()).hexdigest()
        if expected != row["chained_hash"]:
            return False, row["audit_seq"]
        prev = row["chained_hash"]
        count += 1
    return True, count
