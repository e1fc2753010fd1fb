"""What the staged fence, pins and open efforts cost the digest, measured side by side.

One synthetic store is read once into memory; the digest is then computed with
``digest_tables`` (no I/O) over three variants of the same tables, in one run:

* ``plain``: the store as synthesised (no review or pin rows);
* ``curated``: the same plus review rows (``--staged`` of the capsules proposed, a third of
  those ratified again), pin rows (``--pinned`` of the capsules) and, for 1 in 200
  capsules, an ``epic`` label with up to 20 ``part_of`` members and a few ``blocks`` edges;
* ``curated, fenced``: the curated tables under one project prefix.

It prints each variant's median time over ``--repeat`` runs and its ratio to ``plain``,
then, for ``plain`` and ``curated``, the median time of each step this feature added
(the capsule-state fold, which carries staged and pinned, the staged and pinned sections, the open
efforts board) and their share of the digest. On a shared machine the per-step shares
are the steadier figure: they are measured in the same process, back to back.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_staged.py                   # 100k capsules
    PYTHONPATH=. flock /tmp/memframe-bench.lock python benchmarks/bench_staged.py --capsules 1M
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from memframe import schema as S
from memframe import synth
from memframe.digest import digest_tables
from memframe.digest.efforts import open_efforts_sections
from memframe.digest.reads import reference_state, tables_source
from memframe.digest.scope import fence, population
from memframe.digest.staged import pinned_sections, staged_section
from memframe.graph import blocks_projection

NOW = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _events(table: str, frame: pl.DataFrame, start_seq: int) -> pl.DataFrame:
    frame = frame.with_columns(
        pl.int_range(start_seq, start_seq + frame.height, dtype=pl.Int64).alias("seq"),
        pl.lit(NOW - dt.timedelta(days=20)).cast(S.TIMESTAMP).alias("at"),
    )
    return frame.select(S.table_schema(table).names())


def curate(tables: dict[str, pl.DataFrame], staged: float, pinned: float) -> dict:
    """The tables plus reviews, pins, epics with members and blocks edges."""
    ids = tables["capsules"].get_column("id")
    n = ids.len()
    seq = int(max(frame.get_column("seq").max() or 0 for frame in tables.values())) + 1
    every = max(1, round(1 / staged))
    proposed = ids.gather_every(every)
    reviews = pl.DataFrame({"capsule_id": proposed, "verdict": "proposed", "actor": "bench"})
    reviews = reviews.with_columns(pl.lit(None, dtype=pl.String).alias("reason"))
    ratified = reviews.gather_every(3).with_columns(pl.lit("ratified").alias("verdict"))
    reviews = _events("reviews", pl.concat([reviews, ratified]), seq)
    seq += reviews.height
    pins = pl.DataFrame({"capsule_id": ids.gather_every(max(1, round(1 / pinned)), offset=1),
                         "pinned": True, "actor": "bench"})
    pins = pins.with_columns(pl.lit(None, dtype=pl.String).alias("reason"))
    pins = _events("pins", pins, seq)
    seq += pins.height
    epics = ids.gather_every(200, offset=2)
    labels = _events("classifications", pl.DataFrame(
        {"capsule_id": epics, "kind": "epic", "scope": "project"}), seq)
    seq += labels.height
    positions = pl.int_range(0, epics.len() * 20, eager=True)
    members = pl.DataFrame({
        "kind": "part_of",
        "from_id": ids.gather((positions * 7919 + 13) % n),
        "to_id": epics.gather(positions // 20),
        "origin": "manual",
    })
    blocks = pl.DataFrame({
        "kind": "blocks",
        "from_id": members.get_column("from_id").gather_every(5),
        "to_id": members.get_column("from_id").gather_every(5, offset=1),
        "origin": "manual",
    }).filter(pl.col("from_id") != pl.col("to_id"))
    edges = pl.concat([members, blocks]).unique(["kind", "from_id", "to_id"], maintain_order=True)
    edges = _events("relations", edges, seq)
    out = dict(tables)
    out["reviews"], out["pins"] = reviews, pins
    out["classifications"] = pl.concat([tables["classifications"], labels])
    out["relations"] = pl.concat([tables["relations"], edges])
    return out


def timed(tables: dict, repeat: int, **kwargs) -> tuple[float, dict]:
    runs, body = [], {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        body = digest_tables(tables, now=NOW, **kwargs).to_dict()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), body


def _median(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def step_costs(tables: dict, repeat: int) -> dict[str, float]:
    """Median seconds of the digest and of each step the staged/pinned/efforts work adds."""
    source = tables_source(tables, NOW)
    state = source.state()
    scoped = fence(population(state), None)
    alive = state.filter(pl.col("status") != "tombstoned")
    tombstoned = source.tables["forgets"].get_column("capsule_id").unique()
    projection = blocks_projection(source.tables["relations"], tombstoned)
    reviews = source.tables["reviews"]
    return {
        "digest": _median(lambda: digest_tables(tables, now=NOW), repeat),
        "state": _median(lambda: reference_state(source.tables), repeat),
        "staged": _median(lambda: staged_section(reviews, NOW), repeat),
        "pinned": _median(lambda: pinned_sections(scoped, [""], NOW), repeat),
        "open_efforts": _median(lambda: open_efforts_sections(
            scoped, alive, source.tables["relations"], projection, [""], 10, NOW), repeat),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capsules", default="100k")
    parser.add_argument("--staged", type=float, default=0.01)
    parser.add_argument("--pinned", type=float, default=0.01)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    capsules = parse_size(args.capsules)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        store = synth.synthesize(Path(tmp) / "s", capsules=capsules, seed=0, progress=False)
        tables = {name: store.table(name).collect() for name in S.CANONICAL_TABLES}
        print(f"synthesised {capsules:,} capsules in {time.perf_counter() - t0:.1f}s",
              file=sys.stderr)
    curated = curate(tables, args.staged, args.pinned)
    prefix = tables["capsules"].get_column("project_id").mode().sort()[0].split("/")[0]
    plain_s, _ = timed(tables, args.repeat)
    curated_s, body = timed(curated, args.repeat)
    fenced_s, fenced = timed(curated, args.repeat, project_prefix=prefix)
    print(f"capsules {capsules:,}; reviews {curated['reviews'].height:,}, pins "
          f"{curated['pins'].height:,}, open efforts {body.get('open_efforts_total', 0):,} "
          f"(fenced to {prefix!r}: {fenced.get('open_efforts_total', 0):,}); staged "
          f"{body['staged']}")
    print(f"{'variant':<18}{'median s':>10}{'x plain':>10}")
    for name, seconds in (("plain", plain_s), ("curated", curated_s),
                          ("curated, fenced", fenced_s)):
        print(f"{name:<18}{seconds:>10.3f}{seconds / plain_s:>10.2f}")
    print(f"{'steps (median s)':<18}" + "".join(
        f"{k:>13}" for k in ("digest", "state", "staged", "pinned", "open_efforts", "share")))
    for name, frames in (("plain", tables), ("curated", curated)):
        cost = step_costs(frames, args.repeat)
        added = sum(v for k, v in cost.items() if k != "digest")
        print(f"{name:<18}" + "".join(f"{v:>13.3f}" for v in cost.values())
              + f"{added / cost['digest']:>13.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
