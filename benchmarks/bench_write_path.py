"""Write-path benchmarks: bulk ingest against a plain Parquet write, single-row commits.

Prints figures and ratios measured side by side in one run; asserts nothing about time.

    python benchmarks/bench_write_path.py                 # 1M capsules, 300 single commits
    python benchmarks/bench_write_path.py --capsules 100000 --commits 100

Figures:

a. ``store.ingest(frame)`` of N capsules in one commit into a fresh store (rows/s, peak
   RSS of that process; median of 3) against ``frame.write_parquet`` of the same frame,
   and the sequential floor inside it: the journal's sha256 chain over the N lines alone (the floor: no hashing, no ids, no
   validation, no journal). Target ratio <= 6x.
b. single-row commits (``store.ingest`` of one capsule, ``store.relate``,
   ``store.record_recall``): median milliseconds, and the share spent validating frames.
   Target: median ingest commit <= 15 ms with validation on every write.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

import memframe as mf


def capsule_frame(n: int, offset: int = 0) -> pl.DataFrame:
    i = pl.int_range(offset, offset + n, eager=True).alias("i").to_frame()
    return i.select(
        pl.format("capsule {} about the release plan and the schema fix", "i").alias("content"),
        pl.lit("bench").alias("source"),
        pl.format("a-{}", pl.col("i") % 1000).alias("anchor"),
        pl.format("team/p{}", pl.col("i") % 50).alias("project_id"),
        pl.format("conv-{}", pl.col("i") % 5000).alias("conversation_id"),
    )


def _clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def bulk(n: int, repeats: int = 3) -> dict:
    """One process per measurement, so peak RSS is the measurement's own; the median of
    ``repeats`` runs, each into a fresh file or store, after one small untimed warm-up."""
    out = {}
    for what in ("parquet", "ingest", "chain"):
        code = f"""
import resource, sys, tempfile, time, json, os, statistics
sys.path.insert(0, {str(Path(__file__).parent)!r})
from bench_write_path import capsule_frame
import memframe as mf
frame = capsule_frame({n})
tmp = tempfile.mkdtemp()

import datetime as dt, polars as pl
from memframe.store.capture import chain_hashes
from memframe.text import journal_lines

def run(k, data):
    if {what!r} == "parquet":
        data.write_parquet(os.path.join(tmp, f"f{{k}}.parquet"))
    elif {what!r} == "chain":  # the journal's sha256 chain alone, over the lines ingest writes
        n = data.height
        lines = journal_lines(pl.select(
            audit_seq=pl.int_range(1, n + 1), at=pl.lit(dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                                                        dtype=pl.Datetime("ns", "UTC")),
            actor=pl.lit("memframe"), action=pl.lit("memory_ingest"),
            subject=pl.format("cap-{{}}", pl.int_range(1, n + 1)), reason=pl.lit(None, pl.String)))
        chain_hashes("", lines)
    else:
        mf.Store.create(os.path.join(tmp, f"s{{k}}")).ingest(data)

run("warm", capsule_frame(10))  # imports and first-use set-up, outside the timing
times = []
for k in range({repeats}):
    t = time.perf_counter()
    run(k, frame)
    times.append(time.perf_counter() - t)
print(json.dumps({{"seconds": statistics.median(times), "runs": times,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True)
        out[what] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def single_commits(n: int) -> dict:
    tmp = Path(tempfile.mkdtemp())
    store = mf.Store.create(tmp / "s", clock=_clock)
    store.ingest(capsule_frame(10_000))
    times: dict[str, list[float]] = {"ingest": [], "relate": [], "record_recall": []}
    for i in range(n):  # timed without a profiler: it would slow what it measures
        t = time.perf_counter()
        (cid,) = store.ingest({"content": f"single {i}", "source": "s", "anchor": "a"})
        times["ingest"].append(time.perf_counter() - t)
        t = time.perf_counter()
        store.relate(cid, f"cap-{i + 1}", "derived_from")
        times["relate"].append(time.perf_counter() - t)
        t = time.perf_counter()
        store.record_recall([cid])
        times["record_recall"].append(time.perf_counter() - t)
    profile = cProfile.Profile()  # a separate pass for the share spent validating
    started = time.perf_counter()
    for i in range(max(1, n // 3)):
        profile.enable()
        store.ingest({"content": f"profiled {i}", "source": "s", "anchor": "a"})
        profile.disable()
    profiled = time.perf_counter() - started
    stats = pstats.Stats(profile)
    validate = sum(v[3] for k, v in stats.stats.items() if k[2] == "validate_frame")
    whole = profiled
    return {"median_ms": {k: statistics.median(v) * 1000 for k, v in times.items()},
            "validation_share_of_ingest": validate / whole if whole else 0.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capsules", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=300)
    args = ap.parse_args(argv)
    b = bulk(args.capsules)
    ratio = b["ingest"]["seconds"] / b["parquet"]["seconds"]
    print(f"a. bulk ingest of {args.capsules:,} capsules in one commit")
    print(f"   write_parquet      {b['parquet']['seconds']:8.3f} s   peak {b['parquet']['peak_mib']:7.0f} MiB")
    print(f"   store.ingest       {b['ingest']['seconds']:8.3f} s   peak {b['ingest']['peak_mib']:7.0f} MiB"
          f"   {args.capsules / b['ingest']['seconds']:,.0f} rows/s")
    print(f"   ratio ingest / write_parquet: {ratio:.1f}x   (target <= 6x)")
    chain = b["chain"]["seconds"]
    print(f"   of which floor: the journal's sha256 chain alone (one link per capsule, each "
          f"needing the one before)\n   chain              {chain:8.3f} s   "
          f"= {chain / b['parquet']['seconds']:.1f}x write_parquet")
    s = single_commits(args.commits)
    print(f"b. single-row commits on a 10k store ({args.commits} each)")
    for verb, ms in s["median_ms"].items():
        print(f"   {verb:<14} median {ms:6.1f} ms")
    print(f"   validation share of the ingest commit: {s['validation_share_of_ingest']:.0%}"
          f"   (target: ingest median <= 15 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
