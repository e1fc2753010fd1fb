"""Maintenance under a stream of small commits: idle and loaded, side by side in one run.

Issue 38: a commit that rewrites files (an erasing forget, a compaction, the cycle,
vacuum) used to lose the race for the next generation to every single-row commit that
landed while it re-read and rewrote, so under load it landed late or never. Now a
writer that loses re-runs its staging on the newer generation with the partitions it
read kept in memory and links the files it already wrote when they come out the same
(a rebase), and after two losses it takes a fairness ticket that new commits wait
behind (bounded).

Per configuration (a code checkout, a number of writer processes): one store of
``--capsules`` capsules (one bulk ingest, one cycle, one digest). Each operation runs
``--rounds`` times idle, then the same with ``--writers`` processes committing
single-row ingests continuously; figures are medians. The writers log the instant of
every commit they land, so the throughput of small commits while the operations run is
compared with their throughput in a window with no operation (same run). Targets:

- each operation under load within 2x its idle time plus one small commit's time;
- small commits' throughput drops at most 20% while the operations run;
- ``memframe digest`` (the session-start hook: it runs the cycle first) within 2x idle.

The control (``cpu alone``) spins on the CPU as long as a loaded erasure and touches no
store: the writers' drop beside it is what sharing the machine's cores costs them whatever
the other process does, the floor under the throughput figures. The hook has two more:
its time beside as many processes that only spin (what sharing the cores alone costs it),
and its idle time again after the load, on the store the writers grew.

Usage::

    python3 benchmarks/bench_fair_commits.py                       # 2 and 4 writers
    python3 benchmarks/bench_fair_commits.py --writers 2 --capsules 20000 --rounds 3
    git archive <commit> | tar -x -C /tmp/before
    python3 benchmarks/bench_fair_commits.py --against /tmp/before  # the code before too
    # the writers' rate while the erasures run, against their rate just before each:
    python3 benchmarks/bench_fair_commits.py --writers 1 2 --ops purge,redact,"cpu alone" \
        --rounds 60 --gap 0.25 --capsules 20000
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent("""
    import os, sys, time, warnings
    import memframe as mf
    warnings.simplefilter("ignore")
    store = mf.Store.open(sys.argv[1])
    stop, log, tag = sys.argv[2], sys.argv[3], sys.argv[4]
    stamps, errors, n = [], 0, 0
    while not os.path.exists(stop):
        try:
            store.ingest({"content": f"{tag} {n}", "source": "w", "anchor": f"{tag}-{n}",
                          "project_id": "load"})
            stamps.append(time.time())
            if len(stamps) == 3:
                open(log + ".ready", "w").close()
        except Exception:  # noqa: BLE001 - counted: a writer that gave up
            errors += 1
        n += 1
    with open(log, "w") as fh:
        fh.write(" ".join(repr(s) for s in stamps) + "\\n" + str(errors) + "\\n")
