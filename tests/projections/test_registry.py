"""The closed registry of projection names: complete at import, and the jobs' dispatch."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memframe as mf
from memframe.jobs.registry import (
    DOORS,
    FOLDS,
    MEMORY_PROJECTION_NAMES,
    ProjectionRegistryError,
    check_registry,
)
from tests.projections.helpers import caps

PACKAGE = Path(mf.__file__).parent


def test_the_closed_set_today():
    assert mf.MEMORY_PROJECTION_NAMES == MEMORY_PROJECTION_NAMES == ("session", "digest")
    check_registry(MEMORY_PROJECTION_NAMES, FOLDS, DOORS)
    with pytest.raises(ProjectionRegistryError, match="'topic'.*without a fold"):
        check_registry(("session", "topic"), FOLDS, {**DOORS, "topic": print})
    with pytest.raises(ProjectionRegistryError, match="'topic'.*without a door"):
        check_registry(("session", "topic"), {**FOLDS, "topic": print}, DOORS)
    with pytest.raises(ProjectionRegistryError, match="not in MEMORY_PROJECTION_NAMES"):
        check_registry((), FOLDS, DOORS)


def _import_copy(tmp_path: Path, names: str) -> subprocess.CompletedProcess:
    copy = tmp_path / "pkg"
    shutil.copytree(PACKAGE, copy / "memframe", ignore=shutil.ignore_patterns("__pycache__"))
    registry = copy / "memframe" / "jobs" / "registry.py"
    text = registry.read_text()
    assert 'MEMORY_PROJECTION_NAMES: tuple[str, ...] = ("session", "digest")' in text
    registry.write_text(text.replace(
        'MEMORY_PROJECTION_NAMES: tuple[str, ...] = ("session", "digest")',
                                     f"MEMORY_PROJECTION_NAMES: tuple[str, ...] = {names}"))
    code = "import memframe, memframe.jobs; print(memframe.__file__)"
    return subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True,
                          text=True, env={"PYTHONPATH": str(copy), "PATH": ""})


def test_a_bogus_name_fails_at_import(tmp_path):
    control = _import_copy(tmp_path / "ok", '("session", "digest")')
    assert control.returncode == 0, control.stderr
    assert control.stdout.strip().startswith(str(tmp_path / "ok"))  # the copy was imported
    bogus = _import_copy(tmp_path / "bogus", '("session", "digest", "bogus")')
    assert bogus.returncode != 0
    assert "ProjectionRegistryError" in bogus.stderr
    assert "'bogus' is in MEMORY_PROJECTION_NAMES without a fold and without a door" in bogus.stderr


def test_the_names_are_the_jobs_dispatch(tmp_path, monkeypatch):
    """A cycle and a rebuild run exactly the stages of the names listed, in their order."""
    from memframe.jobs import registry

    store = mf.Store.create(tmp_path / "s")
    store.ingest(caps([("a", 1), ("b", 2)]))
    monkeypatch.setattr(registry, "MEMORY_PROJECTION_NAMES", ("session",))
    report = store.memory.run_cycle()
    assert set(report.projections) == {"session", "forgotten"}
    assert not store.derived_names("projections/digest")
    monkeypatch.setattr(registry, "MEMORY_PROJECTION_NAMES", ("session", "digest"))
    report = store.memory.rebuild_projections()
    assert {"session", "digest_capsules", "digest_sections"} <= set(report.projections)
    assert store.derived_names("projections/digest")


def test_two_jobs_in_one_transaction_are_refused(tmp_path):
    store = mf.Store.create(tmp_path / "s")
    store.ingest(caps([("a", 1), ("b", 2), ("a", 3)]))
    for second in ("run_cycle", "rebuild_projections"):
        with pytest.raises(mf.errors.InvalidInputError, match="one projection job"):
            with store.transaction():
                store.memory.run_cycle()
                getattr(store.memory, second)()
    assert store.generation == 1  # nothing landed
    store.memory.run_cycle()
    rows = store.memory.sessions().rows.sort("conversation_id")
    assert rows["memory_count"].to_list() == [2, 1]
    assert store.memory.rebuild_projections() and \
        store.memory.sessions().rows.sort("conversation_id")["memory_count"].to_list() == [2, 1]

