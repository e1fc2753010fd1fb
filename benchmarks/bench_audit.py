"""Time the recall-miss audit against ``mf.digest`` on the same noisy synthetic stores.

For each size, a noisy synthetic store (``synthesize(..., noise=True)``) with recall-miss
rows equal to 10% of its capsules is written once (reused when already there), then one
run measures, side by side, each in a fresh process so peak memory is its own:

* ``digest``: ``mf.digest(store)`` (every section, journal hash chain included);
* ``audit``: ``mf.audit.recall_misses(store)`` (vocabulary, alias proposals, trends);

and prints wall time, CPU time (all threads) and peak resident memory of each, the ratios
audit/digest of wall and of CPU time, the vocabulary and proposal sizes, and the
proposals' score against the generator's ground truth (precision@1, recall@1, recall).
Each timed call is preceded by one untimed call in the same process (files in the page
cache, imports done); the digest and audit processes alternate ``--repeat`` times and the
medians are printed, so a load that comes and goes on a shared machine hits both alike.

Usage::

    python benchmarks/bench_audit.py                          # 300k and 1M capsules
    python benchmarks/bench_audit.py --capsules 50k --stores /tmp/audit-stores
    flock /tmp/memframe-bench.lock python benchmarks/bench_audit.py   # on a shared machine
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import memframe as mf
from memframe import synth
what, path = sys.argv[2], sys.argv[3]
store = mf.Store.open(path)
run = (lambda: mf.digest(store)) if what == "digest" else \
      (lambda: mf.audit.recall_misses(store, progress=False))
run()  # untimed: imports, page cache
w, c = time.perf_counter(), time.process_time()
value = run()
out = {"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
       "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
if what == "audit":
    capsules, seed, misses = (int(x) for x in sys.argv[4:7])
    truth = synth.miss_truth(seed, capsules=capsules, noise=True, misses=misses)
    score = value.score(truth)
    out.update(vocabulary=value.vocabulary_size, terms=value.terms.height,
               proposals=value.aliases.height, **score.to_dict())
print(json.dumps(out))
"""


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def ensure_store(stores: Path, capsules: int, seed: int, misses: int) -> Path:
    """The noisy store of this size, written once (a finished store has memframe.json)."""
    path = stores / f"audit-noise-{capsules // 1000}k-s{seed}"
    if (path / "memframe.json").is_file():
        return path
    sys.path.insert(0, str(REPO))
    from memframe.synth import synthesize

    stores.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    synthesize(path, capsules=capsules, seed=seed, noise=True, misses=misses)
    print(f"# wrote {path} in {time.perf_counter() - start:.1f} s", flush=True)
    return path


def measure(what: str, path: Path, *extra: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(REPO), what, str(path), *(str(x) for x in extra)],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capsules", nargs="+", default=["300k", "1M"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--miss-share", type=float, default=0.10,
                        help="recall-miss rows as a share of capsules (default 0.10)")
    parser.add_argument("--stores", type=Path,
                        default=Path(tempfile.gettempdir()) / "memframe-bench-stores",
                        help="where the synthetic stores are made once and reused "
                             "(default: memframe-bench-stores in the temporary directory)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    print(f"# {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; medians of "
          f"{args.repeat} alternating digest/audit processes (one untimed call each first)")
    header = (f"{'store':>6} {'misses':>8} {'digest s':>9} {'audit s':>8} {'ratio':>6} "
              f"{'digest cpu':>10} {'audit cpu':>9} {'cpu ratio':>9} {'digest MiB':>10} "
              f"{'audit MiB':>9} {'vocab':>7} {'terms':>7} {'props':>7} {'p@1':>6} "
              f"{'r@1':>6} {'recall':>6}")
    print(header, flush=True)
    for size in args.capsules:
        n = parse_size(size)
        misses = int(n * args.miss_share)
        path = ensure_store(args.stores, n, args.seed, misses)
        digests, audits = [], []
        for _ in range(args.repeat):
            digests.append(measure("digest", path))
            audits.append(measure("audit", path, n, args.seed, misses))
        d_wall, a_wall = median(digests, "wall"), median(audits, "wall")
        d_cpu, a_cpu = median(digests, "cpu"), median(audits, "cpu")
        a = audits[-1]
        print(
            f"{label(n):>6} {misses:>8,} {d_wall:>9.2f} {a_wall:>8.2f} {a_wall / d_wall:>6.2f} "
            f"{d_cpu:>10.2f} {a_cpu:>9.2f} {a_cpu / d_cpu:>9.2f} "
            f"{median(digests, 'peak_mib'):>10,.0f} {median(audits, 'peak_mib'):>9,.0f} "
            f"{a['vocabulary']:>7,} {a['terms']:>7,} {a['proposals']:>7,} "
            f"{a['precision_at_1']:>6.4f} {a['recall_at_1']:>6.4f} {a['recall']:>6.4f}",
            flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
