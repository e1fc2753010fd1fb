"""The cycle after an erasing forget, on a large store, measured side by side with the
code before the change.

An erasing forget (``redact``, ``purge``) must leave no file holding the erased text,
and the digest keeps headlines and labels in derived text tables
(``projections/text/``). The code before wrote those tables off whole in the forget's
commit, so the next cycle refilled them from every state row (and read the headlines
of every leader and subset member back from the capsules). Now the forget's commit
writes them again without the erased capsules' rows, and the next cycle does only the
work its new rows need.

Each round, per checkout, on its own copy of one synthetic store (built once with
``memframe synth``, cycled once by that checkout): a plain cycle after ten new capsules
(the baseline), an erasing forget of the newest capsule (a leader of the ``newest``
list) and the cycle after it; in-process wall and CPU seconds, and the cycle's rows
visited. Figures are medians over the rounds.

Measured on the project's shared 2-core machine (load 8-9: wall times swing; compare the
CPU column), 200,000 capsules, 3 rounds, against the commit before the change:

======================================  ==========  =========  ===========  ==========
step (200k capsules)                    before cpu  after cpu  before rows  after rows
======================================  ==========  =========  ===========  ==========
a plain cycle (10 new capsules)         0.176 s     0.157 s    660          659
the erasing forget's commit             0.031 s     0.125 s    0            0
the cycle after the erasure             1.117 s     0.179 s    894,435      1,678
======================================  ==========  =========  ===========  ==========

(wall: 1.436 s before, 0.240 s after for the cycle after the erasure.) The forget's commit
now pays about 0.1 s: it reads the text tables that can hold the erased capsule (a few
thousand rows) and writes the leaders again; the cycle after it reads what a cycle after
a tombstone reads.

Usage::

    git archive <commit> | tar -x -C /tmp/before
    python3 benchmarks/bench_erasure.py --against /tmp/before    # before and after
    python3 benchmarks/bench_erasure.py --capsules 20000 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# run in the checkout measured (its memframe first on sys.path): one round on its store
ROUND = r"""
import json, sys, time
import memframe as mf

def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu

store = mf.Store.open(sys.argv[1])
k = int(sys.argv[2])
store.ingest([{"content": f"round {k} note {i}\nmore", "source": "note", "anchor": "a",
               "project_id": "bench"} for i in range(10)])
plain, plain_wall, plain_cpu = timed(store.memory.run_cycle)
newest = f"cap-{store.row_count('capsules')}"
_, forget_wall, forget_cpu = timed(lambda: store.forget(newest, mode="purge"))
after, after_wall, after_cpu = timed(store.memory.run_cycle)
print(json.dumps({
    "plain": [plain_wall, plain_cpu, plain.rows_visited],
    "forget": [forget_wall, forget_cpu, 0],
    "after": [after_wall, after_cpu, after.rows_visited],
}))
"""

PREPARE = "import sys, memframe as mf; mf.Store.open(sys.argv[1]).memory.run_cycle()"


def _run(code: Path, argv: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, *argv], cwd=code, env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise SystemExit(f"{code}: {' '.join(argv[:2])} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capsules", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout of memframe (the code before the change)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-erasure-"))
    base = work / f"synth-{args.capsules}"
    if not base.exists():
        _run(HERE, ["-m", "memframe", "synth", str(base), "--capsules", str(args.capsules),
                    "--end", "2026-11-01T00:00:00Z", "--quiet"])
    codes = {"after": HERE}
    if args.against is not None:
        codes = {"before": args.against.resolve(), **codes}
    stores = {}
    for name, code in codes.items():
        stores[name] = work / f"store-{name}"
        shutil.rmtree(stores[name], ignore_errors=True)
        shutil.copytree(base, stores[name])
        _run(code, ["-c", PREPARE, str(stores[name])])  # the state, built by that code
    results: dict[str, list[dict]] = {name: [] for name in codes}
    for k in range(args.rounds):
        for name, code in codes.items():  # alternated: machine load hits both alike
            out = _run(code, ["-c", ROUND, str(stores[name]), str(k)])
            results[name].append(json.loads(out.strip().splitlines()[-1]))
    steps = {"plain": "a plain cycle (10 new capsules)",
             "forget": "the erasing forget's commit",
             "after": "the cycle after the erasure"}
    print(f"{args.capsules:,} capsules, {args.rounds} rounds, medians")
    header = "step".ljust(34) + "".join(
        f"{name + ' wall s':>14}{name + ' cpu s':>13}{name + ' rows':>14}" for name in codes)
    print(header)
    for step, label in steps.items():
        line = label.ljust(34)
        for name in codes:
            wall, cpu, rows = (statistics.median(r[step][i] for r in results[name])
                               for i in range(3))
            line += f"{wall:>14.3f}{cpu:>13.3f}{int(rows):>14,}"
        print(line)


if __name__ == "__main__":
    main()
