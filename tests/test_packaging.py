"""The sample store is found from a source checkout and from a built (non-editable) wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from memframe.synth import sample_store_path

ROOT = Path(__file__).resolve().parent.parent


def test_a_checkout_finds_the_repository_sample_store():
    assert sample_store_path() == ROOT / "data" / "sample-store"


@pytest.mark.slow
def test_a_built_wheel_carries_the_sample_store_and_finds_it(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "dist"), "-q"],
        capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("memframe-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    store_files = sorted(
        p.relative_to(ROOT / "data").as_posix()
        for p in (ROOT / "data" / "sample-store").rglob("*") if p.is_file()
    )
    assert store_files
    for name in store_files:
        assert f"memframe/_data/{name}" in names
    assert "memframe/_render/style.css" in names  # the one stylesheet ships with the code
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = subprocess.run(
        [sys.executable, "-c",
         "import memframe.synth as s, memframe as mf; p = s.sample_store_path(); "
         "print(p); print(mf.Store.open(p).row_count('capsules')); "
         "assert '.mf-id' in mf.Store.open(p)._repr_html_()"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": ""},
    )
    assert probe.returncode == 0, probe.stderr
    path, capsules = probe.stdout.split()
    assert Path(path) == site / "memframe" / "_data" / "sample-store"
    assert int(capsules) > 1000
