"""Time `memframe synth` in CPU, with and without the recall tables, beside other checkouts.

`synthesize(path, capsules=N, seed=S)` runs in fresh processes, one store each (removed
after), in turn:

* ``tables``: this checkout, writing recall receipts, event times and epistemics (the
  default);
* ``plain``: this checkout with ``recall_tables=False`` (the store it wrote before it
  planted those tables);

and the same two for every ``--baseline`` checkout (a checkout older than the recall
tables writes only its plain store). The runs alternate ``--repeat`` times, so a load
that comes and goes hits them alike, and the medians of CPU time (the figure a busy
machine moves least), wall time and peak memory are printed, with the cost of the
recall tables (tables / plain) against its target (at most 1.10).

Usage::

    python benchmarks/bench_synth.py                                   # 300k capsules
    python benchmarks/bench_synth.py --capsules 100k --repeat 3
    python benchmarks/bench_synth.py --baseline /path/to/older/checkout
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.10

_CHILD = r"""
import inspect, json, os, resource, shutil, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from memframe.synth import synthesize
tables, capsules, seed, workdir = sys.argv[2] == "tables", int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
kwargs = {}
if "recall_tables" in inspect.signature(synthesize).parameters:
    kwargs["recall_tables"] = tables
elif tables:
    print(json.dumps(None))
    raise SystemExit(0)
where = tempfile.mkdtemp(dir=workdir)
try:
    w, c = time.perf_counter(), time.process_time()
    synthesize(os.path.join(where, "s"), capsules=capsules, seed=seed, **kwargs)
    out = {"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
           "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
finally:
    shutil.rmtree(where, ignore_errors=True)
print(json.dumps(out))
"""


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def measure(code: Path, what: str, capsules: int, seed: int, workdir: Path) -> dict | None:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(code), what, str(capsules),
                          str(seed), str(workdir)], check=True, capture_output=True, text=True)
    result: dict | None = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capsules", default="300k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", type=Path, action="append", default=[],
                        help="another checkout to run the same way (repeatable)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the scratch stores are written (and removed)")
    args = parser.parse_args(argv)
    n = parse_size(args.capsules)
    args.workdir.mkdir(parents=True, exist_ok=True)
    checkouts = [("this", REPO)] + [(f"base{i + 1}", p) for i, p in enumerate(args.baseline)]
    print(f"# {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; synth "
          f"{n:,} capsules, seed {args.seed}; medians of {args.repeat} alternating processes",
          flush=True)
    for name, path in checkouts[1:]:
        print(f"# {name}: {path}")
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeat):
        for name, path in checkouts:
            for what in ("tables", "plain"):
                result = measure(path, what, n, args.seed, args.workdir)
                if result is not None:
                    runs.setdefault((name, what), []).append(result)

    def med(key: tuple[str, str], field: str) -> float:
        return statistics.median(r[field] for r in runs[key])

    print(f"{'':>14} {'cpu s':>8} {'wall s':>8} {'peak MiB':>9}")
    for key in runs:
        print(f"{key[0] + ' ' + key[1]:>14} {med(key, 'cpu'):>8.2f} {med(key, 'wall'):>8.2f} "
              f"{med(key, 'peak_mib'):>9,.0f}")
    plain = med(("this", "plain"), "cpu")
    ratio = med(("this", "tables"), "cpu") / plain
    print(f"# recall tables, this checkout: tables / plain cpu {ratio:.3f} (target at most "
          f"{TARGET_RATIO:.2f}: {'met' if ratio <= TARGET_RATIO else 'NOT met'})")
    for name, _ in checkouts[1:]:
        for what in ("tables", "plain"):
            if (name, what) in runs:
                print(f"# this tables / {name} {what} cpu "
                      f"{med(('this', 'tables'), 'cpu') / med((name, what), 'cpu'):.3f}")
        if (name, "tables") in runs:
            print(f"# {name}: tables / plain cpu "
                  f"{med((name, 'tables'), 'cpu') / med((name, 'plain'), 'cpu'):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
