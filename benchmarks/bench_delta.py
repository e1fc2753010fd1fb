"""What keeping Delta Lake logs costs a commit: the same writes with and without them.

Prints figures and ratios measured side by side in one run; asserts nothing about time.

    python benchmarks/bench_delta.py                       # 200k-capsule bulk, 300 commits
    python benchmarks/bench_delta.py --capsules 50000 --commits 100

Figures (stores without Delta logs and with them, measured alternately so drift in the
machine's load hits both alike):

a. single-row commits: ``store.ingest`` of one capsule into a store that already holds
   ``--history`` commits; median and 90th percentile milliseconds.
   Target: median <= 15 ms with the Delta logs kept.
b. bulk ingest: ``store.ingest(frame)`` of N capsules in one commit into a fresh store;
   median seconds of 3 each. Target: within 10% of the store without Delta logs.
c. ``memframe delta sync`` adding the logs to an existing store of ``--history`` commits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import memframe as mf  # noqa: E402

# the write-path benchmark's capsules and clock: the two measure the same commits
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_write_path import _clock, capsule_frame  # noqa: E402


def single(base: Path, commits: int, history: int) -> dict[str, list[float]]:
    stores = {}
    for delta in (False, True):
        store = mf.Store.create(base / f"single-{delta}", clock=_clock, delta_logs=delta)
        for n in range(history):
            store.ingest({"content": f"history {n}", "source": "bench", "anchor": str(n)})
        stores[delta] = store
    times: dict[str, list[float]] = {"without": [], "with": []}
    for n in range(commits):
        for delta in ((False, True) if n % 2 else (True, False)):
            row = {"content": f"single {n} {delta}", "source": "bench", "anchor": str(n)}
            t0 = time.perf_counter()
            stores[delta].ingest(row)
            times["with" if delta else "without"].append((time.perf_counter() - t0) * 1000)
    return times


def bulk(base: Path, n: int, repeats: int = 3) -> dict[str, list[float]]:
    frame = capsule_frame(n)
    warm = mf.Store.create(base / "warm", clock=_clock, delta_logs=True)
    warm.ingest(capsule_frame(100))
    times: dict[str, list[float]] = {"without": [], "with": []}
    for r in range(repeats):
        for delta in ((False, True) if r % 2 else (True, False)):
            store = mf.Store.create(base / f"bulk-{r}-{delta}", clock=_clock, delta_logs=delta)
            t0 = time.perf_counter()
            store.ingest(frame)
            times["with" if delta else "without"].append(time.perf_counter() - t0)
    return times


def sync_existing(base: Path, history: int) -> float:
    store = mf.Store.create(base / "existing", clock=_clock)
    for n in range(history):
        store.ingest({"content": f"history {n}", "source": "bench", "anchor": str(n)})
    t0 = time.perf_counter()
    store.sync_delta_logs()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capsules", type=int, default=200_000)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--history", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        s = single(base, args.commits, args.history)
        med = {k: statistics.median(v) for k, v in s.items()}
        p90 = {k: statistics.quantiles(v, n=10)[-1] for k, v in s.items()}
        print(f"a. single-row ingest commit, {args.commits} each, after {args.history} commits")
        for k in ("without", "with"):
            print(f"   {k:>7} Delta logs: median {med[k]:6.2f} ms   p90 {p90[k]:6.2f} ms")
        print(f"   with/without: {med['with'] / med['without']:.2f}x "
              f"(+{med['with'] - med['without']:.2f} ms); target: median <= 15 ms with logs")
        b = bulk(base, args.capsules)
        bm = {k: statistics.median(v) for k, v in b.items()}
        print(f"b. bulk ingest of {args.capsules:,} capsules in one commit (median of 3)")
        for k in ("without", "with"):
            print(f"   {k:>7} Delta logs: {bm[k]:6.2f} s  ({args.capsules / bm[k]:,.0f} rows/s)")
        print(f"   with/without: {bm['with'] / bm['without']:.3f}x; target <= 1.10x")
        took = sync_existing(base, args.history)
        print(f"c. delta sync of an existing store of {args.history} commits: {took * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
