"""Benchmark of the session projection: the rebuild door and the incremental cycle.

Prints figures and ratios measured in one run:

* rebuild of the session projection at 1M capsules (``--huge``: 10M): rows/s, peak RSS,
  and the ratio against an equivalent DuckDB query over the same Parquet files (the
  same group-by terms and a sha256 per row);
* a cycle after 10k new capsules on a store of 100k and on a store of 1M capsules
  (``--big``: 5M): time and rows_visited, and their ratio (flat means close to 1).

* ``--uuid STORE ...`` (synthetic stores, ``memframe synth``; each is copied first): the
  cycle after 2,000 new capsules on 50 random-UUID conversations, time and rows_visited
  per store size and their ratios (``--cycles N`` runs N cycles per store: the max and mean
  reads then include the amortised merges of the live-count indexes); with ``--door``, a
  one-conversation door lookup after 1,000 forgets spread over the store (before and after
  the cycle folds them), at every store size.

Usage:
    python benchmarks/bench_projections.py [--workdir DIR] [--big] [--huge]
    python benchmarks/bench_projections.py --uuid S100K S1M S5M [--door] [--cycles N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

import memframe as mf

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
PER_CONV = 10
FRAME = 100_000


def _frame(start: int, n: int, tag: str) -> pl.DataFrame:
    """Capsules ``start .. start+n``: conversations of PER_CONV members, ids in time order."""
    return (
        pl.DataFrame({"i": pl.int_range(start, start + n, eager=True)})
        .select(
            pl.format("{}-{}", pl.lit(tag), pl.col("i")).alias("content"),
            pl.lit("conversation").alias("source"),
            pl.lit("bench").alias("anchor"),
            pl.format("conv-{}", (pl.col("i") // PER_CONV).cast(pl.String).str.zfill(9))
            .alias("conversation_id"),
            (pl.lit(T0) + pl.duration(seconds=pl.col("i") * 3)).alias("created_at"),
        )
    )


def build(path: Path, n: int) -> mf.Store:
    store = mf.Store.create(path, clock=lambda: T0 + dt.timedelta(days=400))
    t = time.perf_counter()
    for start in range(0, n, FRAME):
        store.ingest(_frame(start, min(FRAME, n - start), "c"))
    print(f"  built {n:,} capsules in {time.perf_counter() - t:.1f}s", flush=True)
    return store


def _child(argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


REPEATS = 3  # each phase keeps its best run: the machine is shared


def phase_rebuild(path: str) -> dict:
    store = mf.Store.open(path)
    t = time.perf_counter()
    warm = time.perf_counter() - t
    best = float("inf")
    for _ in range(REPEATS):
        t = time.perf_counter()
        report = store.memory.rebuild_projections()
        best = min(best, time.perf_counter() - t)
    return {"seconds": best, "rows": report.rows_visited, "sessions": report.rows_written,
            "handle_warmup": warm,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def phase_fold_only(path: str) -> dict:
    from memframe.projections.session import fold_sessions

    view = mf.Store.open(path).pinned()
    best = {}
    for engine in ("in-memory", "streaming"):
        best[engine] = float("inf")
        for _ in range(REPEATS):
            t = time.perf_counter()
            rows = fold_sessions(
                view.table("capsules").select("seq", "id", "created_at", "content_chars",
                                              "conversation_id"),
                view.table("summaries").select("seq", "conversation_id", "summary"),
                engine=engine,
            )
            best[engine] = min(best[engine], time.perf_counter() - t)
    return {"seconds": best["streaming"], "in_memory": best["in-memory"], "sessions": rows.height,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def phase_duckdb(path: str) -> dict:
    import duckdb

    view = mf.Store.open(path).pinned()
    files = [str(f) for f in view.files("capsules")]
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    listed = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    query = f"""
        WITH g AS (
          SELECT conversation_id,
                 min(created_at) AS first_at, max(created_at) AS last_at,
                 count(*) AS memory_count, sum(content_chars) AS content_chars,
                 arg_max(id, (created_at, CAST(substr(id, 5) AS BIGINT))) AS last_member_id
          FROM read_parquet({listed})
          WHERE conversation_id IS NOT NULL
          GROUP BY conversation_id)
        SELECT *, sha256(concat_ws(',', conversation_id, strftime(first_at, '%Y-%m-%dT%H:%M:%S.%nZ'),
                         strftime(last_at, '%Y-%m-%dT%H:%M:%S.%nZ'), memory_count, content_chars,
                         last_member_id)) AS hash
        FROM g ORDER BY conversation_id
    """
    best = copy = float("inf")
    out = Path(path) / "duckdb-copy.parquet"
    for _ in range(REPEATS):
        t = time.perf_counter()
        rows = con.sql(query).to_arrow_table()
        best = min(best, time.perf_counter() - t)
        t = time.perf_counter()  # the rebuild's equivalent: compute and write Parquet
        con.execute(f"COPY ({query}) TO '{out}' (FORMAT parquet, COMPRESSION zstd, "
                    f"ROW_GROUP_SIZE 2048)")
        copy = min(copy, time.perf_counter() - t)
        out.unlink()
    return {"seconds": best, "copy_seconds": copy, "sessions": rows.num_rows,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def cycle_after(store: mf.Store, n_new: int = 10_000, repeats: int = 3) -> tuple[float, int]:
    """Best cycle time and median rows_visited after ``n_new`` new capsules each time.

    The batches open new conversations and touch 50 recent ones. Before each timed cycle
    the handle's store-side write indexes are brought up to date (the store's cost of any
    commit after an ingest, not the cycle's).
    """
    times, visited = [], []
    base = store.row_count("capsules")
    for r in range(repeats):
        start = base + r * n_new - PER_CONV * 50
        store.ingest(_frame(start, n_new, f"new{r}"))
        t = time.perf_counter()
        report = store.memory.run_cycle()
        times.append(time.perf_counter() - t)
        visited.append(report.rows_visited)
    return min(times), int(statistics.median(visited))


def _copy(src: Path, work: Path) -> mf.Store:
    import shutil

    dst = work / src.name
    shutil.copytree(src, dst)
    return mf.Store.open(dst, clock=lambda: T0 + dt.timedelta(days=4000))


def _uuid_batch(store: mf.Store, n: int, convs: int, seed: int) -> pl.DataFrame:
    """``n`` new capsules spread over ``convs`` existing random-UUID conversations."""
    import random

    rng = random.Random(seed)
    ids = (store.table("capsules").select("conversation_id").drop_nulls().unique()
           .sort("conversation_id").collect()["conversation_id"].to_list())
    picked = rng.sample(ids, convs)
    return pl.DataFrame({
        "content": [f"uuid bench {seed} {i}" for i in range(n)],
        "source": ["conversation"] * n, "anchor": ["bench"] * n,
        "conversation_id": [picked[i % convs] for i in range(n)],
    })


def uuid_cycles(paths: list[Path], work: Path, door: bool, cycles: int = 3) -> int:
    print(f"cycle after 2,000 new capsules on 50 random-UUID conversations ({cycles} cycles "
          f"after a rebuild)")
    out = []
    for src in paths:
        store = _copy(src, work)
        store.memory.rebuild_projections()
        runs = []
        for r in range(cycles):  # best time of the batches (the machine is shared)
            store.ingest(_uuid_batch(store, 2_000, 50, r))
            store._indexes.refresh(store.snapshot)  # the store's write state, not the cycle's
            t = time.perf_counter()
            report = store.memory.run_cycle()
            runs.append((time.perf_counter() - t, report))
        seconds = min(t for t, _ in runs)
        report = max((r for _, r in runs), key=lambda r: r.rows_visited)  # the worst reads
        size = store.row_count("capsules")
        out.append((size, seconds, report))
        parts = ", ".join(f"{k} {v['rows_visited']:,}" for k, v in report.projections.items())
        mean = statistics.mean(r.rows_visited for _, r in runs)
        median = statistics.median(t for t, _ in runs)
        print(f"  {size:>10,} capsules: {seconds * 1000:7.0f} ms (best of {cycles}, median "
              f"{median * 1000:.0f} ms)  rows_visited "
              f"(max) {report.rows_visited:,} ({parts}), mean {mean:,.0f}  bound 3 x 2,000 + "
              f"10,000 = 16,000: {'ok' if report.rows_visited <= 16_000 else 'EXCEEDED'}")
        if door:
            door_after_forgets(store)
    small, big = out[0], out[-1]
    print(f"  ratio largest/smallest: time {big[1] / small[1]:.2f}, rows_visited "
          f"{big[2].rows_visited / max(1, small[2].rows_visited):.2f} (flat: within 1.3)")
    return 0


def door_after_forgets(store: mf.Store) -> None:
    import random

    rng = random.Random(3)
    view = store.pinned()
    caps = view.table("capsules").select("id", "conversation_id").collect()
    gone = set(view.table("forgets").select("capsule_id").collect()["capsule_id"].to_list())
    candidates = [i for i in caps["id"].to_list() if i not in gone]
    picked = rng.sample(candidates, 1_000)
    store.append("forgets", {"capsule_id": picked})
    conv = caps.filter(pl.col("id") == picked[0])["conversation_id"][0] or (
        caps["conversation_id"].drop_nulls()[0])
    t = time.perf_counter()
    before = store.memory.sessions(conversation_id=conv)
    before_seconds = time.perf_counter() - t
    cycle = store.memory.run_cycle()
    t = time.perf_counter()
    after = store.memory.sessions(conversation_id=conv)
    seconds = time.perf_counter() - t
    assert before.rows.equals(after.rows) and before.hash == after.hash
    ok = max(before.rows_visited, after.rows_visited) <= 10_000
    print(f"  door sessions(conversation_id=...) after 1,000 forgets on {caps.height:,} "
          f"capsules: rows_visited {before.rows_visited:,} in {before_seconds * 1000:.0f} ms "
          f"before the cycle folds the forgets, {after.rows_visited:,} in {seconds * 1000:.0f} "
          f"ms after it (bound 10,000: {'ok' if ok else 'EXCEEDED'}); the cycle folding them "
          f"read {cycle.projections['forgotten']['rows_visited']:,} rows of the live-count "
          f"indexes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uuid", nargs="+", type=Path, default=None, metavar="STORE")
    parser.add_argument("--door", action="store_true")
    parser.add_argument("--cycles", type=int, default=3,
                        help="cycles per store after the rebuild (--uuid; default 3)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--big", action="store_true", help="cycle on 5M capsules (not 1M)")
    parser.add_argument("--huge", action="store_true", help="rebuild at 10M capsules (not 1M)")
    parser.add_argument("--phase", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        fn = {"rebuild": phase_rebuild, "fold": phase_fold_only, "duckdb": phase_duckdb}
        print(json.dumps(fn[args.phase[0]](args.phase[1])))
        return 0
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-projections-"))
    if args.uuid:
        return uuid_cycles(args.uuid, work, args.door, args.cycles)
    n_rebuild = 10_000_000 if args.huge else 1_000_000
    n_big = 5_000_000 if args.big else 1_000_000

    print(f"rebuild at {n_rebuild:,} capsules")
    big_path = work / f"s{n_rebuild}"
    build(big_path, n_rebuild)
    ours = _child(["--phase", "rebuild", str(big_path)])
    fold = _child(["--phase", "fold", str(big_path)])
    duck = _child(["--phase", "duckdb", str(big_path)])
    print(f"  rebuild door : {ours['seconds']:.2f}s  {ours['rows'] / ours['seconds']:,.0f} rows/s  "
          f"peak {ours['peak_mib']:,.0f} MiB  ({ours['sessions']:,} sessions, validated, "
          f"written, committed)")
    print(f"  fold only    : {fold['seconds']:.2f}s streaming engine (the rebuild's), "
          f"{fold['in_memory']:.2f}s in-memory  {n_rebuild / fold['seconds']:,.0f} rows/s  "
          f"peak {fold['peak_mib']:,.0f} MiB")
    print(f"  duckdb       : query {duck['seconds']:.2f}s ({n_rebuild / duck['seconds']:,.0f} "
          f"rows/s), query + COPY to Parquet {duck['copy_seconds']:.2f}s  "
          f"peak {duck['peak_mib']:,.0f} MiB")
    print(f"  ratio fold / duckdb query = {fold['seconds'] / duck['seconds']:.2f}; rebuild door / "
          f"duckdb query+COPY = {ours['seconds'] / duck['copy_seconds']:.2f}  (<= 1: no slower)")
    print(f"  (a freshly opened handle first loads the store's write indexes: "
          f"{ours['handle_warmup']:.1f}s, paid by any first commit, not counted above)")

    print("cycle after 10k new capsules")
    small = build(work / "s100k", 100_000)
    small.memory.rebuild_projections()
    t_small, v_small = cycle_after(small)
    if n_big == n_rebuild:
        big = mf.Store.open(big_path, clock=lambda: T0 + dt.timedelta(days=400))
    else:
        big = build(work / f"s{n_big}", n_big)
        big.memory.rebuild_projections()
    t_big, v_big = cycle_after(big)
    print(f"  100k store : {t_small * 1000:.0f} ms, rows_visited {v_small:,}")
    print(f"  {n_big // 1_000_000}M store   : {t_big * 1000:.0f} ms, rows_visited {v_big:,}")
    print(f"  ratio big/small: time {t_big / t_small:.2f}, rows_visited {v_big / v_small:.2f} "
          f"(flat: within 1.3)")
    fresh = mf.Store.open(big.path, clock=lambda: T0 + dt.timedelta(days=400))
    fresh_start = fresh.row_count("capsules")
    mf.Store.open(big.path, clock=lambda: T0 + dt.timedelta(days=400)).ingest(
        _frame(fresh_start, 10_000, "fresh"))
    t = time.perf_counter()
    fresh.memory.run_cycle()
    print(f"  first cycle on a freshly opened handle of the big store: "
          f"{time.perf_counter() - t:.2f}s (includes the store's write-index load)")
    print(f"(stores left in {work})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
