"""A session-start hook's cost: the whole ``memframe digest`` process on a warm store,
measured side by side with ``python -c "import polars"``.

A hook runs ``memframe digest STORE`` as a new process at the start of every session, so
what counts is the whole process: interpreter start, imports, opening the store, the
projections' cycle (nothing to fold on a warm store) and the digest. Each round runs, in
turn, ``python -c "import polars"``, ``python -c "import polars, pyarrow"`` (the floor:
the store reads Parquet row groups with pyarrow), ``memframe digest STORE --no-advance``
and ``memframe digest STORE`` (what a hook runs), so machine load hits them alike; the
figures are medians over the rounds, wall and CPU (user + system of the child), and the
ratios against ``import polars``.

The store: ``--store PATH`` (used as it is, after one cycle makes it warm), else a
synthetic store of ``--capsules`` rows built once into ``--workdir`` (kept there for the
next run).

Measured on the project's 2-core machine, shared and busy (wall times swing with the load,
so compare the CPU column), 5 rounds:

=================================  =======  =======  ======  =====
                                   1M warm           300k warm
---------------------------------  ----------------  -------------
process                            cpu s    x polars  cpu s  x
=================================  =======  =======  ======  =====
python -c "import polars"          0.347    1.00     0.354   1.00
python -c "import polars, pyarrow" 0.443    1.28     0.499   1.41
memframe digest STORE --no-advance 0.599    1.73     0.633   1.79
memframe digest STORE (the hook)   0.593    1.71     0.606   1.71
=================================  =======  =======  ======  =====

(before: about 3.3x on the 3,000-capsule sample, which shipped cold). Of the hook's
~0.25 s above ``import polars``: pyarrow (the store reads Parquet footers and row groups
with it) ~0.1 s, memframe's own modules ~0.08 s, the digest itself ~0.07 s.

Usage::

    python3 benchmarks/bench_hook.py                      # 300k capsules, 7 rounds
    python3 benchmarks/bench_hook.py --capsules 1M --workdir /tmp/hook-1m
    python3 benchmarks/bench_hook.py --store data/sample-store --rounds 9
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one process."""
    cpu = _child_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{done.stderr}")
    return wall, _child_cpu() - cpu, done.stdout


def prepare(args: argparse.Namespace) -> Path:
    import memframe as mf

    if args.store:
        store = mf.Store.open(args.store)
    else:
        from bench_digest import build, parse_size

        capsules = parse_size(args.capsules)
        work = Path(args.workdir or tempfile.mkdtemp(prefix="memframe-hook-"))
        path = work / f"store-{capsules}"
        if not (path / "memframe.json").exists():
            if path.exists():
                shutil.rmtree(path)
            print(f"building a store of {capsules:,} capsules in {path} (once)...",
                  file=sys.stderr)
            build(path, capsules, seed=7)
        store = mf.Store.open(path)
    store.memory.run_cycle()  # warm: the hook's later cycles have nothing to fold
    return Path(store.path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capsules", default="300k")
    parser.add_argument("--store", default=None)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    path = prepare(args)
    py = sys.executable
    cases = {
        'python -c "import polars"': [py, "-c", "import polars"],
        'python -c "import polars, pyarrow"': [py, "-c", "import polars, pyarrow"],
        "memframe digest STORE --no-advance": [py, "-m", "memframe", "digest", str(path),
                                               "--format", "json", "--no-advance"],
        "memframe digest STORE": [py, "-m", "memframe", "digest", str(path), "--format", "json"],
    }
    for argv in cases.values():  # one untimed round: file caches, compiled bytecode
        run(argv)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, argv in cases.items():
            wall, cpu, _ = run(argv)
            times[name].append((wall, cpu))
    import memframe as mf

    store = mf.Store.open(path)
    d = mf.digest(store)
    print(f"store {path}: {store.row_count('capsules'):,} capsules, generation "
          f"{store.generation}; a warm digest reads {d.rows_visited:,} rows")
    base_wall = statistics.median(w for w, _ in times['python -c "import polars"'])
    base_cpu = statistics.median(c for _, c in times['python -c "import polars"'])
    print(f"{args.rounds} rounds, side by side; medians")
    print(f"  {'':<36} {'wall s':>7} {'cpu s':>7} {'wall x':>7} {'cpu x':>7}")
    for name, pairs in times.items():
        wall = statistics.median(w for w, _ in pairs)
        cpu = statistics.median(c for _, c in pairs)
        print(f"  {name:<36} {wall:>7.3f} {cpu:>7.3f} {wall / base_wall:>7.2f} "
              f"{cpu / base_cpu:>7.2f}")
    print("target: memframe digest STORE <= 1.5x import polars")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
