"""Derived state is served only to the code that wrote it (memframe.store.derived)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memframe as mf
from memframe.store import derived

PACKAGE = Path(mf.__file__).parent
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def _store(path: Path) -> mf.Store:
    store = mf.Store.create(path, clock=lambda: T0)
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": f"a{i}",
                         "conversation_id": f"c{i % 2}"} for i in range(4)])
    store.pin(ids[1], reason="keep")
    return store


def _derived_paths(store: mf.Store) -> set[str]:
    snap = store.snapshot
    return {p.path for t, ps in snap.tables.items() if derived.is_derived(t) for p in ps}


def test_a_job_records_the_writer_and_views_read_its_state(tmp_path):
    store = _store(tmp_path / "s")
    assert derived.WRITER not in store.snapshot.watermarks
    store.memory.run_cycle()
    assert store.snapshot.watermarks[derived.WRITER] == {"code": derived.writer()}
    assert store.pinned().partitions("projections/session/partials/T0") or \
        store.derived_names("projections/session")
    assert store.memory.sessions().rows.height == 2


def test_state_of_other_code_is_hidden_then_dropped_by_the_next_job(tmp_path, monkeypatch):
    store = _store(tmp_path / "s")
    monkeypatch.setattr(derived, "writer", lambda: "other-code")
    store.memory.run_cycle()
    stale = _derived_paths(store)
    assert stale and store.snapshot.watermarks[derived.WRITER] == {"code": "other-code"}
    monkeypatch.undo()
    view = store.pinned()
    # nothing of it is visible to this code: no table, no watermark
    assert not view.derived_names("projections/")
    assert not [m for m in view.watermarks if derived.is_derived(m)]
    assert store.memory.sessions().rows.height == 0  # as before any cycle
    # a plain commit keeps the stale marks as they were and drops nothing
    store.ingest({"content": "later", "source": "s", "anchor": "z", "conversation_id": "c0"})
    assert store.snapshot.watermarks[derived.WRITER] == {"code": "other-code"}
    assert _derived_paths(store) == stale
    # the next job drops every stale partition in its own commit and builds afresh
    store.memory.run_cycle()
    assert store.snapshot.watermarks[derived.WRITER] == {"code": derived.writer()}
    assert not (_derived_paths(store) & stale)
    counts = dict(store.memory.sessions().rows.select("conversation_id", "memory_count").rows())
    assert counts == {"c0": 3, "c1": 2}
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()


def test_a_vacuum_after_the_job_removes_the_stale_files(tmp_path, monkeypatch):
    store = _store(tmp_path / "s")
    monkeypatch.setattr(derived, "writer", lambda: "other-code")
    store.memory.run_cycle()
    stale = _derived_paths(store)
    monkeypatch.undo()
    store.memory.run_cycle()
    store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=1,
                 wait_seconds=0)
    assert not [p for p in stale if (store.path / p).exists()]


def _copy_with(tmp_path: Path, module: str, old: str, new: str) -> Path:
    copy = tmp_path / "changed"
    shutil.copytree(PACKAGE, copy / "memframe", ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "memframe" / module
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new))
    return copy


_DIGEST = """
import json, sys, datetime as dt, memframe as mf
store = mf.Store.open(sys.argv[1], clock=lambda: dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
out = {"file": mf.__file__, "warm": mf.digest(store).to_dict().get("pinned_total"),
       "full": mf.digest(store, verify="full").to_dict().get("pinned_total")}
store.memory.run_cycle()
out["after_cycle"] = mf.digest(store).to_dict().get("pinned_total")
print(json.dumps(out))
"""


def test_a_changed_section_function_never_serves_its_old_output(tmp_path):
    """State kept by one version of the code is never read by another (an upgrade, or
    any edit): the changed code answers with its own output, warm or full."""
    store = _store(tmp_path / "s")
    store.memory.run_cycle()
    assert mf.digest(store).to_dict()["pinned_total"] == 1
    copy = _copy_with(tmp_path, "digest/staged.py",
                      'section["pinned_total"] = int(totals[scope])',
                      'section["pinned_total"] = int(totals[scope]) + 1000')
    run = subprocess.run([sys.executable, "-c", _DIGEST, str(store.path)], cwd=copy,
                         capture_output=True, text=True, env={"PYTHONPATH": str(copy)})
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["file"].startswith(str(copy))  # the changed copy ran
    assert out == {**out, "warm": 1001, "full": 1001, "after_cycle": 1001}
    # and the state the changed code wrote is not served back to this code
    assert mf.digest(store).to_dict()["pinned_total"] == 1
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()


@pytest.mark.parametrize("name, expected", [("projections/x", True), ("capsules", False),
                                            ("import:nmemory", False)])
def test_derived_names(name, expected):
    assert derived.is_derived(name) is expected


def test_an_edit_of_docstrings_or_comments_keeps_the_identity_and_one_of_code_does_not():
    source = (PACKAGE / "digest" / "state" / "sections.py").read_text()
    assert '"""The kept values' in source and "CAP = " in source
    documented = source.replace('"""The kept values', '"""Reworded: the kept values', 1)
    commented = documented.replace("\nCAP = ", "\n# a new comment line\n\n\nCAP = ", 1)
    assert derived.code_hash(commented.encode()) == derived.code_hash(source.encode())
    changed = source.replace("\nCAP = ", "\nCAP = 1 + ", 1)
    assert derived.code_hash(changed.encode()) != derived.code_hash(source.encode())


def test_the_code_hashes_cache_changes_the_cost_never_the_identity(tmp_path, monkeypatch):
    files = sorted((PACKAGE / "digest" / "state").glob("*.py"))
    cache = tmp_path / "cache" / "code-identity.json"
    plain = derived._identity(files, None)
    assert derived._identity(files, cache) == plain and cache.exists()
    assert len(json.loads(cache.read_text())) == len({f.read_bytes() for f in files})
    real = derived.code_hash

    def refuse(source: bytes) -> str:
        raise AssertionError("parsed again although the cache holds it")

    monkeypatch.setattr(derived, "code_hash", refuse)
    assert derived._identity(files, cache) == plain  # every hash from the cache
    monkeypatch.setattr(derived, "code_hash", real)
    for damage in (b"\x00not json", b"[1, 2]", json.dumps({"x": 1}).encode(), b""):
        cache.write_bytes(damage)
        assert derived._identity(files, cache) == plain
    blocker = tmp_path / "a-file"  # a cache that cannot be written is only slower
    blocker.write_text("x")
    assert derived._identity(files, blocker / "memframe" / "code-identity.json") == plain
