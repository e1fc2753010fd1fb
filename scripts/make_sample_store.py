"""Regenerate the bundled sample store, ``data/sample-store``.

The store is `memframe.synth.synthesize` with the sample's capsule count and seed, with
its session projection folded, compacted and vacuumed so it is a few small files. Run from the repository root:

    python scripts/make_sample_store.py [--out data/sample-store]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from memframe import synth

REPO = Path(__file__).resolve().parent.parent


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
        store = synth.synthesize(staging, capsules=capsules, seed=seed)
        store.memory.run_cycle()  # the session projection, so `memframe sessions` has rows
        store.compact()
        store.vacuum(retention_hours=0, allow_short_retention=True)
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(out))
    return out


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