""")

#: the operations timed, in order; the last is a control: a loop on the CPU that touches no
#: store, as long as a loaded erasure, so the writers' drop while it spins is what merely
#: sharing the machine's cores costs them (the floor under every other figure)
CONTROL = "cpu alone"
OPERATIONS = ("small commit", "purge", "redact", "compact", "cycle", "vacuum", "digest hook",
              CONTROL)


def _worker(args: argparse.Namespace) -> None:
    """One configuration, in a process whose memframe is the code under test."""
    import warnings

    import memframe as mf
    from memframe.cli import main

    warnings.simplefilter("ignore")
    base = Path(tempfile.mkdtemp(prefix="fair-"))
    path = base / "s"
    store = mf.Store.create(path)
    store.ingest([{"content": f"note {n} " + "w " * 12, "source": "s", "anchor": str(n),
                   "project_id": f"p{n % 7}"} for n in range(args.capsules)])
    store.memory.run_cycle()
    mf.digest(store)
    # one capsule per erasing round (purge and redact, idle and loaded), spread over the store
    victims = iter(range(1, args.capsules + 1, max(1, args.capsules // (4 * args.rounds + 4))))

    def small() -> None:
        store.ingest({"content": f"solo {time.time_ns()}", "source": "s", "anchor": "solo"})

    def setup(op: str) -> None:
        # what folds or merges new rows gets some, idle and loaded alike (under load the
        # writers add theirs on top): an idle hook with nothing to fold is no baseline
        if op in ("compact", "cycle", "digest hook"):
            for _ in range(5):
                small()

    def run(op: str) -> None:
        if op == "small commit":
            small()
        elif op in ("purge", "redact"):
            store.forget(f"cap-{next(victims)}", mode=op)
        elif op == "compact":
            merged.append(sum(store.compact().values()))
        elif op == "cycle":
            store.memory.run_cycle()
        elif op == "vacuum":
            store.vacuum()
        elif op == "digest hook":
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["digest", str(path), "--format", "json"]) == 0
        elif op == CONTROL:
            end = time.perf_counter() + spin[0]
            while time.perf_counter() < end:
                pass

    spin = [0.05]  # the control's length: a loaded erasure's, once one was timed

    attempts = [0]  # link attempts of this process's commits (a retry is one more)
    merged: list[int] = []  # parts each compaction merged (idle rounds first)
    land = mf.Store._land

    def counted(self, *a, **k):  # noqa: ANN001, ANN202
        attempts[0] += 1
        won = land(self, *a, **k)
        linked[0] += bool(won)
        return won

    linked = [0]  # generations this process linked
    links: dict[str, int] = {}  # per operation, over its loaded rounds

    mf.Store._land = counted
    tries: dict[str, list[int]] = {}

    quiet_windows: dict[str, list[tuple[float, float]]] = {}

    def timed(op: str, rounds: int, gap: float = 0.0
              ) -> tuple[list[float], list[tuple[float, float]]]:
        times, windows = [], []
        tries[op] = []
        quiet_windows[op] = []
        for _ in range(rounds):
            setup(op)
            if gap:  # the writers alone just before: the same store, the same moment
                quiet_windows[op].append((time.time(), time.time() + gap))
                time.sleep(gap)
            start = time.time()
            before = attempts[0]
            t0 = time.perf_counter()
            run(op)
            times.append(time.perf_counter() - t0)
            tries[op].append(attempts[0] - before)
            windows.append((start, time.time()))
        return times, windows

    operations = [op for op in OPERATIONS if op == "small commit" or op in args.ops]
    idle = {op: statistics.median(timed(op, args.rounds * (5 if op == "small commit" else 1))
                                  [0]) for op in operations}
    # the hook's floor: the same rounds beside as many processes that only spin on the
    # CPU (no store), what sharing the cores alone costs it
    spun = None
    if "digest hook" in operations:
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(args.writers)]
        time.sleep(0.5)
        spun = statistics.median(timed("digest hook", args.rounds)[0])
        for p in spinners:
            p.kill()
            p.wait()
    stop = base / "stop"
    logs = [base / f"w{i}.log" for i in range(args.writers)]
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(stop),
                                 str(log), f"w{i}"], env=env) for i, log in enumerate(logs)]
    deadline = time.time() + 300
    while not all(Path(f"{log}.ready").exists() for log in logs) and time.time() < deadline:
        time.sleep(0.05)  # every writer is committing (imports take seconds under load)
    time.sleep(args.warmup)
    quiet = (time.time(), time.time() + args.baseline)
    time.sleep(args.baseline)
    loaded, busy, per_op = {}, [], {}
    failures: dict[str, str] = {}
    for op in operations:
        try:
            if op == CONTROL:
                spin[0] = statistics.median(
                    [loaded[e] for e in ("purge", "redact") if loaded.get(e)] or spin)
            before_links = linked[0]
            times, windows = timed(op, args.rounds, args.gap)
            links[op] = linked[0] - before_links
            loaded[op] = statistics.median(times)
            if op != "small commit":
                per_op[op] = windows
            if op not in ("small commit", CONTROL):
                busy.extend(windows)
        except Exception as exc:  # noqa: BLE001 - reported, as the issue's table did
            loaded[op] = None
            failures[op] = f"{type(exc).__name__}: {str(exc)[:120]}"
    stop.write_text("stop")
    for w in writers:
        w.wait(timeout=600)
    # idle again, on the store the writers grew (their parts wait for a compaction)
    after = None
    if "digest hook" in operations:  # (the loaded rounds' link attempts stay the ones shown)
        kept = tries["digest hook"], quiet_windows["digest hook"]
        after = statistics.median(timed("digest hook", args.rounds)[0])
        tries["digest hook"], quiet_windows["digest hook"] = kept
    stamps, errors = [], 0
    for log in logs:
        lines = log.read_text().splitlines()
        stamps += [float(s) for s in lines[0].split()]
        errors += int(lines[1])

    def count(spans: list[tuple[float, float]]) -> int:
        return sum(1 for s in stamps if any(a <= s <= b for a, b in spans))

    def rate(spans: list[tuple[float, float]]) -> float:
        total = sum(b - a for a, b in spans)
        n = sum(1 for s in stamps if any(a <= s <= b for a, b in spans))
        return n / total if total else float("nan")

    shutil.rmtree(base, ignore_errors=True)
    print(json.dumps({"idle": idle, "loaded": loaded, "failures": failures, "tries": tries,
                      "quiet_rate": rate([quiet]), "busy_rate": rate(busy),
                      "op_rates": {op: rate(w) for op, w in per_op.items()},
                      # the whole stretch of an operation's rounds, the gaps between them
                      # included (its setup, Python): a commit that waited for an operation
                      # lands just after its window, and counts here
                      "op_span_rates": {op: rate([(w[0][0], w[-1][1])])
                                        for op, w in per_op.items() if w},
                      "op_duty": {op: sum(b - a for a, b in w) / (w[-1][1] - w[0][0])
                                  for op, w in per_op.items() if w and w[-1][1] > w[0][0]},
                      "op_quiet_rates": {op: rate(quiet_windows[op]) for op in per_op},
                      "op_counts": {op: count(w) for op, w in per_op.items()},
                      # the small commits the writers did not make, per generation the
                      # operation linked: how much each of its commits costs them (the
                      # throughput drop is this times how often it commits)
                      "op_cost": {op: (rate([quiet]) - rate(w)) * sum(b - a for a, b in w)
                                  / links[op] for op, w in per_op.items() if links.get(op)},
                      "quiet_beside": rate([w for op in per_op for w in quiet_windows[op]]),
                      "merged": merged, "hook_spun": spun, "hook_idle_after": after,
                      "writer_errors": errors, "commits": len(stamps)}))


def _measure(code: Path, writers: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--writers", str(writers),
           "--capsules", str(args.capsules), "--rounds", str(args.rounds),
           "--warmup", str(args.warmup), "--baseline", str(args.baseline),
           "--gap", str(args.gap), "--ops", ",".join(args.ops)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    if args.threads:  # every process of the run (the writers inherit it)
        env["POLARS_MAX_THREADS"] = str(args.threads)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--capsules", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--baseline", type=float, default=4.0)
    parser.add_argument("--gap", type=float, default=0.0,
                        help="seconds the writers commit alone before each loaded round: "
                             "their rate beside each operation, at the same moment of the "
                             "run (the store grows as they commit). Their rows also add to "
                             "the work of what folds or lists them (the cycle, the hook, "
                             "compact, vacuum): time those with no gap, and the erasures' "
                             "throughput with one (--ops purge,redact,\"cpu alone\" --gap 0.25)")
    parser.add_argument("--ops", default=",".join(OPERATIONS[1:]),
                        help="the operations to time, comma-separated (default: all): "
                             "fewer operations, more rounds, a tighter figure for each")
    parser.add_argument("--against", type=Path, help="a checkout of the code before")
    parser.add_argument("--threads", type=int, default=0,
                        help="Polars threads per process (default: every core); with one "
                             "writer on two cores, 1 gives each process its own core, so "
                             "the throughput figure measures the commit protocol, not CPU "
                             "sharing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.ops = [op.strip() for op in args.ops.split(",")]
    unknown = sorted(set(args.ops) - set(OPERATIONS))
    if unknown:
        parser.error(f"unknown operation(s) {', '.join(unknown)}; choose from "
                     f"{', '.join(OPERATIONS)}")
    if args.worker:
        args.writers = args.writers[0]
        _worker(args)
        return
    codes = [("after", ROOT)] + ([("before", args.against)] if args.against else [])
    load = os.getloadavg()[0]
    threads = f", {args.threads} Polars thread(s) per process" if args.threads else ""
    print(f"{args.capsules:,} capsules, {args.rounds} rounds, load average {load:.1f} on "
          f"{os.cpu_count()} cores{threads}; times are medians (seconds)")
    for writers in args.writers:
        for label, code in codes:
            r = _measure(code, writers, args)
            small = r["idle"]["small commit"]
            small_loaded = r["loaded"]["small commit"] or small
            print(f"\n{label}: {writers} writer processes committing single rows "
                  f"({r['commits']} commits, {r['writer_errors']} gave up)")
            print(f"  {'operation':<14}{'idle':>9}{'loaded':>9}{'ratio':>8}"
                  f"{'2x idle + 1 small (idle/loaded)':>36}  link attempts under load")
            for op in [op for op in OPERATIONS if op in r["idle"] and op != CONTROL]:
                idle, loaded = r["idle"][op], r["loaded"][op]
                if loaded is None:
                    print(f"  {op:<14}{idle:>9.3f}{'failed':>9}   {r['failures'][op]}")
                    continue
                target, target_loaded = 2 * idle + small, 2 * idle + small_loaded
                mark = ("ok" if loaded <= target else "ok vs loaded small"
                        if loaded <= target_loaded else "MISSED")
                print(f"  {op:<14}{idle:>9.3f}{loaded:>9.3f}{loaded / idle:>7.1f}x"
                      f"{target:>14.3f} / {target_loaded:<7.3f} {mark:<19}"
                      f"{r['tries'][op]}")
            drop = 1 - r["busy_rate"] / r["quiet_rate"] if r["quiet_rate"] else float("nan")
            print(f"  small commits/s: {r['quiet_rate']:.1f} with no operation running, "
                  f"{r['busy_rate']:.1f} while operations run (drop {drop:.0%}; target <= 20%)")
            if args.gap and r.get("op_quiet_rates"):
                beside = r["quiet_beside"]
                drop = 1 - r["busy_rate"] / beside if beside else float("nan")
                print(f"  beside each operation ({args.gap:g} s before each loaded round): "
                      f"{beside:.1f} alone, {r['busy_rate']:.1f} while operations run "
                      f"(drop {drop:.0%})")
                print("  per operation, alone / while it runs (commits counted in its "
                      "windows): " + ", ".join(
                          f"{op} {r['op_quiet_rates'][op]:.1f} / {rate:.1f} "
                          f"({r['op_counts'][op]})" for op, rate in r["op_rates"].items()))
            else:
                print("  while each runs: " + ", ".join(
                    f"{op} {rate:.1f}" for op, rate in r.get("op_rates", {}).items()))
            if r.get("op_cost"):
                print("  small commits the writers did not make, per generation each "
                      "operation linked: " + ", ".join(
                          f"{op} {cost:.2f}" for op, cost in r["op_cost"].items()))
            if r.get("op_span_rates"):
                print("  over each operation's rounds, gaps included (share of the time it "
                      "ran): " + ", ".join(
                          f"{op} {rate:.1f} ({r['op_duty'].get(op, float('nan')):.0%})"
                          for op, rate in r["op_span_rates"].items()))
            if CONTROL in r.get("op_rates", {}) and args.gap:
                alone = r["op_quiet_rates"][CONTROL]
                print(f"  control, a CPU loop of {r['loaded'][CONTROL]:.3f} s touching no "
                      f"store: {alone:.1f} alone, {r['op_rates'][CONTROL]:.1f} while it "
                      f"spins (drop {1 - r['op_rates'][CONTROL] / alone:.0%}): what sharing "
                      f"the cores alone costs the writers")
            if r.get("hook_spun"):
                idle = r["idle"]["digest hook"]
                print(f"  digest hook beside {writers} process(es) that only spin on the CPU "
                      f"(no store): {r['hook_spun']:.3f} ({r['hook_spun'] / idle:.1f}x idle): "
                      f"what sharing the cores alone costs it")
                print(f"  digest hook idle again after the load, on the store the writers "
                      f"grew: {r['hook_idle_after']:.3f} ({r['hook_idle_after'] / idle:.1f}x)")
            if r.get("merged"):  # under load a compaction also merges the writers' parts
                print(f"  parts merged per compaction, idle then loaded: {r['merged']}")


if __name__ == "__main__":
    main()
