"""Fixtures: stores built through the public API with an injected, steppable clock."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest

import memframe as mf

UTC = dt.UTC
T0 = dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=UTC)
PROJECT = "nmemory"  # the reference harness's default project


class Clock:
    """A clock that advances one second per reading unless frozen."""

    def __init__(self, start: dt.datetime = T0, step: dt.timedelta = dt.timedelta(seconds=1)):
        self.now = start
        self.step = step

    def __call__(self) -> dt.datetime:
        value = self.now
        self.now = self.now + self.step
        return value

    def set(self, when: dt.datetime) -> None:
        self.now = when


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path, clock) -> Iterator[mf.Store]:
    yield mf.Store.create(tmp_path / "store", clock=clock)


def put(store, content: str, project: str = PROJECT, **fields) -> str:
    """Ingest one capsule (source/anchor default to a plain note) and return its id."""
    row = {"content": content, "source": "note", "anchor": "test", "project_id": project}
    row.update(fields)
    (cid,) = store.ingest(row)
    return cid


def dig(store, **kwargs) -> dict:
    """The digest body as a dict, with a fixed instant unless one is given."""
    kwargs.setdefault("now", T0 + dt.timedelta(days=1))
    return mf.digest(store, **kwargs).to_dict()


def raw(store, **kwargs) -> str:
    kwargs.setdefault("now", T0 + dt.timedelta(days=1))
    text = mf.digest(store, **kwargs).to_json()
    assert json.loads(text) is not None
    return text


def ids(rows) -> list[str]:
    return [row["id"] for row in rows]
