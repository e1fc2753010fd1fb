"""Fixtures: stores built through the public API with an injected, steppable clock.

Every spec-scenario test (the modules in `SCENARIOS`) that takes the ``store`` fixture
runs once per read path of the digest, as one test runs over every backend elsewhere: the
spec's scenarios hold whichever way the digest reads. Other tests read their stores cold
(the law tests compare the paths themselves).

* ``cold``: no derived state; the digest folds every row;
* ``warm``: a cycle right before each digest: the stored state (and the kept sections,
  where a digest can use them) answers;
* ``tail``: a cycle after every `put`, none before the digest: the stored state plus the
  rows written above its watermark;
* ``full``: ``verify="full"``, the reference walk.

`dig` and `raw` take the path from the store the fixture made; stores a test builds by
hand are read cold.
"""

from __future__ import annotations

import datetime as dt
import json
import weakref
from collections.abc import Iterator
from pathlib import Path

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


READ_PATHS = ("cold", "warm", "tail", "full")
#: the modules of spec scenarios (reference clauses restated as tests)
SCENARIOS = frozenset({
    "test_capsule_sections", "test_handoff", "test_staged_pinned", "test_graph_sections",
    "test_ledger", "test_open_efforts", "test_shape", "test_telemetry", "test_fail_open",
    "test_params",
})
_MISSING = sorted(s for s in SCENARIOS if not (Path(__file__).parent / f"{s}.py").exists())
assert not _MISSING, f"SCENARIOS names modules that do not exist: {_MISSING}"
_PATH_OF: weakref.WeakKeyDictionary[mf.Store, str] = weakref.WeakKeyDictionary()


def pytest_generate_tests(metafunc) -> None:
    if "read_path" in metafunc.fixturenames:
        module = metafunc.module.__name__.rsplit(".", 1)[-1]
        metafunc.parametrize("read_path", READ_PATHS if module in SCENARIOS else ("cold",))


@pytest.fixture
def store(tmp_path, clock, read_path) -> Iterator[mf.Store]:
    made = mf.Store.create(tmp_path / "store", clock=clock)
    _PATH_OF[made] = read_path
    yield made


def cycle(store: mf.Store) -> None:
    """Run the projection job through a handle of its own, so the test's clock does not
    move (commit stamps never go backwards, so any fixed instant serves)."""
    mf.Store.open(store.path, clock=lambda: T0).memory.run_cycle()


def settle(store: mf.Store) -> None:
    """Run now what the read path runs before a digest (a test that counts the digest's
    own reads calls it first, so the job's reads are not counted)."""
    if _PATH_OF.get(store) == "warm":
        cycle(store)


def _digest(store, kwargs: dict) -> mf.Digest:
    kwargs.setdefault("now", T0 + dt.timedelta(days=1))
    path = _PATH_OF.get(store, "cold") if isinstance(store, mf.Store) else "cold"
    if path == "warm":
        cycle(store)
    elif path == "full":
        kwargs.setdefault("verify", "full")
    return mf.digest(store, **kwargs)


def put(store, content: str, project: str = PROJECT, **fields) -> str:
    """Ingest one capsule (source/anchor default to a plain note) and return its id."""
    row = {"content": content, "source": "note", "anchor": "test", "project_id": project}
    row.update(fields)
    (cid,) = store.ingest(row)
    if _PATH_OF.get(store) == "tail":
        cycle(store)
    return cid


def dig(store, **kwargs) -> dict:
    """The digest body as a dict, with a fixed instant unless one is given, read the way
    the test's read path says."""
    return _digest(store, kwargs).to_dict()


def raw(store, **kwargs) -> str:
    text = _digest(store, kwargs).to_json()
    assert json.loads(text) is not None
    return text


def ids(rows) -> list[str]:
    return [row["id"] for row in rows]
