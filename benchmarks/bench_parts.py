"""What each part of the incremental source buys: the warm digest with one kept part
switched off at a time, measured side by side in one run.

STORE is a store whose digest state is current (for example the warm copy
``bench_digest.py --cold-warm`` leaves in its workdir, or any store after
``store.memory.run_cycle()``). Each variant runs in its own process, alternately, ``--repeat``
times; each process times ``--calls`` warm digests after one untimed call and prints the
median. Every variant must answer the same bytes (checked), so the difference is what the
part saves:

* ``all``: every kept part used (the default digest);
* ``no kept sections``: the unfenced subset sections computed from the subset and the
  graph instead of read as the job kept them;
* ``no leaders``: ``newest`` and ``most_recalled`` from the state's row groups;
* ``no kept families``: the store-wide families (graph, sessions, misses, lanes, sources)
  computed from their tables;
* ``full``: ``verify="full"`` (the reference: nothing kept is read), timed once.

Usage::

    python3 benchmarks/bench_parts.py STORE [--calls 15] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: variant -> the code that switches its part off (run in the child before it digests)
VARIANTS: dict[str, str] = {
    "all": "",
    "no kept sections": (
        "from memframe.digest.state import sections\n"
        "sections.read_current = lambda view, n: (None, 0)\n"),
    "no leaders": (
        "from memframe.digest.state.warm_reader import WarmState\n"
        "WarmState.leaders = lambda self, order, keep, n: None\n"),
    "no kept families": (
        "from memframe.digest.state import kept_source\n"
        "kept_source.read_kept_families = lambda view: ({}, 0)\n"),
}

_CHILD = r"""
import datetime as dt, hashlib, json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
exec(sys.argv[4])
import memframe as mf
store = mf.Store.open(sys.argv[2])
calls = int(sys.argv[3])
full = sys.argv[5] == "full"
run = (lambda: mf.digest(store, verify="full")) if full else (lambda: mf.digest(store))
first = run()
times = []
for _ in range(1 if full else calls):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
print(json.dumps({"ms": statistics.median(times) * 1000, "rows": first.rows_visited,
                  "sha": hashlib.sha256(first.to_json().encode()).hexdigest()}))
"""


def _child(store: str, calls: int, patch: str, full: bool = False) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(REPO), store, str(calls), patch,
         "full" if full else "warm"],
        capture_output=True, text=True, check=True, env=dict(os.environ))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-full", action="store_true", help="skip the verify='full' run")
    args = parser.parse_args(argv)
    found: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeat):
        for name, patch in VARIANTS.items():
            found[name].append(_child(args.store, args.calls, patch))
    full = None if args.no_full else _child(args.store, 1, "", full=True)
    base = statistics.median(r["ms"] for r in found["all"])
    shas = {r["sha"] for rows in found.values() for r in rows} | (
        {full["sha"]} if full else set())
    print(f"store {args.store}: {args.repeat} x {args.calls} warm digests per variant")
    print(f"  {'variant':<18} {'median ms':>10} {'rows read':>10} {'part saves':>11}")
    for name, rows in found.items():
        ms = statistics.median(r["ms"] for r in rows)
        saves = "" if name == "all" else f"{ms - base:+.1f} ms"
        print(f"  {name:<18} {ms:>10.1f} {rows[0]['rows']:>10,} {saves:>11}")
    if full:
        print(f"  {'verify=full':<18} {full['ms']:>10.1f} {full['rows']:>10,}")
    print(f"  same bytes in every variant: {len(shas) == 1}")
    return 0 if len(shas) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
