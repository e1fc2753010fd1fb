"""The fleet frame of many stores on object storage: engine="local" against engine="ray",
and the driver's peak memory at a small against a large fleet.

Starts an S3-compatible server on loopback (moto's server mode, real HTTP), writes one
synthetic store (``--capsules``, kept state current), pushes it under ``--stores``
prefixes (``s3://fleet/agents/a000`` ...), then runs `mf.fleet` on the prefix, each run in
a fresh process so its peak resident memory is its own (each store is read through an
empty mirror, as a fleet job on a new worker would):

* ``local`` and ``ray`` on every store: wall time, and the driver's peak;
* ``ray`` on the first ``--small`` stores: the driver's peak, which should not grow with
  the fleet (rows are computed on the workers; only small rows reach the driver).

Usage::

    python benchmarks/bench_fleet.py [--stores 200] [--small 50] [--capsules 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_remote import s3_server  # noqa: E402 - the one loopback S3 server of the benchmarks

_CHILD = r"""
import json, resource, sys, time, datetime as dt
sys.path.insert(0, sys.argv[1])
import memframe as mf
urls, engine, options = json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
start = time.perf_counter()
fleet = mf.fleet(urls, engine=engine, storage_options=options,
                 now=dt.datetime(2027, 1, 1, tzinfo=dt.UTC), num_cpus=2)
wall = time.perf_counter() - start
frame = fleet.frame
print(json.dumps({"wall": wall, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "rows": frame.height, "errors": int(frame["error"].is_not_null().sum()),
                  "requests": int(frame["digest_requests"].sum() or 0)}))
"""


def _run(urls: list[str], engine: str, options: dict, cache: Path) -> dict:
    env = {**os.environ, "MEMFRAME_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(REPO), json.dumps(urls), engine,
                           json.dumps(options)], capture_output=True, text=True, env=env,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=200)
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--capsules", type=int, default=20_000)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    import memframe as mf

    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    proc, endpoint = s3_server("fleet")
    options = {"endpoint": endpoint, "access_key_id": "bench", "secret_access_key": "bench",
               "region": "us-east-1", "allow_http": True}
    try:
        path = work / "store"
        subprocess.run([sys.executable, "-m", "memframe", "synth", "--capsules",
                        str(args.capsules), "--quiet", "--end", "2026-12-01T00:00:00Z",
                        str(path)], check=True)
        store = mf.Store.open(path)
        store.memory.run_cycle()
        urls = [f"s3://fleet/agents/a{i:03d}" for i in range(args.stores)]
        start = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda u: store.push(u, storage_options=options), urls))
        print(f"pushed {args.stores} stores of {args.capsules:,} capsules in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
        runs = {}
        for name, engine, chosen in [("local", "local", urls), ("ray", "ray", urls),
                                     (f"ray, {args.small} stores", "ray", urls[:args.small])]:
            runs[name] = _run(chosen, engine, options, work / f"cache-{len(runs)}")
            print(name, runs[name], flush=True)
    finally:
        proc.terminate()
    print(f"\nfleet frame of {args.stores} stores ({args.capsules:,} capsules each) on an S3 "
          f"server on loopback, every store read through an empty mirror")
    print(f"{'':<20}{'stores':>8}{'wall':>10}{'driver peak':>14}{'requests':>10}{'errors':>8}")
    for name, r in runs.items():
        print(f"{name:<20}{r['rows']:>8}{r['wall']:>9.1f}s{r['peak_kb'] / 1024:>11.0f} MB"
              f"{r['requests']:>10,}{r['errors']:>8}")
    ray_all, ray_small = runs["ray"], runs[f"ray, {args.small} stores"]
    print(f"local / ray wall: {runs['local']['wall'] / ray_all['wall']:.2f}x; driver peak "
          f"{args.stores} / {args.small} stores (ray): "
          f"{ray_all['peak_kb'] / ray_small['peak_kb']:.2f}x")


if __name__ == "__main__":
    main()
