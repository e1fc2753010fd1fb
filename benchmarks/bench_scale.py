"""Time and peak memory of every path that reads the whole store, at several sizes.

Each path runs in a fresh child process, so its peak RSS (``VmHWM``) is its own. Paths
that write run on a copy of the store. Given ``--before DIR`` (a checkout of the code
before a change), every path runs under both, alternated, in one run: the ratios are
measured side by side on the same machine and the same store.

Paths:

* ``cold``: ``mf.digest(store)`` with no kept state (the synthetic store has none);
* ``full``: ``mf.digest(store, verify="full")``;
* ``rebuild``: ``store.memory.rebuild_projections()`` (on a copy);
* ``misses``: ``mf.recall_misses(store)`` (``memframe audit misses``);
* ``coverage``: ``mf.recall_coverage(store)``;
* ``diff``: ``store.diff(1)``, from generation 1 to the newest;
* ``compact`` / ``vacuum`` / ``delta``: ``store.compact()``, a purge of 10 capsules (one commit) then
  ``store.vacuum(retention_hours=0)``, ``store.sync_delta_logs(rebuild=True)`` (on copies);
* ``import``: ``import_nmemory`` of the SQLite file ``--sqlite FILE`` into a new store
  under ``--work`` (``benchmarks/bench_import.py`` builds such a file);
* ``synth``: ``memframe synth`` of the store itself.

Usage::

    python3 benchmarks/bench_scale.py --store /data/s10m --work /data/tmp
    python3 benchmarks/bench_scale.py --store S --paths full,cold --before /src/memframe-old
    python3 benchmarks/bench_scale.py --sizes 1M,10M,30M --work /data/scale  # synth them
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
PATHS = ("cold", "full", "rebuild", "misses", "coverage", "diff", "compact", "vacuum",
         "delta", "import", "synth")
WRITES = {"rebuild", "compact", "vacuum", "delta"}


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def peak_mib() -> float:
    """This process's peak RSS in MiB (``VmHWM``: not inherited across fork + exec)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - Linux only


def _answer(value: object) -> str:
    """A short fingerprint of a path's answer (the same answer before and after)."""
    import hashlib

    import polars as pl

    if isinstance(value, pl.DataFrame):
        text = value.write_csv()
    elif hasattr(value, "to_json"):
        text = value.to_json()
    else:
        text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def child(kind: str, store_path: str, extra: str) -> None:
    """Run one path in this (fresh) process and print its figures as JSON."""
    import memframe as mf

    setup: dict = {}
    if kind in ("cold", "full", "misses", "coverage", "diff"):
        store = mf.Store.open(store_path)
    elif kind == "synth":
        store = None
    elif kind != "import":
        store = mf.Store.open(store_path)
        if kind == "vacuum":  # an erasure leaves rewritten parts for the vacuum to remove
            ids = store.table("capsules").select("id").tail(10).collect()["id"].to_list()
            store.commit(lambda c: [c.forget(i, mode="purge") for i in ids], operation="forget")
    t, cpu = time.perf_counter(), time.process_time()
    if kind in ("cold", "full"):
        # one instant for every run: the expiry flags and archive candidates follow it
        now = datetime.datetime(2027, 1, 1, tzinfo=datetime.UTC)
        out = mf.digest(store, now=now, verify="full" if kind == "full" else "incremental")
        answer, rows = _answer(out), out.rows_visited
    elif kind == "rebuild":
        report = store.memory.rebuild_projections()
        answer, rows = _answer(store.memory.sessions(limit=1000).rows), report.rows_visited \
            if hasattr(report, "rows_visited") else None
    elif kind == "misses":
        from memframe.audit import recall_misses

        out = recall_misses(store)
        answer, rows = _answer(out.to_json() if hasattr(out, "to_json") else str(out)), None
    elif kind == "coverage":
        import hashlib

        from memframe.audit import recall_coverage

        out = recall_coverage(store)
        sha = hashlib.sha256()  # of the JSON text, written as the command line writes it

        class _Sink:
            def write(self, text: str) -> None:
                sha.update(text.encode())

        if hasattr(out, "write_json"):  # a piece at a time
            out.write_json(_Sink())
        else:  # the code before: the text at once
            _Sink().write(out.to_json())
        answer, rows = sha.hexdigest()[:12], None
    elif kind == "diff":
        import hashlib

        out = store.diff(1)
        sha = hashlib.sha256()  # of its JSON, written as the command line writes it
        for piece in (out.json_pieces() if hasattr(out, "json_pieces") else [out.to_json()]):
            sha.update(piece.encode())
        answer, rows = sha.hexdigest()[:12], getattr(out, "rows_visited", None)
    elif kind == "compact":
        answer, rows = _answer(store.compact()), None
    elif kind == "vacuum":
        out = store.vacuum(retention_hours=0, allow_short_retention=True)
        answer, rows = _answer(str(out)), None
    elif kind == "delta":
        answer, rows = _answer(str(store.sync_delta_logs(rebuild=True))), None
    elif kind == "import":
        from memframe.importers import import_nmemory

        report = import_nmemory(extra, store_path)
        answer, rows = _answer(str(getattr(report, "rows", report))), None
    elif kind == "synth":
        params = json.loads(extra)
        from memframe.synth import synthesize

        mf_store = synthesize(store_path, **params)
        answer, rows = _answer(str(mf_store.generation)), None
    else:
        raise SystemExit(f"unknown path {kind}")
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(json.dumps({"path": kind, "seconds": seconds, "cpu": cpu, "peak_mib": peak_mib(),
                      "answer": answer, "rows": rows, **setup}))


