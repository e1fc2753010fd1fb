"""A torn, empty or deleted Parquet part (canonical or derived) and odd arguments give a
`MemframeError` naming the file and the fix, never a raw traceback; a torn derived file
is written again by itself (issue 38, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memframe as mf
from memframe.cli import main
from memframe.errors import CorruptStoreError, MemframeError


def _store(path: Path) -> mf.Store:
    store = mf.Store.create(path)
    sid = store.session_start("p")
    for i in range(5):
        store.ingest({"content": f"c{i}", "source": "s", "anchor": str(i)})
    store.session_finish(sid, "handoff")
    store.memory.run_cycle()
    mf.digest(store)
    return store


def _damage(file: Path, how: str) -> None:
    if how == "empty":
        file.write_bytes(b"")
    elif how == "torn":
        data = file.read_bytes()
        file.write_bytes(data[: len(data) // 2])
    else:
        file.unlink()


@pytest.mark.parametrize("how", ["empty", "torn", "deleted"])
@pytest.mark.parametrize("table", ["capsules", "journal"])
def test_a_damaged_canonical_part_names_the_file_and_the_fix(tmp_path, capsys, table, how):
    store = _store(tmp_path / "s")
    rel = store.partitions(table)[0].path
    _damage(tmp_path / "s" / rel, how)
    name = Path(rel).name
    for call in (lambda: mf.Store.open(tmp_path / "s").memory.run_cycle(),
                 lambda: mf.Store.open(tmp_path / "s").memory.rebuild_projections(),
                 lambda: mf.digest(mf.Store.open(tmp_path / "s"))):
        with pytest.raises(CorruptStoreError, match=rf"{name}.*(restore|copied)"):
            call()
    for command in ("cycle", "rebuild", "digest"):
        capsys.readouterr()
        assert main([command, str(tmp_path / "s")]) == 1
        err = capsys.readouterr().err
        assert name in err and "Traceback" not in err


@pytest.mark.parametrize("how", ["empty", "torn"])
def test_a_damaged_derived_file_repairs_itself(tmp_path, capsys, how):
    store = _store(tmp_path / "s")
    want = mf.digest(store, verify="full").to_json()
    derived = sorted((tmp_path / "s" / "projections").rglob("part-*.parquet"))
    assert derived
    for file in derived:
        _damage(file, how)
    reopened = mf.Store.open(tmp_path / "s")
    assert reopened.damaged_derived() is not None
    assert mf.digest(reopened).to_json() == want  # answered from the canonical tables
    reopened.memory.run_cycle()  # the cycle writes the derived files again
    assert reopened.damaged_derived() is None
    assert mf.digest(reopened).to_json() == want
    current = [p.path for t, ps in reopened.snapshot.tables.items()
               if t.startswith("projections/") for p in ps]
    for rel in current:
        _damage(tmp_path / "s" / rel, how)
    assert mf.Store.open(tmp_path / "s").damaged_derived() is not None
    assert main(["digest", str(tmp_path / "s")]) == 0
    assert mf.Store.open(tmp_path / "s").damaged_derived() is None


def test_huge_limits_and_far_bounds_are_answered(tmp_path, capsys):
    store = _store(tmp_path / "s")
    store.record_miss(["foo"], "abstain")
    page = store.memory.sessions(limit=2**70)
    assert page.rows.height == store.memory.sessions().rows.height
    for flag, value, misses in (("--since", "0001-01-01", 1), ("--until", "0001-01-01", 0),
                                ("--until", "9999-12-31", 1), ("--since", "9999-12-31", 0)):
        capsys.readouterr()
        assert main(["audit", "misses", str(tmp_path / "s"), flag, value,
                     "--format", "json"]) == 0, flag
        assert f'"misses":{misses},' in capsys.readouterr().out


def test_damage_errors_are_memframe_errors():
    assert issubclass(mf.errors.DamagedDerivedError, MemframeError)
