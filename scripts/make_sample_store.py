"""Regenerate the bundled sample store, ``data/sample-store``.

The store is `memframe.synth.synthesize` with the sample's capsule count and seed, its
projections folded, compacted and vacuumed so it is a few small files; then a few later
generations (a handoff, new capsules, a recall, a forget, each followed by a cycle), over
more than a day, so time travel has something to show and `--as-of` reaches the instants
the digest shows of them. It ends with a cycle: the sample ships with current
derived state, so `memframe digest` on it is warm (tests/test_sample.py checks it; when
the derived-state format changes, this one run brings the sample up to date). Run from
the repository root:

    python scripts/make_sample_store.py [--out data/sample-store]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# the sample records the identity of the code that wrote its derived state: always this
# checkout's code, whatever memframe the interpreter would import otherwise
sys.path.insert(0, str(REPO))

from memframe import Store, synth  # noqa: E402
from memframe.store import fingerprint  # noqa: E402


def make(out: Path, *, capsules: int = synth.SAMPLE_CAPSULES, seed: int = synth.SAMPLE_SEED) -> Path:
    """Write the sample store to ``out`` (replacing what is there); return ``out``.

    Examples:
        >>> import tempfile, pathlib
        >>> out = make(pathlib.Path(tempfile.mkdtemp()) / "sample", capsules=300)
        >>> (out / "memframe.json").is_file()
        True
    """
    out = Path(out)
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        staging = Path(tmp) / "sample-store"
        synth.synthesize(staging, capsules=capsules, seed=seed)
        # every later commit on the timeline's clock (never the machine's: no future, and
        # the same instants on every run)
        span = synth.SynthParams.for_capsules(capsules).span_days
        clock = _Clock(synth.DEFAULT_CLOCK_START + dt.timedelta(days=span))
        store = Store.open(staging, clock=clock)
        with _identities_by_bytes():
            store.memory.run_cycle()  # the projections, so `memframe sessions` has rows
            store.compact()
            store.vacuum(retention_hours=0, allow_short_retention=True)
            _later_generations(store, clock)
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(out))
    return out


@contextlib.contextmanager
def _identities_by_bytes() -> Iterator[None]:
    """Every file too young to trust by its identity (`fingerprint.racy_window`)."""
    trusted_after = fingerprint.RACY_NS, fingerprint.RACY_FINE_NS
    fingerprint.RACY_NS = fingerprint.RACY_FINE_NS = 10**19
    try:
        yield
    finally:
        fingerprint.RACY_NS, fingerprint.RACY_FINE_NS = trusted_after


class _Clock:
    """Deterministic instants after the synthetic timeline: ``step`` (a minute) per
    reading."""

    def __init__(self, start: dt.datetime):
        self.now = start
        self.step = dt.timedelta(minutes=1)

    def __call__(self) -> dt.datetime:
        self.now += self.step
        return self.now


#: the later verbs are this far apart (their cycles a minute after each), so that the
#: later generations span more than a day: `--as-of` any instant from the compaction on,
#: the created_at of every capsule they wrote included, reads
LATER_STEP = dt.timedelta(hours=7)


def _later_generations(store: Store, clock: _Clock) -> None:
    """A few small commits after the compaction, hours apart (each readable with
    ``--as-of``), the projections' cycle after each, so the sample ends with current
    derived state."""
    clock.now += LATER_STEP
    sid = store.session_start("team/api")
    store.memory.run_cycle()
    clock.now += LATER_STEP
    store.session_finish(sid, handoff="next: ship the retrieval schema fix, then the backfill")
    store.memory.run_cycle()
    clock.now += LATER_STEP
    new = store.ingest([
        {"content": "Decided to keep the retrieval schema fix behind a flag for one release",
         "source": "chat", "anchor": "late-1", "project_id": "team/api",
         "conversation_id": "late-review"},
        {"content": "Saw the backfill job finish on staging in 41 minutes",
         "source": "chat", "anchor": "late-2", "project_id": "ops/infra",
         "conversation_id": "late-review"},
    ])
    store.record_recall(new[:1])
    store.memory.run_cycle()
    clock.now += LATER_STEP
    store.forget(new[1], reason="superseded by the production run")
    # The journal checkpoint records a part by its file identity (inode, times) once the
    # file is old enough (fingerprint.racy_window), else by its bytes (sha256). A
    # copy, a checkout or a wheel install keeps the bytes but not the identity, so the
    # cycle after a copy would record the parts again. The whole build (`make`) therefore
    # treats every file as too young to trust by identity, whatever the machine's speed:
    # its cycles record each part by its bytes, and the sample stays warm wherever it is
    # copied.
    store.memory.run_cycle()
    if not _copy_is_warm(Path(store.path)):
        raise SystemExit("a copy of the sample is not warm: its last cycle left work")


def _copy_is_warm(path: Path) -> bool:
    """Whether a cycle on a copy of the store at ``path`` would write nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(path, copy)
        return Store.open(copy).memory.run_cycle().generation is None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "data" / "sample-store")
    parser.add_argument("--capsules", type=int, default=synth.SAMPLE_CAPSULES)
    parser.add_argument("--seed", type=int, default=synth.SAMPLE_SEED)
    args = parser.parse_args(argv)
    out = make(args.out, capsules=args.capsules, seed=args.seed)
    files = [p for p in out.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    print(f"{out}: {len(files)} files, {size / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