def run(kind: str, store: Path, code: Path | None, work: Path, extra: str = "",
        limit: str | None = None) -> dict:
    """One path in a fresh process (on a copy when it writes) under ``code`` (None: this
    checkout)."""
    target = store
    if kind in WRITES:
        target = work / f"copy-{store.name}"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(store, target)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code if code is not None else HERE.parent.parent)
    if limit:
        env["MEMFRAME_MEMORY_LIMIT"] = limit
    out = subprocess.run([sys.executable, str(HERE), "--child", kind, str(target), extra],
                         capture_output=True, text=True, env=env, check=False)
    if kind in WRITES and target != store:
        shutil.rmtree(target, ignore_errors=True)
    if out.returncode != 0:
        return {"path": kind, "error": (out.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(r: dict) -> str:
    if "error" in r:
        return f"failed: {r['error']}"
    return f"{r['seconds']:8.1f} s  {r['peak_mib'] / 1024:6.2f} GB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, action="append", default=[],
                        help="a store to measure (repeat for several sizes)")
    parser.add_argument("--sizes", default=None, help="synthesize stores of these sizes "
                        "(e.g. 1M,10M) under --work and measure them (synth is measured too)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memframe-scale"))
    parser.add_argument("--paths", default=",".join(p for p in PATHS if p not in ("synth", "import")))
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout of the code before: run every path under both")
    parser.add_argument("--memory-limit", default=None, help="MEMFRAME_MEMORY_LIMIT for the runs")
    parser.add_argument("--sqlite", type=Path, default=None,
                        help="an nMEMORY SQLite file: the import path imports it")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    paths = [p for p in args.paths.split(",") if p]
    stores = list(args.store)
    results: dict[tuple[str, str, str], dict] = {}
    for size in (args.sizes.split(",") if args.sizes else []):
        n = parse_size(size)
        target = args.work / f"s{size}"
        if not target.exists():
            r = run("synth", target, None, args.work, json.dumps({"capsules": n}),
                    args.memory_limit)
            results[(size, "synth", "now")] = r
            print(f"{size:>6}  synth   now     {_fmt(r)}", flush=True)
        stores.append(target)
    for store in stores:
        label = store.name
        for kind in paths:
            sides = [("now", None)] + ([("before", args.before)] if args.before else [])
            for side, code in sides:
                target, extra = store, ""
                if kind == "import":  # into a new store; the SQLite file is the input
                    if args.sqlite is None:
                        parser.error("the import path needs --sqlite FILE")
                    target, extra = args.work / "imported", str(args.sqlite)
                    shutil.rmtree(target, ignore_errors=True)
                r = run(kind, target, code, args.work, extra,
                        args.memory_limit if side == "now" else None)
                if kind == "import":
                    shutil.rmtree(target, ignore_errors=True)
                results[(label, kind, side)] = r
                print(f"{label:>6}  {kind:<8} {side:<7} {_fmt(r)}"
                      f"  answer {r.get('answer', '-')}", flush=True)
    for line in growth(results, [s.name for s in stores]):
        print(line)
    print(json.dumps({"|".join(k): v for k, v in results.items()}))
    return 0


def growth(results: dict[tuple[str, str, str], dict], labels: list[str]) -> list[str]:
    """Per path, the time and the peak at each store size as multiples of the first
    size's (measured in this run): how each grows with the store."""
    if len(labels) < 2:
        return []
    lines = [f"growth from {labels[0]}: " + ", ".join(labels[1:])]
    for (label, kind, side), first in results.items():
        if label != labels[0] or "error" in first or kind == "synth":
            continue
        cells = []
        for other in labels[1:]:
            r = results.get((other, kind, side), {})
            cells.append("-" if "seconds" not in r else
                         f"time x{r['seconds'] / max(first['seconds'], 1e-9):.1f}, "
                         f"peak x{r['peak_mib'] / max(first['peak_mib'], 1e-9):.1f}")
        lines.append(f"  {kind:<8} {side:<7} " + "; ".join(cells))
    return lines


if __name__ == "__main__":
    sys.exit(main())
