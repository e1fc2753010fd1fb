"""A digest never fails because another process erased and vacuumed while it read: it
runs again on the newer generation (issue 38, item 3)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import memframe as mf

ROOT = Path(__file__).resolve().parents[2]

ERASER = textwrap.dedent("""
    import sys, warnings
    import memframe as mf
    warnings.simplefilter("ignore")
    store = mf.Store.open(sys.argv[1])
    for i in range(int(sys.argv[2])):
        ids = store.ingest([{"content": f"secret {i} {k} " + "w " * 40, "source": "s",
                             "anchor": f"e{i}-{k}", "project_id": "p"} for k in range(3)])
        store.memory.run_cycle()
        store.forget(ids[0], mode="purge")
        store.vacuum()  # the default window: the erasure forces the replaced files out
""")


def test_digests_under_a_concurrent_erase_and_vacuum_loop_never_fail(tmp_path):
    path = tmp_path / "s"
    store = mf.Store.create(path)
    store.ingest([{"content": f"note {n} " + "w " * 30, "source": "s", "anchor": str(n),
                   "project_id": "p"} for n in range(200)])
    store.memory.run_cycle()
    child = subprocess.Popen([sys.executable, "-c", ERASER, str(path), "25"], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)},
                             stderr=subprocess.PIPE, text=True)
    reader = mf.Store.open(path)
    done = failures = 0
    errors: list[str] = []
    try:
        while child.poll() is None or done < 5:
            try:
                d = mf.digest(reader)
                assert d.to_dict()["total"] >= 200
            except mf.errors.MemframeError as exc:
                failures += 1
                errors.append(str(exc)[:300])
            done += 1
    finally:
        child.wait(timeout=300)
    assert child.returncode == 0, child.stderr.read()[-2000:]
    assert failures == 0, (failures, done, errors[:3])
    assert done >= 5
