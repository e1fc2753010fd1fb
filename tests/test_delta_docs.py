"""docs/delta.md as a reader follows it: every console line and every Python snippet runs
as written, from a checkout's root holding the bundled sample (the DuckDB snippet in the
side environment that has DuckDB 1.4.4 and its delta extension package)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memframe as mf
from memframe.errors import DeltaLogMissingError, InvalidInputError

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "delta.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.xdist_group("delta-docs")


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC, flags=re.S)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A directory laid out as the checkout's root (`data/sample-store`), with a
    `memframe` command on PATH."""
    shutil.copytree(ROOT / "data" / "sample-store", tmp_path / "data" / "sample-store")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "memframe").write_text(f'#!/bin/sh\nexec {sys.executable} -m memframe "$@"\n')
    (bin_dir / "memframe").chmod(0o755)
    return tmp_path


def _env(checkout: Path, *extra_path: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{checkout / 'bin'}:/usr/bin:/bin",
            "PYTHONPATH": os.pathsep.join([str(ROOT), *extra_path])}


def _shell(line: str, checkout: Path, *extra_path: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", line], cwd=checkout, env=_env(checkout, *extra_path),
                          capture_output=True, text=True, timeout=300)


def test_every_snippet_of_the_delta_page_runs_as_written(checkout):
    from tests.store.delta_readers import duckdb_python

    setup, *later = _blocks("console")
    for line in setup.strip().splitlines():
        run = _shell(line, checkout)
        assert run.returncode == 0, (line, run.stderr)
    status = json.loads(_shell("memframe delta status my-store", checkout).stdout)
    assert status["enabled"] and status["synced_through"] == status["generation"] > 0
    python_blocks = _blocks("python")
    assert len(python_blocks) == 2
    readers, duck = python_blocks
    assert "duckdb_ext" in duck and "duckdb_ext" not in readers
    run = subprocess.run([sys.executable, "-c", readers], cwd=checkout, env=_env(checkout),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    store = mf.Store.open(checkout / "my-store")
    projects = store.table("capsules").select("project_id").unique().collect()
    for project in projects.get_column("project_id"):
        assert project in run.stdout
    assert str(store.generation) in run.stdout and "term" in run.stdout
    side = duckdb_python()
    run = subprocess.run([str(side), "-c", duck], cwd=checkout, capture_output=True,
                         text=True, timeout=300, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    newest = (store.table("recall_misses").sort("seq").collect().tail(1)
              .get_column("term")[0])
    assert newest in run.stdout
    # `memframe delta duckdb` in a Python that has the extension package: its SQL loads in
    # DuckDB 1.4.4 and every table reads as memframe's
    (views_line,) = [line for block in later for line in block.strip().splitlines()]
    site = next((side.parent.parent / "lib").glob("python3*/site-packages"))
    run = _shell(views_line, checkout, str(site))
    assert run.returncode == 0, run.stderr
    sql = (checkout / "views.sql").read_text()
    assert sql.startswith("LOAD '") and "delta.duckdb_extension" in sql.splitlines()[0]
    count = subprocess.run(
        [str(side), "-c",
         "import duckdb, sys, json\n"
         "con = duckdb.connect(config={'allow_unsigned_extensions': 'true', "
         "'autoinstall_known_extensions': 'false'})\n"
         "con.execute(open('views.sql').read())\n"
         "print(json.dumps({t: con.sql(f'select count(*) from \"{t}\"').fetchone()[0] "
         "for t in ('capsules', 'journal', 'recall_misses')}))"],
        cwd=checkout, capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin"})
    assert count.returncode == 0, count.stderr
    assert json.loads(count.stdout) == {t: store.row_count(t)
                                        for t in ("capsules", "journal", "recall_misses")}


def test_before_the_sync_memframe_says_which_command_starts_the_logs(checkout):
    store = mf.Store.open(checkout / "data" / "sample-store")
    for call in (lambda: mf.delta.table_path(store, "capsules"),
                 lambda: mf.delta.scan(str(store.path), "journal")):
        with pytest.raises(DeltaLogMissingError,
                           match=r"has no Delta log yet.*`memframe delta sync .*sample-store`"):
            call()
    with pytest.raises(InvalidInputError, match="did you mean 'capsules'"):
        mf.delta.table_path(store, "capsule")
    run = _shell("memframe delta duckdb data/sample-store --extension /dev/null", checkout)
    assert run.returncode == 1 and "memframe delta sync data/sample-store" in run.stderr
    status = _shell("memframe delta status data/sample-store --format text", checkout)
    assert "keeps no Delta logs (start them with `memframe delta sync" in status.stdout


def test_without_the_extension_package_the_command_says_how_to_get_it(checkout):
    assert _shell("cp -r data/sample-store my-store && memframe delta sync my-store",
                  checkout).returncode == 0
    run = _shell("memframe delta duckdb my-store", checkout)
    assert run.returncode == 1
    assert "duckdb-ext-delta==" in run.stderr and "--extension" in run.stderr
    missing = _shell("memframe delta duckdb my-store --extension nowhere.ext", checkout)
    assert missing.returncode == 2 and "no such file" in missing.stderr
