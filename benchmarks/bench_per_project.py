"""`--per-project` in one pass against one fenced `mf.digest` call per project.

Builds a store whose capsules spread over many projects (``org<k>/p<i>``), then times
``per_project_digests(store, depth=2)`` (capsule state and the store-global sections once,
the fenced sections per project in one group-by pass) against one ``mf.digest(store,
project_prefix=root)`` call per project, checks that every body is byte-identical, and
prints the ratio (target: at least 20x).

Usage::

    python3 benchmarks/bench_per_project.py                 # 1,000 projects, 50k capsules
    python3 benchmarks/bench_per_project.py --projects 200 --capsules 20000
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

import memframe as mf
from memframe.digest import per_project_digests

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def build(path: Path, capsules: int, projects: int) -> mf.Store:
    tick = {"t": T0}

    def clock() -> dt.datetime:
        tick["t"] += dt.timedelta(seconds=1)
        return tick["t"]

    store = mf.Store.create(path, clock=clock)
    idx = pl.int_range(0, capsules, eager=True)
    project = (pl.lit("org") + (idx % projects // 100).cast(pl.String) + pl.lit("/p")
               + (idx % projects).cast(pl.String))
    frame = pl.select(
        content=pl.lit("note ") + idx.cast(pl.String),
        source=pl.when(idx % 53 == 0).then(pl.lit("memory_session_finish")).otherwise(pl.lit("chat")),
        anchor=pl.lit("bench"),
        project_id=project,
    )
    store.ingest(frame)
    ids = [f"cap-{i}" for i in range(1, capsules + 1, 7)]
    store.append("recalls", {"capsule_id": ids, "count": [1 + i % 5 for i in range(len(ids))]})
    return store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--capsules", type=int, default=50_000)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp()) / "per-project"
    store = build(root, args.capsules, args.projects)
    view = store.pinned()
    now = T0 + dt.timedelta(days=30)
    mf.digest(view, now=now)  # untimed warm-up (imports, file cache)

    t = time.perf_counter()
    one_pass = per_project_digests(view, 2, now=now)
    one_pass_s = time.perf_counter() - t

    t = time.perf_counter()
    separate = {r: mf.digest(view, project_prefix=r, now=now) for r in one_pass}
    separate_s = time.perf_counter() - t

    same = all(one_pass[r].to_json() == separate[r].to_json() for r in one_pass)
    print(f"projects (roots at depth 2)  {len(one_pass):>8,}")
    print(f"capsules                     {args.capsules:>8,}")
    print(f"per_project_digests (1 pass) {one_pass_s:>8.2f} s")
    print(f"separate mf.digest calls     {separate_s:>8.2f} s")
    print(f"ratio separate / one pass    {separate_s / one_pass_s:>8.1f} x   (target >= 20)")
    print(f"every body byte-identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
