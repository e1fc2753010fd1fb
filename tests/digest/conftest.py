"""Fixtures: stores built through the public API with an injected, steppable clock."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest

import memframe as mf
from tests.conftest import TickingClock

UTC = dt.UTC
T0 = dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=UTC)
PROJECT = "nmemory"  # the reference harness's default project


def Clock(start: dt.datetime = T0,  # noqa: N802 (a factory standing in for the old class)
          step: dt.timedelta = dt.timedelta(seconds=1)) -> TickingClock:
    """The suite's clock, reading ``start`` first (the reference harness's convention)."""
    return TickingClock(start, step, advance_first=False)


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
