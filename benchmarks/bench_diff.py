"""Time `store.diff` over a thousand changes against the fold it replaces, side by side.

The store (``STORE``, e.g. one `memframe synth --capsules 10000000` wrote) is copied to a
scratch directory (partition files hard-linked: they are immutable), a cycle brings its
kept state up to date, and ``--changes`` changes land on the copy: recalls of old capsules
spread over the store (a ``--spread`` share of them, one in ten by default) and new
capsules (the rest). Then, each in a fresh process so its peak memory is its own,
alternating ``--repeat`` times:

* ``diff``: ``store.diff(g)`` from the generation before the changes;
* ``fold``: what a diff costs without keyed reads: `capsule_state()` folded at both
  generations and compared (the way the diff law test computes its expectation).

It prints the median wall time, the rows read and the peak resident memory of each, their
ratio, whether both found the same capsules and fields, and the target (at 10M capsules
with 1,000 changes: at most 0.2 s and a few thousand rows). New capsules cost the diff
their own rows; an old capsule's change costs a row group of the kept state's runs (4,096
rows, read once for both ends when no cycle ran between them), since Parquet is read a
row group at a time.

Usage::

    python benchmarks/bench_diff.py /path/to/store [--changes 1000] [--repeat 3]
    python benchmarks/bench_diff.py /path/to/store --spread 0 --no-fold  # appends only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 0.2

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import polars as pl
import memframe as mf
what, path, since = sys.argv[2], sys.argv[3], int(sys.argv[4])
store = mf.Store.open(path)

def fold():
    a, b = (v.capsule_state().collect() for v in (store.at(since), store.pinned()))
    cols = [c for c in b.columns if c != "id"]
    j = b.join(a, on="id", how="left", suffix="_0")
    changed = {}
    for row in j.iter_rows(named=True):
        if row["seq_0"] is None:
            changed[row["id"]] = []
        else:
            f = sorted(c for c in cols if row[c] != row[c + "_0"])
            if f:
                changed[row["id"]] = f
    rows = sum(v.row_count(t) for v in (store.at(since), store.pinned())
               for t in ("capsules", "forgets", "recalls", "classifications", "tiers",
                         "relations"))
    return changed, rows

def diff():
    d = store.diff(since)
    return {i: f for i, f in d.capsules.select("id", "fields").iter_rows()}, d.rows_visited

run = diff if what == "diff" else fold
run()  # untimed: imports, page cache
w = time.perf_counter()
found, rows = run()
w = time.perf_counter() - w
# VmHWM: ru_maxrss keeps the parent's peak across fork + exec (its cycle's 7.75 GiB)
peak = next(int(line.split()[1]) for line in open('/proc/self/status')
            if line.startswith('VmHWM:')) / 1024
print(json.dumps({"wall": w, "rows": rows, "peak": peak, "found": found}))
"""


def _copy(src: Path, dst: Path) -> None:
    """A scratch copy: Parquet files hard-linked (never rewritten in place), the rest copied."""
    def link(a: str, b: str) -> None:
        if a.endswith(".parquet"):
            try:
                os.link(a, b)
                return
            except OSError:
                pass
        shutil.copy2(a, b)
    shutil.copytree(src, dst, copy_function=link)


def _changes(path: Path, n: int, spread: float) -> int:
    """Bring the kept state up to date, land ``n`` changes (a ``spread`` share of them
    recalls of old capsules spread over the store, the rest new capsules); the generation
    before them."""
    sys.path.insert(0, str(REPO))
    import memframe as mf

    store = mf.Store.open(path)
    store.memory.run_cycle()
    since = store.generation
    old = round(n * spread)
    fresh = n - old
    store.ingest([{"content": f"bench note {i}", "source": "bench", "anchor": f"b{i}",
                   "project_id": "bench"} for i in range(fresh)])
    total = int(store.counters["capsules"])
    if old:
        step = max(total // old, 1)
        store.record_recall([f"cap-{k}" for k in range(1, total - fresh, step)][:old])
    return since


def _measure(what: str, path: Path, since: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(REPO), what, str(path), str(since)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spread", type=float, default=0.1,
                        help="share of the changes that recall old capsules spread over the "
                             "store (each costs a row group of the kept state's runs); the "
                             "rest are new capsules")
    parser.add_argument("--no-fold", action="store_true",
                        help="time the diff alone (the fold at both ends takes minutes at 10M)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memframe-bench-diff-") as tmp:
        path = Path(tmp) / "store"
        _copy(args.store, path)
        since = _changes(path, args.changes, args.spread)
        runs: dict[str, list[dict]] = {"diff": []} if args.no_fold else {"diff": [], "fold": []}
        for _ in range(args.repeat):
            for what in runs:
                runs[what].append(_measure(what, path, since))
    print(f"store {args.store}, {args.changes:,} changes since generation {since} "
          f"({args.spread:.0%} recalls of old capsules spread over the store)")
    for what, got in runs.items():
        wall = statistics.median(r["wall"] for r in got)
        print(f"  {what:<5} median {wall:8.3f} s  rows read {got[0]['rows']:>12,}  "
              f"peak {max(r['peak'] for r in got):8.0f} MiB")
    d = statistics.median(r["wall"] for r in runs["diff"])
    if "fold" in runs:
        f = statistics.median(r["wall"] for r in runs["fold"])
        print(f"  fold / diff: {f / d:.1f}x time, "
              f"{runs['fold'][0]['rows'] / max(runs['diff'][0]['rows'], 1):.0f}x rows")
        print(f"  same capsules and fields: {runs['diff'][0]['found'] == runs['fold'][0]['found']}")
    print(f"  target: diff at most {TARGET_SECONDS} s at 10M capsules with 1,000 changes: "
          f"{'met' if d <= TARGET_SECONDS else 'not met'} here ({d:.3f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
