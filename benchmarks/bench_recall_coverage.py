"""Time `mf.audit.recall_coverage` against the recall-miss audit on the same store.

A synthetic store with recall receipts (``synthesize(..., receipts=R)``) is written once
per size (reused when already there), or ``--store`` names one. One run then measures,
side by side, each in a fresh process so peak memory is its own:

* ``coverage``: ``mf.audit.recall_coverage(store)`` (daily receipts, hits and misses,
  by project and lane, never recalled, answers, concentration);
* ``misses``: ``mf.audit.recall_misses(store)`` (the miss audit, lifecycle included);

and, with ``--baseline DIR``, ``coverage`` again with the code of another checkout (the
code before a change), and prints wall time, CPU time and peak resident memory of each,
the ratios coverage/misses (and coverage/baseline), and the coverage against its targets (at 1M capsules with 5M receipts:
at most 10 s and 2 GB). Each timed call follows one untimed call in the same process
(imports done, files in the page cache); the processes alternate ``--repeat`` times and
the medians are printed, so a load that comes and goes hits both alike.

Usage::

    python benchmarks/bench_recall_coverage.py                     # 1M capsules, 5M receipts
    python benchmarks/bench_recall_coverage.py --capsules 100k --receipts-per-capsule 5
    python benchmarks/bench_recall_coverage.py --store /path/to/store
    python benchmarks/bench_recall_coverage.py --baseline /path/to/older/checkout
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
TARGET_SECONDS, TARGET_MIB = 10.0, 2048.0

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import memframe as mf
what, path = sys.argv[2], sys.argv[3]
store = mf.Store.open(path)
run = (lambda: mf.audit.recall_coverage(store)) if what == "coverage" else \
      (lambda: mf.audit.recall_misses(store, progress=False))
run()  # untimed: imports, page cache
w, c = time.perf_counter(), time.process_time()
value = run()
out = {"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
       "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
if what == "coverage":
    out.update(value.totals)
else:
    out.update(terms=value.terms.height, open=value.open_misses().height)
print(json.dumps(out))
"""


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def ensure_store(stores: Path, capsules: int, receipts: int, seed: int) -> Path:
    """The store of this size, written once (a finished store has memframe.json)."""
    path = stores / f"coverage-{label(capsules)}-r{label(receipts)}-s{seed}"
    if (path / "memframe.json").is_file():
        return path
    sys.path.insert(0, str(REPO))
    from memframe.synth import synthesize

    stores.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    synthesize(path, capsules=capsules, seed=seed, receipts=receipts)
    print(f"# wrote {path} in {time.perf_counter() - start:.1f} s", flush=True)
    return path


def measure(what: str, path: Path, code: Path = REPO) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(code), what, str(path)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capsules", default="1M")
    parser.add_argument("--receipts-per-capsule", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", type=Path, default=None,
                        help="measure this store instead of a synthetic one")
    parser.add_argument("--stores", type=Path,
                        default=Path(tempfile.gettempdir()) / "memframe-bench-stores",
                        help="where the synthetic stores are made once and reused")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="also time recall_coverage with this checkout's code")
    args = parser.parse_args(argv)

    if args.store is not None:
        path = args.store
    else:
        n = parse_size(args.capsules)
        path = ensure_store(args.stores, n, int(n * args.receipts_per_capsule), args.seed)
    print(f"# {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; medians of "
          f"{args.repeat} alternating coverage/misses processes (one untimed call each "
          f"first); store {path}", flush=True)
    coverages, audits, baselines = [], [], []
    for _ in range(args.repeat):
        coverages.append(measure("coverage", path))
        if args.baseline is not None:
            baselines.append(measure("coverage", path, args.baseline))
        audits.append(measure("misses", path))
    c_wall, m_wall = median(coverages, "wall"), median(audits, "wall")
    c_cpu, m_cpu = median(coverages, "cpu"), median(audits, "cpu")
    c_mib, m_mib = median(coverages, "peak_mib"), median(audits, "peak_mib")
    last = coverages[-1]
    print(f"{'':>10} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9}")
    print(f"{'coverage':>10} {c_wall:>8.2f} {c_cpu:>8.2f} {c_mib:>9,.0f}")
    print(f"{'misses':>10} {m_wall:>8.2f} {m_cpu:>8.2f} {m_mib:>9,.0f}")
    print(f"{'ratio':>10} {c_wall / m_wall:>8.2f} {c_cpu / m_cpu:>8.2f} {c_mib / m_mib:>9.2f}")
    if baselines:
        b_wall, b_cpu = median(baselines, "wall"), median(baselines, "cpu")
        b_mib = median(baselines, "peak_mib")
        print(f"{'baseline':>10} {b_wall:>8.2f} {b_cpu:>8.2f} {b_mib:>9,.0f}   # {args.baseline}")
        print(f"{'cov/base':>10} {c_wall / b_wall:>8.2f} {c_cpu / b_cpu:>8.2f} "
              f"{c_mib / b_mib:>9.2f}")
        same = {k: baselines[-1][k] for k in ("receipts", "hits", "never_recalled",
                                              "answered_terms")}
        print(f"# baseline totals {'equal' if same == {k: last[k] for k in same} else 'DIFFER'}")
    print(f"# receipts {last['receipts']:,}, hits {last['hits']:,}, never recalled "
          f"{last['never_recalled']:,}, answered terms {last['answered_terms']:,}; "
          f"miss terms {audits[-1]['terms']:,} ({audits[-1]['open']:,} open)")
    print(f"# coverage targets: wall {c_wall:.2f} s of {TARGET_SECONDS:.0f} s "
          f"({c_wall / TARGET_SECONDS:.2f}), peak {c_mib:,.0f} MiB of {TARGET_MIB:,.0f} MiB "
          f"({c_mib / TARGET_MIB:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
