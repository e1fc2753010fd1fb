"""Rows spilled to disk until their commit lands (`memframe.store.spill`): the partition is
the file a frame of the same rows makes, the rebuild spills the digest state's rows, and
no spill file outlives its commit."""

from __future__ import annotations

import tempfile

import polars as pl
import pytest

import memframe as mf
from memframe.errors import InvalidInputError
from memframe.store import spill as spill_module
from memframe.store.spill import RowSpill

SCHEMA = pl.Schema({"num": pl.Int64(), "tier": pl.String(), "at": pl.Datetime("ns", "UTC")})


def _rows(lo: int, hi: int) -> pl.DataFrame:
    return pl.DataFrame({"num": range(lo, hi), "tier": [None if i % 5 else f"t{i % 3}"
                                                        for i in range(lo, hi)],
                         "at": [None] * (hi - lo)}, schema=SCHEMA)


@pytest.fixture
def spill_dir(tmp_path, monkeypatch):
    """Spill files under ``tmp_path/spill``, to see what is left behind."""
    where = tmp_path / "spill"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


def test_spilled_rows_read_back_as_written(spill_dir):
    spill = RowSpill(SCHEMA)
    for lo, hi in ((1, 4), (4, 4), (4, 1000)):
        spill.add(_rows(lo, hi))
    with pytest.raises(InvalidInputError, match="do not match"):
        spill.add(_rows(1, 3).drop("at"))
    rows = spill.rows()
    assert rows.height == 999 and rows.schema == SCHEMA
    assert rows.collect().equals(_rows(1, 1000))
    assert rows.slice(990, 50).equals(_rows(991, 1000))
    assert rows.select("num").get_column("num").equals(_rows(1, 1000)["num"])
    assert rows.clear().schema == SCHEMA and rows.clear().height == 0
    assert RowSpill(SCHEMA).rows().collect().equals(_rows(1, 1))  # nothing added
    assert list(spill_dir.iterdir())  # held while the rows are
    del spill, rows
    assert not list(spill_dir.iterdir())  # and gone with them


def test_a_spilled_table_lands_as_the_same_file_as_its_frame(tmp_path, spill_dir, monkeypatch):
    monkeypatch.setattr(spill_module, "SPILL_GROUP_ROWS", 7)  # slices cut across row groups
    monkeypatch.setattr(mf.store.tables, "WRITE_ROWS", 30)
    files = {}
    for how in ("frame", "spilled"):
        store = mf.Store.create(tmp_path / how)

        def stage(c, how=how):
            rows: object = _rows(1, 500)
            if how == "spilled":
                spill = RowSpill(SCHEMA)
                for lo in range(1, 500, 64):
                    spill.add(_rows(lo, min(lo + 64, 500)))
                rows = spill.rows()
            c.write_derived("projections/test/rows", rows, replace=True, row_group_rows=16)

        store.commit(stage, operation="test")
        view = store.pinned()
        (part,) = view.partitions("projections/test/rows")
        files[how] = (view.path / part.path).read_bytes()
        assert part.rows == 499
    assert files["spilled"] == files["frame"]
    assert not list(spill_dir.iterdir())  # the spill file went with its commit


def test_a_spilled_table_takes_no_other_rows(tmp_path, spill_dir):
    store = mf.Store.create(tmp_path / "s")
    spill = RowSpill(SCHEMA)
    spill.add(_rows(1, 10))

    def stage(c):
        c.write_derived("projections/test/rows", _rows(20, 30), replace=True)
        c.write_derived("projections/test/rows", spill.rows(), replace=False)

    with pytest.raises(InvalidInputError, match="only staged rows"):
        store.commit(stage, operation="test")
    assert store.generation == 0  # nothing was written


def test_the_rebuild_spills_the_state_rows_and_leaves_no_file(tmp_path, spill_dir, monkeypatch):
    from memframe.synth import synthesize

    synthesize(tmp_path / "s", capsules=300, chunk_rows=100)
    store = mf.Store.open(tmp_path / "s")
    added: list[int] = []
    add = RowSpill.add
    monkeypatch.setattr(RowSpill, "add", lambda self, f: added.append(f.height) or add(self, f))
    report = store.memory.rebuild_projections()
    assert sum(added) == 300  # every capsule's state row went through the spill
    assert report.projections["digest_capsules"]["rows_written"] == 300
    assert not list(spill_dir.iterdir())
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()


def test_a_spill_left_by_a_dead_process_is_removed_by_the_next(spill_dir):
    import subprocess
    import sys

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = spill_dir / f"memframe-spill-{int(ended.stdout)}-abc123"
    live = spill_dir / "memframe-spill-1-def456"  # pid 1 is alive while the machine is
    other = spill_dir / "memframe-spill-abcdef"  # a name without a process id: not ours
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "rows.parquet").write_bytes(b"x")
    spill = RowSpill(SCHEMA)
    spill.add(_rows(0, 3))
    assert not dead.exists() and live.exists() and other.exists()
    assert spill.rows().height == 3
