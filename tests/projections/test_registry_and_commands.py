"""The closed registry of projection names, and the functions behind the CLI commands."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memframe as mf
from memframe.projections import commands
from memframe.projections.registry import (
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
    registry = copy / "memframe" / "projections" / "registry.py"
    text = registry.read_text()
    assert 'MEMORY_PROJECTION_NAMES: tuple[str, ...] = ("session", "digest")' in text
    registry.write_text(text.replace(
        'MEMORY_PROJECTION_NAMES: tuple[str, ...] = ("session", "digest")',
                                     f"MEMORY_PROJECTION_NAMES: tuple[str, ...] = {names}"))
    code = "import memframe, memframe.projections; print(memframe.__file__)"
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


def test_cli_functions(tmp_path):
    path = tmp_path / "s"
    store = mf.Store.create(path)
    assert commands.sessions_command(path)["sessions"] == []
    store.ingest(caps([("a", 1), ("b", 2)]))
    cycle = commands.cycle_command(path)
    session = cycle["projections"]["session"]
    assert (session["rows_folded"], session["rows_written"]) == (2, 2)
    rebuild = commands.rebuild_command(str(path))
    assert rebuild["projections"]["session"]["rows_written"] == 2
    out = commands.sessions_command(path)
    assert [line.split()[0] for line in out["sessions"]] == ["b", "a"]
    json.dumps(out), json.dumps(cycle), json.dumps(rebuild)
    again = commands.sessions_command(path, known_hash=out["hash"])
    assert again["unchanged"] and again["sessions"] == []
    with pytest.raises(mf.errors.NotAStoreError):
        commands.cycle_command(tmp_path / "nothing")
