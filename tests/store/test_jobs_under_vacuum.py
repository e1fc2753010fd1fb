"""The projection jobs and doors re-pin and run again when another handle compacts and
vacuums the files their generation names while they read it.

Regression: ``run_cycle()`` and ``rebuild_projections()`` raised a raw FileNotFoundError,
and ``sessions()``, ``session_digest()`` and ``episodes()`` raised "this generation is no
longer readable" on a Store handle whose newest generation was fine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

import memframe as mf
from memframe.store import tables

SHORT = {"retention_hours": 0, "allow_short_retention": True}


def conversation(store: mf.Store, texts: str) -> None:
    for t in texts:  # one commit each: small parts a compaction merges
        store.ingest({"content": t, "source": "s", "anchor": t, "conversation_id": "c"})


@contextlib.contextmanager
def vacuumed_while_read(prefix: str, replace: Callable[[], None]) -> Iterator[list[int]]:
    """On the first read of a partition under ``prefix``, run ``replace`` (another handle
    replacing those files) and a vacuum, so the files the reader pinned are gone."""
    fired: list[int] = []
    original_scan, original_ranges = tables.scan, tables.row_group_ranges

    def fire(paths: list[str]) -> None:
        if not fired and any(p.startswith(prefix) for p in paths):
            fired.append(1)
            replace()

    def scan(root, parts, schema):
        frame = original_scan(root, parts, schema)  # planned on the pinned files...
        fire([p.path for p in parts])  # ...which go before it is collected
        return frame

    def ranges(path, column, physical=False):
        fire([path.relative_to(path.parents[2]).as_posix(),
              path.relative_to(path.parents[1]).as_posix()])
        return original_ranges(path, column, physical)

    tables.scan, tables.row_group_ranges = scan, ranges
    try:
        yield fired
    finally:
        tables.scan, tables.row_group_ranges = original_scan, original_ranges


def compact_and_vacuum(path) -> Callable[[], None]:
    def run() -> None:
        other = mf.Store.open(path)
        other.compact("capsules")
        other.vacuum(**SHORT)
    return run


@pytest.mark.parametrize("job", ["run_cycle", "rebuild_projections"])
def test_a_job_reruns_when_its_capsule_parts_are_compacted_and_vacuumed(store, job):
    conversation(store, "abc")
    with vacuumed_while_read("capsules/", compact_and_vacuum(store.path)) as fired:
        report = getattr(store.memory, job)()
    assert fired and report.generation is not None
    rows = store.memory.sessions().rows
    assert rows.select("conversation_id", "memory_count").rows() == [("c", 3)]
    # warm == full: the rebuild agrees with what the job landed
    cycled = store.memory.session_digest().hash
    store.memory.rebuild_projections()
    assert store.memory.session_digest().hash == cycled


def rebuild_and_vacuum(path) -> Callable[[], None]:
    def run() -> None:
        other = mf.Store.open(path)
        other.memory.rebuild_projections()  # replaces every projection partition
        other.vacuum(**SHORT)
    return run


@pytest.mark.parametrize("door", ["sessions", "session_digest"])
def test_a_door_repins_when_the_projection_it_reads_is_replaced_and_vacuumed(store, door):
    conversation(store, "ab")
    store.memory.run_cycle()
    expected = getattr(store.memory, door)().hash
    with vacuumed_while_read("projections/", rebuild_and_vacuum(store.path)) as fired:
        page = getattr(store.memory, door)()
    assert fired and page.hash == expected


def test_episodes_repin_when_the_open_tails_are_replaced_and_vacuumed(store):
    conversation(store, "ab")
    store.memory.run_episode_job()
    assert store.memory.episodes().rows["memory_count"].to_list() == [2]

    def replace() -> None:
        other = mf.Store.open(store.path)
        other.ingest({"content": "z", "source": "s", "anchor": "z", "conversation_id": "d"})
        other.memory.run_episode_job()  # replaces projections/episodes/open
        other.vacuum(**SHORT)

    with vacuumed_while_read("projections/episodes/open", replace) as fired:
        rows = store.memory.episodes().rows
    assert fired
    assert sorted(rows.select("conversation_id", "memory_count").rows()) == [("c", 2), ("d", 1)]


def test_a_frozen_view_still_reports_a_generation_it_cannot_read(store):
    conversation(store, "ab")
    store.memory.run_cycle()
    view = store.pinned()
    rebuild_and_vacuum(store.path)()
    with pytest.raises(mf.errors.GenerationNotFoundError, match="no longer readable"):
        view.memory.sessions()
