"""Time ``mf.importers.import_nmemory`` on a synthetic nMEMORY SQLite file.

Builds an nMEMORY v20 file (capsules with Capsule v1 JSON, one audited ingest per
capsule chained per reference 4.14, usage on a third of them, a relation per ten,
classifications, tombstones on 1 %), then, each in a fresh child process so the peak
memory is the import's own:

* ``full``: import the file into a new store;
* ``incremental``: grow the file by 1 % (new capsules, audit rows, usage bumps, a few
  tombstones of imported capsules) and import again into the same store.

Prints wall and CPU seconds (the machine may be shared: CPU time is the steadier
figure), rows/s (source rows read per wall second) and peak RSS (``resource.getrusage``).

Usage::

    python3 benchmarks/bench_import.py --quick          # 20k capsules
    python3 benchmarks/bench_import.py                  # 1M capsules (default)
    python3 benchmarks/bench_import.py --capsules 200k --keep /tmp/nm
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "importers"))

from nmemory_fixture import ACTOR, DDL  # noqa: E402  (the engine's schema v20 layout, as the tests build it)

WORDS = ("store memory capsule relation digest session recall parquet polars arrow sqlite "
         "journal chain audit tier epic task fact handoff thread").split()


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def stamp(second: int) -> str:
    """RFC3339 text of T0 + ``second`` seconds, with a nanosecond fraction on some rows."""
    day, rest = divmod(second, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    frac = f".{(second * 7919) % 10**9:09d}".rstrip("0") if second % 3 == 0 else ""
    # months of 28 days, years of 12 of them: a file past 29M capsules runs into 2027
    year, day = divmod(day, 12 * 28)
    return (f"{2026 + year}-{1 + day // 28:02d}-{1 + day % 28:02d}T{h:02d}:{m:02d}:{s:02d}"
            f"{frac or ''}Z")


def add_capsules(con: sqlite3.Connection, start: int, count: int) -> None:
    """Append capsules start+1 .. start+count, each with its audited ingest."""
    prev = con.execute("SELECT seq, chained_hash FROM audit_events ORDER BY seq DESC "
                       "LIMIT 1").fetchone()
    audit_seq, chain = (prev[0], prev[1]) if prev else (0, "")
    caps, audit = [], []
    for n in range(start + 1, start + count + 1):
        at = stamp(n)
        words = " ".join(WORDS[(n * k) % len(WORDS)] for k in range(1, 9))
        content = f"note {n}: {words}" + ("\nmore" if n % 5 == 0 else "")
        h = hashlib.sha256(content.encode()).hexdigest()
        project = f"proj-{n % 7}/area-{n % 3}"
        cap = json.dumps(
            {"content": content,
             "provenance": {"source": "note", "anchor": f"a{n}", "source_hash": h},
             "confidence": 0.6,
             "freshness": {"valid_from": at, "valid_to": None},
             "scope": {"project_id": project},
             "authority_class": "agent-inferred",
             "instruction_taint": False},
            separators=(",", ":"))
        caps.append((n, f"cap-{n}", cap, at, h, project, "agent-inferred", at,
                     f"sess-{1 + n // 1000}"))
        audit_seq += 1
        line = json.dumps({"seq": audit_seq, "at": at, "actor": ACTOR, "action": "memory_ingest",
                           "subject": f"cap-{n}", "reason": None}, separators=(",", ":"))
        chain = hashlib.sha256((chain + line).encode()).hexdigest()
        audit.append((audit_seq, at, ACTOR, "memory_ingest", f"cap-{n}", None, chain))
    con.executemany("INSERT INTO capsules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", caps)
    con.executemany("INSERT INTO audit_events VALUES (?, ?, ?, ?, ?, ?, ?)", audit)
    con.executemany("INSERT INTO relations VALUES ('derived_from', ?, ?, ?, 'manual')",
                    [(f"cap-{n}", f"cap-{n - 1}", stamp(n)) for n in range(start + 1,
                                                                          start + count + 1)
                     if n % 10 == 0])
    con.executemany("INSERT INTO classifications VALUES (?, 'fact', 'project', ?)",
                    [(f"cap-{n}", stamp(n)) for n in range(start + 1, start + count + 1)
                     if n % 4 == 0])
    con.executemany("INSERT INTO sessions VALUES (?, ?, NULL, NULL) ON CONFLICT DO NOTHING",
                    [(f"sess-{1 + n // 1000}", stamp(n)) for n in range(start + 1,
                                                                      start + count + 1)])


def recall(con: sqlite3.Connection, ids: range, at: str) -> None:
    con.executemany(
        "INSERT INTO usage VALUES (?, 1, ?) ON CONFLICT (capsule_id) DO UPDATE SET "
        "recall_count = recall_count + 1, last_recalled_at = excluded.last_recalled_at",
        [(f"cap-{n}", at) for n in ids])


def forget(con: sqlite3.Connection, ids: list[int], second: int) -> None:
    prev = con.execute("SELECT seq, chained_hash FROM audit_events ORDER BY seq DESC "
                       "LIMIT 1").fetchone()
    audit_seq, chain = prev
    for n in ids:
        at = stamp(second)
        con.execute("INSERT INTO tombstones (capsule_id, mode, content_hmac, at, reason) "
                    "VALUES (?, 'purged', 'hmac-sha256:00', ?, 'bench')", (f"cap-{n}", at))
        con.execute("UPDATE capsules SET canonical_json = NULL WHERE seq = ?", (n,))
        audit_seq += 1
        line = json.dumps({"seq": audit_seq, "at": at, "actor": ACTOR, "action": "memory_forget",
                           "subject": f"cap-{n}", "reason": "bench"}, separators=(",", ":"))
        chain = hashlib.sha256((chain + line).encode()).hexdigest()
        con.execute("INSERT INTO audit_events VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (audit_seq, at, ACTOR, "memory_forget", f"cap-{n}", "bench", chain))


def build(path: Path, n: int) -> None:
    con = sqlite3.connect(path)
    con.executescript(DDL)
    step = 100_000
    for start in range(0, n, step):
        add_capsules(con, start, min(step, n - start))
        con.commit()
    recall(con, range(1, n + 1, 3), stamp(n + 10))
    forget(con, list(range(7, n + 1, 100)), n + 20)
    con.commit()
    con.close()


def grow(path: Path, n: int) -> None:
    con = sqlite3.connect(path)
    extra = max(1, n // 100)
    add_capsules(con, n, extra)
    recall(con, range(1, n + extra + 1, 97), stamp(n + extra + 30))
    forget(con, list(range(11, n + 1, n // 10)), n + extra + 40)
    con.commit()
    con.close()


def child(db: str, store: str) -> None:
    """Run one import in this process and print its figures as JSON."""
    import memframe as mf

    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    report = mf.importers.import_nmemory(db, store, progress=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # VmHWM: ru_maxrss keeps the parent's peak across fork + exec
    with open("/proc/self/status", encoding="ascii") as fh:
        peak_mib = next(int(line.split()[1]) for line in fh
                        if line.startswith("VmHWM:")) / 1024
    print(json.dumps({"mode": report.mode, "seconds": seconds, "cpu": cpu,
                      "read": sum(report.read.values()), "written": report.rows_written,
                      "capsules_read": report.read["capsules"], "erased": report.erased,
                      "peak_mib": peak_mib}))


def run(db: Path, store: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(db), str(store)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capsules", default="1M", help="capsules in the file (e.g. 200k, 1M)")
    parser.add_argument("--quick", action="store_true", help="20k capsules")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep the files")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    n = 20_000 if args.quick else parse_size(args.capsules)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-import-"))
    work.mkdir(parents=True, exist_ok=True)
    db, store = work / "memory.db", work / "store"
    if db.exists() or store.exists():
        raise SystemExit(f"{work} already holds memory.db or store; pick an empty folder")
    t = time.perf_counter()
    build(db, n)
    print(f"built {n:,} capsules in {time.perf_counter() - t:.1f}s "
          f"({db.stat().st_size / 2**20:,.0f} MiB)")
    for label in ("full", "incremental"):
        if label == "incremental":
            grow(db, n)
        r = run(db, store)
        print(f"{label:<12} {r['seconds']:7.2f}s wall {r['cpu']:7.2f}s cpu  read {r['read']:>10,} rows "
              f"({r['read'] / r['seconds']:>10,.0f} rows/s; capsules {r['capsules_read']:,})  "
              f"wrote {r['written']:>10,}  erased {r['erased']}  peak {r['peak_mib']:,.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
