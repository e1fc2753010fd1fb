"""A session-start hook's cost: the whole ``memframe digest`` process on a warm store,
measured side by side with ``python -c "import polars"``.

A hook runs ``memframe digest STORE`` as a new process at the start of every session, so
what counts is the whole process: interpreter start, imports, opening the store, the
projections' cycle (nothing to fold on a warm store) and the digest. Each round runs, in
turn, ``python -c "import polars"``, ``python -c "import polars, pyarrow"`` (what a
process pays once it loads pyarrow), ``memframe digest STORE --no-advance``
and ``memframe digest STORE`` (what a hook runs), so machine load hits them alike; the
figures are medians over the rounds, wall and CPU (user + system of the child), and the
ratios against ``import polars``.

The store: ``--store PATH`` (used as it is, after one cycle makes it warm), else a
synthetic store of ``--capsules`` rows built once into ``--workdir`` (kept there for the
next run).

Measured on the project's 2-core machine, shared and very busy (load 7-8: wall times
swing, so compare the CPU column), 300k capsules (1M is not built on the shared machine),
7 rounds, with ``--against`` a checkout of the code before the change, side by side:

====================================================  =======  ========
process (300k capsules, warm)                         cpu s    x polars
====================================================  =======  ========
python -c "import polars"                             0.286    1.00
python -c "import polars, pyarrow"                    0.428    1.50
memframe digest STORE --no-advance                    0.416    1.46
memframe digest STORE (the hook)                      0.407    1.42
memframe digest STORE, before (pyarrow loaded)        0.693    2.42
====================================================  =======  ========

The hook's process no longer imports pyarrow (nor numpy, which pyarrow loads), networkx
or pandera: the few small derived partitions a warm digest looks up by key have their
Parquet footers decoded by ``memframe.store.footer`` and their row groups read through
Polars; pyarrow is imported on first use (writes, large footers). A warm digest reads 163
rows here. (Earlier: about 3.3x on the 3,000-capsule sample when it shipped cold; 1.71x at
1M and 300k on a quieter machine, with pyarrow.)

Usage::

    python3 benchmarks/bench_hook.py                      # 300k capsules, 7 rounds
    python3 benchmarks/bench_hook.py --capsules 1M --workdir /tmp/hook-1m
    python3 benchmarks/bench_hook.py --store data/sample-store --rounds 9
    git worktree add /tmp/before <commit> && \\
        python3 benchmarks/bench_hook.py --against /tmp/before  # old and new, side by side
"""

from __future__ import annotations

import argparse
import compileall
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
# this checkout's memframe, also in this process (it warms the store with the same code)
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], code: Path = REPO) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one process running ``code``'s memframe."""
    cpu = _child_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=code, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(code)})
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
    parser.add_argument("--against", default=None,
                        help="another checkout of memframe (e.g. `git worktree add` of an "
                             "older commit): its digest runs in the same rounds, on its own "
                             "copy of the store (derived state is kept per code identity)")
    args = parser.parse_args()
    path = prepare(args)
    py = sys.executable
    cases: dict[str, tuple[list[str], Path]] = {
        'python -c "import polars"': ([py, "-c", "import polars"], REPO),
        'python -c "import polars, pyarrow"': ([py, "-c", "import polars, pyarrow"], REPO),
        "memframe digest STORE --no-advance": ([py, "-m", "memframe", "digest", str(path),
                                                "--format", "json", "--no-advance"], REPO),
        "memframe digest STORE": ([py, "-m", "memframe", "digest", str(path), "--format",
                                   "json"], REPO),
    }
    if args.against:
        other = Path(args.against).resolve()
        copy = path.with_name(path.name + "-against")
        if not copy.exists():
            shutil.copytree(path, copy)
        cases["memframe digest STORE (--against)"] = (
            [py, "-m", "memframe", "digest", str(copy), "--format", "json"], other)
    # an installed package has its bytecode compiled (pip does it); a checkout run with
    # PYTHONDONTWRITEBYTECODE set would compile every changed module in every process
    for code in {code for _argv, code in cases.values()}:
        if (code / "memframe").is_dir():
            compileall.compile_dir(code / "memframe", quiet=1)
    for argv, code in cases.values():  # an untimed round: caches, bytecode, warm state
        run(argv, code)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (argv, code) in cases.items():
            wall, cpu, _ = run(argv, code)
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
