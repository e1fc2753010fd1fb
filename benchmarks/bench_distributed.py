"""Batch digests and the session rebuild: one machine against Ray in local mode.

One run, printed figures (no repetitions):

* batch digests of ``--stores`` synthetic stores of ``--capsules`` capsules each:
  ``sequential`` (one ``mf.digest`` after another in this process), ``processes``
  (``digest_many(engine="processes")``: a spawned worker per CPU) and ``ray``
  (``digest_many(engine="ray")`` on a local Ray started beforehand; its start-up is
  timed on its own line). All three must give the same digest hashes.
* the session rebuild of one store of ``--rebuild-capsules`` capsules (built with
  100k-row ingests, so one partition per 100k capsules; conversations are bursts of 40
  consecutive capsules, 10 % of the capsules have none): the local rebuild door against
  ``rebuild_sessions(engine="ray")``. Both must give the same rows and hashes.

``--distinct`` stores are synthesized (``memframe.synth``); the others are copies of
them, so building 200 stores does not take 200 syntheses.

Usage::

    python3 benchmarks/bench_distributed.py                 # small: 20 x 2000, 200k rebuild
    python3 benchmarks/bench_distributed.py --stores 200 --capsules 20000 \\
        --rebuild-capsules 10M                               # the full run
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

import memframe as mf
from memframe import distributed
from memframe.projections import session_rows
from memframe.synth import synthesize

UTC = dt.UTC
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)
NOW = dt.datetime(2027, 1, 1, tzinfo=UTC)
INGEST_ROWS = 100_000


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def say(text: str) -> None:
    print(text, flush=True)


# ---- batch digests ----------------------------------------------------------------------

def build_stores(root: Path, stores: int, capsules: int, distinct: int) -> list[str]:
    paths: list[str] = []
    originals: list[Path] = []
    for i in range(stores):
        path = root / f"store-{i:04d}"
        if i < distinct:
            synthesize(path, capsules=capsules, seed=i)
            originals.append(path)
        else:
            shutil.copytree(originals[i % distinct], path)
        paths.append(str(path))
    return paths


def bench_batch(args: argparse.Namespace, root: Path, ray) -> None:
    t = time.perf_counter()
    paths = build_stores(root, args.stores, args.capsules, min(args.distinct, args.stores))
    say(f"built {args.stores} stores of {args.capsules:,} capsules "
        f"({min(args.distinct, args.stores)} synthesized) in {time.perf_counter() - t:.1f}s")

    t = time.perf_counter()
    sequential = {p: mf.digest(mf.Store.open(p), now=NOW).hash for p in paths}
    seq_s = time.perf_counter() - t

    t = time.perf_counter()
    report = distributed.digest_many(paths, engine="processes", num_cpus=args.num_cpus,
                                     progress=False, now=NOW)
    proc_s = time.perf_counter() - t
    assert report.ok and {p: d.hash for p, d in report.digests.items()} == sequential

    t = time.perf_counter()
    report = distributed.digest_many(paths, engine="ray", progress=False, now=NOW)
    ray_s = time.perf_counter() - t
    assert report.ok and {p: d.hash for p, d in report.digests.items()} == sequential

    t = time.perf_counter()
    report = distributed.digest_many(paths, engine="ray", progress=False, now=NOW)
    ray_warm_s = time.perf_counter() - t
    assert report.ok and {p: d.hash for p, d in report.digests.items()} == sequential

    n = len(paths)
    say(f"\nbatch digests: {n} stores x {args.capsules:,} capsules (all hashes identical)")
    say(f"  {'engine':<26}{'wall s':>9}{'stores/s':>10}{'vs sequential':>15}")
    for name, secs in (("sequential", seq_s), ("processes", proc_s),
                       ("ray (first batch)", ray_s), ("ray (workers warm)", ray_warm_s)):
        say(f"  {name:<26}{secs:>9.2f}{n / secs:>10.2f}{seq_s / secs:>14.2f}x")


# ---- the rebuild ------------------------------------------------------------------------

def capsule_frame(start: int, n: int) -> pl.DataFrame:
    i = pl.int_range(start, start + n, eager=True, dtype=pl.Int64)
    conv = i // 40
    return pl.DataFrame({"i": i}).select(
        content=pl.format("capsule {} of conversation {}", pl.col("i"), conv),
        source=pl.lit("conversation"),
        anchor=pl.lit("bench"),
        conversation_id=pl.when(pl.col("i") % 10 == 3).then(None)
        .otherwise(pl.format("conv-{}", conv)),
        created_at=pl.lit(T0) + pl.duration(seconds=pl.col("i") * 3),
    )


def build_big(path: Path, capsules: int) -> mf.Store:
    clock = {"t": T0}

    def tick() -> dt.datetime:
        clock["t"] += dt.timedelta(seconds=1)
        return clock["t"]

    store = mf.Store.create(path, clock=tick)
    for start in range(0, capsules, INGEST_ROWS):
        store.ingest(capsule_frame(start, min(INGEST_ROWS, capsules - start)))
    return store


def rows_of(store: mf.Store) -> pl.DataFrame:
    rows, _ = session_rows.read_all(store.pinned())
    return rows.sort("conversation_id")


def bench_rebuild(args: argparse.Namespace, root: Path, ray) -> None:
    t = time.perf_counter()
    store = build_big(root / "big", args.rebuild_capsules)
    say(f"\nbuilt a store of {args.rebuild_capsules:,} capsules in "
        f"{len(store.files('capsules'))} partitions in {time.perf_counter() - t:.1f}s")

    t = time.perf_counter()
    local = store.memory.rebuild_projections()
    local_s = time.perf_counter() - t
    local_rows = rows_of(store)

    t = time.perf_counter()
    report = distributed.rebuild_sessions(store, engine="ray")
    ray_s = time.perf_counter() - t
    assert rows_of(store).equals(local_rows), "the Ray rebuild differs from the local one"
    assert report.watermark == local.watermark and report.rows_written == local.rows_written

    t = time.perf_counter()
    distributed.rebuild_sessions(store, engine="ray")
    ray_warm_s = time.perf_counter() - t
    assert rows_of(store).equals(local_rows)

    say(f"session rebuild: {args.rebuild_capsules:,} capsules -> {local.rows_written:,} "
        f"sessions (rows and hashes identical)")
    say(f"  {'engine':<26}{'wall s':>9}{'capsules/s':>14}{'vs local':>10}")
    for name, secs in (("local rebuild door", local_s), ("ray (first run)", ray_s),
                       ("ray (workers warm)", ray_warm_s)):
        say(f"  {name:<26}{secs:>9.2f}{args.rebuild_capsules / secs:>14,.0f}"
            f"{local_s / secs:>9.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=parse_size, default=20)
    parser.add_argument("--capsules", type=parse_size, default=2000,
                        help="capsules per store of the batch (at least 200)")
    parser.add_argument("--distinct", type=int, default=4,
                        help="stores synthesized; the others are copies")
    parser.add_argument("--rebuild-capsules", type=parse_size, default=200_000)
    parser.add_argument("--num-cpus", type=int, default=None,
                        help="CPUs for Ray and worker processes (default: all)")
    parser.add_argument("--skip-batch", action="store_true")
    parser.add_argument("--skip-rebuild", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="build the stores here")
    args = parser.parse_args(argv)

    import ray

    cpus = args.num_cpus or os.cpu_count() or 1
    say(f"python {sys.version.split()[0]}, polars {pl.__version__}, ray {ray.__version__}, "
        f"{os.cpu_count()} cores, {cpus} used")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    root.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False)
    say(f"ray local start-up: {time.perf_counter() - t:.1f}s (paid once per batch by "
        f"`memframe digest --engine ray` without --address)")
    try:
        if not args.skip_batch:
            bench_batch(args, root, ray)
        if not args.skip_rebuild:
            bench_rebuild(args, root, ray)
    finally:
        ray.shutdown()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
