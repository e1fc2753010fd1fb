"""Writers racing on one store: random verbs from several processes, then the invariants.

Each of ``--writers`` processes runs random verbs against one store for ``--seconds``:
ingests of new text (1-12 rows), ingests of text other writers or the seed may hold
(deduplicated, or refused when that capsule was forgotten), purge, redact, tombstone,
recall, relate, compact, the cycle (with its merge of the newest small parts brought down
to ``--auto-compact-parts`` of a tier) and vacuum at retention 0; a reader runs
the digest and a store diff beside them. Races of every kind follow: rebases, renumbered
erasures and ingests, fairness tickets, files vacuumed under readers. ``--part-rows``
forces a small capsule partition bound, so erasures split and compactions pack partitions
all the time (the seed's partition is written larger, as an older version would have).

Then it checks, and exits 1 if any fails:

- no writer or reader met an error other than the refusals the verbs document;
- the warm digest equals ``verify="full"`` (after one more cycle) and the audit chain
  verifies;
- every ``seq`` is unique in every table, and the canonical rows number the ``seq``
  counter; capsule ids run 1..n with the counter, and no content hash is stored twice;
- after a vacuum at retention 0, no Parquet file is left that the newest generation does
  not name; every capsule partition is within the bound; a compaction changes no state
  and a second one merges nothing.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/stress_commits.py --seconds 60 --part-rows 7
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r'''
import json, random, sys, time, warnings
sys.path.insert(0, sys.argv[5])
import memframe as mf
from memframe.store import log, tables
from memframe.store import store as store_module
tables.ERASABLE_PART_ROWS = int(sys.argv[4])
store_module.AUTO_COMPACT_PARTS = int(sys.argv[6])
warnings.simplefilter("ignore")
path, seed, until = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(seed)
store = mf.Store.open(path)
rebased = {"ingest": 0, "other": 0}  # links moved past the winners instead of staged again
real_rebase = log.Log.rebase

def rebase(self, entry, *a, **k):
    moved = real_rebase(self, entry, *a, **k)
    if moved is not None:
        rebased["ingest" if entry["operation"] == "ingest" else "other"] += 1
    return moved

log.Log.rebase = rebase
#: refusals the verbs document for inputs a random history makes (an id forgotten or not
#: yet issued, an edge already there, text of a forgotten capsule)
REFUSED = {"UnknownCapsuleError", "InvalidInputError", "DuplicateRelationError",
           "TombstonedContentError"}
VERBS = ["ingest", "shared", "purge", "redact", "tombstone", "recall", "relate", "compact",
         "cycle", "vacuum"]
done, errors, n, answers = {}, [], 0, []
while time.time() < until:
    n += 1
    verb = rng.choices(VERBS, [30, 10, 5, 5, 5, 15, 10, 4, 6, 3])[0]
    top = max(1, int(store.counters.get("capsules", 0) or 1))
    cap = f"cap-{rng.randint(1, top)}"
    try:
        if verb in ("ingest", "shared"):
            texts = ([f"w{seed} {n} {k}" for k in range(rng.choice([1, 1, 1, 3, 12]))]
                     if verb == "ingest" else
                     [rng.choice([f"shared {rng.randint(0, 40)}", f"seed {rng.randint(0, 199)}",
                                  f"w{seed} {n} new {k}"]) for k in range(rng.randint(1, 3))])
            ids = store.ingest([{"content": t, "source": "s", "anchor": f"{seed}-{n}",
                                 "project_id": rng.choice(["p", "q"])} for t in texts])
            answers.extend(zip(texts, ids))  # checked at the end: the id holds the text
        elif verb in ("purge", "redact", "tombstone"):
            store.forget(cap, mode=verb)
        elif verb == "recall":
            store.record_recall([cap])
        elif verb == "relate":
            store.relate(cap, f"cap-{rng.randint(1, top)}",
                         rng.choice(["blocks", "related", "supersedes"]))
        elif verb == "compact":
            store.compact()
        elif verb == "cycle":
            store.memory.run_cycle()
        else:
            store.vacuum(retention_hours=0, allow_short_retention=True)
        done[verb] = done.get(verb, 0) + 1
    except mf.MemframeError as exc:
        if type(exc).__name__ not in REFUSED:
            errors.append(f"{verb}: {type(exc).__name__}: {str(exc)[:200]}")
    except Exception as exc:  # noqa: BLE001 - every raw error is a finding
        errors.append(f"{verb}: raw {type(exc).__name__}: {str(exc)[:200]}")
print(json.dumps({"done": done, "rebased": rebased, "errors": errors[:10],
                  "n_errors": len(errors)}))
print(json.dumps(answers))
'''

READER = r'''
import json, sys, time, warnings
sys.path.insert(0, sys.argv[3])
import memframe as mf
warnings.simplefilter("ignore")
path, until = sys.argv[1], float(sys.argv[2])
reads, errors = 0, []
while time.time() < until:
    op = "open"
    try:
        store = mf.Store.open(path)
        op = "digest"
        mf.digest(store)
        if store.generation > 5:
            op = "diff"
            store.diff(store.generation - 5)
        reads += 1
    except mf.errors.GenerationNotFoundError:
        pass  # a diff's first generation vacuumed at retention 0: refused, as documented
    except Exception as exc:  # noqa: BLE001 - every other error is a finding
        errors.append(f"{op}: {type(exc).__name__}: {str(exc)[:300]}")
print(json.dumps({"reads": reads, "errors": errors[:5], "n_errors": len(errors)}))
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--part-rows", type=int, default=7,
                        help="the capsule partition bound the writers use (small: every "
                             "erasure splits, every compaction packs)")
    parser.add_argument("--auto-compact-parts", type=int, default=3,
                        help="the newest small parts of a size tier that make the cycle "
                             "merge them first (16 by default; small: it merges most times)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import polars as pl

    import memframe as mf
    from memframe.schema import CANONICAL_TABLES
    from memframe.store import tables
    from memframe.text import sha256_hex

    path = Path(tempfile.mkdtemp(prefix="memframe-stress-")) / "s"
    store = mf.Store.create(path)
    # the seed's partition is written at the default bound: larger, as an older version's
    store.ingest([{"content": f"seed {i}", "source": "s", "anchor": str(i)} for i in range(200)])
    tables.ERASABLE_PART_ROWS = args.part_rows
    until = time.time() + args.seconds
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), str(i), str(until),
                               str(args.part_rows), str(ROOT), str(args.auto_compact_parts)],
                              stdout=subprocess.PIPE,
                              text=True) for i in range(args.writers)]
    procs.append(subprocess.Popen([sys.executable, "-c", READER, str(path), str(until),
                                   str(ROOT)], stdout=subprocess.PIPE, text=True))
    failures: list[str] = []
    answers: list[tuple[str, str]] = []  # (text, the id an ingest returned for it)
    for proc in procs[:-1]:
        out, _ = proc.communicate(timeout=args.seconds + 600)
        lines = out.strip().splitlines()
        answers += [tuple(pair) for pair in json.loads(lines.pop())] if lines else []
        print("\n".join(lines))
        found = json.loads(lines[-1])
        if proc.returncode or found["n_errors"]:
            failures.append(f"a process met errors: {found['errors'][:3]}")
    for proc in procs[-1:]:
        out, _ = proc.communicate(timeout=args.seconds + 600)
        print(out.strip())
        found = json.loads(out.strip().splitlines()[-1])
        if proc.returncode or found["n_errors"]:
            failures.append(f"a process met errors: {found['errors'][:3]}")

    def check(ok: bool, what: str) -> None:
        print(f"  {'ok    ' if ok else 'FAILED'} {what}")
        if not ok:
            failures.append(what)

    store = mf.Store.open(path)
    store.memory.run_cycle()
    now = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    warm = mf.digest(store, now=now)
    ops = store.history().group_by("operation").len().sort("operation")
    print(f"generation {store.generation}; "
          + ", ".join(f"{op} {n}" for op, n in ops.iter_rows()))
    check(warm.to_json() == mf.digest(store, verify="full", now=now).to_json(),
          "the warm digest equals verify='full'")
    check(json.loads(warm.to_json())["journal"]["chain"] == "ok", "the audit chain verifies")
    rows = 0
    for table in CANONICAL_TABLES:
        frame = store.table(table).collect()
        rows += frame.height
        if "seq" in frame.columns and frame.height:
            check(bool(frame["seq"].is_unique().all()), f"every seq of {table} is unique")
    check(rows == store.counters.get("seq"), f"{rows} canonical rows, seq counter "
                                              f"{store.counters.get('seq')}")
    caps = store.table("capsules").collect()
    numbers = sorted(int(i[4:]) for i in caps["id"])
    check(numbers == list(range(1, caps.height + 1)) == list(
        range(1, int(store.counters["capsules"]) + 1)), "capsule ids run 1..n with the counter")
    check(bool(caps["source_hash"].is_unique().all()), "no content hash is stored twice")
    # every id an ingest returned names the capsule holding its text (its hash: an erasure
    # keeps it), whether the ingest staged once, moved past winners or staged again
    said = pl.DataFrame(answers, schema={"text": pl.String, "id": pl.String}, orient="row")
    wrong = said.with_columns(sha256_hex(said["text"]).alias("h")).join(
        caps.select("id", "source_hash"), on="id", how="left").filter(
        pl.col("source_hash").is_null() | (pl.col("source_hash") != pl.col("h")))
    check(said.height > 0 and wrong.height == 0,
          f"each of {said.height} ids the ingests returned holds its text "
          f"({wrong.head(3).rows()})")
    store.vacuum(retention_hours=0, allow_short_retention=True)
    named = {p.path for t in store.snapshot.tables for p in store.partitions(t)}
    on_disk = {str(p.relative_to(path)) for p in path.rglob("*.parquet")}
    check(not on_disk - named, f"no orphan file after a vacuum ({sorted(on_disk - named)[:3]})")
    sizes = [p.rows for p in store.pinned().partitions("capsules")]
    check(max(sizes) <= args.part_rows, f"{len(sizes)} capsule partitions within the bound "
                                        f"(largest {max(sizes)})")
    before = store.capsule_state().collect()
    store.compact()
    check(store.capsule_state().collect().equals(before), "a compaction changes no state")
    check(store.compact("capsules") == {}, "a second compaction merges nothing")
    print("FAILED: " + "; ".join(failures) if failures else "all invariants hold")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
