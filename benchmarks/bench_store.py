"""Store benchmarks: commit throughput, commit cost against store size, open time, synth.

Prints figures and ratios measured in one run; asserts nothing about time.

    python benchmarks/bench_store.py            # full sizes (a few minutes)
    python benchmarks/bench_store.py --quick    # small sizes (seconds)
    python benchmarks/bench_store.py --profile  # also profile single commits on the big store

Figures:

a. ingest of one 100k-capsule DataFrame commit (rows/s); single-capsule commits
   (commits/s); the same single-commit figure on stores of 10k and 1M existing capsules,
   and their ratio (target: within 1.5x, commit cost does not grow with store size).
b. opening a store of 10k generations (target: under 0.2 s with checkpoints), and the
   same store with its checkpoints removed (full log replay), for comparison.
c. synthesis throughput (capsules per minute; target: at least 1M).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl

import memframe as mf
from memframe import synth

CLOCK = dt.datetime(2026, 7, 23, 12, tzinfo=dt.UTC)


def _clock() -> dt.datetime:
    return CLOCK


def capsule_frame(n: int, offset: int = 0) -> pl.DataFrame:
    """``n`` distinct capsule rows (content unique through ``offset``)."""
    i = pl.col("i").cast(pl.String)
    return pl.select(pl.int_range(offset, offset + n).alias("i")).select(
        pl.concat_str([pl.lit("benchmark note "), i,
                       pl.lit(" about retrieval latency and the cache")]).alias("content"),
        pl.lit("bench").alias("source"),
        pl.concat_str([pl.lit("bench:"), (pl.col("i") % 1000).cast(pl.String)]).alias("anchor"),
        pl.lit("team/api").alias("project_id"),
    )


def build_store(path: Path, capsules: int, chunk: int = 100_000) -> mf.Store:
    store = mf.Store.create(path, clock=_clock)
    for lo in range(0, capsules, chunk):
        store.ingest(capsule_frame(min(chunk, capsules - lo), lo))
    return store


def single_commits(store: mf.Store, n: int, tag: str) -> list[float]:
    """Seconds per single-capsule ingest commit, ``n`` times."""
    times = []
    for k in range(n):
        row = {"content": f"single {tag} {k}", "source": "bench", "anchor": f"single:{k}"}
        t = time.perf_counter()
        store.ingest(row)
        times.append(time.perf_counter() - t)
    return times


@contextlib.contextmanager
def no_fsync() -> Iterator[None]:
    """Skip fsync while SETTING UP a store whose durability the figure does not measure."""
    real = os.fsync
    os.fsync = lambda fd: None  # type: ignore[assignment]
    try:
        yield
    finally:
        os.fsync = real


def timed(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def line(label: str, value: str) -> None:
    print(f"  {label:<58} {value}", flush=True)


def profile_commits(store: mf.Store, n: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    single_commits(store, n, "profiled")
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(r"memframe|pandera|parquet|fsync", 25)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="memframe store benchmarks")
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--profile", action="store_true",
                        help="profile single commits on the big store")
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    args = parser.parse_args(argv)
    quick = args.quick
    big_rows = 100_000 if quick else 1_000_000
    one_commit_rows = 20_000 if quick else 100_000
    singles = 100 if quick else 1000
    size_probe = 50 if quick else 200
    generations = 1000 if quick else 10_000
    synth_rows = 20_000 if quick else 1_000_000

    scratch = Path(tempfile.mkdtemp(prefix="memframe-bench-", dir=args.dir))
    print(f"memframe store benchmarks ({'quick' if quick else 'full'}), scratch {scratch}")
    print(f"  {os.cpu_count()} cores, load average at start "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    try:
        # -- a. commits ----------------------------------------------------------------
        print("a. commits")
        store = mf.Store.create(scratch / "one", clock=_clock)
        frame = capsule_frame(one_commit_rows)
        t = time.perf_counter()
        store.ingest(frame)
        secs = time.perf_counter() - t
        line(f"ingest of {one_commit_rows:,} capsules as one commit",
             f"{secs:.2f} s = {one_commit_rows / secs:,.0f} rows/s")
        empty = mf.Store.create(scratch / "singles", clock=_clock)
        times = single_commits(empty, singles, "empty")
        line(f"{singles:,} single-capsule commits on a new store",
             f"{sum(times):.2f} s = {singles / sum(times):,.1f} commits/s "
             f"(median {statistics.median(times) * 1000:.1f} ms)")

        small = build_store(scratch / "small", 10_000)
        t = time.perf_counter()
        t0 = time.perf_counter()
        big = build_store(scratch / "big", big_rows)
        line(f"(setup) {big_rows:,} capsules in {big_rows // 100_000 or 1} commits",
             f"{time.perf_counter() - t0:.1f} s")
        reopened = mf.Store.open(scratch / "big", clock=_clock)
        first = single_commits(reopened, 1, "first")[0]
        line(f"first commit after opening the {big_rows:,}-capsule store",
             f"{first * 1000:.0f} ms (index warm-up, once per handle)")
        single_commits(small, 5, "warm")
        small_t = single_commits(small, size_probe, "small")
        big_t = single_commits(reopened, size_probe, "big")
        s_med, b_med = statistics.median(small_t), statistics.median(big_t)
        line(f"single commit, store of 10,000 capsules ({size_probe} commits)",
             f"median {s_med * 1000:.1f} ms, mean {statistics.fmean(small_t) * 1000:.1f} ms")
        line(f"single commit, store of {big_rows:,} capsules ({size_probe} commits)",
             f"median {b_med * 1000:.1f} ms, mean {statistics.fmean(big_t) * 1000:.1f} ms")
        line(f"ratio {big_rows:,} / 10,000 (target <= 1.5x)",
             f"{b_med / s_med:.2f}x (median), "
             f"{statistics.fmean(big_t) / statistics.fmean(small_t):.2f}x (mean)")
        if args.profile:
            print(profile_commits(reopened, size_probe))
        del store, empty, small, big, reopened
        for name in ("one", "singles", "small", "big"):
            shutil.rmtree(scratch / name)

        # -- b. opening --------------------------------------------------------------------
        print("b. opening")
        path = scratch / "gens"
        t0 = time.perf_counter()
        with no_fsync():
            gens = mf.Store.create(path, clock=_clock)
            for k in range(generations):
                gens.record_lane_override(*(("term", "fused"), ("vector", "term"))[k % 2])
        line(f"(setup) {generations:,} generations, fsync skipped",
             f"{time.perf_counter() - t0:.1f} s")
        assert gens.generation == generations
        opened = timed(lambda: mf.Store.open(path).generation)
        line(f"open a store of {generations:,} generations (target < 0.2 s)",
             f"{opened * 1000:.1f} ms (median of 5)")
        bare = scratch / "gens-no-checkpoints"
        shutil.copytree(path, bare)
        for name in os.listdir(bare / "_log"):
            if name.startswith("_checkpoint"):
                os.unlink(bare / "_log" / name)
        replay = timed(lambda: mf.Store.open(bare).generation, repeat=3)
        line("the same store without checkpoints (full replay)",
             f"{replay * 1000:.1f} ms = {replay / opened:.1f}x the checkpointed open")
        shutil.rmtree(path)
        shutil.rmtree(bare)

        # -- c. synthesis ------------------------------------------------------------------
        print("c. synthesis")
        t, cpu = time.perf_counter(), time.process_time()
        synth.synthesize(scratch / "synth", capsules=synth_rows, seed=0)
        secs, cpu = time.perf_counter() - t, time.process_time() - cpu
        line(f"synthesize {synth_rows:,} capsules (target >= 1M/min)",
             f"{secs:.1f} s = {synth_rows / secs * 60:,.0f} capsules/min")
        line("  the same in CPU time of this process (all threads)",
             f"{cpu:.1f} s = {synth_rows / cpu * 60:,.0f} capsules per CPU-minute")
        print(f"  load average at end {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
